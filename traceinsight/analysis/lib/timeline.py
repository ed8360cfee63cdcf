"""Shared views of a trace's timeline that several analyses read: the analysed window, the GPU
work and its busy intervals, and the steps' host and device spans.

One definition each, so that every section measures the same window and the same steps.
"""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.core.memo import per_trace
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.categories import category_expr, communication_names
from traceinsight.trace.model import Trace
from traceinsight.trace.schema import GPU_WORK_KINDS


def analysis_window(trace: Trace) -> tuple[int, int]:
    """[start, end) of the analysed window: the span of all recorded activity.

    The profiler's own bookkeeping span ("PyTorch Profiler (N)") is left out: it starts
    before and ends after the work and would inflate idle time. Once per trace (most
    analyses ask).
    """
    return per_trace(trace, "analysis_window", lambda: _analysis_window(trace))


def _analysis_window(trace: Trace) -> tuple[int, int]:
    ev = trace.events.select("kind", "ts_ns", "end_ns").filter(pl.col("kind") != "other")
    if ev.height == 0:
        ev = trace.events
    if ev.height == 0:
        return 0, 0
    lo = ev["ts_ns"].min()
    hi = ev["end_ns"].max()
    return int(lo), int(hi)  # type: ignore[arg-type]


def work_intervals(trace: Trace) -> pl.DataFrame:
    """GPU work (kernels, memcpys, memsets) on a known device as (device, start_ns, end_ns)."""
    return trace.kernels.filter(
        pl.col("kind").cast(pl.String).is_in(list(GPU_WORK_KINDS)) & pl.col("device").is_not_null()
    ).select("device", pl.col("ts_ns").alias("start_ns"), "end_ns")


def busy_intervals(trace: Trace) -> pl.DataFrame:
    """Maximal busy intervals per device: the union of its kernels, memcpys and memsets (once
    per trace)."""
    return per_trace(trace, "busy_intervals", lambda: intervals.union(work_intervals(trace), by=["device"]))


def gpu_work(trace: Trace) -> pl.DataFrame:
    """GPU work as (device, stream, start_ns, end_ns, category), zero-length rows dropped."""
    work = trace.kernels.filter(
        pl.col("kind").cast(pl.String).is_in(list(GPU_WORK_KINDS))
        & pl.col("device").is_not_null()
        & (pl.col("end_ns") > pl.col("ts_ns"))
    )
    # Categories depend on name, kind and whether a collective is named: work them out once
    # per distinct combination rather than running string matching over every kernel.
    work = work.select(
        "device",
        pl.col("stream").fill_null(-1),
        pl.col("ts_ns").alias("start_ns"),
        "end_ns",
        "name",
        "kind",
        pl.col("collective_name").is_not_null().alias("_collective"),
    )
    combos = work.select("name", "kind", "_collective").unique()
    comm = communication_names(combos["name"])
    combos = combos.with_columns(category_expr(comm, has_collective=pl.col("_collective")).alias("category"))
    return work.join(combos, on=["name", "kind", "_collective"], how="left", maintain_order="left").select(
        "device", "stream", "start_ns", "end_ns", "category"
    )


def step_spans(trace: Trace) -> pl.DataFrame:
    """Host spans of ProfilerStep#N: step, host_start_ns, host_end_ns (sorted by start)."""
    return trace.step_spans()


def step_numbers(trace: Trace) -> list[int]:
    """The profiled steps (ProfilerStep#N with a host span), ascending."""
    return sorted(int(s) for s in step_spans(trace)["step"].to_list())


def median_host_step_ns(trace: Trace) -> float | None:
    """Median host span of the profiled steps (None without steps)."""
    spans = step_spans(trace)
    if spans.height == 0:
        return None
    value = (spans["host_end_ns"] - spans["host_start_ns"]).median()
    return float(value) if value is not None else None  # type: ignore[arg-type]


def device_step_spans(trace: Trace, spans: pl.DataFrame | None = None) -> pl.DataFrame:
    """Each step's device window: from its host start (or the end of earlier steps, if later)
    to the end of the last GPU work launched inside it or its host end, whichever is later.

    Adds device_start_ns, device_end_ns, host_dur_ns and device_dur_ns to ``spans``
    (default: ``step_spans(trace)``, once per trace: the steps, the bound regions, the critical
    path and the findings' replay check all read it).
    """
    if spans is None:
        return per_trace(trace, "device_step_spans", lambda: _device_step_spans(trace, step_spans(trace)))
    return _device_step_spans(trace, spans)


def _device_step_spans(trace: Trace, spans: pl.DataFrame) -> pl.DataFrame:
    work_end = (
        trace.kernels.filter(pl.col("step").is_not_null())
        .group_by("step")
        .agg(pl.col("end_ns").max().alias("work_end_ns"))
    )
    steps = spans.join(work_end, on="step", how="left").sort("host_start_ns")
    # GPU work of earlier steps still running when this one starts pushes its device start.
    # A step ends when both its GPU work and its host code have ended: host work after the
    # last kernel (a sync, torch.cuda.empty_cache(), logging) is the step's time, which the
    # next step cannot start before; counted in no step, the steps would not tile the loop.
    end = pl.max_horizontal("work_end_ns", "host_end_ns")  # a step without GPU work: its host end
    earlier_end = end.cum_max().shift(1)
    start = pl.max_horizontal("host_start_ns", earlier_end)
    return (
        steps.with_columns(device_start_ns=start)
        .with_columns(device_end_ns=pl.max_horizontal("device_start_ns", end))
        .with_columns(
            host_dur_ns=pl.col("host_end_ns") - pl.col("host_start_ns"),
            device_dur_ns=pl.col("device_end_ns") - pl.col("device_start_ns"),
        )
        .drop("work_end_ns")
    )
