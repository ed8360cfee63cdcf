"""Bytes → columns: decode a Kineto / Chrome trace file into raw polars frames.

The decode is typed (msgspec) and done in chunks of the ``traceEvents`` array so that the
Python objects of only one chunk are alive at a time; each chunk becomes a polars frame
straight away. Events are a union tagged by ``ph``, so each phase gets only the fields it
needs, and their args are decoded in the same pass into one struct that names only the
fields the analyses use; the event's cat then picks which of them become columns.
"""

from __future__ import annotations

import gc
import math
import mmap
import os
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any, ClassVar, Union

import msgspec
import polars as pl

from traceinsight.errors import TraceFormatError
from traceinsight.trace.schema import GPU_KINDS, KIND_BY_CAT

# Target size of one decoded chunk of the events array; bounds the live Python objects.
CHUNK_BYTES = 8 * 1024 * 1024
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_FIRST_TOKEN = re.compile(rb"\s*(\S)")

# Kineto categories of events on a device timeline; their args are decoded as GPU args.
_GPU_CATS = frozenset(cat for cat, kind in KIND_BY_CAT.items() if kind in GPU_KINDS)


class _Args(msgspec.Struct, gc=False):
    """The args fields the analyses use, of every kind of event, decoded with the event.

    One struct for all kinds, so the events array is decoded in a single pass; which of
    these fields become columns depends on the event's cat (see _GROUP_FIELDS). Shapes and
    types stay raw JSON text.
    """

    # every host event that links to others
    correlation: int | None = None
    external_id: int | None = msgspec.field(default=None, name="External id")
    # cpu ops
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    concrete_inputs: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Concrete Inputs")
    seq_num: int | None = msgspec.field(default=None, name="Sequence number")
    # Python frames
    python_id: int | None = msgspec.field(default=None, name="Python id")
    python_parent_id: int | None = msgspec.field(default=None, name="Python parent id")
    # GPU work
    device: int | None = None
    stream: int | None = None
    grid: list[int] | None = None
    block: list[int] | None = None
    registers_per_thread: int | None = msgspec.field(default=None, name="registers per thread")
    shared_memory_bytes: int | None = msgspec.field(default=None, name="shared memory")
    blocks_per_sm: float | None = msgspec.field(default=None, name="blocks per SM")
    warps_per_sm: float | None = msgspec.field(default=None, name="warps per SM")
    occupancy_pct: float | None = msgspec.field(default=None, name="est. achieved occupancy %")
    bytes: int | None = None
    bandwidth_gbps: float | None = msgspec.field(default=None, name="memory bandwidth (GB/s)")
    # NCCL collectives, on the host op (record_param_comms) and on the GPU kernel
    collective_name: str | None = msgspec.field(default=None, name="Collective name")
    in_msg_nelems: int | None = msgspec.field(default=None, name="In msg nelems")
    out_msg_nelems: int | None = msgspec.field(default=None, name="Out msg nelems")
    group_size: int | None = msgspec.field(default=None, name="Group size")
    comm_dtype: str | None = msgspec.field(default=None, name="dtype")
    process_group: str | None = msgspec.field(default=None, name="Process Group Name")
    # profile_memory "[memory]" instant events
    memory_device_type: int | None = msgspec.field(default=None, name="Device Type")
    memory_device: int | None = msgspec.field(default=None, name="Device Id")
    memory_addr: int | None = msgspec.field(default=None, name="Addr")
    memory_bytes: int | None = msgspec.field(default=None, name="Bytes")
    total_allocated_bytes: int | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved_bytes: int | None = msgspec.field(default=None, name="Total Reserved")


_NO_ARGS = _Args()


# Events are decoded as a union tagged by "ph", so each phase gets only the fields it needs
# and flow events (a third of a typical trace) cost almost nothing.
class _Duration(msgspec.Struct, tag_field="ph", tag="X", gc=False):
    PH: ClassVar[str] = "X"
    name: str | None = None
    cat: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = None
    args: _Args = msgspec.field(default_factory=_Args)


class _Begin(_Duration, tag="B", gc=False):
    PH: ClassVar[str] = "B"


class _End(_Duration, tag="E", gc=False):
    PH: ClassVar[str] = "E"


class _Instant(msgspec.Struct, tag_field="ph", tag="i", gc=False):
    PH: ClassVar[str] = "i"
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    args: _Args | None = None


