"""Per-kernel statistics, kernel families, tensor-core use and launch overhead.

GPU time here is the *sum* of kernel durations (memcpy and memset included): kernels on
overlapping streams count in full, so shares are of summed kernel time, not of busy time.

Launch statistics use the launch call each kernel is linked to (by correlation):
- launch latency = kernel start − end of its launch call. It includes any wait behind
  earlier work on the stream, so it is a queueing delay as much as a launch cost. Clock skew
  between host and device can make it negative; such values are clamped to 0 and counted.
- CPU launch time = duration of the launch call. A ``cudaGraphLaunch`` starts many kernels
  with one call; its time is shared evenly among them ("amortised").
- a kernel is *shorter than its launch* when its duration is below its amortised CPU launch
  time: a stream of such kernels cannot keep the GPU busy, whatever the GPU does.
Kernels started by a CUDA graph launch are left out of the latency figures (the graph's
kernels queue behind each other inside one launch) and reported on their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from traceinsight.analysis.classify import with_classes
from traceinsight.analysis.core.base import NO_INPUTS, AnalysisConfig, AnalysisSpec, Inputs, Result
from traceinsight.analysis.device import model as device_model
from traceinsight.analysis.lib.host_names import GRAPH_LAUNCH_PATTERN
from traceinsight.trace.model import Trace

GRAPH_LAUNCH = GRAPH_LAUNCH_PATTERN  # cudaGraphLaunch, hipGraphLaunch, cuGraphLaunch
# Distinct graphs listed in the table of graphs (the rest are summed in the launch stats).
MAX_GRAPHS = 50

KERNEL_TABLE_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "name": pl.String,
    "family": pl.String,
    "subfamily": pl.String,
    "precision": pl.String,
    "tensor_core": pl.Boolean,
    "library": pl.String,
    "rule": pl.String,
    "calls": pl.Int64,
    "total_ns": pl.Int64,
    "mean_ns": pl.Float64,
    "min_ns": pl.Int64,
    "max_ns": pl.Int64,
    "share_pct": pl.Float64,
    "grid": pl.String,
    "block": pl.String,
    "occupancy_pct": pl.Float64,
    "registers_per_thread": pl.Int64,
    "shared_memory_bytes": pl.Int64,
    "graph_calls": pl.Int64,
    "short_calls": pl.Int64,
    "launch_cpu_mean_ns": pl.Float64,
}

FAMILY_TABLE_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "family": pl.String,
    "kernels": pl.Int64,
    "names": pl.Int64,
    "total_ns": pl.Int64,
    "share_pct": pl.Float64,
    "mean_ns": pl.Float64,
    "tensor_core_ns": pl.Int64,
    "short_pct": pl.Float64,
}

SUBFAMILY_TABLE_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "family": pl.String,
    "subfamily": pl.String,
    "kernels": pl.Int64,
    "total_ns": pl.Int64,
    "share_pct": pl.Float64,
}


@dataclass(frozen=True)
class LaunchStats:
    kernels: int = 0
    linked: int = 0
    unlinked: int = 0
    latency_measured: int = 0
    latency_mean_ns: float | None = None
    latency_p50_ns: float | None = None
    latency_p95_ns: float | None = None
    latency_max_ns: int | None = None
    negative_latency_clamped: int = 0
    launch_cpu_mean_ns: float | None = None
    launch_cpu_p50_ns: float | None = None
    kernel_mean_ns: float | None = None
    kernel_p50_ns: float | None = None
    shorter_than_launch: int = 0
    shorter_than_launch_pct: float | None = None
    graph_launches: int = 0
    graph_kernels: int = 0
    graph_kernel_ns: int = 0


# One row per distinct graph replayed: graphs are told apart by the sequence of kernel names
# one launch runs (traces do not name the graph a launch replays).
GRAPH_TABLE_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "graph": pl.Int64,
    "launches": pl.Int64,
    "kernels_per_launch": pl.Int64,
    "total_ns": pl.Int64,
    "per_launch_ns": pl.Float64,
    "share_pct": pl.Float64,
    "top_kernel": pl.String,
    "top_kernel_pct": pl.Float64,
    # the op holding most of the graph's time, where the kernels have ops (a merged capture)
    "top_op": pl.String,
    "top_op_pct": pl.Float64,
    "first_ts_ns": pl.Int64,
}


@dataclass(frozen=True)
class KernelsResult(Result):
    name = "kernels"
    total_ns: int = 0
    tensor_core_ns: int = 0
    tensor_core_pct: float | None = None
    distinct_names: int = 0
    kernels: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=KERNEL_TABLE_COLUMNS))
    families: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=FAMILY_TABLE_COLUMNS))
    subfamilies: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=SUBFAMILY_TABLE_COLUMNS))
    launch: LaunchStats = field(default_factory=LaunchStats)
    # the kernels inside CUDA/HIP graph replays, per distinct graph
    graphs: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=GRAPH_TABLE_COLUMNS))

    def to_polars(self) -> pl.DataFrame:
        return self.kernels


def _share(col: str, total: int) -> pl.Expr:
    return pl.col(col) * 100.0 / total if total > 0 else pl.lit(None, dtype=pl.Float64)


def _dims(col: str) -> pl.Expr:
    """A grid/block list as "x×y×z" text."""
    return pl.col(col).list.eval(pl.element().cast(pl.String)).list.join("×")


def _most_common(frame: pl.DataFrame, col: str) -> pl.DataFrame:
    """Per name, the most frequent value of a list column as text (ties: the smallest text,
    so that the choice does not depend on the order group_by happens to return)."""
    return (
        frame.filter(pl.col(col).is_not_null())
        .group_by("name", col)
        .len()
        .with_columns(_dims(col).alias(col))
        .sort(["name", "len", col], descending=[False, True, False])
        .unique("name", keep="first", maintain_order=True)
        .select("name", col)
    )


def _with_launch(kernels: pl.DataFrame) -> pl.DataFrame:
    """Adds is_graph, launch_cpu_ns (amortised over the kernels one call started),
    latency_ns (clamped), negative_latency and shorter_than_launch."""
    linked = pl.col("launch_id").is_not_null()
    per_launch = pl.len().over("launch_id")
    latency = pl.col("ts_ns") - pl.col("launch_end_ns")
    return kernels.with_columns(
        is_graph=pl.col("launch_name").cast(pl.String).str.contains(GRAPH_LAUNCH).fill_null(False),
        launch_cpu_ns=pl.when(linked).then(
            (pl.col("launch_end_ns") - pl.col("launch_ts_ns")).clip(lower_bound=0) / per_launch
        ),
        raw_latency_ns=pl.when(linked).then(latency),
    ).with_columns(
        latency_ns=pl.when(~pl.col("is_graph")).then(pl.col("raw_latency_ns").clip(lower_bound=0)),
        negative_latency=(~pl.col("is_graph") & (pl.col("raw_latency_ns") < 0)).fill_null(False),
        shorter_than_launch=(pl.col("dur_ns") < pl.col("launch_cpu_ns")).fill_null(False),
    )


def _launch_stats(k: pl.DataFrame) -> LaunchStats:
    linked = k.filter(pl.col("launch_id").is_not_null())
    measured = linked.filter(~pl.col("is_graph"))
    graph = k.filter(pl.col("is_graph"))
    stats = linked.select(
        lat_mean=pl.col("latency_ns").mean(),
        lat_p50=pl.col("latency_ns").quantile(0.5),
        lat_p95=pl.col("latency_ns").quantile(0.95),
        lat_max=pl.col("latency_ns").max(),
        cpu_mean=pl.col("launch_cpu_ns").mean(),
        cpu_p50=pl.col("launch_cpu_ns").quantile(0.5),
        short=pl.col("shorter_than_launch").sum(),
        negative=pl.col("negative_latency").sum(),
    ).row(0, named=True)
    n_linked = linked.height

    def opt_float(value: object) -> float | None:
        return None if value is None else float(value)  # type: ignore[arg-type]

    return LaunchStats(
        kernels=k.height,
        linked=n_linked,
        unlinked=k.height - n_linked,
        latency_measured=measured.height,
        latency_mean_ns=opt_float(stats["lat_mean"]),
        latency_p50_ns=opt_float(stats["lat_p50"]),
        latency_p95_ns=opt_float(stats["lat_p95"]),
        latency_max_ns=None if stats["lat_max"] is None else int(stats["lat_max"]),
        negative_latency_clamped=int(stats["negative"] or 0),
        launch_cpu_mean_ns=opt_float(stats["cpu_mean"]),
        launch_cpu_p50_ns=opt_float(stats["cpu_p50"]),
        kernel_mean_ns=opt_float(k["dur_ns"].mean()),
        kernel_p50_ns=opt_float(k["dur_ns"].quantile(0.5)),
        shorter_than_launch=int(stats["short"] or 0),
        shorter_than_launch_pct=(100.0 * int(stats["short"] or 0) / n_linked) if n_linked else None,
        graph_launches=int(graph["launch_id"].n_unique()) if graph.height else 0,
        graph_kernels=graph.height,
        graph_kernel_ns=int(graph["dur_ns"].sum()),
    )


def _graphs(k: pl.DataFrame, total_ns: int) -> pl.DataFrame:
    """Per distinct graph (by the kernel-name sequence of a launch): its launches, kernels,
    time, share of all kernel time and its largest kernel."""
    g = k.filter(pl.col("is_graph") & pl.col("launch_id").is_not_null())
    if g.height == 0:
        return pl.DataFrame(schema=GRAPH_TABLE_COLUMNS)
    per_launch = (
        g.sort("ts_ns")
        .group_by("launch_id", maintain_order=True)
        .agg(
            pl.col("name").str.join("\n").hash().alias("signature"),
            pl.len().alias("kernels"),
            pl.col("dur_ns").sum().alias("dur_ns"),
            pl.col("ts_ns").min().alias("first_ts_ns"),
        )
    )
    top = (
        g.join(per_launch.select("launch_id", "signature"), on="launch_id")
        .group_by("signature", "name")
        .agg(pl.col("dur_ns").sum())
        .sort(["signature", "dur_ns", "name"], descending=[False, True, False])
        .group_by("signature", maintain_order=True)
        .agg(pl.col("name").first().alias("top_kernel"), pl.col("dur_ns").first().alias("top_ns"))
    )
    top_op = (
        g.filter(pl.col("op_name").is_not_null())
        .join(per_launch.select("launch_id", "signature"), on="launch_id")
        .group_by("signature", "op_name")
        .agg(pl.col("dur_ns").sum())
        .sort(["signature", "dur_ns", "op_name"], descending=[False, True, False])
        .group_by("signature", maintain_order=True)
        .agg(pl.col("op_name").first().alias("top_op"), pl.col("dur_ns").first().alias("top_op_ns"))
    )
    table = (
        per_launch.group_by("signature")
        .agg(
            launches=pl.len().cast(pl.Int64),
            kernels_per_launch=pl.col("kernels").max().cast(pl.Int64),
            total_ns=pl.col("dur_ns").sum().cast(pl.Int64),
            first_ts_ns=pl.col("first_ts_ns").min().cast(pl.Int64),
        )
        .join(top, on="signature")
        .join(top_op, on="signature", how="left")
        .sort(["total_ns", "first_ts_ns"], descending=[True, False])
        .head(MAX_GRAPHS)
        # numbered in the order they were first replayed, so the numbers read as a timeline
        .with_columns(graph=(pl.col("first_ts_ns").rank("ordinal") - 1).cast(pl.Int64))
        .with_columns(
            per_launch_ns=pl.col("total_ns") / pl.col("launches"),
            share_pct=_share("total_ns", total_ns),
            top_kernel_pct=pl.col("top_ns") * 100.0 / pl.col("total_ns"),
            top_op_pct=pl.col("top_op_ns") * 100.0 / pl.col("total_ns"),
        )
    )
    return table.select([pl.col(c).cast(t) for c, t in GRAPH_TABLE_COLUMNS.items()])


def run(trace: Trace, config: AnalysisConfig, inputs: Inputs = NO_INPUTS) -> KernelsResult:
    if trace.kernels.height == 0:
        return KernelsResult(available=False, reason="no GPU kernels, memcpys or memsets in this trace")
    k = _with_launch(
        trace.kernels.select(
            pl.col("name").cast(pl.String),
            "ts_ns",
            "dur_ns",
            "grid",
            "block",
            "occupancy_pct",
            "registers_per_thread",
            "shared_memory_bytes",
            "launch_id",
            "launch_name",
            "launch_ts_ns",
            "launch_end_ns",
            pl.col("op_name").cast(pl.String),
        )
    )
    # the classifier's answer per name; the vendor tells RCCL from NCCL and turns on
    # vendor-only rules (MTIA device events)
    k = with_classes(k, vendor=device_model.from_trace(trace, config).vendor)
    total_ns = int(k["dur_ns"].sum())
    table = (
        k.group_by("name")
        .agg(
            pl.col("family", "subfamily", "precision", "tensor_core", "library", "rule").first(),
            calls=pl.len().cast(pl.Int64),
            total_ns=pl.col("dur_ns").sum(),
            mean_ns=pl.col("dur_ns").mean(),
            min_ns=pl.col("dur_ns").min(),
            max_ns=pl.col("dur_ns").max(),
            # Kineto writes 0 when it could not estimate occupancy: 0 means unknown here.
            occupancy_pct=pl.col("occupancy_pct").filter(pl.col("occupancy_pct") > 0).mean(),
            registers_per_thread=pl.col("registers_per_thread").max(),
            shared_memory_bytes=pl.col("shared_memory_bytes").max(),
            graph_calls=pl.col("is_graph").sum().cast(pl.Int64),
            short_calls=pl.col("shorter_than_launch").sum().cast(pl.Int64),
            launch_cpu_mean_ns=pl.col("launch_cpu_ns").mean(),
        )
        .with_columns(share_pct=_share("total_ns", total_ns))
        .join(_most_common(k, "grid"), on="name", how="left")
        .join(_most_common(k, "block"), on="name", how="left")
        .select([pl.col(c).cast(t) for c, t in KERNEL_TABLE_COLUMNS.items()])
        .sort(["total_ns", "name"], descending=[True, False])
    )
    linked = pl.col("launch_id").is_not_null()
    families = (
        k.group_by("family")
        .agg(
            kernels=pl.len().cast(pl.Int64),
            names=pl.col("name").n_unique().cast(pl.Int64),
            total_ns=pl.col("dur_ns").sum(),
            mean_ns=pl.col("dur_ns").mean(),
            tensor_core_ns=pl.col("dur_ns").filter(pl.col("tensor_core")).sum(),
            short_pct=pl.when(linked.sum() > 0).then(
                pl.col("shorter_than_launch").filter(linked).sum() * 100.0 / linked.sum()
            ),
        )
        .with_columns(share_pct=_share("total_ns", total_ns))
        .select([pl.col(c).cast(t) for c, t in FAMILY_TABLE_COLUMNS.items()])
        .sort(["total_ns", "family"], descending=[True, False])
    )
    subfamilies = (
        k.filter(pl.col("subfamily").is_not_null())
        .group_by("family", "subfamily")
        .agg(kernels=pl.len().cast(pl.Int64), total_ns=pl.col("dur_ns").sum())
        .with_columns(share_pct=_share("total_ns", total_ns))
        .select([pl.col(c).cast(t) for c, t in SUBFAMILY_TABLE_COLUMNS.items()])
        .sort(["total_ns", "subfamily"], descending=[True, False])
    )
    tensor_core_ns = int(k.filter(pl.col("tensor_core"))["dur_ns"].sum())
    return KernelsResult(
        total_ns=total_ns,
        tensor_core_ns=tensor_core_ns,
        tensor_core_pct=100.0 * tensor_core_ns / total_ns if total_ns else None,
        distinct_names=table.height,
        kernels=table,
        families=families,
        subfamilies=subfamilies,
        launch=_launch_stats(k),
        graphs=_graphs(k, total_ns),
    )


SPEC = AnalysisSpec(
    name="kernels",
    title="Kernels",
    run=run,
    description="Per-kernel time, launch shape, occupancy, family and tensor-core use; launch "
    "latency and kernels shorter than their launch.",
)
