"""ShrinkHostWindows: host time on given threads within given time windows takes factor × its time.

For a fix that moves host work with no name of its own off a thread (input preparation done
on the main thread, partly in untraced code): the windows are where the device waited for
that thread, and the host time in them (CPU segments and the untraced time before each
segment; launches and the waits of syncs keep theirs) is what moves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from traceinsight.analysis.whatif.graph import SEG_LAUNCH, SEG_SYNC, StepGraph
from traceinsight.analysis.whatif.replay import Durations
from traceinsight.analysis.whatif.transforms import Transformation, TransformError, scale_host

Window = tuple[int, int, int, int]  # pid, tid, start_ns, end_ns


def _in_windows(graph: StepGraph, windows: tuple[Window, ...]) -> np.ndarray:
    """Segments that start inside a window of their thread (after its start, up to its end)."""
    mask = np.zeros(graph.seg_node.size, dtype=bool)
    if not windows or graph.seg_node.size == 0:
        return mask
    spans = pl.DataFrame(
        windows, schema={"pid": pl.Int64, "tid": pl.Int64, "w_start": pl.Int64, "w_end": pl.Int64}, orient="row"
    ).sort("w_start")
    threads = graph.host_events.select(pl.col("id").alias("owner"), pl.col("pid").cast(pl.Int64), pl.col("tid").cast(pl.Int64))
    segs = (
        pl.DataFrame({"owner": graph.seg_owner, "seg_start": graph.seg_start_ns.astype(np.int64), "i": np.arange(graph.seg_node.size)})
        .join(threads, on="owner", how="left")
        .sort("seg_start")
    )
    found = segs.join_asof(spans, left_on="seg_start", right_on="w_start", by=["pid", "tid"], strategy="backward", check_sortedness=False)
    inside = found.filter((pl.col("seg_start") > pl.col("w_start")) & (pl.col("seg_start") <= pl.col("w_end")))["i"].to_numpy()
    mask[inside] = True
    return mask


@dataclass(frozen=True)
class ShrinkHostWindows(Transformation):
    """Host time of segments that start in the windows (pid, tid, start_ns, end_ns) takes
    ``factor`` × its time: CPU segments' own time and the untraced time before any segment."""

    kind: ClassVar[str] = "host_windows"
    windows: tuple[Window, ...]
    factor: float

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        if not np.isfinite(self.factor) or self.factor < 0:
            raise TransformError(f"a host factor must be a finite number ≥ 0, got {self.factor}")
        segs = _in_windows(graph, self.windows)
        own = segs & (graph.seg_class != SEG_SYNC) & (graph.seg_class != SEG_LAUNCH)
        return scale_host(d, own, self.factor, gap_mask=segs)

    def describe(self) -> str:
        return f"host time in {len(self.windows)} window(s) where the device waited × {self.factor:g}"

    def to_dict(self) -> dict[str, object]:
        # The windows can be many: their count and extent, not the list.
        lo = min((w[2] for w in self.windows), default=0)
        hi = max((w[3] for w in self.windows), default=0)
        return {"kind": self.kind, "windows": len(self.windows), "from_ns": lo, "to_ns": hi, "factor": self.factor, "description": self.describe()}
