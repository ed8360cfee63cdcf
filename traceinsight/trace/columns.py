"""Decoded events → polars frames: durations by the args their cat calls for, counters,
memory events, process/thread names, and B/E pairs matched across chunks."""

from __future__ import annotations

import math
from collections import Counter
from operator import attrgetter
from typing import Any

import msgspec
import polars as pl

from traceinsight.trace.events import (
    BeginEvent,
    CounterEvent,
    DurationEvent,
    EndEvent,
    InstantEvent,
    MetadataEvent,
)
from traceinsight.trace.lenient import Coerced
from traceinsight.trace.schema import GPU_KINDS, KIND_BY_CAT

# Kineto categories of events on a device timeline; their args are decoded as GPU args.
_GPU_CATS = frozenset(cat for cat, kind in KIND_BY_CAT.items() if kind in GPU_KINDS)

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
    "coll_seq",
)
_HOST_ARG_FIELDS = ("correlation", "external_id", "python_id", "python_parent_id", "launch_kernel", "grid")
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
    "coll_seq",
    "wait_on_stream",
    "wait_on_event_correlation",
)
_GROUP_FIELDS = (_OP_ARG_FIELDS, _HOST_ARG_FIELDS, _GPU_ARG_FIELDS)
_RAW_JSON_FIELDS = frozenset({"input_dims", "input_types", "concrete_inputs"})
_LIST3_FIELDS = frozenset({"grid", "block"})
# memory frame column <- EventArgs field
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
    "launch_kernel": pl.Categorical,
    "collective_name": pl.String,
    "in_msg_nelems": pl.Int64,
    "out_msg_nelems": pl.Int64,
    "group_size": pl.Int64,
    "comm_dtype": pl.String,
    "process_group": pl.String,
    "coll_seq": pl.Int64,
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
    "wait_on_stream": pl.Int64,
    "wait_on_event_correlation": pl.Int64,
}

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# A dur beyond ±2**62 ns (~146 years) cannot be real, and in ns it would not fit an Int64:
# such a value becomes null, which the linker reports and treats as instantaneous.
_MAX_DUR_US = 2**62 / 1000.0
_EVENT_FIELD_NAMES = ("name", "cat", "pid", "tid", "ts", "dur", "args")
_PHASE = attrgetter("PH")
_INSTANT_TYPES = frozenset({InstantEvent, *InstantEvent.__subclasses__()})
MEMORY_SCHEMA = {"ts": pl.Float64, "pid": pl.Int64, "tid": pl.Int64} | {
    name: pl.Int64 for name in _MEMORY_ARG_FIELDS
}
# Which fields become columns, by the event's cat: 0 cpu op, 1 other host, 2 GPU.
_GROUP_BY_CAT: dict[str | None, int] = {"cpu_op": 0, "operator": 0}
_GROUP_BY_CAT.update((cat, 2) for cat in _GPU_CATS)


