"""torch.compile before/after: launches, Triton share, compile time and regions, and likely
causes when the compiled run is the slower one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceinsight.analysis.diff.side import NO_ANNOTATION, Side
from traceinsight.analysis.diff.steps import StepTimeDiff
from traceinsight.analysis.lib.timeline import median_host_step_ns, step_numbers
from traceinsight.analysis.sections.compile import CompileResult, has_compile_markers


@dataclass(frozen=True)
class CompileDiff:
    available: bool = True
    reason: str | None = None
    compiled_side: str = ""
    metrics: pl.DataFrame = field(default_factory=pl.DataFrame)
    fusion_ratio: float | None = None
    region_speedups: pl.DataFrame = field(default_factory=pl.DataFrame)
    findings: tuple[str, ...] = ()
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None


# Metrics of the compile comparison whose values are durations in ns (for the renderers).
DURATION_METRICS = frozenset(
    {"kernel_ns_per_step", "launch_api_ns_per_step", "host_step_ns", "cache_lookup_ns_per_step", "compile_ns"}
)
_COMPILE_METRICS = (
    ("launches_per_step", "launch calls per step"),
    ("launch_api_ns_per_step", "launch API time per step"),
    ("host_step_ns", "host step span, median"),
    ("triton_share", "Triton share of kernel time"),
    ("graph_launches_per_step", "cudaGraphLaunch per step"),
    ("cache_lookup_ns_per_step", "Dynamo cache lookup per step"),
    ("regions_per_step", "compiled regions per step"),
    ("compile_ns", "compile time in trace"),
    ("recompiles_in_trace", "recompiles in trace"),
)


def _compile_summary(side: Side) -> dict[str, Any]:
    trace = side.trace
    result = side.results["compile"]
    assert isinstance(result, CompileResult)
    keys = [key for key, _ in _COMPILE_METRICS] + ["kernels_per_step", "kernel_ns_per_step"]
    summary = {key: getattr(result, key) for key in keys}
    summary["available"] = result.available
    summary["compiled"] = result.available
    summary["findings"] = list(result.findings)
    summary["graph_break_ops"] = result.graph_break_ops["name"].to_list() if result.available else []
    summary["recompiled_frames"] = list(result.recompiled_frames)
    if not result.available:
        # An eager run has no compile result: count its kernels and launches directly.
        kernels = trace.kernels.filter(pl.col("kind") == "kernel")
        per = max(len(step_numbers(trace)), 1)
        launches = trace.kernels.filter(pl.col("launch_id").is_not_null()).unique("launch_id")
        summary.update(
            kernels_per_step=kernels.height / per,
            kernel_ns_per_step=float(kernels["dur_ns"].sum()) / per,
            launches_per_step=launches.height / per,
            launch_api_ns_per_step=float((launches["launch_end_ns"] - launches["launch_ts_ns"]).sum() or 0) / per,
            host_step_ns=median_host_step_ns(trace),
        )
    return summary


def compile_diff(
    before: Side,
    after: Side,
    step_time: StepTimeDiff,
    regions: pl.DataFrame,
    kernels_per_step: tuple[float, float],
    gpu_ns_per_step: tuple[float, float],
) -> CompileDiff:
    b_compiled, a_compiled = has_compile_markers(before.trace), has_compile_markers(after.trace)
    if not (b_compiled or a_compiled):
        return CompileDiff(available=False, reason="neither run shows torch.compile markers")
    b, a = _compile_summary(before), _compile_summary(after)
    side = "both" if b_compiled and a_compiled else (before.label if b_compiled else after.label)
    rows = []
    for key, label in _COMPILE_METRICS:
        bv, av = b.get(key), a.get(key)
        bf = float(bv) if isinstance(bv, (int, float)) else None
        af = float(av) if isinstance(av, (int, float)) else None
        rows.append(
            {"metric": label, "key": key, "before": bf, "after": af, "ratio": (af / bf) if bf and af is not None else None}
        )
    metrics = pl.DataFrame(
        rows, schema={"metric": pl.String, "key": pl.String, "before": pl.Float64, "after": pl.Float64, "ratio": pl.Float64}
    )
    fusion = None
    if b_compiled != a_compiled:
        eager_k, compiled_k = (kernels_per_step[0], kernels_per_step[1]) if a_compiled else (kernels_per_step[1], kernels_per_step[0])
        fusion = eager_k / compiled_k if compiled_k else None
    speedups = (
        regions.filter((pl.col("status") == "both") & (pl.col("region") != NO_ANNOTATION))
        .select("region", "before_ns_per_step", "after_ns_per_step", "ratio")
        .with_columns(speedup=pl.when(pl.col("after_ns_per_step") > 0).then(pl.col("before_ns_per_step") / pl.col("after_ns_per_step")))
        if regions.height
        else pl.DataFrame()
    )
    findings = _compile_findings(b, a, b_compiled, a_compiled, fusion, step_time, gpu_ns_per_step)
    return CompileDiff(
        compiled_side=side,
        metrics=metrics,
        fusion_ratio=fusion,
        region_speedups=speedups,
        findings=tuple(findings),
        before=b,
        after=a,
    )


def _compile_findings(
    b: dict[str, Any],
    a: dict[str, Any],
    b_compiled: bool,
    a_compiled: bool,
    fusion: float | None,
    step_time: StepTimeDiff,
    gpu_ns_per_step: tuple[float, float],
) -> list[str]:
    out: list[str] = []
    if fusion is not None:
        out.append(f"fusion: the eager run launches {fusion:.2f}× as many kernels per step as the compiled one")
    compiled_slower = (a_compiled and not b_compiled and step_time.verdict == "slower") or (
        b_compiled and not a_compiled and step_time.verdict == "faster"
    )
    if not compiled_slower:
        return out
    comp, eager = (a, b) if a_compiled else (b, a)
    comp_gpu, eager_gpu = (gpu_ns_per_step[1], gpu_ns_per_step[0]) if a_compiled else gpu_ns_per_step
    out.append("the compiled run is slower; likely causes:")
    if comp.get("compile_ns"):
        out.append(f"  compilation inside the trace: {comp['compile_ns'] / 1e6:.1f} ms")
    if comp.get("recompiles_in_trace") or comp.get("recompiled_frames"):
        out.append("  recompiles (guard failures): see TORCH_LOGS=recompiles")
    if comp.get("graph_break_ops"):
        out.append(f"  graph breaks around: {', '.join(comp['graph_break_ops'][:5])}")
    if (comp.get("launch_api_ns_per_step") or 0) > (eager.get("launch_api_ns_per_step") or 0) or (
        comp.get("host_step_ns") or 0
    ) > (eager.get("host_step_ns") or 0):
        out.append("  more host time per step (dispatch, guards, wrappers)")
    if comp_gpu > eager_gpu:
        out.append("  more GPU kernel time per step: some generated kernels are slower than the library ones")
    return out
