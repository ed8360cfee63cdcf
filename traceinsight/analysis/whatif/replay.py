"""Replay a :class:`StepGraph`: start and end of every node from durations (the longest path).

Both kinds of chains (host threads, device streams) have the form
``end[i] = max(end[i-1] + c[i], x[i])``, which numpy solves for all chains at once with a
cumulative maximum (``end[i] - C[i] = cummax(x[j] - C[j])``, ``C`` the prefix sum of ``c``).
What crosses chains (launches, sync waits, cross-stream waits) is fed in from the previous
round; rounds repeat until nothing moves. Every value only grows from round to round, so the
fixed point reached is the longest path; the number of rounds is the number of times the
binding path crosses between host and device, plus one. A trace whose binding path crosses at
every sync would need that many rounds over the whole trace (its length times its syncs): such
a replay goes on in blocks of time, each settled before the next (see :func:`replay`), which
keeps the work linear in the trace.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from traceinsight.analysis.whatif.graph import NEG, StepGraph

MAX_ROUNDS = 100_000


@dataclass(frozen=True)
class Durations:
    """What a replay varies: host segment times, device work times, and which waits hold.

    ``sync_on[i]`` false: host node ``i`` no longer waits for the device; ``wait_on[k]``
    false: device node ``k`` no longer waits for another stream; ``launch_scale`` multiplies
    every launch latency (collapsed launches set it near 0).
    """

    seg_dur_ns: np.ndarray
    seg_gap_ns: np.ndarray
    gpu_dur_ns: np.ndarray
    sync_on: np.ndarray
    wait_on: np.ndarray
    launch_scale: float = 1.0

    @staticmethod
    def recorded(graph: StepGraph) -> Durations:
        return Durations(
            seg_dur_ns=graph.seg_dur_ns.copy(),
            seg_gap_ns=graph.seg_gap_ns.copy(),
            gpu_dur_ns=graph.gpu_dur_ns.copy(),
            sync_on=graph.host_sync_src >= 0,
            wait_on=graph.gpu_wait_src >= 0,
        )


@dataclass(frozen=True)
class Timeline:
    """Replayed start/end of every node, and the pieces the critical path reads."""

    host_start_ns: np.ndarray
    host_end_ns: np.ndarray
    host_pre_ns: np.ndarray
    host_dur_ns: np.ndarray
    gpu_start_ns: np.ndarray
    gpu_end_ns: np.ndarray
    gpu_dur_ns: np.ndarray
    durations: Durations
    rounds: int
    # the work the rounds did: nodes solved, summed over rounds (linear in the trace)
    node_rounds: int = 0
    # per host node woken by another thread: its thread's replayed time from the wake to its end
    host_post_ns: np.ndarray | None = None


def post_wake_ns(graph: StepGraph, seg_run_ns: np.ndarray) -> np.ndarray:
    """Per host node woken by another thread, its thread's time from the wake to the node's end
    (its own segment included), from each segment's gap + duration ``seg_run_ns``."""
    after = graph.seg_after_wake if graph.seg_after_wake is not None else np.zeros(graph.seg_node.size, dtype=bool)
    weights = np.where(after, seg_run_ns, 0).astype(np.float64)
    out: np.ndarray = np.rint(np.bincount(graph.seg_node, weights=weights, minlength=graph.host_nodes)).astype(np.int64)
    return out


@dataclass(frozen=True)
class _Fixed:
    """What one replay's rounds read: the per-node constants of the recurrences."""

    c_host: np.ndarray  # host time from the previous node's end to this one's (pre + own)
    pre: np.ndarray
    hdur: np.ndarray
    head_x: np.ndarray  # thread heads: anchor + c_host
    is_head: np.ndarray
    sync_src: np.ndarray
    wake_src: np.ndarray
    wake_off: np.ndarray
    post: np.ndarray
    lat: np.ndarray
    c_gpu: np.ndarray  # stream gap + own time
    gdur: np.ndarray
    wait_src: np.ndarray
    gpu_head: np.ndarray


