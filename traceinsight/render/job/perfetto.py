"""Perfetto export of a job: one process per rank on a common clock.

Every rank's events are placed at their wall time (the trace's ``baseTimeNanoseconds`` plus
their offset), so the ranks line up as they ran, up to the hosts' clock skew. Under each rank:
its host threads, its GPU streams, and a "steps (device)" track in which the steps where this
rank held the others back are named so. Ranks are loaded one at a time (from the Parquet
cache), so memory stays that of one rank.
"""

from __future__ import annotations

import polars as pl

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


def export_job_perfetto(report: JobReport, *, cache: bool = True) -> bytes:
    """The job's ranks as one Perfetto trace (bytes of a ``.pftrace``)."""
    from traceinsight.trace.loader import load

    b = _Builder(0)
    for summary in sorted(report.summaries, key=lambda s: s.rank):
        trace = load(summary.path, cache=cache)
        _rank_tracks(b, trace, summary.rank, trace.meta.base_time_ns or 0, report)
        del trace
    return b.serialize()
