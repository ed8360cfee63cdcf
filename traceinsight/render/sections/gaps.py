"""Terminal view of the idle gaps: idle time by cause, top culprits, sizes, largest gaps."""

from __future__ import annotations

import polars as pl
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.gaps import GapsResult
from traceinsight.render.units import ns, pct


def gaps_table(gaps: pl.DataFrame, *, title: str, origin_ns: int = 0) -> Table:
    """A table of gap rows (columns of ``gaps.GAP_SCHEMA``); start shown relative to origin."""
    table = Table(box=None, pad_edge=False, title=title, title_justify="left")
    for col in ("GPU", "start", "duration", "step", "cause", "culprit"):
        table.add_column(col, justify="left" if col in ("cause", "culprit") else "right")
    for row in gaps.iter_rows(named=True):
        table.add_row(
            str(row["device"]),
            ns(row["start_ns"] - origin_ns),
            ns(row["dur_ns"]),
            "-" if row["step"] is None else str(row["step"]),
            row["cause"],
            row["culprit"] or "-",
        )
    return table


def render_terminal(result: GapsResult, *, include_top: bool = True) -> RenderableType:
    head = Text(
        f"{result.gap_count:,} gaps ≥ {ns(result.threshold_ns)}: {ns(result.gap_idle_ns)} "
        f"of {ns(result.idle_ns)} idle in a {ns(result.window_ns)} window"
    )
    if result.gap_count == 0:
        return Group(head, Text("no idle gap reaches the threshold", style="green"))
    causes = Table(box=None, pad_edge=False, title="idle time by cause", title_justify="left")
    for col in ("cause", "idle", "share", "gaps"):
        causes.add_column(col, justify="left" if col == "cause" else "right")
    for row in result.by_cause.iter_rows(named=True):
        causes.add_row(row["cause"], ns(row["idle_ns"]), pct(100 * row["share"]), f"{row['gaps']:,}")
    culprits = Table(box=None, pad_edge=False, title="top culprits (host op running during the gap)", title_justify="left")
    for col in ("culprit", "idle", "share", "gaps", "cause"):
        culprits.add_column(col, justify="left" if col in ("culprit", "cause") else "right")
    for row in result.culprits.iter_rows(named=True):
        culprits.add_row(row["culprit"], ns(row["idle_ns"]), pct(100 * row["share"]), f"{row['gaps']:,}", row["cause"])
    hist = Table(box=None, pad_edge=False, title="gap sizes", title_justify="left")
    for col in ("size", "gaps", "idle"):
        hist.add_column(col, justify="right")
    for row in result.histogram.iter_rows(named=True):
        hist.add_row(f"{ns(row['lo_ns'])} – {ns(row['hi_ns'])}", f"{row['gaps']:,}", ns(row["idle_ns"]))
    if not include_top:
        return Group(head, causes, culprits, hist)
    top = gaps_table(result.top, title=f"largest {result.top.height} gaps (start from window start)", origin_ns=result.window_start_ns)
    return Group(head, causes, culprits, hist, top)
