"""Perfetto export: the original timeline plus what the analyses found, as a ``.pftrace``.

Host threads and GPU streams keep their events as slices; extra tracks under
"traceinsight" show idle gaps named by cause, bound labels per region and device-side steps;
NVML/GPM samples become counter tracks. The file opens in ui.perfetto.dev and in
``trace_processor``.

Perfetto wants properly nested BEGIN/END pairs per track. Host events already nest; anything
that overlaps without nesting (rare: clock skew, unusual annotations) goes on an extra lane
track next to the original instead of being dropped or clipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceinsight.analysis.report import Report
from traceinsight.analysis.sections.bound import BoundResult
from traceinsight.analysis.sections.gaps import GapsResult
from traceinsight.analysis.sections.steps import StepsResult
from traceinsight.render.parts import section_of
from traceinsight.trace.model import Trace
from traceinsight.trace.schema import GPU_KINDS

SEQUENCE_ID = 0x7A1
ROOT_NAME = "traceinsight"
_INT64_MAX = 2**63 - 1


@dataclass
class Slice:
    ts: int
    end: int
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    # Perfetto flows: slices sharing an id are joined by an arrow, earliest first.
    flow_ids: tuple[int, ...] = ()


_FLOWS = "\x00flow_ids"  # the begin event's payload key carrying its flow ids to serialize()


@dataclass
class _Track:
    uuid: int
    name: str
    parent: int | None = None
    pid: int | None = None
    tid: int | None = None
    process_name: str | None = None
    counter_unit: str | None = None
    rank: int | None = None


def assign_lanes(slices: list[Slice]) -> list[list[tuple[Slice, int]]]:
    """Split slices into lanes where each lane nests properly; each slice gets its depth."""
    lanes: list[list[tuple[Slice, int]]] = []
    stacks: list[list[int]] = []
    for s in sorted(slices, key=lambda s: (s.ts, -(s.end - s.ts))):
        for lane, stack in zip(lanes, stacks, strict=True):
            while stack and stack[-1] <= s.ts:
                stack.pop()
            if not stack or s.end <= stack[-1]:
                lane.append((s, len(stack)))
                stack.append(s.end)
                break
        else:
            lanes.append([(s, 0)])
            stacks.append([s.end])
    return lanes


class _Builder:
    def __init__(self, offset_ns: int) -> None:
        self.offset = offset_ns
        self.tracks: list[_Track] = []
        self.events: list[tuple[int, int, int, int, str, int, dict[str, Any] | float | None]] = []
        self._next = 1

    def track(self, name: str, **kw: Any) -> _Track:
        t = _Track(uuid=self._next, name=name, **kw)
        self._next += 1
        self.tracks.append(t)
        return t

    def slices(self, track: _Track, slices: list[Slice]) -> None:
        lanes = assign_lanes(slices)
        for i, lane in enumerate(lanes):
            target = track if i == 0 else self.track(f"{track.name} (overlap {i})", parent=track.parent or track.uuid)
            for s, depth in lane:
                # Sort key: time, then ends before begins, inner ends before outer ends and
                # outer begins before inner begins at the same instant.
                args = {**s.args, _FLOWS: s.flow_ids} if s.flow_ids else s.args
                self.events.append((s.ts + self.offset, 1, depth, target.uuid, s.name, 1, args))
                self.events.append((s.end + self.offset, 0, -depth, target.uuid, "", 2, None))

    def counter(self, track: _Track, ts: int, value: float) -> None:
        self.events.append((ts + self.offset, 2, 0, track.uuid, "", 4, value))

    def serialize(self) -> bytes:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
        from perfetto.trace_builder.proto_builder import TraceProtoBuilder

        builder = TraceProtoBuilder()
        first = True
        for t in self.tracks:
            packet = builder.add_packet()
            packet.trusted_packet_sequence_id = SEQUENCE_ID
            if first:
                packet.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
                first = False
            desc = packet.track_descriptor
            desc.uuid = t.uuid
            if t.parent is not None:
                desc.parent_uuid = t.parent
            if t.tid is not None and t.pid is not None:
                desc.thread.pid = t.pid
                desc.thread.tid = t.tid
                desc.thread.thread_name = t.name
            elif t.pid is not None:
                desc.process.pid = t.pid
                desc.process.process_name = t.process_name or t.name
            else:
                desc.name = t.name
            if t.counter_unit is not None:
                desc.counter.unit_name = t.counter_unit
            if t.rank is not None:
                desc.sibling_order_rank = t.rank
        for ts, _, _, uuid, name, kind, payload in sorted(self.events, key=lambda e: e[:3]):
            packet = builder.add_packet()
            packet.trusted_packet_sequence_id = SEQUENCE_ID
            packet.timestamp = ts
            ev = packet.track_event
            ev.track_uuid = uuid
            ev.type = kind
            if kind == 1:
                ev.name = name
                annotations = dict(payload or {})  # type: ignore[arg-type]
                ev.flow_ids.extend(annotations.pop(_FLOWS, ()))
                for key, value in annotations.items():
                    ann = ev.debug_annotations.add()
                    ann.name = key
                    if isinstance(value, bool) or value is None:
                        ann.string_value = str(value)
                    elif isinstance(value, int):
                        ann.int_value = value
                    elif isinstance(value, float):
                        ann.double_value = value
                    else:
                        ann.string_value = str(value)
            elif kind == 4:
                ev.double_counter_value = float(payload)  # type: ignore[arg-type]
        data: bytes = builder.serialize()
        return data


def _rows(frame: pl.DataFrame, *cols: str) -> Iterator[tuple[Any, ...]]:
    return frame.select(*cols).iter_rows()


def _host_tracks(b: _Builder, trace: Trace) -> None:
    host = trace.events.filter(~pl.col("kind").cast(pl.String).is_in(list(GPU_KINDS)) & (pl.col("dur_ns") >= 0))
    procs: dict[int, _Track] = {}
    for (pid, tid), part in host.sort("pid", "tid").group_by("pid", "tid", maintain_order=True):
        if pid not in procs:
            label = (
                trace.meta.process_names.get(int(pid))
                or trace.meta.pid_labels.get(int(pid))
                or ("profiler" if pid < 0 else f"process {pid}")
            )
            procs[pid] = b.track(label, pid=int(pid), process_name=label)
        tname = (
            trace.meta.thread_names.get(f"{pid}:{tid}")
            or (trace.meta.pid_labels.get(int(tid)) if tid < 0 else None)
            or f"thread {tid}"
        )
        track = b.track(tname, pid=int(pid), tid=int(tid))
        slices = [
            Slice(ts, end, str(name), {"kind": str(kind)} | ({"correlation": corr} if corr is not None else {}))
            for ts, end, name, kind, corr in _rows(part.with_columns(pl.col("name").cast(pl.String)), "ts_ns", "end_ns", "name", "kind", "correlation")
        ]
        b.slices(track, slices)


def _gpu_tracks(b: _Builder, trace: Trace) -> dict[int, _Track]:
    gpu = trace.events.filter(pl.col("kind").cast(pl.String).is_in(list(GPU_KINDS)) & pl.col("device").is_not_null())
    roots: dict[int, _Track] = {}
    for (device,), part in gpu.sort("device").group_by("device", maintain_order=True):
        props = trace.meta.device(int(device))
        roots[device] = b.track(f"GPU {device}" + (f" ({props.name})" if props else ""), rank=int(device))
        for (stream, is_ann), sub in part.with_columns(is_ann=pl.col("kind") == "gpu_annotation").sort("stream").group_by("stream", "is_ann", maintain_order=True):
            name = f"stream {stream}" + (" annotations" if is_ann else "")
            track = b.track(name, parent=roots[device].uuid)
            slices = [
                Slice(ts, end, str(n), {"kind": str(k)} | ({"correlation": c} if c is not None else {}))
                for ts, end, n, k, c in _rows(sub.with_columns(pl.col("name").cast(pl.String)), "ts_ns", "end_ns", "name", "kind", "correlation")
            ]
            b.slices(track, slices)
    return roots


def _analysis_tracks(b: _Builder, report: Report, gpu_roots: dict[int, _Track]) -> None:
    root = b.track(ROOT_NAME, rank=-1)
    gaps = section_of(report, GapsResult)
    if gaps is not None and gaps.available:
        frame = gaps.gaps
        for device in frame["device"].unique().sort().to_list():
            rows = frame.filter(pl.col("device") == device)
            track = b.track(f"idle gaps GPU {device}", parent=root.uuid)
            slices = [
                Slice(row["start_ns"], row["end_ns"], f"idle: {row['cause']}", {"cause": row["cause"], **{c: row[c] for c in ("culprit", "step") if row[c] is not None}})
                for row in rows.iter_rows(named=True)
            ]
            b.slices(track, slices)
    steps = section_of(report, StepsResult)
    if steps is not None and steps.available:
        track = b.track("steps (device)", parent=root.uuid)
        b.slices(track, [Slice(s, e, f"step {n}") for n, s, e in _rows(steps.steps, "step", "device_start_ns", "device_end_ns") if s is not None and e is not None and e >= s])
    bound = section_of(report, BoundResult)
    if bound is not None and bound.available:
        frame = bound.regions
        shown = ("confidence", "busy_pct", "tflops", "tbps", "pct_of_roofline")
        # Op-level regions are hundreds of host→GPU windows that overlap in a queue-deep
        # stagger; the ops themselves are on the host thread tracks already.
        for kind in [k for k in frame["kind"].unique(maintain_order=True).to_list() if k != "op"]:
            rows = frame.filter(pl.col("kind") == kind)
            track = b.track("bound regions" + (f" ({kind})" if kind else ""), parent=root.uuid)
            slices = [
                Slice(row["start_ns"], row["end_ns"], f"{row['label']}: {row['name']}", {c: row[c] for c in shown if row[c] is not None})
                for row in rows.iter_rows(named=True)
                if row["start_ns"] is not None and row["end_ns"] is not None and row["end_ns"] >= row["start_ns"]
            ]
            b.slices(track, slices)


def _counter_tracks(b: _Builder, trace: Trace, gpu_roots: dict[int, _Track]) -> None:
    counters = trace.counters.with_columns(pl.col("name").cast(pl.String), pl.col("series").cast(pl.String))
    for (name, series, device), part in counters.sort("name", "series", "device", "ts_ns").group_by("name", "series", "device", maintain_order=True):
        parent = gpu_roots.get(device) if device is not None else None
        unit = "%" if series.endswith("_pct") else series.rsplit("_", 1)[-1] if "_" in series else ""
        track = b.track(f"{name}.{series}", parent=parent.uuid if parent else None, counter_unit=unit)
        for ts, value in _rows(part, "ts_ns", "value"):
            if value is not None and value == value:
                b.counter(track, ts, float(value))


def export_perfetto(trace: Trace, report: Report | None = None) -> bytes:
    """The trace plus the report's findings as Perfetto protobuf bytes (write to ``*.pftrace``)."""
    base = trace.meta.base_time_ns or 0
    ends = [trace.events["end_ns"].max(), trace.counters["ts_ns"].max() if trace.counters.height else None]
    hi = max((int(v) for v in ends if isinstance(v, int)), default=0)
    offset = base if base + hi <= _INT64_MAX else 0
    b = _Builder(offset)
    _host_tracks(b, trace)
    gpu_roots = _gpu_tracks(b, trace)
    if report is not None:
        _analysis_tracks(b, report, gpu_roots)
    _counter_tracks(b, trace, gpu_roots)
    return b.serialize()


def track_names(data: bytes) -> list[str]:
    """Names of the tracks in a Perfetto trace (for tests and quick checks)."""
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    parsed = pb.Trace()
    parsed.ParseFromString(data)
    names = []
    for packet in parsed.packet:
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            names.append(d.name or d.thread.thread_name or d.process.process_name)
    return names


def iter_slices(data: bytes) -> Iterable[tuple[int, int, str]]:
    """(track uuid, timestamp, name) of every slice begin in a Perfetto trace."""
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    parsed = pb.Trace()
    parsed.ParseFromString(data)
    for packet in parsed.packet:
        if packet.HasField("track_event") and packet.track_event.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            yield packet.track_event.track_uuid, packet.timestamp, packet.track_event.name
