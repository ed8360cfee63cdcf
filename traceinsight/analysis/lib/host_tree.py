"""The host event tree as numpy arrays: op parents, self times and the innermost op at an instant.

Shared by the analyses that place host instants (allocations, launches) under the op that
was running; see :class:`HostTree`.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import polars as pl

from traceinsight.trace.model import Trace
from traceinsight.trace.schema import GPU_KINDS, KINDS

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
            climb: np.ndarray = (cur >= 0) & ~ok
            return climb

        climbing = needs_climb()
        while climbing.any():  # one vectorised step per nesting level
            cur[climbing] = self.parent[cur[climbing]]
            climbing = needs_climb()
        return cur


def op_tree(trace: Trace, tree: HostTree | None = None) -> pl.DataFrame:
    """Every cpu_op with its op parent, self host time and whether it is top level.

    Columns: id, name (Categorical), input_dims, input_types, pid, tid, ts_ns, end_ns, dur_ns, step,
    op_parent, self_ns, top_level.
    """
    events = trace.events
    tree = tree or HostTree(events)
    ops = (
        events.lazy()
        .select("id", "name", "input_dims", "input_types", "pid", "tid", "ts_ns", "end_ns", "dur_ns", "step", "kind")
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
