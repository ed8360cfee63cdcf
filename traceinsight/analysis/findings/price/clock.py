"""Savings on the program's clock: each finding priced once, in rank order, on the step as it
runs without the profiler.

The traced step carries the profiler's own host time (``window.real_step``): a host-side fix
priced on it reads high, since part of the host time it would remove is the profiler's. Where
the window has an un-profiled step (recorded by capture, or estimated by the calibrated model)
and the trace replays:

- the *base* is the trace's dependency graph replayed with the profiler's cost taken out
  (:class:`RemoveProfilerCost` at the per-event cost that gives that step);
- the findings with transformations are applied on top of the base one after the other, in rank
  order: each is priced on what the ones above it leave (the replay composes them), so the
  listed savings add up to the saving of doing all of them, which is the base step minus the
  step with every change applied;
- the findings without one keep their estimate, converted to the un-profiled step and bounded
  by what is left.

On every clock, two bounds hold: a finding that only removes host-side time (it claims nothing
but the GPU's idle time) saves at most the idle time the step has left, and no finding saves
more than the step has left. Shares are of the clock's step (``step_ns``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from traceinsight.analysis.findings.catalogue import LEAD_SAVING_PCT, MATERIALITY_PCT, PRICED_AFTER
from traceinsight.analysis.findings.model import Finding
from traceinsight.analysis.findings.price.replayed import Replay, Settled, check
from traceinsight.analysis.findings.price.savings import Estimate
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.whatif.transforms import (
    RemoveProfilerCost,
    Transformation,
    TransformError,
)
from traceinsight.analysis.window.realstep import (
    COST_US,
    RealStep,
    busy_ns,
    costs_ns,
    memory_at,
    steady_steps,
)


@dataclass(frozen=True)
class Clock:
    """The step savings are shares of, and where it came from."""

    source: str  # recorded / estimated / traced
    step_ns: int  # the step every share is of
    traced_ns: int  # the profiled step
    busy_ns: int  # the GPU's busy time in that step

    @property
    def idle_ns(self) -> int:
        return max(self.step_ns - self.busy_ns, 0)


def _host_side(est: Estimate) -> bool:
    """A fix that only gives back idle device time (its claims are all on the idle pool)."""
    pools = {pool for pool, ns in est.claims if ns > 0}
    return bool(pools) and pools == {"idle"}


def clock_of(ctx: FindingContext) -> Clock | None:
    """The clock of this trace: its steps' un-profiled step where the window has one."""
    if ctx.steps is None or ctx.steps.steps.height == 0:
        return None
    real: RealStep | None = None if ctx.window is None or not ctx.clock else ctx.window.real_step
    traced = int(ctx.step_ns or 0)
    # The GPU's busy time in a step: the window's busy share (what the idle pool leaves, the
    # basis every pool claim is of) of the traced step; without a breakdown, the steps' own.
    if ctx.breakdown is not None and ctx.window_ns > 0:
        busy = round(traced * (1.0 - ctx.category_ns("idle") / ctx.window_ns))
    else:
        busy = busy_ns(steady_steps(ctx.steps.steps))
    if real is None or real.source == "traced" or real.step_ns <= 0:
        return Clock("traced", traced, traced, busy) if traced > 0 else None
    source = "recorded" if real.source == "recorded" else "estimated"
    return Clock(source, min(real.step_ns, real.traced_ns), real.traced_ns, min(busy, real.step_ns))


# How close the base's replayed step must come to the clock's, and the secant steps allowed.
BASE_TOLERANCE = 0.05
BASE_STEPS = 3
# Beyond the calibrated range: the line through the range's ends followed at most this many
# times; the device's own step is the replay at FLOOR_COST_FACTOR times the range's top (every
# costed event's host time gone).
EXTEND_STEPS = 3
FLOOR_COST_FACTOR = 1000.0


