"""Removing named host spans: the ops a fix deletes, with the device work they launched.

:class:`~traceinsight.analysis.whatif.transforms.Remove` takes every span whose name matches a
pattern; a fix often deletes only some calls of an op (the in-place zeroing inside
``Optimizer.zero_grad``, not every ``aten::zero_``). :class:`RemoveSpans` names them by event id.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
import polars as pl

from traceinsight.analysis.lib import intervals
from traceinsight.analysis.whatif.graph import StepGraph
from traceinsight.analysis.whatif.replay import Durations
from traceinsight.analysis.whatif.transforms import Transformation


def segments_of(graph: StepGraph, ids: tuple[int, ...]) -> np.ndarray:
    """Host segments inside the spans with these event ids (the spans' own time and their
    children's), on each span's thread."""
    host = graph.host_events
    spans = host.filter(pl.col("id").is_in(list(ids))).select("pid", "tid", pl.col("ts_ns").alias("start_ns"), "end_ns")
    mask = np.zeros(graph.seg_node.size, dtype=bool)
    if spans.height == 0 or graph.seg_node.size == 0:
        return mask
    merged = intervals.union(spans, by=["pid", "tid"]).rename({"start_ns": "seg_start", "end_ns": "span_end"})
    segs = pl.DataFrame({"owner": graph.seg_owner, "seg_start": graph.seg_start_ns, "i": np.arange(graph.seg_node.size)})
    segs = segs.join(host.select(pl.col("id").alias("owner"), "pid", "tid"), on="owner", how="left").sort("seg_start")
    found = segs.join_asof(merged.sort("seg_start"), on="seg_start", by=["pid", "tid"], strategy="backward", check_sortedness=False)
    mask[found.filter(pl.col("seg_start") < pl.col("span_end"))["i"].to_numpy()] = True
    return mask


@dataclass(frozen=True)
class RemoveSpans(Transformation):
    """The host spans with these event ids (and what they contain) take no time, and the
    device work launched from inside them takes none either."""

    kind: ClassVar[str] = "remove_spans"
    ids: tuple[int, ...]
    label: str = "the named spans"

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        segs = segments_of(graph, self.ids)
        launch = graph.gpu_launch
        launched = np.zeros(launch.size, dtype=bool)
        has = launch >= 0
        launched[has] = segs[graph.host_seg[launch[has]]]
        return replace(
            d,
            seg_dur_ns=np.where(segs, 0, d.seg_dur_ns),
            seg_gap_ns=np.where(segs & np.roll(segs, 1), 0, d.seg_gap_ns),
            gpu_dur_ns=np.where(launched, 0, d.gpu_dur_ns),
        )

    def describe(self) -> str:
        return f"remove {self.label} ({len(self.ids)} calls) and the device work they launch"

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "label": self.label, "calls": len(self.ids), "description": self.describe()}
