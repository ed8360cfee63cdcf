"""Findings about the arithmetic path of GEMMs: no tensor cores, float64, misaligned shapes
(runs of small same-shape GEMMs are in ``batching``)."""

from __future__ import annotations

import json

import polars as pl

from traceinsight.analysis.classify import MATRIX_FAMILIES, with_classes
from traceinsight.analysis.device import model as device_model
from traceinsight.analysis.findings.catalogue import (
    GEMM_FLOOR_NS,
    SIMT_EFFICIENCY,
    TENSOR_CORE_EFFICIENCY,
)
from traceinsight.analysis.findings.detect.attention import find_subgraph, touches
from traceinsight.analysis.findings.model import Confidence, Evidence, KernelEvidence, OpEvidence
from traceinsight.analysis.findings.price.fixes import scale_names
from traceinsight.analysis.findings.price.gemm_rates import fp32_levers, recoverable
from traceinsight.analysis.findings.price.savings import Estimate, estimate
from traceinsight.analysis.findings.read.context import FindingContext

# Matrix math a batched or padded GEMM call replaces: GEMMs and convolutions (not attention).
GEMM_FAMILIES = tuple(f for f in MATRIX_FAMILIES if not f.startswith("attention"))
# Parts of a GEMM that are not the product itself: split-K reductions and cuBLASLt epilogues
# run on CUDA cores whatever path the product took.
GEMM_HELPERS = ("splitk_reduce", "epilogue")
# GEMM findings about matmuls only: convolutions' channels are another finding's.
MATMUL_FAMILIES = tuple(f for f in GEMM_FAMILIES if not f.startswith("conv"))
CONV_OP = r"(?i)conv"
# Operand alignment that lets a tensor-core kernel use 16-byte vector loads.
ALIGNED_BYTES = 16
# A projection whose output is this many times its input is a vocabulary (50257 / 768 in
# GPT-2, 32000 / 4096 in Llama 2); a square 8191 x 8191 GEMM is not.
VOCAB_OVER_HIDDEN = 4


def _conv_launched(ctx: FindingContext) -> pl.Series:
    """Names of kernels that only convolution ops launched."""
    k = ctx.trace.kernels.select(pl.col("name").cast(pl.String), pl.col("op_name").cast(pl.String).fill_null(""))
    by = k.group_by("name").agg(pl.col("op_name").str.contains(CONV_OP).all().alias("conv"))
    return by.filter(pl.col("conv"))["name"]


def _kernel_table(ctx: FindingContext) -> pl.DataFrame | None:
    """Kernel names with family, tensor-core flag, time, and FLOPs / dtype where the bound
    analysis could cost them."""
    if ctx.kernels is None:
        return None
    table = ctx.kernels.kernels.select("name", "calls", "total_ns")
    classes = with_classes(table.select("name"), vendor=ctx.device.vendor).select(
        "name", "family", "subfamily", "precision", "tensor_core", "element_bytes", "alignment"
    )
    table = table.join(classes, on="name", how="left")
    if ctx.bound is not None and ctx.bound.kernels.height > 0:
        costs = ctx.bound.kernels.group_by("name").agg(
            pl.col("flops").sum(), pl.col("bytes").sum(), pl.col("dtype_class").drop_nulls().first()
        )
        table = table.join(costs, on="name", how="left")
    else:
        table = table.with_columns(
            flops=pl.lit(None, pl.Float64),
            bytes=pl.lit(None, pl.Float64),
            dtype_class=pl.lit(None, pl.String),
        )
    return table


def _kernels_evidence(rows: pl.DataFrame, limit: int = 5) -> tuple[KernelEvidence, ...]:
    top = rows.sort(["total_ns", "name"], descending=[True, False]).head(limit)
    return tuple(
        KernelEvidence(
            name=r["name"],
            calls=int(r["calls"]),
            dur_ns=int(r["total_ns"]),
            tensor_core=r["tensor_core"],
        )
        for r in top.iter_rows(named=True)
    )


