"""Fusing chains of kernels: each chain's device work takes a new total time.

A chain is a set of kernels (their event ids) that one fused kernel would replace. The
replay keeps each kernel as a node and scales their durations so that together they take
the fused kernel's time; with ``launches`` the launch calls of all but the chain's first
kernel take no host time (one launch instead of many).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
import polars as pl

from traceinsight.analysis.whatif.graph import SEG_LAUNCH, StepGraph
from traceinsight.analysis.whatif.replay import Durations
from traceinsight.analysis.whatif.transforms import Transformation, TransformError, cached_hash


@dataclass(frozen=True)
class FuseChains(Transformation):
    """Each chain (kernel event ids, fused time in ns) runs in its fused time, spread over
    its kernels in proportion to their durations."""

    kind: ClassVar[str] = "fuse_chains"
    chains: tuple[tuple[tuple[int, ...], int], ...]
    launches: bool = True
    __hash__ = cached_hash

    def apply(self, graph: StepGraph, d: Durations) -> Durations:
        if not self.chains:
            return d
        rows = [(kid, c, fused) for c, (ids, fused) in enumerate(self.chains) for kid in ids]
        if any(fused < 0 for _, _, fused in rows):
            raise TransformError("a fused chain's time must be ≥ 0")
        table = pl.DataFrame(rows, schema={"id": pl.Int64, "chain": pl.Int64, "fused_ns": pl.Int64}, orient="row")
        nodes = (
            graph.gpu_work.select(pl.col("id").cast(pl.Int64))
            .with_row_index("node")
            .join(table, on="id", how="inner")
        )
        if nodes.height == 0:
            return d
        idx = nodes["node"].to_numpy().astype(np.int64)
        dur = d.gpu_dur_ns[idx].astype(np.float64)
        chain = nodes["chain"].to_numpy()
        total = np.bincount(chain, weights=dur, minlength=len(self.chains))
        fused = nodes["fused_ns"].to_numpy().astype(np.float64)
        share = np.where(total[chain] > 0, dur / np.maximum(total[chain], 1.0), 0.0)
        new = np.minimum(np.rint(fused * share), dur).astype(np.int64)
        out = d.gpu_dur_ns.copy()
        out[idx] = new
        d = replace(d, gpu_dur_ns=out)
        if not self.launches:
            return d
        # one launch per chain: the launch calls of every kernel but the chain's first
        first = nodes.sort("node").group_by("chain", maintain_order=True).agg(pl.col("node").first())["node"]
        rest = idx[~np.isin(idx, first.to_numpy())]
        launch = graph.gpu_launch[rest]
        launch = launch[launch >= 0]
        # a launch call that also launches other work (cudaGraphLaunch: every kernel of the
        # graph) stays: the fused kernel would still be in that graph
        launched = graph.gpu_launch[graph.gpu_launch >= 0]
        per_launch = np.bincount(launched, minlength=graph.host_nodes)
        launch = launch[per_launch[launch] == 1]
        segs = graph.host_seg[launch]
        segs = segs[graph.seg_class[segs] == SEG_LAUNCH]
        seg_dur = d.seg_dur_ns.copy()
        seg_dur[segs] = 0
        return replace(d, seg_dur_ns=seg_dur)

    def describe(self) -> str:
        kernels = sum(len(ids) for ids, _ in self.chains)
        return f"fuse {len(self.chains)} kernel chains ({kernels} kernels) into one kernel each" + (
            ", one launch each" if self.launches else ""
        )

    def to_dict(self) -> dict[str, object]:
        # the kernel ids are many and mean nothing outside the trace: counts are reported
        return {
            "kind": self.kind,
            "chains": len(self.chains),
            "kernels": sum(len(ids) for ids, _ in self.chains),
            "fused_ns": sum(ns for _, ns in self.chains),
            "launches": self.launches,
            "description": self.describe(),
        }
