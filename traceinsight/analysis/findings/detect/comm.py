"""Communication findings by what the collectives are: exposed collectives (the fix depends on
the collective and the framework that issued it), exposed all-to-all, one all-reduce per
parameter, and collectives run on the host (gloo).

The figures come from :mod:`..read.collectives`; the fix texts from what the trace shows: DDP's
reducer, FSDP's spans, TorchRec's or a mixture-of-experts layer's all-to-all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

from traceinsight.analysis.findings.detect.advice import communication_advice
from traceinsight.analysis.findings.detect.comm_fixes import all_to_all_fix, mixed_fix
from traceinsight.analysis.findings.detect.idle import HOST_CAUSES
from traceinsight.analysis.findings.model import Evidence, KernelEvidence, Pool, RegionEvidence
from traceinsight.analysis.findings.price.savings import Estimate, estimate
from traceinsight.analysis.findings.read import collectives as C
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.timeline import busy_intervals, gpu_work
from traceinsight.analysis.whatif.transforms import OverlapComm, ScaleKernels, Transformation

# At least this many all-reduces per step, this many times the buckets their bytes fill,
# before calls are "one per parameter" rather than a few buckets.
PER_PARAMETER_MIN_CALLS = 16
PER_PARAMETER_BUCKET_RATIO = 4.0
# A NCCL call's fixed cost and a conservative bus bandwidth (PCIe class; NVLink is faster):
# what the same collectives would at least cost on the GPUs.
NCCL_CALL_NS = 20_000
NCCL_BUS_GBPS = 20.0


# ---- exposed collectives ----------------------------------------------------------------


def _exposed(ctx: FindingContext) -> tuple[pl.DataFrame, pl.DataFrame]:
    comm = C.comm_kernels(ctx.trace, ctx.device.vendor)
    return comm, C.exposed_by_collective(ctx.trace, comm)


def _exposed_estimate(ctx: FindingContext, all_to_all: bool) -> Estimate | None:
    total = ctx.category_ns("communication")
    if total <= 0:
        return None
    comm, by = _exposed(ctx)
    if by.height == 0 or int(by["exposed_ns"].sum()) <= 0:
        # collectives named only by args (no classified name): one pool, kind unknown
        if all_to_all:
            return None
        by = pl.DataFrame({"collective": [None], "calls": [0], "kernel_ns": [0], "exposed_ns": [total]},
                          schema={"collective": pl.String, "calls": pl.UInt32, "kernel_ns": pl.Int64, "exposed_ns": pl.Int64})
    is_a2a = pl.col("collective") == "all_to_all"
    mine = by.filter(is_a2a if all_to_all else (~is_a2a).fill_null(True))
    share = float(mine["exposed_ns"].sum()) / max(float(by["exposed_ns"].sum()), 1.0)
    exposed = int(total * share)  # the breakdown's communication time, split by kind
    if exposed <= 0:
        return None
    compute = ctx.category_ns("compute")
    fws = C.frameworks(ctx.trace)
    if all_to_all:
        fix, action = all_to_all_fix(fws)
    else:
        fix, action = mixed_fix(mine, fws)
        # a forward-only program has no gradients to bucket: tensor-parallel advice instead,
        # unless a training framework's spans say the window just caught no backward; a trace
        # that cannot tell (no host ops) gets both readings
        inference_fix = communication_advice(ctx.workload)
        if inference_fix is not None and not fws & {"ddp", "fsdp", "torchrec"}:
            action = (
                "overlap or shrink the collectives (training: DDP buckets; forward: fewer TP ranks)"
                if ctx.workload.kind == "unknown"
                else "hide or shrink the forward pass's collectives"
            )
            fix = inference_fix
    kernels = comm.filter(is_a2a if all_to_all else (~is_a2a).fill_null(True))
    top = kernels.group_by("name").agg(pl.len().alias("calls"), pl.col("dur_ns").sum()).sort(
        ["dur_ns", "name"], descending=[True, False]
    )
    finding_id = "exposed_all_to_all" if all_to_all else "exposed_communication"
    known = [str(k) for k in mine["collective"].to_list() if k is not None]
    title = None if all_to_all or not known else f"Collectives ({', '.join(known)}) run while no compute overlaps them"
    seen = ", ".join(sorted(fws)) or "no framework spans"
    kinds = ", ".join(f"{r['collective'] or 'unknown'} {r['exposed_ns'] / 1e6:.2f} ms" for r in mine.iter_rows(named=True))
    # The fix hides the exposed collectives behind compute: as a what-if, those kernels take
    # no time on their stream (all collectives, or the all-to-all kernels only).
    transforms: tuple[Transformation, ...] = (OverlapComm(),) if not all_to_all and by.height == mine.height else ()
    if all_to_all and top.height:
        names = "|".join(_escape(n) for n in top["name"].to_list())
        transforms = (ScaleKernels(f"name~^(?:{names})$", 0.0),)
    return estimate(
        ctx,
        finding_id,
        # capped by its share of the compute time there is to hide the collectives behind
        {"communication": min(exposed, int(compute * share))},
        # An upper bound: overlapped collectives share the GPU with the compute they hide
        # behind. On two H200s (sample_traces/comm, DDP over NCCL), going from one bucket to
        # 25 MB buckets hid 1.4 ms of exposed all-reduce per step but slowed the backward's
        # GEMMs by 3.8 ms of kernel time: 3.8 % measured against 12 % predicted.
        confidence="low",
        confidence_reason="collective time not overlapped by any compute kernel, an upper bound: hidden "
        "behind compute, the collectives slow the kernels they overlap (they share the SMs and memory "
        "bandwidth), and part of the time may be waiting for a slower rank, which overlap cannot hide",
        method="collective kernel time during which no compute kernel ran (the breakdown's communication "
        f"share, split by collective: {kinds}), capped by the compute time available to hide it behind; "
        f"framework from the host spans: {seen}",
        title=title,
        fix=fix,
        action=action,
        transforms=transforms,
        evidence=Evidence(
            regions=tuple(
                RegionEvidence(name=r["collective"] or "unknown collective", calls=int(r["calls"]), dur_ns=int(r["kernel_ns"]))
                for r in mine.iter_rows(named=True)
            ),
            kernels=tuple(
                KernelEvidence(name=r["name"], calls=int(r["calls"]), dur_ns=int(r["dur_ns"])) for r in top.head(3).iter_rows(named=True)
            ),
            figures=(("exposed_communication_ns", float(exposed)), ("collective_kernel_ns", float(kernels["dur_ns"].sum()))),
        ),
    )


def _escape(name: str) -> str:
    import re

    return re.escape(name)


def detect_exposed_communication(ctx: FindingContext) -> Estimate | None:
    return _exposed_estimate(ctx, all_to_all=False)


def detect_exposed_all_to_all(ctx: FindingContext) -> Estimate | None:
    return _exposed_estimate(ctx, all_to_all=True)


# ---- one all-reduce per parameter -------------------------------------------------------


@dataclass(frozen=True)
class Bucketing:
    """What bucketing the per-step all-reduces would save, per step (medians over steps)."""

    calls: float
    buckets: int
    bytes: float
    span_ns: float
    call_ns: float  # fixed cost of one call (latency + host gap between calls)
    ns_per_byte: float
    bucketed_ns: float
    hidden_ns: float  # of the bucketed time, what the backward pass's GPU work can hide
    saving_ns: float
    fitted: bool  # the per-call cost was fitted on calls of different sizes
    grads: int | None  # gradient tensors per step (AccumulateGrad), where recorded
    phase: C.Phase


def _steady_steps(ctx: FindingContext, calls: pl.DataFrame) -> list[int]:
    steps = sorted(int(s) for s in calls["step"].drop_nulls().unique().to_list())
    warm = ctx.steps.warmup_step if ctx.steps is not None else None
    kept = [s for s in steps if s != warm]
    return kept or steps


def _executions(ctx: FindingContext, comm: pl.DataFrame, steps: list[int]) -> pl.DataFrame:
    """The all-reduces' executions (gloo spans, else kernels): step, dur_ns, in start order."""
    spans = C.backend_spans(ctx.trace).filter((pl.col("collective") == "allreduce") & pl.col("step").is_in(steps))
    if spans.height:
        return spans.select("step", pl.col("ts_ns").alias("start_ns"), "dur_ns").sort("start_ns")
    return comm.filter((pl.col("collective") == "allreduce") & pl.col("step").is_in(steps)).select(
        "step", "start_ns", "dur_ns"
    ).sort("start_ns")