def _ops_evidence(ctx: FindingContext, ops: pl.DataFrame, limit: int = 5) -> tuple[OpEvidence, ...]:
    top = ops.sort(["kernel_ns", "name", "shapes"], descending=[True, False, False]).head(limit)
    return tuple(
        OpEvidence(
            name=r["name"],
            shapes=r["shapes"],
            dtypes=ctx.op_dtypes(r["name"], r["shapes"]),
            calls=int(r["calls"]),
            dur_ns=int(r["kernel_ns"]),
        )
        for r in top.iter_rows(named=True)
    )


def _gemm_ops(ctx: FindingContext, dtype_classes: tuple[str, ...]) -> pl.DataFrame:
    if ctx.bound is None or ctx.bound.ops.height == 0:
        return pl.DataFrame(
            schema={
                "name": pl.String,
                "shapes": pl.String,
                "calls": pl.Int64,
                "kernel_ns": pl.Int64,
            }
        )
    return ctx.bound.ops.filter(
        pl.col("family").is_in(GEMM_FAMILIES) & pl.col("dtype_class").is_in(list(dtype_classes))
    )


def fp32_target(model: device_model.DeviceModel) -> str | None:
    """The tensor/matrix-core precision the fix moves fp32 matmuls to on this device: TF32
    on NVIDIA Ampere and later, fp16 on Volta/Turing (no TF32 or bf16 there), bf16 on AMD and
    Intel parts with bf16 matrix cores; None where the device has none (or is unknown)."""
    m = model.matrix_precisions
    order = ("tf32", "fp16") if model.vendor == "nvidia" else ("bf16", "fp16")
    return next((p for p in order if p in m), None)


def _is_fp32() -> pl.Expr:
    """fp32 by the kernel's name, or by its op's input types where the name states none."""
    prec = pl.col("precision").fill_null("unknown")
    return (prec == "fp32") | ((prec == "unknown") & (pl.col("dtype_class") == "fp32"))


def detect_fp32_no_tensor_cores(ctx: FindingContext) -> Estimate | None:
    table = _kernel_table(ctx)
    if table is None:
        return None
    model = ctx.device
    target = fp32_target(model)
    if model.known and target is None:
        return None  # no tensor/matrix cores on this part: fp32 on CUDA cores is all it has
    # Only kernels whose name says "no tensor cores" (unknown is neither yes nor no), and only
    # the product itself: split-K reductions and epilogues are CUDA-core work on any path.
    rows = table.filter(
        pl.col("family").is_in(GEMM_FAMILIES)
        & (pl.col("tensor_core") == False)  # noqa: E712 - null (unknown) must not match
        & ~pl.col("subfamily").fill_null("").is_in(GEMM_HELPERS)
        & _is_fp32()
    )
    if rows.height == 0:
        return None
    gemm_ns = int(rows["total_ns"].sum())
    peak = ctx.peak_tflops(target) if target else None
    fp32 = ctx.peak_tflops("fp32")
    label = {"tf32": "TF32", "fp16": "fp16", "bf16": "bf16"}.get(target or "", "")
    if peak is None:
        saving, known = gemm_ns * 0.5, 0.0
        method = (
            f"{model.describe()}: no peak figures, so no peak-based estimate; assumed half of the "
            "fp32 GEMM time recoverable"
        )
    else:
        rate = peak * TENSOR_CORE_EFFICIENCY
        saving, known = recoverable(rows, rate, None if fp32 is None else fp32 * SIMT_EFFICIENCY)
        method = (
            f"fp32 GEMM/conv kernel time ({gemm_ns / 1e6:.2f} ms over the window) minus the same FLOPs at "
            f"{TENSOR_CORE_EFFICIENCY:.0%} of the {label} tensor-core peak ({peak:g} TFLOP/s), per kernel, "
            f"each call at least {GEMM_FLOOR_NS / 1e3:g} µs; FLOPs from the op shapes for {known:.0%} of that time"
            + (
                ""
                if known >= 0.999
                else f", the rest assumed to run at {SIMT_EFFICIENCY:.0%} of the fp32 peak"
            )
            + (". bf16 autocast would save more (its peak is twice TF32's)." if target == "tf32" else ".")
        )
    tf32 = scale_names(rows["name"].to_list(), gemm_ns - saving, gemm_ns)
    levers = fp32_levers(ctx, rows, gemm_ns, target, saving, tf32) if peak is not None else ()
    confidence: Confidence = "high" if known >= 0.8 else "medium" if peak is not None else "low"
    reason = (
        f"kernel names show no tensor-core path; FLOPs known for {known:.0%} of the time"
        if peak is not None
        else f"device peaks unknown ({model.describe()})"
    )
    share = 100.0 * gemm_ns / ctx.kernels.total_ns if ctx.kernels and ctx.kernels.total_ns else 0.0
    evidence = Evidence(
        kernels=_kernels_evidence(rows),
        ops=_ops_evidence(ctx, _gemm_ops(ctx, ("fp32",))),
        locations=ctx.locations_of(
            ["aten::mm", "aten::addmm", "aten::bmm", "aten::linear", "aten::matmul"]
        ),
        figures=(("fp32_gemm_ns", float(gemm_ns)), ("share_of_kernel_time_pct", round(share, 2))),
    )
    return estimate(
        ctx,
        "fp32_no_tensor_cores",
        {"compute": saving},
        transforms=tf32,
        confidence=confidence,
        confidence_reason=reason,
        method=method,
        evidence=evidence,
        title=f"float32 GEMMs run without tensor cores ({share:.0f} % of GPU kernel time)",
        fix=device_model.matmul_precision_advice(model),
        action=_FP32_ACTION.get(target or "", "reduced-precision matmuls"),
        levers=levers,
    )


