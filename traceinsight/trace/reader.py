"""Bytes → columns: decode a Kineto / Chrome trace file into raw polars frames.

The decode is typed (msgspec) and done in chunks of the ``traceEvents`` array so that the
Python objects of only one chunk are alive at a time; each chunk becomes a polars frame
straight away. Arguments are kept as raw JSON until we know the event's kind, then decoded in
one batch per kind into small typed structs that name only the fields the analyses use.
"""

from __future__ import annotations

import gc
import gzip
import math
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from traceinsight.errors import TraceFormatError

# Target size of one decoded chunk of the events array; bounds the live Python objects.
CHUNK_BYTES = 24 * 1024 * 1024
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")

_HOST_CATS_GPU = frozenset(
    {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_sync", "memcpy", "memset"}
)


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    name: str | None = None
    cat: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = None
    args: msgspec.Raw = msgspec.Raw()


class _LenientEvent(msgspec.Struct, gc=False):
    ph: Any = ""
    name: Any = None
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: msgspec.Raw = msgspec.Raw()


class _HostArgs(msgspec.Struct, gc=False):
    correlation: int | None = None
    external_id: int | None = msgspec.field(default=None, name="External id")
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    input_strides: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Strides")
    concrete_inputs: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Concrete Inputs")
    seq_num: int | None = msgspec.field(default=None, name="Sequence number")
    python_id: int | None = msgspec.field(default=None, name="Python id")
    python_parent_id: int | None = msgspec.field(default=None, name="Python parent id")
    # NCCL host-side record_param_comms ops carry the collective too.
    collective_name: str | None = msgspec.field(default=None, name="Collective name")
    in_msg_nelems: int | None = msgspec.field(default=None, name="In msg nelems")
    out_msg_nelems: int | None = msgspec.field(default=None, name="Out msg nelems")
    group_size: int | None = msgspec.field(default=None, name="Group size")
    comm_dtype: str | None = msgspec.field(default=None, name="dtype")
    process_group: str | None = msgspec.field(default=None, name="Process Group Name")


class _GpuArgs(msgspec.Struct, gc=False):
    correlation: int | None = None
    external_id: int | None = msgspec.field(default=None, name="External id")
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
    collective_name: str | None = msgspec.field(default=None, name="Collective name")
    in_msg_nelems: int | None = msgspec.field(default=None, name="In msg nelems")
    out_msg_nelems: int | None = msgspec.field(default=None, name="Out msg nelems")
    group_size: int | None = msgspec.field(default=None, name="Group size")
    comm_dtype: str | None = msgspec.field(default=None, name="dtype")
    process_group: str | None = msgspec.field(default=None, name="Process Group Name")


class _MemoryArgs(msgspec.Struct, gc=False):
    device_type: int | None = msgspec.field(default=None, name="Device Type")
    device: int | None = msgspec.field(default=None, name="Device Id")
    addr: int | None = msgspec.field(default=None, name="Addr")
    bytes: int | None = msgspec.field(default=None, name="Bytes")
    total_allocated_bytes: int | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved_bytes: int | None = msgspec.field(default=None, name="Total Reserved")


_HOST_ARG_FIELDS = _HostArgs.__struct_fields__
_GPU_ARG_FIELDS = _GpuArgs.__struct_fields__
_RAW_JSON_FIELDS = frozenset({"input_dims", "input_types", "input_strides", "concrete_inputs"})
_MEMORY_ARG_FIELDS = _MemoryArgs.__struct_fields__

_RAW_DTYPES: dict[str, Any] = {
    "ph": pl.String,
    "name": pl.String,
    "cat": pl.String,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "ts": pl.Float64,
    "dur": pl.Float64,
    "correlation": pl.Int64,
    "external_id": pl.Int64,
    "input_dims": pl.String,
    "input_types": pl.String,
    "input_strides": pl.String,
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


def read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when it is gzip (by magic number, not by suffix)."""
    if not path.exists():
        raise TraceFormatError(path, "no such file")
    if path.is_dir():
        raise TraceFormatError(path, "is a directory, not a trace file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from exc
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceFormatError(path, f"truncated or corrupt gzip data ({exc})") from exc
    if not data.strip():
        raise TraceFormatError(path, "file is empty")
    return data


def read_trace(path: Path, data: bytes) -> RawTrace:
    """Decode ``data`` (the bytes of ``path``) into a :class:`RawTrace`."""
    header, events_raw = _split_top_level(path, data)
    warnings: list[str] = []
    state = _ChunkState(warnings)
    parts: list[pl.DataFrame] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()  # Millions of short-lived objects; the cyclic GC only slows the decode.
    try:
        for events in _decode_chunks(path, events_raw):
            part = state.consume(events)
            if part is not None and part.height:
                parts.append(part)
            del events
    finally:
        if gc_was_enabled:
            gc.enable()
    durations = _finish_durations(parts, state)
    if durations.height == 0 and not state.counter_rows and not state.memory_rows:
        raise TraceFormatError(path, "traceEvents has no events with a duration")
    raw = RawTrace(
        header=header,
        durations=durations,
        counters=_counters_frame(state.counter_rows),
        memory=_memory_frame(state.memory_rows),
        process_names=state.process_names,
        thread_names=state.thread_names,
        pid_labels=state.pid_labels,
        phase_counts=dict(state.phase_counts),
        warnings=warnings,
    )
    return raw


def _split_top_level(path: Path, data: bytes) -> tuple[dict[str, Any], msgspec.Raw]:
    stripped = data.lstrip()
    if stripped[:1] == b"[":
        # The Chrome "JSON array" form: the whole file is the events array.
        try:
            msgspec.json.decode(data, type=msgspec.Raw)  # validates the syntax
        except msgspec.DecodeError as exc:
            raise TraceFormatError(path, f"not valid JSON ({_json_reason(exc)})") from exc
        return {}, msgspec.Raw(data)
    if stripped[:1] != b"{":
        raise TraceFormatError(path, "not JSON (expected a Chrome trace object)")
    try:
        top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    except msgspec.DecodeError as exc:
        raise TraceFormatError(path, f"not valid JSON ({_json_reason(exc)})") from exc
    except msgspec.ValidationError as exc:
        raise TraceFormatError(path, "not a Chrome trace: top level is not an object") from exc
    events_raw = top.pop("traceEvents", None)
    if events_raw is None:
        raise TraceFormatError(path, "not a Chrome trace: no 'traceEvents' key")
    if bytes(memoryview(events_raw)[:1]) != b"[":
        raise TraceFormatError(path, "not a Chrome trace: 'traceEvents' is not a list")
    header: dict[str, Any] = {}
    for key, value in top.items():
        header[key] = msgspec.json.decode(value)
    return header, events_raw


def _json_reason(exc: Exception) -> str:
    text = str(exc)
    if "truncated" in text.lower():
        return "truncated: the file ends in the middle of the JSON"
    return text


def _decode_chunks(path: Path, events_raw: msgspec.Raw) -> Iterator[list[Any]]:
    view = memoryview(events_raw)
    total = len(view)
    # Slice the array's inside into pieces that each hold whole events: a cut lands only on
    # "},{" between two events. A cut inside a string or a nested list makes the piece
    # invalid JSON, which the decode below detects, and we then fall back to one piece.
    start = 1
    end_inner = total - 1
    while end_inner > start and view[end_inner : end_inner + 1] != b"]":
        end_inner -= 1
    cuts: list[tuple[int, int]] = []
    pos = start
    while end_inner - pos > CHUNK_BYTES:
        match = _BOUNDARY.search(view, pos + CHUNK_BYTES, end_inner)
        if match is None:
            break
        cuts.append((pos, match.start() + 1))
        pos = match.end() - 1
    cuts.append((pos, end_inner))
    if len(cuts) == 1:
        yield _decode_events(path, bytes(view))
        return
    try:
        first = _decode_events(path, b"[" + bytes(view[cuts[0][0] : cuts[0][1]]) + b"]")
    except _BadCut:
        yield _decode_events(path, bytes(view))
        return
    yield first
    for lo, hi in cuts[1:]:
        try:
            yield _decode_events(path, b"[" + bytes(view[lo:hi]) + b"]")
        except _BadCut:
            # Very unlikely after a good first cut; decode the rest in one piece.
            yield _decode_events(path, b"[" + bytes(view[lo:end_inner]) + b"]")
            return


class _BadCut(Exception):
    pass


def _decode_events(path: Path, buf: bytes) -> list[Any]:
    try:
        return msgspec.json.decode(buf, type=list[_Event])
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError as exc:
        raise _BadCut from exc
    try:
        items = msgspec.json.decode(buf, type=list[_LenientEvent | Any])
    except msgspec.DecodeError as exc:
        raise _BadCut from exc
    return [_coerce_event(item) for item in items]


def _coerce_event(item: Any) -> Any:
    if not isinstance(item, _LenientEvent):
        return None  # not an object: counted and skipped
    return _Event(
        ph=item.ph if isinstance(item.ph, str) else "",
        name=_as_str(item.name),
        cat=_as_str(item.cat),
        pid=item.pid if isinstance(item.pid, (int, str)) and not isinstance(item.pid, bool) else None,
        tid=item.tid if isinstance(item.tid, (int, str)) and not isinstance(item.tid, bool) else None,
        ts=_as_float(item.ts),
        dur=_as_float(item.dur),
        args=item.args,
    )


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
        self.memory_rows: list[tuple[Any, ...]] = []
        self.begin_end: list[Any] = []
        self.bad_args = 0
        self.bad_events = 0
        self.bad_times = 0

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
        durations = []
        for event in events:
            if event is None:
                self.bad_events += 1
                continue
            ph = event.ph
            if ph == "X":
                durations.append(event)
            else:
                self._other(event)
        self.phase_counts["X"] += len(durations)
        if not durations:
            return None
        return self._durations_frame(durations)

    def _other(self, event: Any) -> None:
        ph = event.ph
        self.phase_counts[ph] += 1
        if ph in ("B", "E"):
            self.begin_end.append(event)
        elif ph == "C":
            self._counter(event)
        elif ph in ("i", "I", "n") and event.name == "[memory]":
            self._memory(event)
        elif ph == "M":
            self._metadata(event)

    def _decode_args(self, raw: msgspec.Raw) -> Any:
        if not len(raw):
            return None
        try:
            return msgspec.json.decode(raw)
        except msgspec.DecodeError:
            self.bad_args += 1
            return None

    def _counter(self, event: Any) -> None:
        args = self._decode_args(event.args)
        ts = event.ts
        if not isinstance(args, dict) or ts is None or event.name is None:
            return
        pid = self.pid_of(event.pid)
        for series, value in args.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                value_f = float(value)
                if math.isfinite(value_f):
                    self.counter_rows.append((ts, pid, event.name, str(series), value_f))

    def _memory(self, event: Any) -> None:
        if event.ts is None or not len(event.args):
            return
        try:
            args = msgspec.json.decode(event.args, type=_MemoryArgs)
        except (msgspec.DecodeError, msgspec.ValidationError):
            self.bad_args += 1
            return
        self.memory_rows.append(
            (event.ts, self.pid_of(event.pid), self.pid_of(event.tid))
            + tuple(getattr(args, name) for name in _MEMORY_ARG_FIELDS)
        )

    def _metadata(self, event: Any) -> None:
        if event.name not in ("process_name", "thread_name"):
            return
        args = self._decode_args(event.args)
        if not isinstance(args, dict) or not isinstance(args.get("name"), str):
            return
        pid = self.pid_of(event.pid)
        if event.name == "process_name":
            self.process_names[pid] = args["name"]
        else:
            self.thread_names[(pid, self.pid_of(event.tid))] = args["name"]

    def _durations_frame(self, events: list[Any]) -> pl.DataFrame:
        pid_of = self.pid_of
        columns: dict[str, list[Any]] = {
            "ph": ["X"] * len(events),
            "name": [e.name for e in events],
            "cat": [e.cat for e in events],
            "pid": [p if type(p) is int else pid_of(p) for p in (e.pid for e in events)],
            "tid": [t if type(t) is int else pid_of(t) for t in (e.tid for e in events)],
            "ts": [e.ts for e in events],
            "dur": [e.dur for e in events],
        }
        is_gpu = [e.cat in _HOST_CATS_GPU for e in events]
        host_idx = [i for i, gpu in enumerate(is_gpu) if not gpu]
        gpu_idx = [i for i, gpu in enumerate(is_gpu) if gpu]
        host_args = self._batch_args([events[i].args for i in host_idx], _HostArgs)
        gpu_args = self._batch_args([events[i].args for i in gpu_idx], _GpuArgs)
        n = len(events)
        for name in _RAW_DTYPES:
            if name in columns:
                continue
            col: list[Any] = [None] * n
            if name in _HOST_ARG_FIELDS:
                values = [getattr(a, name) for a in host_args]
                if name in _RAW_JSON_FIELDS:
                    values = [bytes(v).decode("utf-8", "replace") if len(v) else None for v in values]
                for i, v in zip(host_idx, values, strict=True):
                    col[i] = v
            if name in _GPU_ARG_FIELDS:
                for i, v in zip(gpu_idx, [getattr(a, name) for a in gpu_args], strict=True):
                    col[i] = v
            columns[name] = col
        return pl.DataFrame(columns, schema=_RAW_DTYPES, strict=False)

    def _batch_args(self, raws: list[msgspec.Raw], struct: type[Any]) -> list[Any]:
        """Decode many events' args in one call; on a type mismatch, one by one, leniently."""
        empty = struct()
        if not raws:
            return []
        joined = b"[" + b",".join(r if len(r) else b"null" for r in raws) + b"]"
        try:
            decoded = msgspec.json.decode(joined, type=list[struct | None])
            return [empty if a is None else a for a in decoded]
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
        return [self._one_args(r, struct, empty) for r in raws]

    def _one_args(self, raw: msgspec.Raw, struct: type[Any], empty: Any) -> Any:
        if not len(raw):
            return empty
        try:
            return msgspec.json.decode(raw, type=struct)
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
        loose = self._decode_args(raw)
        if not isinstance(loose, dict):
            self.bad_args += 1
            return empty
        # Keep the fields whose values have the right type; drop the rest with a count.
        kept: dict[str, Any] = {}
        for key in struct.__struct_encode_fields__:
            if key not in loose:
                continue
            try:
                msgspec.convert({key: loose[key]}, type=struct)
            except msgspec.ValidationError:
                self.bad_args += 1
                continue
            kept[key] = loose[key]
        return msgspec.convert(kept, type=struct)


def _begin_end_frame(state: _ChunkState) -> pl.DataFrame | None:
    """Pair B/E events per (pid, tid) as a stack; unmatched ones are counted, not invented."""
    if not state.begin_end:
        return None
    stacks: dict[tuple[int, int], list[Any]] = {}
    rows: list[Any] = []
    unmatched = 0
    ordered = sorted(
        (e for e in state.begin_end if e.ts is not None), key=lambda e: (e.ts, e.ph != "E")
    )
    for event in ordered:
        key = (state.pid_of(event.pid), state.pid_of(event.tid))
        if event.ph == "B":
            stacks.setdefault(key, []).append(event)
            continue
        stack = stacks.get(key)
        if not stack:
            unmatched += 1
            continue
        begin = stack.pop()
        rows.append(
            _Event(
                ph="X",
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
    return state._durations_frame(rows)


def _finish_durations(parts: list[pl.DataFrame], state: _ChunkState) -> pl.DataFrame:
    paired = _begin_end_frame(state)
    if paired is not None:
        parts.append(paired)
    if state.bad_events:
        state.warnings.append(f"{state.bad_events} entries of traceEvents are not objects and were skipped")
    if state.bad_args:
        state.warnings.append(f"{state.bad_args} events had malformed args that were ignored")
    if not parts:
        return pl.DataFrame(schema=_RAW_DTYPES)
    return pl.concat(parts, how="vertical", rechunk=True)


def _counters_frame(rows: list[tuple[float, int, str, str, float]]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={"ts": pl.Float64, "pid": pl.Int64, "name": pl.String, "series": pl.String, "value": pl.Float64},
        orient="row",
    )


def _memory_frame(rows: list[tuple[Any, ...]]) -> pl.DataFrame:
    schema = {"ts": pl.Float64, "pid": pl.Int64, "tid": pl.Int64} | {
        name: pl.Int64 for name in _MEMORY_ARG_FIELDS
    }
    return pl.DataFrame(rows, schema=schema, orient="row")

