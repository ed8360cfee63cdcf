"""Idle gaps: every maximal idle interval of a device, with the host activity that explains it.

A gap is a maximal interval of a device's analysed window (``timeline.analysis_window``) in
which no kernel, memcpy or memset runs, at least ``gap_threshold_ns`` long. Each gap is read
against what one host thread was doing meanwhile: the thread that launched the work ending
the gap (for a gap at the end of the window, the device's *main launching thread*, the one
that launched most of its work). Every instant of that thread is put in one class, the first
that applies:

1. ``sync``: inside a synchronising call (stream/device/event synchronize, blocking memcpy,
   ``aten::item`` / ``aten::_local_scalar_dense``);
2. ``data_loading``: inside a DataLoader ``__next__`` or an annotation/frame named like data
   loading;
3. ``allocator``: inside a call that takes device memory from the driver or gives it back
   (``cudaMalloc``/``cudaFree``, ``hipMalloc``/``hipFree``, ``cuMemAlloc``): the caching
   allocator missed, or ``empty_cache`` ran (``cudaFree`` also waits for the device first);
4. ``launch_overhead``: inside another runtime/driver call or a CPU op that launches GPU work;
5. ``host_compute``: inside CPU ops that launch nothing;
6. ``python``: only Python frames (traces recorded with ``with_stack``);
7. ``untraced``: nothing recorded on the thread.

The gap's cause is decided in this order:

- ``device_wait``: the work that ends the gap was already launched (its launch call had
  returned, or it was launched before the trace began) before the gap began, so the host was
  not what the device waited for (a dependency on another stream or device, or work the
  profiler did not record);
- ``sync``: synchronising calls cover at least half of the gap;
- otherwise the class with the largest share of the gap (ties go to the earlier class), except
  that a gap that began while the host sat in a synchronising call and was then spent
  launching is charged to ``sync``: the call drained the queue and the host is catching up.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import polars as pl

from traceinsight.analysis.core.base import (
    NO_INPUTS,
    RESULT_SCHEMA_VERSION,
    AnalysisConfig,
    AnalysisSpec,
    Inputs,
    Result,
    jsonable,
)
from traceinsight.analysis.core.memo import per_trace
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.host_names import (
    DATA_LOADING_PATTERN,
    SYNC_CALL_PATTERN,
    SYNC_OPS,
    is_data_loading,
    with_name_flags,
)
from traceinsight.analysis.lib.lineage import NONE, climb, values_at
from traceinsight.analysis.lib.timeline import analysis_window, busy_intervals
from traceinsight.analysis.sections.gap_culprits import culprits
from traceinsight.trace.model import Trace

HOST_CLASSES = ("sync", "data_loading", "allocator", "launch_overhead", "host_compute", "python")
UNTRACED = "untraced"
DEVICE_WAIT = "device_wait"
CAUSES = (*HOST_CLASSES, UNTRACED, DEVICE_WAIT)
__all__ = [
    "CAUSES",
    "DATA_LOADING_PATTERN",
    "SYNC_CALL_PATTERN",
    "SYNC_OPS",
    "GapsResult",
    "find_gaps",
    "is_data_loading",
    "main_threads",
    "run",
    "with_name_flags",
]

GAP_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "device": pl.Int64,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "dur_ns": pl.Int64,
    "step": pl.Int64,
    "cause": pl.String,
    "culprit": pl.String,
    "culprit_id": pl.Int64,
}
BY_CAUSE_SCHEMA = {"cause": pl.String, "idle_ns": pl.Int64, "share": pl.Float64, "gaps": pl.Int64}
CULPRIT_SCHEMA = {
    "culprit": pl.String,
    "idle_ns": pl.Int64,
    "share": pl.Float64,
    "gaps": pl.Int64,
    "cause": pl.String,
}
HISTOGRAM_SCHEMA = {"lo_ns": pl.Int64, "hi_ns": pl.Int64, "gaps": pl.Int64, "idle_ns": pl.Int64}
NO_CULPRIT = "(no host op)"


THREAD = ["pid", "tid"]


def main_threads(trace: Trace) -> pl.DataFrame:
    """Per device, the host thread (pid, tid) that launched most of its GPU work."""
    return (
        _launched(trace)
        .group_by("device", "pid", "tid")
        .len()
        .sort(["device", "len", "pid", "tid"], descending=[False, True, False, False])
        .unique("device", keep="first", maintain_order=True)
        .select("device", "pid", "tid")
    )


def _launched(trace: Trace) -> pl.DataFrame:
    """GPU work with the host thread (pid, tid) of its launch call."""
    return per_trace(trace, "launched_work", lambda: _launched_of(trace))


def _launched_of(trace: Trace) -> pl.DataFrame:
    work = trace.kernels.filter(pl.col("launch_id").is_not_null() & pl.col("device").is_not_null()).select(
        "device", "ts_ns", "end_ns", "step", "launch_id", "launch_ts_ns", "launch_end_ns", pl.col("launch_tid").alias("tid")
    )
    return work.with_columns(pid=_launch_pids(trace, work["launch_id"]))


def _launch_pids(trace: Trace, launch_ids: pl.Series) -> pl.Series:
    """The process of each launch call (an array lookup: event ids are rows)."""
    return values_at(trace, climb(trace, launch_ids.fill_null(NONE), 0)[0], "pid")


def _thread_events(trace: Trace, threads: pl.DataFrame) -> pl.DataFrame:
    """Host events of the given threads (pid, tid)."""
    cols = ["id", "ts_ns", "end_ns", "name", "kind", "pid", "tid", "parent"]
    return trace.events.select(cols).join(threads.select(THREAD).unique(), on=THREAD, how="inner")


def _host_activity(trace: Trace, threads: pl.DataFrame) -> pl.DataFrame:
    """Host events of the threads with their class level (index in HOST_CLASSES), keyed by
    device + thread (a thread feeding two devices is read once for each)."""
    events = with_name_flags(_thread_events(trace, threads).join(threads.select("device", *THREAD).unique(), on=THREAD))
    kind = pl.col("kind").cast(pl.String)
    launches = (
        _launched(trace)
        .select(*THREAD, "launch_ts_ns")
        .unique()
        .join(threads.select(THREAD).unique(), on=THREAD)
        .sort("launch_ts_ns")
    )
    ops = events.filter(kind == "cpu_op").select("id", *THREAD, "ts_ns", "end_ns").sort("ts_ns")
    # An op launches GPU work when the first launch at or after its start begins before its end.
    launching = (
        ops.join_asof(
            launches, left_on="ts_ns", right_on="launch_ts_ns", by=THREAD, strategy="forward", check_sortedness=False
        )
        .filter(pl.col("launch_ts_ns") < pl.col("end_ns"))
        .select("id", pl.lit(True).alias("launches"))
    )
    level = (
        pl.when(
            # The call patterns only match runtime/driver names, the ops only cpu_op names.
            kind.is_in(["runtime", "driver", "cpu_op"]) & pl.col("is_sync_name")
        )
        .then(0)
        .when(kind.is_in(["cpu_op", "user_annotation", "python"]) & pl.col("is_data_name"))
        .then(1)
        .when(kind.is_in(["runtime", "driver"]) & pl.col("is_alloc_name"))
        .then(2)
        .when(kind.is_in(["runtime", "driver"]) | ((kind == "cpu_op") & pl.col("launches")))
        .then(3)
        .when(kind == "cpu_op")
        .then(4)
        .when(kind == "python")
        .then(5)
    )
    return (
        events.filter(kind.is_in(["cpu_op", "user_annotation", "python", "runtime", "driver"]))
        .join(launching, on="id", how="left")
        .with_columns(pl.col("launches").fill_null(False))
        .select("device", *THREAD, pl.col("ts_ns").alias("start_ns"), "end_ns", level.cast(pl.Int64).alias("level"))
        .drop_nulls("level")
    )


def _gap_frame(trace: Trace, threshold_ns: int) -> pl.DataFrame:
    lo, hi = analysis_window(trace)
    busy = busy_intervals(trace)
    gaps = intervals.complement(busy, lo, hi, by=["device"])
    return (
        gaps.with_columns(dur_ns=pl.col("end_ns") - pl.col("start_ns"))
        .filter(pl.col("dur_ns") >= max(threshold_ns, 1))
        .sort(["device", "start_ns"])
        .with_row_index("row")
    )


def _next_work(trace: Trace, gaps: pl.DataFrame) -> pl.DataFrame:
    """Per gap row: the work that ends the gap (its step, launching thread and whether it was
    queued before the gap began), or for a trailing gap the step of the work before it.

    Work whose launch call is not in the trace was launched before recording began, so it
    counts as queued; a gap without following work reads the device's main thread.
    """
    work = trace.kernels.filter(pl.col("device").is_not_null()).select(
        "device", "ts_ns", "end_ns", "step", "launch_id", "launch_end_ns", pl.col("launch_tid").alias("tid")
    )
    work = (
        work.with_columns(pid=_launch_pids(trace, work["launch_id"]))
        .with_columns(
            queued_at=pl.when(pl.col("launch_id").is_null())
            .then(pl.lit(-(2**62), pl.Int64))
            .otherwise(pl.col("launch_end_ns"))
        )
    )
    # Of the work starting at one instant, the earliest-queued stands for it.
    following = (
        work.sort("queued_at", nulls_last=True)
        .group_by("device", "ts_ns")
        .agg(pl.col("queued_at", "step", "pid", "tid").first())
        .sort("ts_ns")
    )
    preceding = work.group_by("device", "end_ns").agg(pl.col("step").max().alias("prev_step")).sort("end_ns")
    main = main_threads(trace).rename({"pid": "main_pid", "tid": "main_tid"})
    has_thread = pl.col("pid").is_not_null() & pl.col("tid").is_not_null()
    return (
        gaps.select("row", "device", "start_ns", "end_ns")
        .sort("end_ns")
        .join_asof(following, left_on="end_ns", right_on="ts_ns", by="device", strategy="forward", check_sortedness=False)
        .with_columns(
            # Only work that starts right at the gap's end ends it.
            pl.when(pl.col("ts_ns") == pl.col("end_ns")).then(pl.col(c)).alias(c)
            for c in ("queued_at", "step", "pid", "tid")
        )
        .sort("start_ns")
        .join_asof(preceding, left_on="start_ns", right_on="end_ns", by="device", strategy="backward", check_sortedness=False)
        .join(main, on="device", how="left")
        .select(
            "row",
            pl.coalesce("step", "prev_step").alias("step"),
            (pl.col("queued_at") <= pl.col("start_ns")).fill_null(False).alias("queued"),
            pl.when(has_thread).then(pl.col("pid")).otherwise(pl.col("main_pid")).alias("pid"),
            pl.when(has_thread).then(pl.col("tid")).otherwise(pl.col("main_tid")).alias("tid"),
        )
    )


def find_gaps(trace: Trace, threshold_ns: int) -> pl.DataFrame:
    """Every idle gap of at least ``threshold_ns`` per device, with step, cause and culprit.

    Columns (see ``GAP_SCHEMA``): device, start_ns, end_ns, dur_ns, step, cause, culprit,
    culprit_id; sorted by device and start. Then ``pid``/``tid`` (the host thread read: the
    one that launched the work ending the gap, else the device's main launching thread) and
    one ``<class>_ns`` column per host class: how much of the gap that thread spent in it.
    """
    gaps = _gap_frame(trace, threshold_ns)
    extra: dict[str, pl.DataType | type[pl.DataType]] = {"pid": pl.Int64, "tid": pl.Int64}
    extra |= {f"{c}_ns": pl.Int64 for c in (*HOST_CLASSES, UNTRACED)}
    if gaps.height == 0:
        return pl.DataFrame(schema=GAP_SCHEMA | extra)
    gaps = gaps.join(_next_work(trace, gaps), on="row", how="left")
    keys = ["device", *THREAD]
    activity = _host_activity(trace, gaps.drop_nulls(THREAD))
    totals = intervals.level_totals(
        activity, gaps.drop_nulls(THREAD), level="level", levels=len(HOST_CLASSES), window_id="row", by=keys
    ).rename({f"level_{k}_ns": f"{cls}_ns" for k, cls in enumerate(HOST_CLASSES)})
    # Was the thread inside a synchronising call when the gap began?
    syncing = intervals.union(activity.filter(pl.col("level") == 0), by=keys).rename(
        {"start_ns": "sync_start_ns", "end_ns": "sync_end_ns"}
    )
    sync_at_start = (
        gaps.drop_nulls(THREAD)
        .select("row", *keys, "start_ns")
        .sort("start_ns")
        .join_asof(syncing.sort("sync_start_ns"), left_on="start_ns", right_on="sync_start_ns", by=keys, strategy="backward", check_sortedness=False)
        .select("row", (pl.col("sync_end_ns") > pl.col("start_ns")).fill_null(False).alias("sync_at_start"))
    )
    host_ns = pl.sum_horizontal([pl.col(f"{c}_ns") for c in HOST_CLASSES])
    covered = (
        gaps.join(totals, on="row", how="left")
        .join(sync_at_start, on="row", how="left")
        .with_columns([pl.col(f"{c}_ns").fill_null(0) for c in HOST_CLASSES])
        .with_columns(pl.col("sync_at_start").fill_null(False), untraced_ns=(pl.col("dur_ns") - host_ns).clip(lower_bound=0))
    )
    ordered = [*HOST_CLASSES, UNTRACED]
    largest = pl.max_horizontal([pl.col(f"{c}_ns") for c in ordered])
    argmax = pl.coalesce([pl.when(pl.col(f"{c}_ns") == largest).then(pl.lit(c)) for c in ordered])
    cause = (
        pl.when(pl.col("queued"))
        .then(pl.lit(DEVICE_WAIT))
        .when(2 * pl.col("sync_ns") >= pl.col("dur_ns"))
        .then(pl.lit("sync"))
        .when(pl.col("sync_at_start") & (argmax == "launch_overhead"))
        .then(pl.lit("sync"))
        .otherwise(argmax)
    )
    covered = covered.with_columns(cause=cause)
    out = covered.join(culprits(trace, covered.drop_nulls(THREAD)), on="row", how="left").sort(["device", "start_ns"])
    return out.select([pl.col(c).cast(t) for c, t in (GAP_SCHEMA | extra).items()])


def _histogram(gaps: pl.DataFrame, threshold_ns: int) -> pl.DataFrame:
    """Gap counts in decade buckets starting at the threshold (log-spaced)."""
    if gaps.height == 0:
        return pl.DataFrame(schema=HISTOGRAM_SCHEMA)
    lo = max(threshold_ns, 1)
    longest = int(gaps["dur_ns"].max())  # type: ignore[arg-type]
    edges = [lo]
    while edges[-1] <= longest:
        edges.append(edges[-1] * 10)
    bucket = (pl.col("dur_ns") / lo).log10().floor().cast(pl.Int64).clip(0, len(edges) - 2)
    counts = gaps.group_by(bucket.alias("b")).agg(pl.len().cast(pl.Int64).alias("gaps"), pl.col("dur_ns").sum().alias("idle_ns"))
    frame = pl.DataFrame(
        {"b": list(range(len(edges) - 1)), "lo_ns": edges[:-1], "hi_ns": edges[1:]},
        schema={"b": pl.Int64, "lo_ns": pl.Int64, "hi_ns": pl.Int64},
    )
    return (
        frame.join(counts, on="b", how="left")
        .with_columns(pl.col("gaps").fill_null(0), pl.col("idle_ns").fill_null(0))
        .sort("b")
        .select(list(HISTOGRAM_SCHEMA))
        .cast(HISTOGRAM_SCHEMA)  # type: ignore[arg-type]
    )


@dataclass(frozen=True)
class GapsResult(Result):
    name = "gaps"
    threshold_ns: int = 0
    window_start_ns: int = 0
    window_end_ns: int = 0
    window_ns: int = 0
    devices: int = 0
    idle_ns: int = 0
    gap_idle_ns: int = 0
    gap_count: int = 0
    by_cause: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=BY_CAUSE_SCHEMA))
    culprits: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=CULPRIT_SCHEMA))
    histogram: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=HISTOGRAM_SCHEMA))
    top: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=GAP_SCHEMA))
    gaps: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=GAP_SCHEMA))

    def to_polars(self) -> pl.DataFrame:
        return self.gaps

    @property
    def top_cause(self) -> str | None:
        return str(self.by_cause["cause"][0]) if self.by_cause.height else None

    def to_dict(self, *, full: bool = False) -> dict[str, Any]:
        """JSON-safe data; the full gaps list only with ``full`` (``top`` always has the largest)."""
        data: dict[str, Any] = {"schema_version": RESULT_SCHEMA_VERSION}
        for f in fields(self):
            if f.name != "gaps" or full:
                data[f.name] = jsonable(getattr(self, f.name))
        return data


def run(trace: Trace, config: AnalysisConfig, inputs: Inputs = NO_INPUTS) -> GapsResult:
    threshold_ns = int(config.gap_threshold_ns)
    lo, hi = analysis_window(trace)
    window_ns = max(hi - lo, 0)
    busy = busy_intervals(trace)
    if busy.height == 0:
        return GapsResult(
            available=False,
            reason="no GPU kernels, memcpys or memsets in this trace",
            threshold_ns=threshold_ns,
            window_start_ns=lo,
            window_end_ns=hi,
            window_ns=window_ns,
        )
    devices = busy["device"].n_unique()
    idle_ns = devices * window_ns - int(busy.select((pl.col("end_ns") - pl.col("start_ns")).sum()).item() or 0)
    gaps = find_gaps(trace, threshold_ns)
    return summarise(gaps, threshold_ns, config.top_n, devices=devices, idle_ns=idle_ns, window=(lo, hi))


def summarise(
    gaps: pl.DataFrame, threshold_ns: int, top_n: int, *, devices: int, idle_ns: int, window: tuple[int, int]
) -> GapsResult:
    """The result for a set of gaps (``find_gaps``' frame): per-cause and per-culprit totals,
    histogram and top gaps. Findings call it again on the steady-state gaps of a window."""
    lo, hi = window
    total = int(gaps["dur_ns"].sum() or 0)
    share = (pl.col("idle_ns") / total) if total else pl.lit(0.0)
    by_cause = (
        gaps.group_by("cause")
        .agg(pl.col("dur_ns").sum().alias("idle_ns"), pl.len().cast(pl.Int64).alias("gaps"))
        .with_columns(share.cast(pl.Float64).alias("share"))
        .sort(["idle_ns", "cause"], descending=[True, False])
        .select(list(BY_CAUSE_SCHEMA))
    )
    culprits = (
        gaps.with_columns(pl.col("culprit").fill_null(NO_CULPRIT))
        .group_by("culprit")
        .agg(
            pl.col("dur_ns").sum().alias("idle_ns"),
            pl.len().cast(pl.Int64).alias("gaps"),
            # The cause that accounts for most of this culprit's idle time.
            pl.col("cause").sort_by(pl.col("dur_ns").sum().over("culprit", "cause"), descending=True).first(),
        )
        .with_columns(share.cast(pl.Float64).alias("share"))
        .sort(["idle_ns", "culprit"], descending=[True, False])
        .head(top_n)
        .select(list(CULPRIT_SCHEMA))
    )
    top = gaps.sort(["dur_ns", "start_ns"], descending=[True, False]).head(top_n).select(list(GAP_SCHEMA))
    return GapsResult(
        devices=devices,
        idle_ns=idle_ns,
        gap_idle_ns=total,
        gap_count=gaps.height,
        by_cause=by_cause,
        culprits=culprits,
        histogram=_histogram(gaps, threshold_ns),
        top=top,
        gaps=gaps,
        threshold_ns=threshold_ns,
        window_start_ns=lo,
        window_end_ns=hi,
        window_ns=hi - lo,
    )


SPEC = AnalysisSpec(
    name="gaps",
    title="Idle gaps",
    run=run,
    description=(
        "Every idle interval of a device above the threshold, with the step it falls in, the "
        "host op running meanwhile and a cause (sync, data loading, launch overhead, ...)."
    ),
)
