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

import numpy as np
import polars as pl

from traceinsight.analysis.base import AnalysisConfig, AnalysisSpec, Result
from traceinsight.trace.model import Trace
from traceinsight.trace.schema import GPU_KINDS, KIND_DTYPE, KINDS

# An op is "CPU-heavy" when its GPU time is under this fraction of its host time ...
CPU_HEAVY_RATIO = 0.5
# ... and its host time is at least this share of all top-level op time (and this many ns):
# a 3 µs aten::view with no kernel is not worth a flag.
CPU_HEAVY_MIN_SHARE = 0.01
CPU_HEAVY_MIN_HOST_NS = 100_000

OP_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "name": pl.String,
    "input_dims": pl.String,
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
    unattributed_gpu_ns: int = 0
    cpu_heavy_min_host_ns: int = CPU_HEAVY_MIN_HOST_NS
    cpu_heavy_ops: int = 0

    def to_polars(self) -> pl.DataFrame:
        return self.ops


_TREE_KINDS = [k for k in KINDS if k not in GPU_KINDS and k != "python"]


def _host(events: pl.DataFrame) -> pl.DataFrame:
    """id, parent, dur_ns, is_op of the host events that make up the op tree (python frames
    have a tree of their own). Columns are pruned before filtering: events is wide."""
    return (
        events.lazy()
        .select("id", "parent", "dur_ns", "kind")
        .filter(pl.col("kind").is_in(pl.Series(_TREE_KINDS, dtype=KIND_DTYPE)))
        .select("id", "parent", "dur_ns", is_op=pl.col("kind") == "cpu_op")
        .collect()
    )


