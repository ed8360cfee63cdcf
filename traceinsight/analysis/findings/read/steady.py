"""Findings over steady state: the gaps and idle time of a window without its one-time spans.

The window assessment names host spans that are not steady state (start-up, graph capture,
replays whose kernels are missing). Device idle inside them says nothing about what a fix to
the steady state would save, so the detectors read the gaps outside them, and the shares are
of the window without them.
"""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.timeline import busy_intervals, gpu_work
from traceinsight.analysis.sections.gaps import GapsResult, summarise
from traceinsight.trace.model import Trace


def excluded_idle_ns(trace: Trace, excluded: pl.DataFrame, devices: list[int]) -> int:
    """Device idle time inside the excluded spans, over every device."""
    if excluded.height == 0 or not devices:
        return 0
    spans = excluded.select("start_ns", "end_ns").join(pl.DataFrame({"device": devices}, schema={"device": pl.Int64}), how="cross")
    idle = intervals.difference(spans, busy_intervals(trace), by=["device"])
    return int((idle["end_ns"] - idle["start_ns"]).sum() or 0)


def excluded_busy_ns(trace: Trace, excluded: pl.DataFrame) -> dict[str, int]:
    """GPU time per breakdown category inside the excluded spans (autotuning and warm-up
    kernels of start-up): one-time, so no fix's to give back either."""
    if excluded.height == 0:
        return {}
    work = gpu_work(trace)
    if work.height == 0:
        return {}
    hit = work.join_where(
        excluded.select(pl.col("start_ns").alias("_xs"), pl.col("end_ns").alias("_xe")),
        pl.col("start_ns") < pl.col("_xe"),
        pl.col("end_ns") > pl.col("_xs"),
    ).with_columns(
        (pl.min_horizontal("end_ns", "_xe") - pl.max_horizontal("start_ns", "_xs")).alias("_ns")
    )
    totals = hit.group_by("category").agg(pl.col("_ns").sum())
    return {str(r["category"]): int(r["_ns"]) for r in totals.iter_rows(named=True)}


def steady_gaps(gaps: GapsResult, excluded: pl.DataFrame, excluded_idle: int, top_n: int) -> GapsResult:
    """``gaps`` without the gaps that overlap an excluded span (a long gap that runs into
    start-up is left out whole: its steady-state part cannot be told apart)."""
    if excluded.height == 0:
        return gaps
    frame = gaps.gaps.with_row_index("_row")
    hit = frame.join_where(
        excluded.select(pl.col("start_ns").alias("_xs"), pl.col("end_ns").alias("_xe")),
        pl.col("start_ns") < pl.col("_xe"),
        pl.col("end_ns") > pl.col("_xs"),
    ).select("_row")
    kept = frame.join(hit.unique(), on="_row", how="anti").drop("_row")
    return summarise(
        kept,
        gaps.threshold_ns,
        top_n,
        devices=gaps.devices,
        idle_ns=max(gaps.idle_ns - excluded_idle, 0),
        window=(gaps.window_start_ns, gaps.window_end_ns),
    )