def profiler_base(ctx: FindingContext, target_ns: int, after_ns: object) -> tuple[tuple[Transformation, ...], int]:
    """The profiler's cost taken out at the per-event cost that replays to ``target_ns`` (the
    clock's step, in the replay's unit), and the base step it replays to. ``after_ns``: replays
    a tuple of transformations to a step."""
    memory = memory_at(ctx.trace)
    lo_cost, hi_cost = costs_ns()

    def at(cost: float) -> tuple[tuple[Transformation, ...], int]:
        t: tuple[Transformation, ...] = (
            RemoveProfilerCost(tuple(sorted({k: cost * v / hi_cost["op"] for k, v in hi_cost.items()}.items())), memory),
        )
        return t, int(after_ns(t))  # type: ignore[operator]

    # The step falls as the cost rises, in proportion while the host is on the path and flat
    # once it is not: the cost that gives the clock's step is found between the two ends by
    # secant steps that keep it bracketed (regula falsi), until the replayed step is within
    # BASE_TOLERANCE of the clock's. One step lands there where the host stays on the path; a
    # loop that turns device-bound inside the range needs two or three (cause_repeat_before:
    # 11.1 ms after one step for a recorded 19.3 ms, the savings then shares of a step 42 %
    # shorter than the program's).
    lo_c, hi_c = lo_cost["op"], hi_cost["op"]
    (t_lo, at_lo), (t_hi, at_hi) = at(lo_c), at(hi_c)
    target = target_ns
    if at_lo == at_hi or target >= at_lo:
        return (t_lo, at_lo) if target >= at_lo else (t_hi, at_hi)
    if at_hi > target * (1 + BASE_TOLERANCE):
        # A step timed without the profiler below what the calibrated range replays to: this
        # recording's profiler cost per event is above the range (ResNet-50 with shapes on an
        # H100: 57.2 ms at the range's top for 45.8 ms timed), and the timed step outranks the
        # calibration. Where the host leaves the path before the clock is met, the step is the
        # device's own (its kernels as traced): the least cost that brings the host just onto
        # it is the base, never more (the host as fast as the clock allows, no faster; with it
        # taken out to nothing, a change that shortens the kernels priced the whole drop).
        floor = at(hi_c * FLOOR_COST_FACTOR)
        target = max(target, round(floor[1] * (1 + BASE_TOLERANCE / 2)))
        if at_hi <= target * (1 + BASE_TOLERANCE):
            return t_hi, at_hi
        # the step still falls in proportion at the range's top: the line through the two ends
        # is followed to the target, then bracketed (past the kink where the host leaves the
        # path, the step is flat and a secant from that side would land on the flat again)
        for _ in range(EXTEND_STEPS):
            slope = (at_lo - at_hi) / (hi_c - lo_c)  # ns of step per ns of cost
            if slope <= 0:
                return t_hi, at_hi
            cost = hi_c + (at_hi - target) / slope
            t_c, at_c = at(cost)
            if abs(at_c - target) <= BASE_TOLERANCE * target:
                return t_c, at_c
            lo_c, at_lo, hi_c, t_hi, at_hi = hi_c, at_hi, cost, t_c, at_c
            if at_c < target:  # passed: bracketed between the last two
                break
        else:
            return t_hi, at_hi
    if target <= at_hi:
        return t_hi, at_hi
    found = (t_lo, at_lo)
    for _ in range(BASE_STEPS):
        cost = lo_c + (hi_c - lo_c) * (at_lo - target) / (at_lo - at_hi)
        cost = float(np.clip(cost, lo_c, hi_c))
        found = at(cost)
        if abs(found[1] - target) <= BASE_TOLERANCE * target or at_lo == at_hi:
            break
        if found[1] > target:
            lo_c, at_lo = cost, found[1]
        else:
            hi_c, at_hi = cost, found[1]
    return found


def replay_base(ctx: FindingContext, clock: Clock | None, rep: Replay) -> tuple[tuple[Transformation, ...], int]:
    """What every finding is replayed on top of, and the step it replays to: the profiler's
    cost taken out where the clock is not the traced step; ``((), 0)`` where that base cannot
    be replayed."""
    if clock is None or clock.source == "traced":
        return (), rep.before_ns
    # Searched once per graph, clock and steps: the ranking, the pricing and each list of
    # levers ask for it, and every search builds its transformations anew (each one hashing
    # the allocator events' times before its replay is found in the memo).
    key = ("findings_base", clock, tuple(rep.steps), rep.base)
    found: tuple[tuple[Transformation, ...], int] | None = rep.graph.memo.get(key)
    if found is None:
        try:
            # A replay of the whole trace (its steps do not replay one by one: a decode loop's
            # iterations) is no step: its target is the clock's share of the traced step.
            target = clock.step_ns if rep.steps else round(rep.before_ns * clock.step_ns / max(clock.traced_ns, 1))
            found = profiler_base(ctx, target, rep.after_ns)
        except TransformError:
            found = ((), 0)
        rep.graph.memo[key] = found
    return found


