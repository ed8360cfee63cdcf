"""Transformations: typed changes to a graph's durations and waits, applied together.

Each transformation says what it changes and nothing else: durations of the rest of the
trace stay as recorded (the replay's assumption). A finding can carry one and get its saving
from :func:`traceinsight.analysis.whatif.api.saving_ns`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import ClassVar

import numpy as np
import polars as pl

from traceinsight.analysis.classify import FAMILIES, classify_names
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.host_names import name_matches
from traceinsight.analysis.whatif.graph import (
    GPU_COMM,
    SEG_LAUNCH,
    SEG_RUNTIME,
    SEG_SYNC,
    StepGraph,
    rows_of,
)
from traceinsight.analysis.whatif.profiler_windows import windows
from traceinsight.analysis.whatif.replay import Durations


class TransformError(ValueError):
    """A transformation that cannot be applied as written (bad pattern, factor or family)."""


def _regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise TransformError(f"bad regular expression {pattern!r}: {exc}") from exc
    return pattern


def _factor(value: float, what: str) -> float:
    if not np.isfinite(value) or value < 0:
        raise TransformError(f"{what} must be a finite number ≥ 0, got {value}")
    return float(value)


def name_hits(names: pl.Series, pattern: str) -> np.ndarray:
    """Whether each of ``names`` matches ``pattern`` (a missing name reads as ""): the
    expression runs once per distinct name (``name_matches``)."""
    frame = names.rename("name").to_frame()
    out: np.ndarray = frame.select(name_matches(frame, _regex(pattern)).fill_null(False)).to_series().to_numpy()
    if re.search(pattern, ""):
        out = out | names.is_null().to_numpy()
    return out


def memoized(graph: StepGraph, what: str, pattern: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """``compute()`` once per graph, ``what`` and ``pattern`` (the findings replay the same
    transformations several times: alone, on top of others, all together)."""
    key = (what, pattern)
    found = graph.memo.get(key)
    if found is None:
        found = compute()
        found.flags.writeable = False
        graph.memo[key] = found
    return found


def _gpu_selected(graph: StepGraph, target: str) -> np.ndarray:
    return memoized(graph, "gpu", target, lambda: _gpu_selected_now(graph, target))


def _gpu_selected_now(graph: StepGraph, target: str) -> np.ndarray:
    """Device nodes named by ``target``: a kernel family (``gemm``) or ``name~REGEX``."""
    names = graph.gpu_work["name"].cast(pl.String).fill_null("")
    if target.startswith("name~"):
        return name_hits(names, target[5:])
    if target not in FAMILIES:
        raise TransformError(f"unknown kernel family {target!r}: use one of {', '.join(FAMILIES)}, or name~REGEX")
    unique = names.unique()
    families = classify_names(unique).select("name", "family")
    fam = pl.DataFrame({"name": names}).join(families, on="name", how="left", maintain_order="left")["family"]
    return (fam == target).fill_null(False).to_numpy()


def _segments_in(graph: StepGraph, pattern: str | None) -> np.ndarray:
    """Host segments inside a span whose name matches ``pattern`` (all when None), on its thread."""
    if pattern is None:
        return np.ones(graph.seg_node.size, dtype=bool)
    return memoized(graph, "segments_in", pattern, lambda: _segments_in_now(graph, pattern))


def _segments_in_now(graph: StepGraph, pattern: str) -> np.ndarray:
    """:func:`_segments_in`, computed.

    Segments are sorted by thread and start, so with (thread, time) folded into one sortable
    key a binary search finds, for every segment, the last merged span starting at or before
    it on its thread."""
    if pattern is None:
        return np.ones(graph.seg_node.size, dtype=bool)
    host = graph.host_events
    mask = np.zeros(graph.seg_node.size, dtype=bool)
    hit = name_hits(host["name"], pattern)
    if not hit.any() or graph.seg_node.size == 0:
        return mask
    seg_thread = graph.host_thread[graph.seg_node]
    heads = np.flatnonzero(np.concatenate([[True], seg_thread[1:] != seg_thread[:-1]]))
    ids = host["id"].to_numpy()
    head_rows = rows_of(ids, graph.seg_owner[heads])
    threads = pl.DataFrame({
        "pid": host["pid"].to_numpy()[head_rows], "tid": host["tid"].to_numpy()[head_rows], "thread": seg_thread[heads],
    })
    spans = host.filter(pl.Series(hit)).select("pid", "tid", pl.col("ts_ns").alias("start_ns"), "end_ns").join(
        threads.cast({"pid": host.schema["pid"], "tid": host.schema["tid"]}), on=["pid", "tid"], how="inner"
    )
    merged = intervals.union(spans, by=["thread"])
    if merged.height == 0:
        return mask
    span_start, span_end = merged["start_ns"].to_numpy(), merged["end_ns"].to_numpy()
    t0 = min(int(graph.seg_start_ns.min()), int(span_start.min()))
    width = max(int(graph.seg_start_ns.max()), int(span_end.max())) - t0 + 1
    span_key = merged["thread"].to_numpy().astype(np.int64) * width + (span_start - t0)
    seg_key = seg_thread.astype(np.int64) * width + (graph.seg_start_ns - t0)
    at = np.searchsorted(span_key, seg_key, side="right") - 1
    ok = at >= 0
    j = np.maximum(at, 0)
    same = merged["thread"].to_numpy()[j] == seg_thread
    mask[:] = ok & same & (graph.seg_start_ns < span_end[j])
    return mask


def owners_match(graph: StepGraph, owners: np.ndarray, pattern: str) -> np.ndarray:
    """Whether the host event of each id in ``owners`` has a name matching ``pattern``."""
    hit = memoized(graph, "host_names", pattern, lambda: name_hits(graph.host_events["name"], pattern))
    rows = rows_of(graph.host_events["id"].to_numpy(), owners)
    out: np.ndarray = (rows >= 0) & hit[np.maximum(rows, 0)] if hit.size else np.zeros(owners.size, dtype=bool)
    return out


def scale_host(d: Durations, mask: np.ndarray, factor: float, gap_mask: np.ndarray | None = None) -> Durations:
    """Host segments in ``mask`` take ``factor`` × their time; so do the untraced gaps before
    the segments in ``gap_mask`` (``mask`` when None)."""
    gaps = mask if gap_mask is None else gap_mask
    return replace(
        d,
        seg_dur_ns=np.where(mask, np.rint(d.seg_dur_ns * factor).astype(np.int64), d.seg_dur_ns),
        seg_gap_ns=np.where(gaps, np.rint(d.seg_gap_ns * factor).astype(np.int64), d.seg_gap_ns),
    )


@dataclass(frozen=True)
class Transformation:
    """A change to durations or waits; subclasses implement ``apply`` and ``describe``."""

    kind: ClassVar[str] = "transformation"

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def to_dict(self) -> dict[str, object]:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {"kind": self.kind, **values, "description": self.describe()}


def cached_hash(self: Transformation) -> int:
    """The hash of a transformation's fields, computed once per object. A replay is memoised by
    its tuple of transformations, and some carry tens of thousands of values (the kernel chains
    a fusion merges, the allocator events' times): hashing those on every lookup cost more than
    some replays. Classes holding such tuples set ``__hash__ = cached_hash`` (the dataclass
    then keeps it)."""
    found: int | None = self.__dict__.get("_hash")
    if found is None:
        found = hash((type(self), *(getattr(self, f.name) for f in fields(self))))
        # a frozen dataclass: the cache goes in the instance's dict, outside its fields
        self.__dict__["_hash"] = found
    return found


@dataclass(frozen=True)
class ScaleKernels(Transformation):
    """Device work of a family (``gemm``) or matching ``name~REGEX`` takes ``factor`` × its time."""

    kind: ClassVar[str] = "scale"
    target: str
    factor: float

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        factor = _factor(self.factor, "a scale factor")
        sel = _gpu_selected(graph, self.target)
        dur = np.where(sel, np.rint(d.gpu_dur_ns * factor).astype(np.int64), d.gpu_dur_ns)
        return replace(d, gpu_dur_ns=dur)

    def describe(self) -> str:
        return f"device work {self.target} × {self.factor:g}"


@dataclass(frozen=True)
class Remove(Transformation):
    """Host spans matching ``pattern`` (with what they contain) and device work of that name
    take no time, and a synchronising call among them no longer waits."""

    kind: ClassVar[str] = "remove"
    pattern: str
    # spans inside which matching calls stay (a collective's own syncs, staging its tensors,
    # are the collective's: removing them is the communication fix's business)
    keep_inside: str | None = None

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        segs = _segments_in(graph, self.pattern)
        if self.keep_inside is not None:
            segs = segs & ~_segments_in(graph, self.keep_inside)
        nodes_hit = segs[graph.host_seg]
        gpu = memoized(graph, "gpu_names", self.pattern, lambda: name_hits(graph.gpu_work["name"], self.pattern))
        # the gap before a removed segment stays (it is time of whatever came before)
        return replace(
            d,
            seg_dur_ns=np.where(segs, 0, d.seg_dur_ns),
            seg_gap_ns=np.where(segs & np.roll(segs, 1), 0, d.seg_gap_ns),
            sync_on=d.sync_on & ~nodes_hit,
            gpu_dur_ns=np.where(gpu, 0, d.gpu_dur_ns),
        )

    def describe(self) -> str:
        return f"remove {self.pattern}" + (f" (not inside {self.keep_inside})" if self.keep_inside else "")

    def to_dict(self) -> dict[str, object]:
        out = super().to_dict()
        if self.keep_inside is None:
            out.pop("keep_inside")
        return out


@dataclass(frozen=True)
class ShrinkHost(Transformation):
    """Host time (ops, Python, untraced gaps; not the waits of syncs) inside spans matching
    ``region`` (all host time when None) takes ``factor`` × its time."""

    kind: ClassVar[str] = "host"
    region: str | None
    factor: float

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        factor = _factor(self.factor, "a host factor")
        return scale_host(d, _segments_in(graph, self.region) & (graph.seg_class != SEG_SYNC), factor)

    def describe(self) -> str:
        return f"host time in {self.region or 'every span'} × {self.factor:g}"


@dataclass(frozen=True)
class MakeAsync(Transformation):
    """Blocking calls matching ``pattern`` (default: copies) stop waiting for the device."""

    kind: ClassVar[str] = "async"
    pattern: str = r"(?i)memcpy"

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        hit = owners_match(graph, graph.seg_owner[graph.host_seg], self.pattern)
        return replace(d, sync_on=d.sync_on & ~hit)

    def describe(self) -> str:
        return f"make {self.pattern} asynchronous"


@dataclass(frozen=True)
class CollapseLaunches(Transformation):
    """CUDA graphs: the host cost of each launch call → 0 (one graph launch per step remains
    negligible); device work keeps its duration and stream order."""

    kind: ClassVar[str] = "graphs"

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        return replace(d, seg_dur_ns=np.where(graph.seg_class == SEG_LAUNCH, 0, d.seg_dur_ns))

    def describe(self) -> str:
        return "collapse launches (CUDA graphs)"


@dataclass(frozen=True)
class OverlapComm(Transformation):
    """Communication kernels are hidden behind compute: they take no time on their stream."""

    kind: ClassVar[str] = "overlap_comm"

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        return replace(d, gpu_dur_ns=np.where(graph.gpu_class == GPU_COMM, 0, d.gpu_dur_ns))

    def describe(self) -> str:
        return "communication fully overlapped"


def apply_all(graph: StepGraph, transformations: tuple[Transformation, ...], d: Durations | None = None) -> Durations:
    """The durations after every transformation in order (each sees the previous ones' result).

    From the recorded durations, the result of the first transformation is kept for the next
    call (one, the last): the findings are priced on top of one base (the profiler's cost
    taken out), applied first to every tuple they replay. Transformations return new arrays
    and never write into the ones they are given, so the kept durations stay as computed."""
    rest = transformations
    if d is None and transformations:
        first = transformations[0]
        kept = graph.memo.get(("first_applied",))
        if kept is not None and kept[0] == first:
            out: Durations = kept[1]
        else:
            out = first.apply(graph, Durations.recorded(graph))
            for array in (out.seg_dur_ns, out.seg_gap_ns, out.gpu_dur_ns, out.sync_on, out.wait_on):
                array.flags.writeable = False  # shared from now on: a write would be a bug, loudly
            graph.memo[("first_applied",)] = (first, out)
        rest = transformations[1:]
    else:
        out = d or Durations.recorded(graph)
    for t in rest:
        out = t.apply(graph, out)
    return out


# Classes of what the profiler records, each with its own host cost (see RemoveProfilerCost).
PROFILER_EVENT_CLASSES = ("op", "runtime", "python", "memory")
# The profiler's cost is spread over the host time near where it was spent: windows this long.
PROFILER_COST_WINDOW_NS = 1_000_000
# What a runtime call (a kernel launch, a copy or memset issued) costs the host at the least
# without the profiler, its dispatch included: taking the profiler's cost out never leaves a
# call shorter than this. Below the un-profiled step per launch
# of every workload recorded for the per-event cost (9.8 µs at the least, an elementwise loop
# bound by its launches, docs/window.md), so it never holds back more than such a step spends.
HOST_FLOOR_NS_PER_CALL = 4_000


@dataclass(frozen=True)
class RemoveProfilerCost(Transformation):
    """The profiler's own host time taken out: every recorded event costs the host
    ``per_event_ns`` of its class (``op``: CPU ops and annotations, ``runtime``: runtime and
    driver calls, ``python``: with_stack's Python frames, ``memory``: profile_memory's
    allocator events, at ``memory_at``). Whether shapes were recorded is the trace's, not the
    event's: the caller gives ``op`` the cost that goes with it.

    Where the time goes: the profiler's callbacks run around each event (before its start
    stamp, after its end stamp) and inside the calls it instruments, so its cost is not inside
    any one span but in the host time close to the event. Each thread's host time is cut into
    windows of ``window_ns``; the cost of the events that start in a window is taken out of
    that window's host time (segments and untraced gaps; not the time of synchronising calls,
    which wait), each piece shrunk by the same share. A runtime call's time is the driver's (a
    ``cudaMalloc``, a ``cudaFree`` that waits, a launch): of it only its own per-event cost can
    go, and never below ``HOST_FLOOR_NS_PER_CALL``. What a window cannot hold is taken from the
    next windows of its thread."""

    kind: ClassVar[str] = "profiler_cost"
    per_event_ns: tuple[tuple[str, float], ...]
    # (pid, tid, ts_ns) of profile_memory's events; empty without them
    memory_at: tuple[tuple[int, int, int], ...] = ()
    window_ns: int = PROFILER_COST_WINDOW_NS
    __hash__ = cached_hash

    def _costs(self) -> dict[str, float]:
        costs = dict(self.per_event_ns)
        unknown = set(costs) - set(PROFILER_EVENT_CLASSES)
        if unknown:
            raise TransformError(f"unknown profiler event class(es) {sorted(unknown)}: use {', '.join(PROFILER_EVENT_CLASSES)}")
        if self.window_ns <= 0:
            raise TransformError(f"the window must be > 0 ns, got {self.window_ns}")
        return {k: _factor(v, f"the cost of a {k} event") for k, v in costs.items()}

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        costs = self._costs()
        if graph.seg_owner.size == 0:
            return d
        # the events and segments of each thread's windows are counted once per graph
        # (profiler_windows); here only the costs and the host time that can shrink vary
        memory = self.memory_at if costs.get("memory", 0.0) > 0 else ()
        found = windows(graph, self.window_ns, memory)
        frame = found.frame
        cost = pl.lit(0.0, pl.Float64)
        for c in PROFILER_EVENT_CLASSES:
            cost = cost + pl.col(f"n_{c}") * costs.get(c, 0.0)
        waits = graph.seg_class == SEG_SYNC
        # A runtime call's recorded time is the driver's (a cudaMalloc, a cudaFree that waits
        # for the device, a launch): the profiler adds its per-call cost to it, no more, and
        # no call is left shorter than HOST_FLOOR_NS_PER_CALL. The rest of the cost is in the
        # dispatch around the operators: their own segments and the gaps between segments.
        calls = (graph.seg_class == SEG_LAUNCH) | (graph.seg_class == SEG_RUNTIME)
        call_cut = np.clip(np.minimum(d.seg_dur_ns - HOST_FLOOR_NS_PER_CALL, costs.get("runtime", 0.0)), 0, None)
        shrinkable = np.where(waits, 0, np.where(calls, call_cut, d.seg_dur_ns))
        # the host time that can shrink: each segment and the gap before it, by the window it starts in
        work = d.seg_gap_ns + shrinkable
        counted = found.seg_window >= 0
        # integer ns summed in float64: exact below 2**53 ns (104 days) per window
        work_w = np.bincount(found.seg_window[counted], weights=work[counted], minlength=frame.height)
        # Per thread and window, in time order: the cost wanted there plus what earlier windows
        # could not take (their host time was shorter than their cost), cut from this window's
        # host time: carry_w = max(0, carry_{w-1} + cost_w - work_w) (Lindley's recursion,
        # solved with a cumulative minimum), so that no cost is lost while host time follows.
        # Where the profiler's events crowd a window (with_stack's frames around a loop of
        # small ops), the cost it cannot take there is carried on to the next windows instead
        # of taking the loop's launches with it.
        share = (
            frame.select("pid", "tid", pl.Series("room", work_w), cost.alias("cost"))
            .with_columns(excess=(pl.col("cost") - pl.col("room")).cum_sum().over("pid", "tid"))
            .with_columns(carry=pl.col("excess") - pl.min_horizontal(pl.lit(0.0), pl.col("excess").cum_min().over("pid", "tid")))
            .with_columns(carried_in=pl.col("carry").shift(1, fill_value=0.0).over("pid", "tid"))
            .with_columns(cut=pl.col("cost") + pl.col("carried_in") - pl.col("carry"))
            .with_columns(keep=pl.when(pl.col("room") > 0).then((1 - pl.col("cut") / pl.col("room")).clip(0, 1)).otherwise(1.0))
        )
        keep_w = share["keep"].fill_null(1.0).to_numpy()
        keep = np.where(counted, keep_w[np.maximum(found.seg_window, 0)], 1.0)
        return replace(
            d,
            seg_gap_ns=np.rint(d.seg_gap_ns * keep).astype(np.int64),
            seg_dur_ns=np.rint(d.seg_dur_ns - shrinkable * (1.0 - keep)).astype(np.int64),
        )

    def describe(self) -> str:
        parts = ", ".join(f"{k} {v / 1e3:.2f} µs" for k, v in self.per_event_ns)
        return f"remove the profiler's host cost per event ({parts})"

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "per_event_ns": dict(self.per_event_ns), "memory_events": len(self.memory_at),
                "window_ns": self.window_ns, "description": self.describe()}
