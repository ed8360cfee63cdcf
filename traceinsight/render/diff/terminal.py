"""Terminal view of a diff: verdict first, then where the time moved. Green is faster, red slower."""

from __future__ import annotations

import polars as pl
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.diff.compare import DiffResult, StepTimeDiff, TableDiff
from traceinsight.render.diff.findings import render_terminal as findings_terminal
from traceinsight.render.diff.view import (
    bound_changes,
    change_pct,
    compile_rows,
    contrib_rows,
    delta_rows,
    headline,
    kernel_counts,
    memory_rows,
    region_speedups,
    regions_in_both,
    short,
    step_rows,
)

VERDICT_STYLE = {"faster": "bold green", "slower": "bold red", "no_significant_change": "bold yellow"}
def delta_style(delta: float | None, *, lower_is_better: bool = True) -> str:
    if delta is None or delta == 0:
        return ""
    better = delta < 0 if lower_is_better else delta > 0
    return "green" if better else "red"


def _verdict_line(result: DiffResult) -> Text:
    st = result.step_time
    head = headline(result)
    text = Text()
    text.append(head.word, style=VERDICT_STYLE[result.verdict])
    if head.change:
        text.append(": " + head.change.removesuffix(change_pct(st.ratio)))
        text.append(change_pct(st.ratio), style=delta_style((st.ratio or 1.0) - 1.0) if result.verdict != "no_significant_change" else "")
    if head.why:
        text.append(f" ({head.why})", style="yellow")
    text.append(f"\n{head.reason}" if head.reason else "", style="dim")
    return text


def _step_table(st: StepTimeDiff, b: str, a: str) -> RenderableType:
    if not st.available:
        return Text(f"step times: not available ({st.reason})", style="yellow")
    table = Table(title=f"step time ({st.metric.replace('_dur_ns', '')})", box=None, title_justify="left")
    table.add_column("")
    table.add_column(b, justify="right")
    table.add_column(a, justify="right")
    table.add_column("change", justify="right")
    for row in step_rows(st):
        *cells, change = row.cells
        table.add_row(*cells, Text(change, style=delta_style(row.delta)) if row.delta is not None else change)
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
    for row in delta_rows(diff, key):
        name, before, after, change = row.cells
        # More compute per step is not "worse" in itself; idle and copies are.
        lower_better = idle_better_lower if name != "compute" else True
        table.add_row(name, before, after, Text(change, style=delta_style(row.delta, lower_is_better=lower_better)))
    return table


def _contrib_table(title: str, frame: pl.DataFrame, keys: list[str], b: str, a: str) -> RenderableType:
    if frame.height == 0:
        return Text(f"{title}: nothing to compare", style="dim")
    from traceinsight.render.fit import Cell, Col, FitTable
    from traceinsight.render.labels import kernel_label

    columns = [Col(k, "label" if k == "family" else "name", max_width=None if i == 0 else 32) for i, k in enumerate(keys)]
    columns += [Col(f"{b} /step"), Col(f"{a} /step"), Col("Δ /step"), Col("kernels /step"), Col("", "label")]
    rows: list[tuple[Cell, ...]] = []
    listed = contrib_rows(frame, keys)
    labels = [kernel_label(r.names[0]) if keys[0] == "name" else r.names[0] for r in listed]
    # Two kernels that differ only in their argument lists keep them: their labels would match.
    clash = {label for label in labels if labels.count(label) > 1}
    for row, label in zip(listed, labels, strict=True):
        names = list(row.names)
        names[0] = names[0].removeprefix("void ") if label in clash else label
        rows.append((*names, row.before, row.after, Text(row.delta_text, style=delta_style(row.delta)), row.calls, row.status))
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
    for metric, before, after in compile_rows(comp):
        table.add_row(metric, before, after)
    parts.append(table)
    for region, speedup in region_speedups(comp):
        parts.append(Text(f"region {short(region, 60)}: GPU time speedup {speedup:.2f}×"))
    for line in comp.findings:
        parts.append(Text(line))
    return Group(*parts)


def _memory_part(result: DiffResult) -> RenderableType:
    mem = result.memory
    if not mem.available:
        return Text(f"peak memory: not available ({mem.reason})", style="yellow")
    table = Table(title="peak memory", box=None, title_justify="left")
    table.add_column("")
    table.add_column(result.before_label, justify="right")
    table.add_column(result.after_label, justify="right")
    table.add_column("Δ", justify="right")
    for row in memory_rows(mem):
        metric, before, after, change = row.cells
        table.add_row(metric, before, after, Text(change, style=delta_style(row.delta)))
    return table


def _bound_part(result: DiffResult) -> RenderableType:
    bound = result.bound
    if not bound.available:
        return Text(f"bound labels: not available ({bound.reason})", style="yellow")
    changed = bound_changes(bound)
    if not changed:
        return Text(f"bound labels: unchanged for the {regions_in_both(bound)} region(s) found in both runs")
    table = Table(title="bound label changes", box=None, title_justify="left")
    table.add_column("region")
    table.add_column(result.before_label)
    table.add_column(result.after_label)
    for region, before, after in changed:
        table.add_row(short(region), before, after)
    return table


def render_terminal(result: DiffResult) -> RenderableType:
    b, a = result.before_label, result.after_label
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    head.add_row("before", f"{b}  ({result.before_path}; {result.before_device or 'no GPU'})")
    head.add_row("after", f"{a}  ({result.after_path}; {result.after_device or 'no GPU'})")
    kc = kernel_counts(result)
    head.add_row(f"kernels /{kc.unit}", kc.kernels)
    head.add_row(f"GPU time /{kc.unit}", f"{kc.gpu_before} → {kc.gpu_after} ({kc.gpu_delta})")
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
