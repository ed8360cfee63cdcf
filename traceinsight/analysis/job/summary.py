"""What one rank's trace contributes to cross-rank work: a small, picklable ``RankSummary``.

It is computed where the trace is loaded (a worker process or a Ray task) so that only a few
kilobytes per rank travel back: per-step device windows and their breakdown, the collective
operations in launch order, the kernel mix, and the idle time by cause.

Per step (``ProfilerStep#N`` device windows, the definition of ``steps``; a trace without steps
is one window, step -1, over its analysed window), the device time is split as:

- ``compute_ns``: the union of compute kernels;
- ``communication_ns``: the union of collective (NCCL/RCCL) kernels; a trace without them
  (gloo runs its collectives on host threads) gets the union of its host-side collective
  spans instead, and ``RankSummary.comm_measured_on`` says which ("device" or "host");
- ``exposed_comm_ns``: device communication during which no compute kernel runs; for host
  collectives, the part of their spans during which the rank's GPU runs nothing at all;
- ``idle_ns`` and ``idle_<cause>_ns``: idle gaps by cause (``gaps``), charged to their step.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

import polars as pl

from traceinsight.analysis.classify import collective_of
from traceinsight.analysis.core.base import AnalysisConfig, jsonable
from traceinsight.analysis.job.coll_context import CONTEXT_SCHEMA, with_context
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.categories import communication_names, is_communication
from traceinsight.analysis.lib.timeline import analysis_window
from traceinsight.analysis.sections import gaps as gaps_analysis
from traceinsight.analysis.sections import steps as steps_analysis
from traceinsight.analysis.sections.breakdown import gpu_work
from traceinsight.trace.model import Trace

WHOLE_TRACE_STEP = -1
CommSource = Literal["device", "host"]
# Host spans of a collective of a c10d backend: "gloo:all_reduce", "mpi:broadcast", ...
HOST_COLLECTIVE = r"^(gloo|mpi|ucc|nccl|xccl):(\w+)$"
IDLE_CAUSES = gaps_analysis.CAUSES
STEP_PARTS = (*steps_analysis.PARTS, steps_analysis.OTHER)

STEP_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "step": pl.Int64,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "dur_ns": pl.Int64,
    "is_warmup": pl.Boolean,
    # The step's split as ``steps`` makes it (each instant once, by priority).
    **{f"part_{p}_ns": pl.Int64 for p in STEP_PARTS},
    "compute_ns": pl.Int64,
    "communication_ns": pl.Int64,
    "exposed_comm_ns": pl.Int64,
    "idle_ns": pl.Int64,
    **{f"idle_{c}_ns": pl.Int64 for c in IDLE_CAUSES},
}
COLLECTIVE_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "ordinal": pl.Int64,
    "process_group": pl.String,
    "collective": pl.String,
    "name": pl.String,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "dur_ns": pl.Int64,
    "step": pl.Int64,
    "in_nelems": pl.Int64,
    "out_nelems": pl.Int64,
    "dtype": pl.String,
    "group_size": pl.Int64,
    "seq": pl.Int64,
    "on_device": pl.Boolean,
    # What the collective sat in on this rank (``coll_context``): the host launch, compute
    # overlapping it, and the lead-in since the rank's previous collective.
    **CONTEXT_SCHEMA,
}
KERNEL_MIX_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "name": pl.String,
    "category": pl.String,
    "count": pl.Int64,
    "dur_ns": pl.Int64,
}


@dataclass(frozen=True)
class RankSummary:
    """One rank's share of a job, small enough to send between processes.

    Times in the frames are ns relative to ``base_time_ns`` (add it to compare ranks).
    """

    rank: int
    path: str
    world_size: int | None = None
    backend: str | None = None
    host_name: str | None = None
    device_name: str | None = None
    base_time_ns: int | None = None
    has_steps: bool = False
    steps: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=STEP_SCHEMA))
    collectives: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=COLLECTIVE_SCHEMA))
    kernel_mix: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=KERNEL_MIX_SCHEMA))
    cache_entry: str | None = None
    warnings: tuple[str, ...] = ()
    # Where ``communication_ns`` was measured: "device" (collective kernels), "host" (the host
    # spans of a backend without device kernels, such as gloo), None (no collective at all).
    comm_measured_on: CommSource | None = None

    def offset_ns(self) -> int:
        return self.base_time_ns or 0

    def to_dict(self) -> dict[str, Any]:
        return {k: jsonable(v) for k, v in self.__dict__.items()}


def _windows(trace: Trace, steps: steps_analysis.StepsResult) -> tuple[pl.DataFrame, bool]:
    if steps.available and steps.steps.height:
        frame = steps.steps.select(
            "step",
            pl.col("device_start_ns").alias("start_ns"),
            pl.col("device_end_ns").alias("end_ns"),
            pl.col("device_dur_ns").alias("dur_ns"),
            "is_warmup",
            *[pl.col(f"{p}_ns").alias(f"part_{p}_ns") for p in STEP_PARTS],
        )
        return frame, True
    lo, hi = analysis_window(trace)
    row: dict[str, Any] = {
        "step": WHOLE_TRACE_STEP,
        "start_ns": lo,
        "end_ns": hi,
        "dur_ns": max(hi - lo, 0),
        "is_warmup": False,
        **{f"part_{p}_ns": 0 for p in STEP_PARTS},
    }
    return pl.DataFrame([row], schema={k: STEP_SCHEMA[k] for k in row}), False


def _device_split(trace: Trace, windows: pl.DataFrame) -> pl.DataFrame:
    """compute_ns, communication_ns, exposed_comm_ns per window (communication: kernels)."""
    work = gpu_work(trace).filter(pl.col("category").is_in(["compute", "communication"]))
    win = windows.select("step", "start_ns", "end_ns")
    if work.height == 0:
        return win.select("step").with_columns(
            [pl.lit(0, pl.Int64).alias(c) for c in ("compute_ns", "communication_ns", "exposed_comm_ns")]
        )
    levelled = work.select(
        "start_ns", "end_ns", (pl.col("category") == "communication").cast(pl.Int64).alias("level")
    )
    both = intervals.level_totals(levelled, win, level="level", levels=2, window_id="step")
    comm = levelled.filter(pl.col("level") == 1).with_columns(level=pl.lit(0, pl.Int64))
    comm_total = intervals.level_totals(comm, win, level="level", levels=1, window_id="step")
    return both.select(
        "step",
        pl.col("level_0_ns").alias("compute_ns"),
        pl.col("level_1_ns").alias("exposed_comm_ns"),
    ).join(comm_total.select("step", pl.col("level_0_ns").alias("communication_ns")), on="step")


def _host_comm_split(trace: Trace, windows: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """communication_ns, exposed_comm_ns per window from host-side collective spans.

    Communication = the union of the spans inside the window; exposed = the part of it during
    which the device runs no work at all (kernels, copies, memsets): a host collective that
    overlaps device work is hidden behind it, one with the device idle is what the step waits on.
    """
    win = windows.select("step", "start_ns", "end_ns")
    busy = gpu_work(trace).select("start_ns", "end_ns", pl.lit(0, pl.Int64).alias("level"))
    host = spans.select("start_ns", "end_ns", pl.lit(1, pl.Int64).alias("level"))
    hidden = intervals.level_totals(pl.concat([busy, host]), win, level="level", levels=2, window_id="step")
    total = intervals.level_totals(host.with_columns(level=pl.lit(0, pl.Int64)), win, level="level", levels=1, window_id="step")
    return total.select("step", pl.col("level_0_ns").alias("communication_ns")).join(
        hidden.select("step", pl.col("level_1_ns").alias("exposed_comm_ns")), on="step"
    )


def _idle_by_cause(found: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Idle gap time per window and cause: gaps are clipped to the windows they meet."""
    cols = [f"idle_{c}_ns" for c in IDLE_CAUSES]
    empty = windows.select("step").with_columns([pl.lit(0, pl.Int64).alias(c) for c in ("idle_ns", *cols)])
    if found.height == 0:
        return empty
    win = windows.select("step", pl.col("start_ns").alias("_ws"), pl.col("end_ns").alias("_we"))
    clipped = (
        found.select(pl.col("start_ns").alias("gs"), pl.col("end_ns").alias("ge"), "cause")
        .join(win, how="cross")
        .with_columns(
            (pl.min_horizontal("ge", "_we") - pl.max_horizontal("gs", "_ws")).alias("dur_ns")
        )
        .filter(pl.col("dur_ns") > 0)
    )
    if clipped.height == 0:
        return empty
    wide = clipped.group_by("step").agg(
        pl.col("dur_ns").sum().alias("idle_ns"),
        *[pl.col("dur_ns").filter(pl.col("cause") == c).sum().alias(f"idle_{c}_ns") for c in IDLE_CAUSES],
    )
    return windows.select("step").join(wide, on="step", how="left").fill_null(0)