def _fixed(graph: StepGraph, d: Durations) -> _Fixed:
    n_seg = graph.seg_node.size
    run = d.seg_gap_ns + d.seg_dur_ns
    own = np.zeros(n_seg, dtype=bool)
    own[graph.host_seg] = True
    # pre: everything before the node's own segment since the previous node (its gap included)
    pre_w = np.where(own, d.seg_gap_ns, run).astype(np.float64)
    pre = np.rint(np.bincount(graph.seg_node, weights=pre_w, minlength=graph.host_nodes)).astype(np.int64)
    hdur = d.seg_dur_ns[graph.host_seg]
    c_host = pre + hdur
    gap = graph.gpu_stream_gap_ns
    h_head = np.ones(graph.host_nodes, dtype=bool)
    h_head[1:] = graph.host_thread[1:] != graph.host_thread[:-1]
    g_head = np.ones(graph.gpu_nodes, dtype=bool)
    g_head[1:] = graph.gpu_stream[1:] != graph.gpu_stream[:-1]
    return _Fixed(
        c_host=c_host,
        pre=pre,
        hdur=hdur,
        head_x=np.where(graph.host_anchor_ns > NEG, graph.host_anchor_ns + c_host, NEG),
        is_head=h_head,
        sync_src=np.where(d.sync_on, graph.host_sync_src, -1),
        wake_src=graph.host_wake_src if graph.host_wake_src is not None else np.full(graph.host_nodes, -1, dtype=np.int64),
        wake_off=graph.host_wake_off_ns if graph.host_wake_off_ns is not None else np.zeros(graph.host_nodes, dtype=np.int64),
        post=post_wake_ns(graph, run),
        lat=np.where(graph.gpu_launch_lat_ns > NEG, np.rint(graph.gpu_launch_lat_ns * d.launch_scale).astype(np.int64), NEG),
        c_gpu=np.where(gap > NEG, gap, 0) + d.gpu_dur_ns,
        gdur=d.gpu_dur_ns,
        wait_src=np.where(d.wait_on, graph.gpu_wait_src, -1),
        gpu_head=g_head,
    )


