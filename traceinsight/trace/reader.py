"""Bytes → columns: decode a Kineto / Chrome trace file into raw polars frames.

The decode is typed (msgspec) and done in chunks of the ``traceEvents`` array so that the
Python objects of only one chunk are alive at a time; each chunk becomes a polars frame
straight away. Events are a union tagged by ``ph``, so each phase gets only the fields it
needs, and their args are decoded in the same pass into one struct that names only the
fields the analyses use; the event's cat then picks which of them become columns.

The work is split by job: :mod:`.source` opens the file, :mod:`.chunking` finds the events
array and cuts it, :mod:`.events` holds the structs, :mod:`.lenient` decodes a piece (loosely
when it must) and :mod:`.columns` turns the events into frames.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from traceinsight.errors import TraceFormatError
from traceinsight.trace.chunking import (
    NoFastPath,
    decode_chunks,
    find_events,
    plan_pieces,
    split_top_level,
)
from traceinsight.trace.columns import (
    MEMORY_SCHEMA,
    ChunkState,
    counters_frame,
    finish_durations,
    merge_pieces,
)
from traceinsight.trace.parallel import (
    PieceFailed,
    PieceResult,
    consume_piece,
    decode_parallel,
    helpers_for,
)
from traceinsight.trace.source import Buffer, read_bytes, release_pages, restore_discarded

__all__ = ["Buffer", "RawTrace", "read_bytes", "read_trace"]


@dataclass
class RawTrace:
    """What the reader hands to the linker: header fields and unlinked frames (float µs)."""

    header: dict[str, Any]
    durations: pl.DataFrame  # ph X and matched B/E, columns of _RAW_DTYPES
    counters: pl.DataFrame  # ts (µs), pid, name, series, value
    memory: pl.DataFrame  # ts (µs), pid, tid, memory arg columns
    process_names: dict[int, str] = field(default_factory=dict)
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)
    pid_labels: dict[int, str] = field(default_factory=dict)
    phase_counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def take_durations(self) -> pl.DataFrame:
        """The durations frame, leaving an empty one behind (the caller becomes its owner)."""
        taken, self.durations = self.durations, self.durations.clear()
        return taken


def read_trace(path: Path, data: Buffer, *, workers: int | None = None) -> RawTrace:
    """Decode ``data`` (the bytes of ``path``) into a :class:`RawTrace`.

    ``workers``: processes that decode (1: this one alone); None: one per core for a big
    plain file (see :mod:`.parallel`)."""
    warnings: list[str] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()  # Millions of short-lived objects; the cyclic GC only slows the decode.
    try:
        found = find_events(data)
        try:
            if found is None:
                raise NoFastPath
            header, lo = found
            state, parts = _decode_all(path, data, header, lo, None, warnings, workers)
        except NoFastPath:
            # Unusual layout or broken JSON: validate the whole file first; that pass names
            # the problem precisely, and gives the array's end for a careful decode.
            warnings.clear()
            restore_discarded(data)
            header, lo, hi = split_top_level(path, data)
            release_pages(data, 0, len(data))
            state, parts = _decode_all(path, data, header, lo, hi, warnings, workers)
    finally:
        if gc_was_enabled:
            gc.enable()
    durations = finish_durations(parts, state)
    if durations.height == 0 and not state.counter_rows and not state.memory_parts:
        raise TraceFormatError(path, "traceEvents has no events with a duration")
    raw = RawTrace(
        header=header,
        durations=durations,
        counters=counters_frame(state.counter_rows),
        memory=pl.concat(state.memory_parts)
        if state.memory_parts
        else pl.DataFrame(schema=MEMORY_SCHEMA),
        process_names=state.process_names,
        thread_names=state.thread_names,
        pid_labels=state.pid_labels,
        phase_counts=dict(state.phase_counts),
        warnings=warnings,
    )
    return raw


def _decode_all(
    path: Path,
    data: Buffer,
    header: dict[str, Any],
    lo: int,
    hi: int | None,
    warnings: list[str],
    workers: int | None,
) -> tuple[ChunkState, list[pl.DataFrame]]:
    plan = plan_pieces(data, lo, hi)
    pieces: list[PieceResult] | None = None
    helpers = helpers_for(plan, data, None if workers is None else workers - 1)
    if helpers:
        try:
            pieces = decode_parallel(path, data, plan, header, helpers)
        except PieceFailed:
            pieces = None  # decoded again below, where a bad cut is recovered from
            restore_discarded(data)
    if pieces is None:
        pieces = [consume_piece(events) for events in decode_chunks(path, data, plan, header)]
    return merge_pieces(pieces, warnings)
