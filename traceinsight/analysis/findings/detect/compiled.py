"""Findings about torch.compile: graph breaks, recompiles, and compilation inside the window."""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.findings.model import Evidence, OpEvidence, RegionEvidence
from traceinsight.analysis.findings.price.savings import Estimate, estimate
from traceinsight.analysis.findings.read.chains import LIBRARY_CALL_OPS
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.sections.breakdown import busy_intervals
from traceinsight.analysis.whatif.repeats import DispatchOnly


def detect_graph_break(ctx: FindingContext) -> Estimate | None:
    c = ctx.compile
    if c is None or c.regions_per_step < 2:
        return None
    steps = max(c.steps, 1)
    extra = (c.regions_per_step - 1) / c.regions_per_step
    glue_ns = c.cache_lookup_ns_per_step * extra * steps
    eager_ns = 0.0
    ops: list[OpEvidence] = []
    if c.graph_break_ops.height > 0:
        eager_ns = float(c.graph_break_ops["host_ns_per_step"].sum()) * steps
        ops = [
            OpEvidence(
                name=r["name"],
                calls=round(r["calls_per_step"] * steps),
                dur_ns=int(r["host_ns_per_step"] * steps),
            )
            for r in c.graph_break_ops.head(5).iter_rows(named=True)
        ]
    return estimate(
        ctx,
        "graph_break",
        {"idle": glue_ns + eager_ns},
        confidence="low",
        confidence_reason=f"{c.regions_per_step:.1f} compiled regions per step; several compiled functions look the same",
        method="host time of the eager ops between compiled graphs plus the guard checks of the extra "
        "regions, as device idle it can cause (capped by the idle time)",
        evidence=Evidence(ops=tuple(ops), figures=(("regions_per_step", c.regions_per_step),)),
    )


def detect_recompile(ctx: FindingContext) -> Estimate | None:
    c = ctx.compile
    if c is None or c.recompiles_in_trace <= 0 or c.compiles_in_trace <= 0:
        return None
    share = c.recompiles_in_trace / c.compiles_in_trace
    return estimate(
        ctx,
        "recompile",
        {"idle": c.compile_ns * share},
        confidence="medium",
        confidence_reason=f"{c.recompiles_in_trace} recompile(s) inside the traced steps",
        method="compile time inside the window spent on recompiles (compile events with compile id > 0); "
        "saving_ns is over the window, not per step",
        per_step=False,
        evidence=Evidence(
            figures=(
                ("recompiles", float(c.recompiles_in_trace)),
                ("compile_ns", float(c.compile_ns)),
            )
        ),
    )


def detect_compile_in_window(ctx: FindingContext) -> Estimate | None:
    c = ctx.compile
    if c is None or c.compiles_in_trace <= c.recompiles_in_trace or c.compile_ns <= 0:
        return None
    if ctx.excluded_window_ns > 0:
        # The window assessment already found the one-time work (a first compile is start-up)
        # and took it out of every share; the verdict says so first.
        return None
    first = (c.compiles_in_trace - c.recompiles_in_trace) / c.compiles_in_trace
    return estimate(
        ctx,
        "compile_in_window",
        {"idle": c.compile_ns * first},
        confidence="high",
        confidence_reason=f"{c.compiles_in_trace - c.recompiles_in_trace} first compilation(s) inside the traced steps",
        method="compile time inside the window: a one-off cost that steady-state steps do not pay; the "
        "shares of the other findings are diluted by it until it is profiled out; saving_ns is over the "
        "window, not per step",
        per_step=False,
        evidence=Evidence(figures=(("compile_ns", float(c.compile_ns)),)),
    )


# Torch-Compiled Region spans: what Dynamo runs for a compiled frame (its guards, then the graph).
COMPILED_REGION = r"^Torch-Compiled Region"
# What Inductor's generated code still calls through ATen ("extern kernels" and fallbacks): the
# library GEMMs, convolutions (forward and backward) and fused attention. Their dispatch stays
# when the region is compiled; the pointwise and reduction ops around them become Triton
# kernels, launched without the dispatcher. On cause_compile_eager (BERT at batch 1 under
# backend="eager") the Inductor run's trace holds only aten::mm, bmm and addmm.
EXTERN_OPS = LIBRARY_CALL_OPS


def detect_compile_not_applied(ctx: FindingContext) -> Estimate | None:
    """torch.compile ran (Dynamo frames each step) but generated nothing that runs: no call of a
    compiled graph (``## Call CompiledFxGraph``), no Triton kernel, no CUDA graph. The ops in the
    compiled regions are dispatched eagerly (backend="eager" / "aot_eager", or every frame
    falling back). Compiled with Inductor, the regions' host work is its wrapper's launches."""
    c = ctx.compile
    if c is None or c.regions.height == 0 or c.uses_cuda_graphs or c.triton_kernels_per_step > 0:
        return None
    kinds = set(c.regions["kind"].to_list()) if "kind" in c.regions.columns else set()
    if "dynamo_frame" not in kinds or "fx_graph" in kinds:
        return None
    frames = c.regions.filter(pl.col("kind") == "dynamo_frame")
    host_ns = float(frames["host_ns_per_step"].sum())
    kernels = float(frames["kernels_per_step"].sum())
    if kernels <= 0:
        return None
    # Pool estimate: the GPU's idle while the compiled regions ran (what their eager dispatch
    # can have cost); the replay removes the dispatch and keeps each launch call.
    spans = ctx.trace.events.filter(pl.col("name").cast(pl.String).str.contains(COMPILED_REGION)).select(
        pl.col("ts_ns").alias("start_ns"), "end_ns"
    )
    idle = intervals.difference(spans, busy_intervals(ctx.trace).select("start_ns", "end_ns"))
    idle_ns = int((idle["end_ns"] - idle["start_ns"]).sum()) if idle.height else 0
    if idle_ns <= 0:
        return None
    return estimate(
        ctx,
        "compile_not_applied",
        {"idle": idle_ns},
        within={"idle": "launch_bound"},
        transforms=(DispatchOnly(COMPILED_REGION, EXTERN_OPS, "the GEMMs, convolutions and attention"),),
        confidence="high",
        confidence_reason=f"{c.regions_per_step:.1f} compiled region(s) per step run {kernels:.0f} kernels, none "
        "generated (no Triton kernel, no compiled graph called, no CUDA graph): the ops run eagerly",
        method="replayed as Inductor would run the regions: the host's dispatch inside them gone, "
        "each launch call kept, and the GEMMs, convolutions and attention kept whole (Inductor still "
        "calls those through ATen); fusion, which would also cut launches and kernel time, is not "
        "counted; the pool estimate is the GPU's idle while the regions ran",
        evidence=Evidence(
            regions=tuple(
                RegionEvidence(name=str(r["name"]), calls=round(float(r["calls_per_step"]) * max(c.steps, 1)),
                               dur_ns=int(float(r["host_ns_per_step"]) * max(c.steps, 1)))
                for r in frames.head(5).iter_rows(named=True)
            ),
            figures=(("region_host_ns_per_step", host_ns), ("eager_kernels_per_step", kernels)),
        ),
    )
