"""Replay a :class:`StepGraph`: start and end of every node from durations (the longest path).

Both kinds of chains (host threads, device streams) have the form
``end[i] = max(end[i-1] + c[i], x[i])``, which numpy solves for all chains at once with a
cumulative maximum (``end[i] - C[i] = cummax(x[j] - C[j])``, ``C`` the prefix sum of ``c``).
What crosses chains (launches, sync waits, cross-stream waits) is fed in from the previous
round; rounds repeat until nothing moves. Every value only grows from round to round, so the
fixed point reached is the longest path; the number of rounds is the number of times the
binding path crosses between host and device, plus one.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    # per host node woken by another thread: its thread's replayed time from the wake to its end
    host_post_ns: np.ndarray | None = None


def _chain_solve(chain: np.ndarray, c: np.ndarray, x: np.ndarray) -> np.ndarray:
    """end[i] = max(end[i-1] + c[i], x[i]) per chain (nodes sorted by chain; NEG: no bound)."""
    if chain.size == 0:
        return x.copy()
    csum = np.cumsum(c)
    heads = np.flatnonzero(np.concatenate([[True], chain[1:] != chain[:-1]]))
    base = np.repeat(csum[heads] - c[heads], np.diff(np.append(heads, chain.size)))
    big_c = csum - base  # prefix of c within the chain
    bound = x > NEG // 2
    if not bound.any():
        return np.full(x.size, NEG, dtype=np.int64)
    v = x - big_c
    lo = int(v[bound].min()) - 1  # the value that stands for "no bound yet"
    v = np.where(bound, v, lo)
    span = int(v.max()) - lo + 1
    acc = np.maximum.accumulate((v - lo) + chain * span) - chain * span + lo
    out: np.ndarray = np.where(acc == lo, NEG, acc + big_c)
    return out


def post_wake_ns(graph: StepGraph, seg_run_ns: np.ndarray) -> np.ndarray:
    """Per host node woken by another thread, its thread's time from the wake to the node's end
    (its own segment included), from each segment's gap + duration ``seg_run_ns``."""
    after = graph.seg_after_wake if graph.seg_after_wake is not None else np.zeros(graph.seg_node.size, dtype=bool)
    weights = np.where(after, seg_run_ns, 0).astype(np.float64)
    out: np.ndarray = np.rint(np.bincount(graph.seg_node, weights=weights, minlength=graph.host_nodes)).astype(np.int64)
    return out