class _InstantGlobal(_Instant, tag="I", gc=False):
    PH: ClassVar[str] = "I"


class _InstantAsync(_Instant, tag="n", gc=False):
    PH: ClassVar[str] = "n"


class _Counter(msgspec.Struct, tag_field="ph", tag="C", gc=False):
    PH: ClassVar[str] = "C"
    name: str | None = None
    pid: int | str | None = None
    ts: float | None = None
    args: Any = None


class _Metadata(msgspec.Struct, tag_field="ph", tag="M", gc=False):
    PH: ClassVar[str] = "M"
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    args: Any = None


class _Unknown(msgspec.Struct, gc=False):
    """An entry the lenient path could not place; PH holds its phase as written."""

    PH: str = ""


def _skipped(phase: str) -> type[msgspec.Struct]:
    """A struct for a phase we only count (flows, async, objects, samples, marks...)."""
    return msgspec.defstruct(
        f"_Skipped_{ord(phase)}", [], tag_field="ph", tag=phase, gc=False, namespace={"PH": phase}
    )


_EVENT_TYPES: tuple[type[msgspec.Struct], ...] = (
    _Duration,
    _Begin,
    _End,
    _Instant,
    _InstantGlobal,
    _InstantAsync,
    _Counter,
    _Metadata,
    *(_skipped(phase) for phase in "stfbeSTpFPONDRcVv()"),
)
_STRUCT_BY_PHASE: dict[str, type[Any]] = {t.PH: t for t in _EVENT_TYPES}  # type: ignore[attr-defined]
_EVENTS_TYPE = list[Union[_EVENT_TYPES]]  # type: ignore[valid-type]  # noqa: UP007

# The args fields that become columns, by group: 0 cpu ops, 1 other host events, 2 GPU events.
_OP_ARG_FIELDS = (
    "correlation",
    "external_id",
    "input_dims",
    "input_types",
    "concrete_inputs",
    "seq_num",
    "collective_name",
    "in_msg_nelems",
    "out_msg_nelems",
    "group_size",
    "comm_dtype",
    "process_group",
)
_HOST_ARG_FIELDS = ("correlation", "external_id", "python_id", "python_parent_id")
_GPU_ARG_FIELDS = (
    "correlation",
    "external_id",
    "device",
    "stream",
    "grid",
    "block",
    "registers_per_thread",
    "shared_memory_bytes",
    "blocks_per_sm",
    "warps_per_sm",
    "occupancy_pct",
    "bytes",
    "bandwidth_gbps",
    "collective_name",
    "in_msg_nelems",
    "out_msg_nelems",
    "group_size",
    "comm_dtype",
    "process_group",
)
_GROUP_FIELDS = (_OP_ARG_FIELDS, _HOST_ARG_FIELDS, _GPU_ARG_FIELDS)
_RAW_JSON_FIELDS = frozenset({"input_dims", "input_types", "concrete_inputs"})
_LIST3_FIELDS = frozenset({"grid", "block"})
# memory frame column <- _Args field
_MEMORY_ARG_FIELDS = {
    "device_type": "memory_device_type",
    "device": "memory_device",
    "addr": "memory_addr",
    "bytes": "memory_bytes",
    "total_allocated_bytes": "total_allocated_bytes",
    "total_reserved_bytes": "total_reserved_bytes",
}

_RAW_DTYPES: dict[str, Any] = {
    "name": pl.Categorical,
    "cat": pl.Categorical,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "ts": pl.Float64,
    "dur": pl.Float64,
    "correlation": pl.Int64,
    "external_id": pl.Int64,
    "input_dims": pl.String,
    "input_types": pl.String,
    "concrete_inputs": pl.String,
    "seq_num": pl.Int64,
    "python_id": pl.Int64,
    "python_parent_id": pl.Int64,
    "collective_name": pl.String,
    "in_msg_nelems": pl.Int64,
    "out_msg_nelems": pl.Int64,
    "group_size": pl.Int64,
    "comm_dtype": pl.String,
    "process_group": pl.String,
    "device": pl.Int64,
    "stream": pl.Int64,
    "grid": pl.List(pl.Int64),
    "block": pl.List(pl.Int64),
    "registers_per_thread": pl.Int64,
    "shared_memory_bytes": pl.Int64,
    "blocks_per_sm": pl.Float64,
    "warps_per_sm": pl.Float64,
    "occupancy_pct": pl.Float64,
    "bytes": pl.Int64,
    "bandwidth_gbps": pl.Float64,
}

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_EVENT_FIELD_NAMES = ("name", "cat", "pid", "tid", "ts", "dur", "args")
_PHASE = attrgetter("PH")
_MEMORY_SCHEMA = {"ts": pl.Float64, "pid": pl.Int64, "tid": pl.Int64} | {
    name: pl.Int64 for name in _MEMORY_ARG_FIELDS
}
# Which fields become columns, by the event's cat: 0 cpu op, 1 other host, 2 GPU.
_GROUP_BY_CAT: dict[str | None, int] = {"cpu_op": 0, "operator": 0}
_GROUP_BY_CAT.update((cat, 2) for cat in _GPU_CATS)


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


