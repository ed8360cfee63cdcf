"""Savings from the replayed dependency graph, where the trace replays within 5 %.

A detector that can state its fix as what-if transformations (``Estimate.transforms``) gets
the saving the replay of those transformations gives: the change of the median step device
time over the steady steps (the warm-up step left out; the median, because a first step that
drains a queue built up before the trace skews a mean). The total is the replay of every
material finding's transformations together, plus the claims of findings without
transformations: not a sum of the replayed savings, which would count shared time twice.

The replay is trusted only where it gives back the recorded steps: each step's replayed device
time within 5 % of its recorded one (the ``critical_path`` section's check). Otherwise every
finding keeps its pool claim (``savings.settle``), one confidence step lower, and says why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from traceinsight.analysis.findings.catalogue import MATERIALITY_PCT
from traceinsight.analysis.findings.model import Confidence, Finding
from traceinsight.analysis.findings.price.savings import Estimate, settle
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.lib.timeline import device_step_spans
from traceinsight.analysis.whatif.graph import GPU_COMM, NEG, StepGraph
from traceinsight.analysis.whatif.model import TOLERANCE, validation
from traceinsight.analysis.whatif.replay import Timeline, span, step_times
from traceinsight.analysis.whatif.shared import recorded, replayed_steps
from traceinsight.analysis.whatif.transforms import Transformation, TransformError

LOWER: dict[Confidence, Confidence] = {"high": "medium", "medium": "low", "low": "low"}
# One steady step is no steady state: a change moves time between a step and its neighbours.
MIN_STEADY_STEPS = 2
FEW_STEPS = "fewer than 2 steady steps to replay: savings are the pool estimates"
# A finding whose pool estimate (before nesting and capping) is below this share of the window
# keeps it: a replay per finding costs a replay of the whole trace, and these are not
# material by a wide margin.
REPLAY_FROM_PCT = MATERIALITY_PCT / 10
# Device work the graph could not link to a launch keeps its recorded start in any replay (it
# reproduces the recording whatever changes): above this share of the device time, the replay
# cannot say what a change does. The recorded samples hold up to ~18 % (work queued before the
# trace began, in its first step); a trace whose launches are not correlated holds nearly all.
PINNED_MAX_PCT = 50.0


@dataclass(frozen=True)
class Settled:
    material: list[Finding]
    minor: list[Finding]
    total_pct: float
    replayed: bool  # the savings of findings with transformations come from the replay
    note: str | None = None  # why the replay was not used, when it was not


@dataclass(frozen=True)
class Replay:
    graph: StepGraph
    steps: list[int]  # the steady steps the medians are over; empty: the whole trace
    before_ns: int  # median steady step (or the whole trace), replayed on ``base``
    # what every replay applies first: nothing (the recording), or the profiler's cost taken out
    # (the findings' clock, ``price.clock.replay_base``)
    base: tuple[Transformation, ...] = ()

    def after_ns(self, transforms: tuple[Transformation, ...]) -> int:
        times, whole = replayed_steps(self.graph, (*self.base, *transforms))
        return _median_of(times, whole, self.steps)


# Gives the base a replay's findings are priced on, and its step: ``((), 0)`` where none replays.
BaseOf = Callable[[Replay], tuple[tuple[Transformation, ...], int]]


def _length(graph: StepGraph, tl: Timeline, steps: list[int]) -> int:
    """Median device time of ``steps`` on a replayed timeline (the whole span without steps)."""
    return _median_of(step_times(graph, tl) if steps else pl.DataFrame(), span(graph, tl), steps)


def _median_of(times: pl.DataFrame, whole: tuple[int, int], steps: list[int]) -> int:
    """Median device time of ``steps`` in ``times`` (``step_times``); the whole span without steps."""
    if not steps:
        return whole[1] - whole[0]
    durations = times.filter(pl.col("step").is_in(steps))["device_dur_ns"]
    return int(np.median(durations.to_numpy())) if durations.len() else 0


def _steady_steps(ctx: FindingContext, graph: StepGraph) -> list[int]:
    """Steps the steps analysis keeps (no warm-up step) that the graph also holds."""
    if ctx.steps is None or graph.steps.height == 0:
        return []
    kept = ctx.steps.steps.filter(~pl.col("is_warmup"))["step"].to_list()
    in_graph = set(graph.steps["step"].to_list())
    if ctx.window is not None and ctx.window.excluded.height:
        # steps that hold one-time work (start-up, compilation, capture) are not the steady state
        once = ctx.window.excluded.select(pl.col("start_ns").alias("lo"), pl.col("end_ns").alias("hi"))
        hit = graph.steps.join(once, how="cross").filter(
            (pl.col("host_start_ns") < pl.col("hi")) & (pl.col("lo") < pl.col("host_end_ns"))
        )["step"].to_list()
        in_graph -= set(hit)
    return [int(s) for s in kept if s in in_graph] or [int(s) for s in sorted(in_graph)]


def check(ctx: FindingContext) -> tuple[Replay | None, str | None]:
    """The replay to read savings from, or None with why the trace does not replay."""
    graph, tl = recorded(ctx.trace)
    if graph.gpu_nodes == 0:
        return None, "the trace has no device work to replay"
    pinned = graph.gpu_anchor_ns > NEG
    pinned_pct = 100.0 * float(graph.gpu_dur_ns[pinned].sum()) / max(float(graph.gpu_dur_ns.sum()), 1.0)
    if pinned_pct > PINNED_MAX_PCT:
        return None, (
            f"the replay does not explain this trace ({pinned_pct:.0f} % of the device time is work no "
            "launch links to the host, which no change can move): this saving is the pool estimate"
        )
    if graph.steps.height:
        errors = validation(graph, tl, device_step_spans(ctx.trace))["error_pct"].fill_null(100.0)
        worst = float(errors.max() or 0.0)  # type: ignore[arg-type]
    else:
        host_ts = graph.host_events["ts_ns"].to_numpy()
        host_end = graph.host_events["end_ns"].to_numpy()
        lo = int(min(graph.gpu_ts_ns.min(), host_ts.min() if host_ts.size else graph.gpu_ts_ns.min()))
        hi = int(max((graph.gpu_ts_ns + graph.gpu_dur_ns).max(), host_end.max() if host_end.size else 0))
        got = span(graph, tl)
        worst = 100.0 * abs((got[1] - got[0]) - (hi - lo)) / (hi - lo) if hi > lo else 100.0
    if worst > TOLERANCE * 100:
        return None, (
            f"the replay does not explain this trace (a recorded step missed by {worst:.1f} %, more "
            f"than {TOLERANCE:.0%}): this saving is the pool estimate"
        )
    steps = _steady_steps(ctx, graph)
    if graph.steps.height and len(steps) < MIN_STEADY_STEPS:
        return None, FEW_STEPS
    return Replay(graph, steps, _length(graph, tl, steps)), None


def _nested_in(est: Estimate, parent: str) -> bool:
    return est.finding.id != parent and any(p == parent for _, p, _ in est.within)


def _describe(transforms: tuple[Transformation, ...]) -> str:
    return "; ".join(t.describe() for t in transforms)


def _per_step_ns(ctx: FindingContext, f: Finding, rep: Replay, saved: int, pct: float) -> int:
    """``saving_ns`` as the finding model defines it: per step where the trace has steps. Steps
    the replay windows itself (ProfilerStep) give the replayed step's saving; steps the graph
    does not window (loop iterations found without ProfilerStep) give the replayed share of the
    mean step; no steps, the share of the window."""
    if f.per_step and rep.steps:
        return saved
    if f.per_step and ctx.step_ns:
        return round(pct / 100.0 * ctx.step_ns)
    return round(pct / 100.0 * ctx.window_ns)


def _replayed(
    ctx: FindingContext, f: Finding, rep: Replay, est: Estimate, after_ns: int, first: list[str], capped: bool = False
) -> Finding:
    saved = max(rep.before_ns - after_ns, 0)
    pct = 100.0 * saved / rep.before_ns if rep.before_ns > 0 else 0.0
    where = (
        f"median of {len(rep.steps)} steady step(s)" if rep.steps else "the whole trace (no steps)"
    )
    on = " on the step with the profiler's own host cost taken out" if rep.base else ""
    method = (
        f"replayed: the trace's dependency graph (host threads, launches, streams, syncs) replayed "
        f"with {_describe(est.transforms)}{on}: "
        f"{rep.before_ns / 1e6:.3f} → {after_ns / 1e6:.3f} ms, {where}"
        + (f", counting only what it adds to the fixes of {', '.join(first)} (they claim part of the same time)" if first else "")
        + (", at most what it saves alone" if capped else "")
        + ". "
        f"Estimate from the pools before replaying: {f.saving_pct:.1f} % ({f.method})"
    )
    return replace(
        f,
        saving_pct=round(min(pct, 100.0), 3),
        saving_ns=_per_step_ns(ctx, f, rep, saved, pct),
        saving_window_ns=round(pct / 100.0 * ctx.window_ns),
        method=method,
        overlap=(
            f"replayed on top of the fixes of {', '.join(first)}, which claim part of the same time: "
            "only what it adds is counted"
            + (" (capped at what it saves alone: the rest needs both fixes)" if capped else "")
            if first
            else None
        ),
        claim_pct=f.saving_pct,
        material=pct >= MATERIALITY_PCT or f.id == "memory_pressure",
    )


def _parents_noted(f: Finding, estimates: list[Estimate], replayed: set[str]) -> Finding:
    """A replayed finding whose time a wider replayed finding also claims says so."""
    est = next((e for e in estimates if e.finding.id == f.id), None)
    parents = sorted({p for _, p, _ in est.within if p in replayed and p != f.id}) if est else []
    if not parents or f.overlap:
        return f
    return replace(f, overlap=f"its time is part of what {', '.join(parents)} reports; replayed alone here, "
                   f"and {', '.join(parents)} counts only what it adds")


def _waits_on_collectives(graph: StepGraph) -> bool:
    """Whether any device work waits (cross-stream) for a collective in the graph."""
    src = graph.gpu_wait_src
    hit = src[src >= 0]
    return bool(hit.size and (graph.gpu_class[hit] == GPU_COMM).any())


def _fallback(f: Finding, note: str) -> Finding:
    return replace(f, confidence=LOWER[f.confidence], confidence_reason=f"{f.confidence_reason}; {note}")


def settle_all(ctx: FindingContext, estimates: list[Estimate], base_of: BaseOf | None = None) -> Settled:
    """Every finding's saving: replayed where it has transformations and the trace replays,
    the pool claims otherwise (see the module doc). ``base_of``: the base the findings are
    replayed on (the step without the profiler, ``price.clock``); the recording without it. The
    ranking is then read on the clock the findings are priced on, and those replays are the
    ones that pricing reuses (each finding alone on the base), not a second set."""
    claimed_material, claimed_minor = settle(ctx, estimates)
    claimed = {f.id: f for f in (*claimed_material, *claimed_minor)}
    floor = REPLAY_FROM_PCT / 100 * ctx.window_ns
    with_t = [e for e in estimates if e.transforms and e.finding.estimate_ns >= floor] if ctx.replay else []
    if not with_t:
        return _sum(claimed_material, claimed_minor, replayed=False)
    rep, note = check(ctx)
    if rep is None and note == FEW_STEPS:
        return _sum(claimed_material, claimed_minor, replayed=False, note=note)
    if rep is None:
        hit = {e.finding.id for e in with_t}
        fell = [_fallback(f, note or "") if f.id in hit else f for f in claimed.values()]
        return _sum(*_split(fell), replayed=False, note=note)
    if base_of is not None:
        on, on_ns = base_of(rep)
        if on and on_ns > 0:
            rep = replace(rep, base=on, before_ns=on_ns)
    out: list[Finding] = []
    kept: list[Estimate] = []  # the replayed ones, for the total
    failed: dict[str, str] = {}
    blind = not _waits_on_collectives(rep.graph)
    for est in with_t:
        if blind and est.finding.pool == "communication":
            # Hiding a collective helps only the work that waits for it; a trace that records
            # no such wait (NCCL's stream syncs are often not traced) leaves the replay blind
            # to it, and its replayed saving would read as nothing.
            failed[est.finding.id] = (
                "the trace records nothing waiting on its collectives (no cross-stream wait), so the "
                "replay cannot price hiding them: pool estimate"
            )
            continue
        # A finding whose time a narrower one also claims (that one's ``within`` names it) is
        # replayed on top of the narrower fixes: its saving is what it adds to them.
        first = tuple(t for e in with_t if _nested_in(e, est.finding.id) for t in e.transforms)
        capped = False
        try:
            base = rep.before_ns if not first else rep.after_ns(first)
            after = rep.after_ns((*first, *est.transforms)) + (rep.before_ns - base)
            if first:
                # On top of the narrower fixes it may also collect what they only unlock
                # together with it (GPU time saved by a fusion shows once launches are
                # collapsed): never more than its own fix saves when applied alone.
                alone = rep.after_ns(est.transforms)
                capped = alone > after
                after = max(after, alone)
        except TransformError as exc:
            failed[est.finding.id] = f"its change could not be replayed ({exc})"
            continue
        out.append(_replayed(ctx, claimed[est.finding.id], rep, est, after, [e.finding.id for e in with_t if _nested_in(e, est.finding.id)], capped))
        kept.append(est)
    replayed_ids = {e.finding.id for e in kept}
    out = [_parents_noted(f, estimates, replayed_ids) for f in out]
    # The others (no transformation, a pool estimate too small to replay, a change that could
    # not be replayed) share the pools among themselves only.
    rest_material, rest_minor = settle(ctx, [e for e in estimates if e.finding.id not in replayed_ids])
    rest = [_fallback(f, failed[f.id]) if f.id in failed else f for f in (*rest_material, *rest_minor)]
    material, minor = _split([*out, *rest])
    # the saving of doing them all is priced where they are composed (findings.price.clock)
    total = sum(f.saving_pct for f in material)
    return Settled(material, minor, round(min(total, 100.0), 3), replayed=True)


def _split(findings: list[Finding]) -> tuple[list[Finding], list[Finding]]:
    ordered = sorted(findings, key=lambda f: (-f.saving_pct, f.id))
    return [f for f in ordered if f.material], [f for f in ordered if not f.material]


def _sum(material: list[Finding], minor: list[Finding], *, replayed: bool, note: str | None = None) -> Settled:
    total = min(100.0, sum(f.saving_pct for f in material))
    return Settled(material, minor, round(total, 3), replayed=replayed, note=note)
