"""Collectives run on the host (``cpu_collectives``): a gloo (or MPI, UCC) process group.

gloo reduces in CPU memory: on CUDA tensors it copies each tensor out, reduces on host threads
and copies the result back, while the GPU waits. The trace shows the work as the backend's
spans (``gloo:all_reduce`` on gloo's worker threads); the saving is the GPU idle under them
less what the same collectives would at least cost with NCCL on the GPUs.
"""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.findings.catalogue import MATERIALITY_PCT
from traceinsight.analysis.findings.detect import comm
from traceinsight.analysis.findings.detect.idle import HOST_CAUSES
from traceinsight.analysis.findings.model import (
    Evidence,
    Finding,
    FindingsResult,
    Pool,
    RegionEvidence,
)
from traceinsight.analysis.findings.price.savings import Estimate, estimate
from traceinsight.analysis.findings.read import collectives as C
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.timeline import busy_intervals


def _backend_name(vendor: str) -> str:
    return {"amd": "'nccl' (RCCL on ROCm)", "intel": "'xccl'"}.get(vendor, "'nccl'")


def detect_cpu_collectives(ctx: FindingContext) -> Estimate | None:
    spans = C.backend_spans(ctx.trace).filter(pl.col("backend").is_in(list(C.HOST_BACKENDS)))
    if spans.height == 0:
        return None
    steps = sorted(int(s) for s in spans["step"].drop_nulls().unique().to_list())
    warm = ctx.steps.warmup_step if ctx.steps is not None else None
    steps = [s for s in steps if s != warm] or steps
    if steps:
        spans = spans.filter(pl.col("step").is_in(steps))
    merged = intervals.union(spans.select(pl.col("ts_ns").alias("start_ns"), "end_ns"))
    span_ns = int((merged["end_ns"] - merged["start_ns"]).sum() or 0)
    if span_ns <= 0:
        return None
    busy = busy_intervals(ctx.trace).select("start_ns", "end_ns")
    idle_under = span_ns - int(intervals.covered_ns(merged, busy)["covered_ns"].sum())
    calls = C.host_calls(ctx.trace)
    calls = calls.filter(pl.col("step").is_in(steps)) if steps else calls
    n_calls = calls.height or spans.height
    elements = int(calls["elements"].fill_null(0).sum())
    bytes_moved = elements * C.element_bytes(ctx.trace)
    # What the all-reduce bucketing finding already takes out of this time, and how many
    # calls remain after it: the rest is this finding's.
    bucket = comm.bucketing(ctx)
    per_param_ns = 0.0
    if bucket is not None and bucket.calls >= comm.PER_PARAMETER_MIN_CALLS and bucket.calls >= comm.PER_PARAMETER_BUCKET_RATIO * bucket.buckets:
        per_param_ns = bucket.saving_ns * bucket.phase.steps.height
        n_calls = max(0, n_calls - int((bucket.calls - bucket.buckets) * bucket.phase.steps.height))
    nccl_ns = n_calls * comm.NCCL_CALL_NS + bytes_moved / comm.NCCL_BUS_GBPS
    claim = max(0.0, idle_under - per_param_ns - nccl_ns)
    vendor = ctx.device.vendor
    backends = ", ".join(sorted(set(spans["backend"].to_list())))
    kinds = spans.group_by("collective").agg(pl.len().alias("calls"), pl.col("dur_ns").sum()).sort(
        ["dur_ns", "collective"], descending=[True, False]
    )
    # Part of this idle is what host_bound reports as host work in the backend's spans.
    within: tuple[tuple[Pool, str, int], ...] = ()
    if ctx.gaps is not None and ctx.gaps.gaps.height:
        host_gaps = ctx.gaps.gaps.filter(pl.col("cause").is_in(list(HOST_CAUSES))).select("start_ns", "end_ns")
        inside = int(intervals.covered_ns(host_gaps, merged)["covered_ns"].sum()) if host_gaps.height else 0
        if inside > 0:
            within = (("idle", "host_bound", min(inside, int(claim))),)
    share = 100.0 * span_ns / ctx.window_ns if ctx.window_ns else 0.0
    fix = (
        f"{backends} runs the collectives on host threads: CUDA tensors are copied to host memory, reduced "
        f"on the CPU and copied back while the GPU waits. Use init_process_group({_backend_name(vendor)}) "
        "(or 'cpu:gloo,cuda:nccl' to keep gloo for CPU tensors) so they run on the GPUs, and make them "
        "fewer and larger (DDP buckets, one flat tensor per call)."
    )
    return estimate(
        ctx,
        "cpu_collectives",
        {"idle": claim},
        within_parts=within,
        confidence="low",
        confidence_reason=f"{spans.height} {backends} collective spans cover {span_ns / 1e6:.1f} ms "
        f"({share:.0f} % of the window), {idle_under / 1e6:.1f} ms of it with the GPU idle; part of that may be "
        "waiting for a slower rank, which no backend removes (the job analyses of all ranks' traces split it "
        "out as collective_wait), and the NCCL cost is a floor (the interconnect is not in the trace)",
        method=f"GPU idle under the {backends} spans minus what bucketing the all-reduces already saves "
        f"({per_param_ns / 1e6:.2f} ms) minus the same collectives on NCCL: {n_calls} calls × "
        f"{comm.NCCL_CALL_NS / 1e3:.0f} µs + {bytes_moved / 2**20:.1f} MiB at {comm.NCCL_BUS_GBPS:g} GB/s",
        title=f"{backends} collectives run on the host: {share:.0f} % of the window, the GPU idle for "
        f"{idle_under / 1e6:.1f} ms of it",
        fix=fix,
        action=f"collectives on the GPUs (init_process_group({_backend_name(vendor)}))",
        evidence=Evidence(
            regions=tuple(
                RegionEvidence(name=f"{backends}:{r['collective']}", calls=int(r["calls"]), dur_ns=int(r["dur_ns"]))
                for r in kinds.iter_rows(named=True)
            ),
            figures=(
                ("host_collective_ns", float(span_ns)),
                ("gpu_idle_under_ns", float(idle_under)),
                ("nccl_floor_ns", float(nccl_ns)),
                ("bytes", float(bytes_moved)),
            ),
        ),
    )


