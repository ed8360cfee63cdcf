"""Cross-stream waits named by the trace: Kineto's ``cuda_sync`` "Stream Wait Event" events.

Each names the waiting stream (``stream``), the stream waited on (``wait_on_stream``), the
``cudaStreamWaitEvent`` call (``correlation``) and, on recent Kineto, the ``cudaEventRecord``
whose event is waited on (``wait_on_event_correlation``). The wait joins the last work launched
on the waited-on stream before the record (before the wait call when the record is not named)
to the first work launched on the waiting stream after the wait call.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from traceinsight.trace.model import Trace


def stream_waits(trace: Trace, gpu: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(dst rows, src rows) of ``gpu`` (row, device, stream, launch_ts_ns) joined by a wait."""
    ev = trace.events
    waits = ev.filter(
        (pl.col("kind") == "sync") & pl.col("wait_on_stream").is_not_null() & (pl.col("wait_on_stream") >= 0)
        & pl.col("stream").is_not_null() & (pl.col("stream") != pl.col("wait_on_stream"))
    ).select("device", "stream", "wait_on_stream", "correlation", "wait_on_event_correlation")
    empty = np.zeros(0, dtype=np.int64)
    if waits.height == 0 or gpu.height == 0:
        return empty, empty
    calls = ev.filter(pl.col("kind").is_in(["runtime", "driver"]) & pl.col("correlation").is_not_null()).select(
        "correlation", "ts_ns"
    ).unique("correlation")
    waits = waits.join(calls.rename({"ts_ns": "wait_ts"}), on="correlation", how="inner").join(
        calls.rename({"correlation": "wait_on_event_correlation", "ts_ns": "record_ts"}),
        on="wait_on_event_correlation", how="left",
    ).with_columns(ref_ts=pl.coalesce("record_ts", "wait_ts"), device=pl.col("device").fill_null(0))
    launched = gpu.filter(pl.col("launch_ts_ns").is_not_null()).select("row", "device", "stream", "launch_ts_ns")
    src = waits.sort("ref_ts", "correlation").join_asof(
        launched.rename({"stream": "wait_on_stream", "row": "src"}).sort("launch_ts_ns", "src"),
        left_on="ref_ts", right_on="launch_ts_ns", by=["device", "wait_on_stream"], strategy="backward",
        check_sortedness=False,
    )
    both = src.sort("wait_ts", "correlation").join_asof(
        launched.rename({"row": "dst"}).sort("launch_ts_ns", "dst"),
        left_on="wait_ts", right_on="launch_ts_ns", by=["device", "stream"], strategy="forward",
        check_sortedness=False,
    ).drop_nulls(["src", "dst"])
    return both["dst"].to_numpy().astype(np.int64), both["src"].to_numpy().astype(np.int64)
