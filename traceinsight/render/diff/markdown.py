"""Markdown view of a diff, sized for a pull-request comment."""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.diff.compare import DiffResult, TableDiff
from traceinsight.render.diff.findings import render_markdown as findings_markdown
from traceinsight.render.diff.view import (
    bound_changes,
    change_pct,
    compile_rows,
    contrib_rows,
    delta_rows,
    headline,
    kernel_counts,
    memory_rows,
    ratio_of,
    region_speedups,
    short,
    step_stats,
)
from traceinsight.render.fit import shorten_distinct
from traceinsight.render.units import ns

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
    rows = [list(row.cells) for row in delta_rows(diff, key)]
    basis = f"per step, {diff.basis}" if diff.basis else "per step"
    return [f"**{title}** ({basis})", "", *_table([key, b, a, "Δ"], rows, ["---", "---:", "---:", "---:"])]


def _contrib_section(title: str, frame: pl.DataFrame, keys: list[str], b: str, a: str, top: int) -> list[str]:
    if frame.height == 0:
        return []
    listed = contrib_rows(frame.head(top), keys)
    names = shorten_distinct([r.names[0] for r in listed], 60)
    rows = [
        [f"`{name}`{f' ({r.status})' if r.status else ''}", *r.names[1:], r.before, r.after, r.delta_text, r.calls]
        for name, r in zip(names, listed, strict=True)
    ]
    header = [*keys, b, a, "Δ /step", "kernels /step"]
    align = ["---"] * len(keys) + ["---:"] * 4
    return [f"**{title}**", "", *_table(header, rows, align)]


def render_markdown(result: DiffResult, *, top: int = 8) -> str:
    b, a = result.before_label, result.after_label
    st = result.step_time
    head = headline(result)
    lines = [f"### {VERDICT_ICON[result.verdict]} traceinsight diff: `{b}` → `{a}`: {head.word}", ""]
    if head.change:
        lines += [f"**{head.change.split(': ', 1)[-1]}**" + (f" ({head.why})" if head.why else "") + ".", ""]
    if st.available:
        stats = {label: (bv, av) for label, bv, av in step_stats(st)}
        rows = []
        for label, (bv, av) in stats.items():
            # The verdict's own ratio for its statistic (the mean); the others from the kept steps.
            ratio = (st.ratio if st.statistic == "mean" else None) if label == "mean" else ratio_of(bv, av)
            shown = f"mean{' (verdict)' if st.statistic == 'mean' else ''}" if label == "mean" else label
            rows.append([shown, ns(bv), ns(av), change_pct(ratio)])
        rows += [["steps kept", str(st.n_before), str(st.n_after), ""], ["outliers kept (flagged)", str(st.outliers_before), str(st.outliers_after), ""]]
        lines += _table(["step time", b, a, "change"], rows, ["---", "---:", "---:", "---:"])
        lines += [f"_{head.reason}_", ""] if head.reason else []
    else:
        lines += [f"Step times not available: {st.reason}", ""]
    kc = kernel_counts(result)
    lines += [
        f"Kernels per {kc.unit}: {kc.kernels}; GPU time per {kc.unit}: {kc.gpu_before} → {kc.gpu_after} ({kc.gpu_delta}).",
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
        changed = bound_changes(result.bound)
        if changed:
            details += ["**Bound label changes**", "", *_table(["region", b, a], [[short(region, 60), before, after] for region, before, after in changed])]
    if result.memory.available:
        details += ["**Peak memory**", "", *_table(["", b, a, "Δ"], [list(row.cells) for row in memory_rows(result.memory)], ["---", "---:", "---:", "---:"])]
    comp = result.compile
    if comp.available:
        details += [f"**torch.compile** (compiled: {comp.compiled_side})", "", *_table(["", b, a], [list(r) for r in compile_rows(comp)], ["---", "---:", "---:"])]
        details += [f"- region `{short(region, 60)}`: GPU time speedup {speedup:.2f}×" for region, speedup in region_speedups(comp)]
        details += [f"- {line.strip()}" for line in comp.findings] + ([""] if comp.findings else [])
    if details:
        lines += ["<details><summary>What changed</summary>", "", *details, "</details>", ""]
    return "\n".join(lines)