def replay(graph: StepGraph, durations: Durations | None = None) -> Timeline:
    d = durations or Durations.recorded(graph)
    n_seg = graph.seg_node.size
    run = d.seg_gap_ns + d.seg_dur_ns
    own = np.zeros(n_seg, dtype=bool)
    own[graph.host_seg] = True
    # pre: everything before the node's own segment since the previous node (its gap included)
    pre_w = np.where(own, d.seg_gap_ns, run).astype(np.float64)
    pre = np.rint(np.bincount(graph.seg_node, weights=pre_w, minlength=graph.host_nodes)).astype(np.int64)
    hdur = d.seg_dur_ns[graph.host_seg]
    c_host = pre + hdur
    sync_src = np.where(d.sync_on, graph.host_sync_src, -1)
    has_sync = sync_src >= 0
    head_x = np.where(graph.host_anchor_ns > NEG, graph.host_anchor_ns + c_host, NEG)
    lat = np.where(graph.gpu_launch_lat_ns > NEG, np.rint(graph.gpu_launch_lat_ns * d.launch_scale).astype(np.int64), NEG)
    has_launch = graph.gpu_launch >= 0
    gap = graph.gpu_stream_gap_ns
    gdur = d.gpu_dur_ns
    c_gpu = np.where(gap > NEG, gap, 0) + gdur
    wait_src = np.where(d.wait_on, graph.gpu_wait_src, -1)
    has_wait = wait_src >= 0
    wake_src = graph.host_wake_src if graph.host_wake_src is not None else np.full(graph.host_nodes, -1, dtype=np.int64)
    wake_off = graph.host_wake_off_ns if graph.host_wake_off_ns is not None else np.zeros(graph.host_nodes, dtype=np.int64)
    has_wake = wake_src >= 0
    post = post_wake_ns(graph, run)
    gpu_end = np.full(graph.gpu_nodes, NEG, dtype=np.int64)
    host_end = np.full(graph.host_nodes, NEG, dtype=np.int64)
    rounds = 0
    while True:
        rounds += 1
        sync_x = np.where(has_sync, gpu_end[np.where(has_sync, sync_src, 0)] + graph.host_sync_post_ns, NEG) if graph.gpu_nodes else np.full(graph.host_nodes, NEG)
        sync_x = np.where(sync_x <= NEG // 2, NEG, sync_x)
        wake_x = np.where(has_wake, host_end[np.where(has_wake, wake_src, 0)] + wake_off + post, NEG) if graph.host_nodes else np.full(0, NEG)
        wake_x = np.where(wake_x <= NEG // 2, NEG, wake_x)
        new_host_end = _chain_solve(graph.host_thread, c_host, np.maximum(np.maximum(head_x, sync_x), wake_x))
        prev_host_end = np.concatenate([[NEG], new_host_end[:-1]])
        host_start = np.where(graph.host_anchor_ns > NEG, graph.host_anchor_ns + pre, prev_host_end + pre)
        # a woken node's call starts when the wake lets it, its own time before its end
        host_start = np.where(has_wake & (wake_x > NEG), np.maximum(host_start, wake_x - hdur), host_start)
        launch_x = np.where(has_launch, host_start[np.where(has_launch, graph.gpu_launch, 0)] + lat, NEG) if graph.host_nodes else np.full(graph.gpu_nodes, NEG)
        wait_x = np.where(has_wait, gpu_end[np.where(has_wait, wait_src, 0)] + graph.gpu_wait_off_ns, NEG)
        wait_x = np.where(wait_x <= NEG // 2, NEG, wait_x)
        start_x = np.maximum(np.maximum(launch_x, wait_x), graph.gpu_anchor_ns)
        new_gpu_end = _chain_solve(graph.gpu_stream, c_gpu, np.where(start_x > NEG, start_x + gdur, NEG))
        done = np.array_equal(new_gpu_end, gpu_end) and np.array_equal(new_host_end, host_end)
        gpu_end, host_end = new_gpu_end, new_host_end
        if done or rounds >= MAX_ROUNDS:
            break
    return Timeline(
        host_start_ns=host_start,
        host_end_ns=host_end,
        host_pre_ns=pre,
        host_dur_ns=hdur,
        gpu_start_ns=gpu_end - gdur,
        gpu_end_ns=gpu_end,
        gpu_dur_ns=gdur,
        durations=d,
        rounds=rounds,
        host_post_ns=post,
    )


STEP_TIMES_SCHEMA = {"step": pl.Int64, "device_start_ns": pl.Int64, "device_end_ns": pl.Int64, "device_dur_ns": pl.Int64}


def step_times(graph: StepGraph, timeline: Timeline) -> pl.DataFrame:
    """Each step's device window on the replayed timeline, defined as ``sections/steps.py``
    defines it on the recorded one (host start, or the end of earlier steps' device work if
    later, to the end of the last device work launched in the step, or its host end)."""
    if graph.steps.height == 0:
        return pl.DataFrame(schema=STEP_TIMES_SCHEMA)
    work = (
        pl.DataFrame({"step": graph.gpu_step, "end": timeline.gpu_end_ns})
        .filter(pl.col("step") >= 0)
        .group_by("step")
        .agg(pl.col("end").max().alias("work_end"))
    )
    start_node = graph.steps["start_node"].fill_null(-1).to_numpy()
    end_node = graph.steps["end_node"].fill_null(-1).to_numpy()
    steps = graph.steps.select("step").with_columns(
        host_start=pl.Series(np.where(start_node >= 0, timeline.host_start_ns[start_node], NEG)),
        host_end=pl.Series(np.where(end_node >= 0, timeline.host_end_ns[end_node], NEG)),
    )
    steps = steps.join(work, on="step", how="left")
    earlier = pl.coalesce("work_end", "host_end").cum_max().shift(1)
    return (
        steps.with_columns(device_start_ns=pl.max_horizontal("host_start", earlier))
        .with_columns(device_end_ns=pl.max_horizontal("device_start_ns", pl.coalesce("work_end", "host_end")))
        .with_columns(device_dur_ns=pl.col("device_end_ns") - pl.col("device_start_ns"))
        .select(list(STEP_TIMES_SCHEMA))
    )


def span(graph: StepGraph, timeline: Timeline) -> tuple[int, int]:
    """[start, end) of everything replayed (for traces without steps)."""
    starts = [a.min() for a in (timeline.host_start_ns, timeline.gpu_start_ns) if a.size]
    ends = [a.max() for a in (timeline.host_end_ns, timeline.gpu_end_ns) if a.size]
    return (int(min(starts)), int(max(ends))) if starts else (0, 0)
