"""What-if changes to stretches of one host thread: a loop of identical launches done as one
call, and eager operators run by generated code.

A name cannot say which calls of ``aten::mul`` a loop made (the model's own calls are named the
same), so :class:`CollapseSpans` takes the loop's time spans on its thread instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from traceinsight.analysis.lib import intervals
from traceinsight.analysis.whatif.graph import SEG_LAUNCH, SEG_SYNC, StepGraph, rows_of
from traceinsight.analysis.whatif.replay import Durations
from traceinsight.analysis.whatif.transforms import (
    Transformation,
    _factor,
    _segments_in,
    cached_hash,
    memoized,
    scale_host,
)

Span = tuple[int, int, int, int]  # pid, tid, start_ns, end_ns


def segments_within(graph: StepGraph, spans: tuple[Span, ...]) -> np.ndarray:
    """Host segments that start inside one of ``spans`` on the span's thread."""
    key = f"{hash(spans)}:{len(spans)}"
    return memoized(graph, "segments_within", key, lambda: _within_now(graph, spans))


def _within_now(graph: StepGraph, spans: tuple[Span, ...]) -> np.ndarray:
    mask = np.zeros(graph.seg_node.size, dtype=bool)
    if not spans or graph.seg_node.size == 0:
        return mask
    host = graph.host_events
    seg_thread = graph.host_thread[graph.seg_node]
    heads = np.flatnonzero(np.concatenate([[True], seg_thread[1:] != seg_thread[:-1]]))
    head_rows = rows_of(host["id"].to_numpy(), graph.seg_owner[heads])
    threads = pl.DataFrame({
        "pid": host["pid"].to_numpy()[head_rows], "tid": host["tid"].to_numpy()[head_rows], "thread": seg_thread[heads],
    }).unique(["pid", "tid"])
    frame = pl.DataFrame(list(spans), schema=["pid", "tid", "start_ns", "end_ns"], orient="row").cast(
        {"pid": host.schema["pid"], "tid": host.schema["tid"]}
    )
    merged = intervals.union(frame.join(threads, on=["pid", "tid"], how="inner"), by=["thread"])
    if merged.height == 0:
        return mask
    span_start, span_end = merged["start_ns"].to_numpy(), merged["end_ns"].to_numpy()
    t0 = min(int(graph.seg_start_ns.min()), int(span_start.min()))
    width = max(int(graph.seg_start_ns.max()), int(span_end.max())) - t0 + 1
    span_key = merged["thread"].to_numpy().astype(np.int64) * width + (span_start - t0)
    seg_key = seg_thread.astype(np.int64) * width + (graph.seg_start_ns - t0)
    at = np.searchsorted(span_key, seg_key, side="right") - 1
    j = np.maximum(at, 0)
    mask[:] = (at >= 0) & (merged["thread"].to_numpy()[j] == seg_thread) & (graph.seg_start_ns < span_end[j])
    return mask


@dataclass(frozen=True)
class CollapseSpans(Transformation):
    """The host time inside ``spans`` (a loop's calls, their launches included; not the waits of
    syncs) takes ``factor`` × its time: the loop as one call of each of its operators."""

    kind: ClassVar[str] = "collapse_spans"
    spans: tuple[Span, ...]
    factor: float
    what: str = "a loop"
    __hash__ = cached_hash

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        factor = _factor(self.factor, "a host factor")
        return scale_host(d, segments_within(graph, self.spans) & (graph.seg_class != SEG_SYNC), factor)

    def describe(self) -> str:
        return f"host time of {self.what} ({len(self.spans)} spans) × {self.factor:.3g}"


@dataclass(frozen=True)
class DispatchOnly(Transformation):
    """Inside spans matching ``region``, the host's own work other than launch calls and syncs
    takes no time: generated code launches the kernels without the eager dispatcher. Inside
    ops matching ``extern`` (when given) the host's time stays whole: generated code still
    calls those through the dispatcher (Inductor's extern kernels: GEMMs, convolutions,
    attention)."""

    kind: ClassVar[str] = "dispatch_only"
    region: str
    extern: str | None = None
    extern_what: str = ""  # what ``extern`` matches, in words, for the description

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        inside = _segments_in(graph, self.region)
        keep = (graph.seg_class == SEG_LAUNCH) | (graph.seg_class == SEG_SYNC)
        if self.extern is not None:
            keep = keep | _segments_in(graph, self.extern)
        return scale_host(d, inside & ~keep, 0.0)

    def describe(self) -> str:
        kept = f" and the dispatch of {self.extern_what or self.extern}" if self.extern is not None else ""
        return f"host time in {self.region} but its launch calls{kept} → 0"

    def to_dict(self) -> dict[str, object]:
        out = super().to_dict()
        if self.extern is None:
            out.pop("extern")
        out.pop("extern_what")
        return out
