"""Allocator memory from profile_memory events: peaks, who holds memory at the peak, and growth
across steps that may be a leak.

Each ``[memory]`` event is one allocation (positive bytes) or free (negative bytes) at an
address, with the allocator's running totals after it. An allocation lives from its event
until the next event at the same address on the same device (normally its free; if the
address is handed out again without a recorded free, the block must have been freed by then).
Allocations made before the profiler started are in the totals but not in the events, so the
memory attributed to ops at a peak can be less than the peak itself ("untraced").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from traceinsight.analysis.core.base import NO_INPUTS, AnalysisConfig, AnalysisSpec, Inputs, Result
from traceinsight.analysis.lib.host_tree import innermost_op
from traceinsight.analysis.lib.timeline import step_spans
from traceinsight.trace.model import Trace

# A possible leak: allocated memory at step end grows by more than the tolerance at every
# step over at least this many consecutive step ends, up to the last step recorded.
LEAK_MIN_STEPS = 3
# Tolerance: the larger of this many bytes and this fraction of the device's peak.
LEAK_TOLERANCE_BYTES = 4096
LEAK_TOLERANCE_FRACTION = 0.001
NO_OP = "(no op)"
# CPU "Total Allocated" in recent traces counts only what the profiler saw the CPU allocator
# hand out (a few bytes to kilobytes), not what the process holds: a CPU peak below this is
# not shown as a peak.
MIN_CPU_PEAK_BYTES = 1 << 20
CPU_DEVICE_TYPE = 0
# Ops that allocate on behalf of their caller; the caller is reported next to them.
ALLOCATION_HELPERS = (
    "aten::empty",
    "aten::empty_strided",
    "aten::empty_like",
    "aten::new_empty",
    "aten::new_empty_strided",
    "aten::resize_",
)

PEAK_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "device": pl.String,
    "device_type": pl.Int64,
    "device_index": pl.Int64,
    "events": pl.Int64,
    "peak_allocated_bytes": pl.Int64,
    "peak_allocated_ns": pl.Int64,
    "peak_allocated_step": pl.Int64,
    "peak_reserved_bytes": pl.Int64,
    "peak_reserved_ns": pl.Int64,
    "peak_reserved_step": pl.Int64,
    "traced_at_peak_bytes": pl.Int64,
}
TOP_OP_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "device": pl.String,
    "op_name": pl.String,
    "called_from": pl.String,
    "bytes": pl.Int64,
    "allocations": pl.Int64,
    "share_of_peak_pct": pl.Float64,
}
STEP_END_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "device": pl.String,
    "step": pl.Int64,
    "step_end_ns": pl.Int64,
    "allocated_bytes": pl.Int64,
    "reserved_bytes": pl.Int64,
    "delta_bytes": pl.Int64,
}


@dataclass(frozen=True)
class LeakSuspect:
    device: str
    first_step: int
    last_step: int
    steps: int
    first_bytes: int
    last_bytes: int
    growth_bytes: int
    growth_per_step_bytes: float
    tolerance_bytes: int


@dataclass(frozen=True)
class MemoryResult(Result):
    name = "memory"
    peaks: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=PEAK_COLUMNS))
    top_ops: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=TOP_OP_COLUMNS))
    step_ends: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=STEP_END_COLUMNS))
    leaks: tuple[LeakSuspect, ...] = ()
    has_steps: bool = False
    # Start of the recorded activity, so times can be shown relative to it.
    origin_ns: int = 0
    # How the figures were read where it is not the allocator's own totals, and what was hidden.
    notes: tuple[str, ...] = ()

    def to_polars(self) -> pl.DataFrame:
        return self.peaks


def _device_label() -> pl.Expr:
    dt, dev = pl.col("device_type"), pl.col("device")
    return (
        pl.when(dt == 1)
        .then(pl.format("cuda:{}", dev))
        .when(dt == 0)
        .then(pl.lit("cpu"))
        .otherwise(pl.format("type{}:{}", dt, dev))
    )


def _steps(trace: Trace) -> pl.DataFrame:
    return step_spans(trace).rename({"host_start_ns": "step_ts_ns", "host_end_ns": "step_end_ns"})


def _step_at(points: pl.DataFrame, steps: pl.DataFrame, ts_col: str, out: str) -> pl.DataFrame:
    """Adds ``out``: the ProfilerStep whose host span holds ``ts_col`` (null outside steps)."""
    if steps.height == 0:
        return points.with_columns(pl.lit(None, dtype=pl.Int64).alias(out))
    joined = points.sort(ts_col).join_asof(
        steps, left_on=ts_col, right_on="step_ts_ns", strategy="backward", check_sortedness=False
    )
    return joined.with_columns(
        pl.when(pl.col(ts_col) < pl.col("step_end_ns")).then(pl.col("step")).alias(out)
    ).drop("step", "step_ts_ns", "step_end_ns")


def _events(trace: Trace) -> pl.DataFrame:
    mem = (
        # Row numbers are the time order that allocation matching and the peak rely on.
        trace.memory.filter(pl.col("bytes").is_not_null())
        .sort("ts_ns", maintain_order=True)
        .with_row_index("row")
        .with_columns(
            pl.col("row").cast(pl.Int64),
            pl.col("device").fill_null(-1),
            pl.col("device_type").fill_null(-1),
            pl.col("addr").fill_null(-1),
        )
        .with_columns(label=_device_label())
    )
    # Older traces carry only each event's Bytes: the allocated total is then their running
    # sum per device (allocations made before the profiler started are not in it).
    device = ["device_type", "device"]
    return mem.with_columns(
        running_sum=pl.col("total_allocated_bytes").is_null().all().over(device),
        total_allocated_bytes=pl.when(pl.col("total_allocated_bytes").is_null().all().over(device))
        .then(pl.col("bytes").cum_sum().over(device))
        .otherwise(pl.col("total_allocated_bytes")),
    )


def _hide_meaningless_peaks(peaks: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    tiny = (pl.col("device_type") == CPU_DEVICE_TYPE) & (
        pl.col("peak_allocated_bytes").fill_null(0) < MIN_CPU_PEAK_BYTES
    )
    hidden = peaks.filter(tiny)
    notes = [
        f"{row['label']}: peak allocated {row['peak_allocated_bytes'] or 0} B over "
        f"{row['events']} events is the profiler's CPU allocator count, not the process's "
        "memory; not shown as a peak"
        for row in hidden.iter_rows(named=True)
    ]
    return peaks.filter(~tiny), notes


def _peaks(mem: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    alloc = pl.col("total_allocated_bytes")
    reserved = pl.col("total_reserved_bytes")
    peaks = mem.group_by("label", "device_type", "device").agg(
        events=pl.len().cast(pl.Int64),
        peak_allocated_bytes=alloc.max(),
        peak_allocated_ns=pl.col("ts_ns").get(alloc.fill_null(-1).arg_max()),
        peak_row=pl.col("row").get(alloc.fill_null(-1).arg_max()),
        peak_reserved_bytes=reserved.max(),
        peak_reserved_ns=pl.col("ts_ns").get(reserved.fill_null(-1).arg_max()),
    )
    peaks = _step_at(peaks, steps, "peak_allocated_ns", "peak_allocated_step")
    peaks = _step_at(peaks, steps, "peak_reserved_ns", "peak_reserved_step")
    return peaks.sort("device_type", "device", descending=[True, False])


def _allocations(mem: pl.DataFrame) -> pl.DataFrame:
    """Positive-bytes events with the row at which their block was given back (null: never)."""
    # Rows are in time order already, and a window keeps that order within each address.
    key = ["device_type", "device", "addr"]
    return mem.with_columns(free_row=pl.col("row").shift(-1).over(key)).filter(pl.col("bytes") > 0)


def _alive_at_peak(allocs: pl.DataFrame, peaks: pl.DataFrame) -> pl.DataFrame:
    joined = allocs.join(peaks.select("device_type", "device", "peak_row"), on=["device_type", "device"])
    return joined.filter(
        (pl.col("row") <= pl.col("peak_row"))
        & (pl.col("free_row").is_null() | (pl.col("free_row") > pl.col("peak_row")))
    )


def _top_ops(trace: Trace, alive: pl.DataFrame, peaks: pl.DataFrame, top_n: int) -> pl.DataFrame:
    if alive.height == 0:
        return pl.DataFrame(schema=TOP_OP_COLUMNS)
    points = alive.select("label", "pid", "tid", "ts_ns", "bytes")
    located = innermost_op(trace.events, points, owner_skips=ALLOCATION_HELPERS)
    peak_by_label = peaks.select("label", "device_type", "peak_allocated_bytes")
    return (
        located.with_columns(
            pl.col("op_name").fill_null(NO_OP),
            # Who asked for it, when the allocating op is a helper like aten::empty.
            called_from=pl.when(pl.col("owner_id") != pl.col("op_id")).then(pl.col("owner_name")),
        )
        .group_by("label", "op_name", "called_from")
        .agg(bytes=pl.col("bytes").sum(), allocations=pl.len().cast(pl.Int64))
        .join(peak_by_label, on="label", how="left")
        .with_columns(
            share_of_peak_pct=pl.when(pl.col("peak_allocated_bytes") > 0).then(
                pl.col("bytes") * 100.0 / pl.col("peak_allocated_bytes")
            )
        )
        .sort(
            ["device_type", "label", "bytes", "op_name", "called_from"],
            descending=[True, False, True, False, False],
            nulls_last=True,
        )
        .group_by("label", maintain_order=True)
        .head(top_n)
        .rename({"label": "device"})
        .select([pl.col(c).cast(t) for c, t in TOP_OP_COLUMNS.items()])
    )


def _step_ends(mem: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    if steps.height == 0:
        return pl.DataFrame(schema=STEP_END_COLUMNS)
    devices = mem.select("label", "device_type", "device").unique()
    grid = devices.join(steps.select("step", "step_end_ns"), how="cross").sort("step_end_ns")
    # The totals after the last event that happened before the step ended.
    totals = mem.select(
        "device_type", "device", "ts_ns", "total_allocated_bytes", "total_reserved_bytes"
    ).sort("ts_ns")
    return (
        grid.join_asof(
            totals,
            left_on="step_end_ns",
            right_on="ts_ns",
            by=["device_type", "device"],
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col("ts_ns").is_not_null())
        .sort("label", "step")
        .with_columns(delta_bytes=pl.col("total_allocated_bytes").diff().over("label"))
        .select(
            device=pl.col("label"),
            step=pl.col("step"),
            step_end_ns=pl.col("step_end_ns"),
            allocated_bytes=pl.col("total_allocated_bytes"),
            reserved_bytes=pl.col("total_reserved_bytes"),
            delta_bytes=pl.col("delta_bytes"),
        )
        .select([pl.col(c).cast(t) for c, t in STEP_END_COLUMNS.items()])
    )


def find_leaks(step_ends: pl.DataFrame, peaks: pl.DataFrame) -> tuple[LeakSuspect, ...]:
    """Devices whose allocated memory at step end grew at every step, by more than the
    tolerance, over the last ``LEAK_MIN_STEPS`` or more step ends."""
    if step_ends.height == 0:
        return ()
    tolerance = peaks.select(
        device=pl.col("label"),
        tolerance_bytes=pl.max_horizontal(
            pl.lit(LEAK_TOLERANCE_BYTES, dtype=pl.Int64),
            (pl.col("peak_allocated_bytes").fill_null(0) * LEAK_TOLERANCE_FRACTION).cast(pl.Int64),
        ),
    )
    # Mark each step end that grew past the tolerance, then measure the run of such growth
    # that ends at the last step (a run broken earlier is a phase, not an ongoing leak).
    runs = (
        step_ends.join(tolerance, on="device", how="left")
        .sort("device", "step")
        .with_columns(grew=(pl.col("delta_bytes") > pl.col("tolerance_bytes")).fill_null(False))
        .with_columns(
            breaks=(~pl.col("grew")).cast(pl.Int64).cum_sum().over("device"),
        )
        .with_columns(last_run=pl.col("breaks") == pl.col("breaks").last().over("device"))
        .filter(pl.col("last_run"))
        .group_by("device")
        .agg(
            first_step=pl.col("step").first(),
            last_step=pl.col("step").last(),
            steps=pl.len().cast(pl.Int64),
            first_bytes=pl.col("allocated_bytes").first(),
            last_bytes=pl.col("allocated_bytes").last(),
            tolerance_bytes=pl.col("tolerance_bytes").first(),
        )
        # A run counts the step end before its first growth too: that one is its baseline.
        .filter(pl.col("steps") >= LEAK_MIN_STEPS)
        .sort("device")
    )
    suspects = []
    for row in runs.iter_rows(named=True):
        growth = int(row["last_bytes"]) - int(row["first_bytes"])
        suspects.append(
            LeakSuspect(
                device=row["device"],
                first_step=int(row["first_step"]),
                last_step=int(row["last_step"]),
                steps=int(row["steps"]),
                first_bytes=int(row["first_bytes"]),
                last_bytes=int(row["last_bytes"]),
                growth_bytes=growth,
                growth_per_step_bytes=growth / (int(row["steps"]) - 1),
                tolerance_bytes=int(row["tolerance_bytes"]),
            )
        )
    return tuple(suspects)


def _origin_ns(trace: Trace, mem: pl.DataFrame) -> int:
    starts = pl.concat([trace.events.select("ts_ns"), mem.select("ts_ns")])["ts_ns"]
    first = starts.min()
    return int(first) if isinstance(first, int) else 0


def run(trace: Trace, config: AnalysisConfig, inputs: Inputs = NO_INPUTS) -> MemoryResult:
    mem = _events(trace)
    if mem.height == 0:
        return MemoryResult(available=False, reason="trace recorded without profile_memory")
    steps = _steps(trace)
    notes = [
        f"{label}: the trace has no allocator totals; allocated bytes are the running sum of "
        "the traced allocations and frees (memory allocated before profiling is not in it)"
        for label in mem.filter(pl.col("running_sum"))["label"].unique().sort().to_list()
    ]
    peaks, hidden = _hide_meaningless_peaks(_peaks(mem, steps))
    notes += hidden
    mem = mem.filter(pl.col("label").is_in(peaks["label"].implode()))
    if mem.height == 0:
        return MemoryResult(available=False, reason="; ".join(notes) or "no device memory events")
    allocs = _allocations(mem)
    alive = _alive_at_peak(allocs, peaks)
    traced = alive.group_by("label").agg(traced_at_peak_bytes=pl.col("bytes").sum())
    top_ops = _top_ops(trace, alive, peaks, config.top_n)
    step_ends = _step_ends(mem, steps)
    leaks = find_leaks(step_ends, peaks)
    peaks_out = (
        peaks.join(traced, on="label", how="left")
        .with_columns(pl.col("traced_at_peak_bytes").fill_null(0))
        .rename({"device": "device_index"})
        .rename({"label": "device"})
        .select([pl.col(c).cast(t) for c, t in PEAK_COLUMNS.items()])
    )
    return MemoryResult(
        peaks=peaks_out,
        top_ops=top_ops,
        step_ends=step_ends,
        leaks=leaks,
        has_steps=steps.height > 0,
        origin_ns=_origin_ns(trace, mem),
        notes=tuple(notes),
    )


SPEC = AnalysisSpec(
    name="memory",
    title="Memory",
    run=run,
    description="Peak allocated/reserved memory per device and when, the ops holding the most at "
    "the peak, and step-over-step growth that may be a leak.",
)
