"""Findings about the training loop's structure: optimizer step, memory."""

from __future__ import annotations

import json

import polars as pl

from traceinsight.analysis.classify import with_classes
from traceinsight.analysis.device import model as device_model
from traceinsight.analysis.findings.catalogue import (
    BANDWIDTH_EFFICIENCY,
    FUSED_ADAM_BYTES_PER_PARAM,
    MEMORY_PRESSURE_SHARE,
)
from traceinsight.analysis.findings.detect.advice import memory_pressure_advice
from traceinsight.analysis.findings.model import (
    Confidence,
    Evidence,
    KernelEvidence,
    Pool,
    RegionEvidence,
)
from traceinsight.analysis.findings.price.fixes import exact_names, no_host_time_in
from traceinsight.analysis.findings.price.savings import Estimate, estimate
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.lib.host_names import name_matches
from traceinsight.analysis.whatif.copies import ScaleLaunchedIn

OPTIMIZER_PREFIX = "Optimizer.step#"
# Host ops of fused optimizers (torch's fused=True path; apex and DeepSpeed call their own).
FUSED_OPTIMIZER_OP = (
    r"^aten::_fused_(?:adam|adamw|sgd|adagrad)|FusedAdam|FusedLAMB|FusedSGD|multi_tensor_adam"
)
# The first input of these ops is every parameter once per step (foreach) or one parameter
# per call (for-loop implementation): their sizes add up to the parameter count.
# Causes of idle inside the optimizer's span that fusing its kernels leaves as they are.
NOT_FUSABLE_CAUSES = ("device_wait", "sync", "data_loading")
PARAM_OPS = ("aten::_foreach_addcdiv_", "aten::addcdiv_", "aten::_foreach_lerp_", "aten::lerp_")


def _numel(dims: object) -> int:
    if isinstance(dims, list) and all(isinstance(d, int) for d in dims):
        n = 1
        for d in dims:
            n *= d
        return n
    if isinstance(dims, list):  # a TensorList: a list of shapes
        return sum(_numel(d) for d in dims)
    return 0


def _param_count(ctx: FindingContext, step: int | None) -> int | None:
    ev = ctx.trace.events.select("kind", "name", "step", "input_dims").filter(pl.col("kind") == "cpu_op")
    for op in PARAM_OPS:
        rows = ev.filter(pl.col("name").cast(pl.String) == op)
        if step is not None:
            rows = rows.filter(pl.col("step") == step)
        if rows.height == 0:
            continue
        total = 0
        for text in rows["input_dims"].drop_nulls().to_list():
            try:
                dims = json.loads(text)
            except ValueError:
                continue
            total += _numel(dims[0]) if dims else 0
        if total > 0:
            return total
    return None


# torch.optim classes with a fused=True implementation (CUDA and ROCm).
FUSED_IN_TORCH = frozenset({"Adam", "AdamW", "SGD", "Adagrad", "Adamax"})


def _optimizer_fix(model: device_model.DeviceModel, annotation: str) -> tuple[str, str]:
    """(fix, action) for the optimizer named in ``Optimizer.step#<Class>.step`` on this device."""
    name = annotation.removeprefix(OPTIMIZER_PREFIX).removesuffix(".step")
    if model.features.fused_optimizer and name not in FUSED_IN_TORCH:
        return (
            f"{name} has no fused implementation in torch.optim: batch its per-parameter kernels with "
            "torch._foreach_* ops (foreach=True where it supports it) or compile its step "
            "(torch.compile(optimizer.step)), so it runs as a few kernels per step.",
            "batch or compile the optimizer step",
        )
    action = (
        "the fused optimizer (fused=True)"
        if model.features.fused_optimizer
        else "the foreach optimizer (foreach=True)"
    )
    return device_model.fused_optimizer_advice(model), action