@dataclass(frozen=True)
class _Link:
    """``values[src] + offset`` for fixed sources and offsets (NEG where a row has no source or
    its source has no value yet): the cross-chain edges of a round, gathered only where they are."""

    at: np.ndarray  # rows that have a source
    src: np.ndarray
    add: np.ndarray
    size: int

    @staticmethod
    def make(src: np.ndarray, offset: np.ndarray) -> _Link:
        at = np.flatnonzero(src >= 0)
        return _Link(at=at, src=src[at], add=np.broadcast_to(offset, src.shape)[at], size=src.size)

    def of(self, values: np.ndarray) -> np.ndarray:
        out = np.full(self.size, NEG, dtype=np.int64)
        if self.at.size:
            got = values[self.src]
            out[self.at] = np.where(got > NEG // 2, got + self.add, NEG)
        return out


@dataclass(frozen=True)
class _Chains:
    """The parts of ``end[i] = max(end[i-1] + c[i], x[i])`` per chain that do not change
    between rounds: with ``C`` the prefix sum of ``c`` in the chain, ``end[i] - C[i]`` is the
    running maximum of ``x[j] - C[j]``, one cumulative maximum over every chain at once."""

    chain: np.ndarray
    big_c: np.ndarray  # prefix of c within the chain

    @staticmethod
    def make(chain: np.ndarray, c: np.ndarray) -> _Chains:
        if chain.size == 0:
            return _Chains(chain=chain.astype(np.int64), big_c=c.astype(np.int64))
        csum = np.cumsum(c)
        heads = np.flatnonzero(np.concatenate([[True], chain[1:] != chain[:-1]]))
        base = np.repeat(csum[heads] - c[heads], np.diff(np.append(heads, chain.size)))
        # chains renumbered from 0 so that the offsets below stay small
        ids = np.cumsum(np.concatenate([[True], chain[1:] != chain[:-1]])) - 1
        return _Chains(chain=ids.astype(np.int64), big_c=(csum - base).astype(np.int64))

    def solve(self, x: np.ndarray) -> np.ndarray:
        if x.size == 0:
            return x.copy()
        bound = x > NEG // 2
        if not bound.any():
            return np.full(x.size, NEG, dtype=np.int64)
        v = x - self.big_c
        lo = int(v[bound].min()) - 1
        v = np.where(bound, v, lo)
        span = int(v.max()) - lo + 1
        shift = self.chain * span
        acc = np.maximum.accumulate((v - lo) + shift) - shift + lo
        out: np.ndarray = np.where(acc == lo, NEG, acc + self.big_c)
        return out


def _host_start(graph: StepGraph, f: _Fixed, idx: np.ndarray) -> tuple[np.ndarray, _Link, _Link]:
    """How host nodes ``idx`` start: a fixed start (thread heads: anchor + the host time before
    them, else NEG), after the previous node on the thread (a link with the host time before),
    and no earlier than the wake lets their own time end (a link)."""
    anchored = graph.host_anchor_ns[idx] > NEG
    fixed = np.where(anchored, graph.host_anchor_ns[idx] + f.pre[idx], NEG)
    prev = _Link.make(np.where(anchored | f.is_head[idx], -1, idx - 1), f.pre[idx])
    wake = _Link.make(f.wake_src[idx], f.wake_off[idx] + f.post[idx] - f.hdur[idx])
    return fixed, prev, wake


def _carry(idx: np.ndarray, is_head: np.ndarray, ends: np.ndarray, c: np.ndarray) -> np.ndarray:
    """For nodes ``idx`` (a block, each chain's nodes contiguous): the bound from the previous
    node of the chain where that node is outside the block (solved in an earlier one)."""
    outside = ~is_head[idx]
    if idx.size:
        outside[1:] &= idx[1:] - 1 != idx[:-1]
    return _Link.make(np.where(outside, idx - 1, -1), c[idx]).of(ends)


def _solve(
    graph: StepGraph, f: _Fixed, hb: np.ndarray, gb: np.ndarray, host_end: np.ndarray, gpu_end: np.ndarray,
    work: list[int], max_rounds: int = MAX_ROUNDS,
) -> tuple[int, bool]:
    """Rounds over host nodes ``hb`` and device nodes ``gb`` until nothing moves (or
    ``max_rounds``), every other node's end held as it is in ``host_end``/``gpu_end`` (updated
    in place; ``work[0]`` counts the nodes solved). Returns the rounds and whether nothing
    moved in the last one."""
    host_chains = _Chains.make(graph.host_thread[hb], f.c_host[hb])
    gpu_chains = _Chains.make(graph.gpu_stream[gb], f.c_gpu[gb])
    gdur = f.gdur[gb]
    head_x = np.maximum(f.head_x[hb], _carry(hb, f.is_head, host_end, f.c_host))
    sync = _Link.make(f.sync_src[hb], graph.host_sync_post_ns[hb])
    wake = _Link.make(f.wake_src[hb], f.wake_off[hb] + f.post[hb])
    # a launch edge: the launching node's start plus the launch latency
    launch = graph.gpu_launch[gb]
    has_launch = launch >= 0
    l_fixed, l_prev, l_wake = _host_start(graph, f, np.where(has_launch, launch, 0))
    l_fixed = np.where(has_launch, l_fixed, NEG)
    lat = f.lat[gb]
    wait = _Link.make(f.wait_src[gb], graph.gpu_wait_off_ns[gb])
    base_x = np.maximum(graph.gpu_anchor_ns[gb], np.where(has_launch & (l_fixed > NEG), l_fixed + lat, NEG))
    gpu_carry = _carry(gb, f.gpu_head, gpu_end, f.c_gpu)
    rounds = 0
    while True:
        rounds += 1
        work[0] += hb.size + gb.size
        x = np.maximum(np.maximum(head_x, sync.of(gpu_end)), wake.of(host_end))
        new_host = host_chains.solve(x)
        moved = not np.array_equal(new_host, host_end[hb])
        host_end[hb] = new_host
        starts = np.maximum(l_prev.of(host_end), l_wake.of(host_end)) if graph.host_nodes else np.full(gb.size, NEG, dtype=np.int64)
        launch_x = np.where(has_launch & (starts > NEG // 2), starts + lat, NEG)
        start_x = np.maximum(np.maximum(launch_x, wait.of(gpu_end)), base_x)
        new_gpu = gpu_chains.solve(np.maximum(np.where(start_x > NEG, start_x + gdur, NEG), gpu_carry))
        moved = moved or not np.array_equal(new_gpu, gpu_end[gb])
        gpu_end[gb] = new_gpu
        if not moved or rounds >= max_rounds:
            return rounds, not moved


# Rounds over the whole graph before a replay goes on in blocks.
WHOLE_ROUNDS = 24
# Nodes per block of a blocked replay: a round's fixed cost (a few dozen array operations) is
# paid once per block and crossing, its per-node cost once per node and round.
BLOCK_NODES = 4096


def _blocks(graph: StepGraph) -> list[tuple[np.ndarray, np.ndarray]]:
    """Host and device nodes in blocks of the graph's order (each chain's nodes contiguous)."""
    assert graph.host_order_ns is not None and graph.gpu_order_ns is not None
    keys = np.sort(np.concatenate([graph.host_order_ns, graph.gpu_order_ns]))
    bounds = np.unique(keys[BLOCK_NODES::BLOCK_NODES])
    h_block = np.searchsorted(bounds, graph.host_order_ns, side="right")
    g_block = np.searchsorted(bounds, graph.gpu_order_ns, side="right")
    h_sorted, g_sorted = np.argsort(h_block, kind="stable"), np.argsort(g_block, kind="stable")
    edges = np.arange(bounds.size + 2)
    h_cut = np.searchsorted(h_block[h_sorted], edges)
    g_cut = np.searchsorted(g_block[g_sorted], edges)
    return [(h_sorted[h_cut[b]:h_cut[b + 1]], g_sorted[g_cut[b]:g_cut[b + 1]]) for b in range(bounds.size + 1)]


def replay(graph: StepGraph, durations: Durations | None = None) -> Timeline:
    """Start and end of every node with ``durations`` (the recorded ones by default).

    Rounds over the whole graph until nothing moves. A graph with an order (:func:`with_order`)
    that has not settled after ``WHOLE_ROUNDS`` goes on block after block of that order: an
    edge never runs from a later block to an earlier one, so each block's rounds see the final
    ends of the blocks before it, and the rounds a chain of syncs needs are paid on one block
    at a time instead of on the whole trace (linear in the trace, not in trace × syncs). Every
    value a round computes is the length of some path, so it never overshoots: one round over
    the whole graph then checks that nothing moves, and goes on until nothing does where the
    order did not hold."""
    d = durations or Durations.recorded(graph)
    f = _fixed(graph, d)
    host_end = np.full(graph.host_nodes, NEG, dtype=np.int64)
    gpu_end = np.full(graph.gpu_nodes, NEG, dtype=np.int64)
    every = (np.arange(graph.host_nodes), np.arange(graph.gpu_nodes))
    ordered = graph.host_order_ns is not None and graph.gpu_order_ns is not None
    blocked = ordered and graph.host_nodes + graph.gpu_nodes > 2 * BLOCK_NODES
    # Most traces settle in a few rounds over the whole graph; one whose binding path crosses
    # between host and device at every sync would need a round per crossing over all of it.
    work = [0]
    rounds, done = _solve(graph, f, *every, host_end, gpu_end, work, max_rounds=WHOLE_ROUNDS if blocked else MAX_ROUNDS)
    if not done:
        for hb, gb in _blocks(graph):
            rounds += _solve(graph, f, hb, gb, host_end, gpu_end, work)[0]
        rounds += _solve(graph, f, *every, host_end, gpu_end, work)[0]
    fixed, prev, wake = _host_start(graph, f, np.arange(graph.host_nodes))
    host_start = np.maximum(np.maximum(fixed, prev.of(host_end)), wake.of(host_end))
    return Timeline(
        host_start_ns=host_start,
        host_end_ns=host_end,
        host_pre_ns=f.pre,
        host_dur_ns=f.hdur,
        gpu_start_ns=gpu_end - f.gdur,
        gpu_end_ns=gpu_end,
        gpu_dur_ns=f.gdur,
        durations=d,
        rounds=rounds,
        node_rounds=work[0],
        host_post_ns=f.post,
    )


def _chain_cummax(chain: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Running maximum of ``values`` within each chain (nodes sorted by chain)."""
    if values.size == 0:
        return values.copy()
    known = values > NEG // 2
    if not known.any():
        return values.copy()
    values = np.where(known, values, values[known].min())
    lo = int(values.min())
    span_ = int(values.max()) - lo + 1
    out: np.ndarray = np.maximum.accumulate((values - lo) + chain * span_) - chain * span_ + lo
    return out


def with_order(graph: StepGraph, tl: Timeline) -> StepGraph:
    """``graph`` with the order blocked replays follow: each node's end on ``tl``, its replay
    with recorded durations (a fixed point, where every edge runs forward in time), made
    non-decreasing along each chain so that a block holds a contiguous run of every chain."""
    return replace(
        graph,
        host_order_ns=_chain_cummax(graph.host_thread, tl.host_end_ns),
        gpu_order_ns=_chain_cummax(graph.gpu_stream, tl.gpu_end_ns),
    )


STEP_TIMES_SCHEMA = {"step": pl.Int64, "device_start_ns": pl.Int64, "device_end_ns": pl.Int64, "device_dur_ns": pl.Int64}


def step_times(graph: StepGraph, timeline: Timeline) -> pl.DataFrame:
    """Each step's device window on the replayed timeline, defined as ``sections/steps.py``
    defines it on the recorded one (host start, or the end of earlier steps if later, to the
    end of the last device work launched in the step or its host end, whichever is later).

    In arrays: the findings read it after every replay, and the nodes of each step are
    grouped once per graph (``_step_nodes``)."""
    if graph.steps.height == 0:
        return pl.DataFrame(schema=STEP_TIMES_SCHEMA)
    order, starts, numbers = _step_nodes(graph)
    # a step without a number (none is expected) matches no device work, as in a join
    step_no = graph.steps["step"].cast(pl.Int64).fill_null(-1).to_numpy()
    work_end = np.maximum.reduceat(timeline.gpu_end_ns[order], starts) if order.size else np.zeros(0, dtype=np.int64)
    pos = np.minimum(np.searchsorted(numbers, step_no), max(numbers.size - 1, 0))
    has_work = (numbers[pos] == step_no) if numbers.size else np.zeros(step_no.size, dtype=bool)
    start_node = graph.steps["start_node"].fill_null(-1).to_numpy()
    end_node = graph.steps["end_node"].fill_null(-1).to_numpy()
    host_start = np.where(start_node >= 0, timeline.host_start_ns[start_node], NEG)
    host_end = np.where(end_node >= 0, timeline.host_end_ns[end_node], NEG)
    # the step ends when both its device work and its host code have (lib/timeline.py)
    last = np.maximum(np.where(has_work, work_end[pos] if numbers.size else NEG, host_end), host_end)
    # the end of earlier steps' device work: nothing before the first step
    earlier = np.concatenate([[NEG], np.maximum.accumulate(last)[:-1]])
    device_start = np.maximum(host_start, earlier)
    device_end = np.maximum(device_start, last)
    return pl.DataFrame(
        {"step": graph.steps["step"], "device_start_ns": device_start, "device_end_ns": device_end, "device_dur_ns": device_end - device_start},
        schema=STEP_TIMES_SCHEMA,
    )


def _step_nodes(graph: StepGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Device nodes launched in a step, ordered by step; where each step's run starts; the steps."""
    key = ("step_nodes",)
    found = graph.memo.get(key)
    if found is None:
        nodes = np.flatnonzero(graph.gpu_step >= 0)
        steps = graph.gpu_step[nodes]
        order = nodes[np.argsort(steps, kind="stable")]
        numbers, starts = np.unique(graph.gpu_step[order], return_index=True)
        found = graph.memo[key] = (order, starts, numbers)
    out: tuple[np.ndarray, np.ndarray, np.ndarray] = found
    return out


def span(graph: StepGraph, timeline: Timeline) -> tuple[int, int]:
    """[start, end) of everything replayed (for traces without steps)."""
    starts = [a.min() for a in (timeline.host_start_ns, timeline.gpu_start_ns) if a.size]
    ends = [a.max() for a in (timeline.host_end_ns, timeline.gpu_end_ns) if a.size]
    return (int(min(starts)), int(max(ends))) if starts else (0, 0)
