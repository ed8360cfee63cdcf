"""Terminal view of a diff: verdict first, then where the time moved. Green is faster, red slower."""

from __future__ import annotations

from typing import Any

import polars as pl
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.diff.compare import DURATION_METRICS, DiffResult, StepTimeDiff, TableDiff
from traceinsight.render.diff_findings import render_terminal as findings_terminal
from traceinsight.render.units import ns, size

VERDICT_STYLE = {"faster": "bold green", "slower": "bold red", "no_significant_change": "bold yellow"}
VERDICT_TEXT = {"faster": "FASTER", "slower": "SLOWER", "no_significant_change": "NO SIGNIFICANT CHANGE"}


def signed_ns(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0"
    return ("+" if value > 0 else "−") + ns(abs(value))


def change_pct(ratio: float | None) -> str:
    if ratio is None:
        return "-"
    pct = (ratio - 1.0) * 100.0
    return f"{'+' if pct >= 0 else '−'}{abs(pct):.1f} %"


def delta_style(delta: float | None, *, lower_is_better: bool = True) -> str:
    if delta is None or delta == 0:
        return ""
    better = delta < 0 if lower_is_better else delta > 0
    return "green" if better else "red"


def short(name: str, width: int = 70) -> str:
    from traceinsight.render.fit import shorten_middle

    return shorten_middle(name, width)


def _verdict_line(result: DiffResult) -> Text:
    st = result.step_time
    text = Text()
    text.append(VERDICT_TEXT[result.verdict], style=VERDICT_STYLE[result.verdict])
    if st.ratio is not None:
        text.append(f"  {result.after_label} vs {result.before_label}: {st.statistic} step ")
        text.append(change_pct(st.ratio), style=delta_style(st.ratio - 1.0) if result.verdict != "no_significant_change" else "")
    text.append(f"\n{st.verdict_reason}" if st.verdict_reason else "", style="dim")
    return text


def _step_table(st: StepTimeDiff, b: str, a: str) -> RenderableType:
    if not st.available:
        return Text(f"step times: not available ({st.reason})", style="yellow")
    table = Table(title=f"step time ({st.metric.replace('_dur_ns', '')})", box=None, title_justify="left")
    table.add_column("")
    table.add_column(b, justify="right")
    table.add_column(a, justify="right")
    table.add_column("change", justify="right")
    table.add_row("steps kept", str(st.n_before), str(st.n_after), "")
    table.add_row("dropped (warm-up/outliers)", str(st.dropped_before), str(st.dropped_after), "")
    table.add_row("outliers kept (flagged)", str(st.outliers_before), str(st.outliers_after), "")
    for label, bv, av in (
        ("total of kept steps", st.before_total_ns, st.after_total_ns),
        ("mean", st.before_mean_ns, st.after_mean_ns),
        ("median", st.before_median_ns, st.after_median_ns),
        ("p90", st.before_p90_ns, st.after_p90_ns),
    ):
        ratio = av / bv if bv and av is not None else None
        table.add_row(label, ns(bv), ns(av), Text(change_pct(ratio), style=delta_style(None if ratio is None else ratio - 1)))
    if st.ci_low is not None and st.ci_high is not None:
        table.add_row(
            f"{st.confidence:.0%} CI of {st.statistic} ratio", "", "", f"[{st.ci_low:.3f}, {st.ci_high:.3f}]"
        )
    if st.p_value is not None:
        table.add_row(st.test or "rank test", "", "", f"p = {st.p_value:.3g}")
    return table


def _delta_table(title: str, diff: TableDiff, key: str, b: str, a: str, *, idle_better_lower: bool = True) -> RenderableType:
    if not diff.available:
        return Text(f"{title}: not available ({diff.reason})", style="yellow")
    basis = f" — per step, {diff.basis}" if diff.basis else ""
    table = Table(title=title + basis, box=None, title_justify="left")
    table.add_column(key)
    table.add_column(f"{b} /step", justify="right")
    table.add_column(f"{a} /step", justify="right")
    table.add_column("Δ /step", justify="right")
    for row in diff.table.iter_rows(named=True):
        delta = row["delta_ns_per_step"]
        # More compute per step is not "worse" in itself; idle and copies are.
        lower_better = idle_better_lower if row[key] != "compute" else True
        table.add_row(
            str(row[key]),
            ns(row["before_ns_per_step"]),
            ns(row["after_ns_per_step"]),
            Text(signed_ns(delta), style=delta_style(delta, lower_is_better=lower_better)),
        )
    return table


def _contrib_table(title: str, frame: pl.DataFrame, keys: list[str], b: str, a: str) -> RenderableType:
    if frame.height == 0:
        return Text(f"{title}: nothing to compare", style="dim")
    from traceinsight.render.fit import Cell, Col, FitTable
    from traceinsight.render.sections.kernels import kernel_label

    columns = [Col(k, "label" if k == "family" else "name", max_width=None if i == 0 else 32) for i, k in enumerate(keys)]
    columns += [Col(f"{b} /step"), Col(f"{a} /step"), Col("Δ /step"), Col("kernels /step"), Col("", "label")]
    rows: list[tuple[Cell, ...]] = []
    for row in frame.iter_rows(named=True):
        delta = row["delta_ns_per_step"]
        calls = f"{row['before_calls_per_step']:.0f} → {row['after_calls_per_step']:.0f}"
        status = {"added": "new", "removed": "gone"}.get(row["status"], "")
        names = [str(row[k] or "") for k in keys]
        names[0] = kernel_label(names[0]) if keys[0] == "name" else names[0]
        rows.append((
            *names,
            ns(row["before_ns_per_step"]),
            ns(row["after_ns_per_step"]),
            Text(signed_ns(delta), style=delta_style(delta)),
            calls,
            status,
        ))
    return FitTable(columns, rows, title=title)


def _compile_part(result: DiffResult) -> RenderableType | None:
    comp = result.compile
    if not comp.available:
        return None
    parts: list[RenderableType] = []
    table = Table(title=f"torch.compile (compiled: {comp.compiled_side})", box=None, title_justify="left")
    table.add_column("", no_wrap=True)
    table.add_column(result.before_label, justify="right", no_wrap=True)
    table.add_column(result.after_label, justify="right", no_wrap=True)
    for row in comp.metrics.iter_rows(named=True):
        if row["before"] is None and row["after"] is None:
            continue
        table.add_row(row["metric"], _metric(row["key"], row["before"]), _metric(row["key"], row["after"]))
    parts.append(table)
    for row in comp.region_speedups.iter_rows(named=True) if comp.region_speedups.height else ():
        if row["speedup"] is not None:
            parts.append(Text(f"region {short(row['region'], 60)}: GPU time speedup {row['speedup']:.2f}×"))
    for line in comp.findings:
        parts.append(Text(line))
    return Group(*parts)


def _metric(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key in DURATION_METRICS:
        return ns(value)
    if key == "triton_share":
        return f"{100 * value:.1f} %"
    return f"{value:,.1f}" if value != int(value) else f"{int(value):,}"


def _memory_part(result: DiffResult) -> RenderableType:
    mem = result.memory
    if not mem.available:
        return Text(f"peak memory: not available ({mem.reason})", style="yellow")
    table = Table(title="peak memory", box=None, title_justify="left")
    table.add_column("")
    table.add_column(result.before_label, justify="right")
    table.add_column(result.after_label, justify="right")
    table.add_column("Δ", justify="right")
    for row in mem.table.iter_rows(named=True):
        delta = row["delta"]
        sign = "+" if delta > 0 else "−" if delta < 0 else ""
        table.add_row(
            row["metric"], size(row["before"]), size(row["after"]),
            Text(f"{sign}{size(abs(delta))}", style=delta_style(delta)),
        )
    return table


def _bound_part(result: DiffResult) -> RenderableType:
    bound = result.bound
    if not bound.available:
        return Text(f"bound labels: not available ({bound.reason})", style="yellow")
    changed = bound.table.filter(pl.col("changed"))
    if changed.height == 0:
        both = bound.table.filter(pl.col("before_label").is_not_null() & pl.col("after_label").is_not_null()).height
        return Text(f"bound labels: unchanged for the {both} region(s) found in both runs")
    table = Table(title="bound label changes", box=None, title_justify="left")
    table.add_column("region")
    table.add_column(result.before_label)
    table.add_column(result.after_label)
    for row in changed.iter_rows(named=True):
        table.add_row(short(row["region"]), row["before_label"] or "-", row["after_label"] or "-")
    return table


def render_terminal(result: DiffResult) -> RenderableType:
    b, a = result.before_label, result.after_label
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    head.add_row("before", f"{b}  ({result.before_path}; {result.before_device or 'no GPU'})")
    head.add_row("after", f"{a}  ({result.after_path}; {result.after_device or 'no GPU'})")
    kc = result.kernel_counts
    unit = "step" if result.per == "step" else "trace"
    head.add_row(
        f"kernels /{unit}",
        f"{kc.get('before_kernels_per_step', 0):.0f} → {kc.get('after_kernels_per_step', 0):.0f}",
    )
    head.add_row(
        f"GPU time /{unit}",
        f"{ns(kc.get('before_gpu_ns_per_step'))} → {ns(kc.get('after_gpu_ns_per_step'))} "
        f"({signed_ns(result.gpu_delta_ns_per_step)})",
    )
    parts: list[RenderableType] = [_verdict_line(result), head]
    for note in result.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    parts.append(_step_table(result.step_time, b, a))
    parts.append(findings_terminal(result.findings, b, a))
    parts.append(_delta_table("device time by category", result.breakdown, "category", b, a))
    parts.append(_delta_table("idle time by cause", result.idle_by_cause, "cause", b, a))
    parts.append(_contrib_table("kernels that explain the delta", result.kernels, ["name", "family"], b, a))
    parts.append(_contrib_table("ops that explain the delta", result.ops, ["op", "input_dims"], b, a))
    parts.append(_contrib_table("regions", result.regions, ["region"], b, a))
    for names, count, where in (
        (result.added_kernels, result.added_kernel_count, f"only in {a}"),
        (result.removed_kernels, result.removed_kernel_count, f"only in {b}"),
    ):
        if names:
            listed = ", ".join(short(n, 48) for n in names[:5])
            more = f" (+{count - 5} more)" if count > 5 else ""
            parts.append(Text(f"kernels {where}: {listed}{more}", style="dim"))
    parts.append(_bound_part(result))
    parts.append(_memory_part(result))
    compile_part = _compile_part(result)
    if compile_part is not None:
        parts.append(compile_part)
    return Panel(Group(*parts), title=f"[bold]diff: {b} → {a}[/bold]", title_align="left", expand=True)