_FP32_ACTION = {
    "tf32": "torch.set_float32_matmul_precision('high') or bf16 autocast",
    "fp16": "fp16 autocast with a GradScaler",
    "bf16": "bf16 autocast",
}


def detect_fp64_compute(ctx: FindingContext) -> Estimate | None:
    table = _kernel_table(ctx)
    if table is None:
        return None
    # "fp64_tc": fp64 work on FP64 tensor cores (the bound analysis prices it at that peak).
    # fp64 by the kernel's name, or by its op's inputs where the name states no precision
    prec = pl.col("precision").fill_null("unknown")
    rows = table.filter(
        (prec == "fp64") | ((prec == "unknown") & pl.col("dtype_class").is_in(["fp64", "fp64_tc"]))
    )
    rows = rows.filter(~pl.col("family").is_in(["memcpy", "memset"]))
    if rows.height == 0:
        return None
    # The fix is float32: with TF32 matmuls where the device has TF32 tensor cores
    # (set_float32_matmul_precision("high"), the usual training setting), else fp32 on CUDA
    # cores; the GEMMs are priced at that rate.
    model = ctx.device
    tf32_path = "tf32" in model.matrix_precisions
    target = ctx.peak_tflops("tf32") if tf32_path else ctx.peak_tflops("fp32")
    target_eff = TENSOR_CORE_EFFICIENCY if tf32_path else SIMT_EFFICIENCY
    target_label = "TF32 tensor-core" if tf32_path else "fp32"
    gemms = rows.filter(pl.col("family").is_in(GEMM_FAMILIES))
    others = rows.filter(~pl.col("family").is_in(GEMM_FAMILIES))
    fp64 = ctx.peak_tflops("fp64")
    if target is not None:
        gemm_saving, _ = recoverable(
            gemms, target * target_eff, None if fp64 is None else fp64 * SIMT_EFFICIENCY
        )
    else:
        gemm_saving = 0.5 * float(gemms["total_ns"].sum())
    other_saving = 0.5 * float(others["total_ns"].sum())  # memory-bound: half the bytes in fp32
    total_ns = int(rows["total_ns"].sum())
    return estimate(
        ctx,
        "fp64_compute",
        {"compute": gemm_saving + other_saving},
        transforms=(
            *scale_names(gemms["name"].to_list(), float(gemms["total_ns"].sum()) - gemm_saving, float(gemms["total_ns"].sum())),
            *scale_names(others["name"].to_list(), 0.5, 1.0),
        ),
        confidence="medium",
        confidence_reason="dtype from op inputs or kernel names; the fp32 result may need checking for accuracy",
        method=(
            (
                f"fp64 GEMM time minus the same FLOPs at {target_eff:.0%} of the {target_label} peak "
                f"(each call at least {GEMM_FLOOR_NS / 1e3:g} µs)"
                if target is not None
                else f"{model.describe()}: no peak figures, half of the fp64 GEMM time assumed recoverable"
            )
            + ", plus half of the other fp64 kernels' time (memory-bound kernels move half the bytes in fp32)"
        ),
        fix=_fp64_fix(model),
        evidence=Evidence(
            kernels=_kernels_evidence(rows),
            ops=_ops_evidence(ctx, _gemm_ops(ctx, ("fp64", "fp64_tc"))),
            figures=(("fp64_kernel_ns", float(total_ns)),),
        ),
    )