def _op_parents(host: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """id → op_parent: the nearest cpu_op ancestor, climbing through annotations.

    Event ids are row numbers from the loader, so dense arrays indexed by id do the climb
    (one vectorised step per level of non-op nesting); ids too sparse for that fall back to
    joins over the same levels.
    """
    size = int(host["id"].max() or 0) + 1 if host.height else 0
    if host.height and size <= 4 * host.height + 1024 and int(host["id"].min() or 0) >= 0:
        parent_of = np.full(size, -1, dtype=np.int64)
        parent_of[host["id"].to_numpy()] = host["parent"].fill_null(-1).to_numpy()
        is_op = np.zeros(size, dtype=bool)
        is_op[host.filter(pl.col("is_op"))["id"].to_numpy()] = True
        ids = ops["id"].to_numpy()
        up = parent_of[ids]
        # A parent outside the host tree (should not happen) ends the climb like a root.
        up[(up >= size)] = -1
        climbing = (up >= 0) & ~is_op[np.clip(up, 0, None)]
        while climbing.any():
            nxt = parent_of[up[climbing]]
            up[climbing] = nxt
            climbing = (up >= 0) & ~is_op[np.clip(up, 0, None)]
        return pl.DataFrame(
            {"id": ids, "op_parent": pl.Series(up).replace(-1, None)},
            schema={"id": pl.Int64, "op_parent": pl.Int64},
        )
    lookup = host.select(
        pl.col("id").alias("_p"), pl.col("parent").alias("_pp"), pl.col("is_op").alias("_p_is_op")
    )
    pending = ops.select("id", pl.col("parent").alias("_p"))
    resolved: list[pl.DataFrame] = [pl.DataFrame(schema={"id": pl.Int64, "op_parent": pl.Int64})]
    while pending.height:
        pending = pending.join(lookup, on="_p", how="left")
        done = pl.col("_p").is_null() | pl.col("_p_is_op").fill_null(True)
        resolved.append(pending.filter(done).select("id", op_parent=pl.col("_p")))
        pending = pending.filter(~done).select("id", _p=pl.col("_pp"))
    return pl.concat(resolved)


def op_tree(trace: Trace) -> pl.DataFrame:
    """Every cpu_op with its op parent, self host time and whether it is top level.

    Columns: id, name (Categorical), input_dims, pid, tid, ts_ns, end_ns, dur_ns, step,
    op_parent, self_ns, top_level.
    """
    events = trace.events
    host = _host(events)
    ops = (
        events.lazy()
        .select("id", "name", "input_dims", "pid", "tid", "ts_ns", "end_ns", "dur_ns", "step", "parent", "kind")
        .filter(pl.col("kind") == "cpu_op")
        .drop("kind")
        .collect()
    )
    parents = _op_parents(host, ops)
    children = (
        host.lazy()
        .filter(pl.col("parent").is_not_null())
        .group_by("parent")
        .agg(pl.col("dur_ns").sum().alias("_children_ns"))
        .collect()
    )
    return (
        ops.join(parents, on="id", how="left")
        .join(children, left_on="id", right_on="parent", how="left")
        .with_columns(
            self_ns=(pl.col("dur_ns") - pl.col("_children_ns").fill_null(0)).clip(lower_bound=0),
            top_level=pl.col("op_parent").is_null(),
        )
        .drop("_children_ns", "parent")
    )


def innermost_op(tree: pl.DataFrame, points: pl.DataFrame) -> pl.DataFrame:
    """For points (``pid``, ``tid``, ``ts_ns`` plus any columns), the innermost cpu_op enclosing
    each on its thread: adds ``op_id`` and ``op_name`` (null when no op was running).

    The latest op that started at or before the point is found with an as-of join; when it
    had already ended, its op parents are tried in turn (one join per nesting level).
    """
    starts = tree.select(
        "pid",
        "tid",
        pl.col("ts_ns").alias("_op_ts"),
        pl.col("id").alias("_op"),
        pl.col("end_ns").alias("_op_end"),
        pl.col("op_parent").alias("_op_parent"),
    ).sort("_op_ts")
    keyed = points.with_row_index("_row")
    first = (
        keyed.select("_row", "pid", "tid", "ts_ns")
        .sort("ts_ns")
        .join_asof(
            starts,
            left_on="ts_ns",
            right_on="_op_ts",
            by=["pid", "tid"],
            strategy="backward",
            check_sortedness=False,
        )
    )
    by_id = tree.select(
        pl.col("id").alias("_op"),
        pl.col("end_ns").alias("_op_end"),
        pl.col("op_parent").alias("_op_parent"),
    )
    done = pl.col("_op").is_null() | (pl.col("_op_end") >= pl.col("ts_ns"))
    found = [first.filter(done).select("_row", "_op")]
    pending = first.filter(~done)
    while pending.height:
        pending = pending.select("_row", "ts_ns", pl.col("_op_parent").alias("_op")).join(
            by_id, on="_op", how="left"
        )
        found.append(pending.filter(done).select("_row", "_op"))
        pending = pending.filter(~done)
    names = tree.select(pl.col("id").alias("_op"), pl.col("name").alias("op_name"))
    located = pl.concat(found).join(names, on="_op", how="left").rename({"_op": "op_id"})
    return keyed.join(located, on="_row", how="left").sort("_row").drop("_row")


def _gpu_by_op(tree: pl.DataFrame, kernels: pl.DataFrame) -> pl.DataFrame:
    """Per op id: GPU ns and kernel count it launched itself, and under it (inclusive)."""
    own = (
        kernels.filter(pl.col("op_id").is_not_null())
        .group_by("op_id")
        .agg(pl.col("dur_ns").sum().alias("gpu_ns"), pl.len().cast(pl.Int64).alias("n"))
        .rename({"op_id": "id"})
    )
    up = tree.select("id", "op_parent")
    level = own
    levels = [own]
    # Hand each op's sums to its op parent, level by level; aggregating at each level keeps
    # the frame no larger than the number of ops that launched something.
    while level.height:
        level = (
            level.join(up, on="id", how="inner")
            .filter(pl.col("op_parent").is_not_null())
            .group_by("op_parent")
            .agg(pl.col("gpu_ns").sum(), pl.col("n").sum())
            .rename({"op_parent": "id"})
        )
        levels.append(level)
    inclusive = pl.concat(levels).group_by("id").agg(
        pl.col("gpu_ns").sum().alias("gpu_total_ns"), pl.col("n").sum().alias("kernels")
    )
    return own.rename({"gpu_ns": "gpu_self_ns", "n": "kernels_self"}).join(
        inclusive, on="id", how="full", coalesce=True
    )


def run(trace: Trace, config: AnalysisConfig) -> OpsResult:
    if not trace.events.filter(pl.col("kind") == "cpu_op").height:
        return OpsResult(available=False, reason="no cpu_op events in this trace")
    by_shapes = bool(config.by_shapes)
    if by_shapes and not trace.has_shapes:
        return OpsResult(
            available=False,
            reason="grouping by input shapes needs a trace recorded with record_shapes=True",
            by_shapes=True,
        )
    tree = op_tree(trace)
    kernels = trace.kernels
    has_gpu = kernels.height > 0
    gpu = _gpu_by_op(tree, kernels)
    per_call = tree.join(gpu, on="id", how="left").with_columns(
        pl.col("gpu_self_ns", "gpu_total_ns", "kernels_self", "kernels").fill_null(0)
    )
    keys = ["name", "input_dims"] if by_shapes else ["name"]
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
        table = table.with_columns(input_dims=pl.lit(None, dtype=pl.String))
    table = (
        table.select([pl.col(c).cast(t) for c, t in OP_COLUMNS.items()])
        .sort(
            ["gpu_total_ns", "host_total_ns", "name"],
            descending=[True, True, False],
            nulls_last=True,
        )
    )
    attributed = int(kernels.filter(pl.col("op_id").is_not_null())["dur_ns"].sum()) if has_gpu else 0
    total_gpu = int(kernels["dur_ns"].sum()) if has_gpu else 0
    return OpsResult(
        by_shapes=by_shapes,
        has_gpu=has_gpu,
        ops=table,
        op_calls=tree.height,
        top_level_host_ns=top_level_host_ns,
        attributed_gpu_ns=attributed,
        unattributed_gpu_ns=total_gpu - attributed,
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
