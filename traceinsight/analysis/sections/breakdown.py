"""Where the device time goes: busy by category (compute, communication, memcpy, memset) and idle.

The analysed window is ``timeline.analysis_window`` (the span of all recorded activity, host
and device), the same for every device. Each instant of a device's window is counted once:
when several streams are busy at the same time, it goes to the highest-priority category
active then (compute > communication > memcpy > memset; memcpy kinds in the order of
``CATEGORIES``), and the instants nothing runs are idle. So the parts of a device sum exactly
to the window. The per-stream view counts each stream on its own (streams are not merged).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from traceinsight.analysis.core.base import NO_INPUTS, AnalysisConfig, AnalysisSpec, Inputs, Result
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.categories import (
    CATEGORIES,
    IDLE,
    PRIORITY,
    category_expr,
    group_of,
    is_communication,
)
from traceinsight.analysis.lib.timeline import analysis_window, busy_intervals, gpu_work
from traceinsight.trace.model import Trace

__all__ = [
    "CATEGORIES",
    "IDLE",
    "PRIORITY",
    "BreakdownResult",
    "busy_intervals",
    "category_expr",
    "gpu_work",
    "group_of",
    "is_communication",
    "run",
]

DEVICE_SCHEMA = {"device": pl.Int64, "category": pl.String, "dur_ns": pl.Int64, "share": pl.Float64}
SUMMARY_SCHEMA = {
    "device": pl.Int64,
    "busy_ns": pl.Int64,
    "busy_share": pl.Float64,
    "active_start_ns": pl.Int64,
    "active_end_ns": pl.Int64,
    "active_ns": pl.Int64,
    "active_busy_share": pl.Float64,
}
STREAM_SCHEMA = {
    "device": pl.Int64,
    "stream": pl.Int64,
    "category": pl.String,
    "dur_ns": pl.Int64,
    "share": pl.Float64,
}


def _by_priority(work: pl.DataFrame, keys: list[str], lo: int, hi: int) -> pl.DataFrame:
    """Busy time per ``keys`` + category, each instant counted once under its top category."""
    present = [c for c in CATEGORIES if c in set(work["category"].unique().to_list())]
    dense = {c: i for i, c in enumerate(present)}
    levelled = intervals.clip(work, lo, hi).with_columns(
        level=pl.col("category").replace_strict(dense, return_dtype=pl.Int64)
    )
    flat = intervals.flatten(levelled, level="level", by=keys)
    return (
        flat.group_by([*keys, "level"])
        .agg((pl.col("end_ns") - pl.col("start_ns")).sum().alias("dur_ns"))
        .with_columns(category=pl.col("level").replace_strict(dict(enumerate(present)), return_dtype=pl.String))
    )


def _with_idle(busy: pl.DataFrame, keys: list[str], window_ns: int) -> pl.DataFrame:
    idle = busy.group_by(keys).agg((window_ns - pl.col("dur_ns").sum()).alias("dur_ns")).with_columns(
        category=pl.lit(IDLE), level=pl.lit(len(CATEGORIES), pl.Int64)
    )
    rank = pl.col("category").replace_strict(PRIORITY, default=len(CATEGORIES), return_dtype=pl.Int64)
    both = pl.concat([busy.select(*keys, "category", "dur_ns"), idle.select(*keys, "category", "dur_ns")])
    share = (pl.col("dur_ns") / window_ns) if window_ns else pl.lit(0.0)
    return (
        both.with_columns(share.cast(pl.Float64).alias("share"), rank.alias("_rank"))
        .sort([*keys, "_rank"])
        .drop("_rank")
    )


def _summary(work: pl.DataFrame, window_ns: int) -> pl.DataFrame:
    """Busy share per device over the window and over its active span (first to last GPU work),
    which leaves out idle time before the first and after the last recorded GPU work."""
    busy = intervals.union(work.select("device", "start_ns", "end_ns"), by=["device"])
    per_device = busy.group_by("device").agg(
        (pl.col("end_ns") - pl.col("start_ns")).sum().alias("busy_ns"),
        pl.col("start_ns").min().alias("active_start_ns"),
        pl.col("end_ns").max().alias("active_end_ns"),
    )
    active = pl.col("active_end_ns") - pl.col("active_start_ns")
    return (
        per_device.with_columns(active.alias("active_ns"))
        .with_columns(
            busy_share=pl.col("busy_ns") / window_ns,
            active_busy_share=pl.when(pl.col("active_ns") > 0).then(pl.col("busy_ns") / pl.col("active_ns")).otherwise(0.0),
        )
        .sort("device")
        .select(list(SUMMARY_SCHEMA))
        .cast(SUMMARY_SCHEMA)  # type: ignore[arg-type]
    )


@dataclass(frozen=True)
class BreakdownResult(Result):
    name = "breakdown"
    window_start_ns: int = 0
    window_end_ns: int = 0
    window_ns: int = 0
    by_device: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=DEVICE_SCHEMA))
    by_stream: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=STREAM_SCHEMA))
    devices: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=SUMMARY_SCHEMA))

    def to_polars(self) -> pl.DataFrame:
        return self.by_device

    def device_total(self, device: int, category: str) -> int:
        rows = self.by_device.filter((pl.col("device") == device) & (pl.col("category") == category))
        return int(rows["dur_ns"].sum()) if rows.height else 0


def run(trace: Trace, config: AnalysisConfig, inputs: Inputs = NO_INPUTS) -> BreakdownResult:
    lo, hi = analysis_window(trace)
    window_ns = max(hi - lo, 0)
    work = gpu_work(trace)
    if work.height == 0 or window_ns == 0:
        reason = "no GPU kernels, memcpys or memsets in this trace" if work.height == 0 else "the trace's window is empty"
        return BreakdownResult(
            available=False, reason=reason, window_start_ns=lo, window_end_ns=hi, window_ns=window_ns
        )
    by_device = _with_idle(_by_priority(work, ["device"], lo, hi), ["device"], window_ns)
    by_stream = _with_idle(_by_priority(work, ["device", "stream"], lo, hi), ["device", "stream"], window_ns)
    return BreakdownResult(
        devices=_summary(work, window_ns),
        by_device=by_device.select(list(DEVICE_SCHEMA)).cast(DEVICE_SCHEMA),  # type: ignore[arg-type]
        by_stream=by_stream.select(list(STREAM_SCHEMA)).cast(STREAM_SCHEMA),  # type: ignore[arg-type]
        window_start_ns=lo,
        window_end_ns=hi,
        window_ns=window_ns,
    )


SPEC = AnalysisSpec(
    name="breakdown",
    title="Device time breakdown",
    run=run,
    description=(
        "Per device and stream: compute, communication, memcpy by direction and memory kind, "
        "memset and idle over the analysed window; overlapping streams counted once, by priority."
    ),
)
