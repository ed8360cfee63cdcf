"""Transformations for fixes the basic ones cannot state: pinned copies, work launched in a region.

A pageable copy blocks its host call for the whole transfer (the driver stages it through a
bounce buffer) and moves at the pageable rate. From pinned memory with ``non_blocking=True``
the call only enqueues the copy, and the copy runs at the pinned rate.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from traceinsight.analysis.whatif.graph import SEG_LAUNCH, SEG_SYNC, StepGraph
from traceinsight.analysis.whatif.replay import Durations
from traceinsight.analysis.whatif.transforms import (
    Transformation,
    _factor,
    _segments_in,
    memoized,
    name_hits,
    owners_match,
    scale_host,
)

# A launch call's host time where the trace has no other launches to take it from.
LAUNCH_CALL_NS = 5_000


@dataclass(frozen=True)
class PinCopies(Transformation):
    """Copies whose name matches ``pattern`` take ``factor`` × their time; their host calls no
    longer wait for them and cost what a launch call of this trace costs (its median)."""

    kind: ClassVar[str] = "pin_copies"
    pattern: str = r"Pageable"
    factor: float = 1.0

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        factor = _factor(self.factor, "a copy time factor")
        hit = memoized(graph, "gpu_names", self.pattern, lambda: name_hits(graph.gpu_work["name"], self.pattern)) & (graph.gpu_launch >= 0)
        nodes = np.unique(graph.gpu_launch[hit])
        segs = graph.host_seg[nodes]
        launches = np.flatnonzero(graph.seg_class == SEG_LAUNCH)
        others = np.setdiff1d(launches, segs)
        call_ns = int(np.median(d.seg_dur_ns[others])) if others.size else LAUNCH_CALL_NS
        seg_dur = d.seg_dur_ns.copy()
        seg_dur[segs] = np.minimum(seg_dur[segs], call_ns)
        sync_on = d.sync_on.copy()
        sync_on[nodes] = False
        gpu_dur = np.where(hit, np.rint(d.gpu_dur_ns * factor).astype(np.int64), d.gpu_dur_ns)
        return replace(d, seg_dur_ns=seg_dur, sync_on=sync_on, gpu_dur_ns=gpu_dur)

    def describe(self) -> str:
        return f"copies {self.pattern} pinned and asynchronous, × {self.factor:g} their time"


@dataclass(frozen=True)
class ScaleLaunchedIn(Transformation):
    """Device work launched from inside host spans matching ``region`` takes ``factor`` × its
    time (a kernel name alone cannot tell an optimizer's elementwise kernels from the model's)."""

    kind: ClassVar[str] = "scale_in"
    region: str
    factor: float

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        factor = _factor(self.factor, "a scale factor")
        inside = _segments_in(graph, self.region)
        launched = graph.gpu_launch >= 0
        hit = launched & inside[graph.host_seg[np.where(launched, graph.gpu_launch, 0)]]
        return replace(d, gpu_dur_ns=np.where(hit, np.rint(d.gpu_dur_ns * factor).astype(np.int64), d.gpu_dur_ns))

    def describe(self) -> str:
        return f"device work launched in {self.region} × {self.factor:g}"


@dataclass(frozen=True)
class ShrinkOwnTime(Transformation):
    """The host time of spans matching ``region`` themselves (their self time and the untraced
    time inside them) takes ``factor`` × its time; the ops they call keep theirs."""

    kind: ClassVar[str] = "host_own"
    region: str
    factor: float = 0.0

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        factor = _factor(self.factor, "a host factor")
        own = owners_match(graph, graph.seg_owner, self.region) & (graph.seg_class != SEG_SYNC)
        return scale_host(d, own, factor)

    def describe(self) -> str:
        return f"own host time of {self.region} × {self.factor:g}"


@dataclass(frozen=True)
class CollapseEagerLaunches(Transformation):
    """CUDA graphs for what is launched eagerly: each launch call's host cost → 0, except the
    graph launches already there (``cudaGraphLaunch``: what capturing leaves, not what it removes)."""

    kind: ClassVar[str] = "graphs_eager"

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        replayed = owners_match(graph, graph.seg_owner, r"(?i)GraphLaunch")
        return replace(d, seg_dur_ns=np.where((graph.seg_class == SEG_LAUNCH) & ~replayed, 0, d.seg_dur_ns))

    def describe(self) -> str:
        return "collapse eager launches (CUDA graphs)"
