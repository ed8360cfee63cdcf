"""The ``profiler_overhead`` flag: the profiler's own host time in the traced step, from the
window's un-profiled step (:mod:`.realstep`), and what it means for host-time findings."""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.window.assess import Flag, _ms
from traceinsight.analysis.window.realstep import COST_US, RealStep
from traceinsight.trace.model import Trace

PROFILED_HOST_KINDS = ("cpu_op", "runtime", "driver", "user_annotation", "python")
# The estimate is a note when its upper end reaches this share of the step, and lowers host-time
# findings when its lower end does.
PROFILER_NOTE_SHARE = 0.10


def _events_per_step(trace: Trace, steps: pl.DataFrame) -> tuple[float, float, float]:
    """Host events (other than Python frames) and Python frames the profiler recorded per
    step on the busiest thread (threads run side by side: their costs do not add up), and the
    median step's length (ns). Over the steps when there are any, else the whole trace."""
    host = trace.events.select("kind", "step", "pid", "tid").filter(pl.col("kind").cast(pl.String).is_in(PROFILED_HOST_KINDS))
    if steps.height:
        host = host.filter(pl.col("step").is_in(steps["step"].implode()))
        length = float(steps.select(pl.max_horizontal("host_dur_ns", "device_dur_ns").median()).item() or 0)
    else:
        lo, hi = trace.events["ts_ns"].min(), trace.events["end_ns"].max()
        length = float(hi - lo) if isinstance(lo, int) and isinstance(hi, int) else 0.0
    if host.height == 0:
        return 0.0, 0.0, length
    python = pl.col("kind").cast(pl.String) == "python"
    busiest = (
        host.group_by("pid", "tid")
        .agg(other=(~python).sum(), python=python.sum())
        .sort(pl.col("other") + pl.col("python"), descending=True)
        .row(0, named=True)
    )
    count = max(steps.height, 1)
    return busiest["other"] / count, busiest["python"] / count, length


def profiler_overhead(trace: Trace, steps: pl.DataFrame, real: RealStep | None = None) -> Flag | None:
    """The profiler's own host time: the traced step less the un-profiled one (``real``, see
    :mod:`.realstep`: timed by capture, or estimated by the calibrated per-event cost model);
    without steps, the events recorded in the window at the per-event cost. with_stack adds
    Python events and profile_memory allocator events. Said when the upper estimate reaches
    PROFILER_NOTE_SHARE of the step, or with either option."""
    python = int(trace.events.filter(pl.col("kind").cast(pl.String) == "python").height)
    memory = int(trace.memory.height)
    other, frames, length_ns = _events_per_step(trace, steps)
    per_step = other + frames
    estimated = real is not None and real.source != "traced"
    if real is not None and estimated:
        length_ns = float(real.traced_ns)
        cost_lo_ns, cost_hi_ns, cost_ns = float(real.cost_lo_ns), float(real.cost_hi_ns), float(real.cost_ns)
    else:
        lo_us, hi_us = COST_US
        cost_lo_ns, cost_hi_ns = (min(per_step * c * 1_000, length_ns) if length_ns > 0 else per_step * c * 1_000 for c in (lo_us, hi_us))
        cost_ns = (cost_lo_ns + cost_hi_ns) / 2
    share_lo, share_hi, share = ((100.0 * c / length_ns) if length_ns > 0 else 0.0 for c in (cost_lo_ns, cost_hi_ns, cost_ns))
    if python == 0 and memory == 0 and share_hi < PROFILER_NOTE_SHARE * 100:
        return None
    count = max(steps.height, 1)
    unit = "per step" if steps.height else "in the window"
    parts = []
    if python:
        parts.append(f"with_stack=True: {python} Python function events ({python // count} {unit})")
    if memory:
        parts.append(f"profile_memory=True: {memory} allocator events ({memory // count} {unit})")
    what = f"{per_step:,.0f} host events recorded {unit} on the busiest thread"
    if real is not None and estimated:
        clock = "timed without the profiler" if real.source == "recorded" else "estimated without the profiler"
        estimate = (
            f"{what}; the step {clock}: {_ms(real.step_ns)} ({_ms(real.lo_ns)}–{_ms(real.hi_ns)}) against "
            f"{_ms(real.traced_ns)} traced, so {cost_lo_ns / 1e6:.2f}–{cost_hi_ns / 1e6:.2f} ms of the median step "
            f"({share_lo:.0f}–{share_hi:.0f} %) is the profiler's own"
        )
    else:
        lo_us, hi_us = COST_US
        estimate = (
            f"{what}; at {lo_us:g}–{hi_us:g} µs of host time per event, {cost_lo_ns / 1e6:.2f}–{cost_hi_ns / 1e6:.2f} ms "
            f"of the {length_ns / 1e6:.2f} ms {'median step' if steps.height else 'window'} ({share_lo:.0f}–{share_hi:.0f} %) "
            "is the profiler's own"
        )
    figures: list[tuple[str, float]] = [
        ("python_events", float(python)),
        ("memory_events", float(memory)),
        ("host_events_per_step", round(per_step, 1)),
        ("cost_lo_ms", round(cost_lo_ns / 1e6, 3)),
        ("cost_hi_ms", round(cost_hi_ns / 1e6, 3)),
        ("cost_lo_pct", round(share_lo, 1)),
        ("cost_hi_pct", round(share_hi, 1)),
        # the best estimate (traced − the un-profiled step's estimate)
        ("cost_ms", round(cost_ns / 1e6, 3)),
        ("cost_pct", round(share, 1)),
    ]
    if real is not None:
        figures += [("real_step_ms", round(real.step_ns / 1e6, 3)), ("real_lo_ms", round(real.lo_ns / 1e6, 3)),
                    ("real_hi_ms", round(real.hi_ns / 1e6, 3)), ("traced_step_ms", round(real.traced_ns / 1e6, 3))]
    return Flag(
        id="profiler_overhead",
        title="profiler overhead on the host",
        limits=False,
        evidence="; ".join([*parts, estimate]) + ": host-side time (and any host- or launch-bound saving) reads "
        "higher than without the profiler",
        advice=None if real is not None and real.source == "recorded" else
        "confirm host- or launch-bound findings by timing the step without the profiler "
        "(CUDA events around a few steps, or `traceinsight capture`, which times the schedule's wait steps)"
        + (", or on a trace recorded without with_stack/profile_memory" if parts else ""),
        figures=tuple(figures),
    )


def _figure(flag: Flag, name: str) -> float:
    return dict(flag.figures).get(name, 0.0)


def overhead_lowers_host_findings(flag: Flag) -> bool:
    """Host-time findings read high on this trace: with_stack/profile_memory were on, or the
    best estimate of the profiler's cost (timed, else modelled) is PROFILER_NOTE_SHARE of the step."""
    recorded = _figure(flag, "python_events") > 0 or _figure(flag, "memory_events") > 0
    return recorded or _figure(flag, "cost_pct") >= PROFILER_NOTE_SHARE * 100


def overhead_summary(flag: Flag) -> str:
    """'with_stack=True, an estimated 4–13 % of the step' (for reasons and the verdict)."""
    options = [o for o, f in (("with_stack=True", "python_events"), ("profile_memory=True", "memory_events")) if _figure(flag, f) > 0]
    estimate = f"an estimated {_figure(flag, 'cost_lo_pct'):.0f}–{_figure(flag, 'cost_hi_pct'):.0f} % of the step"
    return ", ".join([*options, estimate])
