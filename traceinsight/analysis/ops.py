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

from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from traceinsight.analysis.base import AnalysisConfig, AnalysisSpec, Result
from traceinsight.trace.model import Trace
from traceinsight.trace.schema import GPU_KINDS, KINDS

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
    # GPU time not attributed to an op, and the part of it whose launch call is not in the
    # trace at all (work launched before recording started).
    unattributed_gpu_ns: int = 0
    unlinked_gpu_ns: int = 0
    cpu_heavy_min_host_ns: int = CPU_HEAVY_MIN_HOST_NS
    cpu_heavy_ops: int = 0

    def to_polars(self) -> pl.DataFrame:
        return self.ops


_TREE_KINDS = [k for k in KINDS if k not in GPU_KINDS and k != "python"]


class HostTree:
    """The host event tree of one trace (python frames excluded: they have a tree of their
    own) as numpy arrays indexed by position, for vectorised climbs towards the root.

    Event ids from the loader are row numbers, so positions are usually the ids themselves
    (dense arrays); sparse ids are mapped to positions by binary search instead.
    """

    def __init__(self, events: pl.DataFrame) -> None:
        host = (
            events.lazy()
            .select("id", "parent", "end_ns", "dur_ns", "kind")
            .filter(pl.col("kind").is_in(_TREE_KINDS))
            .select("id", "parent", "end_ns", "dur_ns", is_op=pl.col("kind") == "cpu_op")
            .collect()
        )
        self._op_parent: np.ndarray | None = None
        ids = host["id"].to_numpy()
        lo = int(ids.min()) if ids.size else 0
        hi = int(ids.max()) if ids.size else -1
        self._dense = lo >= 0 and hi + 1 <= 4 * ids.size + 1024
        if self._dense:
            size = hi + 1
            self._ids = np.arange(size, dtype=np.int64)
            self._known = np.zeros(size, dtype=bool)
            self._known[ids] = True
            pos = ids
        else:
            order = np.argsort(ids, kind="stable")
            self._ids = ids[order]
            self._known = np.ones(ids.size, dtype=bool)
            pos = np.empty(ids.size, dtype=np.int64)
            pos[order] = np.arange(ids.size, dtype=np.int64)
        size = self._ids.size
        self.parent = np.full(size, -1, dtype=np.int64)
        self.parent[pos] = self.pos(host["parent"].fill_null(-1).to_numpy())
        self.is_op = np.zeros(size, dtype=bool)
        self.is_op[pos] = host["is_op"].to_numpy()
        self.end_ns = np.zeros(size, dtype=np.int64)
        self.end_ns[pos] = host["end_ns"].to_numpy()
        self.dur_ns = np.zeros(size, dtype=np.int64)
        self.dur_ns[pos] = host["dur_ns"].to_numpy()

    def sum_by(self, pos: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """Per position, the sum of ``weights`` (or the count) of the entries at it; -1 skipped."""
        keep = pos >= 0
        w = None if weights is None else weights[keep].astype(np.float64)
        # float64 sums of int64 ns are exact below 2**53 ns (104 days).
        sums = np.bincount(pos[keep], weights=w, minlength=self._ids.size)
        return np.rint(sums).astype(np.int64)

    def op_parent_pos(self) -> np.ndarray:
        """Per position, the position of the nearest cpu_op strictly above it (-1: none)."""
        if self._op_parent is None:
            self._op_parent = self.climb_to_op(self.parent)
        return self._op_parent

    def pos(self, ids: np.ndarray) -> np.ndarray:
        """Positions of ids (-1 for -1 and for ids not in the tree)."""
        ids = np.asarray(ids, dtype=np.int64)
        if self._ids.size == 0:
            return np.full(ids.shape, -1, dtype=np.int64)
        if self._dense:
            inside = (ids >= 0) & (ids < self._ids.size)
            out = np.where(inside, ids, -1)
            out[inside] = np.where(self._known[ids[inside]], ids[inside], -1)
            return out
        found = np.searchsorted(self._ids, ids)
        found = np.clip(found, 0, self._ids.size - 1)
        return np.where(self._ids[found] == ids, found, -1)

    def ids(self, pos: np.ndarray) -> pl.Series:
        """Event ids at positions (null for -1)."""
        out = np.where(pos >= 0, self._ids[np.clip(pos, 0, None)], -1)
        return pl.Series(out, dtype=pl.Int64).replace(-1, None)

    def climb_to_op(
        self, start: np.ndarray, ts_ns: np.ndarray | None = None, skip: np.ndarray | None = None
    ) -> np.ndarray:
        """From each start position, the first position at or above it that is a cpu_op
        (and, with ``ts_ns``, still running at that time; with ``skip``, a boolean mask by
        position, not one of those); -1 when the root is passed."""
        cur = start.copy()

        def needs_climb() -> np.ndarray:
            safe = np.clip(cur, 0, None)
            ok = self.is_op[safe]
            if ts_ns is not None:
                ok = ok & (self.end_ns[safe] >= ts_ns)
            if skip is not None:
                ok = ok & ~skip[safe]
            return (cur >= 0) & ~ok

        climbing = needs_climb()
        while climbing.any():  # one vectorised step per nesting level
            cur[climbing] = self.parent[cur[climbing]]
            climbing = needs_climb()
        return cur


def op_tree(trace: Trace, tree: HostTree | None = None) -> pl.DataFrame:
    """Every cpu_op with its op parent, self host time and whether it is top level.

    Columns: id, name (Categorical), input_dims, pid, tid, ts_ns, end_ns, dur_ns, step,
    op_parent, self_ns, top_level.
    """
    events = trace.events
    tree = tree or HostTree(events)
    ops = (
        events.lazy()
        .select("id", "name", "input_dims", "pid", "tid", "ts_ns", "end_ns", "dur_ns", "step", "kind")
        .filter(pl.col("kind") == "cpu_op")
        .drop("kind")
        .collect()
    )
    pos = tree.pos(ops["id"].to_numpy())
    # Self time: every direct child on the thread (ops, annotations, runtime calls) is
    # subtracted; crossing spans can over-subtract, hence the clip.
    children_ns = tree.sum_by(tree.parent, tree.dur_ns)
    return ops.with_columns(
        op_parent=tree.ids(tree.op_parent_pos()[pos]),
        self_ns=(pl.col("dur_ns") - pl.Series(children_ns[pos])).clip(lower_bound=0),
    ).with_columns(top_level=pl.col("op_parent").is_null())


def innermost_op(
    events: pl.DataFrame, points: pl.DataFrame, *, owner_skips: Collection[str] = ()
) -> pl.DataFrame:
    """For points (``pid``, ``tid``, ``ts_ns`` plus any columns), the innermost cpu_op enclosing
    each on its thread: adds ``op_id`` and ``op_name`` (null when no op was running), and
    ``owner_id``/``owner_name``: the innermost enclosing op whose name is not in
    ``owner_skips`` (with no skips, the same op).

    The latest op that started at or before the point is found with an as-of join; when it
    had already ended, the climb goes up its ancestors to the first op still running.
    """
    tree = HostTree(events)
    # Only ops on the points' threads that started before the last point can be the answer.
    threads = points.select("pid", "tid").unique()
    last_ts = points["ts_ns"].max()
    starts = (
        events.lazy()
        .select("id", "pid", "tid", "ts_ns", "kind")
        .filter((pl.col("kind") == "cpu_op") & (pl.col("ts_ns") <= last_ts))
        .join(threads.lazy(), on=["pid", "tid"], how="semi")
        .select("pid", "tid", pl.col("ts_ns").alias("_op_ts"), pl.col("id").alias("_op"))
        .sort("_op_ts")
        .collect()
    )
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
    found = tree.climb_to_op(
        tree.pos(first["_op"].fill_null(-1).to_numpy()), first["ts_ns"].to_numpy()
    )
    owner = found
    if owner_skips:
        skipped = (
            events.lazy()
            .select("id", "name", "kind")
            .filter((pl.col("kind") == "cpu_op") & pl.col("name").cast(pl.String).is_in(list(owner_skips)))
            .collect()["id"]
            .to_numpy()
        )
        skip = np.zeros(tree.parent.size, dtype=bool)
        skip_pos = tree.pos(skipped)
        skip[skip_pos[skip_pos >= 0]] = True
        owner = tree.climb_to_op(found, first["ts_ns"].to_numpy(), skip)
    located = first.select("_row").with_columns(op_id=tree.ids(found), owner_id=tree.ids(owner))
    wanted = pl.concat([located["op_id"], located["owner_id"]]).drop_nulls().unique()
    names = (
        events.lazy()
        .select("id", "name")
        .filter(pl.col("id").is_in(wanted.implode()))
        .select("id", pl.col("name").cast(pl.String))
        .collect()
    )
    located = located.join(
        names.rename({"id": "op_id", "name": "op_name"}), on="op_id", how="left"
    ).join(names.rename({"id": "owner_id", "name": "owner_name"}), on="owner_id", how="left")
    return keyed.join(located, on="_row", how="left").sort("_row").drop("_row")


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


def run(trace: Trace, config: AnalysisConfig) -> OpsResult:
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
            ["gpu_total_ns", "host_total_ns", "name", "input_dims"],
            descending=[True, True, False, False],
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