def _fp64_fix(model: device_model.DeviceModel) -> str:
    base = (
        "Keep tensors in float32 or lower: model.float() / dtype=torch.float32, convert NumPy "
        "input with torch.from_numpy(a).float(), avoid torch.set_default_dtype(torch.float64)"
    )
    if "tf32" in model.matrix_precisions and model.vendor == "nvidia":
        return base + "; with torch.set_float32_matmul_precision('high') the matmuls then use TF32 tensor cores."
    return base + ". " + device_model.matmul_precision_advice(model)


def misaligned_dims(op: str | None, shapes: str | None, multiple: int) -> list[int]:
    """The dimensions of a GEMM or convolution op that are off the multiple.

    Matmuls: the leading dimensions, K and N (the last dim of each row-major operand): they
    set the operands' alignment. M (rows, batch x sequence) only rounds the tile count, so it
    does not count; nor does a dimension of 1, a matrix-vector product (batch-1 decode),
    which no padding speeds up.
    Convolutions: the channels (input dim 1, weight dims 0 and 1): spatial sizes do not
    decide the tensor-core path.
    """
    if not shapes:
        return []
    try:
        dims = json.loads(shapes)
    except ValueError:
        return []
    if "conv" in (op or ""):
        x, w = [*dims, None, None][:2]
        found = [x[1]] if isinstance(x, list) and len(x) >= 3 else []
        found += list(w[:2]) if isinstance(w, list) and len(w) >= 3 else []
    else:
        mats = [d for d in dims[:3] if isinstance(d, list) and len(d) >= 2]
        found = [m[-1] for m in mats]
    return [int(x) for x in found if isinstance(x, int) and x > 1 and x % multiple != 0]


def _largest_n(ops: pl.DataFrame) -> int | None:
    """The largest output dimension N of the trace's matmuls when it is several times its
    inner dimension K: the final (vocabulary) projection of a language model, hidden → vocab.
    Convolutions are left out (their dims are channels)."""
    best, inner = 0, 0
    for name, shapes in ops.select("name", "shapes").iter_rows():
        if "conv" in (name or "") or not shapes:
            continue
        try:
            dims = json.loads(shapes)
        except ValueError:
            continue
        mats = [d for d in dims[:3] if isinstance(d, list) and len(d) >= 2 and isinstance(d[-1], int)]
        if mats and int(mats[-1][-1]) > best:
            best, inner = int(mats[-1][-1]), int(mats[-1][-2])
    return best if best and best >= VOCAB_OVER_HIDDEN * inner else None