def detect_unfused_optimizer(ctx: FindingContext) -> Estimate | None:
    k = ctx.trace.kernels.filter(
        pl.col("annotation").cast(pl.String).str.starts_with(OPTIMIZER_PREFIX)
    )
    if k.height == 0:
        return None
    model = ctx.device
    classes = with_classes(k.select(pl.col("name").cast(pl.String)).unique(), vendor=model.vendor)
    # Already fused: a fused optimizer kernel (torch's _fused_adam, apex FusedAdam /
    # multi_tensor_adam) runs in the step, or the host called a fused optimizer op.
    fused_kernel = (
        classes.filter((pl.col("family") == "optimizer") & (pl.col("subfamily") == "fused")).height
        > 0
    )
    host_ops = ctx.trace.events.select("kind", "name").filter(
        (pl.col("kind") == "cpu_op") & name_matches(ctx.trace.events, FUSED_OPTIMIZER_OP)
    )
    if fused_kernel or host_ops.height > 0:
        return None
    # foreach: multi_tensor_apply kernels, or (where kernel names are the backend's own) the
    # host ran aten::_foreach_* ops for them
    foreach = classes.filter(pl.col("subfamily") == "foreach").height > 0 or bool(
        k["op_name"].cast(pl.String).str.starts_with("aten::_foreach_").any()
    )
    if not model.features.fused_optimizer and foreach:
        return None  # foreach already, and no fused implementation is known for this device
    per_step = (
        k.group_by("step")
        .agg(
            pl.len().alias("kernels"),
            pl.col("dur_ns").sum().alias("kernel_ns"),
            (pl.col("end_ns").max() - pl.col("ts_ns").min()).alias("span_ns"),
            pl.col("ts_ns").min().alias("start_ns"),
            pl.col("end_ns").max().alias("stop_ns"),
        )
        .sort("step")
    )
    if ctx.window is not None and ctx.window.excluded.height:
        # An optimizer step that overlaps one-time work (start-up, compilation, capture) is not
        # the steady state: its span holds the first call's idle, which fusing would not save.
        one_time = ctx.window.excluded.select(
            pl.col("start_ns").alias("once_start_ns"), pl.col("end_ns").alias("once_end_ns")
        )
        hit = (
            per_step.select("step", "start_ns", "stop_ns")
            .join(one_time, how="cross")
            .filter(
                (pl.col("start_ns") < pl.col("once_end_ns"))
                & (pl.col("once_start_ns") < pl.col("stop_ns"))
            )
        )
        per_step = per_step.filter(~pl.col("step").is_in(hit["step"].to_list()))
        if per_step.height == 0:
            return None
    steady = per_step
    if ctx.steps is not None and ctx.steps.warmup_step is not None and per_step.height > 1:
        steady = per_step.filter(pl.col("step") != ctx.steps.warmup_step)
    kernels_per_step = float(steady["kernels"].mean() or 0)  # type: ignore[arg-type]
    if kernels_per_step <= 3:
        return None  # already one or a few kernels per step
    last_step = steady["step"][-1] if steady.height else None
    params = _param_count(ctx, last_step)
    bw = ctx.mem_bw_tbps
    span_ns = float(per_step["span_ns"].sum())
    kernel_ns = float(per_step["kernel_ns"].sum())
    if params and bw:
        fused_per_step = (
            params * FUSED_ADAM_BYTES_PER_PARAM / (bw * 1e12 * BANDWIDTH_EFFICIENCY) * 1e9
        )
        fused_ns = fused_per_step * per_step.height
        method = (
            f"optimizer device span per step minus one fused pass: {params:,} parameters × "
            f"{FUSED_ADAM_BYTES_PER_PARAM} bytes (fp32 AdamW state read and written once) at "
            f"{BANDWIDTH_EFFICIENCY:.0%} of {bw:g} TB/s"
        )
        confidence: Confidence = "medium"
        reason = f"{kernels_per_step:.0f} optimizer kernels per step, none fused; parameter count from the optimizer ops' shapes"
    else:
        fused_ns = kernel_ns * 0.5
        method = "optimizer device span minus half its kernel time (no parameter count or bandwidth known)"
        confidence = "low"
        reason = f"{kernels_per_step:.0f} optimizer kernels per step; parameter count unknown"
    idle_claim = max(0.0, span_ns - kernel_ns)
    # The idle inside the optimizer's span was also attributed to a cause by the gaps analysis:
    # the finding for that cause gives up what the fused optimizer removes, and launch_bound the
    # launch latency below the gap threshold, also where the trace has no gap at all.
    parts: list[tuple[Pool, str, int]] = []
    if ctx.gaps is not None:
        spans = k.group_by("step").agg(lo=pl.col("ts_ns").min(), hi=pl.col("end_ns").max())
        inside = (
            ctx.gaps.gaps.join(spans, on="step")
            .filter((pl.col("start_ns") >= pl.col("lo")) & (pl.col("end_ns") <= pl.col("hi")))
            .group_by("cause")
            .agg(pl.col("dur_ns").sum())
            .sort("cause")
        )
        # Idle a fused optimizer would not remove: the GPU waiting on work queued elsewhere
        # (a gradient all-reduce on another stream), on a sync, or on the data.
        kept = int(inside.filter(pl.col("cause").is_in(NOT_FUSABLE_CAUSES))["dur_ns"].sum())
        idle_claim = max(0.0, idle_claim - kept)
        owner = {
            "allocator": "allocator_churn",
            "launch_overhead": "launch_bound",
            "untraced": "host_bound",
            "host_compute": "host_bound",
            "python": "host_bound",
        }
        parts = [("idle", owner[c], int(ns)) for c, ns in inside.iter_rows() if c in owner]
        gap_ns = sum(ns for _, _, ns in parts)
        # What is left is idle below the gap threshold: launch latency between kernels.
        parts.append(("idle", "launch_bound", max(0, int(idle_claim) - gap_ns)))
    compute_claim = max(0.0, kernel_ns - fused_ns)
    top = (
        k.group_by(pl.col("name").cast(pl.String))
        .agg(pl.len().alias("calls"), pl.col("dur_ns").sum())
        .sort(["dur_ns", "name"], descending=[True, False])
    )
    fix, action = _optimizer_fix(model, str(k["annotation"][0]))
    return estimate(
        ctx,
        "unfused_optimizer",
        {"compute": compute_claim, "idle": idle_claim},
        # one fused pass instead of the optimizer's kernels, launched once: its host time
        # (per-parameter launches) leaves the step's path
        transforms=(
            ScaleLaunchedIn(
                exact_names([str(k["annotation"][0])]), fused_ns / kernel_ns if kernel_ns else 1.0
            ),
            *no_host_time_in([str(k["annotation"][0])]),
        ),
        within_parts=tuple(parts),
        confidence=confidence,
        confidence_reason=reason,
        method=method,
        title=f"The optimizer step runs as {kernels_per_step:.0f} kernels per step ("
        + ("foreach, not fused" if foreach else "one or more per parameter")
        + ")",
        fix=fix,
        action=action,
        evidence=Evidence(
            kernels=tuple(
                KernelEvidence(name=r["name"], calls=int(r["calls"]), dur_ns=int(r["dur_ns"]))
                for r in top.head(5).iter_rows(named=True)
            ),
            regions=(
                RegionEvidence(
                    name=str(k["annotation"][0]), calls=per_step.height, dur_ns=int(span_ns)
                ),
            ),
            locations=ctx.locations_of([str(k["annotation"][0])]),
            figures=(("kernels_per_step", kernels_per_step), ("params", float(params or 0))),
        ),
    )


