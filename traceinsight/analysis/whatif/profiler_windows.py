"""What :class:`~traceinsight.analysis.whatif.transforms.RemoveProfilerCost` needs of a graph
that does not depend on the cost per event: each thread's windows of host time, how many
recorded events of each class start in each, and which window each host segment starts in.

The findings price every change on the step without the profiler, so this transformation is
applied once per replay, several times per trace at different costs per event: grouping the
trace's host events and segments (hundreds of thousands, millions of segments) by window is
done once per graph and window length, and each application is sums over the windows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from traceinsight.analysis.whatif.graph import StepGraph, rows_of

# Columns of event counts per window, by the class whose cost they carry.
COUNTED = ("op", "runtime", "python", "memory")


@dataclass(frozen=True)
class Windows:
    """Every (pid, tid, window) that holds a recorded event or a host segment, sorted, with
    ``n_<class>`` event counts; ``seg_window``: each segment's row, -1 for a segment whose
    span is not among the host events (it keeps its time)."""

    frame: pl.DataFrame  # pid, tid, window, n_op, n_runtime, n_python, n_memory
    seg_window: np.ndarray


def windows(graph: StepGraph, window_ns: int, memory_at: tuple[tuple[int, int, int], ...]) -> Windows:
    """:class:`Windows` of ``graph``, computed once per window length and allocator events."""
    key = ("profiler_windows", window_ns, memory_at)
    found = graph.memo.get(key)
    if found is None:
        found = graph.memo[key] = _windows_now(graph, window_ns, memory_at)
    out: Windows = found
    return out


def _windows_now(graph: StepGraph, w: int, memory_at: tuple[tuple[int, int, int], ...]) -> Windows:
    host = graph.host_events
    kind = pl.col("kind").cast(pl.String)
    cls = (
        pl.when(kind.is_in(["runtime", "driver"])).then(pl.lit("runtime"))
        .when(kind == "python").then(pl.lit("python")).otherwise(pl.lit("op"))
    )
    keys = ["pid", "tid", "window"]
    counts = host.select("pid", "tid", (pl.col("ts_ns") // w).alias("window"), cls.alias("cls")).group_by(keys).agg(
        *[(pl.col("cls") == c).sum().cast(pl.Int64).alias(f"n_{c}") for c in COUNTED[:3]]
    )
    if memory_at:
        at = np.array(memory_at, dtype=np.int64).reshape(-1, 3)
        memory = pl.DataFrame({"pid": at[:, 0], "tid": at[:, 1], "ts_ns": at[:, 2]})
        mem = memory.select("pid", "tid", (pl.col("ts_ns") // w).alias("window")).group_by(keys).agg(
            pl.len().cast(pl.Int64).alias("n_memory"))
        counts = counts.join(mem, on=keys, how="full", coalesce=True)
    else:
        counts = counts.with_columns(pl.lit(0, pl.Int64).alias("n_memory"))
    # each segment's thread is its span's (pid, tid); a span missing from the host events
    # has none, and its segments stay as they are
    rows = rows_of(host["id"].to_numpy(), graph.seg_owner)
    valid = rows >= 0
    at = np.maximum(rows, 0)
    segs = pl.DataFrame({
        "pid": host["pid"].to_numpy()[at], "tid": host["tid"].to_numpy()[at],
        "window": graph.seg_start_ns // w, "valid": valid,
    })
    frame = (
        pl.concat([counts.select(keys), segs.filter(pl.col("valid")).select(keys).unique()], how="vertical_relaxed")
        .unique()
        .join(counts, on=keys, how="left")
        .with_columns(pl.col(f"n_{c}").fill_null(0) for c in COUNTED)
        .sort(keys)
    )
    index = frame.select(keys).with_row_index("row")
    row = segs.join(index, on=keys, how="left", maintain_order="left")["row"].fill_null(-1).cast(pl.Int64).to_numpy()
    return Windows(frame, np.where(valid, row, -1))