def _fit(calls: pl.DataFrame, runs: pl.DataFrame, elem_bytes: int) -> tuple[float, float, bool] | None:
    """(fixed ns per call, ns per byte, fitted) from executions paired with calls in order
    within each step; None when they cannot be paired."""
    a = calls.sort("start_ns").with_columns(i=pl.int_range(pl.len()).over("step"))
    b = runs.sort("start_ns").with_columns(i=pl.int_range(pl.len()).over("step"))
    if a.height != b.height or a["elements"].null_count() == a.height:
        return None
    pairs = a.join(b.select("step", "i", pl.col("dur_ns").alias("run_ns")), on=["step", "i"]).select(
        (pl.col("elements").fill_null(0) * elem_bytes).cast(pl.Float64).alias("x"), pl.col("run_ns").cast(pl.Float64).alias("y")
    )
    x, y = pairs["x"], pairs["y"]
    var = float(x.var() or 0.0)  # type: ignore[arg-type]
    if var <= 0:
        return float(y.mean() or 0.0), 0.0, False  # type: ignore[arg-type]
    slope = float(pl.DataFrame({"x": x, "y": y}).select(pl.cov("x", "y")).item()) / var
    slope = max(slope, 0.0)
    intercept = float(y.mean() or 0.0) - slope * float(x.mean() or 0.0)  # type: ignore[arg-type]
    if intercept < 0:
        return 0.0, float(y.sum()) / max(float(x.sum()), 1.0), True
    return intercept, slope, True


