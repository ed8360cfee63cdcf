"""Idle gaps opened by a host synchronisation, and the host time each sync was blocked.

A blocking call (``.item()``, ``nonzero``, a synchronize, a copy to pageable memory) returns
when the device has drained its queue, so the device idles from then until the host launches
again, whatever the host does meanwhile. Without the sync the host would have done that work
while the device still ran queued work, for as long as it was blocked, no longer.
"""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.core.memo import per_trace
from traceinsight.analysis.findings.catalogue import SYNC_RETURN_TOLERANCE_NS
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.host_names import SYNC_CALL_PATTERN
from traceinsight.trace.model import Trace

# Ops that block on the device (their runtime calls, when recorded, say for how long).
SYNC_OP_NAMES = ("aten::item", "aten::_local_scalar_dense", "aten::nonzero")
THREAD = ["pid", "tid"]
SPAN_SCHEMA = {"pid": pl.Int64, "tid": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64, "blocked_ns": pl.Int64}
SYNC_GAP_SCHEMA = {
    "device": pl.Int64,
    "start_ns": pl.Int64,
    "dur_ns": pl.Int64,
    "cause": pl.String,
    "culprit": pl.String,
    "blocked_ns": pl.Int64,
    "saving_ns": pl.Int64,
}


def _blocking_calls(trace: Trace) -> pl.DataFrame:
    """Host calls that wait for the device: synchronising runtime/driver calls and the launch
    calls of device-to-pageable copies (they return when the copy is done)."""
    ev = trace.events
    name = pl.col("name").cast(pl.String)
    calls = (
        ev.lazy()
        .filter(pl.col("kind").cast(pl.String).is_in(["runtime", "driver"]))
        .select(*THREAD, pl.col("ts_ns").alias("start_ns"), "end_ns", "name")
        .filter(name.str.contains(SYNC_CALL_PATTERN))
        .drop("name")
        .collect()
    )
    pageable = (
        trace.kernels.filter(
            (pl.col("kind") == "memcpy")
            & name.str.contains("DtoH")
            & name.str.contains("Pageable")
            & pl.col("launch_id").is_not_null()
        )
        .select("launch_id", pl.col("launch_ts_ns").alias("start_ns"), pl.col("launch_end_ns").alias("end_ns"))
        .join(ev.select(pl.col("id").alias("launch_id"), *THREAD), on="launch_id")
        .select(*THREAD, "start_ns", "end_ns")
    )
    return (
        pl.concat([calls, pageable])
        .drop_nulls()
        .select([pl.col(c).cast(pl.Int64) for c in (*THREAD, "start_ns", "end_ns")])
        .unique()
    )


def blocking_spans(trace: Trace) -> pl.DataFrame:
    """:func:`_blocking_spans` of the trace, computed once per trace."""
    return per_trace(trace, "blocking_spans", lambda: _blocking_spans(trace))


def _blocking_spans(trace: Trace) -> pl.DataFrame:
    """Per host thread, the spans of synchronising ops and blocking calls (nested ones merged:
    ``.item()`` → ``_local_scalar_dense`` → ``cudaStreamSynchronize``), each with the host time
    spent in it (``blocked_ns``): what removing the sync gives back to the host."""
    calls = _blocking_calls(trace)
    ops = trace.events.filter(
        (pl.col("kind").cast(pl.String) == "cpu_op") & pl.col("name").cast(pl.String).is_in(SYNC_OP_NAMES)
    ).select([pl.col(c).cast(pl.Int64) for c in THREAD] + [pl.col("ts_ns").alias("start_ns"), "end_ns"])
    both = pl.concat([ops, calls]).drop_nulls()
    if both.height == 0:
        return pl.DataFrame(schema=SPAN_SCHEMA)
    # A zero-length call still marks a sync (one that had nothing to wait for): one ns longer
    # for the union, which drops empty intervals, then back.
    spans = intervals.union(both.with_columns(pl.col("end_ns") + 1), by=THREAD).with_columns(
        pl.col("end_ns") - 1
    )
    return (
        spans.with_columns(blocked_ns=pl.col("end_ns") - pl.col("start_ns"))
        .select([pl.col(c).cast(t) for c, t in SPAN_SCHEMA.items()])
        .sort(*THREAD, "start_ns")
    )


def sync_opened_gaps(trace: Trace, gaps: pl.DataFrame) -> pl.DataFrame:
    """The gaps (of ``find_gaps``) that began while the gap's host thread sat in a
    synchronising call or within ``SYNC_RETURN_TOLERANCE_NS`` of its return, with the host time
    blocked in that call and the saving: min(gap, blocked).

    Gaps whose ending work was queued before they began (``device_wait``) are left out: the
    host was not what the device waited for.
    """
    spans = blocking_spans(trace)
    if gaps.height == 0 or spans.height == 0 or not {"pid", "tid"} <= set(gaps.columns):
        return pl.DataFrame(schema=SYNC_GAP_SCHEMA)
    tol = SYNC_RETURN_TOLERANCE_NS
    probes = (
        gaps.filter((pl.col("cause") != "device_wait") & pl.col("pid").is_not_null() & pl.col("tid").is_not_null())
        .select(
            "device", *[pl.col(c).cast(pl.Int64) for c in THREAD], "start_ns", "dur_ns", "cause", "culprit",
            (pl.col("start_ns") + tol).alias("probe_ns"),
        )
        .sort("probe_ns")
    )
    # The last sync that began by the gap's start (+ tolerance): it opened the gap if it was
    # still running then or returned at most the tolerance before.
    matched = probes.join_asof(
        spans.rename({"start_ns": "sync_start_ns", "end_ns": "sync_end_ns"}).sort("sync_start_ns"),
        left_on="probe_ns",
        right_on="sync_start_ns",
        by=THREAD,
        strategy="backward",
        check_sortedness=False,
    ).filter(pl.col("sync_end_ns") >= pl.col("start_ns") - tol)
    return (
        matched.with_columns(saving_ns=pl.min_horizontal("dur_ns", "blocked_ns"))
        .select([pl.col(c).cast(t) for c, t in SYNC_GAP_SCHEMA.items()])
        .sort("device", "start_ns")
    )
