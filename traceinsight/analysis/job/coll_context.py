"""What each collective of one rank sat in: computed where the rank's trace is loaded.

For the cross-rank matching (``matching``) a collective's own times are not enough: when one
rank arrives last, the question is what it was doing before. Per collective, on this rank:

- ``launch_ns``: when the host launched it (the runtime call of an NCCL kernel; the span's
  start for a host collective such as gloo's);
- ``overlap_compute_ns``: compute kernels running on the device during the collective (its
  overlap with compute: what of it is hidden behind work);
- the *lead-in*, from the end of the rank's previous collective (of any process group) to this
  one's start: ``lead_ns`` its length, ``lead_compute_ns`` the compute kernels in it; and on
  the host, from the previous collective's launch to this one's, the host span that covers
  most of that time (``lead_host``, ``lead_host_ns``): a user annotation or a top-level op, on
  any thread (DDP launches its all-reduces from the autograd thread and gloo runs them on its
  own, while the work that delays them is often on the main thread). A rank that arrives late with a long lead-in full of compute was late
  because of its kernels; with the device idle, because its host launched late, doing
  ``lead_host``.
"""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.lib import intervals
from traceinsight.analysis.sections.breakdown import gpu_work
from traceinsight.trace.model import Trace

CONTEXT_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "launch_ns": pl.Int64,
    "overlap_compute_ns": pl.Int64,
    "lead_ns": pl.Int64,
    "lead_compute_ns": pl.Int64,
    "lead_host": pl.String,
    "lead_host_ns": pl.Int64,
}
# Host spans that say nothing about what the host was doing before a launch: the step marker
# and the collective's own call chain.
_NOT_A_CAUSE = r"^(ProfilerStep#|record_param_comms$|c10d::|nccl:|gloo:|mpi:|ucc:|xccl:|DistributedDataParallel\.forward)"


def _host_spans(trace: Trace) -> pl.DataFrame:
    """User annotations and top-level ops (depth ≤ 1) that may explain host time."""
    events = trace.events
    kind = pl.col("kind").cast(pl.String)
    name = pl.col("name").cast(pl.String)
    return events.filter(
        (kind.is_in(["user_annotation", "cpu_op"]))
        & ((kind == "user_annotation") | (pl.col("depth") <= 1))
        & ~name.str.contains(_NOT_A_CAUSE)
        & (pl.col("dur_ns") > 0)
    ).select("tid", "ts_ns", "end_ns", name.alias("name"))


def _lead_host(trace: Trace, frame: pl.DataFrame) -> pl.DataFrame:
    """``lead_host`` / ``lead_host_ns`` per row of ``frame`` (with _row, _launch_ns)."""
    spans = _host_spans(trace)
    launches = frame.select("_row", "_launch_ns").sort("_launch_ns")
    windows = launches.with_columns(
        pl.col("_launch_ns").shift(1).fill_null(pl.col("_launch_ns").min()).alias("_lo"),
        pl.col("_launch_ns").alias("_hi"),
    )
    empty = frame.select("_row").with_columns(
        pl.lit(None, pl.String).alias("lead_host"), pl.lit(0, pl.Int64).alias("lead_host_ns")
    )
    if spans.height == 0 or windows.height == 0:
        return empty
    # Each span goes to the window holding its start (windows split the host timeline at the
    # launches); it counts for the part of it inside that window.
    placed = (
        spans.sort("ts_ns")
        .join_asof(windows.select("_row", "_lo", "_hi"), left_on="ts_ns", right_on="_lo", strategy="backward")
        .filter(pl.col("_row").is_not_null() & (pl.col("ts_ns") < pl.col("_hi")))
        .with_columns((pl.min_horizontal("end_ns", "_hi") - pl.col("ts_ns")).alias("_in"))
        .group_by("_row", "name")
        .agg(pl.col("_in").sum())
        .sort(["_row", "_in", "name"], descending=[False, True, False])
        .group_by("_row", maintain_order=True)
        .first()
        .select("_row", pl.col("name").alias("lead_host"), pl.col("_in").alias("lead_host_ns"))
    )
    return empty.drop("lead_host", "lead_host_ns").join(placed, on="_row", how="left").with_columns(
        pl.col("lead_host_ns").fill_null(0)
    )


def with_context(trace: Trace, frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` (this rank's collectives with start_ns, end_ns, _launch_ns, _launch_tid) with
    the :data:`CONTEXT_SCHEMA` columns; the underscore columns dropped."""
    rows = frame.with_row_index("_row").with_columns(pl.col("_row").cast(pl.Int64))
    compute = gpu_work(trace).filter(pl.col("category") == "compute").select("start_ns", "end_ns")
    by_start = rows.sort("start_ns").with_columns(
        pl.col("end_ns").cum_max().shift(1).alias("_prev_end"),
    )
    lead = by_start.with_columns(
        pl.min_horizontal(pl.col("_prev_end").fill_null(pl.col("start_ns")), pl.col("start_ns")).alias("_lead_lo"),
    )
    lead = intervals.covered_ns(lead, compute, start="_lead_lo", end="start_ns", out="lead_compute_ns")
    lead = intervals.covered_ns(lead, compute, start="start_ns", end="end_ns", out="overlap_compute_ns")
    lead = lead.select(
        "_row",
        (pl.col("start_ns") - pl.col("_lead_lo")).alias("lead_ns"),
        "lead_compute_ns",
        "overlap_compute_ns",
    )
    host = _lead_host(trace, rows)
    return (
        rows.join(lead, on="_row", how="left")
        .join(host, on="_row", how="left")
        .sort("_row")
        .with_columns(pl.col("_launch_ns").alias("launch_ns"))
        .drop("_row", "_launch_ns", "_launch_tid")
    )