def bucketing(ctx: FindingContext) -> Bucketing | None:
    """The per-step all-reduce pattern and what bucketing it would save (None: no pattern)."""
    calls = C.host_calls(ctx.trace)
    calls = calls.filter(pl.col("collective") == "allreduce")
    if calls.height == 0:
        return None
    steps = _steady_steps(ctx, calls)
    comm = C.comm_kernels(ctx.trace, ctx.device.vendor)
    ph = C.phase(ctx.trace, calls, comm, "allreduce", steps)
    if ph.steps.height == 0:
        return None
    elem_bytes = C.element_bytes(ctx.trace)
    n = ph.calls_per_step
    total_bytes = float(ph.steps["elements"].median() or 0.0) * elem_bytes  # type: ignore[arg-type]
    buckets = max(1, math.ceil(total_bytes / C.BUCKET_BYTES))
    span = float(ph.steps["span_ns"].median() or 0.0)  # type: ignore[arg-type]
    mine = calls.filter(pl.col("step").is_in(steps))
    fit = _fit(mine, _executions(ctx, comm, steps), elem_bytes)
    if fit is None:
        call_ns, per_byte, fitted = span / max(n, 1.0), 0.0, False
    else:
        run_ns, per_byte, fitted = fit
        # the time between calls (host loop, copies, launches) goes with each call too
        gap = max(0.0, span - n * run_ns - per_byte * total_bytes) / max(n, 1.0)
        call_ns = run_ns + gap
    bucketed = min(span, buckets * call_ns + per_byte * total_bytes)
    # DDP starts each bucket's all-reduce as soon as its gradients are ready, so all but the
    # last bucket can run under the rest of the backward pass's GPU work.
    last_bucket = call_ns + per_byte * min(total_bytes, C.BUCKET_BYTES)
    hidden = min(max(0.0, bucketed - last_bucket), _backward_ns(ctx, steps))
    grads = _grad_tensors(ctx, steps)
    saving = max(0.0, span - bucketed + hidden)
    return Bucketing(n, buckets, total_bytes, span, call_ns, per_byte, bucketed, hidden, saving, fitted, grads, ph)


