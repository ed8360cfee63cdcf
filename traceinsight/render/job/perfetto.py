"""Perfetto export of a job: one process per rank on a common clock.

Every rank's events are placed at their wall time (the trace's ``baseTimeNanoseconds`` plus
their offset), shifted by the rank's clock offset measured on the matched collectives
(``collective_match``), so the ranks line up as they ran even when their hosts' clocks
disagree. Under each rank: its host threads, its GPU streams, a "steps (device)" track in which
the steps where this rank held the others back are named so, and a "collectives (matched)"
track with one slice per matched collective, joined by flows to the same collective on the
rank that arrived last (the arrows point at whom each rank waited for). Ranks are loaded one at
a time (from the Parquet cache), so memory stays that of one rank.
"""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.job.matching import KEY, Matched, match
from traceinsight.analysis.job.report import JobReport
from traceinsight.render.perfetto_export import Slice, _Builder
from traceinsight.trace.model import Trace
from traceinsight.trace.schema import GPU_KINDS


def _rank_tracks(b: _Builder, trace: Trace, rank: int, offset: int, report: JobReport) -> None:
    root = b.track(f"rank {rank}", pid=100_000 + rank, process_name=f"rank {rank}", rank=rank)
    events = trace.events.filter(pl.col("dur_ns") >= 0).with_columns(
        pl.col("name").cast(pl.String), pl.col("kind").cast(pl.String), on_gpu=pl.col("kind").cast(pl.String).is_in(list(GPU_KINDS))
    )
    host = events.filter(~pl.col("on_gpu"))
    for (pid, tid), part in host.sort("pid", "tid").group_by("pid", "tid", maintain_order=True):
        name = trace.meta.thread_names.get(f"{pid}:{tid}") or f"host thread {tid}"
        track = b.track(name, parent=root.uuid)
        b.slices(track, [Slice(ts + offset, end + offset, str(n), {"kind": str(k)}) for ts, end, n, k in part.select("ts_ns", "end_ns", "name", "kind").iter_rows()])
    gpu = events.filter(pl.col("on_gpu") & pl.col("device").is_not_null())
    for (device, stream), part in gpu.sort("device", "stream").group_by("device", "stream", maintain_order=True):
        track = b.track(f"GPU {device} stream {stream}", parent=root.uuid)
        b.slices(track, [Slice(ts + offset, end + offset, str(n), {"kind": str(k)}) for ts, end, n, k in part.select("ts_ns", "end_ns", "name", "kind").iter_rows()])
    summary = next((s for s in report.summaries if s.rank == rank), None)
    if summary is None or summary.steps.height == 0:
        return
    led = {}
    if report.stragglers.material:
        led = {int(r["step"]): int(r["straggler"]) for r in report.stragglers.per_step.iter_rows(named=True) if r["straggler"] is not None}
    track = b.track("steps (device)", parent=root.uuid)
    b.slices(
        track,
        [
            Slice(s + offset, e + offset, f"step {n}" + (" (straggler)" if led.get(int(n)) == rank else ""), {"dur_ns": int(d)})
            for n, s, e, d in summary.steps.select("step", "start_ns", "end_ns", "dur_ns").iter_rows()
            if e >= s
        ],
    )


def _flow_ids(matched: Matched) -> pl.DataFrame:
    """Per matched row, the flow ids of its slice: one flow per (collective, waiting rank),
    from the waiting rank's slice to the last arrival's."""
    rows = matched.rows.with_columns(pl.struct(KEY).rank("dense").cast(pl.Int64).alias("_c"))
    world = int(rows["rank"].max() or 0) + 1  # type: ignore[arg-type]
    waiting = rows.filter(~pl.col("is_last")).with_columns(
        (pl.col("_c") * world + pl.col("rank") + 1).alias("_flow")
    )
    to_last = waiting.group_by("_c").agg(pl.col("_flow").alias("flow_ids"))
    last = rows.filter(pl.col("is_last")).join(to_last, on="_c", how="left")
    own = waiting.with_columns(pl.concat_list("_flow").alias("flow_ids"))
    return pl.concat([own.drop("_flow"), last], how="diagonal_relaxed")


def _collective_track(b: _Builder, root: int, rank: int, flows: pl.DataFrame) -> None:
    mine = flows.filter(pl.col("rank") == rank)
    if mine.height == 0:
        return
    track = b.track("collectives (matched)", parent=root)
    b.slices(
        track,
        [
            Slice(
                int(r["start_al_ns"]),
                int(r["end_al_ns"]),
                f"{r['kind']} #{r['match_k']} (pg {r['process_group']})" + (" last" if r["is_last"] else ""),
                {"wait_ns": int(r["arrival_wait_ns"]), "dur_ns": int(r["dur_ns"]), "bytes": r["bytes"], "seq": r["seq"]},
                tuple(int(f) for f in (r["flow_ids"] or [])),
            )
            for r in mine.iter_rows(named=True)
            if r["end_al_ns"] >= r["start_al_ns"]
        ],
    )


def export_job_perfetto(report: JobReport, *, cache: bool = True) -> bytes:
    """The job's ranks as one Perfetto trace (bytes of a ``.pftrace``)."""
    from traceinsight.trace.loader import load

    matched = match(report.summaries)
    offsets = {int(r): int(o) for r, o in matched.offsets.select("rank", "offset_ns").iter_rows()}
    flows = _flow_ids(matched) if matched.rows.height else pl.DataFrame()
    b = _Builder(0)
    for summary in sorted(report.summaries, key=lambda s: s.rank):
        trace = load(summary.path, cache=cache)
        offset = (trace.meta.base_time_ns or 0) + offsets.get(summary.rank, 0)
        _rank_tracks(b, trace, summary.rank, offset, report)
        del trace
        if flows.height:
            root = next(t.uuid for t in b.tracks if t.pid == 100_000 + summary.rank)
            _collective_track(b, root, summary.rank, flows)
    return b.serialize()
