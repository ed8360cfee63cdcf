"""Snapshot pickle → :class:`MemorySnapshot`: columns built per field, stacks interned once.

The unpickler has to build a Python object per event; after that, each field becomes a column
with one ``map`` over the events (C speed, no per-event Python statements besides the stack
key), and each device's list is dropped as soon as its columns exist, so the Python objects
and the frames are not both held for the whole trace.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from operator import itemgetter, methodcaller
from pathlib import Path
from typing import Any

import polars as pl

from traceinsight.errors import TraceFormatError
from traceinsight.trace.snapshot.model import (
    BLOCK_SCHEMA,
    EVENT_SCHEMA,
    FRAME_SCHEMA,
    SEGMENT_SCHEMA,
    Layout,
    MemorySnapshot,
)
from traceinsight.trace.snapshot.unpickle import read_pickle

_FRAME_KEY = itemgetter("filename", "line", "name")
_FRAMES = methodcaller("get", "frames")
_IDENTITY_CACHE = 200_000

# Snapshot key → column, for the fields that are copied as they are.
_SEGMENT_FIELDS = {
    "device": "device",
    "address": "address",
    "total_size": "total_size_bytes",
    "allocated_size": "allocated_bytes",
    "active_size": "active_bytes",
    "requested_size": "requested_bytes",
    "stream": "stream",
    "segment_type": "segment_type",
    "is_expandable": "is_expandable",
}
_EVENT_FIELDS = {
    "action": "action",
    "addr": "addr",
    "size": "size_bytes",
    "stream": "stream",
    "time_us": "time_us",
    "device_free": "device_free_bytes",
}


class _Stacks:
    """Interns call stacks: equal stacks get one id, their frames are stored once."""

    def __init__(self) -> None:
        self.ids: dict[tuple[tuple[Any, Any, Any], ...], int] = {}
        # PyTorch's pickles share each distinct frame dict between the stacks that hold it (and
        # pickle keeps that sharing; sample_traces/memory/h200/leak.pickle, torch 2.11: 661 frames
        # in 152 events are 10 dicts, in 97 lists, neighbours sharing theirs), so a stack is first looked up by the identities of its
        # frame dicts, which costs far less than reading three fields of each. Identities are
        # only valid while the objects live: ``forget_identities`` is called before the objects
        # seen so far may be freed.
        self._by_identity: dict[tuple[int, ...], int] = {}

    def ids_of(self, entries: Iterable[dict[str, Any]]) -> list[int | None]:
        # One loop with everything local: it runs once per event, millions of times.
        by_identity = self._by_identity
        known = by_identity.get
        found: list[int | None] = []
        append = found.append
        last_frames: object = None
        last_id: int | None = None
        for frames in map(_FRAMES, entries):
            if not frames:
                append(None)
                continue
            if frames is last_frames:  # one list shared by neighbours (a free's two events)
                append(last_id)
                continue
            identity = tuple(map(id, frames))
            stack_id = known(identity)
            if stack_id is None:
                stack_id = self.ids.setdefault(tuple(map(_FRAME_KEY, frames)), len(self.ids))
                if len(by_identity) >= _IDENTITY_CACHE:
                    by_identity.clear()  # frames not shared (hand-written pickles): keep it small
                by_identity[identity] = stack_id
            last_frames, last_id = frames, stack_id
            append(stack_id)
        return found

    def forget_identities(self) -> None:
        self._by_identity.clear()

    def frame(self) -> pl.DataFrame:
        stack_ids: list[int] = []
        depths: list[int] = []
        frames: list[tuple[Any, Any, Any]] = []
        for key, stack_id in self.ids.items():
            stack_ids.extend([stack_id] * len(key))
            depths.extend(range(len(key)))
            frames.extend(key)
        filenames, lines, names = (
            (list(c) for c in zip(*frames, strict=True)) if frames else ([], [], [])
        )
        return pl.DataFrame(
            {
                "stack_id": stack_ids,
                "depth": depths,
                "filename": filenames,
                "line": lines,
                "name": names,
            },
            schema=FRAME_SCHEMA,
            strict=False,
        )


def load_memory_snapshot(path: str | os.PathLike[str]) -> MemorySnapshot:
    """Read a ``_dump_snapshot`` pickle (protocol up to 5, current or older layout) safely:
    a pickle that asks for any class or function is refused, nothing in it is run."""
    file_path = Path(path)
    data = read_pickle(file_path)
    try:
        return _snapshot(file_path, data)
    except (KeyError, TypeError, ValueError, AttributeError, pl.exceptions.PolarsError) as exc:
        raise TraceFormatError(
            file_path, f"not a memory snapshot: {type(exc).__name__}: {exc}"
        ) from None


def _snapshot(path: Path, data: Any) -> MemorySnapshot:
    layout: Layout
    traces: list[Any]
    settings: Any
    if isinstance(data, list):
        layout, segments, traces, settings = "segments-only", data, [], {}
    elif isinstance(data, dict) and isinstance(data.get("segments"), list):
        layout = "current"
        segments = data["segments"]
        traces = data.get("device_traces") or []
        settings = data.get("allocator_settings") or {}
        if not isinstance(traces, list):
            raise TraceFormatError(path, "not a memory snapshot: device_traces is not a list")
    else:
        kind = type(data).__name__
        keys = f" with keys {', '.join(map(str, list(data)[:5]))}" if isinstance(data, dict) else ""
        raise TraceFormatError(
            path,
            f"not a memory snapshot: the pickle holds a {kind}{keys}, not segments and device_traces",
        )
    stacks = _Stacks()
    # The trace first: stack ids then follow the order the allocations were made in.
    event_frame = _events(traces, stacks)
    segment_frame, block_frame = _segments(segments, stacks)
    return MemorySnapshot(
        path=str(path),
        file_bytes=path.stat().st_size,
        layout=layout,
        segments=segment_frame,
        blocks=block_frame,
        events=event_frame,
        frames=stacks.frame(),
        allocator_settings=dict(settings) if isinstance(settings, dict) else {},
    )


def _columns(entries: list[dict[str, Any]], fields: dict[str, str]) -> dict[str, list[Any]]:
    return {column: list(map(methodcaller("get", key), entries)) for key, column in fields.items()}


def _segments(segments: list[dict[str, Any]], stacks: _Stacks) -> tuple[pl.DataFrame, pl.DataFrame]:
    columns = _columns(segments, _SEGMENT_FIELDS)
    columns["segment_id"] = list(range(len(segments)))
    columns["stack_id"] = stacks.ids_of(segments)
    segment_frame = pl.DataFrame(columns, schema=SEGMENT_SCHEMA, strict=False).select(
        list(SEGMENT_SCHEMA)
    )
    blocks: dict[str, list[Any]] = {name: [] for name in BLOCK_SCHEMA}
    for segment_id, segment in enumerate(segments):
        entries = segment.get("blocks") or []
        sizes = list(map(itemgetter("size"), entries))
        # Older snapshots leave a block's address out: blocks tile their segment in order.
        starts = [segment["address"]]
        for size in sizes[:-1]:
            starts.append(starts[-1] + size)
        addresses = [b.get("address", start) for b, start in zip(entries, starts, strict=True)]
        blocks["segment_id"].extend([segment_id] * len(entries))
        blocks["device"].extend([segment.get("device")] * len(entries))
        blocks["block_index"].extend(range(len(entries)))
        blocks["address"].extend(addresses)
        blocks["size_bytes"].extend(sizes)
        blocks["requested_size_bytes"].extend(map(methodcaller("get", "requested_size"), entries))
        blocks["state"].extend(map(itemgetter("state"), entries))
        blocks["stack_id"].extend(stacks.ids_of(entries))
    block_frame = pl.DataFrame(blocks, schema=BLOCK_SCHEMA, strict=False)
    # PyTorch's own visualizer calls the pending state "active_awaiting_free" in places.
    block_frame = block_frame.with_columns(
        pl.col("state").replace({"active_awaiting_free": "active_pending_free"})
    )
    return segment_frame, block_frame


def _events(traces: list[Any], stacks: _Stacks) -> pl.DataFrame:
    parts = [pl.DataFrame(schema=EVENT_SCHEMA)]
    for device, entries in enumerate(traces):
        if not entries:
            continue
        if not isinstance(entries, list):
            raise TypeError(
                f"device_traces[{device}] is a {type(entries).__name__}, not a list of events"
            )
        columns = _columns(entries, _EVENT_FIELDS)
        columns["stack_id"] = stacks.ids_of(entries)
        n = len(entries)
        # Free the Python objects of this device before the next one is converted.
        stacks.forget_identities()
        traces[device] = None
        frame = pl.DataFrame(columns, schema={k: EVENT_SCHEMA[k] for k in columns}, strict=False)
        del columns
        parts.append(
            frame.with_columns(
                pl.lit(device, pl.Int64).alias("device"),
                pl.int_range(n, dtype=pl.Int64).alias("idx"),
            ).select(list(EVENT_SCHEMA))
        )
    return pl.concat(parts, how="vertical")
