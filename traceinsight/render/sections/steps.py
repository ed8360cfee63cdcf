"""Terminal view of the steps: per-step host/device time and parts, stats, outliers, warm-up."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.steps import OTHER, PARTS, StepsResult
from traceinsight.render.units import ns, pct

_SHORT = {"communication": "comm", "dataloader": "data", "cpu_exec": "cpu"}


def render_terminal(result: StepsResult) -> RenderableType:
    table = Table(box=None, pad_edge=False)
    table.add_column("step", justify="right")
    table.add_column("host", justify="right", no_wrap=True)
    table.add_column("device", justify="right", no_wrap=True)
    for part in (*PARTS, OTHER):
        table.add_column(_SHORT.get(part, part), justify="right", no_wrap=True)
    table.add_column("")
    for row in result.steps.iter_rows(named=True):
        dev = row["device_dur_ns"] or 0
        cells = [pct(100 * row[f"{p}_ns"] / dev, 0) if dev else "-" for p in (*PARTS, OTHER)]
        flag = "warm-up" if row["is_warmup"] else ("outlier" if row["is_outlier"] else "")
        table.add_row(str(row["step"]), ns(row["host_dur_ns"]), ns(dev), *cells, Text(flag, style="yellow"))
    stats = Table(box=None, pad_edge=False, title="over steps", title_justify="left")
    for col in ("metric", "steps", "mean", "median", "p90", "min", "max", "CV"):
        stats.add_column(col, justify="left" if col == "metric" else "right")
    for row in result.stats.iter_rows(named=True):
        stats.add_row(
            row["metric"].removesuffix("_ns").replace("_ns_", " ").replace("_", " "),
            str(row["steps"]),
            ns(row["mean_ns"]),
            ns(row["median_ns"]),
            ns(row["p90_ns"]),
            ns(row["min_ns"]),
            ns(row["max_ns"]),
            f"{row['cv']:.3f}",
        )
    notes: list[RenderableType] = []
    if result.warmup_step is not None:
        notes.append(Text(f"step {result.warmup_step} is a warm-up step (markedly slower than the rest)", style="yellow"))
    if result.outlier_steps:
        notes.append(Text(f"outlier steps: {', '.join(map(str, result.outlier_steps))}", style="yellow"))
    return Group(Text("device step = from step start to the end of its last GPU work; parts are shares of it"), table, stats, *notes)
