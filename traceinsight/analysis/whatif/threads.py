"""Wake edges between host threads: a thread that sat idle was woken by another one.

The trace does not link threads (the autograd engine's thread runs the backward pass the main
thread asked for; a worker waits for a queue), so the graph as built keeps each thread's idle
time between its spans as fixed host time: a change that makes the main thread earlier would
leave the other thread's work where it was. Here an untraced gap of at least ``WAKE_GAP_NS``
on a thread, during which a node on another thread ended, becomes a wake edge from the last
such node: the woken thread resumes as long after it as recorded, its work from there to the
woken node is replayed with its own durations, and the gap is dropped.
The self time of an annotation (``ProfilerStep#N``, ``record_function``) counts as such a gap:
the main thread waiting in ``loss.backward()`` for the autograd thread is untraced time inside
the step's annotation, not a gap between spans.
With recorded durations the replay is unchanged (the edge gives back the recorded end); with
changed ones the woken thread follows the thread that woke it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl

from traceinsight.analysis.whatif.graph import StepGraph, rows_of
from traceinsight.analysis.whatif.replay import Durations, Timeline, post_wake_ns

# Shorter gaps are the thread's own dispatch and Python time, not waiting.
WAKE_GAP_NS = 50_000


def with_wakes(graph: StepGraph, tl: Timeline) -> StepGraph:
    """``graph`` with wake edges (``tl``: its replay with recorded durations)."""
    if graph.host_nodes == 0 or np.unique(graph.host_thread).size < 2:
        return graph
    # idle pieces: untraced gaps before a segment, and annotations' own time (a segment)
    own = np.zeros(graph.seg_node.size, dtype=bool)
    long_seg = np.flatnonzero(graph.seg_dur_ns >= WAKE_GAP_NS)
    if long_seg.size:
        # owner id -> annotation?, by a search over the sorted ids (only the long segments)
        row = rows_of(graph.host_events["id"].to_numpy(), graph.seg_owner[long_seg])
        ann = (graph.host_events["kind"] == "user_annotation").to_numpy()
        own[long_seg[(row >= 0) & ann[np.maximum(row, 0)]]] = True
    is_gap = graph.seg_gap_ns >= WAKE_GAP_NS
    big = np.flatnonzero(is_gap | own)
    if big.size == 0:
        return graph
    # a segment that is both keeps its gap (the earlier piece) as the idle one
    in_seg = ~is_gap[big]
    node = graph.seg_node[big]
    thread = graph.host_thread[node]
    # recorded end of the idle piece, and its length
    woke_at = graph.seg_start_ns[big] + np.where(in_seg, graph.seg_dur_ns[big], 0)
    idle_ns = np.where(in_seg, graph.seg_dur_ns[big], graph.seg_gap_ns[big])
    # candidate wakers: every host node, by recorded end
    ends = pl.DataFrame({"src": np.arange(graph.host_nodes), "src_thread": graph.host_thread, "t": tl.host_end_ns})
    gaps = pl.DataFrame({"i": np.arange(big.size), "node": node, "thread": thread, "t": woke_at,
                         "gap_start": woke_at - idle_ns})
    # the last node of another thread that ended during the gap: a join per thread pair is
    # replaced by an as-of join over all ends excluding the gap's own thread
    found = []
    for th in np.unique(thread):
        mine = gaps.filter(pl.col("thread") == th).sort("t")
        others = ends.filter(pl.col("src_thread") != th).sort("t")
        if others.height == 0:
            continue
        found.append(mine.join_asof(others.select("t", "src", pl.col("t").alias("src_end")), on="t", strategy="backward"))
    if not found:
        return graph
    hits = pl.concat(found).filter(pl.col("src_end").is_not_null() & (pl.col("src_end") > pl.col("gap_start")))
    # one edge per node: its latest woken gap
    hits = hits.sort("t").group_by("node").agg(pl.col("src").last(), pl.col("i"), pl.col("i").last().alias("last"))
    if hits.height == 0:
        return graph
    src = np.full(graph.host_nodes, -1, dtype=np.int64)
    off = np.zeros(graph.host_nodes, dtype=np.int64)
    n = hits["node"].to_numpy()
    s = hits["src"].to_numpy()
    last = hits["last"].to_numpy()
    src[n] = s
    # the wake's own latency: from the waker's end to the end of the idle piece; the thread's
    # work after it (to the woken node's end) is replayed with its own durations
    off[n] = woke_at[last] - tl.host_end_ns[s]
    resume = np.full(graph.host_nodes, np.iinfo(np.int64).max, dtype=np.int64)
    resume[n] = graph.seg_start_ns[big[last]]
    after = graph.seg_start_ns >= resume[graph.seg_node]
    which = np.concatenate(hits["i"].to_list()) if hits.height else np.zeros(0, dtype=np.int64)
    gap, dur = graph.seg_gap_ns.copy(), graph.seg_dur_ns.copy()
    gap[big[which[~in_seg[which]]]] = 0
    dur[big[which[in_seg[which]]]] = 0
    stats = {**graph.stats, "wake_edges": int(n.size)}
    return replace(
        graph, seg_gap_ns=gap, seg_dur_ns=dur, host_wake_src=src, host_wake_off_ns=off, seg_after_wake=after, stats=stats
    )


def as_woken(graph: StepGraph, tl: Timeline) -> Timeline:
    """The recorded replay of the graph before its wake edges, as the woken graph's: the same
    times (each wake edge gives back its node's recorded end), with the host time before each
    node taken from the woken graph (its dropped gaps are the wake's). Saves a replay."""
    own = np.zeros(graph.seg_node.size, dtype=bool)
    own[graph.host_seg] = True
    weights = np.where(own, graph.seg_gap_ns, graph.seg_gap_ns + graph.seg_dur_ns).astype(np.float64)
    pre = np.rint(np.bincount(graph.seg_node, weights=weights, minlength=graph.host_nodes)).astype(np.int64)
    post = post_wake_ns(graph, graph.seg_gap_ns + graph.seg_dur_ns)
    return replace(tl, host_pre_ns=pre, host_post_ns=post, durations=Durations.recorded(graph))