Buffer = bytearray | mmap.mmap


def read_bytes(path: Path) -> Buffer:
    """The file's bytes, gunzipped when it is gzip (by magic number, not by suffix).

    A writable buffer, because the decoder writes array brackets into it to cut the events
    into chunks without copying them: a private copy-on-write map of a plain file (pages are
    handed back to the OS as soon as they are decoded, so the file never sits in memory
    whole), or a bytearray filled in place for gzip.
    """
    if not path.exists():
        raise TraceFormatError(path, "no such file")
    if path.is_dir():
        raise TraceFormatError(path, "is a directory, not a trace file")
    try:
        with path.open("rb") as handle:
            magic = handle.read(2)
            handle.seek(0)
            data = _gunzip(path, handle) if magic == b"\x1f\x8b" else _map(handle)
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from exc
    if _FIRST_TOKEN.match(data) is None:
        raise TraceFormatError(path, "file is empty")
    return data


def _map(handle: Any) -> Buffer:
    if os.fstat(handle.fileno()).st_size == 0:
        return bytearray()
    return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)


def _release(data: Buffer, lo: int, hi: int) -> None:
    """Drop the whole pages inside data[lo:hi] from memory (a no-op for a bytearray).

    Pages of a private file map come back from the page cache if read again; pages we wrote
    brackets into are never inside a released range (it stops short of both ends).
    """
    if not isinstance(data, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return
    page = mmap.PAGESIZE
    first = -(-lo // page) * page
    last = (hi // page) * page
    if last > first:
        data.madvise(mmap.MADV_DONTNEED, first, last - first)


def _gunzip(path: Path, handle: Any) -> bytearray:
    out = bytearray()
    decomp = zlib.decompressobj(16 + zlib.MAX_WBITS)
    member_open = False
    try:
        while piece := handle.read(1 << 22):
            while piece:
                member_open = True
                out += decomp.decompress(piece)
                if decomp.eof:  # a multi-member file: the next member starts here
                    piece = decomp.unused_data
                    decomp = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    member_open = False
                else:
                    piece = b""
    except zlib.error as exc:
        raise TraceFormatError(path, f"corrupt gzip data ({exc})") from exc
    if member_open:
        raise TraceFormatError(
            path, "truncated gzip file (it ends before the compressed data does)"
        )
    return out


def read_trace(path: Path, data: Buffer) -> RawTrace:
    """Decode ``data`` (the bytes of ``path``) into a :class:`RawTrace`."""
    warnings: list[str] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()  # Millions of short-lived objects; the cyclic GC only slows the decode.
    try:
        found = _find_events(data)
        try:
            if found is None:
                raise _NoFastPath
            header, lo = found
            state, parts = _decode_all(path, data, header, lo, None, warnings)
        except _NoFastPath:
            # Unusual layout or broken JSON: validate the whole file first; that pass names
            # the problem precisely, and gives the array's end for a careful decode.
            warnings.clear()
            header, lo, hi = _split_top_level(path, data)
            _release(data, 0, len(data))
            state, parts = _decode_all(path, data, header, lo, hi, warnings)
    finally:
        if gc_was_enabled:
            gc.enable()
    durations = _finish_durations(parts, state)
    if durations.height == 0 and not state.counter_rows and not state.memory_parts:
        raise TraceFormatError(path, "traceEvents has no events with a duration")
    raw = RawTrace(
        header=header,
        durations=durations,
        counters=_counters_frame(state.counter_rows),
        memory=pl.concat(state.memory_parts)
        if state.memory_parts
        else pl.DataFrame(schema=_MEMORY_SCHEMA),
        process_names=state.process_names,
        thread_names=state.thread_names,
        pid_labels=state.pid_labels,
        phase_counts=dict(state.phase_counts),
        warnings=warnings,
    )
    return raw


def _decode_all(
    path: Path, data: Buffer, header: dict[str, Any], lo: int, hi: int | None, warnings: list[str]
) -> tuple[_ChunkState, list[pl.DataFrame]]:
    state = _ChunkState(warnings)
    parts: list[pl.DataFrame] = []
    for events in _decode_chunks(path, data, lo, hi, header):
        part = state.consume(events)
        if part is not None and part.height:
            parts.append(part)
        del events
    return state, parts


class _NoFastPath(Exception):
    """The quick layout guess did not hold; decode again after validating the whole file."""


_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_SENTINEL_KEY = b'"\\u0000":0}'


def _find_events(data: Buffer) -> tuple[dict[str, Any], int] | None:
    """The header fields before ``traceEvents`` and where its array starts, without a pass
    over the whole file; None when the file does not look like that.

    The first ``"traceEvents": [`` is the real key exactly when the bytes before it, closed
    with a dummy key, form a valid JSON object: a match inside a string or a nested value
    would leave them unbalanced. What follows the array is checked when its last piece is
    decoded (see :func:`_decode_chunks`).
    """
    first = _FIRST_TOKEN.match(data)
    if first is None or first.group(1) != b"{":
        return None
    match = _EVENTS_KEY.search(data)
    if match is None:
        return None
    try:
        prefix = msgspec.json.decode(bytes(data[: match.start()]) + _SENTINEL_KEY)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    if not isinstance(prefix, dict):
        return None
    prefix.pop("\x00", None)
    return prefix, match.end() - 1


def _split_top_level(path: Path, data: Buffer) -> tuple[dict[str, Any], int, int]:
    """Header fields and the [lo, hi) byte range of the traceEvents array within ``data``."""
    first = _FIRST_TOKEN.match(data)
    token = first.group(1) if first else b""
    if token == b"[":
        # The Chrome "JSON array" form: the whole file is the events array.
        try:
            msgspec.json.decode(data, type=msgspec.Raw)  # validates the syntax
        except msgspec.DecodeError as exc:
            raise TraceFormatError(path, f"not valid JSON ({_json_reason(exc)})") from exc
        lo = first.start(1)  # type: ignore[union-attr]
        return {}, lo, data.rfind(b"]") + 1
    if token != b"{":
        raise TraceFormatError(path, "not JSON (expected a Chrome trace object)")
    try:
        top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    except msgspec.DecodeError as exc:
        raise TraceFormatError(path, f"not valid JSON ({_json_reason(exc)})") from exc
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, f"not valid UTF-8 text at byte {exc.start}") from exc
    except msgspec.ValidationError as exc:
        raise TraceFormatError(path, "not a Chrome trace: top level is not an object") from exc
    events_raw = top.pop("traceEvents", None)
    if events_raw is None:
        raise TraceFormatError(path, "not a Chrome trace: no 'traceEvents' key")
    if bytes(memoryview(events_raw)[:1]) != b"[":
        raise TraceFormatError(path, "not a Chrome trace: 'traceEvents' is not a list")
    try:
        header = {key: msgspec.json.decode(value) for key, value in top.items()}
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, "not valid UTF-8 text in the trace header") from exc
    lo = _offset_in(events_raw, data)
    del top, events_raw
    return header, lo[0], lo[1]


def _offset_in(raw: msgspec.Raw, data: Buffer) -> tuple[int, int]:
    """Where a zero-copy Raw slice sits inside ``data`` (msgspec does not copy Raw values)."""
    import numpy as np

    start = np.frombuffer(raw, np.uint8).ctypes.data - np.frombuffer(data, np.uint8).ctypes.data
    if not 0 <= start <= len(data) - len(raw):  # pragma: no cover - a msgspec that copies
        raise RuntimeError("cannot locate traceEvents in the input buffer")
    return start, start + len(raw)


def _json_reason(exc: Exception) -> str:
    text = str(exc)
    if "truncated" in text.lower():
        return "truncated: the file ends in the middle of the JSON"
    return text


def _decode_chunks(
    path: Path, data: Buffer, lo: int, hi: int | None, header: dict[str, Any]
) -> Iterator[list[Any]]:
    """Decode the events array that starts at data[lo] in pieces of about CHUNK_BYTES.

    A cut lands on "},<space>{" between two events: we write "]" just after the "}" and
    "[" just before the "{", so each piece is a JSON array read in place, without a copy
    (a piece is copied only where the JSON has no spare byte there, as in "},{").
    A cut inside a string or a nested list would leave a piece that is invalid JSON; the
    decode detects that and the bytes are put back. With ``hi`` known, the rest is then
    decoded in one piece; without it, :class:`_NoFastPath` asks for a careful decode.

    ``hi`` None: the array's end is not known yet. No cut is made in the last
    CHUNK_BYTES of the file, and the last piece is decoded together with the rest of the
    top-level object, which checks that rest and adds its other keys to ``header``.
    """
    view = memoryview(data)
    limit = len(data) - CHUNK_BYTES if hi is None else hi
    cuts: list[tuple[int, int]] = []  # (just after a "}", its "{") at each cut
    pos = lo + 1
    while limit - pos > CHUNK_BYTES:
        match = _BOUNDARY.search(data, pos + CHUNK_BYTES, limit - 1)
        if match is None:
            break
        pos = match.end() - 1
        cuts.append((match.start() + 1, match.end() - 1))
    in_place = [b - a >= 2 for a, b in cuts]
    patches = [
        (at, data[at]) for (a, b), ok in zip(cuts, in_place, strict=True) if ok for at in (a, b - 1)
    ]
    for (a, b), ok in zip(cuts, in_place, strict=True):
        if ok:
            data[a] = 0x5D  # "]"
            data[b - 1] = 0x5B  # "["
    try:
        for index in range(len(cuts) + 1):
            is_last = index == len(cuts)
            start = lo if index == 0 else cuts[index - 1][1] - in_place[index - 1]
            opener = b"" if index == 0 or in_place[index - 1] else b"["
            try:
                if is_last and hi is None:
                    events = _decode_tail(path, opener + bytes(view[start:]), header)
                elif is_last:
                    events = _decode_events(
                        path, view[start:hi] if not opener else opener + bytes(view[start:hi])
                    )
                else:
                    end = cuts[index][0] + in_place[index]
                    closer = b"" if in_place[index] else b"]"
                    piece = (
                        view[start:end]
                        if not (opener or closer)
                        else opener + bytes(view[start:end]) + closer
                    )
                    events = _decode_events(path, piece)
            except _BadCut:
                if hi is None:
                    raise _NoFastPath from None
                for at, byte in patches:
                    data[at] = byte
                patches = []
                if index == 0:
                    yield _decode_events(path, view[lo:hi])
                else:
                    yield _decode_events(path, b"[" + bytes(view[cuts[index - 1][1] : hi]))
                return
            yield events
            _release(data, start + 1, len(data) if is_last else cuts[index][0] - 1)
    finally:
        del view
        for at, byte in patches:
            data[at] = byte


def _decode_tail(path: Path, piece: bytes, header: dict[str, Any]) -> list[Any]:
    """The events of the last piece (which starts with "["), and the keys after the array."""
    try:
        rest = msgspec.json.decode(b'{"traceEvents":' + piece, type=dict[str, msgspec.Raw])
        tail = {
            key: msgspec.json.decode(value) for key, value in rest.items() if key != "traceEvents"
        }
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        raise _BadCut from None
    events = _decode_events(path, rest["traceEvents"])
    header.update(tail)
    return events


class _BadCut(Exception):
    pass


def _decode_events(path: Path, buf: Any) -> list[Any]:
    try:
        return msgspec.json.decode(buf, type=_EVENTS_TYPE)  # type: ignore[no-any-return]
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError as exc:
        raise _BadCut from exc
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, "not valid UTF-8 text inside traceEvents") from exc
    # Some event has a field of an unexpected type: decode loosely and coerce field by field.
    try:
        items = msgspec.json.decode(buf, type=list[Any])
    except msgspec.DecodeError as exc:
        raise _BadCut from exc
    coerced = _Coerced()
    coerced.extend(_coerce_event(item, coerced) for item in items)
    return coerced


