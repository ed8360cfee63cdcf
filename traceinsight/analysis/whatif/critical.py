"""The critical path of a window on a replayed timeline: the chain of pieces that sets its length.

Walked backwards from the work that ends the window: at each node, the edge that set its start
(or, for a synchronising call, its end) is followed — stream order, cross-stream wait, launch,
the thread's previous node, the device work a sync waited for — until the window's start.
Each piece is one of:

- ``host``: host time on the thread (ops, Python, runtime calls that launch nothing, untraced);
- ``launch``: launch calls and the latency from a launch call to its work starting;
- ``gpu``: kernels (and the gaps between back-to-back work on a stream, waits on other streams);
- ``copy``: memcpys and memsets;
- ``comm``: communication kernels (NCCL/RCCL);
- ``sync``: synchronising calls: their own cost and their latency after the device finished;
- ``other``: where the walk cannot go on before the window starts: a thread's first span (a
  thread handed work by another, which the trace does not link), work launched before the trace.

The pieces tile the window, so their shares add up to 100 %.

Which edge binds each node depends only on the replayed timeline, not on the window, so it is
found for every node at once (:func:`pieces`): each node becomes one or two *pieces* (its own
time, and for device work the link to what it waited for), each pointing to the piece before
it on the path. A window's path is then a walk along those pointers from the piece that ends
it, stopping at the first piece that starts at or before the window's start: the walk visits
only the pieces on the path, so all windows together cost one pass over the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from traceinsight.analysis.whatif.graph import (
    GPU_COMM,
    GPU_COPY,
    NEG,
    SEG_LAUNCH,
    SEG_SYNC,
    StepGraph,
)
from traceinsight.analysis.whatif.replay import Timeline

KINDS = ("host", "launch", "gpu", "copy", "comm", "sync", "other")
K_HOST, K_LAUNCH, K_GPU, K_COPY, K_COMM, K_SYNC, K_OTHER = range(len(KINDS))
PATH_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "kind": pl.String, "node": pl.String, "index": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64,
}


@dataclass(frozen=True)
class Pieces:
    """Every node's pieces on a replayed timeline, with the piece before each on a path.

    Pieces ``2i`` and ``2i + 1`` are device node ``i``'s own time and its link to what it
    waited for (stream, other stream, launch); ``2G + j`` is host node ``j``'s end (its own
    time, or the device work its sync waited for) and ``2G + H + j`` the host time before it.
    ``nxt`` is -1 where the walk cannot go on (no edge explains the start)."""

    kind: np.ndarray  # index into KINDS
    start_ns: np.ndarray
    end_ns: np.ndarray
    nxt: np.ndarray
    gpu_nodes: int
    host_nodes: int

    def node_of(self, piece: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(is a device node, node index) of each piece."""
        g2 = 2 * self.gpu_nodes
        on_gpu = piece < g2
        index = np.where(on_gpu, piece // 2, (piece - g2) % max(self.host_nodes, 1))
        return on_gpu, index


def pieces(graph: StepGraph, tl: Timeline) -> Pieces:
    """The pieces of every node and the binding edge before each (see the module doc)."""
    d = tl.durations
    g, h = graph.gpu_nodes, graph.host_nodes
    gstart, gend = tl.gpu_start_ns, tl.gpu_end_ns
    hstart, hend, hdur, hpre = tl.host_start_ns, tl.host_end_ns, tl.host_dur_ns, tl.host_pre_ns
    lat = np.where(graph.gpu_launch_lat_ns > NEG, np.rint(graph.gpu_launch_lat_ns * d.launch_scale), NEG).astype(np.int64)
    idx = np.arange(g, dtype=np.int64)
    # device node i: its own time, then the edge that set its start
    prev = np.where((idx > 0) & (graph.gpu_stream == np.roll(graph.gpu_stream, 1)), idx - 1, -1)
    prev_end = np.where(prev >= 0, gend[np.maximum(prev, 0)], NEG)
    by_prev = (prev >= 0) & (prev_end + graph.gpu_stream_gap_ns == gstart)
    w = np.where(d.wait_on, graph.gpu_wait_src, -1)
    w_end = np.where(w >= 0, gend[np.maximum(w, 0)], NEG)
    by_wait = ~by_prev & (w >= 0) & (w_end + graph.gpu_wait_off_ns == gstart)
    launch = graph.gpu_launch
    l_start = np.where(launch >= 0, hstart[np.maximum(launch, 0)] if h else NEG, NEG)
    by_launch = ~by_prev & ~by_wait & (launch >= 0) & (l_start + lat == gstart)
    own_kind = np.where(graph.gpu_class == GPU_COMM, K_COMM, np.where(graph.gpu_class == GPU_COPY, K_COPY, K_GPU))
    link_kind = np.where(by_launch, K_LAUNCH, K_GPU)
    link_start = np.where(by_prev, prev_end, np.where(by_wait, w_end, np.where(by_launch, l_start, gstart)))
    link_next = np.where(by_prev, 2 * prev, np.where(by_wait, 2 * w, np.where(by_launch, 2 * g + h + launch, -1)))
    gpu_kind = np.stack([own_kind, link_kind], axis=1).ravel()
    gpu_start = np.stack([gstart, link_start], axis=1).ravel()
    gpu_end = np.stack([gend, gstart], axis=1).ravel()
    gpu_next = np.stack([2 * idx + 1, link_next], axis=1).ravel()
    # host node j's end: the device work its sync waited for, else its own time
    j = np.arange(h, dtype=np.int64)
    src = np.where(d.sync_on, graph.host_sync_src, -1)
    src_end = np.where(src >= 0, gend[np.maximum(src, 0)] if g else NEG, NEG)
    by_sync = (src >= 0) & (hend > hstart + hdur) & (src_end + graph.host_sync_post_ns == hend)
    seg_class = graph.seg_class[graph.host_seg]
    own_host = np.where(seg_class == SEG_LAUNCH, K_LAUNCH, np.where(seg_class == SEG_SYNC, K_SYNC, K_HOST))
    end_kind = np.where(by_sync, K_SYNC, own_host)
    end_start = np.where(by_sync, src_end, hstart)
    end_next = np.where(by_sync, 2 * src, 2 * g + h + j)
    # the host time before host node j: since the thread that woke it, else its thread's own
    wake = graph.host_wake_src if graph.host_wake_src is not None else np.full(h, -1, dtype=np.int64)
    wake_off = graph.host_wake_off_ns if graph.host_wake_off_ns is not None else np.zeros(h, dtype=np.int64)
    post = tl.host_post_ns if tl.host_post_ns is not None else np.zeros(h, dtype=np.int64)
    w_hend = np.where(wake >= 0, hend[np.maximum(wake, 0)] if h else NEG, NEG)
    by_wake = (wake >= 0) & (w_hend + wake_off + post - hdur == hstart)
    pre_start = np.where(by_wake, w_hend, hstart - hpre)
    pre_next = np.where(by_wake, 2 * g + wake, np.where(graph.host_anchor_ns > NEG, -1, 2 * g + j - 1))
    return Pieces(
        kind=np.concatenate([gpu_kind, end_kind, np.full(h, K_HOST)]).astype(np.int8),
        start_ns=np.concatenate([gpu_start, end_start, pre_start]).astype(np.int64),
        end_ns=np.concatenate([gpu_end, hend, hstart]).astype(np.int64),
        nxt=np.concatenate([gpu_next, end_next, pre_next]).astype(np.int64),
        gpu_nodes=g,
        host_nodes=h,
    )


def walk_all(p: Pieces, lo_ns: np.ndarray, first_piece: np.ndarray, fallback_ns: np.ndarray) -> pl.DataFrame:
    """Each window's path: ``window`` (its position), ``piece`` (-1: the ``other`` piece),
    ``start_ns`` (clipped to the window) and ``end_ns``; rows in time order per window.

    ``first_piece``: the piece that ends window ``w`` (-1: none); ``fallback_ns``: where the
    path starts when it has no pieces."""
    starts, nxt = p.start_ns.tolist(), p.nxt.tolist()
    ends = p.end_ns.tolist()
    guard_max = nxt.__len__() + 4
    out_w: list[int] = []
    out_p: list[int] = []
    out_s: list[int] = []
    out_e: list[int] = []
    for w, (lo, piece, fallback) in enumerate(zip(lo_ns.tolist(), first_piece.tolist(), fallback_ns.tolist(), strict=True)):
        first = None
        guard = guard_max
        while piece >= 0 and guard > 0:
            guard -= 1
            a, b = starts[piece], ends[piece]
            clipped = a if a > lo else lo
            if b > clipped:
                out_w.append(w)
                out_p.append(piece)
                out_s.append(clipped)
                out_e.append(b)
                first = clipped if first is None or clipped < first else first
            if a <= lo:
                break
            piece = nxt[piece]
        first = fallback if first is None else first
        if first > lo:
            out_w.append(w)
            out_p.append(-1)
            out_s.append(lo)
            out_e.append(first)
    frame = pl.DataFrame(
        {"window": out_w, "piece": out_p, "start_ns": out_s, "end_ns": out_e},
        schema={"window": pl.Int64, "piece": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64},
    )
    # the walk goes backwards: reverse each window's rows (windows stay in their order)
    return frame.with_row_index("at").sort(["window", "at"], descending=[False, True]).drop("at")


def describe(graph: StepGraph, p: Pieces, path: pl.DataFrame) -> pl.DataFrame:
    """``path`` (from :func:`walk_all`) with each piece's ``kind``, ``node`` (gpu/host/none),
    ``index`` (its node) and ``name`` (kernel name, the host span's, or the kind), ``dur_ns``."""
    piece = path["piece"].to_numpy()
    has = piece >= 0
    safe = np.where(has, piece, 0)
    on_gpu, index = p.node_of(safe)
    kind_code = np.where(has, p.kind[safe] if p.kind.size else K_OTHER, K_OTHER)
    kinds = np.asarray(KINDS, dtype=object)[kind_code]
    node = np.where(~has, "none", np.where(on_gpu, "gpu", "host"))
    index = np.where(has, index, -1)
    gpu_names = graph.gpu_work["name"].cast(pl.String)
    host_owner = graph.seg_owner[graph.host_seg]
    host_names = pl.DataFrame({"id": host_owner}).join(
        graph.host_events.select("id", pl.col("name").cast(pl.String)), on="id", how="left", maintain_order="left"
    )["name"]
    gpu_name = gpu_names.gather(np.where(has & on_gpu, index, 0)) if gpu_names.len() else pl.Series([None] * len(index), dtype=pl.String)
    host_name = host_names.gather(np.where(has & ~on_gpu, index, 0)) if host_names.len() else pl.Series([None] * len(index), dtype=pl.String)
    frame = path.with_columns(
        kind=pl.Series(kinds.tolist(), dtype=pl.String),
        node=pl.Series(node.tolist(), dtype=pl.String),
        index=pl.Series(index, dtype=pl.Int64),
        gpu_name=gpu_name,
        host_name=host_name,
    )
    k, n = pl.col("kind"), pl.col("node")
    return frame.with_columns(
        name=pl.when(k.is_in(["host", "other"])).then(k)
        .when((k == "launch") & (n == "gpu")).then(pl.lit("launch latency"))
        .when(n == "gpu").then(pl.col("gpu_name"))
        .otherwise(pl.col("host_name")),
        dur_ns=pl.col("end_ns") - pl.col("start_ns"),
    ).drop("gpu_name", "host_name")
