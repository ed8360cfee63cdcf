"""The host event tree: each event's parent and depth among the events of its thread."""

from __future__ import annotations

import numpy as np
import polars as pl


def nest(events: pl.DataFrame, rows: np.ndarray, parent: np.ndarray, depth: np.ndarray) -> int:
    """Write the parent and depth of each event in ``rows`` among the events of its (pid, tid).

    Events are ordered by start, longer first on ties. An event's depth is the number of
    events of its thread that started before it and had not yet ended; its parent is the
    latest earlier event one level up. Properly nested spans (the norm on a host thread)
    get exact answers; crossing spans get the nearest plausible parent and are counted
    (the return value). Sorted integer keys and binary searches over numpy arrays do the
    work, and temporaries are dropped as soon as they are used: this runs while the whole
    events frame is alive, at the loader's memory peak.
    """
    m = len(rows)
    if m == 0:
        return 0
    ts = events["ts_ns"].to_numpy()[rows]
    end = events["end_ns"].to_numpy()[rows]
    pid = events["pid"].to_numpy()[rows]
    tid = events["tid"].to_numpy()[rows]
    # ``rows`` come in id order, which is by start and longer first on ties: a stable sort
    # by thread keeps that order within each thread (polars: 2.5x quicker than np.lexsort).
    order = (
        pl.DataFrame({"pid": pid, "tid": tid})
        .select(pl.arg_sort_by(["pid", "tid"], maintain_order=True))
        .to_series()
        .to_numpy()
    )
    ids, ts, end, pid, tid = rows[order], ts[order], end[order], pid[order], tid[order]
    del order
    starts_thread = np.ones(m, dtype=bool)
    starts_thread[1:] = (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])
    del pid, tid
    group = np.cumsum(starts_thread) - 1
    first_of_group = np.flatnonzero(starts_thread)
    del starts_thread
    position = np.arange(m, dtype=np.int64)
    # k: how many events of the same thread started before this one.
    k = position - first_of_group[group]
    del first_of_group
    # ended: how many events of the same thread ended at or before this one started, from one
    # sorted array of (thread, end) keys; a zero-length event counted its own end: give it back.
    t0 = int(ts.min())
    span = int(end.max()) - t0 + 2
    if int(group.max() + 1) * span >= 2**62:  # pragma: no cover - centuries of ns × many threads
        raise OverflowError("trace spans too long a time for nesting keys")
    base = group * span
    end_keys = base + (end - t0)
    end_keys.sort()
    start_keys = base + (ts - t0)
    ended = np.searchsorted(end_keys, start_keys, side="right")
    ended -= np.searchsorted(end_keys, base, side="left")
    del end_keys, base
    # Zero-length events that start at the same instant as this one but come after it (ties are
    # ordered longer first) ended "at or before" its start without having started before it:
    # they must not count, or an op that begins with a 0 µs call loses a level (and its later
    # siblings take it as their parent after it ended).
    zero = end == ts
    zero_keys = start_keys[zero]  # ascending: positions are sorted by thread, then start
    same_instant = np.searchsorted(zero_keys, start_keys, side="right")
    zero_rank = np.zeros(m, dtype=np.int64)  # for a zero-length event: zero-length events up to and including it
    zero_rank[zero] = np.arange(1, int(zero.sum()) + 1) - np.searchsorted(zero_keys, zero_keys, side="left")
    same_instant -= np.searchsorted(zero_keys, start_keys, side="left") + zero_rank
    del start_keys, zero_keys, zero_rank
    level = k - (ended - same_instant) + zero
    del zero, same_instant
    del k, ended
    np.maximum(level, 0, out=level)
    # parent: the latest earlier event of the same thread one level up, found in one sorted
    # array of (thread, depth, position) keys.
    levels = int(level.max()) + 2
    wanted_level = group * levels + level - 1
    del group
    sorted_keys = (wanted_level + 1) * m + position
    sorted_keys.sort()
    hit = np.searchsorted(sorted_keys, wanted_level * m + position, side="left") - 1
    del position
    found = (level > 0) & (hit >= 0)
    hit_key = sorted_keys[np.where(found, hit, 0)]
    del sorted_keys, hit
    found &= hit_key // m == wanted_level
    del wanted_level
    parent_pos = np.where(found, hit_key % m, 0)
    del hit_key
    improper = int(np.count_nonzero(found & (end[parent_pos] < end)))
    parent[ids] = np.where(found, ids[parent_pos], -1)
    depth[ids] = level
    return improper