def _cap(saved_ns: int, left_ns: int, idle_left_ns: int, host_side: bool) -> tuple[int, str | None]:
    bound = min(left_ns, idle_left_ns) if host_side else left_ns
    if saved_ns <= bound:
        return saved_ns, None
    what = "the GPU idle time the step has left" if host_side else "what the step has left"
    return max(bound, 0), f"bounded by {what} ({bound / 1e6:.3f} ms)"


# The finding left as the residual of the causes nested in it: what only fewer launches remove.
RESIDUAL = "launch_bound"


def _causes_first(ordered: list[Finding], by_id: dict[str, Estimate], min_pct: float = 0.0) -> list[Finding]:
    """``ordered`` with each finding whose time is part of a wider one's (``within``: a cause in
    the host code inside launch_bound's idle), or whose fix the wider one is defined on top of
    (``catalogue.PRICED_AFTER``: host_bound after host_sync), priced just before that wider
    one: the wider finding is the residual, what its fix adds once the causes are fixed. ``min_pct``
    (the listing): only causes saving at least this share, and not on low confidence, move
    ahead; a cause too small or too uncertain to lead the verdict keeps its place by saving."""
    out: list[Finding] = []
    placed: set[str] = set()
    for f in ordered:
        if f.id in placed:
            continue
        after = PRICED_AFTER.get(f.id, ())
        for c in ordered:
            est = by_id.get(c.id)
            # Host-code causes only (a loop, the allocator, a sync): a kernel-side finding
            # nested in the same idle (fusion) keeps its rank against launch_bound.
            if (
                c.id not in placed
                and (min_pct <= 0 or (c.saving_pct >= min_pct and c.confidence != "low"))
                and est is not None
                and _host_side(est)
                and (c.id in after or any(p == f.id == RESIDUAL for _, p, _ in est.within))
            ):
                out.append(c)
                placed.add(c.id)
        out.append(f)
        placed.add(f.id)
    return out


