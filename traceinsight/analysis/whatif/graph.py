"""The dependency graph of a trace: host threads, launches, streams, synchronisation.

Nodes come in two sets, kept as numpy arrays:

- **Host nodes.** Each host thread's events are cut into *self segments* (an event's time
  minus its children's); the segments of one thread form a chain in time order. Segments that
  matter to other nodes — launch calls (their start is when the device may start the work),
  synchronising calls (their end waits for the device), the first and last segments of each
  ``ProfilerStep``, the last segment of a thread — are *nodes*; the segments before a node on
  its thread are its ``pre_ns`` (host time that must pass first), so a thread of a million
  events becomes a chain of its launches and syncs.
- **Device nodes.** Kernels, memcpys and memsets, chained per (device, stream).

Edges, each with an offset taken from the recording so that a replay with recorded durations
gives back the recorded times:

- thread order: a host node starts ``pre_ns`` after the previous node on its thread ends;
- launch: device work starts at least ``launch_lat_ns`` after its launch call starts (for a
  ``cudaGraphLaunch``, every kernel of the graph);
- stream order: device work starts at least ``stream_gap_ns`` after the previous work on its
  stream ends;
- cross-stream wait: work whose start neither its launch nor its stream explains, and that
  starts right when work on another stream of its device ends, waits for that work
  (``wait_src``, ``wait_off_ns``): what an event record → stream wait does;
- synchronisation: a synchronising call (stream/device/event synchronize, a blocking copy, the
  sync behind ``.item()``) ends ``sync_post_ns`` after the device work it waited for ends.

The offset an edge did not bind in the recording is set to its typical value on this trace
(median launch latency, median back-to-back gap), so that when durations change the other
edge can take over.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from traceinsight.analysis.whatif.waits import stream_waits
from traceinsight.trace.model import Trace
from traceinsight.trace.schema import GPU_WORK_KINDS, PROFILER_STEP_PREFIX

HOST_KINDS = ("cpu_op", "user_annotation", "runtime", "driver", "python")
# Calls that make the host wait for device work (CUDA and HIP spellings). Freeing device or
# pinned memory waits for the whole device first (cudaFree is an implicit device
# synchronisation; the stream-ordered cudaFreeAsync is not): a caching allocator emptied in the
# loop makes each of its cudaFree calls a sync.
SYNC_NAME = (
    r"(?i)(synchronize|^(cuda|hip)Memcpy(2D|3D|Peer)?$|^cuMemcpy(DtoH|HtoD|DtoD)?(_v2)?$"
    r"|^(cuda|hip)Free(Host)?$|^cuMemFree(Host)?(_v2)?$)"
)
COPY_CALL = r"(?i)memcpy"
# Host segment classes (what the time on the critical path was).
SEG_CPU, SEG_LAUNCH, SEG_SYNC, SEG_RUNTIME = 0, 1, 2, 3
# Device node classes.
GPU_KERNEL, GPU_COPY, GPU_COMM = 0, 1, 2
# A start later than its launch and stream explain by more than this is a wait on something.
UNEXPLAINED_NS = 5_000
# ... and is matched to work on another stream that ended at most this long before.
WAIT_MATCH_NS = 5_000
NEG = np.int64(-(2**62))


@dataclass(frozen=True)
class StepGraph:
    """The graph of a trace (all steps). Arrays are aligned per node; see the module doc."""

    # host segments (sorted by thread, start)
    seg_owner: np.ndarray  # event id of the span the segment belongs to
    seg_start_ns: np.ndarray
    seg_dur_ns: np.ndarray
    seg_gap_ns: np.ndarray  # untraced host time before the segment on its thread
    seg_class: np.ndarray
    seg_node: np.ndarray  # host node the segment's time is charged to
    # host nodes (sorted by thread, start)
    host_thread: np.ndarray  # chain index
    host_seg: np.ndarray  # index of the node's own segment
    host_anchor_ns: np.ndarray  # thread heads: where the thread's first segment starts
    host_sync_src: np.ndarray  # device node the call waits for, or -1
    host_sync_post_ns: np.ndarray
    # device nodes (sorted by device, stream, start)
    gpu_stream: np.ndarray  # chain index
    gpu_ts_ns: np.ndarray
    gpu_dur_ns: np.ndarray
    gpu_class: np.ndarray
    gpu_launch: np.ndarray  # host node of the launch call, or -1
    gpu_launch_lat_ns: np.ndarray
    gpu_stream_gap_ns: np.ndarray
    gpu_wait_src: np.ndarray  # device node on another stream it waits for, or -1
    gpu_wait_off_ns: np.ndarray
    gpu_anchor_ns: np.ndarray  # recorded start for work launched before the trace, else NEG
    gpu_step: np.ndarray  # step number of the launching step, or -1
    # frames for names, transformations and reports
    host_events: pl.DataFrame  # id, pid, tid, ts_ns, end_ns, kind, name, is_sync, is_launch
    gpu_work: pl.DataFrame  # per device node: id, name, kind, device, stream, collective_name
    steps: pl.DataFrame  # step, host_start_ns, host_end_ns, start_node, end_node
    notes: tuple[str, ...] = ()
    stats: dict[str, int] = field(default_factory=dict)
    # host nodes woken by another thread (see ``threads.with_wakes``): the node ends at least
    # ``wake_off_ns`` after that thread's node ``wake_src`` ends, plus the replayed time of its
    # thread's work after the wake (segments marked in ``seg_after_wake``: the node's own
    # segment and those before it since the wake); None or -1: no such edge
    host_wake_src: np.ndarray | None = None
    host_wake_off_ns: np.ndarray | None = None
    seg_after_wake: np.ndarray | None = None
    # Each node's end on the replay with recorded durations (see ``replay.with_order``): every
    # edge runs from an earlier or equal end to a later one there, so a replay can be solved in
    # blocks of this order, one block after the other. None: replays solve the whole graph at once.
    host_order_ns: np.ndarray | None = None
    gpu_order_ns: np.ndarray | None = None
    # masks a transformation computed from names and spans (which a graph derived by
    # ``replace`` keeps, but gets a memo of its own), by (what, pattern); read-only arrays, and
    # the profiler cost's windows (``profiler_windows``)
    memo: dict[tuple[object, ...], Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    @property
    def host_nodes(self) -> int:
        return int(self.host_thread.size)

    @property
    def gpu_nodes(self) -> int:
        return int(self.gpu_stream.size)


def _host_events(trace: Trace) -> pl.DataFrame:
    ev = trace.events
    kind = pl.col("kind").cast(pl.String)
    # lazily, so that only the columns read are taken from the wide events frame
    host = ev.lazy().filter(kind.is_in(HOST_KINDS) & pl.col("ts_ns").is_not_null()).select(
        "id", "pid", "tid", "ts_ns", pl.max_horizontal("end_ns", "ts_ns").alias("end_ns"),
        "parent", pl.col("kind").cast(pl.String), "name", "step",
    ).collect()
    # A parent that is not a host span (the profiler's own span) makes a top-level span.
    return host.with_columns(
        parent=pl.when(pl.col("parent").is_in(host["id"].implode())).then(pl.col("parent"))
    )


def rows_of(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Row of each of ``wanted`` in ``ids`` (unique event ids), -1 where it is not there."""
    if ids.size == 0:
        return np.full(wanted.size, -1, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    pos = np.minimum(np.searchsorted(ids[order], wanted), ids.size - 1)
    out: np.ndarray = np.where(ids[order][pos] == wanted, order[pos], -1)
    return out


def _segments(host: pl.DataFrame) -> pl.DataFrame:
    """Self segments of every host span: from its start to its first child, between children,
    from its last child to its end (all of it for a leaf). Worked on row-index arrays."""
    n = host.height
    parent_id = host["parent"].fill_null(-1).to_numpy()
    parent = np.where(parent_id >= 0, rows_of(host["id"].to_numpy(), parent_id), -1) if n else parent_id
    ts = host["ts_ns"].to_numpy()
    end = host["end_ns"].to_numpy()
    # children of each parent in time order; each one's next sibling (or none)
    kids = np.flatnonzero(parent >= 0)
    kids = kids[np.lexsort((ts[kids], parent[kids]))]
    same_next = np.zeros(kids.size, dtype=bool)
    same_next[:-1] = parent[kids[1:]] == parent[kids[:-1]]
    first_kid = np.ones(kids.size, dtype=bool)
    first_kid[1:] = parent[kids[1:]] != parent[kids[:-1]]
    has_kids = np.zeros(n, dtype=bool)
    has_kids[parent[kids]] = True
    # before the first child / between children / after the last child
    p = parent[kids]
    first_start = ts[p[first_kid]]
    first_end = ts[kids[first_kid]]
    after_start = end[kids]
    after_end = np.where(same_next, np.roll(ts[kids], -1), end[p])
    leaves = np.flatnonzero(~has_kids)
    owner = np.concatenate([p[first_kid], p, leaves])
    start = np.concatenate([first_start, after_start, ts[leaves]])
    stop = np.concatenate([first_end, after_end, end[leaves]])
    inner = owner.size - leaves.size
    keep = np.ones(owner.size, dtype=bool)
    keep[:inner] = stop[:inner] > start[:inner]
    owner, start, stop = owner[keep], start[keep], stop[keep]
    pid = host["pid"].to_numpy()[owner]
    tid = host["tid"].to_numpy()[owner]
    sort = np.lexsort((stop, start, tid, pid))
    owner = owner[sort]
    # one gather for what comes from the owning span
    return (
        host.select(pl.col("id").alias("owner"), "pid", "tid", "kind", "is_launch", "is_sync")[owner]
        .with_columns(owner_row=pl.Series(owner), start=pl.Series(start[sort]), end=pl.Series(stop[sort]))
        .select("owner", "owner_row", "start", "end", "pid", "tid", "kind", "is_launch", "is_sync")
    )


def _gpu_frame(trace: Trace) -> pl.DataFrame:
    k = trace.kernels
    return (
        k.filter(pl.col("kind").cast(pl.String).is_in(list(GPU_WORK_KINDS)) & pl.col("device").is_not_null())
        .select(
            "id", "ts_ns", pl.max_horizontal("dur_ns", pl.lit(0)).alias("dur_ns"), "name",
            pl.col("kind").cast(pl.String), "device", pl.col("stream").fill_null(-1), "collective_name",
            "launch_id", "launch_ts_ns", "launch_end_ns", "launch_name", "step",
        )
        .sort("device", "stream", "ts_ns", "id")
        .with_columns(end_ns=pl.col("ts_ns") + pl.col("dur_ns"), row=pl.int_range(pl.len(), dtype=pl.Int64))
    )


def _median(values: np.ndarray, default: int) -> int:
    return int(np.median(values)) if values.size else default


def _step_bounds(
    step_ev: pl.DataFrame, pid: np.ndarray, tid: np.ndarray, first_t: np.ndarray, start: np.ndarray, stop: np.ndarray
) -> pl.DataFrame:
    """``step_ev`` with ``start_seg`` (the first segment of its thread starting at or after the
    step's start) and ``end_seg`` (the last one ending at or before its end), null where none.
    Segments are sorted by thread, and within a thread their starts and ends never decrease
    (each keeps only the time no earlier one covers), so a binary search per thread does it."""
    first_seg = np.full(step_ev.height, -1, dtype=np.int64)
    last_seg = np.full(step_ev.height, -1, dtype=np.int64)
    if step_ev.height and pid.size:
        heads = np.flatnonzero(first_t)
        bounds = np.append(heads, pid.size)
        threads = pl.DataFrame({"pid": pid[heads], "tid": tid[heads], "lo": bounds[:-1], "hi": bounds[1:]})
        found = step_ev.with_row_index("i").join(
            threads.cast({"pid": step_ev.schema["pid"], "tid": step_ev.schema["tid"]}), on=["pid", "tid"], how="inner"
        )
        for (lo, hi), rows in found.group_by(["lo", "hi"]):
            i = rows["i"].to_numpy().astype(np.int64)
            lo_i, hi_i = int(lo), int(hi)
            at = lo_i + np.searchsorted(start[lo_i:hi_i], rows["host_start_ns"].to_numpy(), side="left")
            first_seg[i] = np.where(at < hi_i, at, -1)
            to = lo_i + np.searchsorted(stop[lo_i:hi_i], rows["host_end_ns"].to_numpy(), side="right") - 1
            last_seg[i] = np.where(to >= lo_i, to, -1)
    return step_ev.with_columns(
        start_seg=pl.Series(first_seg).replace(-1, None),
        end_seg=pl.Series(last_seg).replace(-1, None),
    ).sort("host_start_ns")


def _launch_segments(host: pl.DataFrame, owner_row: np.ndarray, launch_id: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """Per device node: the first segment of its launch call (``owner_row``: each segment's
    host row), and whether it has one in the trace."""
    want = launch_id.fill_null(-1).to_numpy().astype(np.int64)
    ids = host["id"].to_numpy()
    if ids.size == 0:
        return np.zeros(want.size, dtype=np.int64), np.zeros(want.size, dtype=bool)
    first_of_row = np.full(ids.size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_of_row, owner_row, np.arange(owner_row.size, dtype=np.int64))
    order = np.arange(ids.size) if bool((ids[1:] >= ids[:-1]).all()) else np.argsort(ids, kind="stable")
    row = order[np.minimum(np.searchsorted(ids[order], want), ids.size - 1)]
    has = (want >= 0) & (ids[row] == want) & (first_of_row[row] < owner_row.size)
    return np.where(has, first_of_row[row], 0), has


def build(trace: Trace) -> StepGraph:
    """The dependency graph of ``trace`` (see the module doc)."""
    notes: list[str] = []
    host = _host_events(trace)
    gpu = _gpu_frame(trace)
    # launch calls: spans some device work names as its launch
    launch_ids = gpu["launch_id"].drop_nulls().unique().implode()
    # blocking copies: a copy call that returned only after its own copy ended
    own_end = gpu.filter(pl.col("launch_id").is_not_null()).group_by("launch_id").agg(
        pl.col("end_ns").max().alias("own_end"), pl.col("row").sort_by(["end_ns", "row"]).last().alias("own_row")
    )
    host = host.join(own_end.rename({"launch_id": "id"}), on="id", how="left")
    name = pl.col("name").cast(pl.String)
    is_launcher = pl.col("kind").is_in(["runtime", "driver"])
    # the name patterns once per distinct name, not once per event
    names = host.filter(is_launcher).select(pl.col("name").unique())
    sync_names = names.filter(name.str.contains(SYNC_NAME))["name"].implode()
    copy_names = names.filter(name.str.contains(COPY_CALL))["name"].implode()
    host = host.with_columns(
        is_launch=pl.col("id").is_in(launch_ids),
        is_sync=is_launcher
        & (pl.col("name").is_in(sync_names) | (pl.col("name").is_in(copy_names) & (pl.col("end_ns") >= pl.col("own_end")))).fill_null(False),
    )
    segs = _segments(host)
    # The segments that become nodes.
    pid, tid = segs["pid"].to_numpy(), segs["tid"].to_numpy()
    first_t = np.ones(segs.height, dtype=bool)
    first_t[1:] = (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])
    last_t = np.ones(segs.height, dtype=bool)
    last_t[:-1] = first_t[1:]
    # Spans that do not nest cleanly (Python frames around ops, whose times are coarser) would
    # overlap on the thread. Each segment keeps its recorded start (launch calls and syncs are
    # timed precisely: a launch pushed later would seem to follow its own kernel) and an
    # earlier segment that runs past it is cut where it starts.
    start, stop = segs["start"].to_numpy(), segs["end"].to_numpy()
    next_start = np.concatenate([start[1:], start[-1:]]) if segs.height else start
    overlap = int(((stop > next_start) & ~last_t).sum())
    if overlap:
        notes.append(f"{overlap} host segments run past the next one on their thread (imperfect nesting): each is cut where the next starts")
    stop = np.where(last_t, stop, np.minimum(stop, next_start))
    stop = np.maximum(stop, start)
    covered = np.concatenate([[NEG], stop[:-1]]) if segs.height else stop
    covered = np.where(first_t, NEG, covered)
    segs = segs.with_columns(
        seg=pl.int_range(pl.len(), dtype=pl.Int64),
        first_of_thread=pl.Series(first_t),
        last_of_thread=pl.Series(last_t),
        start=pl.Series(start),
        end=pl.Series(stop),
        gap=pl.Series(np.where(first_t, 0, np.maximum(start - covered, 0))),
    )
    # Step bounds: first segment at/after a step's start, last ending at/before its end.
    step_ev = host.filter(pl.col("kind") == "user_annotation", name.str.starts_with(PROFILER_STEP_PREFIX)).select(
        pl.col("step"), "pid", "tid", pl.col("ts_ns").alias("host_start_ns"), pl.col("end_ns").alias("host_end_ns")
    ).drop_nulls("step").sort("host_start_ns")
    steps = _step_bounds(step_ev, pid, tid, first_t, start, stop)
    marked = pl.concat([steps["start_seg"], steps["end_seg"]]).drop_nulls().implode()
    segs = segs.with_columns(
        is_node=pl.col("is_launch") | pl.col("is_sync") | pl.col("last_of_thread") | pl.col("seg").is_in(marked),
        cls=pl.when(pl.col("is_sync")).then(SEG_SYNC).when(pl.col("is_launch")).then(SEG_LAUNCH)
        .when(pl.col("kind").is_in(["runtime", "driver"])).then(SEG_RUNTIME).otherwise(SEG_CPU),
    )
    is_node = segs["is_node"].to_numpy()
    node_segs = np.flatnonzero(is_node)
    # the node a segment's time is charged to: the first node at or after it (nodes before it, counted)
    seg_node = (np.cumsum(is_node) - is_node).astype(np.int64)
    # threads as chain indices
    head = segs["first_of_thread"].to_numpy()
    thread_of_seg = np.cumsum(head) - 1
    host_thread = thread_of_seg[node_segs]
    seg_start = segs["start"].to_numpy().astype(np.int64)
    host_anchor = np.full(node_segs.size, NEG, dtype=np.int64)
    heads = np.flatnonzero(head)
    host_anchor[seg_node[heads]] = seg_start[heads]
    # Device nodes.
    first_seg, has_launch = _launch_segments(host, segs["owner_row"].to_numpy(), gpu["launch_id"])
    gpu_launch = np.full(gpu.height, -1, dtype=np.int64)
    gpu_launch[has_launch] = seg_node[first_seg[has_launch].astype(np.int64)]
    ts = gpu["ts_ns"].to_numpy().astype(np.int64)
    dur = gpu["dur_ns"].to_numpy().astype(np.int64)
    end = ts + dur
    chain_key = gpu.select(pl.struct("device", "stream")).to_series()
    stream_head = (chain_key != chain_key.shift(1)).fill_null(True).to_numpy() if gpu.height else np.zeros(0, dtype=bool)
    gpu_stream = np.cumsum(stream_head) - 1
    prev_end = np.concatenate([[NEG], end[:-1]]) if gpu.height else end
    prev_end = np.where(stream_head, NEG, prev_end)
    launch_ts = np.where(has_launch, seg_start[np.where(has_launch, first_seg, 0).astype(np.int64)] if gpu.height else 0, NEG)
    # Work recorded before its launch call started (clock skew, a reused correlation) keeps its
    # recorded start: the launch edge cannot explain it.
    early = has_launch & (ts < launch_ts)
    if early.any():
        notes.append(f"{int(early.sum())} device events start before their launch call: kept at their recorded start")
        has_launch = has_launch & ~early
        gpu_launch[early] = -1
        launch_ts = np.where(has_launch, launch_ts, NEG)
    d_launch = np.where(has_launch, np.maximum(ts - launch_ts, 0), NEG)
    d_stream = np.where(stream_head, NEG, np.maximum(ts - prev_end, 0))
    # The launch latency from work whose stream was idle when its launch call began; work is
    # bound by its stream when the previous work ended after its launch could have started it.
    # Work launched while the previous work was finishing (ended between the launch call's
    # start and that latency later) waited for its launch, not its stream: counted as stream
    # bound, a launch-bound trace's launch latency reads as a back-to-back gap the device
    # keeps whatever the launches become (CUDA graphs).
    lat_nat = _median(d_launch[has_launch & (prev_end <= launch_ts)], 5_000)  # a stream's head: prev_end is NEG
    stream_bound = ~stream_head & (~has_launch | (prev_end > launch_ts + lat_nat))
    gap_nat = _median(d_stream[stream_bound], 1_000)
    lat = np.where(stream_bound, np.minimum(d_launch, lat_nat), d_launch)
    gap = np.where(stream_bound, d_stream, np.minimum(d_stream, gap_nat))
    lat = np.where(has_launch, lat, NEG)
    gap = np.where(stream_head, NEG, gap)
    # Work that neither its launch nor its stream explains, starting when another stream's ends.
    expected = np.maximum(np.where(has_launch, launch_ts + lat_nat, NEG), np.where(stream_head, NEG, prev_end + gap_nat))
    wait_src = np.full(gpu.height, -1, dtype=np.int64)
    wait_off = np.zeros(gpu.height, dtype=np.int64)
    anchor = np.where(has_launch, NEG, ts)
    # Waits the trace names (cuda_sync "Stream Wait Event"); they hold where they bound.
    dst, src = stream_waits(trace, gpu)
    ok = end[src] <= ts[dst]
    dst, src = dst[ok], src[ok]
    wait_src[dst] = src
    wait_off[dst] = ts[dst] - end[src]
    took_over = end[src] >= expected[dst]
    lat[dst] = np.where(took_over, np.minimum(lat[dst], lat_nat), lat[dst])
    gap[dst] = np.where(took_over & ~stream_head[dst], np.minimum(gap[dst], gap_nat), gap[dst])
    unexplained = np.flatnonzero(has_launch & (ts - expected > UNEXPLAINED_NS) & (wait_src < 0))
    if unexplained.size:
        ends = gpu.select("device", "stream", pl.col("end_ns"), pl.col("row").alias("src")).sort("end_ns", "src")
        probe = gpu[unexplained].select("device", pl.col("stream").alias("dst_stream"), pl.col("ts_ns").alias("end_ns"), "row").sort("end_ns", "row")
        found = probe.join_asof(ends, on="end_ns", by="device", strategy="backward", tolerance=WAIT_MATCH_NS, check_sortedness=False)
        found = found.filter(pl.col("src").is_not_null() & (pl.col("stream") != pl.col("dst_stream")))
        dst = found["row"].to_numpy()
        src = found["src"].to_numpy()
        wait_src[dst] = src
        wait_off[dst] = ts[dst] - end[src]
        lat[dst] = np.minimum(lat[dst], lat_nat)
        gap[dst] = np.where(stream_head[dst], NEG, np.minimum(gap[dst], gap_nat))
    # Work that neither its launch (if the trace has one) nor its stream explains and that no
    # other stream's end matched within WAIT_MATCH_NS (a library's side streams, as cuDNN's FFT
    # convolutions, wait tens of µs after the event) was held by a wait on another stream: the
    # work that ended last on another stream of its device before it started. Without this
    # its stream's recorded idle is kept as a fixed gap (up to a whole step when the host runs
    # ahead), and a change that shortens the other stream cannot move it.
    # A collective is never taken as such a source: what waits for a collective must be recorded
    # (an event), else hiding collectives would be priced on a guessed dependency.
    comm_names = gpu.select(pl.col("name").unique()).filter(pl.col("name").cast(pl.String).str.contains(r"(?i)nccl|rccl"))
    comm = gpu["collective_name"].is_not_null() | gpu["name"].is_in(comm_names["name"].implode())
    is_comm = comm.to_numpy()
    orphan = np.flatnonzero(~stream_head & (ts - expected > UNEXPLAINED_NS) & (wait_src < 0))
    if orphan.size:
        ends = gpu.select("device", "stream", pl.col("end_ns"), pl.col("row").alias("src")).sort("end_ns", "src")
        probe = gpu[orphan].select("device", pl.col("stream").alias("dst_stream"), pl.col("ts_ns").alias("end_ns"), "row").sort("end_ns", "row")
        found = probe.join_asof(ends, on="end_ns", by="device", strategy="backward", check_sortedness=False)
        found = found.filter(pl.col("src").is_not_null() & (pl.col("stream") != pl.col("dst_stream")))
        dst = found["row"].to_numpy()
        src = found["src"].to_numpy()
        # it explains more of the start than the stream and the launch do
        later = (end[src] > np.maximum(prev_end[dst], launch_ts[dst])) & ~is_comm[src]
        dst, src = dst[later], src[later]
        wait_src[dst] = src
        wait_off[dst] = ts[dst] - end[src]
        lat[dst] = np.where(has_launch[dst], np.minimum(lat[dst], lat_nat), lat[dst])
        gap[dst] = np.minimum(gap[dst], gap_nat)
    # Synchronising calls: the device work each waited for.
    sync_src = np.full(node_segs.size, -1, dtype=np.int64)
    sync_post = np.zeros(node_segs.size, dtype=np.int64)
    seg_dur = (segs["end"] - segs["start"]).to_numpy().astype(np.int64)
    sync_calls = segs.filter(pl.col("is_sync")).group_by("owner").agg(pl.col("seg").max(), pl.col("start").min(), pl.col("end").max())
    sync_calls = sync_calls.join(
        host.filter(pl.col("is_sync")).select(pl.col("id").alias("owner"), "own_row", "name"), on="owner", how="left"
    )
    if sync_calls.height and gpu.height:
        by_end = gpu.select(pl.col("end_ns").alias("end"), pl.col("row").alias("latest_row")).sort("end", "latest_row")
        sync_calls = sync_calls.sort("end", "owner").join_asof(by_end, on="end", strategy="backward")
        sync_calls = sync_calls.with_columns(src=pl.coalesce("own_row", "latest_row")).drop_nulls("src")
        s_seg = sync_calls["seg"].to_numpy()
        s_src = sync_calls["src"].to_numpy().astype(np.int64)
        s_start = sync_calls["start"].to_numpy()
        s_end = sync_calls["end"].to_numpy()
        g_end = end[s_src]
        total = s_end - s_start
        waited = g_end > s_start
        post = np.where(waited, np.maximum(s_end - g_end, 0), total)
        node = seg_node[s_seg]
        sync_src[node] = s_src
        sync_post[node] = post
        # the call's own cost: its latency after the device finished (or all of it if it never waited)
        seg_dur[s_seg] = np.where(waited, np.minimum(post, seg_dur[s_seg]), seg_dur[s_seg])
    kind = gpu["kind"]
    gpu_class = np.where(is_comm, GPU_COMM, np.where((kind == "kernel").to_numpy(), GPU_KERNEL, GPU_COPY))
    steps_out = steps.select(
        "step", "host_start_ns", "host_end_ns",
        pl.col("start_seg").map_elements(lambda s: int(seg_node[s]), return_dtype=pl.Int64).alias("start_node"),
        pl.col("end_seg").map_elements(lambda s: int(seg_node[s]), return_dtype=pl.Int64).alias("end_node"),
    ) if steps.height else pl.DataFrame(schema={"step": pl.Int64, "host_start_ns": pl.Int64, "host_end_ns": pl.Int64, "start_node": pl.Int64, "end_node": pl.Int64})
    return StepGraph(
        seg_owner=segs["owner"].to_numpy(),
        seg_start_ns=seg_start,
        seg_dur_ns=seg_dur,
        seg_gap_ns=segs["gap"].to_numpy().astype(np.int64),
        seg_class=segs["cls"].to_numpy().astype(np.int8),
        seg_node=seg_node,
        host_thread=host_thread.astype(np.int64),
        host_seg=node_segs.astype(np.int64),
        host_anchor_ns=host_anchor,
        host_sync_src=sync_src,
        host_sync_post_ns=sync_post,
        gpu_stream=gpu_stream.astype(np.int64),
        gpu_ts_ns=ts,
        gpu_dur_ns=dur,
        gpu_class=gpu_class.astype(np.int8),
        gpu_launch=gpu_launch,
        gpu_launch_lat_ns=lat.astype(np.int64),
        gpu_stream_gap_ns=gap.astype(np.int64),
        gpu_wait_src=wait_src,
        gpu_wait_off_ns=wait_off,
        gpu_anchor_ns=anchor.astype(np.int64),
        gpu_step=gpu["step"].fill_null(-1).to_numpy().astype(np.int64),
        host_events=host.select("id", "pid", "tid", "ts_ns", "end_ns", "kind", "name", "is_sync", "is_launch"),
        gpu_work=gpu.select("id", "name", "kind", "device", "stream", "collective_name"),
        steps=steps_out,
        notes=tuple(notes),
        stats={
            "host_segments": segs.height,
            "host_nodes": int(node_segs.size),
            "gpu_nodes": gpu.height,
            "sync_waits": int((sync_src >= 0).sum()),
            "stream_waits": int((wait_src >= 0).sum()),
            "launch_latency_ns": lat_nat,
            "stream_gap_ns": gap_nat,
        },
    )
