"""Markdown view of a diff, sized for a pull-request comment."""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.diff.compare import DURATION_METRICS, DiffResult, TableDiff
from traceinsight.render.diff_findings import render_markdown as findings_markdown
from traceinsight.render.diff_terminal import VERDICT_TEXT, change_pct, short, signed_ns
from traceinsight.render.units import ns, size

VERDICT_ICON = {"faster": "🟢", "slower": "🔴", "no_significant_change": "⚪"}


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[str]], align: list[str] | None = None) -> list[str]:
    align = align or ["---"] * len(header)
    out = ["| " + " | ".join(_cell(h) for h in header) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return [*out, ""]


def _delta_section(title: str, diff: TableDiff, key: str, b: str, a: str) -> list[str]:
    if not diff.available:
        return [f"**{title}**: not available ({diff.reason})", ""]
    rows = [
        [str(r[key]), ns(r["before_ns_per_step"]), ns(r["after_ns_per_step"]), signed_ns(r["delta_ns_per_step"])]
        for r in diff.table.iter_rows(named=True)
    ]
    basis = f"per step, {diff.basis}" if diff.basis else "per step"
    return [f"**{title}** ({basis})", "", *_table([key, b, a, "Δ"], rows, ["---", "---:", "---:", "---:"])]


def _contrib_section(title: str, frame: pl.DataFrame, keys: list[str], b: str, a: str, top: int) -> list[str]:
    if frame.height == 0:
        return []
    rows = []
    for r in frame.head(top).iter_rows(named=True):
        status = {"added": " (new)", "removed": " (gone)"}.get(r["status"], "")
        rows.append(
            [f"`{short(str(r[keys[0]]), 60)}`{status}"]
            + [str(r[k] or "") for k in keys[1:]]
            + [
                ns(r["before_ns_per_step"]),
                ns(r["after_ns_per_step"]),
                signed_ns(r["delta_ns_per_step"]),
                f"{r['before_calls_per_step']:.0f} → {r['after_calls_per_step']:.0f}",
            ]
        )
    header = [*keys, b, a, "Δ /step", "kernels /step"]
    align = ["---"] * len(keys) + ["---:"] * 4
    return [f"**{title}**", "", *_table(header, rows, align)]


def render_markdown(result: DiffResult, *, top: int = 8) -> str:
    b, a = result.before_label, result.after_label
    st = result.step_time
    lines = [f"### {VERDICT_ICON[result.verdict]} traceinsight diff: `{b}` → `{a}`: {VERDICT_TEXT[result.verdict].lower()}", ""]
    if st.available:
        lines += _table(
            ["step time", b, a, "change"],
            [
                [
                    "total of kept steps",
                    ns(st.before_total_ns),
                    ns(st.after_total_ns),
                    change_pct(
                        st.after_total_ns / st.before_total_ns
                        if st.before_total_ns and st.after_total_ns is not None
                        else None
                    ),
                ],
                [f"mean{' (verdict)' if st.statistic == 'mean' else ''}", ns(st.before_mean_ns), ns(st.after_mean_ns), change_pct(st.ratio if st.statistic == "mean" else None)],
                [
                    "median",
                    ns(st.before_median_ns),
                    ns(st.after_median_ns),
                    change_pct(st.after_median_ns / st.before_median_ns if st.before_median_ns and st.after_median_ns is not None else None),
                ],
                [
                    "p90",
                    ns(st.before_p90_ns),
                    ns(st.after_p90_ns),
                    change_pct(st.after_p90_ns / st.before_p90_ns if st.before_p90_ns and st.after_p90_ns is not None else None),
                ],
                ["steps kept", str(st.n_before), str(st.n_after), ""],
                ["outliers kept (flagged)", str(st.outliers_before), str(st.outliers_after), ""],
            ],
            ["---", "---:", "---:", "---:"],
        )
        lines += [f"_{st.verdict_reason}_", ""]
    else:
        lines += [f"Step times not available: {st.reason}", ""]
    kc = result.kernel_counts
    unit = "step" if result.per == "step" else "trace"
    lines += [
        f"Kernels per {unit}: {kc.get('before_kernels_per_step', 0):.0f} → {kc.get('after_kernels_per_step', 0):.0f}; "
        f"GPU time per {unit}: {ns(kc.get('before_gpu_ns_per_step'))} → {ns(kc.get('after_gpu_ns_per_step'))} "
        f"({signed_ns(result.gpu_delta_ns_per_step)}).",
        "",
    ]
    for note in result.notes:
        lines += [f"> ⚠️ {note}", ""]
    lines += _delta_section("Device time by category", result.breakdown, "category", b, a)
    lines += _delta_section("Idle time by cause", result.idle_by_cause, "cause", b, a)
    lines += findings_markdown(result.findings, b, a)
    details = []
    details += _contrib_section("Kernels that explain the delta", result.kernels, ["name", "family"], b, a, top)
    details += _contrib_section("Ops that explain the delta", result.ops, ["op", "input_dims"], b, a, top)
    details += _contrib_section("Regions", result.regions, ["region"], b, a, top)
    if result.bound.available:
        changed = result.bound.table.filter(pl.col("changed"))
        if changed.height:
            details += ["**Bound label changes**", "", *_table(["region", b, a], [[short(r["region"], 60), r["before_label"] or "-", r["after_label"] or "-"] for r in changed.iter_rows(named=True)])]
    if result.memory.available:
        details += ["**Peak memory**", "", *_table(["", b, a, "Δ"], [[r["metric"], size(r["before"]), size(r["after"]), ("+" if r["delta"] > 0 else "−" if r["delta"] < 0 else "") + size(abs(r["delta"]))] for r in result.memory.table.iter_rows(named=True)], ["---", "---:", "---:", "---:"])]
    comp = result.compile
    if comp.available:
        rows = [
            [r["metric"], _num(r["key"], r["before"]), _num(r["key"], r["after"])]
            for r in comp.metrics.iter_rows(named=True)
            if r["before"] is not None or r["after"] is not None
        ]
        details += [f"**torch.compile** (compiled: {comp.compiled_side})", "", *_table(["", b, a], rows, ["---", "---:", "---:"])]
        if comp.region_speedups.height:
            details += [
                f"- region `{short(r['region'], 60)}`: GPU time speedup {r['speedup']:.2f}×"
                for r in comp.region_speedups.iter_rows(named=True)
                if r["speedup"] is not None
            ]
        details += [f"- {line.strip()}" for line in comp.findings] + ([""] if comp.findings else [])
    if details:
        lines += ["<details><summary>What changed</summary>", "", *details, "</details>", ""]
    return "\n".join(lines)


def _num(key: str, value: float | None) -> str:
    if value is None:
        return "-"
    if key in DURATION_METRICS:
        return ns(value)
    if key == "triton_share":
        return f"{100 * value:.1f} %"
    return f"{value:,.1f}" if value != int(value) else f"{int(value):,}"
