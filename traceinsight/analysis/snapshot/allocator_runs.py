"""The trace replayed through the allocator (``allocator.py``) under several settings.

Without a memory limit the allocator never gives a segment back, so its small pool (requests up
to 1 MiB) and its large pool never meet: no block, segment or retry of one touches the other,
and each pool reserves only more as the trace goes. ``max_split_size_mb`` (at least 20 MiB in
PyTorch) only changes the large pool. So the small pool is replayed once per value of
``expandable_segments`` and the large pool once per setting, and each setting's figures are
put together from its two pools: reserved memory and the calls add up, and the peak of
allocated memory is the highest sum of the two pools' levels along the trace. A trace that ran
out of memory, or a replay under a limit, is replayed whole under each setting.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import polars as pl

from traceinsight.analysis.snapshot.allocator import (
    SMALL_BUFFER_BYTES,
    SMALL_SIZE_BYTES,
    AllocatorSettings,
    SimulatedRun,
    Simulator,
    _Block,
)

# actions, addrs, sizes, streams (``array('q')``: 8 bytes a value, where a list holds an int
# object per value)
Trace = tuple["array[int]", "array[int]", "array[int]", "array[int]"]
Seed = tuple[list[tuple[int, int, int, bool]], list[tuple[int, int]]]


def ints(values: np.ndarray) -> array[int]:
    """A numpy column as machine ints the replay iterates at C speed."""
    out: array[int] = array("q")
    out.frombytes(np.ascontiguousarray(values, dtype=np.int64).tobytes())
    return out


def simulate(
    actions: Sequence[int],
    addrs: Sequence[int],
    sizes: Sequence[int],
    streams: Sequence[int],
    settings: AllocatorSettings,
    seed: Seed | None = None,
    levels: array[int] | None = None,
) -> SimulatedRun:
    """Replay requests (action 1, by address and size), releases (action 0, by address) and
    requests that ran out of memory when recorded (action 2: tried, and let go if served, as
    the program stopped using it when it failed). ``seed``: the segments and blocks held
    before the trace began (see :meth:`Simulator.seed`); their blocks are then not among the
    requests. ``levels``: given, gets the allocated bytes after each event."""
    sim = Simulator(settings)
    live: dict[int, _Block] = {}
    if seed is not None:
        live = sim.seed(*seed)
    malloc, free = sim.malloc, sim.free
    # Two copies of the loop: the one without levels is the common one, and stays tight.
    if levels is None:
        for action, addr, size, stream in zip(actions, addrs, sizes, streams, strict=True):
            if action == 1:
                block = malloc(size, stream)
                if block is not None:
                    live[addr] = block
            elif action == 2:
                block = malloc(size, stream)
                if block is not None:
                    free(block)
            else:
                gone = live.pop(addr, None)
                if gone is not None:
                    free(gone)
        return sim.result()
    record = levels.append
    for action, addr, size, stream in zip(actions, addrs, sizes, streams, strict=True):
        if action == 1:
            block = malloc(size, stream)
            if block is not None:
                live[addr] = block
        elif action == 2:
            block = malloc(size, stream)
            if block is not None:
                free(block)
        else:
            gone = live.pop(addr, None)
            if gone is not None:
                free(gone)
        record(sim.allocated)
    return sim.result()


def simulate_each(trace: Trace, settings: list[AllocatorSettings]) -> list[SimulatedRun]:
    """One run per setting, as :func:`simulate` gives it, sharing the pools they share."""
    # A request that ran out of memory when recorded (action 2) is served and let go within
    # its event: the peak it makes is not among the levels after each event.
    shared = len(settings) > 1 and all(map(_pools_apart, settings)) and 2 not in trace[0]
    if not shared or not len(trace[0]):
        return [simulate(*trace, settings=s) for s in settings]
    small = _small_mask(trace)
    if small.all() or not small.any():
        return [simulate(*trace, settings=s) for s in settings]
    small_trace = _part(trace, small)
    large_trace = _part(trace, ~small)
    small_at = np.flatnonzero(small)
    large_at = np.flatnonzero(~small)
    del small
    small_runs: dict[bool, tuple[SimulatedRun, np.ndarray]] = {}
    runs = []
    for setting in settings:
        flag = setting.expandable_segments
        if flag not in small_runs:
            levels: array[int] = array("q")
            run = simulate(
                *small_trace, settings=AllocatorSettings(expandable_segments=flag), levels=levels
            )
            small_runs[flag] = run, np.frombuffer(levels, dtype=np.int64)
        small_run, small_levels = small_runs[flag]
        levels = array("q")
        large_run = simulate(*large_trace, settings=setting, levels=levels)
        large_levels = np.frombuffer(levels, dtype=np.int64)
        peak = _peak_of_sum(small_at, small_levels, large_at, large_levels)
        runs.append(_joined(setting, small_run, large_run, peak))
    return runs


def _pools_apart(settings: AllocatorSettings) -> bool:
    # A limit makes a failing request free cached blocks of every pool (and the garbage
    # collection threshold acts only under one); a split size within the small pool's segments
    # would reach into it.
    return settings.limit_bytes is None and (
        settings.max_split_bytes is None or settings.max_split_bytes > SMALL_BUFFER_BYTES
    )


def _small_mask(trace: Trace) -> np.ndarray:
    """Which events are the small pool's: a request by its size, a release by the last request
    made at its address (the block it gives back; one released with none before is dropped by
    either pool)."""
    actions, addrs, sizes, _ = (np.frombuffer(column, dtype=np.int64) for column in trace)
    frame = pl.DataFrame({"action": actions, "addr": addrs, "size": sizes}).with_row_index("at")
    made = pl.when(pl.col("action") == 1).then(pl.col("size") <= SMALL_SIZE_BYTES)
    small = frame.select(
        pl.when(pl.col("action") == 0)
        .then(made.forward_fill().over("addr", order_by="at"))
        .otherwise(pl.col("size") <= SMALL_SIZE_BYTES)
        .fill_null(False)
    ).to_series()
    return small.to_numpy()


def _part(trace: Trace, mask: np.ndarray) -> Trace:
    actions, addrs, sizes, streams = (
        ints(np.frombuffer(column, dtype=np.int64)[mask]) for column in trace
    )
    return actions, addrs, sizes, streams


def _peak_of_sum(
    small_at: np.ndarray, small_levels: np.ndarray, large_at: np.ndarray, large_levels: np.ndarray
) -> int:
    """The highest total of two pools' allocated bytes, each level holding from its event
    (positions in the whole trace) to the pool's next one."""

    def level_at(at: np.ndarray, levels: np.ndarray, where: np.ndarray) -> np.ndarray:
        before = np.searchsorted(at, where, side="right") - 1
        return np.where(before >= 0, levels[np.maximum(before, 0)], 0)

    at_small = small_levels + level_at(large_at, large_levels, small_at)
    at_large = large_levels + level_at(small_at, small_levels, large_at)
    return int(max(at_small.max(initial=0), at_large.max(initial=0)))


def _joined(
    settings: AllocatorSettings, small: SimulatedRun, large: SimulatedRun, peak_allocated: int
) -> SimulatedRun:
    # Without a limit nothing is given back: each pool's reserved memory only grows, and the
    # peak of the sum is the sum of the peaks.
    return replace(
        large,
        settings=settings,
        peak_reserved_bytes=small.peak_reserved_bytes + large.peak_reserved_bytes,
        peak_allocated_bytes=peak_allocated,
        end_reserved_bytes=small.end_reserved_bytes + large.end_reserved_bytes,
        segment_allocs=small.segment_allocs + large.segment_allocs,
        segment_maps=small.segment_maps + large.segment_maps,
        segment_frees=small.segment_frees + large.segment_frees,
        alloc_retries=small.alloc_retries + large.alloc_retries,
        ooms=small.ooms + large.ooms,
        first_oom_request_bytes=large.first_oom_request_bytes or small.first_oom_request_bytes,
    )
