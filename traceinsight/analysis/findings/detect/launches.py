"""launch_bound: the GPU waited for kernel launches.

A kernel made the GPU wait for its launch when the queue was empty at the launch: the launch
call returned after the device had finished everything before it. The idle from then to the
kernel's start is launch and dispatch overhead, which fewer launches (fusion, CUDA graphs)
remove. Work that was already queued when the device went idle (the host hundreds of
milliseconds ahead) made nothing wait for a launch, and neither do blocking copies or
synchronising calls: they are copies and syncs, reported by their own findings.
"""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.findings.catalogue import LAUNCH_SHORT_PCT
from traceinsight.analysis.findings.detect.advice import launch_advice
from traceinsight.analysis.findings.model import Evidence, KernelEvidence, OpEvidence
from traceinsight.analysis.findings.price.fixes import no_host_time_in
from traceinsight.analysis.findings.price.savings import Estimate, estimate
from traceinsight.analysis.findings.read.context import DYNAMO_INTERNAL, FindingContext
from traceinsight.analysis.whatif.copies import CollapseEagerLaunches
from traceinsight.analysis.whatif.transforms import CollapseLaunches, ShrinkHost, Transformation
from traceinsight.trace.model import Trace

# Runtime/driver calls that launch kernels or graphs (cudaLaunchKernel, cuLaunchKernel,
# hipModuleLaunchKernel, hipExtModuleLaunchKernel, cudaGraphLaunch, ...); copies do not match.
LAUNCH_CALL = r"(?i)launch"
# Runtime/driver calls that replay a captured graph.
GRAPH_LAUNCH = r"(?i)^(cuda|hip|cu)GraphLaunch"
# Kernels that waited for their launch, as a share of all launched kernels, for high confidence.
HIGH_CONFIDENCE_PCT = 50.0


def launch_waits(trace: Trace) -> pl.DataFrame:
    """Per piece of GPU work: device, start_ns, the idle before it on its device
    (``idle_before_ns``, from the end of all earlier work) and ``waited``: it was launched by a
    launch call that returned after that earlier work had ended (the device waited for it)."""
    work = (
        trace.kernels.filter(pl.col("device").is_not_null())
        .select("device", "ts_ns", "end_ns", "launch_end_ns", pl.col("launch_name").cast(pl.String))
        .sort(["device", "ts_ns"])
        .with_columns(prev_end_ns=pl.col("end_ns").cum_max().shift(1).over("device"))
    )
    idle = (pl.col("ts_ns") - pl.col("prev_end_ns")).clip(lower_bound=0).fill_null(0)
    waited = (
        pl.col("launch_name").fill_null("").str.contains(LAUNCH_CALL)
        & (pl.col("launch_end_ns") > pl.col("prev_end_ns")).fill_null(False)
        & (idle > 0)
    )
    return work.select("device", pl.col("ts_ns").alias("start_ns"), idle.alias("idle_before_ns"), waited.alias("waited"))


def _graphs(ctx: FindingContext) -> tuple[Transformation, ...]:
    """The fix as CUDA graphs do it: launch calls cost ~0, and so does the host time of the ops
    that launched device work (a replay runs their kernels without dispatching the ops); host
    work that launches nothing (Python between ops, data loading) stays."""
    ops = ctx.trace.kernels["top_op_name"].cast(pl.String).drop_nulls().unique().to_list()
    return (CollapseEagerLaunches(), *no_host_time_in(o for o in ops if not DYNAMO_INTERNAL.search(o)))