def _misaligned_fix(bad_ops: pl.DataFrame, vocab: int | None) -> str:
    """Which dimensions are off, and what to pad them to: the vocabulary to a multiple of 64,
    the others to the multiple the dtype's 16-byte alignment needs (8 for 16-bit types, 4 for
    TF32, 16 for fp8)."""
    parts: dict[int, str] = {}
    for name, dtype, off in bad_ops.select("name", "dtype_class", "off").iter_rows():
        multiple = {"tf32": 4, "fp8": 16}.get(dtype or "", 8)
        conv = "conv" in (name or "")
        for d in off or []:
            if d in parts:
                continue
            if vocab is not None and d == vocab and not conv:
                parts[d] = f"the vocabulary ({d}, the largest output dimension): vocab_size to a multiple of 64, {d} → {-(-d // 64) * 64}"
            else:
                what = "channels" if conv else "a hidden/feature dimension"
                parts[d] = f"{what} {d} ({dtype or '16-bit'}: multiples of {multiple}) → {-(-d // multiple) * multiple}"
    listed = [parts[d] for d in sorted(parts, reverse=True)[:3]]
    types = sorted({str(t) for t in bad_ops["dtype_class"].drop_nulls().to_list()}) if bad_ops.height else []
    rule = (
        ", ".join(f"{t}: multiples of {ALIGNED_BYTES // {'tf32': 4, 'fp8': 1}.get(t, 2)} elements" for t in types)
        if types
        else "multiples of 8 elements for 16-bit types, 4 for TF32, 16 for fp8"
    )
    return (
        f"Pad the misaligned GEMM dimensions so operands are {ALIGNED_BYTES}-byte aligned ({rule})"
        + (": " + "; ".join(listed) + "." if listed else ".")
    )


def _misaligned_kernels(ctx: FindingContext, bad: pl.DataFrame, good: pl.DataFrame, by_name: pl.DataFrame) -> list[str]:
    """Kernel names the padding would speed up: those launched by the misaligned op calls (by
    op name and input shapes) and by no aligned one, plus those whose name states the low
    alignment."""
    names = [str(n) for n in by_name["name"].to_list()]
    if bad.height == 0 or "shapes" not in bad.columns:
        return names
    ops = ctx.trace.events.filter(pl.col("kind") == "cpu_op").select(
        pl.col("id").alias("op_id"), pl.col("name").cast(pl.String).alias("op"), pl.col("input_dims").alias("shapes")
    )
    launched = ctx.trace.kernels.select("op_id", pl.col("name").cast(pl.String)).join(ops, on="op_id")

    def under(calls: pl.DataFrame) -> set[str]:
        keys = calls.select(pl.col("name").alias("op"), "shapes")
        return set(launched.join(keys, on=["op", "shapes"], how="semi")["name"].to_list())

    return sorted(set(names) | (under(bad) - under(good)))


