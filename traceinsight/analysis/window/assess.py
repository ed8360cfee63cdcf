"""Is the recorded window steady state? One function per thing that makes it not so.

Each returns a :class:`Flag` (or None): what was seen, its evidence and figures, whether it
*limits* steady-state advice, what to record instead, and the host spans whose idle time is
not steady state (``excluded``: findings leave the device idle inside them out).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.host_names import (
    GRAPH_LAUNCH_PATTERN,
    SYNC_CALL_PATTERN,
    SYNC_OPS,
    gpu_work_calls,
)
from traceinsight.analysis.lib.timeline import analysis_window, busy_intervals
from traceinsight.trace.model import Trace
from traceinsight.trace.schema import PROFILER_STEP_PREFIX

SPAN_SCHEMA = pl.Schema({"start_ns": pl.Int64, "end_ns": pl.Int64})

# A one-time call: the first of its name, this long, this many times its later calls' median
# (or the only call), and spent mostly while the device sat idle (a call that waits on queued
# GPU work, a sync, keeps the device busy and is not start-up).
STARTUP_CALL_MIN_NS = 20_000_000
STARTUP_FACTOR = 10.0
STARTUP_IDLE_SHARE = 0.5
# Loading kernel code: module/library loads at any length, and the first launch of a kernel
# when it takes this long and this many times the median launch (lazy module loading).
MODULE_LOAD = r"^cu(Module|Library)(Load|GetFunction|GetKernel)|^hipModule(Load|GetFunction)|^cuKernelGetFunction"
FIRST_LAUNCH_MIN_NS = 1_000_000
FIRST_LAUNCH_FACTOR = 50.0
# One-time work limits the window when it covers this share of it.
LIMIT_SHARE = 0.05
# CUDA/HIP graph capture and instantiation.
CAPTURE = r"^(cuda|hip)StreamBeginCapture|^(cuda|hip)StreamEndCapture|^(cuda|hip)GraphInstantiate|^cu(StreamBeginCapture|StreamEndCapture|GraphInstantiate)"
GRAPH_LAUNCH = GRAPH_LAUNCH_PATTERN
CAPTURE_LIMIT_SHARE = 0.25
# Graph replays whose kernels are missing limit the window when they are this share of launches.
UNTRACED_REPLAY_SHARE = 0.5
# Kineto's category for the CUPTI range profiler's per-kernel counter events (profiler_metrics).
CUPTI_RANGE_CAT = "cuda_profiler_range"
# Work launched before recording began is said above this share of the busy time (a note).
PRE_WINDOW_NOTE_SHARE = 0.01
# Idle inside graph replays (between their own kernels) limits the window above this share of idle.
REPLAY_IDLE_SHARE = 0.25
REPLAY_GAP_NS = 10_000
# Device work that starts on an idle device this long after its launch call, every time the
# device goes from idle to busy: nothing the trace shows held it (the device clock is offset
# from the host's, or the GPU ran work the trace does not show). A device that was idle starts
# a launched kernel within tens of µs; a kernel's first launch loading its code is inside the
# launch call, not after it.
LATE_START_NS = 5_000_000
# Device work starting this long after the previous work on its device ended starts an idle device.
IDLE_START_GAP_NS = 50_000


@dataclass(frozen=True)
class Flag:
    id: str
    title: str
    limits: bool
    evidence: str
    advice: str | None = None
    figures: tuple[tuple[str, float], ...] = ()
    excluded: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=SPAN_SCHEMA))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "limits": self.limits,
            "evidence": self.evidence,
            "advice": self.advice,
            "figures": {k: v for k, v in self.figures},
            "excluded_ns": span_ns(self.excluded),
        }


def span_ns(spans: pl.DataFrame) -> int:
    if spans.height == 0:
        return 0
    return int(intervals.total_ns(intervals.union(spans)))  # type: ignore[arg-type]


def _ms(ns: float) -> str:
    return f"{ns / 1e9:.2f} s" if ns >= 1e9 else f"{ns / 1e6:.1f} ms"


# torch.compile's own frames, named in words rather than by their internal names.
COMPILE_FRAME = r"(?i)dynamo|compile|inductor|^## Call CompiledFxGraph|^Torch-Compiled Region|OutputGraph"


def _plain(name: str) -> str:
    if re.search(COMPILE_FRAME, name):
        return "torch.compile compiling"
    return f"a first {name}"


def _host_calls(trace: Trace) -> pl.DataFrame:
    kind = pl.col("kind").cast(pl.String)
    return (
        trace.events.select("id", "ts_ns", "end_ns", "dur_ns", "name", "kind")
        .filter(kind.is_in(["cpu_op", "user_annotation", "runtime", "driver"]) & (pl.col("dur_ns") > 0))
        .select("id", "ts_ns", "end_ns", "dur_ns", pl.col("name").cast(pl.String), kind.alias("kind"))
    )


def startup(trace: Trace, window_ns: int) -> Flag | None:
    """Lazy CUDA/HIP initialisation, module loading, first calls and first launches."""
    calls = _host_calls(trace).sort("ts_ns")
    name = pl.col("name")
    firsts = (
        calls.filter(
            ~name.str.contains(SYNC_CALL_PATTERN) & ~name.is_in(list(SYNC_OPS)) & ~name.str.starts_with(PROFILER_STEP_PREFIX)
        )
        .group_by("name", maintain_order=True)
        .agg(
            pl.col("id", "ts_ns", "end_ns", "dur_ns", "kind").first(),
            pl.col("dur_ns").slice(1).median().alias("later_ns"),
        )
        .filter(
            (pl.col("dur_ns") >= STARTUP_CALL_MIN_NS)
            & (pl.col("later_ns").is_null() | (pl.col("dur_ns") >= STARTUP_FACTOR * pl.col("later_ns")))
            # An annotation is a first call only next to later ones (a single annotation may
            # wrap the whole run).
            & ((pl.col("kind") != "user_annotation") | pl.col("later_ns").is_not_null())
        )
    )
    # Spent mostly with the device idle: initialisation, not a wait on queued work.
    busy = busy_intervals(trace).select("start_ns", "end_ns")
    firsts = intervals.covered_ns(firsts.rename({"ts_ns": "start_ns"}), busy, out="busy_ns").filter(
        pl.col("busy_ns") <= (1 - STARTUP_IDLE_SHARE) * pl.col("dur_ns")
    )
    # Name the outermost calls only: a first aten::to holds its first aten::_to_copy.
    inner = firsts.join_where(
        firsts.select(pl.col("id").alias("_oid"), pl.col("start_ns").alias("_os"), pl.col("end_ns").alias("_oe")),
        pl.col("_os") <= pl.col("start_ns"),
        pl.col("_oe") >= pl.col("end_ns"),
        pl.col("_oid") != pl.col("id"),
    ).filter((pl.col("_oe") - pl.col("_os") > pl.col("dur_ns")) | (pl.col("_oid") < pl.col("id")))
    firsts = firsts.join(inner.select("id").unique(), on="id", how="anti")
    loads = calls.filter(name.str.contains(MODULE_LOAD)).rename({"ts_ns": "start_ns"})
    # Kernels launched by a launch call: a copy call that takes long is a copy, not code loading.
    launches = trace.kernels.filter(
        pl.col("launch_id").is_not_null()
        & (pl.col("kind").cast(pl.String) == "kernel")
        & pl.col("launch_name").cast(pl.String).str.contains("(?i)launch")
    ).select(
        "name", "launch_id", "launch_ts_ns", "launch_end_ns"
    )
    launch_ns = (launches["launch_end_ns"] - launches["launch_ts_ns"]).median() if launches.height else None
    first_launches = pl.DataFrame(schema=SPAN_SCHEMA)
    if isinstance(launch_ns, (int, float)) and launch_ns > 0:
        first_launches = (
            launches.sort("launch_ts_ns")
            .group_by("name", maintain_order=True)
            .first()
            .filter(
                (pl.col("launch_end_ns") - pl.col("launch_ts_ns") >= FIRST_LAUNCH_MIN_NS)
                & (pl.col("launch_end_ns") - pl.col("launch_ts_ns") >= FIRST_LAUNCH_FACTOR * launch_ns)
            )
            .select("name", pl.col("launch_ts_ns").alias("start_ns"), pl.col("launch_end_ns").alias("end_ns"))
            .sort(pl.col("end_ns") - pl.col("start_ns"), descending=True)
        )
    spans = pl.concat([firsts.select(list(SPAN_SCHEMA)), loads.select(list(SPAN_SCHEMA)), first_launches.select(list(SPAN_SCHEMA)).cast(SPAN_SCHEMA)])
    total = span_ns(spans)
    if total <= 0 or total < FIRST_LAUNCH_MIN_NS:
        return None
    # The outermost first calls by what they are, longest first (two compilations read as one).
    by_label: dict[str, int] = {}
    for r in firsts.sort("dur_ns", descending=True).iter_rows(named=True):
        by_label[_plain(r["name"])] = by_label.get(_plain(r["name"]), 0) + int(r["dur_ns"])
    named = [f"{label} {_ms(ns)}" for label, ns in list(by_label.items())[:3]]
    if loads.height:
        named.append(f"{loads.height} kernel-code loads {_ms(span_ns(loads.select(list(SPAN_SCHEMA))))}")
    if first_launches.height:
        top_launch = first_launches.row(0, named=True)
        kernel = str(top_launch["name"])
        kernel = kernel if len(kernel) <= 60 else kernel[:57] + "..."
        named.append(
            f"{first_launches.height} first launch(es) of a kernel (loading its code), the longest "
            f"{_ms(top_launch['end_ns'] - top_launch['start_ns'])} for {kernel}"
        )
    share = total / window_ns if window_ns > 0 else 0.0
    return Flag(
        id="startup",
        title="start-up in the window",
        limits=share >= LIMIT_SHARE,
        evidence=f"{_ms(total)} ({100 * share:.0f} % of the window) in one-time start-up: " + ", ".join(named),
        advice="profile after warm-up, e.g. schedule(wait=1, warmup=2, active=3)",
        figures=(("startup_ns", float(total)), ("startup_share_pct", round(100 * share, 2))),
        excluded=intervals.union(spans),
    )


def graph_capture(trace: Trace, window_ns: int) -> Flag | None:
    """Stream capture and graph instantiation: the captured work is recorded, not executed."""
    calls = _host_calls(trace).filter(pl.col("name").str.contains(CAPTURE))
    if calls.height == 0:
        return None
    begins = calls.filter(pl.col("name").str.contains("BeginCapture")).height
    lo = int(calls["ts_ns"].min())  # type: ignore[arg-type]
    hi = int(calls["end_ns"].max())  # type: ignore[arg-type]
    busy = busy_intervals(trace)
    executed = int(intervals.total_ns(intervals.clip(busy, lo, hi)))  # type: ignore[arg-type]
    share = (hi - lo) / window_ns if window_ns > 0 else 0.0
    limits = share >= CAPTURE_LIMIT_SHARE
    # Around a capture the host warms the graph up and allocates its pool: when capture limits
    # the window, none of the window is steady state.
    if limits:
        events = trace.events.filter(pl.col("kind").cast(pl.String) != "other")
        lo, hi = int(events["ts_ns"].min()), int(events["end_ns"].max())  # type: ignore[arg-type]
    return Flag(
        id="graph_capture",
        title="graph capture in the window",
        limits=limits,
        evidence=f"{begins} stream capture(s) and {calls.height - begins} end/instantiate calls over "
        f"{100 * share:.0f} % of the window; the GPU ran {_ms(executed)} meanwhile: captured work is recorded, not run",
        advice="profile graph replays, not their capture",
        figures=(("captures", float(begins)), ("capture_span_ns", float(hi - lo)), ("executed_ns", float(executed))),
        excluded=pl.DataFrame({"start_ns": [lo], "end_ns": [hi]}, schema=SPAN_SCHEMA),
    )


def late_device_start(trace: Trace, window_ns: int) -> Flag | None:
    """Device work that waited long after its launch although its device was idle, every time:
    host-device times (launch latency, idle blamed on the host, an iteration's latency) cannot
    be read from this trace."""
    work = trace.kernels.filter(pl.col("device").is_not_null()).sort("device", "ts_ns")
    if work.height == 0:
        return None
    work = work.with_columns(prev_end=pl.col("end_ns").shift(1).cum_max().over("device"))
    starts = work.filter(
        (pl.col("prev_end").is_null() | (pl.col("ts_ns") - pl.col("prev_end") > IDLE_START_GAP_NS))
        & pl.col("launch_end_ns").is_not_null()
    ).with_columns(late_ns=pl.col("ts_ns") - pl.col("launch_end_ns"))
    if starts.height == 0:
        return None
    least = int(starts["late_ns"].min())  # type: ignore[arg-type]
    if least < LATE_START_NS:
        return None
    first = work.group_by("device").agg(pl.col("ts_ns").min().alias("first_ns"))
    lo, _ = analysis_window(trace)
    excluded = first.select(pl.lit(lo, pl.Int64).alias("start_ns"), pl.col("first_ns").alias("end_ns")).filter(
        pl.col("end_ns") > pl.col("start_ns")
    )
    before_ns = span_ns(excluded)
    share = before_ns / window_ns if window_ns > 0 else 0.0
    return Flag(
        id="late_device_start",
        title="device work starts long after its launch on an idle device",
        limits=share >= LIMIT_SHARE,
        evidence=f"each time the GPU went from idle to busy ({starts.height} time(s)), its work started at least "
        f"{_ms(least)} after the launch call, with nothing traced in between: the device clock is offset from the "
        "host's (seen in ROCm traces), or the GPU ran work this trace does not show; the idle before the first device "
        f"work ({_ms(before_ns)}, {100 * share:.0f} % of the window) is left out, and launch latencies, idle blamed "
        f"on the host and iteration latencies read long by up to {_ms(least)}",
        advice="record with the GPU to itself, and compare the host and device clocks (a launch followed by "
        "torch.cuda.synchronize() shows the offset)",
        figures=(("least_late_ns", float(least)), ("idle_starts", float(starts.height)), ("before_first_work_ns", float(before_ns))),
        excluded=excluded.cast(SPAN_SCHEMA),
    )


def gpu_not_recorded(trace: Trace) -> Flag | None:
    """The host launched GPU work and the trace holds none of it: the GPU's activity was not
    recorded (CUDA activity off, CUPTI's range profiler in its place, or its records lost).

    The runtime and driver calls come from CUPTI's callbacks on the host, the kernels, copies
    and memsets from its activity records: a trace can hold the first without the second, and
    then "no GPU work" would be false. This limits the window: nothing on the GPU can be read.
    """
    if trace.has_gpu:
        return None
    calls = gpu_work_calls(trace.events)
    if calls.height == 0:
        return None
    total = int(calls["calls"].sum())
    named = ", ".join(f"{name} \u00d7{n:,}" for name, n in calls.head(3).iter_rows())
    evidence = (
        f"{total:,} host calls put work on the GPU ({named}) and the trace holds no kernel, copy "
        "or memset: the GPU's activity was not recorded"
    )
    ranges = trace.events.filter(pl.col("cat").cast(pl.String) == CUPTI_RANGE_CAT).height
    if ranges:
        evidence += (
            f"; {ranges:,} CUPTI range-profiler events ({CUPTI_RANGE_CAT}: per-kernel counters, no "
            "timeline) stand in for it, so the trace was recorded with profiler_metrics"
        )
    if ranges:
        advice = (
            "record the timeline in a run of its own, without experimental_config's profiler_metrics, with "
            "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"
        )
    else:
        advice = (
            "record with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] (ROCm too), in a process where "
            "CUPTI loads (libcupti on the library path: the profiler warns at start when it does not), and "
            "export the trace after the profiler stops (on_trace_ready, or after the with block) so that the "
            "GPU's records are flushed into it"
        )
    return Flag(
        id="gpu_not_recorded",
        title="GPU activity not recorded",
        limits=True,
        evidence=evidence,
        advice=advice,
        figures=(("gpu_work_calls", float(total)), ("cupti_range_events", float(ranges))),
    )


def partial_gpu(trace: Trace, window_ns: int) -> Flag | None:
    """GPU work the trace shows only in part: replays without their kernels, work queued earlier."""
    name = pl.col("name").cast(pl.String)
    graph_launches = trace.events.filter(pl.col("kind").cast(pl.String).is_in(["runtime", "driver"]) & name.str.contains(GRAPH_LAUNCH))
    traced = trace.kernels.filter(pl.col("launch_id").is_not_null()).select(pl.col("launch_id").alias("id")).unique()
    untraced = graph_launches.join(traced, on="id", how="anti")
    work = trace.kernels.filter(pl.col("device").is_not_null())
    busy_ns = int(work["dur_ns"].sum() or 0)
    # Work with no launch in the trace that ran before any work the trace did launch: queued
    # before recording began (unlinked work later on may only lack its correlation).
    first_linked = work.filter(pl.col("launch_id").is_not_null())["ts_ns"].min()
    before = work.filter(pl.col("launch_id").is_null() & (pl.col("ts_ns") < (first_linked if first_linked is not None else 2**62)))
    before_ns = int(before["dur_ns"].sum() or 0)
    parts = []
    limits = False
    figures: list[tuple[str, float]] = []
    if untraced.height:
        share = untraced.height / graph_launches.height
        limits |= share >= UNTRACED_REPLAY_SHARE
        parts.append(
            f"{untraced.height} of {graph_launches.height} graph replays have no traced kernels: the GPU ran them, "
            "the trace shows it idle"
        )
        figures.append(("untraced_replays", float(untraced.height)))
    if before_ns > 0 and busy_ns > 0 and before_ns >= PRE_WINDOW_NOTE_SHARE * busy_ns:
        # A note: the queue's tail is real work, it only has no launch to read.
        share = before_ns / busy_ns
        parts.append(f"{_ms(before_ns)} of GPU work ({100 * share:.0f} % of it) was launched before recording began")
        figures.append(("pre_window_work_ns", float(before_ns)))
    # Idle between the kernels of one replay: a graph runs without the host, so idle there is
    # graph nodes the trace does not show (or waits inside the graph), not a host cause.
    replays = (
        trace.kernels.filter(pl.col("launch_name").cast(pl.String).fill_null("").str.contains(GRAPH_LAUNCH) & pl.col("device").is_not_null())
        .group_by("launch_id", "device")
        .agg(pl.col("ts_ns").min().alias("start_ns"), pl.col("end_ns").max())
    )
    inside = intervals.difference(replays.select("device", "start_ns", "end_ns"), busy_intervals(trace), by=["device"])
    # A replay dispatches its nodes back to back: a few µs between kernels is the graph's own
    # dispatch; a stretch as long as an idle gap is work the trace does not show.
    inside = inside.filter(pl.col("end_ns") - pl.col("start_ns") >= REPLAY_GAP_NS)
    inside_ns = int((inside["end_ns"] - inside["start_ns"]).sum() or 0)
    idle_ns = max(window_ns - span_ns(busy_intervals(trace).select(list(SPAN_SCHEMA))), 0)
    if inside_ns > 0 and idle_ns > 0 and inside_ns >= REPLAY_IDLE_SHARE * idle_ns:
        limits = True
        parts.append(
            f"{_ms(inside_ns)} of idle time ({100 * inside_ns / idle_ns:.0f} % of it) lies inside CUDA-graph replays, "
            "between their traced kernels: graph work the trace does not show, not the host"
        )
        figures.append(("idle_inside_replays_ns", float(inside_ns)))
    if not parts:
        return None
    # Idle while an untraced replay may have run (from its launch on), and inside replays.
    excluded = pl.concat(
        [untraced.select(pl.col("ts_ns").alias("start_ns"), "end_ns").cast(SPAN_SCHEMA), inside.select(list(SPAN_SCHEMA)).cast(SPAN_SCHEMA)]
    )
    return Flag(
        id="partial_gpu",
        title="GPU work traced only in part",
        limits=limits,
        evidence="; ".join(parts),
        advice="record with the profiler active before the work is launched, and with CUDA-graph kernels "
        "traced (recent PyTorch records the kernels of replays)",
        figures=tuple(figures),
        excluded=excluded,
    )


def steps(step_count: int, empty_steps: int, source: str | None = "ProfilerStep") -> Flag | None:
    """No steps, one step, steps that launched no GPU work, or iterations found without
    ProfilerStep (``source``: how the steps were found, see Trace.step_source)."""
    if step_count and source not in (None, "ProfilerStep"):
        return Flag(
            id="steps",
            title="iterations without ProfilerStep",
            limits=False,
            evidence=f"no ProfilerStep in the trace: {step_count} loop iterations found from "
            + (
                f"a repeated span ({source.removeprefix('repeated span').strip()}) stand in for steps"
                if source.startswith("repeated span")
                else f"a top-level call recurring once per iteration ({source.removeprefix('repeated call').strip()}) "
                "stand in for steps; each runs from one call to the next"
                if source.startswith("repeated call")
                else "a periodic kernel sequence stand in for steps; each runs from the top-level "
                "host call that launched its first kernel to the next one's"
            ),
            advice="call prof.step() or wrap each iteration in record_function to mark the iterations yourself",
            figures=(("steps", float(step_count)),),
        )
    if step_count == 0:
        return Flag(
            id="steps",
            title="no steps",
            limits=False,
            evidence="no ProfilerStep in the trace, and no repeating loop iteration found in it: the whole window "
            "is read as one span, start-up included if it was recorded",
            advice="call prof.step() every iteration (or wrap each in record_function) so that steps, and the "
            "warm-up step, can be told apart",
        )
    if step_count == 1:
        return Flag(
            id="steps",
            title="a single step",
            limits=False,
            evidence="one ProfilerStep: figures are one sample, and a first iteration carries one-time costs",
            advice="profile several steps after warm-up, e.g. schedule(wait=1, warmup=2, active=3)",
            figures=(("steps", 1.0),),
        )
    if empty_steps:
        return Flag(
            id="steps",
            title="steps without GPU work",
            limits=False,
            evidence=f"{empty_steps} of {step_count} steps launched no GPU work",
            figures=(("empty_steps", float(empty_steps)),),
        )
    return None