def detect_launch_bound(ctx: FindingContext) -> Estimate | None:
    if ctx.kernels is None or ctx.gaps is None:
        return None
    launch = ctx.kernels.launch
    waits = launch_waits(ctx.trace)
    waited = waits.filter(pl.col("waited"))
    # Launch-overhead gaps behind torch.compile's own wrappers (between CUDA graph replays, in
    # guards) are the compiled runtime's overhead, not eager launches: not counted here. A gap
    # counts when the work that ends it waited for its launch call.
    gaps = (
        ctx.gaps.gaps.filter(
            (pl.col("cause") == "launch_overhead")
            & ~pl.col("culprit").fill_null("").str.contains(DYNAMO_INTERNAL.pattern)
        )
        .join(waited.select("device", pl.col("start_ns").alias("end_ns")).unique(), on=["device", "end_ns"], how="semi")
    )
    gap_idle = int(gaps["dur_ns"].sum() or 0)
    # Idle below the gap threshold before kernels that waited for their launch: back-to-back
    # launches the device outruns. Counted when that is the pattern (a large share of kernels
    # waited), not for a few kernels after a replay or a copy.
    waited_pct = 100.0 * waited.height / waits.height if waits.height else 0.0
    short = waited.filter(pl.col("idle_before_ns") < max(ctx.gaps.threshold_ns, 1))
    short_idle = int(short["idle_before_ns"].sum() or 0) if waited_pct >= LAUNCH_SHORT_PCT else 0
    idle = gap_idle + short_idle
    if idle <= 0:
        return None
    short_pct = launch.shorter_than_launch_pct or 0.0
    culprits = (
        gaps.filter(pl.col("culprit").is_not_null())
        .group_by("culprit")
        .agg(pl.col("dur_ns").sum().alias("idle_ns"), pl.len().alias("gaps"))
        .sort(["idle_ns", "culprit"], descending=[True, False])
        .head(5)
    )
    kernels = (
        ctx.kernels.kernels.filter(pl.col("short_calls") > 0)
        .sort(["short_calls", "total_ns", "name"], descending=[True, True, False])
        .head(5)
    )
    # Graph replays by torch.compile or by hand (torch.cuda.graphs, an engine's capture).
    graphs = (ctx.compile is not None and ctx.compile.uses_cuda_graphs) or bool(
        ctx.trace.events.filter(
            pl.col("kind").is_in(["runtime", "driver"]) & pl.col("name").cast(pl.String).str.contains(GRAPH_LAUNCH)
        ).height
    )
    fix, action = launch_advice(ctx.device, ctx.workload)
    # A decode step replayed from one graph: no launch calls and none of the host work between
    # them (the per-token Python and dispatch the graph replaces).
    transforms: tuple[Transformation, ...] = _graphs(ctx)
    if ctx.workload.kind == "decode" and not graphs and ctx.device.features.graphs is not None:
        transforms = (CollapseLaunches(), ShrinkHost(None, 0.0))
    if graphs:
        kind = "HIP graphs" if ctx.device.features.graphs == "hip_graphs" else "CUDA graphs"
        fix = (
            f"The trace already replays {kind}: capture more of the step in them (remove graph "
            "breaks, avoid CPU work between replays) and fuse the remaining eager ops."
        )
        action = f"capture more of the step in {kind}"
    return estimate(
        ctx,
        "launch_bound",
        {"idle": idle},
        action=action,
        confidence="high" if waited_pct >= HIGH_CONFIDENCE_PCT else "medium",
        confidence_reason=f"{waited.height} of {waits.height} kernels ({waited_pct:.0f} %) were launched after the GPU "
        f"had run out of work; {short_pct:.0f} % of kernels run shorter than their launch call "
        f"(mean launch {(launch.launch_cpu_mean_ns or 0) / 1e3:.1f} µs, median kernel {(launch.kernel_p50_ns or 0) / 1e3:.1f} µs)",
        method=f"device idle time before kernels whose launch call returned after the GPU had finished all "
        "earlier work (the queue was empty: the GPU waited for the launch), in idle gaps the host spent "
        "launching and in the short idle between back-to-back kernels when at least "
        f"{LAUNCH_SHORT_PCT:.0f} % of kernels waited so; work already queued, blocking "
        "copies and syncs are not counted. Fusion or CUDA graphs remove launch-bound idle",
        evidence=Evidence(
            ops=tuple(
                OpEvidence(name=str(r["culprit"]), calls=int(r["gaps"]), dur_ns=int(r["idle_ns"]))
                for r in culprits.iter_rows(named=True)
            ),
            kernels=tuple(
                KernelEvidence(
                    name=r["name"],
                    calls=int(r["short_calls"]),
                    dur_ns=int(r["total_ns"]),
                    tensor_core=r["tensor_core"],
                )
                for r in kernels.iter_rows(named=True)
            ),
            locations=ctx.locations_of([str(c) for c in culprits["culprit"].to_list()]),
            figures=(
                ("launch_gap_idle_ns", float(gap_idle)),
                ("short_idle_ns", float(short_idle)),
                ("waited_kernel_pct", round(waited_pct, 2)),
                ("short_kernel_pct", round(short_pct, 2)),
            ),
        ),
        fix=fix,
        transforms=transforms,
    )
