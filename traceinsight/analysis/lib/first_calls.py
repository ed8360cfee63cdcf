"""One-time first-call costs: an op whose first call takes far longer than its later ones.

cuBLAS handle creation, cuDNN/Inductor autotuning and lazy CUDA initialisation land inside the
first call of an op (a first ``aten::mm`` of 70-80 ms, later ones of 50 µs). That host time
leaves the GPU idle and reads as launch overhead, although the steady state has none of it.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceinsight.trace.model import Trace

FIRST_CALL_MIN_CALLS = 3  # a steady state needs at least two later calls
FIRST_CALL_FACTOR = 10.0  # first call at least this many times the later calls' median ...
FIRST_CALL_MIN_NS = 1_000_000  # ... and at least this long, so tiny ops do not qualify


def first_call_outliers(trace: Trace) -> pl.DataFrame:
    """Per op (name, shapes, dtypes) whose first call is far above its steady state: id of the
    first call, its start/end, first_ns, steady_ns (median of the later calls) and calls."""
    # Only the columns used: filtering and sorting the whole event frame copies every column.
    ops = (
        trace.events.select("id", "ts_ns", "end_ns", "dur_ns", "name", "input_dims", "input_types", "kind")
        .filter(pl.col("kind") == "cpu_op")
        .sort("ts_ns")
    )
    keys = ["name", "input_dims", "input_types"]
    return (
        ops.with_columns(pl.col("name").cast(pl.String))
        .group_by(keys, maintain_order=True)
        .agg(
            pl.len().alias("calls"),
            pl.col("id").first().alias("id"),
            pl.col("ts_ns").first().alias("start_ns"),
            pl.col("end_ns").first().alias("end_ns"),
            pl.col("dur_ns").first().alias("first_ns"),
            pl.col("dur_ns").slice(1).median().alias("steady_ns"),
        )
        .filter(
            (pl.col("calls") >= FIRST_CALL_MIN_CALLS)
            & (pl.col("first_ns") >= FIRST_CALL_MIN_NS)
            & (pl.col("first_ns") >= FIRST_CALL_FACTOR * pl.col("steady_ns"))
        )
        .sort(["first_ns", "name", "id"], descending=[True, False, False])
    )


def first_call_rows(outliers: pl.DataFrame) -> tuple[dict[str, Any], ...]:
    return tuple(
        {
            "name": r["name"],
            "shapes": r["input_dims"],
            "dtypes": r["input_types"],
            "first_ns": int(r["first_ns"]),
            "steady_ns": float(r["steady_ns"]),
            "calls": int(r["calls"]),
        }
        for r in outliers.iter_rows(named=True)
    )
