"""Per-operator host and GPU time: where the CPU spends its time and what each op costs the GPU.

For each op name (or name and input shapes): calls, host total and self time, the GPU time of
the kernels it launched itself ("self GPU") and of everything launched beneath it ("total
GPU"), the GPU/CPU ratio and a flag for ops whose host time dwarfs their GPU time.

The op tree: a cpu_op's *op parent* is its nearest enclosing cpu_op on the same thread (a
record_function annotation between them is skipped). Self host time subtracts every direct
child on the thread (child ops, annotations, CUDA runtime calls), so it is the op's own
dispatch work. Totals per name add up each call, so an op that nests inside itself
(``aten::to`` → ``aten::to``) counts the inner call twice, as torch.profiler does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from traceinsight.analysis.core.base import NO_INPUTS, AnalysisConfig, AnalysisSpec, Inputs, Result
from traceinsight.analysis.lib.host_tree import HostTree, innermost_op, op_tree
from traceinsight.trace.model import Trace

__all__ = ["HostTree", "OpsResult", "innermost_op", "op_tree", "run"]

# An op is "CPU-heavy" when its GPU time is under this fraction of its host time ...
CPU_HEAVY_RATIO = 0.5
# ... and its host time is at least this share of all top-level op time (and this many ns):
# a 3 µs aten::view with no kernel is not worth a flag.
CPU_HEAVY_MIN_SHARE = 0.01
CPU_HEAVY_MIN_HOST_NS = 100_000

OP_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "name": pl.String,
    "input_dims": pl.String,
    "input_types": pl.String,
    "calls": pl.Int64,
    "top_level_calls": pl.Int64,
    "top_level": pl.Boolean,
    "host_total_ns": pl.Int64,
    "host_self_ns": pl.Int64,
    "host_mean_ns": pl.Float64,
    "gpu_self_ns": pl.Int64,
    "gpu_total_ns": pl.Int64,
    "kernels_self": pl.Int64,
    "kernels": pl.Int64,
    "gpu_cpu_ratio": pl.Float64,
    "cpu_heavy": pl.Boolean,
}


@dataclass(frozen=True)
class OpsResult(Result):
    name = "ops"
    by_shapes: bool = False
    has_gpu: bool = False
    ops: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=OP_COLUMNS))
    op_calls: int = 0
    top_level_host_ns: int = 0
    attributed_gpu_ns: int = 0
    # GPU time not attributed to an op, and the part of it whose launch call is not in the
    # trace at all (work launched before recording started).
    unattributed_gpu_ns: int = 0
    unlinked_gpu_ns: int = 0
    cpu_heavy_min_host_ns: int = CPU_HEAVY_MIN_HOST_NS
    cpu_heavy_ops: int = 0

    def to_polars(self) -> pl.DataFrame:
        return self.ops


def _gpu_by_op(tree: HostTree, ops: pl.DataFrame, kernels: pl.DataFrame) -> pl.DataFrame:
    """Per op call: GPU ns and kernel count it launched itself, and beneath it (inclusive)."""
    k_pos = tree.pos(kernels["op_id"].fill_null(-1).to_numpy())
    dur = kernels["dur_ns"].fill_null(0).to_numpy()
    self_ns = tree.sum_by(k_pos, dur)
    self_n = tree.sum_by(k_pos)
    up = tree.op_parent_pos()
    total_ns = self_ns.copy()
    total_n = self_n.copy()
    cur = up[k_pos[k_pos >= 0]]
    cur_dur = dur[k_pos >= 0]
    # Hand each kernel to every op above its own, one nesting level per pass.
    while cur.size:
        total_ns += tree.sum_by(cur, cur_dur)
        total_n += tree.sum_by(cur)
        keep = cur >= 0
        cur, cur_dur = up[cur[keep]], cur_dur[keep]
    pos = tree.pos(ops["id"].to_numpy())
    return ops.with_columns(
        gpu_self_ns=pl.Series(self_ns[pos]),
        gpu_total_ns=pl.Series(total_ns[pos]),
        kernels_self=pl.Series(self_n[pos]),
        kernels=pl.Series(total_n[pos]),
    )


def run(trace: Trace, config: AnalysisConfig, inputs: Inputs = NO_INPUTS) -> OpsResult:
    if not bool((trace.events["kind"] == "cpu_op").any()):
        return OpsResult(available=False, reason="no cpu_op events in this trace")
    by_shapes = bool(config.by_shapes)
    if by_shapes and not trace.has_shapes:
        return OpsResult(
            available=False,
            reason="grouping by input shapes needs a trace recorded with record_shapes=True",
            by_shapes=True,
        )
    host = HostTree(trace.events)
    tree = op_tree(trace, host)
    kernels = trace.kernels
    has_gpu = kernels.height > 0
    per_call = _gpu_by_op(host, tree, kernels)
    # By shapes means by dtypes too: an fp64 and an fp16 mm of one shape are different work.
    keys = ["name", "input_dims", "input_types"] if by_shapes else ["name"]
    top_level_host_ns = int(per_call.filter(pl.col("top_level"))["dur_ns"].sum())
    min_host_ns = max(CPU_HEAVY_MIN_HOST_NS, int(CPU_HEAVY_MIN_SHARE * top_level_host_ns))
    ratio = pl.when(pl.col("host_total_ns") > 0).then(
        pl.col("gpu_total_ns") / pl.col("host_total_ns")
    )
    table = (
        per_call.group_by(keys)
        .agg(
            calls=pl.len().cast(pl.Int64),
            top_level_calls=pl.col("top_level").sum().cast(pl.Int64),
            host_total_ns=pl.col("dur_ns").sum(),
            host_self_ns=pl.col("self_ns").sum(),
            host_mean_ns=pl.col("dur_ns").mean(),
            gpu_self_ns=pl.col("gpu_self_ns").sum(),
            gpu_total_ns=pl.col("gpu_total_ns").sum(),
            kernels_self=pl.col("kernels_self").sum(),
            kernels=pl.col("kernels").sum(),
        )
        .with_columns(
            top_level=pl.col("top_level_calls") > 0,
            gpu_cpu_ratio=ratio if has_gpu else pl.lit(None, dtype=pl.Float64),
        )
        .with_columns(
            cpu_heavy=pl.lit(has_gpu)
            & (pl.col("host_total_ns") >= min_host_ns)
            & (pl.col("gpu_cpu_ratio").fill_null(0.0) < CPU_HEAVY_RATIO)
        )
    )
    if not by_shapes:
        table = table.with_columns(input_dims=pl.lit(None, dtype=pl.String), input_types=pl.lit(None, dtype=pl.String))
    table = (
        table.select([pl.col(c).cast(t) for c, t in OP_COLUMNS.items()])
        .sort(
            ["gpu_total_ns", "host_total_ns", "name", "input_dims", "input_types"],
            descending=[True, True, False, False, False],
            nulls_last=True,
        )
    )
    attributed = int(kernels.filter(pl.col("op_id").is_not_null())["dur_ns"].sum()) if has_gpu else 0
    total_gpu = int(kernels["dur_ns"].sum()) if has_gpu else 0
    unlinked = int(kernels.filter(pl.col("launch_id").is_null())["dur_ns"].sum()) if has_gpu else 0
    return OpsResult(
        by_shapes=by_shapes,
        has_gpu=has_gpu,
        ops=table,
        op_calls=tree.height,
        top_level_host_ns=top_level_host_ns,
        attributed_gpu_ns=attributed,
        unattributed_gpu_ns=total_gpu - attributed,
        unlinked_gpu_ns=unlinked,
        cpu_heavy_min_host_ns=min_host_ns,
        cpu_heavy_ops=int(table["cpu_heavy"].sum()),
    )


SPEC = AnalysisSpec(
    name="ops",
    title="Operators",
    run=run,
    description="Per-op calls, host total/self time, GPU time launched (self and inclusive), "
    "GPU/CPU ratio and CPU-heavy ops.",
)