def detect_gemm_misaligned(ctx: FindingContext) -> Estimate | None:
    table = _kernel_table(ctx)
    if table is None:
        return None
    prec = pl.col("precision").fill_null("unknown")
    # Convolutions are not GEMMs here: their channels are input_channels_padding's, and the
    # implicit-GEMM kernels a convolution runs (align1/align2 for a 3-channel input) follow them.
    conv_kernels = _conv_launched(ctx)
    gemm = table.filter(
        pl.col("family").is_in(MATMUL_FAMILIES)
        & ~pl.col("name").is_in(conv_kernels.implode())
        & (pl.col("tensor_core") == True)  # noqa: E712 - null (unknown) must not match
        & (prec != "fp64")
        & (
            pl.col("dtype_class").is_null()
            | pl.col("dtype_class").is_in(["bf16", "fp16", "tf32", "fp8"])
        )
    )
    # Kernels whose name states an operand alignment below 16 bytes (CUTLASS align1/align2
    # for 16-bit types): a misaligned shape forced the slower kernel. Without an element
    # size in the name, only alignments of 1 or 2 elements count.
    align = pl.col("alignment")
    by_name = gemm.filter(
        align.is_not_null()
        & pl.when(pl.col("element_bytes").is_not_null())
        .then(align * pl.col("element_bytes") < ALIGNED_BYTES)
        .otherwise(align <= 2)
    )
    ops = _gemm_ops(ctx, ("bf16", "fp16", "tf32", "fp8"))
    # The matmuls of written-out attention are eager_attention's: their odd dims (head dim,
    # sequence length) go away with the fused kernel, padding is not the fix.
    attention = find_subgraph(ctx)
    scores = attention.scores if attention is not None else ()
    if attention is not None:
        mine = attention.kernels.group_by("name").agg(pl.col("dur_ns").sum().alias("attention_ns"))
        by_name = by_name.join(mine, on="name", how="left").filter(
            pl.col("attention_ns").fill_null(0) < pl.col("total_ns")
        ).drop("attention_ns")
    ops = ops.filter(~pl.col("name").str.contains(CONV_OP))
    if ops.height > 0:
        multiple = (
            pl.when(pl.col("dtype_class") == "tf32")
            .then(4)
            .when(pl.col("dtype_class") == "fp8")
            .then(16)
            .otherwise(8)
        )
        flagged = ops.with_columns(
            off=pl.struct("name", "shapes", m=multiple).map_elements(
                lambda s: misaligned_dims(s["name"], s["shapes"], s["m"]), return_dtype=pl.List(pl.Int64)
            )
        )
        if scores:  # neither misaligned nor a reference for the aligned rate
            flagged = flagged.filter(
                (pl.col("off").list.len() == 0)
                | ~pl.struct("name", "shapes").map_elements(
                    lambda r: touches(r["name"], r["shapes"], scores), return_dtype=pl.Boolean
                )
            )
        bad_ops = flagged.filter(pl.col("off").list.len() > 0)
        good_ops = flagged.filter(
            (pl.col("off").list.len() == 0) & (pl.col("flops") > 0) & (pl.col("kernel_ns") > 0)
        )
    else:
        bad_ops = good_ops = ops
    if by_name.height == 0 and bad_ops.height == 0:
        return None
    if bad_ops.height > 0 and "flops" in bad_ops.columns:
        slow_ns = float(bad_ops["kernel_ns"].sum())
        flops = float(bad_ops["flops"].fill_null(0).sum())
    else:
        slow_ns = float(by_name["total_ns"].sum())
        flops = float(by_name["flops"].fill_null(0).sum())
    # The rate to reach: the aligned GEMMs of this trace when there are enough of them, else
    # the dtype's tensor-core peak at the usual efficiency.
    good_ns = float(good_ops["kernel_ns"].sum()) if good_ops.height else 0.0
    if good_ns > 0.2 * slow_ns and good_ops.height:
        rate = float(good_ops["flops"].sum()) / (good_ns * 1e-9) / 1e12
        rate_src = f"the aligned GEMMs of this trace ({rate:.0f} TFLOP/s achieved)"
    else:
        dtype = str(bad_ops["dtype_class"][0]) if bad_ops.height else "bf16"
        peak = ctx.peak_tflops(dtype)
        rate = (peak or 0.0) * TENSOR_CORE_EFFICIENCY
        rate_src = (
            f"{TENSOR_CORE_EFFICIENCY:.0%} of the {dtype} tensor-core peak ({peak:g} TFLOP/s)"
            if peak
            else f"an unknown peak ({ctx.device.describe()}): no saving estimated"
        )
    saving = max(0.0, slow_ns - flops / (rate * 1e12) * 1e9) if rate > 0 and flops > 0 else 0.0
    fix = _misaligned_fix(bad_ops, _largest_n(ops)) if bad_ops.height else _misaligned_fix(bad_ops.clear(), None)
    evidence = Evidence(
        kernels=_kernels_evidence(by_name),
        ops=_ops_evidence(ctx, bad_ops) if bad_ops.height else (),
        locations=ctx.locations_of(list(bad_ops["name"].unique())) if bad_ops.height else (),
        figures=(("misaligned_gemm_ns", slow_ns),),
    )
    return estimate(
        ctx,
        "gemm_misaligned",
        {"compute": saving},
        transforms=scale_names(_misaligned_kernels(ctx, bad_ops, good_ops, by_name), slow_ns - saving, slow_ns),
        confidence="medium" if flops > 0 else "low",
        confidence_reason="shapes off the multiple (or kernels built for operands aligned below 16 bytes); padding may change the model",
        method=f"misaligned GEMM time minus the same FLOPs at the rate of {rate_src}",
        evidence=evidence,
        fix=fix,
    )