def _backward_ns(ctx: FindingContext, steps: list[int]) -> float:
    """GPU time per step of the kernels the autograd engine launched (the backward pass)."""
    k = ctx.trace.kernels.filter(
        pl.col("top_op_name").cast(pl.String).str.starts_with("autograd::engine::evaluate_function")
        & pl.col("step").is_in(steps)
    )
    if k.height == 0:
        return 0.0
    return float(k.group_by("step").agg(pl.col("dur_ns").sum())["dur_ns"].median() or 0.0)  # type: ignore[arg-type]


def _grad_tensors(ctx: FindingContext, steps: list[int]) -> int | None:
    acc = ctx.trace.events.filter(
        (pl.col("kind").cast(pl.String) == "cpu_op")
        & (pl.col("name").cast(pl.String).str.ends_with("torch::autograd::AccumulateGrad") & pl.col("name").cast(pl.String).str.starts_with("autograd::engine"))
        & pl.col("step").is_in(steps)
    )
    if acc.height == 0:
        return None
    return int(acc.group_by("step").len()["len"].median() or 0)  # type: ignore[arg-type]


def _phase_pools(ctx: FindingContext, ph: C.Phase) -> tuple[int, int]:
    """(idle ns, exposed communication ns) inside the phases, over the window."""
    spans = ph.steps.select("start_ns", "end_ns")
    if spans.height == 0:
        return 0, 0
    busy = busy_intervals(ctx.trace).select("start_ns", "end_ns")
    work = gpu_work(ctx.trace)
    other = work.filter(pl.col("category") != "communication").select("start_ns", "end_ns")
    covered_all = intervals.covered_ns(spans, busy)["covered_ns"].sum()
    covered_other = intervals.covered_ns(spans, other)["covered_ns"].sum()
    span_total = int((spans["end_ns"] - spans["start_ns"]).sum())
    idle = max(0, span_total - int(covered_all))
    comm = max(0, int(covered_all) - int(covered_other))
    return idle, comm


def _host_bound_part(ctx: FindingContext, ph: C.Phase, idle_claim: int) -> tuple[tuple[Pool, str, int], ...]:
    """The idle inside the phases that host_bound reports as host work (gloo's spans are host
    spans): counted here, given up there."""
    if ctx.gaps is None or ctx.gaps.gaps.height == 0 or idle_claim <= 0:
        return ()
    host = ctx.gaps.gaps.filter(pl.col("cause").is_in(list(HOST_CAUSES))).select("start_ns", "end_ns")
    if host.height == 0:
        return ()
    inside = int(intervals.covered_ns(host, ph.steps.select("start_ns", "end_ns"))["covered_ns"].sum())
    return (("idle", "host_bound", min(inside, idle_claim)),) if inside > 0 else ()


