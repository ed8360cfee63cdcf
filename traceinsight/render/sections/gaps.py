"""Terminal view of the idle gaps: idle time by cause, top culprits, sizes, largest gaps."""

from __future__ import annotations

import polars as pl
from rich.console import Group, RenderableType
from rich.text import Text

from traceinsight.analysis.sections.gaps import GapsResult
from traceinsight.render import views
from traceinsight.render.fit import Col, FitTable
from traceinsight.render.units import ns, pct, times_apart


def gaps_table(gaps: pl.DataFrame, *, title: str, origin_ns: int = 0) -> FitTable:
    """A table of gap rows (columns of ``gaps.GAP_SCHEMA``); start shown relative to origin."""
    columns = [Col("GPU"), Col("start"), Col("duration"), Col("step"), Col("cause", "label"), Col("culprit", "name")]
    starts = times_apart([int(v) - origin_ns for v in gaps["start_ns"].to_list()])
    rows = [
        (
            str(row["device"]),
            start,
            ns(row["dur_ns"]),
            "-" if row["step"] is None else str(row["step"]),
            row["cause"],
            row["culprit"] or "-",
        )
        for row, start in zip(gaps.iter_rows(named=True), starts, strict=True)
    ]
    return FitTable(columns, rows, title=title)


def render_terminal(result: GapsResult, *, include_top: bool = True) -> RenderableType:
    head = Text(
        f"{result.gap_count:,} gaps ≥ {ns(result.threshold_ns)}: {ns(result.gap_idle_ns)} "
        f"of {ns(result.idle_ns)} idle in a {ns(result.window_ns)} window"
    )
    if result.gap_count == 0:
        return Group(head, Text("no idle gap reaches the threshold", style="green"))
    causes = FitTable(
        [Col("cause", "label"), Col("idle"), Col("share"), Col("gaps")],
        [
            (row["cause"], ns(row["idle_ns"]), pct(100 * row["share"]), f"{row['gaps']:,}")
            for row in result.by_cause.iter_rows(named=True)
        ],
        title="idle time by cause",
    )
    culprits = FitTable(
        [Col("culprit", "name"), Col("idle"), Col("share"), Col("gaps"), Col("cause", "label")],
        [
            (row["culprit"], ns(row["idle_ns"]), pct(100 * row["share"]), f"{row['gaps']:,}", row["cause"])
            for row in result.culprits.iter_rows(named=True)
        ],
        title="top culprits (host op running during the gap)",
    )
    hist = FitTable(
        [Col("size"), Col("gaps"), Col("idle")],
        [
            (f"{ns(row['lo_ns'])} – {ns(row['hi_ns'])}", f"{row['gaps']:,}", ns(row["idle_ns"]))
            for row in result.histogram.iter_rows(named=True)
        ],
        title="gap sizes",
    )
    if not include_top:
        return Group(head, causes, culprits, hist)
    top = gaps_table(result.top, title=f"largest {result.top.height} gaps (start from window start)", origin_ns=result.window_start_ns)
    return Group(head, causes, culprits, hist, top)


views.register(GapsResult, terminal=render_terminal)
