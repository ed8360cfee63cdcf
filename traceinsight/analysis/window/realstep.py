"""The un-profiled step: how long a step takes when the profiler is not recording it.

A traced step carries the profiler's own host time: every recorded event costs the host some
microseconds, which lengthen the step wherever the host is on its critical path and nowhere
else (a GPU-bound step hides them behind queued work). Three clocks, best first:

- **recorded**: capture timed steps the schedule left unprofiled (``TraceMeta.unprofiled_steps``);
  the median of those (the run's first step left out when others exist: it holds start-up).
- **model**: the trace's dependency graph replayed with each host stretch shortened by the
  profiler's cost of the events recorded there (:class:`RemoveProfilerCost`), at the low and
  the high end of the per-event cost measured on recordings timed both ways
  (``sample_traces/realclock/``); when the replay does not give back the traced steps within
  :data:`REPLAY_TOLERANCE`, a bounded subtraction instead (never below the GPU's busy time
  per step).
- **traced**: nothing to estimate from (no steps, no host events): the trace is the clock.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import polars as pl

from traceinsight.analysis.core.memo import per_trace
from traceinsight.analysis.whatif.model import validation
from traceinsight.analysis.whatif.shared import recorded, replayed_steps
from traceinsight.analysis.whatif.transforms import RemoveProfilerCost
from traceinsight.trace.model import Trace, UnprofiledSteps

# Host cost of one recorded event (µs), low and high. For each recording in
# sample_traces/realclock/ (12 workloads on two H200 hosts, torch 2.11, each step also timed
# without the profiler in the same process), the one per-event cost at which the replay gives
# the measured step: 0.89–5.56 µs over the 21 recordings that have one (a GPU-bound step has
# none); `python sample_traces/realclock_table.py --fit` prints them. The cost per event rose
# with the workload's Python and operator density (a loop of in-place ops 0.9 µs, views 1.6,
# model training steps 2.5–4.9, HF decode and inference 3.9–5.6); by what was recorded
# (shapes or not, with_stack's Python frames, profile_memory's allocator events) it did not
# differ beyond the hosts' run-to-run noise (the un-profiled step moved by up to 30 % between
# rounds), so one range applies to every class of event (but for the low end of Python frames,
# below). Three workloads recorded afterwards on a third host (held out) fitted 3.1–4.7 µs,
# inside the range; docs/window.md checks it on 27 more traces, 24 of them on an H100.
COST_US: tuple[float, float] = (0.85, 5.6)
# with_stack's Python frames can cost less: 0.25 µs a frame at the least, measured as the time
# with_stack added over the frames it added (sample_traces/profiler_cost.json, 12 runs,
# 0.25–1.5 µs); the high end stays the one above.
PYTHON_COST_LO_US = 0.25
# The GPU's own time for the same work varied by up to 3.7 % between profiled and plain runs
# of a GPU-bound loop (four 8192³ bf16 GEMMs): the range is widened by this share of the GPU's
# busy time per step on both sides (the high end may then pass the traced step: a run of the
# program can be that much slower on its own).
DEVICE_TOLERANCE = 0.05
# The replay must give back the traced steps within this share to be trusted (whatif.model).
REPLAY_TOLERANCE = 0.05
COST_CLASSES = ("op", "runtime", "python", "memory")
HOST_KINDS = ("cpu_op", "user_annotation", "runtime", "driver", "python")


@dataclass(frozen=True)
class RealStep:
    """The un-profiled step (per-step device window, as ``sections/steps.py`` defines a step)."""

    step_ns: int  # best estimate of the un-profiled step
    lo_ns: int
    hi_ns: int
    traced_ns: int  # the profiled median steady step
    source: Literal["recorded", "model", "traced"]
    method: str  # one sentence a user reads: how it was obtained

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def cost_ns(self) -> int:
        """The profiler's cost per step, best estimate: traced − step (never below 0)."""
        return max(self.traced_ns - self.step_ns, 0)

    @property
    def cost_lo_ns(self) -> int:
        """The profiler's cost per step at the low end: traced − hi (never below 0)."""
        return max(self.traced_ns - self.hi_ns, 0)

    @property
    def cost_hi_ns(self) -> int:
        return max(self.traced_ns - self.lo_ns, 0)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.2f} ms"


