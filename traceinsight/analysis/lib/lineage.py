"""Climbing the host event tree by array lookups: an event's parent, grandparent, ... and
their names, for many events at once.

Joining a few thousand ids against every event of a large trace once per level costs a hash
table over hundreds of thousands of rows each time; the loader numbers events by row, so the
parent of an event is one array lookup. Traces whose ids are not row numbers (frames built by
hand) are mapped to rows by binary search instead.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from traceinsight.analysis.core.memo import per_trace
from traceinsight.trace.model import Trace

NONE = -1  # no such event (above the root, or an id the trace does not hold)


class _Tree:
    def __init__(self, events: pl.DataFrame) -> None:
        ids = events.get_column("id").to_numpy()
        self.dense = bool(ids.size == 0 or (ids[0] == 0 and ids[-1] == ids.size - 1 and np.all(np.diff(ids) == 1)))
        if not self.dense:
            self.order = np.argsort(ids, kind="stable")
            self.sorted_ids = ids[self.order]
        self.ids = ids
        self.parent_row = self.rows(events.get_column("parent").fill_null(NONE).to_numpy())
        self.names = events.get_column("name")

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """Row of each id (``NONE`` for ids the trace does not hold)."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.dense:
            return np.where((ids >= 0) & (ids < self.ids.size), ids, NONE)
        if self.sorted_ids.size == 0:
            return np.full(ids.size, NONE, dtype=np.int64)
        at = np.clip(np.searchsorted(self.sorted_ids, ids), 0, self.sorted_ids.size - 1)
        return np.where(self.sorted_ids[at] == ids, self.order[at], NONE)


def _tree(trace: Trace) -> _Tree:
    return per_trace(trace, "lineage_tree", lambda: _Tree(trace.events.select("id", "parent", "name")))


def climb(trace: Trace, ids: np.ndarray | pl.Series, levels: int) -> list[np.ndarray]:
    """Rows of each event and of its first ``levels`` ancestors: ``levels + 1`` arrays, the
    event's own rows first, ``NONE`` where the chain ends."""
    tree = _tree(trace)
    row = tree.rows(ids.to_numpy() if isinstance(ids, pl.Series) else ids)
    out = [row]
    for _ in range(levels):
        row = np.where(row >= 0, tree.parent_row[np.maximum(row, 0)], NONE)
        out.append(row)
    return out


def parent_rows(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """The parent's row of each row (``NONE`` at the root and at ``NONE``)."""
    tree = _tree(trace)
    return np.where(rows >= 0, tree.parent_row[np.maximum(rows, 0)], NONE)


def ids_at(trace: Trace, rows: np.ndarray) -> pl.Series:
    """The event ids at these rows (null at ``NONE``)."""
    tree = _tree(trace)
    values = tree.ids[np.maximum(rows, 0)] if tree.ids.size else np.zeros(rows.size, dtype=np.int64)
    return pl.Series(values, dtype=pl.Int64).scatter(np.flatnonzero(rows < 0), None)


def values_at(trace: Trace, rows: np.ndarray, column: str) -> pl.Series:
    """An event column's values at these rows (null at ``NONE``)."""
    values = trace.events.get_column(column)
    if values.len() == 0:
        return pl.Series(column, [None] * rows.size, dtype=values.dtype)
    return values.gather(np.maximum(rows, 0)).scatter(np.flatnonzero(rows < 0), None)


def names_at(trace: Trace, rows: np.ndarray) -> pl.Series:
    """The event names (strings) at these rows (null at ``NONE``)."""
    tree = _tree(trace)
    if tree.names.len() == 0:
        return pl.Series([None] * rows.size, dtype=pl.String)
    names = tree.names.gather(np.maximum(rows, 0)).cast(pl.String)
    return names.scatter(np.flatnonzero(rows < 0), None)
