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
"""

from __future__ import annotations

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
PATH_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "kind": pl.String, "node": pl.String, "index": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64,
}
_GPU_KIND = {GPU_COMM: "comm", GPU_COPY: "copy"}
_HOST_KIND = {SEG_LAUNCH: "launch", SEG_SYNC: "sync"}


def walk(graph: StepGraph, tl: Timeline, lo_ns: int, end_gpu: int | None, end_host: int | None) -> pl.DataFrame:
    """Pieces of the critical path ending at device node ``end_gpu`` (or host node
    ``end_host``), back to ``lo_ns``; rows in time order."""
    kinds: list[str] = []
    nodes: list[str] = []
    index: list[int] = []
    starts: list[int] = []
    ends: list[int] = []

    def add(kind: str, node: str, i: int, a: int, b: int) -> bool:
        a = max(a, lo_ns)
        if b > a:
            kinds.append(kind)
            nodes.append(node)
            index.append(i)
            starts.append(a)
            ends.append(b)
        return a <= lo_ns

    d = tl.durations
    gstart, gend = tl.gpu_start_ns, tl.gpu_end_ns
    hstart, hend, hdur, hpre = tl.host_start_ns, tl.host_end_ns, tl.host_dur_ns, tl.host_pre_ns
    lat = np.where(graph.gpu_launch_lat_ns > NEG, np.rint(graph.gpu_launch_lat_ns * d.launch_scale), NEG).astype(np.int64)
    seg_class = graph.seg_class[graph.host_seg]
    state, i = ("gpu", end_gpu) if end_gpu is not None else ("host_end", end_host)
    guard = graph.gpu_nodes + 2 * graph.host_nodes + 4
    while i is not None and i >= 0 and guard > 0:
        guard -= 1
        if state == "gpu":
            if add(_GPU_KIND.get(int(graph.gpu_class[i]), "gpu"), "gpu", i, int(gstart[i]), int(gend[i])):
                break
            s = int(gstart[i])
            prev = i - 1 if i > 0 and graph.gpu_stream[i - 1] == graph.gpu_stream[i] else -1
            w = int(graph.gpu_wait_src[i]) if d.wait_on[i] else -1
            launch = int(graph.gpu_launch[i])
            if prev >= 0 and int(gend[prev]) + int(graph.gpu_stream_gap_ns[i]) == s:
                if add("gpu", "gpu", i, int(gend[prev]), s):
                    break
                i = prev
            elif w >= 0 and int(gend[w]) + int(graph.gpu_wait_off_ns[i]) == s:
                if add("gpu", "gpu", i, int(gend[w]), s):
                    break
                i = w
            elif launch >= 0 and int(hstart[launch]) + int(lat[i]) == s:
                if add("launch", "gpu", i, int(hstart[launch]), s):
                    break
                state, i = "host_start", launch
            else:
                break
        elif state == "host_end":
            src = int(graph.host_sync_src[i]) if d.sync_on[i] else -1
            if src >= 0 and int(hend[i]) > int(hstart[i]) + int(hdur[i]) and int(gend[src]) + int(graph.host_sync_post_ns[i]) == int(hend[i]):
                if add("sync", "host", i, int(gend[src]), int(hend[i])):
                    break
                state, i = "gpu", src
            else:
                if add(_HOST_KIND.get(int(seg_class[i]), "host"), "host", i, int(hstart[i]), int(hend[i])):
                    break
                state = "host_start"
        else:  # host_start: the host time before the node on its thread
            wake, wake_off = graph.host_wake_src, graph.host_wake_off_ns
            w = -1 if wake is None or wake_off is None else int(wake[i])
            post = 0 if tl.host_post_ns is None else int(tl.host_post_ns[i])
            if w >= 0 and wake_off is not None and int(hend[w]) + int(wake_off[i]) + post - int(hdur[i]) == int(hstart[i]):
                # woken by another thread: its time since that thread's node ended, then that node
                if add("host", "host", i, int(hend[w]), int(hstart[i])):
                    break
                state, i = "host_end", w
                continue
            if add("host", "host", i, int(hstart[i]) - int(hpre[i]), int(hstart[i])):
                break
            if graph.host_anchor_ns[i] > NEG:
                break
            state, i = "host_end", i - 1
    first = min(starts) if starts else (int(gend[end_gpu]) if end_gpu is not None else int(hend[end_host or 0]) if graph.host_nodes else lo_ns)
    if first > lo_ns:
        add("other", "none", -1, lo_ns, first)
    frame = pl.DataFrame({"kind": kinds, "node": nodes, "index": index, "start_ns": starts, "end_ns": ends}, schema=PATH_SCHEMA)
    return frame.reverse()


def breakdown(path: pl.DataFrame) -> dict[str, int]:
    """ns on the path per kind (every kind present, zero where absent)."""
    sums = path.group_by("kind").agg((pl.col("end_ns") - pl.col("start_ns")).sum().alias("ns"))
    got = dict(zip(sums["kind"].to_list(), sums["ns"].to_list(), strict=True))
    return {k: int(got.get(k, 0)) for k in KINDS}


def with_names(graph: StepGraph, path: pl.DataFrame) -> pl.DataFrame:
    """The path with the name of each piece's node (kernel name, or the host span's)."""
    gpu_names = graph.gpu_work["name"].cast(pl.String).to_list()
    host_owner = graph.seg_owner[graph.host_seg]
    owners = pl.DataFrame({"index": np.arange(graph.host_nodes), "id": host_owner}).join(
        graph.host_events.select("id", pl.col("name").cast(pl.String)), on="id", how="left"
    ).sort("index")["name"].to_list()
    names = [
        k if k in ("host", "other") else ("launch latency" if k == "launch" and n == "gpu" else (gpu_names[i] if n == "gpu" else owners[i]))
        for k, n, i in zip(path["kind"].to_list(), path["node"].to_list(), path["index"].to_list(), strict=True)
    ]
    return path.with_columns(name=pl.Series(names, dtype=pl.String), dur_ns=pl.col("end_ns") - pl.col("start_ns"))