def steady_steps(steps: pl.DataFrame) -> pl.DataFrame:
    """Steps that are neither the warm-up nor outliers (all of them when none is left)."""
    if steps.height == 0:
        return steps
    steady = steps.filter(~pl.col("is_warmup").fill_null(False) & ~pl.col("is_outlier").fill_null(False))
    return steady if steady.height else steps


def shapes_recorded(trace: Trace) -> bool:
    """Whether the profiler recorded input shapes (the trace's ops carry Input Dims)."""
    ops = trace.events.filter(pl.col("kind").cast(pl.String) == "cpu_op")
    return bool(ops.height) and ops["input_dims"].null_count() < ops.height


def costs_ns() -> tuple[dict[str, float], dict[str, float]]:
    """The low and high per-event cost (ns) of every class."""
    lo, hi = COST_US
    low = {c: lo * 1e3 for c in COST_CLASSES}
    low["python"] = PYTHON_COST_LO_US * 1e3
    return low, {c: hi * 1e3 for c in COST_CLASSES}


def _recorded(timed: UnprofiledSteps, traced_ns: int, model: RealStep | None) -> RealStep | None:
    """From capture's timed steps: the device clock when it was taken, else the wall clock."""
    use_device = bool(timed.device_ns) and any(d is not None for d in timed.device_ns)
    values = timed.device_ns if use_device else timed.wall_ns
    pairs = [(s, v) for s, v in zip(timed.step, values, strict=True) if v is not None and v > 0]
    # the run's first step holds start-up (lazy init, allocator warm-up, autotuning): it is
    # not the program's step, and alone it is no clock
    chosen = [v for s, v in pairs if s > 0]
    if not chosen:
        return None
    clock = "CUDA events" if use_device else "wall clock"
    compare = (
        f"; the calibrated model estimates {_ms(model.lo_ns)}–{_ms(model.hi_ns)} from the trace"
        if model is not None and model.source == "model"
        else ""
    )
    return RealStep(
        step_ns=round(statistics.median(chosen)),
        lo_ns=min(chosen),
        hi_ns=max(chosen),
        traced_ns=traced_ns,
        source="recorded",
        method=f"timed by capture on {len(chosen)} step(s) the schedule ran without the profiler, by "
        f"{clock}: median {_ms(statistics.median(chosen))}, traced {_ms(traced_ns)}{compare}",
    )


def memory_at(trace: Trace) -> tuple[tuple[int, int, int], ...]:
    """(pid, tid, ts_ns) of the allocator events, once per trace (the window and the findings'
    clock both take the profiler's cost out, and one tuple lets the replays be shared)."""
    def compute() -> tuple[tuple[int, int, int], ...]:
        mem = trace.memory.select("pid", "tid", "ts_ns").drop_nulls()
        return tuple(zip(mem["pid"].to_list(), mem["tid"].to_list(), mem["ts_ns"].to_list(), strict=True))

    return per_trace(trace, "memory_at", compute)


def _replayed(trace: Trace, steady: list[int], costs: dict[str, float], memory: tuple[tuple[int, int, int], ...]) -> int | None:
    graph, _ = recorded(trace)
    change = RemoveProfilerCost(tuple(sorted(costs.items())), memory)
    after, _ = replayed_steps(graph, (change,))
    values = after.filter(pl.col("step").is_in(steady))["device_dur_ns"]
    return round(float(values.median())) if values.len() else None  # type: ignore[arg-type]


def _replay_explains(trace: Trace, steps: pl.DataFrame) -> bool:
    graph, timeline = recorded(trace)
    if graph.steps.height == 0:
        return False
    check = validation(graph, timeline, steps.select("step", "device_dur_ns"))
    return check.height > 0 and bool((check["error_pct"].fill_null(100.0) <= REPLAY_TOLERANCE * 100).all())


def _host_events_per_step(trace: Trace, steps: pl.DataFrame) -> float:
    """Recorded host events and allocator events per step on the busiest thread (threads run
    side by side: their costs do not add up)."""
    kind = pl.col("kind").cast(pl.String)
    host = trace.events.filter(kind.is_in(HOST_KINDS) & pl.col("step").is_not_null())
    if host.height == 0:
        return 0.0
    busiest = host.group_by("pid", "tid").len().sort("len", descending=True).row(0, named=True)
    memory = trace.memory.filter((pl.col("pid") == busiest["pid"]) & (pl.col("tid") == busiest["tid"])).height
    return float(busiest["len"] + memory) / steps.height


