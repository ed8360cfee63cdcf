"""Snapshot pickle → :class:`MemorySnapshot`: columns built per field, stacks interned once.

The unpickler has to build a Python object per event; each field becomes a column with one
``map`` over the events (C speed, no per-event Python statements besides the stack key). A
Python event costs several times its bytes in the file, so the device traces are not left to
pile up: every few megabytes read, the events unpickled so far are moved out of their list into
columns and the unpickler is told to forget them (:class:`_TraceDrain`). Should the pickle refer
to one of them again, the file is read once more the plain way, so the result never depends on
that guess.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Callable, Iterable
from itertools import compress, count, repeat
from operator import contains, eq, is_, itemgetter, methodcaller, not_
from pathlib import Path
from typing import Any

import polars as pl

from traceinsight.errors import TraceFormatError
from traceinsight.trace.snapshot.compressed import uncompressed_size
from traceinsight.trace.snapshot.model import (
    BLOCK_SCHEMA,
    EVENT_SCHEMA,
    FRAME_SCHEMA,
    SEGMENT_SCHEMA,
    Layout,
    MemorySnapshot,
)
from traceinsight.trace.snapshot.unpickle import ReadAgain, read_pickle

_FRAME_KEY = itemgetter("filename", "line", "name")
_FRAMES = methodcaller("get", "frames")
_FIRST = itemgetter(0)
_LAST = itemgetter(-1)
_STACK_ID = itemgetter(0)
_STACK_FRAMES = itemgetter(1)
_NO_FRAME = object()
_NO_FRAMES = [_NO_FRAME]
_FRAMES_OR_NO_FRAMES = methodcaller("get", "frames", _NO_FRAMES)
_MISS = (None, None)
_SLICE = 4096
_IDENTITY_CACHE = 50_000
# PyTorch gives a free's two events one frames list: the last events moved out keep theirs (and
# all that was unpickled after them) in the unpickler's memo for the events still to come. A
# string value unique to each of at least this many events (``compile_context``) is per-event
# too, and is forgotten with its event.
_NEIGHBOURS = 16
# Each drain rebuilds the unpickler's memo table, a slot per object unpickled so far: drains far
# apart cost less time, near ones less memory (a megabyte of events is several as objects).
_DRAIN_LEAST = 1 << 20
_DRAIN_MOST = 32 << 20
_PER_EVENT_MIN = 64

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

_EVENT_DICT_SCHEMA = pl.Schema({key: EVENT_SCHEMA[column] for key, column in _EVENT_FIELDS.items()})


class _Stacks:
    """Interns call stacks: equal stacks get one id, their frames are stored once."""

    def __init__(self) -> None:
        self.ids: dict[tuple[tuple[Any, Any, Any], ...], int] = {}
        # PyTorch's pickles share each distinct frame dict between the stacks that hold it (and
        # pickle keeps that sharing; sample_traces/memory/h200/leak.pickle, torch 2.11: 661
        # frames in 152 events are 10 dicts, in 97 lists, neighbours sharing theirs), so a stack
        # is first looked up by the identities of its first and last frame dicts and its depth,
        # then confirmed by comparing its list with the one seen first (identical dicts compare
        # without being read): far less than reading three fields of every frame. The list kept
        # with each entry keeps those identities valid; ``forget_identities`` lets them go.
        self._by_identity: dict[tuple[int, int, int], tuple[int | None, list[Any]]] = {}
        # Stacks recorded with C++ frames (``stacks="all"``) nearly all start at the unwinder
        # and end at the script's ``<module>``: on a 4.8 M-event recording 144 of its 159 stacks
        # share their first frame, last frame and depth with another. Each identity keeps every
        # stack met under it, so that stacks taking turns are told apart by comparing lists
        # (identical dicts again), not by reading their frames anew each time.
        self._candidates: dict[tuple[int, int, int], list[tuple[int, list[Any]]]] = {}
        self._candidate_count = 0
        self.forget_identities()

    def ids_of(self, entries: Iterable[dict[str, Any]]) -> list[int | None]:
        frames = list(map(_FRAMES_OR_NO_FRAMES, entries))
        if not all(frames):  # empty lists (or None) from older or hand-written pickles
            frames = [f or _NO_FRAMES for f in frames]
        found: list[int | None] = []
        # In slices, so that the stacks first met in one are found at C speed in the next.
        for start in range(0, len(frames), _SLICE):
            found.extend(self._ids_of(frames[start : start + _SLICE]))
        return found

    def _ids_of(self, frames: list[Any]) -> list[int | None]:
        identities = zip(
            map(id, map(_FIRST, frames)),
            map(id, map(_LAST, frames)),
            map(len, frames),
            strict=True,
        )
        hits = list(map(self._by_identity.get, identities, repeat(_MISS)))
        found: list[int | None] = list(map(_STACK_ID, hits))
        confirmed = map(eq, map(_STACK_FRAMES, hits), frames)
        for i in compress(count(), map(not_, confirmed)):
            found[i] = self._lookup(frames[i])
        return found

    def _lookup(self, frames: list[Any]) -> int:
        identity = (id(frames[0]), id(frames[-1]), len(frames))
        candidates = self._candidates.get(identity)
        if candidates is None:
            if self._candidate_count >= _IDENTITY_CACHE:
                self.forget_identities()  # frames not shared (hand-written pickles): keep it small
            candidates = self._candidates[identity] = []
        for hit in candidates:
            if hit[1] == frames:
                break
        else:
            stack_id = self.ids.setdefault(tuple(map(_FRAME_KEY, frames)), len(self.ids))
            hit = (stack_id, frames)
            candidates.append(hit)
            self._candidate_count += 1
        self._by_identity[identity] = hit
        return hit[0]

    def forget_identities(self) -> None:
        self._by_identity.clear()
        self._candidates.clear()
        self._candidate_count = 0
        # An event without frames is looked up like the others, and found to have no stack.
        self._by_identity[(id(_NO_FRAME), id(_NO_FRAME), 1)] = (None, _NO_FRAMES)

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


def load_memory_snapshot(
    path: str | os.PathLike[str], *, drain_every: int | None = None
) -> MemorySnapshot:
    """Read a ``_dump_snapshot`` pickle (protocol up to 5, current or older layout) safely:
    a pickle that asks for any class or function is refused, nothing in it is run.

    The device traces are turned into columns every ``drain_every`` bytes read (by default
    a 32nd of the file, from 1 to 32 MB; 0: only once the whole pickle is in memory, which
    takes several times the file's size)."""
    file_path = Path(path)
    if drain_every is None:
        try:
            size = uncompressed_size(file_path)
        except OSError:
            size = 0  # read_pickle says why
        drain_every = min(_DRAIN_MOST, max(_DRAIN_LEAST, size // 32))
    if drain_every > 0:
        try:
            return _streamed(file_path, drain_every)
        except ReadAgain:
            pass
    data = read_pickle(file_path)
    return _checked(file_path, lambda: _snapshot(file_path, data))


def _checked(path: Path, build: Callable[[], MemorySnapshot]) -> MemorySnapshot:
    try:
        return build()
    except (KeyError, TypeError, ValueError, AttributeError, pl.exceptions.PolarsError) as exc:
        raise TraceFormatError(
            path, f"not a memory snapshot: {type(exc).__name__}: {exc}"
        ) from None


def _streamed(path: Path, drain_every: int) -> MemorySnapshot:
    stacks = _Stacks()
    drain = _TraceDrain(stacks)
    data = read_pickle(path, drain=drain, drain_every=drain_every)
    if not drain.lists:
        return _checked(path, lambda: _snapshot(path, data))
    try:
        events = drain.finish(data)
    except (KeyError, TypeError, ValueError, AttributeError, pl.exceptions.PolarsError) as exc:
        raise ReadAgain(f"{type(exc).__name__}: {exc}") from None
    return _checked(path, lambda: _snapshot(path, data, stacks=stacks, events=events))


class _TraceDrain:
    """Moves each device trace's events into columns while the pickle is still being read.

    The device traces are found in the unpickler's memo as the lists of dicts with an
    ``action``; the unpickler keeps appending to the same list objects, so what was moved out
    is simply what they held. Their order in the memo is the order the devices come in."""

    def __init__(self, stacks: _Stacks) -> None:
        self.stacks = stacks
        self.lists: list[list[Any]] = []
        self._known: set[int] = set()
        self._first_index: int | None = None
        self._parts: dict[int, list[pl.DataFrame]] = {}
        self._counts: dict[int, int] = {}

    def __call__(self, memo: dict[int, Any]) -> set[int]:
        # While a known trace still grows, the next device's cannot have started (the pickle
        # writes one list after the other): the memo is searched only when none grew.
        if not any(self.lists):
            self._discover(memo)
        if self._first_index is None:
            return set()
        keep: set[int] = set(self._known)
        strings: set[int] = set()
        last: Any = None
        for entries in self.lists:
            if entries:
                chunk = entries[:]
                del entries[:]
                self._convert(entries, chunk)
                tail = chunk[-_NEIGHBOURS:]
                keep.update(map(id, map(_FRAMES, tail)))
                strings |= _per_event_strings(chunk)
                last = tail[0]
                del chunk, tail
        if last is None:
            return set()
        self.stacks.forget_identities()
        # The memo runs in the order the objects were made: from the first trace list to the
        # last events moved, it holds the events, their frames lists and their own values, and
        # also the frame dicts and strings met there first, which later events share (kept).
        # What was made before the first trace (the segments, whose blocks may share a frames
        # list with an event) stays; the objects forgotten are freed once the drain returns.
        # At C speed: the memo holds a few objects per event, hundreds of thousands a drain.
        indices = list(memo)
        objects = list(memo.values())
        stop = next(compress(count(), map(is_, objects, repeat(last))), len(objects))
        begin = bisect_right(indices, self._first_index)
        indices, objects = indices[begin:stop], objects[begin:stop]
        kinds = list(map(type, objects))
        at, dicts = _of_kind(indices, objects, kinds, dict)
        forgotten = set(compress(at, map(contains, dicts, repeat("action"))))
        at, lists = _of_kind(indices, objects, kinds, list)
        forgotten.update(compress(at, map(not_, map(keep.__contains__, map(id, lists)))))
        if strings:
            at, texts = _of_kind(indices, objects, kinds, str)
            forgotten.update(compress(at, map(strings.__contains__, map(id, texts))))
        return forgotten

    def _discover(self, memo: dict[int, Any]) -> None:
        # The memo holds hundreds of thousands of entries: filtered at C speed first.
        is_list = map(is_, map(type, memo.values()), repeat(list))
        for index, obj in compress(memo.items(), is_list):
            if obj and type(obj[0]) is dict and "action" in obj[0] and id(obj) not in self._known:
                self._known.add(id(obj))
                self.lists.append(obj)
                self._parts[id(obj)] = []
                self._counts[id(obj)] = 0
                if self._first_index is None:
                    self._first_index = index

    def _convert(self, entries: list[Any], chunk: list[Any]) -> None:
        start = self._counts[id(entries)]
        self._counts[id(entries)] = start + len(chunk)
        self._parts[id(entries)].append(_event_part(chunk, self.stacks, start))

    def finish(self, data: Any) -> pl.DataFrame:
        """The events frame, once the whole pickle is read: what each list still holds is
        converted, and the parts put together in device order."""
        traces = data["device_traces"] if isinstance(data, dict) else None
        if not isinstance(traces, list) or not isinstance(data.get("segments"), list):
            raise TypeError("the lists of events read are not a snapshot's device traces")
        devices = {id(t): d for d, t in enumerate(traces)}
        order = [devices.get(id(t), -1) for t in self.lists]
        if -1 in order or order != sorted(order):
            raise TypeError("the lists of events read are not a snapshot's device traces")
        last_known = order[-1]
        parts = [pl.DataFrame(schema=EVENT_SCHEMA)]
        for device, entries in enumerate(traces):
            if id(entries) not in self._known:
                if entries and device < last_known:
                    raise TypeError("a device trace was not seen in order")
                parts.append(_events_of(device, entries, self.stacks))
                traces[device] = None
                continue
            if entries:
                self._convert(entries, entries[:])
                del entries[:]
            device_parts = self._parts.pop(id(entries))
            if device_parts:
                parts.append(_with_device(pl.concat(device_parts, how="vertical"), device))
        self.stacks.forget_identities()
        return pl.concat(parts, how="vertical")


def _of_kind(
    indices: list[int], objects: list[Any], kinds: list[type], kind: type
) -> tuple[list[int], list[Any]]:
    """The memo indices and objects whose type is exactly ``kind``."""
    mask = list(map(is_, kinds, repeat(kind)))
    return list(compress(indices, mask)), list(compress(objects, mask))


def _per_event_strings(chunk: list[Any]) -> set[int]:
    """Ids of the strings made once per event (``compile_context``): a value of a key that is
    a different object in every event."""
    found: set[int] = set()
    if len(chunk) >= _PER_EVENT_MIN and type(chunk[0]) is dict:
        for key, value in chunk[0].items():
            if type(value) is not str:
                continue
            get = methodcaller("get", key)
            if len(set(map(id, map(get, chunk[:_PER_EVENT_MIN])))) < _PER_EVENT_MIN:
                continue  # shared, as the action names are
            values = list(map(get, chunk))
            if set(map(type, values)) != {str}:
                values = list(compress(values, map(is_, map(type, values), repeat(str))))
            ids = set(map(id, values))
            if len(ids) == len(values):
                found |= ids
    return found


def _snapshot(
    path: Path,
    data: Any,
    *,
    stacks: _Stacks | None = None,
    events: pl.DataFrame | None = None,
) -> MemorySnapshot:
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
    if stacks is None or events is None:
        stacks = _Stacks()
        # The trace first: stack ids then follow the order the allocations were made in.
        events = _events(traces, stacks)
    segment_frame, block_frame = _segments(segments, stacks)
    return MemorySnapshot(
        path=str(path),
        file_bytes=path.stat().st_size,
        layout=layout,
        segments=segment_frame,
        blocks=block_frame,
        events=events,
        frames=stacks.frame(),
        allocator_settings=dict(settings) if isinstance(settings, dict) else {},
    )


def _columns(entries: list[dict[str, Any]], fields: dict[str, str]) -> dict[str, list[Any]]:
    columns: dict[str, list[Any]] = {}
    for key, column in fields.items():
        try:
            columns[column] = list(map(itemgetter(key), entries))  # twice as fast as get
        except (KeyError, TypeError):  # a field some leave out (device_free), or not a dict
            columns[column] = list(map(methodcaller("get", key), entries))
    return columns


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
        parts.append(_events_of(device, entries, stacks))
        # Free the Python objects of this device before the next one is converted.
        traces[device] = None
    return pl.concat(parts, how="vertical")


def _events_of(device: int, entries: Any, stacks: _Stacks) -> pl.DataFrame:
    if not entries:
        return pl.DataFrame(schema=EVENT_SCHEMA)
    if not isinstance(entries, list):
        raise TypeError(
            f"device_traces[{device}] is a {type(entries).__name__}, not a list of events"
        )
    part = _event_part(entries, stacks, 0)
    stacks.forget_identities()
    return _with_device(part, device)


def _event_part(entries: list[Any], stacks: _Stacks, start: int) -> pl.DataFrame:
    """Events ``start`` onwards of one device's trace, without the device column."""
    try:
        # polars reads the fields of the dicts itself, faster than a Python list per column.
        frame = pl.from_dicts(entries, schema=_EVENT_DICT_SCHEMA, strict=False)
        frame = frame.rename(_EVENT_FIELDS)
    except (TypeError, pl.exceptions.PolarsError):
        # It refuses a value of the wrong type (or an event that is not a dict), where a column
        # from a list makes the value null (or says which event is wrong).
        columns = _columns(entries, _EVENT_FIELDS)
        frame = pl.DataFrame(columns, schema={k: EVENT_SCHEMA[k] for k in columns}, strict=False)
    return frame.with_columns(
        pl.Series("stack_id", stacks.ids_of(entries), dtype=pl.Int64, strict=False),
        pl.int_range(start, start + len(entries), dtype=pl.Int64).alias("idx"),
    )


def _with_device(part: pl.DataFrame, device: int) -> pl.DataFrame:
    return part.with_columns(pl.lit(device, pl.Int64).alias("device")).select(list(EVENT_SCHEMA))