class _Coerced(list):  # type: ignore[type-arg]
    """Events decoded field by field; an entry that was not a JSON object is None."""

    bad_args = 0


def _coerce_event(item: Any, coerced: _Coerced) -> Any:
    if not isinstance(item, dict):
        return None  # not an object: counted and skipped
    ph = item.get("ph")
    phase = ph if isinstance(ph, str) else ""
    struct = _STRUCT_BY_PHASE.get(phase)
    if struct is None:
        return _Unknown(PH=phase)
    fields = struct.__struct_fields__
    values: dict[str, Any] = {}
    for key in ("name", "cat"):
        if key in fields:
            values[key] = _as_str(item.get(key))
    for key in ("pid", "tid"):
        if key in fields:
            value = item.get(key)
            values[key] = (
                value if isinstance(value, (int, str)) and not isinstance(value, bool) else None
            )
    for key in ("ts", "dur"):
        if key in fields:
            values[key] = _as_float(item.get(key))
    if "args" in fields:
        args = item.get("args")
        if struct in (_Counter, _Metadata):
            values["args"] = args
        elif args is not None:
            values["args"] = _coerce_args(args, coerced)
    return struct(**values)


def _coerce_args(args: Any, coerced: _Coerced) -> _Args:
    """Args decoded leniently: the fields whose values have the right type are kept, the rest
    dropped and counted."""
    if not isinstance(args, dict):
        coerced.bad_args += 1
        return _Args()
    try:
        return msgspec.json.decode(msgspec.json.encode(args), type=_Args)
    except (msgspec.ValidationError, msgspec.EncodeError):
        pass
    kept: dict[str, Any] = {}
    for key in _Args.__struct_encode_fields__:
        if key not in args:
            continue
        try:
            msgspec.json.decode(msgspec.json.encode({key: args[key]}), type=_Args)
        except (msgspec.ValidationError, msgspec.EncodeError):
            coerced.bad_args += 1
            continue
        kept[key] = args[key]
    return msgspec.json.decode(msgspec.json.encode(kept), type=_Args)


