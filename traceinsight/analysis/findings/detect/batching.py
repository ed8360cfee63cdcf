"""Runs of small same-shape GEMMs that one batched call would replace."""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.classify import with_classes
from traceinsight.analysis.findings.catalogue import (
    SIMT_EFFICIENCY,
    SMALL_GEMM_NS,
    SMALL_GEMM_RUN,
    TENSOR_CORE_EFFICIENCY,
)
from traceinsight.analysis.findings.detect.precision import GEMM_FAMILIES
from traceinsight.analysis.findings.model import Evidence, KernelEvidence, OpEvidence
from traceinsight.analysis.findings.price.savings import Estimate, estimate
from traceinsight.analysis.findings.read.context import FindingContext


def _flops_per_call(ctx: FindingContext) -> pl.DataFrame:
    """FLOPs of one call of each GEMM op shape and the rate a batched call could reach."""
    schema = {
        "op": pl.String,
        "input_dims": pl.String,
        "call_flops": pl.Float64,
        "rate_flops_per_ns": pl.Float64,
    }
    if ctx.bound is None or ctx.bound.ops.height == 0:
        return pl.DataFrame(schema=schema)
    rates = {
        cls: (ctx.peak_tflops(cls) or 0.0)
        * (SIMT_EFFICIENCY if cls in ("fp32", "fp64") else TENSOR_CORE_EFFICIENCY)
        * 1e3
        for cls in ("fp64", "fp64_tc", "fp32", "tf32", "bf16", "fp16", "fp8")
    }
    ops = ctx.bound.ops.filter(pl.col("family").is_in(GEMM_FAMILIES) & (pl.col("calls") > 0))
    return (
        ops.select(
            op=pl.col("name"),
            input_dims=pl.col("shapes"),
            call_flops=pl.col("flops") / pl.col("calls"),
            rate_flops_per_ns=pl.col("dtype_class").replace_strict(
                rates, default=None, return_dtype=pl.Float64
            ),
        )
        .filter(pl.col("rate_flops_per_ns") > 0)
        .unique(["op", "input_dims"])
    )


def detect_sequential_small_gemms(ctx: FindingContext) -> Estimate | None:
    """Runs of >= SMALL_GEMM_RUN adjacent GEMM kernels on one stream, same name and input
    shapes, each shorter than SMALL_GEMM_NS."""
    k = ctx.trace.kernels
    if k.height == 0 or ctx.kernels is None:
        return None
    kern = with_classes(
        k.filter(pl.col("kind") == "kernel").select(
            "device",
            "stream",
            "ts_ns",
            "end_ns",
            "dur_ns",
            pl.col("name").cast(pl.String),
            "op_id",
            "step",
        ),
        vendor=ctx.device.vendor,
    )
    dims = ctx.trace.events.select("id", "kind", "name", "input_dims").filter(pl.col("kind") == "cpu_op").select(
        pl.col("id").alias("op_id"), "input_dims", op=pl.col("name").cast(pl.String)
    )
    kern = kern.join(dims, on="op_id", how="left").sort("device", "stream", "ts_ns")
    # Keyed by the launching op and its shapes: one GEMM call may run as several kernels
    # (a split-K GEMM plus its reduction).
    key = pl.concat_str(
        [pl.col("op").fill_null(pl.col("name")), pl.col("input_dims").fill_null("")], separator="|"
    )
    runs = (
        kern.with_columns(
            is_small_gemm=pl.col("family").is_in(GEMM_FAMILIES)
            & (pl.col("dur_ns") < SMALL_GEMM_NS),
            key=key,
        )
        .with_columns(
            run=(
                (pl.col("key") != pl.col("key").shift(1))
                | ~pl.col("is_small_gemm")
                | (pl.col("stream") != pl.col("stream").shift(1))
                # a batched call cannot span steps
                | (pl.col("step").fill_null(-1) != pl.col("step").fill_null(-1).shift(1))
            )
            .fill_null(True)
            .cum_sum()
        )
        .filter(pl.col("is_small_gemm"))
        .group_by("run")
        .agg(
            pl.col("op_id").n_unique().alias("n"),
            pl.col("dur_ns").sum().alias("kernel_ns"),
            (pl.col("end_ns").max() - pl.col("ts_ns").min()).alias("span_ns"),
            (pl.col("dur_ns").sum() / pl.col("op_id").n_unique()).alias("longest_ns"),
            pl.col("name").first(),
            pl.col("op").first(),
            pl.col("input_dims").first(),
        )
        .filter(pl.col("n") >= SMALL_GEMM_RUN)
    )
    if runs.height == 0:
        return None
    # One batched call takes the longer of one member call (these GEMMs leave most of the GPU
    # unused) and the run's FLOPs at the dtype's achievable rate; the rest of the run's span,
    # kernels and the gaps between their launches, is what batching removes.
    runs = runs.join(_flops_per_call(ctx), on=["op", "input_dims"], how="left").with_columns(
        batched_ns=pl.max_horizontal(
            pl.col("longest_ns"),
            (pl.col("n") * pl.col("call_flops") / pl.col("rate_flops_per_ns")).fill_null(0.0),
        )
    )
    saving_kernel = float((runs["kernel_ns"] - runs["batched_ns"]).clip(lower_bound=0).sum())
    saving_idle = float((runs["span_ns"] - runs["kernel_ns"]).clip(lower_bound=0).sum())
    groups = (
        runs.group_by("op", "input_dims", "name")
        .agg(pl.col("n").sum(), pl.col("kernel_ns").sum(), pl.len().alias("runs"))
        .sort(["kernel_ns", "op", "input_dims", "name"], descending=[True, False, False, False])
    )
    ops = tuple(
        OpEvidence(
            name=r["op"] or "?",
            shapes=r["input_dims"],
            dtypes=ctx.op_dtypes(r["op"], r["input_dims"]) if r["op"] else None,
            calls=int(r["n"]),
            dur_ns=int(r["kernel_ns"]),
        )
        for r in groups.head(5).iter_rows(named=True)
    )
    kernels = tuple(
        KernelEvidence(
            name=r["name"], calls=int(r["n"]), dur_ns=int(r["kernel_ns"]), tensor_core=None
        )
        for r in groups.head(3).iter_rows(named=True)
    )
    return estimate(
        ctx,
        "sequential_small_gemms",
        {"compute": saving_kernel, "idle": saving_idle},
        within={"idle": "launch_bound"},
        confidence="medium",
        confidence_reason=f"{int(runs['n'].sum())} GEMMs in {runs.height} runs of >= {SMALL_GEMM_RUN}; "
        "batching needs them to be independent of each other, which the trace cannot show",
        method="per run: its device span (kernels plus the idle between them) minus the time of one "
        "batched call, taken as the longer of one member call and the run's FLOPs at "
        f"{TENSOR_CORE_EFFICIENCY:.0%} of the dtype's tensor-core peak ({SIMT_EFFICIENCY:.0%} of "
        "the fp32/fp64 peak off tensor cores)",
        evidence=Evidence(
            ops=ops, kernels=kernels, locations=ctx.locations_of([o.name for o in ops])
        ),
    )
