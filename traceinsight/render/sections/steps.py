"""Terminal view of the steps: per-step host/device time and parts, stats, outliers, warm-up."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.text import Text

from traceinsight.analysis.sections.steps import OTHER, PARTS, StepsResult
from traceinsight.render import views
from traceinsight.render.fit import Cell, Col, FitTable
from traceinsight.render.html.figures import steps_figures
from traceinsight.render.units import ns, pct
from traceinsight.trace.iterations import describe

_SHORT = {"communication": "comm", "dataloader": "data", "cpu_exec": "cpu"}


def render_terminal(result: StepsResult) -> RenderableType:
    part_names = [_SHORT.get(part, part) for part in (*PARTS, OTHER)]
    columns = [Col("step"), Col("host"), Col("device"), *(Col(p) for p in part_names), Col("", "label", optional=True)]
    rows: list[Sequence[Cell]] = []
    for row in result.steps.iter_rows(named=True):
        dev = row["device_dur_ns"] or 0
        cells = [pct(100 * row[f"{p}_ns"] / dev, 0) if dev else "-" for p in (*PARTS, OTHER)]
        flag = "prefill" if row["step"] in result.prefill_steps else ("warm-up" if row["is_warmup"] else ("outlier" if row["is_outlier"] else ""))
        rows.append((str(row["step"]), ns(row["host_dur_ns"]), ns(dev), *cells, Text(flag, style="yellow")))
    table = FitTable(columns, rows)
    stat_columns = [Col("metric", "label"), *(Col(c) for c in ("steps", "mean", "median", "p90", "min", "max", "CV"))]
    stat_rows = [
        (
            row["metric"].removesuffix("_ns").replace("_ns_", " ").replace("_", " "),
            str(row["steps"]),
            ns(row["mean_ns"]),
            ns(row["median_ns"]),
            ns(row["p90_ns"]),
            ns(row["min_ns"]),
            ns(row["max_ns"]),
            f"{row['cv']:.3f}",
        )
        for row in result.stats.iter_rows(named=True)
    ]
    stats = FitTable(stat_columns, stat_rows, title="over steps")
    notes: list[RenderableType] = []
    if result.source is not None and result.source != "ProfilerStep":
        notes.append(Text(describe(result.source, result.steps.height, result.prefill_steps)))
    if result.prefill_steps:
        notes.append(
            Text(f"prefill {', '.join(map(str, result.prefill_steps))} left out of the statistics (decode iterations only)", style="yellow")
        )
    if result.warmup_step is not None:
        notes.append(Text(f"step {result.warmup_step} is a warm-up step (markedly slower than the rest)", style="yellow"))
    if result.outlier_steps:
        notes.append(Text(f"outlier steps: {', '.join(map(str, result.outlier_steps))}", style="yellow"))
    return Group(Text("device step = from step start to the end of its last GPU work or host code; parts are shares of it"), table, stats, *notes)


views.register(StepsResult, terminal=render_terminal, figures=steps_figures)
