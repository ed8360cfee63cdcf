"""Findings: what to fix first, with the saving each fix would bring.

Reads the other analyses' results (gaps, breakdown, steps, ops, kernels, bound, memory,
compile) through a :class:`FindingContext`, runs one detector per catalogue entry, caps the
savings so that findings sharing the same device time never add up to more than it, and ranks
them. ``SPEC`` and ``run(trace, config, inputs)`` live in :mod:`.spec` (the registry's line).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from traceinsight.analysis.findings.attention import detect_eager_attention
from traceinsight.analysis.findings.batching import detect_sequential_small_gemms
from traceinsight.analysis.findings.catalogue import CATALOGUE, MATERIALITY_PCT
from traceinsight.analysis.findings.clock import reprice
from traceinsight.analysis.findings.comm import (
    detect_allreduce_per_parameter,
    detect_exposed_all_to_all,
    detect_exposed_communication,
)
from traceinsight.analysis.findings.compiled import (
    detect_compile_in_window,
    detect_compile_not_applied,
    detect_graph_break,
    detect_recompile,
)
from traceinsight.analysis.findings.context import FindingContext
from traceinsight.analysis.findings.conv import detect_channels_last, detect_input_channels_padding
from traceinsight.analysis.findings.fusion import detect_unfused_elementwise
from traceinsight.analysis.findings.gradzero import detect_zero_grad_memset
from traceinsight.analysis.findings.host_comm import detect_cpu_collectives, host_only
from traceinsight.analysis.findings.idle import (
    detect_allocator_churn,
    detect_dataloader_stall,
    detect_host_bound,
    detect_host_sync,
)
from traceinsight.analysis.findings.launches import detect_launch_bound
from traceinsight.analysis.findings.levers import price_levers
from traceinsight.analysis.findings.memory_growth import detect_memory_growth
from traceinsight.analysis.findings.model import (
    Confidence,
    Evidence,
    Finding,
    FindingsResult,
    KernelEvidence,
    OpEvidence,
    RegionEvidence,
)
from traceinsight.analysis.findings.precision import (
    detect_fp32_no_tensor_cores,
    detect_fp64_compute,
    detect_gemm_misaligned,
)
from traceinsight.analysis.findings.preprocessing import detect_host_preprocessing
from traceinsight.analysis.findings.repeats import detect_repeated_launches
from traceinsight.analysis.findings.replayed import FEW_STEPS, settle_all
from traceinsight.analysis.findings.savings import Estimate
from traceinsight.analysis.findings.training import (
    detect_memory_pressure,
    detect_unfused_optimizer,
)
from traceinsight.analysis.findings.transfers import (
    detect_cpu_tensor_creation,
    detect_noncontiguous_copy,
    detect_pageable_memcpy,
)
from traceinsight.analysis.window.overhead import overhead_lowers_host_findings, overhead_summary

Detector = Callable[[FindingContext], Estimate | None]

DETECTORS: tuple[Detector, ...] = (
    detect_dataloader_stall,
    detect_pageable_memcpy,
    detect_cpu_tensor_creation,
    detect_host_sync,
    detect_fp64_compute,
    detect_fp32_no_tensor_cores,
    detect_gemm_misaligned,
    detect_launch_bound,
    detect_host_bound,
    detect_sequential_small_gemms,
    detect_unfused_optimizer,
    detect_noncontiguous_copy,
    detect_graph_break,
    detect_recompile,
    detect_compile_in_window,
    detect_exposed_communication,
    detect_allocator_churn,
    detect_memory_pressure,
    detect_eager_attention,
    detect_unfused_elementwise,
    detect_zero_grad_memset,
    detect_channels_last,
    detect_input_channels_padding,
    # communication by what it is
    detect_exposed_all_to_all,
    detect_allreduce_per_parameter,
    detect_cpu_collectives,
    detect_host_preprocessing,
    detect_memory_growth,
    # causes in the host code that launch_bound's idle is the residual of
    detect_repeated_launches,
    detect_compile_not_applied,
)


def find(ctx: FindingContext) -> FindingsResult:
    """Run every detector, cap and rank the savings."""
    if ctx.window_ns <= 0:
        host = host_only(ctx)  # a CPU-only job: its host collectives can still be diagnosed
        if host is not None:
            return host
        return FindingsResult(
            available=False, reason="no analysed window: the trace has no GPU activity to diagnose"
        )
    if ctx.window is not None and ctx.full_window_ns > 0 and ctx.excluded_window_ns >= ctx.full_window_ns:
        return FindingsResult(
            available=False,
            reason="no steady state to diagnose: the whole window is one-time work ("
            + ", ".join(f.title for f in ctx.window.limiting)
            + ")",
        )
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
    settled, clock = reprice(ctx, settle_all(ctx, estimates), estimates)
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
    )


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


__all__ = [
    "CATALOGUE",
    "DETECTORS",
    "Evidence",
    "Finding",
    "FindingContext",
    "FindingsResult",
    "KernelEvidence",
    "OpEvidence",
    "RegionEvidence",
    "find",
]
