"""The changes of chosen findings, to replay together (``traceinsight whatif --finding``).

The listed savings are each what a finding adds to the fixes priced before it (causes first,
then by saving), at most what it saves alone. A fix a user plans covers a set of its own
(switching a model to SDPA removes written-out attention and the blocking copy its mask makes,
first and fourth in the list): its saving is the replay of those findings' changes together,
on the base the findings are priced on (the step without the profiler, where the trace has
one), not a sum of their savings alone, which would count time they share twice or miss what
they only free together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from traceinsight.analysis.findings.price.clock import clock_of, replay_base
from traceinsight.analysis.findings.price.replayed import check
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.findings.verdict.rank import find_with_estimates
from traceinsight.analysis.whatif.transforms import Transformation, TransformError


@dataclass(frozen=True)
class FindingChanges:
    """What ``whatif`` replays for a set of findings."""

    base: tuple[Transformation, ...]  # the profiler's cost taken out; empty: the recording
    changes: tuple[Transformation, ...]  # the findings' changes, in the findings' rank order
    steps: tuple[int, ...]  # the steady steps the findings' medians are over; empty: all
    replayed: tuple[str, ...]  # the findings whose changes are in ``changes``
    base_note: str  # what ``base`` is; empty without one
    notes: tuple[str, ...]


def finding_changes(ctx: FindingContext, ids: Sequence[str]) -> FindingChanges:
    """The changes of the findings ``ids`` of ``ctx``'s trace and the base they are priced on.
    Raises :class:`TransformError` naming the problem where an id is not a finding of this
    trace, or where none of them can be replayed."""
    result, estimates = find_with_estimates(ctx)
    listed = {f.id: f for f in (*result.findings, *result.not_material)}
    unknown = [i for i in dict.fromkeys(ids) if i not in listed]
    if unknown:
        have = ", ".join(listed) or "none"
        raise TransformError(f"no finding {unknown[0]!r} in this trace (its findings: {have})")
    rep, why = check(ctx)
    if rep is None:
        raise TransformError(f"the findings' changes cannot be replayed on this trace: {why}")
    by_id = {e.finding.id: e for e in estimates}
    changes: list[Transformation] = []
    replayed: list[str] = []
    notes: list[str] = []
    for f in (*result.findings, *result.not_material):
        if f.id not in ids:
            continue
        est = by_id.get(f.id)
        if est is None or not est.transforms or not f.method.startswith("replayed"):
            notes.append(f"{f.id} is priced from its pool ({f.saving_pct:.1f} % listed), not by replay: its change is not in this what-if")
            continue
        changes.extend(est.transforms)
        replayed.append(f.id)
    if not changes:
        raise TransformError(f"none of {', '.join(ids)} has a change the replay can apply: " + "; ".join(notes))
    clock = clock_of(ctx)
    base, base_ns = replay_base(ctx, clock, rep)
    if not base or base_ns <= 0 or clock is None:  # priced on the recording
        return FindingChanges(base=(), changes=tuple(changes), steps=tuple(rep.steps), replayed=tuple(replayed),
                              base_note="", notes=tuple(notes))
    base_note = (
        f"the step without the profiler the findings are priced on ({clock.source}: {clock.step_ns / 1e6:.3f} ms, "
        f"traced {clock.traced_ns / 1e6:.3f} ms), replayed with the profiler's host cost taken out"
    )
    return FindingChanges(base=base, changes=tuple(changes), steps=tuple(rep.steps), replayed=tuple(replayed),
                          base_note=base_note, notes=tuple(notes))