def detect_memory_pressure(ctx: FindingContext) -> Estimate | None:
    if ctx.memory is None or ctx.memory.peaks.height == 0:
        return None
    if ctx.workload.serving:
        # Serving engines reserve most of the device for weights and KV cache by design
        # (vLLM's gpu_memory_utilization, SGLang's mem_fraction_static): not a risk.
        return None
    worst: tuple[float, int, int] | None = None
    for row in ctx.memory.peaks.iter_rows(named=True):
        index = row.get("device_index")
        dev = ctx.trace.meta.device(int(index)) if index is not None else None
        total = dev.total_global_mem_bytes if dev is not None else None
        reserved = row.get("peak_reserved_bytes") or 0
        if total and reserved:
            share = reserved / total
            if worst is None or share > worst[0]:
                worst = (share, int(reserved), int(total))
    if worst is None or worst[0] < MEMORY_PRESSURE_SHARE:
        return None
    share, reserved, total = worst
    return estimate(
        ctx,
        "memory_pressure",
        {},
        confidence="high",
        confidence_reason=f"peak reserved {reserved / 2**30:.1f} GiB of {total / 2**30:.1f} GiB",
        method="no time saving is claimed: this is a risk (out-of-memory, allocator retries), listed whatever its size",
        evidence=Evidence(
            figures=(
                ("peak_reserved_bytes", float(reserved)),
                ("device_bytes", float(total)),
                ("share_pct", round(100 * share, 2)),
            )
        ),
        fix=memory_pressure_advice(ctx.workload),
    )