def busy_ns(steady: pl.DataFrame) -> int:
    """The GPU's busy time in the median steady step (kernels, copies, sets, communication)."""
    busy = steady.select(pl.sum_horizontal("kernel_ns", "memcpy_ns", "memset_ns", "communication_ns").median()).item()
    return int(busy or 0)


def _modelled(trace: Trace, steps: pl.DataFrame, traced_ns: int) -> RealStep:
    lo_cost, hi_cost = costs_ns()
    lo_us, hi_us = COST_US
    steady = steady_steps(steps)
    rate = f"{lo_us:g}–{hi_us:g} µs per recorded event"
    if _replay_explains(trace, steps):
        memory = memory_at(trace)
        numbers = steady["step"].to_list()
        fast = _replayed(trace, numbers, hi_cost, memory)
        slow = _replayed(trace, numbers, lo_cost, memory)
        if fast is not None and slow is not None:
            lo_ns = max(round(min(fast, traced_ns) - DEVICE_TOLERANCE * busy_ns(steady)), 0)
            hi_ns = min(slow, traced_ns) + round(DEVICE_TOLERANCE * busy_ns(steady))
            return RealStep(
                step_ns=round((lo_ns + hi_ns) / 2),
                lo_ns=lo_ns,
                hi_ns=max(hi_ns, lo_ns),
                traced_ns=traced_ns,
                source="model",
                method=f"estimated by replaying the trace's dependency graph with the profiler's host cost "
                f"({rate}, calibrated on recordings timed without the profiler) taken out where it was "
                f"spent: {_ms(lo_ns)}–{_ms(hi_ns)} for the traced {_ms(traced_ns)}",
            )
    # The replay does not explain this trace: subtract the cost, bounded by the GPU's busy time.
    per_step = _host_events_per_step(trace, steps)
    floor = busy_ns(steady)
    hi_ns = max(traced_ns - round(per_step * lo_cost["op"]), floor)
    lo_ns = max(round(max(traced_ns - round(per_step * hi_cost["op"]), floor) - DEVICE_TOLERANCE * floor), 0)
    hi_ns = min(max(hi_ns, lo_ns), traced_ns) + round(DEVICE_TOLERANCE * floor)
    return RealStep(
        step_ns=round((lo_ns + hi_ns) / 2),
        lo_ns=lo_ns,
        hi_ns=hi_ns,
        traced_ns=traced_ns,
        source="model",
        method=f"estimated by subtracting the profiler's host cost ({per_step:,.0f} events per step on the "
        f"busiest thread at {rate}) from the traced {_ms(traced_ns)}, never below the GPU's busy time per "
        f"step ({_ms(floor)}): the dependency-graph replay does not give back this trace's steps within "
        f"{REPLAY_TOLERANCE:.0%}, so where the host was on the critical path is not known",
    )


def real_step(trace: Trace, steps: pl.DataFrame) -> RealStep | None:
    """The un-profiled step of ``trace`` (``steps``: the steps section's rows); None without steps."""
    if steps.height == 0:
        return None
    steady = steady_steps(steps)
    traced_ns = round(float(steady["device_dur_ns"].median() or 0))  # type: ignore[arg-type]
    if traced_ns <= 0:
        return None
    host = trace.events.select("kind").filter(pl.col("kind").cast(pl.String).is_in(HOST_KINDS)).height
    model = _modelled(trace, steps, traced_ns) if host else None
    timed = trace.meta.unprofiled_steps
    if timed is not None:
        found = _recorded(timed, traced_ns, model)
        if found is not None:
            return found
    if model is not None:
        if timed is not None:
            # capture timed only the run's first step (wait=1): start-up, not the step
            return replace(model, method=model.method + "; capture timed only the run's first step without the "
                           "profiler, which holds start-up (record with --wait 3 to time the step)")
        return model
    return RealStep(
        step_ns=traced_ns, lo_ns=traced_ns, hi_ns=traced_ns, traced_ns=traced_ns, source="traced",
        method="no host events recorded to estimate the profiler's cost from: the traced step is the clock",
    )

