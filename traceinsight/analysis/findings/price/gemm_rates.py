"""GEMM and convolution time at another rate: what a kernel set saves rerun at a target
TFLOP/s, and the precision levers (TF32 matmuls, bf16 autocast) priced that way."""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.findings.catalogue import (
    GEMM_FLOOR_NS,
    SIMT_EFFICIENCY,
    TENSOR_CORE_EFFICIENCY,
)
from traceinsight.analysis.findings.model import Lever
from traceinsight.analysis.findings.price.fixes import scale_names
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.whatif.transforms import Transformation


def recoverable(
    rows: pl.DataFrame, target_tflops: float, fallback_tflops: float | None
) -> tuple[float, float]:
    """(saving ns, share of the time whose FLOPs were known) for kernels rerun at target_tflops.

    Per kernel name: time − max(FLOPs / target rate, calls × GEMM_FLOOR_NS), floored at 0: no
    GEMM kernel runs faster than the floor however few its FLOPs. Where the FLOPs are unknown,
    the kernel is assumed to run at ``fallback_tflops`` today (the FLOPs that rate implies)."""
    flops = pl.col("flops").fill_null(0.0)
    known = flops > 0
    implied = pl.col("total_ns") * 1e-9 * (fallback_tflops or 0.0) * 1e12
    work = pl.when(known).then(flops).otherwise(implied)
    new_ns = pl.max_horizontal(
        work / (target_tflops * 1e12) * 1e9, pl.col("calls") * float(GEMM_FLOOR_NS)
    )
    saving = (pl.col("total_ns") - new_ns).clip(lower_bound=0)
    got = rows.select(
        saving=saving.sum(),
        known_ns=pl.col("total_ns").filter(known).sum(),
        all_ns=pl.col("total_ns").sum(),
    )
    all_ns = float(got["all_ns"][0] or 0)
    return float(got["saving"][0] or 0.0), (
        float(got["known_ns"][0] or 0) / all_ns if all_ns else 0.0
    )


# The levers on a device with TF32 and bf16 tensor cores: the code change of each.
TF32_FIX = (
    "torch.set_float32_matmul_precision('high') for matmuls, torch.backends.cudnn.allow_tf32 = True "
    "for convolutions (its default)"
)
BF16_FIX = "torch.autocast('cuda', dtype=torch.bfloat16) around the forward pass and the loss"


def fp32_levers(
    ctx: FindingContext, rows: pl.DataFrame, gemm_ns: int, target: str | None, tf32_saving: float,
    tf32: tuple[Transformation, ...],
) -> tuple[tuple[Lever, tuple[Transformation, ...]], ...]:
    """TF32 and bf16 autocast, each priced on its own, where the device has both: the same
    fp32 GEMM and convolution kernels rerun at each precision's tensor-core rate. bf16 also
    halves the bytes of the elementwise work on its tensors; that part is not counted, so the
    bf16 lever is a floor of what autocast gives. ``tf32``: the finding's own change (the TF32
    path, saving ``tf32_saving``)."""
    bf16 = ctx.peak_tflops("bf16")
    if target != "tf32" or bf16 is None or gemm_ns <= 0:
        return ()
    fp32 = ctx.peak_tflops("fp32")
    bf16_saving, _ = recoverable(rows, bf16 * TENSOR_CORE_EFFICIENCY, None if fp32 is None else fp32 * SIMT_EFFICIENCY)
    return (
        (Lever("TF32 matmuls", TF32_FIX, saving_ns=round(tf32_saving), method="fp32 GEMM/conv kernels at the TF32 tensor-core rate"),
         tf32),
        (Lever("bf16 autocast", BF16_FIX, saving_ns=round(bf16_saving),
               method="fp32 GEMM/conv kernels at the bf16 tensor-core rate (the elementwise work's halved bytes not counted)"),
         scale_names(rows["name"].to_list(), gemm_ns - bf16_saving, gemm_ns)),
    )
