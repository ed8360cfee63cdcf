"""torch.compile in a trace: compiled regions, compile time, graph breaks, fusion and launches.

What torch 2.x records (checked on CUDA and CPU traces):

- ``Torch-Compiled Region: F/C`` (cpu_op): one call of Dynamo frame F running its compile C;
  C > 0 means the frame was recompiled. ``TorchDynamo Cache Lookup`` (cpu_op) precedes it:
  the guard check, pure host overhead.
- ``CompiledFunction`` / ``CompiledFunctionBackward`` (cpu_op): the AOTAutograd forward and
  backward; ``## Call CompiledFxGraph <key> ##`` (user annotation, mirrored on the GPU) wraps
  the Inductor graph call, so kernels launched inside it carry it as their annotation.
- Compilation inside the profiled window: ``entire_frame_compile`` / ``entire_backward_compile``
  (cpu_op) spans, each followed by a ``..._data: fn_name=..., compile_id=F/C`` annotation, and
  many nested ``... (dynamo_timed)`` spans (Dynamo tracing, AOT, Inductor codegen).
- Inductor kernels are named ``triton_{poi,red,per,tem,...}_fused_*``; the rest are library
  kernels (cuBLAS, cuDNN, flash attention, ATen).

Per-step figures divide by the number of ``ProfilerStep`` spans; without steps they are
per-trace totals (``per_step`` is False).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from traceinsight.analysis.classify import with_classes
from traceinsight.analysis.core.base import NO_INPUTS, AnalysisConfig, AnalysisSpec, Inputs, Result
from traceinsight.analysis.device import model as device_model
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.host_names import name_matches
from traceinsight.analysis.lib.timeline import median_host_step_ns, step_spans
from traceinsight.trace.model import Trace

REGION_PREFIX = "Torch-Compiled Region: "
CACHE_LOOKUP = "TorchDynamo Cache Lookup"
AOT_FORWARD = "CompiledFunction"
AOT_BACKWARD = "CompiledFunctionBackward"
FX_GRAPH_PATTERN = r"^## Call CompiledFxGraph (\S+) ##$"
COMPILE_SPANS = ("entire_frame_compile", "entire_backward_compile")
COMPILE_DATA_PATTERN = r"^(entire_frame_compile|entire_backward_compile)_data: fn_name=(.*), compile_id=(\S+)"
# Older releases have no entire_* spans; their outermost compile work is one of these.
LEGACY_COMPILE_SPANS = ("_compile.compile_inner (dynamo_timed)", "_compile.compile_inner")
TRITON_PREFIX = "triton_"
# Host spans of the kernels Inductor generated (Triton launchers, C++ kernels of the CPU
# backend): part of a compiled graph's work, never eager code run at a graph break.
INDUCTOR_LAUNCHER_PATTERN = r"^(triton_|cpp_fused_)"
# Host-side dispatch wrappers that sit between compiled regions without being user code.
DYNAMO_GLUE = (CACHE_LOOKUP, "Pregraph bytecode", "AOTDispatcher Runtime Wrapper Prologue")


@dataclass(frozen=True)
class CompileResult(Result):
    name = "compile"
    per_step: bool = True
    steps: int = 0
    # Dynamo frames and compiles
    frames: tuple[int, ...] = ()
    recompiled_frames: tuple[int, ...] = ()
    compiles_in_trace: int = 0
    recompiles_in_trace: int = 0
    compile_ns: int = 0
    compile_events: pl.DataFrame = field(default_factory=pl.DataFrame)
    # Compiled regions and graph breaks
    regions: pl.DataFrame = field(default_factory=pl.DataFrame)
    regions_per_step: float = 0.0
    graph_break_ops: pl.DataFrame = field(default_factory=pl.DataFrame)
    cache_lookups_per_step: float = 0.0
    cache_lookup_ns_per_step: float = 0.0
    # Kernels and launches
    kernels_per_step: float = 0.0
    kernel_ns_per_step: float = 0.0
    compiled_kernels_per_step: float = 0.0
    triton_kernels_per_step: float = 0.0
    triton_ns_per_step: float = 0.0
    triton_share: float | None = None
    library_ns_per_step: float = 0.0
    launches_per_step: float = 0.0
    launch_api_ns_per_step: float = 0.0
    graph_launches_per_step: float = 0.0
    kernels_via_graphs_per_step: float = 0.0
    host_step_ns: float | None = None
    uses_cuda_graphs: bool = False
    findings: tuple[str, ...] = ()

    def to_polars(self) -> pl.DataFrame:
        return self.regions


def _name() -> pl.Expr:
    return pl.col("name").cast(pl.String)


def has_compile_markers(trace: Trace) -> bool:
    """True when the trace shows Dynamo/AOT/Inductor activity (regions, graphs, compiles)."""
    name = _name()
    host = trace.events.select("kind", "name").filter(pl.col("kind").cast(pl.String).is_in(["cpu_op", "user_annotation"]))
    marked = host.filter(
        name.str.starts_with(REGION_PREFIX)
        | name.is_in([AOT_FORWARD, AOT_BACKWARD, CACHE_LOOKUP, *COMPILE_SPANS, *LEGACY_COMPILE_SPANS])
        | name_matches(host, FX_GRAPH_PATTERN)
    ).height
    if marked:
        return True
    return bool(trace.kernels.filter(name.str.starts_with(TRITON_PREFIX)).height)


def _step_count(trace: Trace) -> int:
    return step_spans(trace).height


def _compile_events(host: pl.DataFrame) -> pl.DataFrame:
    """One row per compile span in the window, with its kind, function and compile id."""
    name = _name()
    spans = host.filter(name.is_in(list(COMPILE_SPANS)))
    if spans.height == 0:
        spans = host.filter(name.is_in(list(LEGACY_COMPILE_SPANS)))
    data = host.filter(name.str.contains(COMPILE_DATA_PATTERN)).select(
        pl.col("parent").alias("id"),
        fn_name=name.str.extract(COMPILE_DATA_PATTERN, 2),
        compile_id=name.str.extract(COMPILE_DATA_PATTERN, 3),
    )
    schema = {
        "kind": pl.String,
        "fn_name": pl.String,
        "compile_id": pl.String,
        "frame_id": pl.Int64,
        "attempt": pl.Int64,
        "step": pl.Int64,
        "start_ns": pl.Int64,
        "dur_ns": pl.Int64,
    }
    if spans.height == 0:
        return pl.DataFrame(schema=schema)
    return (
        spans.join(data.unique("id", keep="first"), on="id", how="left")
        .select(
            kind=pl.when(name == "entire_backward_compile").then(pl.lit("backward")).otherwise(pl.lit("frame")),
            fn_name=pl.col("fn_name"),
            compile_id=pl.col("compile_id"),
            frame_id=pl.col("compile_id").str.extract(r"^(\d+)/", 1).cast(pl.Int64, strict=False),
            attempt=pl.col("compile_id").str.extract(r"/(\d+)", 1).cast(pl.Int64, strict=False),
            step=pl.col("step"),
            start_ns=pl.col("ts_ns"),
            dur_ns=pl.col("dur_ns"),
        )
        .sort("start_ns")
        .cast(schema)  # type: ignore[arg-type]
    )


def _compile_ns(host: pl.DataFrame) -> int:
    """Host time spent compiling: the union of compile spans (nested spans not double counted)."""
    name = _name()
    spans = host.filter(
        name.is_in([*COMPILE_SPANS, *LEGACY_COMPILE_SPANS]) | name.str.ends_with(" (dynamo_timed)")
    ).select("pid", "tid", start_ns="ts_ns", end_ns="end_ns")
    merged = intervals.union(spans, by=["pid", "tid"])
    total = intervals.total_ns(merged)
    return int(total) if isinstance(total, int) else 0


def _graph_break_ops(host: pl.DataFrame, per: int) -> pl.DataFrame:
    """Host ops that a Dynamo frame runs itself, outside its compiled graphs.

    At a graph break Dynamo compiles the code before the break, runs the unsupported code
    eagerly from the frame's own bytecode, then calls a resume function (a new frame with
    its own region, nested in the first). Those eager ops are direct children of a
    ``Torch-Compiled Region`` span that are neither a graph call nor Dynamo's own glue.
    """
    schema = {"name": pl.String, "calls_per_step": pl.Float64, "host_ns_per_step": pl.Float64}
    regions = host.filter(_name().str.starts_with(REGION_PREFIX)).select(
        pl.col("id").alias("parent"), in_region=pl.lit(True)
    )
    if regions.height == 0:
        return pl.DataFrame(schema=schema)
    name = _name()
    children = host.join(regions, on="parent", how="inner").filter(
        (pl.col("kind") == "cpu_op")
        & ~name.str.starts_with(REGION_PREFIX)
        & ~name.is_in([*DYNAMO_GLUE, AOT_FORWARD, AOT_BACKWARD, *COMPILE_SPANS, *LEGACY_COMPILE_SPANS, "dynamo"])
        & ~name.str.ends_with(" (dynamo_timed)")
        & ~name.str.contains(INDUCTOR_LAUNCHER_PATTERN)
    )
    return (
        children.group_by(name)
        .agg(calls_per_step=pl.len() / per, host_ns_per_step=pl.col("dur_ns").sum() / per)
        .sort(["host_ns_per_step", "name"], descending=[True, False])
        .cast(schema)  # type: ignore[arg-type]
    )


def _regions_table(host: pl.DataFrame, kernels: pl.DataFrame, per: int) -> pl.DataFrame:
    name = _name()
    marked = host.filter(
        name.str.starts_with(REGION_PREFIX) | name.is_in([AOT_FORWARD, AOT_BACKWARD]) | name.str.contains(FX_GRAPH_PATTERN)
    )
    schema = {
        "kind": pl.String,
        "name": pl.String,
        "frame_id": pl.Int64,
        "compile_id": pl.Int64,
        "graph_key": pl.String,
        "calls_per_step": pl.Float64,
        "host_ns_per_step": pl.Float64,
        "kernels_per_step": pl.Float64,
        "kernel_ns_per_step": pl.Float64,
    }
    if marked.height == 0:
        return pl.DataFrame(schema=schema)
    host_stats = marked.group_by(region=name).agg(
        calls_per_step=pl.len() / per, host_ns_per_step=pl.col("dur_ns").sum() / per
    )
    # Kernels of a graph carry its annotation; those of a Dynamo frame have it as top op.
    by_annotation = kernels.group_by(region=pl.col("annotation").cast(pl.String)).agg(
        k_ann=pl.len(), ns_ann=pl.col("dur_ns").sum()
    )
    by_top = kernels.group_by(region=pl.col("top_op_name").cast(pl.String)).agg(
        k_top=pl.len(), ns_top=pl.col("dur_ns").sum()
    )
    region = pl.col("region")
    frame_compile = region.str.extract(REGION_PREFIX + r"(\d+)/(\d+)", 1)
    compile_part = region.str.extract(REGION_PREFIX + r"\d+/(\d+)", 1)
    return (
        host_stats.join(by_annotation, on="region", how="left")
        .join(by_top, on="region", how="left")
        .select(
            kind=pl.when(region.str.starts_with(REGION_PREFIX))
            .then(pl.lit("dynamo_frame"))
            .when(region == AOT_FORWARD)
            .then(pl.lit("aot_forward"))
            .when(region == AOT_BACKWARD)
            .then(pl.lit("aot_backward"))
            .otherwise(pl.lit("fx_graph")),
            name=region,
            frame_id=frame_compile.cast(pl.Int64, strict=False),
            compile_id=compile_part.cast(pl.Int64, strict=False),
            graph_key=region.str.extract(FX_GRAPH_PATTERN, 1),
            calls_per_step=pl.col("calls_per_step"),
            host_ns_per_step=pl.col("host_ns_per_step"),
            kernels_per_step=pl.coalesce("k_ann", "k_top").cast(pl.Float64) / per,
            kernel_ns_per_step=pl.coalesce("ns_ann", "ns_top").cast(pl.Float64) / per,
        )
        .sort(["kind", "name"])
        .cast(schema)  # type: ignore[arg-type]
    )


def _findings(r: dict[str, object]) -> tuple[str, ...]:
    out: list[str] = []
    compiles = int(r["compiles_in_trace"])  # type: ignore[call-overload]
    if compiles:
        out.append(
            f"{compiles} compile(s) inside the trace took {int(r['compile_ns']) / 1e6:.1f} ms of host time"  # type: ignore[call-overload]
            " — profile after warm-up to see steady-state steps"
        )
    recompiled = r["recompiled_frames"]
    if recompiled:
        frames = ", ".join(str(f) for f in recompiled)  # type: ignore[attr-defined]
        out.append(
            f"frame(s) {frames} run a recompiled graph (compile id > 0): guards failed at least once; "
            "check TORCH_LOGS=recompiles"
        )
    if int(r["recompiles_in_trace"]):  # type: ignore[call-overload]
        out.append(f"{r['recompiles_in_trace']} recompile(s) happened inside the trace")
    per_step = float(r["regions_per_step"])  # type: ignore[arg-type]
    breaks: pl.DataFrame = r["graph_break_ops"]  # type: ignore[assignment]
    if breaks.height:
        names = ", ".join(breaks["name"].head(5).to_list())
        out.append(
            f"graph breaks: eager ops run inside compiled frames, outside their graphs ({names}); "
            f"{per_step:.1f} compiled region(s) per step"
        )
    lookup = float(r["cache_lookup_ns_per_step"])  # type: ignore[arg-type]
    if lookup > 0:
        out.append(f"Dynamo guard checks (cache lookup) cost {lookup / 1e3:.1f} µs of host time per step")
    if r["uses_cuda_graphs"]:
        out.append(
            f"CUDA graphs replay {float(r['kernels_via_graphs_per_step']):.0f} kernels per step "  # type: ignore[arg-type]
            f"from {float(r['graph_launches_per_step']):.0f} cudaGraphLaunch call(s)"  # type: ignore[arg-type]
        )
    return tuple(out)


def run(trace: Trace, config: AnalysisConfig, inputs: Inputs = NO_INPUTS) -> CompileResult:
    if not has_compile_markers(trace):
        return CompileResult(
            available=False,
            reason="no torch.compile markers (Torch-Compiled Region, CompiledFunction, "
            "CompiledFxGraph annotations or triton_* kernels) in this trace",
        )
    steps = _step_count(trace)
    per = max(steps, 1)
    host = trace.events.filter(pl.col("kind").cast(pl.String).is_in(["cpu_op", "user_annotation"]))
    name = _name()

    region_calls = host.filter(name.str.starts_with(REGION_PREFIX))
    ids = region_calls.select(
        frame=name.str.extract(REGION_PREFIX + r"(\d+)/", 1).cast(pl.Int64, strict=False),
        compile=name.str.extract(REGION_PREFIX + r"\d+/(\d+)", 1).cast(pl.Int64, strict=False),
    ).drop_nulls()
    frames = tuple(sorted(int(f) for f in ids["frame"].unique().to_list()))
    recompiled = tuple(sorted(int(f) for f in ids.filter(pl.col("compile") > 0)["frame"].unique().to_list()))

    compile_events = _compile_events(host)
    frame_compiles = compile_events.filter(pl.col("kind") == "frame")
    recompiles = frame_compiles.filter(pl.col("attempt").fill_null(0) > 0).height

    if steps and region_calls.height:
        regions_per_step = float(
            region_calls.filter(pl.col("step").is_not_null()).group_by("step").len()["len"].median() or 0.0  # type: ignore[arg-type]
        )
    else:
        regions_per_step = region_calls.height / per
    graph_breaks = _graph_break_ops(host, per)

    lookups = host.filter(name == CACHE_LOOKUP)
    kernels = trace.kernels.filter(pl.col("kind") == "kernel")
    vendor = device_model.from_trace(trace, config).vendor
    kernels = with_classes(kernels, vendor=vendor) if kernels.height else kernels.with_columns(library=pl.lit(None, pl.String))
    # Triton kernels that Inductor generated (the classifier's library "inductor")
    is_triton = (pl.col("library") == "inductor").fill_null(False)
    in_compiled = (
        pl.col("annotation").cast(pl.String).str.contains(FX_GRAPH_PATTERN).fill_null(False)
        | pl.col("top_op_name").cast(pl.String).str.starts_with(REGION_PREFIX).fill_null(False)
        | pl.col("top_op_name").cast(pl.String).str.contains(AOT_FORWARD, literal=True).fill_null(False)
    )
    kstats = kernels.select(
        n=pl.len(),
        ns=pl.col("dur_ns").sum(),
        compiled=in_compiled.sum(),
        triton=is_triton.sum(),
        triton_ns=pl.col("dur_ns").filter(is_triton).sum(),
        via_graph=pl.col("launch_name").cast(pl.String).str.contains("GraphLaunch").fill_null(False).sum(),
    ).row(0, named=True)
    launches = (
        trace.kernels.filter(pl.col("launch_id").is_not_null())
        .unique("launch_id")
        .select("launch_id", "launch_name", dur=pl.col("launch_end_ns") - pl.col("launch_ts_ns"))
    )
    graph_launches = launches.filter(pl.col("launch_name").cast(pl.String).str.contains("GraphLaunch")).height
    total_ns = int(kstats["ns"] or 0)
    triton_ns = int(kstats["triton_ns"] or 0)

    fields_: dict[str, object] = {
        "per_step": steps > 0,
        "steps": steps,
        "frames": frames,
        "recompiled_frames": recompiled,
        "compiles_in_trace": compile_events.height,
        "recompiles_in_trace": recompiles,
        "compile_ns": _compile_ns(host),
        "compile_events": compile_events,
        "regions": _regions_table(host, trace.kernels, per),
        "regions_per_step": regions_per_step,
        "graph_break_ops": graph_breaks,
        "cache_lookups_per_step": lookups.height / per,
        "cache_lookup_ns_per_step": float(lookups["dur_ns"].sum()) / per,
        "kernels_per_step": int(kstats["n"]) / per,
        "kernel_ns_per_step": total_ns / per,
        "compiled_kernels_per_step": int(kstats["compiled"] or 0) / per,
        "triton_kernels_per_step": int(kstats["triton"] or 0) / per,
        "triton_ns_per_step": triton_ns / per,
        "triton_share": triton_ns / total_ns if total_ns else None,
        "library_ns_per_step": (total_ns - triton_ns) / per,
        "launches_per_step": launches.height / per,
        "launch_api_ns_per_step": float(launches["dur"].sum() or 0) / per,
        "graph_launches_per_step": graph_launches / per,
        "kernels_via_graphs_per_step": int(kstats["via_graph"] or 0) / per,
        "host_step_ns": median_host_step_ns(trace),
        "uses_cuda_graphs": graph_launches > 0,
    }
    return CompileResult(findings=_findings(fields_), **fields_)  # type: ignore[arg-type]


SPEC = AnalysisSpec(
    name="compile",
    title="torch.compile",
    run=run,
    description="Compiled regions, compile/recompile time, graph breaks, Dynamo overhead, "
    "Triton vs library kernels, launches and CUDA graph use.",
)