def host_only(ctx: FindingContext) -> FindingsResult | None:
    """Findings for a trace without GPU activity whose host ran collectives (a CPU-only gloo
    job): the share of the steps' host time in them, and what fewer, larger calls save.
    None where the trace has no host collectives."""
    spans = C.backend_spans(ctx.trace).filter(pl.col("backend").is_in(list(C.HOST_BACKENDS)))
    if spans.height == 0:
        return None
    steps = ctx.trace.step_spans()
    if steps.height:
        window_spans = steps.select(pl.col("host_start_ns").alias("start_ns"), pl.col("host_end_ns").alias("end_ns"))
    else:
        ev = ctx.trace.events
        window_spans = pl.DataFrame({"start_ns": [int(ev["ts_ns"].min() or 0)], "end_ns": [int(ev["end_ns"].max() or 0)]})  # type: ignore[arg-type]
    window = int((window_spans["end_ns"] - window_spans["start_ns"]).sum() or 0)
    merged = intervals.union(spans.select(pl.col("ts_ns").alias("start_ns"), "end_ns"))
    inside = int(intervals.covered_ns(window_spans, merged)["covered_ns"].sum())
    if window <= 0 or inside <= 0:
        return None
    bucket = comm.bucketing(ctx)
    saving = 0.0 if bucket is None else min(float(inside), bucket.saving_ns * bucket.phase.steps.height)
    backends = ", ".join(sorted(set(spans["backend"].to_list())))
    n_steps = max(steps.height, 1)
    pct = 100.0 * saving / window
    share = 100.0 * inside / window
    finding = Finding(
        id="cpu_collectives",
        title=f"{backends} collectives fill {share:.0f} % of the host's step time",
        saving_pct=round(min(pct, 100.0), 3),
        saving_ns=round(saving / n_steps),
        saving_window_ns=int(saving),
        estimate_ns=int(saving),
        confidence="low",
        confidence_reason="no GPU activity in the trace: the share is of the host's step time, and only what "
        "fewer, larger calls save is claimed",
        fix=f"{backends} collectives take {share:.0f} % of each step: make them fewer and larger (bucket or "
        "flatten the tensors, one call per bucket), and overlap them with computation (async_op=True, wait "
        "where the result is used); on GPUs, run them with NCCL.",
        method="collective span time inside the steps over the steps' host time; saving: the span of the "
        "all-reduces minus the same bytes in 25 MB buckets at the fitted per-call cost",
        pool="idle",
        evidence=Evidence(figures=(("host_collective_ns", float(inside)), ("host_window_ns", float(window)))),
        material=pct >= MATERIALITY_PCT,
        action="fewer, larger collectives, overlapped with compute",
    )
    return FindingsResult(
        findings=(finding,) if finding.material else (),
        not_material=() if finding.material else (finding,),
        step_ns=window // n_steps,
        steps=steps.height,
        window_ns=window,
        total_saving_pct=finding.saving_pct if finding.material else 0.0,
        materiality_pct=MATERIALITY_PCT,
        rank=ctx.rank,
        skipped=("no GPU activity: only the host collectives were diagnosed, over the steps' host time",),
    )
