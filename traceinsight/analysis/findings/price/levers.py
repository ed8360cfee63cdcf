"""Pricing a finding's levers: each way to apply its fix, replayed alone.

Where a fix can be applied in more than one way (fp32 matmuls moved to TF32 tensor cores, or
the model run under bf16 autocast), each way has its own change to the step's dependency
graph. Each is replayed alone on the same base as the findings (the step without the
profiler, where the trace has one) and priced as a share of the same step, so the user can
compare them; the finding's own saving stays the first lever's. Without a replay, a lever
keeps its detector's estimate, as a share of the analysed window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from traceinsight.analysis.findings.model import Finding
from traceinsight.analysis.findings.price.clock import Clock, replay_base
from traceinsight.analysis.findings.price.replayed import check
from traceinsight.analysis.findings.price.savings import Estimate
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.whatif.transforms import Transformation


def price_levers(ctx: FindingContext, findings: list[Finding], estimates: list[Estimate], clock: Clock | None) -> list[Finding]:
    """``findings`` with the levers of their estimates priced (findings without levers as they are)."""
    by_id = {e.finding.id: e for e in estimates if e.levers}
    if not by_id or not any(f.id in by_id for f in findings):
        return findings
    replayed = _replayed_alone(ctx, clock)
    step_ns = clock.step_ns if clock is not None else (ctx.step_ns or 0)
    out = []
    for f in findings:
        est = by_id.get(f.id)
        if est is None:
            out.append(f)
            continue
        levers = []
        for lever, transforms in est.levers:
            saved = replayed(transforms) if f.method.startswith("replayed") and replayed is not None else None
            if saved is not None and step_ns > 0:
                pct = 100.0 * min(saved, step_ns) / step_ns
                method = "replayed alone on the same step as the finding"
                ns = min(saved, step_ns)
            else:
                # the detector's estimate over the window, as a share of it
                pct = 100.0 * lever.saving_ns / ctx.window_ns if ctx.window_ns > 0 else 0.0
                ns = round(pct / 100.0 * step_ns) if f.per_step and step_ns > 0 else lever.saving_ns
                method = lever.method or "the detector's estimate over the analysed window"
            levers.append(replace(lever, saving_pct=round(min(pct, 100.0), 3), saving_ns=int(ns), method=method))
        out.append(replace(f, levers=tuple(levers)))
    return out


def _replayed_alone(ctx: FindingContext, clock: Clock | None) -> Callable[[tuple[Transformation, ...]], int] | None:
    """A function: transformations -> what they save alone on the findings' base step (in ns of
    the clock's step); None where the trace does not replay."""
    rep, _ = check(ctx)
    if rep is None:
        return None
    base, base_ns = replay_base(ctx, clock, rep)
    if base_ns <= 0:
        return None
    scale = (clock.step_ns / base_ns) if clock is not None else 1.0

    def saved(transforms: tuple[Transformation, ...]) -> int:
        return round(max(base_ns - rep.after_ns((*base, *transforms)), 0) * scale)

    return saved