def detect_allreduce_per_parameter(ctx: FindingContext) -> Estimate | None:
    if ctx.workload.inference and not C.frameworks(ctx.trace) & {"ddp", "fsdp"}:
        # a forward pass has no gradients: its many small all-reduces are tensor parallelism's,
        # one or two per layer, which exposed_communication prices and advises on
        return None
    b = bucketing(ctx)
    if b is None or b.calls < PER_PARAMETER_MIN_CALLS or b.calls < PER_PARAMETER_BUCKET_RATIO * b.buckets:
        return None
    if b.saving_ns <= 0:
        return None
    idle, comm = _phase_pools(ctx, b.phase)
    free = idle + comm
    if free <= 0:
        return None
    window_saving = min(float(free), b.saving_ns * b.phase.steps.height)
    claims: dict[Pool, float] = {"idle": window_saving * idle / free, "communication": window_saving * comm / free}
    fws = C.frameworks(ctx.trace)
    per_param = b.grads is not None and 0.5 * b.grads <= b.calls <= 1.5 * b.grads
    what = f"≈ one per gradient tensor ({b.grads} per step)" if per_param else (
        f"{b.grads} gradient tensors per step" if b.grads else "gradient tensor count not recorded")
    if "ddp" in fws:
        fix = ("DDP splits the gradients into many small buckets: raise bucket_cap_mb (25 MB by default) so "
               "the all-reduce runs as a few large calls, and keep gradient_as_bucket_view=True.")
        action = "larger DDP buckets (bucket_cap_mb)"
    else:
        fix = ("Reduce the gradients in buckets, not one all-reduce per parameter: wrap the model in "
               "DistributedDataParallel (25 MB buckets, all-reduced during backward), or flatten them and "
               "reduce once: flat = torch._utils._flatten_dense_tensors(grads); dist.all_reduce(flat); "
               "then copy back with torch._utils._unflatten_dense_tensors(flat, grads).")
        action = "bucket the all-reduces (DDP, or flatten + one all_reduce)"
    # As a what-if: the all-reduce executions shrink to what the buckets would cost.
    factor = max(0.0, b.span_ns - b.saving_ns) / b.span_ns if b.span_ns > 0 else 1.0
    transforms: tuple[Transformation, ...] = (ScaleKernels(r"name~(?i)all_?reduce|AllReduce", round(factor, 4)),) if comm > 0 else ()
    return estimate(
        ctx,
        "allreduce_per_parameter",
        claims,
        # the same exposed collective time exposed_communication reports, and the idle that
        # host_bound reports as host work in gloo's spans: counted here, given up there
        within_parts=_host_bound_part(ctx, b.phase, int(claims["idle"]))
        + ((("communication", "exposed_communication", int(claims["communication"])),) if claims["communication"] > 0 else ()),
        confidence="high" if per_param and b.fitted else "medium",
        confidence_reason=f"{b.calls:.0f} all-reduces per step, {what}; their bytes fill {b.buckets} bucket(s)"
        + ("" if b.fitted else "; per-call cost not fitted (calls of one size or not paired with their runs)"),
        method=f"per step: the span from the first all-reduce to the end of the last ({b.span_ns / 1e6:.2f} ms) minus "
        f"{b.buckets} bucket(s) × {b.call_ns / 1e3:.0f} µs per call (fitted latency plus the gap between calls) "
        f"+ {b.bytes / 2**20:.1f} MiB × {b.ns_per_byte * 2**20 / 1e6:.3f} ms/MiB, plus the part of those buckets "
        f"but the last that the backward pass's GPU work can hide ({b.hidden_ns / 1e6:.2f} ms); claimed from "
        "the idle and collective time inside that span",
        title=f"{b.calls:.0f} small all-reduces per step where {b.buckets} bucketed one(s) would do",
        fix=fix,
        action=action,
        transforms=transforms,
        evidence=Evidence(
            regions=(RegionEvidence(name="all-reduce phase", calls=int(b.calls), dur_ns=int(b.span_ns)),),
            figures=(
                ("allreduce_calls_per_step", b.calls),
                ("grad_tensors_per_step", float(b.grads or 0)),
                ("allreduce_bytes_per_step", b.bytes),
                ("buckets", float(b.buckets)),
                ("call_ns", b.call_ns),
                ("phase_ns_per_step", b.span_ns),
                ("bucketed_ns_per_step", b.bucketed_ns),
                ("hidden_by_backward_ns_per_step", b.hidden_ns),
            ),
        ),
    )