def collectives(trace: Trace, windows: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Collective operations in launch order: NCCL/RCCL kernels when the trace has them, else
    the host-side collective calls (gloo, or a trace without device activity). Also returns
    how many collective kernels were left out for lack of their launch's args."""
    kernels = trace.kernels.filter(pl.col("kind").cast(pl.String) == "kernel")
    name = pl.col("name").cast(pl.String)
    device = kernels.filter(is_communication(communication_names(kernels["name"])))
    dropped = 0
    if device.height and device["collective_name"].is_not_null().any():
        # Kernels without collective args were launched before the trace began: their launch
        # (and so their process group and place in the sequence) is not in this trace.
        dropped = int(device["collective_name"].is_null().sum())
        device = device.filter(pl.col("collective_name").is_not_null())
    on_device = device.height > 0
    if on_device:
        extra = trace.events.select("id", "process_group", pl.col("coll_seq").alias("seq_num"))
        rows = device.join(extra, on="id", how="left").select(
            "ts_ns", "end_ns", "name", "collective_name", "in_msg_nelems", "out_msg_nelems",
            "comm_dtype", "group_size", "process_group", "seq_num", "step",
            pl.col("launch_ts_ns").fill_null(pl.col("ts_ns")).alias("_launch_ns"), pl.col("launch_tid").alias("_launch_tid"),
            # the backend's span around the launch ("nccl:all_to_all") names a collective whose
            # kernel name does not (NCCL runs all-to-all as SendRecv kernels)
            collective_of(pl.col("annotation").cast(pl.String).str.extract(HOST_COLLECTIVE, 2)).alias("_span_collective"),
        )
    else:
        # gloo (and a c10d backend without record_param_comms) leaves only its host spans,
        # named "<backend>:<collective>" (e.g. "gloo:all_reduce").
        host_named = name.str.extract(HOST_COLLECTIVE, 2)
        host = trace.events.filter(
            pl.col("kind").cast(pl.String).is_in(["cpu_op", "user_annotation"])
            & (pl.col("collective_name").is_not_null() | host_named.is_not_null())
        )
        if host.filter(pl.col("collective_name").is_not_null()).height:
            host = host.filter(pl.col("collective_name").is_not_null() & (pl.col("kind").cast(pl.String) == "cpu_op"))
        rows = host.with_columns(
            pl.col("collective_name").cast(pl.String).fill_null(host_named.str.replace_all("_", "")).alias("collective_name")
        ).select(
            "ts_ns", "end_ns", "name", "collective_name", "in_msg_nelems", "out_msg_nelems",
            "comm_dtype", "group_size", "process_group", pl.col("coll_seq").alias("seq_num"), "step",
            pl.lit(None, pl.String).alias("_span_collective"),
            pl.col("ts_ns").alias("_launch_ns"), pl.col("tid").alias("_launch_tid"),
        )
    if rows.height == 0:
        return pl.DataFrame(schema=COLLECTIVE_SCHEMA), dropped
    # A collective belongs to the device step window holding its start (the host step of its
    # launch can differ from the device window it runs in).
    win = windows.select(pl.col("step").alias("_wstep"), "start_ns", "end_ns").sort("start_ns")
    out = (
        rows.with_columns(pl.col("process_group").fill_null("default"))
        .sort("ts_ns")
        .join_asof(win.drop("end_ns"), left_on="ts_ns", right_on="start_ns", strategy="backward", check_sortedness=False)
        .join(win.select("_wstep", pl.col("end_ns").alias("_wend")), on="_wstep", how="left")
        .with_columns(
            step=pl.when(pl.col("ts_ns") < pl.col("_wend")).then("_wstep").otherwise(pl.col("step")),
        )
        .with_columns(ordinal=pl.int_range(pl.len(), dtype=pl.Int64).over("process_group"))
        .select(
            "ordinal",
            "process_group",
            pl.col("collective_name").cast(pl.String).fill_null(pl.col("_span_collective")).fill_null(collective_of(name)).alias("collective"),
            name.alias("name"),
            pl.col("ts_ns").alias("start_ns"),
            "end_ns",
            (pl.col("end_ns") - pl.col("ts_ns")).alias("dur_ns"),
            "step",
            pl.col("in_msg_nelems").alias("in_nelems"),
            pl.col("out_msg_nelems").alias("out_nelems"),
            pl.col("comm_dtype").cast(pl.String).alias("dtype"),
            "group_size",
            pl.col("seq_num").alias("seq"),
            pl.lit(on_device).alias("on_device"),
            "_launch_ns",
            "_launch_tid",
        )
    )
    return with_context(trace, out).cast(COLLECTIVE_SCHEMA), dropped  # type: ignore[arg-type]


def kernel_mix(trace: Trace) -> pl.DataFrame:
    """Count and time per kernel name (with its breakdown category)."""
    kernels = trace.kernels.filter(pl.col("kind").cast(pl.String) == "kernel")
    if kernels.height == 0:
        return pl.DataFrame(schema=KERNEL_MIX_SCHEMA)
    communication = is_communication(communication_names(kernels["name"]))
    return (
        kernels.group_by(pl.col("name").cast(pl.String))
        .agg(
            communication.any().alias("_comm"),
            pl.len().cast(pl.Int64).alias("count"),
            pl.col("dur_ns").sum().alias("dur_ns"),
        )
        .with_columns(category=pl.when("_comm").then(pl.lit("communication")).otherwise(pl.lit("compute")))
        .sort(["dur_ns", "name"], descending=[True, False])
        .select(list(KERNEL_MIX_SCHEMA))
        .cast(KERNEL_MIX_SCHEMA)  # type: ignore[arg-type]
    )


def summarize(trace: Trace, rank: int | None = None, config: AnalysisConfig | None = None) -> RankSummary:
    """The :class:`RankSummary` of one loaded rank trace."""
    cfg = config or AnalysisConfig()
    meta = trace.meta
    info = meta.distributed or {}
    # Through analyze(), the public entry, so that this keeps working however specs are run
    # (imported here: the registry imports the job specs, which import this module).
    from traceinsight.analysis.report import analyze

    report = analyze(trace, cfg, only=["steps", "gaps"])
    step_result = report.sections["steps"]
    gap_result = report.sections["gaps"]
    assert isinstance(step_result, steps_analysis.StepsResult)
    assert isinstance(gap_result, gaps_analysis.GapsResult)
    windows, has_steps = _windows(trace, step_result)
    found_collectives, dropped = collectives(trace, windows)
    comm_measured_on: CommSource | None = None
    split = _device_split(trace, windows)
    if found_collectives.height:
        comm_measured_on = "device" if bool(found_collectives["on_device"].any()) else "host"
    if comm_measured_on == "host":
        split = split.drop("communication_ns", "exposed_comm_ns").join(
            _host_comm_split(trace, windows, found_collectives), on="step", how="left"
        )
    idle = _idle_by_cause(gap_result.gaps, windows)
    table = (
        windows.join(split, on="step", how="left")
        .join(idle, on="step", how="left")
        .with_columns(pl.exclude("is_warmup").fill_null(0))
        .select([pl.col(c).cast(t) for c, t in STEP_SCHEMA.items()])
    )
    devices = trace.gpu_devices
    device = meta.device(devices[0]) if devices else None
    found_rank = rank if rank is not None else meta.rank
    warnings = list(meta.warnings[:5])
    if dropped:
        warnings.append(
            f"{dropped} collective kernel(s) without collective args left out (launched before the trace began)"
        )
    world = info.get("world_size")
    backend = info.get("backend")
    return RankSummary(
        rank=found_rank if found_rank is not None else 0,
        path=meta.path,
        world_size=world if isinstance(world, int) else None,
        backend=backend if isinstance(backend, str) else None,
        host_name=meta.host_name,
        device_name=device.name if device else None,
        base_time_ns=meta.base_time_ns,
        has_steps=has_steps,
        steps=table,
        collectives=found_collectives,
        kernel_mix=kernel_mix(trace),
        warnings=tuple(warnings),
        comm_measured_on=comm_measured_on,
    )


def with_cache_entry(summary: RankSummary, entry: str | None) -> RankSummary:
    return replace(summary, cache_entry=entry)
