"""The findings result: every detector run, the savings settled (replayed where the trace
replays, capped by pool otherwise) and priced on the program's clock, ranked, and host-time
findings marked down where the profiler inflated host time.
"""

from __future__ import annotations

from dataclasses import replace

from traceinsight.analysis.findings.catalogue import MATERIALITY_PCT
from traceinsight.analysis.findings.detect import DETECTORS
from traceinsight.analysis.findings.detect.host_comm import host_only
from traceinsight.analysis.findings.model import Confidence, Finding, FindingsResult
from traceinsight.analysis.findings.price.clock import clock_of, replay_base, reprice
from traceinsight.analysis.findings.price.levers import price_levers
from traceinsight.analysis.findings.price.replayed import FEW_STEPS, settle_all
from traceinsight.analysis.findings.price.savings import Estimate
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.window.overhead import overhead_lowers_host_findings, overhead_summary


def find(ctx: FindingContext) -> FindingsResult:
    """Run every detector, cap and rank the savings."""
    return find_with_estimates(ctx)[0]


def find_with_estimates(ctx: FindingContext) -> tuple[FindingsResult, list[Estimate]]:
    """:func:`find`'s result and the detectors' estimates it was priced from (their changes
    are what ``whatif --finding`` replays)."""
    if ctx.window_ns <= 0:
        host = host_only(ctx)  # a CPU-only job: its host collectives can still be diagnosed
        if host is not None:
            return host, []
        return FindingsResult(
            available=False, reason="no analysed window: the trace has no GPU activity to diagnose"
        ), []
    if ctx.window is not None and ctx.full_window_ns > 0 and ctx.excluded_window_ns >= ctx.full_window_ns:
        return FindingsResult(
            available=False,
            reason="no steady state to diagnose: the whole window is one-time work ("
            + ", ".join(f.title for f in ctx.window.limiting)
            + ")",
        ), []
    estimates: list[Estimate] = []
    skipped: list[str] = []
    for detector in DETECTORS:
        found = detector(ctx)
        if found is not None:
            estimates.append(found)
    missing = [
        n for n in ("gaps", "breakdown", "steps", "kernels", "bound") if getattr(ctx, n) is None
    ]
    if missing:
        skipped.append(
            "results not available: "
            + ", ".join(missing)
            + " (detectors reading them found nothing)"
        )
    # ranked and priced on one base: the step without the profiler, where the clock is not the
    # traced step (each finding alone on it is replayed once, for both)
    on_clock = clock_of(ctx)
    settled = settle_all(ctx, estimates, lambda rep: replay_base(ctx, on_clock, rep))
    settled, clock = reprice(ctx, settled, estimates)
    source = clock.source if clock is not None else "traced"
    material, minor = _profiled(ctx, settled.material, source), _profiled(ctx, settled.minor, source)
    material, minor = price_levers(ctx, material, estimates, clock), price_levers(ctx, minor, estimates, clock)
    if settled.note:
        skipped.append(settled.note if settled.note == FEW_STEPS else settled.note.split(":")[0] + ": savings are the pool estimates")
    if ctx.excluded_window_ns > 0 and ctx.window is not None:
        flags = ", ".join(f.title for f in ctx.window.limiting)
        skipped.append(
            f"{ctx.excluded_window_ns / 1e6:.1f} ms of the window left out of every saving as not steady "
            f"state ({flags}): shares are of the remaining {ctx.window_ns / 1e6:.1f} ms"
        )
    return FindingsResult(
        findings=tuple(material),
        not_material=tuple(minor),
        step_ns=clock.step_ns if clock is not None else ctx.step_ns,
        traced_step_ns=clock.traced_ns if clock is not None else ctx.step_ns,
        clock=clock.source if clock is not None else "traced",
        step_idle_ns=clock.idle_ns if clock is not None else None,
        # The steps the step time is the mean of (what the verdict and the steps line count).
        steps=ctx.steady_step_count,
        window_ns=ctx.window_ns,
        total_saving_pct=settled.total_pct,
        replayed=settled.replayed,
        materiality_pct=MATERIALITY_PCT,
        rank=ctx.rank,
        skipped=tuple(skipped),
        workload=ctx.workload.kind,
        workload_reason=ctx.workload.describe(),
    ), estimates


# Findings whose evidence is host time, which the profiler's own events inflate.
HOST_TIME_FINDINGS = frozenset({"launch_bound", "host_bound", "dataloader_stall", "host_preprocessing"})
LOWER: dict[str, Confidence] = {"high": "medium", "medium": "low", "low": "low"}


def _profiled(ctx: FindingContext, findings: list[Finding], clock: str = "traced") -> list[Finding]:
    """Host-time findings on a trace whose host time the profiler inflated: one confidence step
    lower, and the reason says why. On a clock recorded without the profiler they keep theirs;
    on an estimated one, the estimate's range is the doubt."""
    flag = None if ctx.window is None else ctx.window.flag("profiler_overhead")
    if flag is None or not overhead_lowers_host_findings(flag) or clock == "recorded":
        return findings
    why = (
        "priced on the step without the profiler, an estimate (its range is in the window section)"
        if clock == "estimated"
        else "so this saving may read high"
    )
    return [
        replace(
            f,
            confidence=LOWER[f.confidence],
            confidence_reason=f"{f.confidence_reason}; host time is inflated by the profiler "
            f"({overhead_summary(flag)}), {why}",
        )
        if f.id in HOST_TIME_FINDINGS
        else f
        for f in findings
    ]