class ChunkState:
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
        if isinstance(events, Coerced):
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
            if type(event) is DurationEvent:
                appenders[group_of(event.cat, 1)](event)
            else:
                other(event)
        if others:
            counts = Counter(map(_PHASE, others))
            self.phase_counts.update(counts)
            if counts["B"] or counts["E"]:
                self.begin_end.extend(e for e in others if type(e) in (BeginEvent, EndEvent))
            for event in [e for e in others if type(e) is CounterEvent] if counts["C"] else ():
                self._counter(event)
            for event in [e for e in others if type(e) is MetadataEvent] if counts["M"] else ():
                self._metadata(event)
            if counts["i"] or counts["I"] or counts["n"]:
                self._memory(
                    [e for e in others if type(e) in _INSTANT_TYPES and e.name == "[memory]"]
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
        self.memory_parts.append(pl.DataFrame(columns, schema=MEMORY_SCHEMA, strict=False))

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
        raw_json: dict[str, list[msgspec.Raw]] = {}
        for name, values in zip(fields, _attributes(args, fields), strict=True):
            if name in _RAW_JSON_FIELDS:
                raw_json[name] = values
                columns[name] = None  # filled below, keeping the column order
            elif values.count(None) == len(values):
                continue  # left out: the stacked frame gets it as nulls (see finish_durations)
            elif name in _LIST3_FIELDS:
                columns[name] = _list3_column(values)
            else:
                columns[name] = values
        if raw_json:
            columns.update(zip(raw_json, _raw_json_columns(list(raw_json.values())), strict=True))
        schema = {name: _RAW_DTYPES[name] for name in columns}
        return pl.DataFrame(columns, schema=schema, strict=False)


# A JSON string (kept as it is, as group 1) or a run of whitespace outside strings (dropped).
_JSON_STRING_OR_SPACE = r'("(?:[^"\\]|\\.)*")|\s+'


def _attributes(objects: list[Any], names: tuple[str, ...]) -> list[list[Any]]:
    """One list per attribute name, each filled by a C-level map: no tuple per object, which
    makes this several times faster than transposing rows with ``zip(*rows)``."""
    return [list(map(attrgetter(name), objects)) for name in names]


def _raw_json_columns(columns: list[list[msgspec.Raw]]) -> list[pl.Series]:
    """Raw JSON snippets (lists of the same length) as string columns, built with one join and
    one split in polars for all of them (no Python str per row); an absent value (empty Raw)
    becomes null.

    NUL cannot occur unescaped in JSON text, so it is a safe separator.
    """
    n = len(columns[0])
    if n == 0:
        return [pl.Series(dtype=pl.String) for _ in columns]
    text = b"\x00".join([b"\x00".join(values) for values in columns]).decode("utf-8", "replace")
    split = pl.Series([text]).str.split("\x00").explode()
    values = pl.select(pl.when(split.str.len_bytes() > 0).then(split)).to_series()
    return [values.slice(i * n, n) for i in range(len(columns))]


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


def _begin_end_frame(state: ChunkState) -> pl.DataFrame | None:
    """Pair B/E events per (pid, tid) as a stack; unmatched ones are counted, not invented."""
    if not state.begin_end:
        return None
    stacks: dict[tuple[int, int], list[Any]] = {}
    rows: list[Any] = []
    unmatched = 0
    ordered = sorted(
        (e for e in state.begin_end if e.ts is not None),
        key=lambda e: (e.ts, type(e) is not EndEvent),
    )
    for event in ordered:
        key = (state.pid_of(event.pid), state.pid_of(event.tid))
        if type(event) is BeginEvent:
            stacks.setdefault(key, []).append(event)
            continue
        stack = stacks.get(key)
        if not stack:
            unmatched += 1
            continue
        begin = stack.pop()
        rows.append(
            DurationEvent(
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


def merge_pieces(
    pieces: list[tuple[pl.DataFrame | None, ChunkState]], warnings: list[str]
) -> tuple[ChunkState, list[pl.DataFrame]]:
    """One state and the duration frames of pieces decoded apart, in piece order
    (``pieces`` is emptied).

    Each piece numbered the text pids it met on its own; they are renumbered here by label
    (-2, -3, ... in sorted order), so the ids do not depend on how the pieces were shared
    out between processes, nor on the order of a set.
    """
    merged = ChunkState(warnings)
    labels = sorted({label for _, state in pieces for label in state._str_ids})
    merged._str_ids = {label: -(i + 2) for i, label in enumerate(labels)}
    merged.pid_labels = {known: label for label, known in merged._str_ids.items()}
    parts: list[pl.DataFrame] = []
    pieces.reverse()
    while pieces:  # emptied as it goes: the merged parts are the only references left
        part, state = pieces.pop()
        mapping = {
            local: merged._str_ids[label]
            for label, local in state._str_ids.items()
            if local != merged._str_ids[label]
        }
        merged.phase_counts.update(state.phase_counts)
        merged.bad_args += state.bad_args
        merged.bad_events += state.bad_events
        merged.begin_end.extend(state.begin_end)
        if mapping:
            remap = mapping.get
            merged.counter_rows.extend(
                (ts, remap(pid, pid), name, series, value)
                for ts, pid, name, series, value in state.counter_rows
            )
            merged.memory_parts.extend(_remap_ids(m, mapping) for m in state.memory_parts)
            merged.process_names.update((remap(k, k), v) for k, v in state.process_names.items())
            merged.thread_names.update(
                ((remap(p, p), remap(t, t)), v) for (p, t), v in state.thread_names.items()
            )
            if part is not None:
                part = _remap_ids(part, mapping)
        else:
            merged.counter_rows.extend(state.counter_rows)
            merged.memory_parts.extend(state.memory_parts)
            merged.process_names.update(state.process_names)
            merged.thread_names.update(state.thread_names)
        if part is not None and part.height:
            parts.append(part)
    return merged, parts


def _remap_ids(frame: pl.DataFrame, mapping: dict[int, int]) -> pl.DataFrame:
    # Column by column, in place: a with_columns would rechunk (copy) the whole frame.
    lowest, highest = min(mapping), max(mapping)
    for name in ("pid", "tid"):
        at = frame.get_column_index(name)
        column = frame.to_series(at)
        low, high = column.min(), column.max()
        # most pieces name their text pids in metadata only: nothing to replace in the frame
        if isinstance(low, int) and isinstance(high, int) and low <= highest and high >= lowest:
            frame.replace_column(at, column.replace(mapping))
    return frame


def finish_durations(parts: list[pl.DataFrame], state: ChunkState) -> pl.DataFrame:
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
    # Stacked as chunks (no copy); a column no piece had is made as nulls.
    stacked = pl.concat(parts, how="diagonal", rechunk=False)
    parts.clear()
    n = stacked.height
    present = set(stacked.columns)
    full = pl.DataFrame(
        [
            (_usable_dur(stacked.get_column(name)) if name == "dur" else stacked.get_column(name))
            if name in present
            else pl.Series(name, dtype=dtype).extend_constant(None, n)
            for name, dtype in _RAW_DTYPES.items()
        ]
    )
    del stacked
    return full.with_columns(_compact_json(full.get_column(name)) for name in _RAW_JSON_FIELDS)


def _usable_dur(dur: pl.Series) -> pl.Series:
    if not (dur.abs() >= _MAX_DUR_US).any():
        return dur
    return pl.select(pl.when(dur.abs() < _MAX_DUR_US).then(dur)).to_series().alias("dur")


def counters_frame(rows: list[tuple[float, int, str, str, float]]) -> pl.DataFrame:
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