def reprice(ctx: FindingContext, settled: Settled, estimates: list[Estimate]) -> tuple[Settled, Clock | None]:
    """``settled`` priced once each, in rank order, on the clock of this trace (module doc)."""
    clock = clock_of(ctx)
    if clock is None or clock.step_ns <= 0:
        return settled, clock
    by_id = {e.finding.id: e for e in estimates}
    ordered = _causes_first(sorted([*settled.material, *settled.minor], key=lambda f: (-f.saving_pct, f.id)), by_id)
    composed: dict[str, int] = {}
    alone: dict[str, int] = {}
    capped: set[str] = set()
    together_pct: float | None = None  # every replayed change at once, of the base step
    base_note = ""
    rep = None
    if settled.replayed:
        rep, _ = check(ctx)
    if rep is not None:
        base, base_ns = replay_base(ctx, clock, rep)
        if base_ns > 0:
            applied: tuple[Transformation, ...] = base
            above: dict[str, list[str]] = {}
            prev = base_ns
            for f in ordered:
                est = by_id.get(f.id)
                if est is None or not est.transforms or not f.method.startswith("replayed"):
                    continue
                first = len(applied) == len(base)
                applied = (*applied, *est.transforms)
                now = rep.after_ns(applied)
                adds = max(prev - now, 0)
                alone[f.id] = adds if first else max(base_ns - rep.after_ns((*base, *est.transforms)), 0)
                # after the fixes above it, a change can also collect what only the two together
                # unlock (a step that turns host-bound once launches are cut): that part is
                # neither's, so a finding never lists more than its own fix saves alone; the
                # saving of doing them all (the total) keeps it
                if adds > alone[f.id]:
                    capped.add(f.id)
                composed[f.id] = min(adds, alone[f.id])
                above[f.id] = list(composed)[:-1]
                prev = min(prev, now)
            together_pct = 100.0 * max(base_ns - prev, 0) / base_ns
            # shares of the base step (the replayed un-profiled step), in ns of the clock's
            scale = clock.step_ns / base_ns
            composed = {k: round(v * scale) for k, v in composed.items()}
            alone = {k: round(v * scale) for k, v in alone.items()}
            base_note = (
                f"replayed on the step without the profiler ({clock.source}: {clock.step_ns / 1e6:.3f} ms; traced "
                f"{clock.traced_ns / 1e6:.3f} ms), after the findings ranked above it"
                if base else "replayed after the findings ranked above it (each counts only what it adds)"
            )
    left = clock.step_ns
    idle_left = clock.idle_ns
    traced = max(clock.traced_ns, 1)
    out: list[Finding] = []
    for f in ordered:
        est = by_id.get(f.id)
        host_side = est is not None and _host_side(est)
        overlap = f.overlap
        if f.id in composed:
            saved = composed[f.id]
            by_itself = alone[f.id]
            how = base_note
            ahead = above[f.id]
            overlap = (
                f"replayed after the fixes of {', '.join(ahead)}: only what it adds is counted"
                + (" (capped at what it saves alone: the rest needs both fixes)" if f.id in capped else "")
                if ahead else None
            )
        elif not f.per_step:
            out.append(f)
            continue
        else:
            # an estimate from the traced step: its share, of the clock's step for device time;
            # host-side time shrinks with the profiler's share of the host's time
            traced_ns = f.saving_ns if f.saving_ns else round(f.saving_pct / 100 * traced)
            saved = traced_ns if not host_side else round(traced_ns * clock.idle_ns / max(traced - clock.busy_ns, 1))
            by_itself = min(saved, clock.idle_ns if host_side else clock.step_ns)
            how = (
                f"on the step without the profiler ({clock.source}: {clock.step_ns / 1e6:.3f} ms; traced "
                f"{clock.traced_ns / 1e6:.3f} ms)" if clock.source != "traced" else ""
            )
        saved, bounded = _cap(saved, left, idle_left, host_side)
        left -= saved
        if host_side:
            idle_left -= saved
        # an estimate on the traced clock that no bound cut keeps its share (of the window, where
        # the steps do not tile it); otherwise the share is of the clock's step
        unchanged = clock.source == "traced" and f.id not in composed and bounded is None
        pct = f.saving_pct if unchanged else 100.0 * saved / clock.step_ns
        notes = "; ".join(x for x in (how, bounded) if x)
        out.append(
            replace(
                f,
                saving_pct=round(pct, 3),
                saving_ns=saved,
                saving_window_ns=round(f.saving_window_ns * saved / f.saving_ns) if f.saving_ns else 0,
                alone_pct=round(pct, 3) if unchanged else round(100.0 * min(by_itself, clock.step_ns) / clock.step_ns, 3),
                host_side=host_side,
                overlap=overlap,
                # a finding material for what it costs in memory, not time, stays so
                material=(pct >= MATERIALITY_PCT) or (f.material and f.estimate_ns == 0) or f.id == "memory_pressure",
                method=f"{f.method}. Priced {notes}" if notes else f.method,
            )
        )
    # Listed as priced: largest saving first, except that a cause in the host code comes before
    # the residual it was priced ahead of (launch_bound counts only what fewer launches add once
    # the causes are fixed, so listing it first would read as the bigger fix it is not).
    ordered_out = _causes_first(sorted(out, key=lambda f: (-f.saving_pct, f.id)), by_id, LEAD_SAVING_PCT)
    material = [f for f in ordered_out if f.material]
    minor = [f for f in ordered_out if not f.material]
    listed = sum(f.saving_pct for f in material if f.per_step)
    if together_pct is not None:
        # every replayed change at once, and the estimates of the others (each already bounded
        # by what the step had left after those above it)
        others = sum(f.saving_pct for f in material if f.per_step and f.id not in composed)
        listed = max(listed, together_pct + others)
    total = min(100.0, listed) + sum(f.saving_pct for f in material if not f.per_step)
    return Settled(material, minor, round(min(total, 100.0), 3), settled.replayed, settled.note), clock


__all__ = ["COST_US", "Clock", "clock_of", "reprice"]