def _as_str(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        result = float(value)
    elif isinstance(value, str):
        try:
            result = float(value)
        except ValueError:
            return None
    else:
        return None
    return result if math.isfinite(result) else None


class _ChunkState:
    """Accumulates what spans chunks: names, open B events, counters, memory, counts."""

    def __init__(self, warnings: list[str]) -> None:
        self.warnings = warnings
        self.phase_counts: Counter[str] = Counter()
        self.process_names: dict[int, str] = {}
        self.thread_names: dict[tuple[int, int], str] = {}
        self.pid_labels: dict[int, str] = {}
        self._str_ids: dict[str, int] = {}
        self.counter_rows: list[tuple[float, int, str, str, float]] = []
        self.memory_parts: list[pl.DataFrame] = []
        self.begin_end: list[Any] = []
        self.bad_args = 0
        self.bad_events = 0

    def pid_of(self, value: int | str | None) -> int:
        """Kineto mixes int pids with names such as "Spans"; map names to stable negative ids."""
        if value is None:
            return -1
        if isinstance(value, int):
            return value if _INT64_MIN <= value <= _INT64_MAX else -1
        stripped = value.strip()
        if stripped.lstrip("-").isdigit() and len(stripped) < 19:
            return int(stripped)
        known = self._str_ids.get(value)
        if known is None:
            known = -(len(self._str_ids) + 2)
            self._str_ids[value] = known
            self.pid_labels[known] = value
        return known

    def consume(self, events: list[Any]) -> pl.DataFrame | None:
        if isinstance(events, _Coerced):
            self.bad_events += events.count(None)
            self.bad_args += events.bad_args
            events = [e for e in events if e is not None]
        # One pass: duration events by the fields their cat calls for, the rest aside.
        groups: tuple[list[Any], ...] = ([], [], [])
        others: list[Any] = []
        appenders = [g.append for g in groups]
        other = others.append
        group_of = _GROUP_BY_CAT.get
        for event in events:
            if type(event) is _Duration:
                appenders[group_of(event.cat, 1)](event)
            else:
                other(event)
        if others:
            counts = Counter(map(_PHASE, others))
            self.phase_counts.update(counts)
            if counts["B"] or counts["E"]:
                self.begin_end.extend(e for e in others if type(e) in (_Begin, _End))
            for event in [e for e in others if type(e) is _Counter] if counts["C"] else ():
                self._counter(event)
            for event in [e for e in others if type(e) is _Metadata] if counts["M"] else ():
                self._metadata(event)
            if counts["i"] or counts["I"] or counts["n"]:
                self._memory(
                    [e for e in others if isinstance(e, _Instant) and e.name == "[memory]"]
                )
        n_durations = len(events) - len(others)
        self.phase_counts["X"] += n_durations
        if not n_durations:
            return None
        return self._durations_frame(groups)

    def _counter(self, event: Any) -> None:
        args = event.args
        ts = event.ts
        if not isinstance(args, dict) or ts is None or event.name is None:
            return
        pid = self.pid_of(event.pid)
        for series, value in args.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                value_f = float(value)
                if math.isfinite(value_f):
                    self.counter_rows.append((ts, pid, event.name, str(series), value_f))

    def _memory(self, events: list[Any]) -> None:
        events = [e for e in events if e.ts is not None and e.args is not None]
        if not events:
            return
        ts, pids, tids, args = _attributes(events, ("ts", "pid", "tid", "args"))
        columns: dict[str, Any] = {"ts": ts, "pid": self._ids(pids), "tid": self._ids(tids)}
        columns.update(
            zip(
                _MEMORY_ARG_FIELDS,
                _attributes(args, tuple(_MEMORY_ARG_FIELDS.values())),
                strict=True,
            )
        )
        self.memory_parts.append(pl.DataFrame(columns, schema=_MEMORY_SCHEMA, strict=False))

    def _metadata(self, event: Any) -> None:
        if event.name not in ("process_name", "thread_name"):
            return
        args = event.args
        if not isinstance(args, dict) or not isinstance(args.get("name"), str):
            return
        pid = self.pid_of(event.pid)
        if event.name == "process_name":
            self.process_names[pid] = args["name"]
        else:
            self.thread_names[(pid, self.pid_of(event.tid))] = args["name"]

    def _ids(self, values: list[Any]) -> list[Any]:
        mapping = {v: v if type(v) is int else self.pid_of(v) for v in set(values)}
        if all(k is v for k, v in mapping.items()):
            return values
        return list(map(mapping.__getitem__, values))

    def _durations_frame(self, groups: tuple[list[Any], ...]) -> pl.DataFrame:
        # cpu ops, other host events and GPU events carry different args: each group makes a
        # frame of its own fields; concat fills the missing columns.
        frames = [
            self._group_frame(group, fields)
            for group, fields in zip(groups, _GROUP_FIELDS, strict=True)
            if group
        ]
        return frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal")

    def _group_frame(self, events: list[Any], fields: tuple[str, ...]) -> pl.DataFrame:
        names, cats, pids, tids, ts, durs, args = _attributes(events, _EVENT_FIELD_NAMES)
        columns: dict[str, Any] = {
            "name": names,
            "cat": cats,
            "pid": self._ids(pids),
            "tid": self._ids(tids),
            "ts": ts,
            "dur": durs,
        }
        for name, values in zip(fields, _attributes(args, fields), strict=True):
            if name in _RAW_JSON_FIELDS:
                columns[name] = _raw_json_column(values)
            elif name in _LIST3_FIELDS:
                columns[name] = _list3_column(values)
            else:
                columns[name] = values
        schema = {name: _RAW_DTYPES[name] for name in columns}
        return pl.DataFrame(columns, schema=schema, strict=False)


# A JSON string (kept as it is, as group 1) or a run of whitespace outside strings (dropped).
_JSON_STRING_OR_SPACE = r'("(?:[^"\\]|\\.)*")|\s+'


def _attributes(objects: list[Any], names: tuple[str, ...]) -> list[list[Any]]:
    """One list per attribute name, each filled by a C-level map: no tuple per object, which
    makes this several times faster than transposing rows with ``zip(*rows)``."""
    return [list(map(attrgetter(name), objects)) for name in names]


def _raw_json_column(values: list[msgspec.Raw]) -> pl.Series:
    """Raw JSON snippets as one string column, built with one join and one split.

    NUL cannot occur unescaped in JSON text, so it is a safe separator.
    """
    text = b"\x00".join(values).decode("utf-8", "replace")
    return pl.Series(text.split("\x00"), dtype=pl.String).replace("", None)


def _compact_json(column: pl.Series) -> pl.Series:
    """JSON text with the whitespace outside strings dropped.

    The same shapes then read the same whether the writer put spaces after commas (Kineto)
    or not (a re-serialized trace), since they are grouped and compared as text. Only the
    distinct values (a few hundred) go through the regex.
    """
    distinct = column.unique().drop_nulls()
    spaced = distinct.filter(distinct.str.contains(r"\s"))
    if spaced.len() == 0:
        return column
    return column.replace(spaced, spaced.str.replace_all(_JSON_STRING_OR_SPACE, "${1}"))


def _list3_column(values: list[list[int] | None]) -> pl.Series:
    """grid / block triples as a List(Int64) column without a Python object per row."""
    empty = (None, None, None)
    flat = [
        v
        for triple in values
        for v in (triple if triple is not None and len(triple) == 3 else empty)
    ]
    arrays = pl.Series(flat, dtype=pl.Int64).reshape((len(values), 3))
    missing = pl.Series([v is None or len(v) != 3 for v in values])
    return pl.select(
        pl.when(missing).then(None).otherwise(arrays.cast(pl.List(pl.Int64)))
    ).to_series()


def _begin_end_frame(state: _ChunkState) -> pl.DataFrame | None:
    """Pair B/E events per (pid, tid) as a stack; unmatched ones are counted, not invented."""
    if not state.begin_end:
        return None
    stacks: dict[tuple[int, int], list[Any]] = {}
    rows: list[Any] = []
    unmatched = 0
    ordered = sorted(
        (e for e in state.begin_end if e.ts is not None), key=lambda e: (e.ts, type(e) is not _End)
    )
    for event in ordered:
        key = (state.pid_of(event.pid), state.pid_of(event.tid))
        if type(event) is _Begin:
            stacks.setdefault(key, []).append(event)
            continue
        stack = stacks.get(key)
        if not stack:
            unmatched += 1
            continue
        begin = stack.pop()
        rows.append(
            _Duration(
                name=begin.name if begin.name is not None else event.name,
                cat=begin.cat if begin.cat is not None else event.cat,
                pid=begin.pid,
                tid=begin.tid,
                ts=begin.ts,
                dur=event.ts - begin.ts,
                args=begin.args,
            )
        )
    unmatched += sum(len(s) for s in stacks.values())
    if unmatched:
        state.warnings.append(f"{unmatched} B/E events without a partner were ignored")
    if not rows:
        return None
    groups: tuple[list[Any], ...] = ([], [], [])
    for event in rows:
        groups[_GROUP_BY_CAT.get(event.cat, 1)].append(event)
    return state._durations_frame(groups)


def _finish_durations(parts: list[pl.DataFrame], state: _ChunkState) -> pl.DataFrame:
    paired = _begin_end_frame(state)
    if paired is not None:
        parts.append(paired)
    if state.bad_events:
        state.warnings.append(
            f"{state.bad_events} entries of traceEvents are not objects and were skipped"
        )
    if state.bad_args:
        state.warnings.append(f"{state.bad_args} events had malformed args that were ignored")
    if not parts:
        return pl.DataFrame(schema=_RAW_DTYPES)
    # Give every part the full schema, then stack them as chunks: a diagonal concat would
    # copy all of them into one new buffer per column, doubling the frame for a moment.
    full = [_with_schema(part) for part in parts]
    parts.clear()
    stacked = pl.concat(full, how="vertical", rechunk=False)
    del full
    return stacked.with_columns(
        _compact_json(stacked.get_column(name)) for name in _RAW_JSON_FIELDS
    )


def _with_schema(part: pl.DataFrame) -> pl.DataFrame:
    n = part.height
    return pl.DataFrame(
        [
            part.get_column(name)
            if name in part.columns
            else pl.Series(name, dtype=dtype).extend_constant(None, n)
            for name, dtype in _RAW_DTYPES.items()
        ]
    )


def _counters_frame(rows: list[tuple[float, int, str, str, float]]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={
            "ts": pl.Float64,
            "pid": pl.Int64,
            "name": pl.String,
            "series": pl.String,
            "value": pl.Float64,
        },
        orient="row",
    )
