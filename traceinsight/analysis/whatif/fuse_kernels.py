"""Fusing chosen device work into one kernel: the chosen nodes take, together, a given time.

A fused kernel (flash attention in place of matmul, softmax, matmul and the elementwise work
between them) does the work of several recorded kernels in one. The replay keeps the graph's
nodes, so the fusion is expressed as the chosen nodes sharing the fused kernel's time in
proportion to their recorded durations: their total becomes the fused cost, their order on
the stream and the launches stay as recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from traceinsight.analysis.lib import intervals
from traceinsight.analysis.whatif.graph import SEG_SYNC, StepGraph
from traceinsight.analysis.whatif.replay import Durations
from traceinsight.analysis.whatif.transforms import Transformation, TransformError, scale_host


@dataclass(frozen=True)
class FuseKernels(Transformation):
    """The device nodes whose event ids are ``kernel_ids`` take ``fused_ns`` in all (over the
    whole trace), each in proportion to its recorded time; host time (not sync waits) inside
    the host ops ``host_op_ids`` takes ``host_factor`` × its time."""

    kind: ClassVar[str] = "fuse_kernels"
    kernel_ids: tuple[int, ...]
    fused_ns: int
    label: str = "chosen kernels"
    host_op_ids: tuple[int, ...] = ()
    host_factor: float = 1.0

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        if self.fused_ns < 0 or not 0 <= self.host_factor <= 1:
            raise TransformError(f"a fused time must be ≥ 0 and a host factor in [0, 1], got {self.fused_ns}, {self.host_factor}")
        d = self._host(graph, d)
        node_ids = graph.gpu_work["id"].fill_null(-1).to_numpy()
        sel = np.isin(node_ids, np.asarray(self.kernel_ids, dtype=np.int64))
        total = int(d.gpu_dur_ns[sel].sum())
        if total <= 0:
            return d
        # Never longer than recorded: a fusion that would be slower is not applied.
        factor = min(1.0, self.fused_ns / total)
        dur = np.where(sel, np.rint(d.gpu_dur_ns * factor).astype(np.int64), d.gpu_dur_ns)
        return Durations(
            seg_dur_ns=d.seg_dur_ns,
            seg_gap_ns=d.seg_gap_ns,
            gpu_dur_ns=dur,
            sync_on=d.sync_on,
            wait_on=d.wait_on,
            launch_scale=d.launch_scale,
        )

    def _host(self, graph: StepGraph, d: Durations) -> Durations:
        if not self.host_op_ids or self.host_factor >= 1.0:
            return d
        host = graph.host_events
        spans = host.filter(pl.col("id").is_in(list(self.host_op_ids))).select(
            "pid", "tid", pl.col("ts_ns").alias("start_ns"), "end_ns"
        )
        if spans.height == 0:
            return d
        merged = intervals.union(spans, by=["pid", "tid"]).rename({"start_ns": "seg_start", "end_ns": "span_end"})
        segs = pl.DataFrame({"owner": graph.seg_owner, "seg_start": graph.seg_start_ns, "i": np.arange(graph.seg_node.size)})
        segs = segs.join(host.select(pl.col("id").alias("owner"), "pid", "tid"), on="owner", how="left").sort("seg_start")
        found = segs.join_asof(
            merged.sort("seg_start").with_columns(span_start=pl.col("seg_start")),
            on="seg_start", by=["pid", "tid"], strategy="backward", check_sortedness=False,
        )
        inside = found.filter(pl.col("seg_start") < pl.col("span_end"))["i"].to_numpy()
        mask = np.zeros(graph.seg_node.size, dtype=bool)
        mask[inside] = True
        mask &= graph.seg_class != SEG_SYNC
        return scale_host(d, mask, self.host_factor)

    def describe(self) -> str:
        host = f", host time of {len(self.host_op_ids)} ops × {self.host_factor:.2g}" if self.host_op_ids else ""
        return f"fuse {len(self.kernel_ids)} device nodes ({self.label}) into {self.fused_ns / 1e6:.3g} ms{host}"

    def to_dict(self) -> dict[str, object]:
        # The ids are thousands of numbers on a real trace: the report states their count.
        return {
            "kind": self.kind,
            "kernels": len(self.kernel_ids),
            "fused_ns": self.fused_ns,
            "host_ops": len(self.host_op_ids),
            "host_factor": self.host_factor,
            "label": self.label,
            "description": self.describe(),
        }
