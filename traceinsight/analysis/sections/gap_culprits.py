"""The culprit of each idle gap: the host event on the launching thread that held the GPU's
next work back (the innermost op or annotation running at the gap's middle, the synchronising op
for a gap that began in a sync, the data-loading span for a data-loading gap)."""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from traceinsight.analysis.lib.host_names import DATA_LOADING_PATTERN, name_matches
from traceinsight.analysis.lib.lineage import NONE, climb, ids_at, names_at, parent_rows
from traceinsight.trace.model import Trace
from traceinsight.trace.schema import PROFILER_STEP_PREFIX

THREAD = ["pid", "tid"]


def innermost_at(trace: Trace, probes: pl.DataFrame, containers_filter: pl.Expr) -> pl.DataFrame:
    """For probes (row, pid, tid, t), the innermost container on that thread holding instant t.

    Containers are the host events passing ``containers_filter``. Start from the last one that
    began at or before t and climb the host tree (``parent``) until one is still running; the
    climb is array lookups once per nesting level for all probes, not per event. A climb that
    leaves the probes' threads gives no row.
    """
    out_schema = {"row": pl.UInt32, "culprit_id": pl.Int64, "culprit": pl.String}
    if probes.height == 0:
        return pl.DataFrame(schema=out_schema)
    events = trace.events.select("id", "ts_ns", "end_ns", "name", "kind", *THREAD)
    on_threads = events.select(*THREAD).with_row_index("_r").join(
        probes.select(THREAD).unique(), on=THREAD, how="semi"
    )["_r"].to_numpy()
    in_tree = np.zeros(events.height, dtype=bool)
    in_tree[on_threads] = True
    ok = events.select(containers_filter.fill_null(False))[:, 0].to_numpy() & in_tree
    containers = (
        events.filter(pl.Series(ok)).select(*THREAD, pl.col("id").alias("cid"), pl.col("ts_ns").alias("cts")).sort("cts")
    )
    if containers.height == 0:
        return pl.DataFrame(schema=out_schema)
    start = (
        probes.sort("t")
        .join_asof(containers, left_on="t", right_on="cts", by=THREAD, strategy="backward", check_sortedness=False)
        .select("row", "t", "cid")
    )
    t = start["t"].to_numpy()
    row = climb(trace, start["cid"].fill_null(NONE), 0)[0]
    end_ns = events["end_ns"].to_numpy()
    found = np.full(row.size, NONE, dtype=np.int64)
    kept = np.ones(row.size, dtype=bool)
    active = row >= 0
    while active.any():
        at = np.maximum(row, 0)
        kept &= ~active | in_tree[at]  # climbed off the probes' threads: no answer
        active &= in_tree[at]
        hit = active & ok[at] & (end_ns[at] > t)
        found[hit] = row[hit]
        active &= ~hit
        row = np.where(active, parent_rows(trace, row), NONE)
        active &= row >= 0
    return (
        start.select("row")
        .with_columns(culprit_id=ids_at(trace, found), culprit=names_at(trace, found))
        .filter(pl.Series(kept))
    )


def culprits(trace: Trace, gaps: pl.DataFrame) -> pl.DataFrame:
    """Culprit per gap row: for data loading the data-loading span; for a gap that began in a
    synchronising call the op that synchronised; else the innermost op or annotation at the
    gap's middle. ProfilerStep spans are never culprits (the step column says which step)."""
    kind = pl.col("kind").cast(pl.String)
    not_step = ~name_matches(trace.events, "^" + re.escape(PROFILER_STEP_PREFIX))
    ops_and_annotations = kind.is_in(["cpu_op", "user_annotation"]) & not_step
    middle = pl.col("start_ns") + pl.col("dur_ns") // 2
    at_start = (pl.col("cause") == "sync") & pl.col("sync_at_start")
    probes = gaps.select("row", *THREAD, pl.when(at_start).then(pl.col("start_ns")).otherwise(middle).alias("t"))
    generic = innermost_at(trace, probes, ops_and_annotations)
    data_probes = gaps.filter(pl.col("cause") == "data_loading").select("row", *THREAD, middle.alias("t"))
    data = innermost_at(trace, data_probes, ops_and_annotations & name_matches(trace.events, DATA_LOADING_PATTERN))
    data = data.filter(pl.col("culprit_id").is_not_null())
    return pl.concat([data, generic.join(data.select("row"), on="row", how="anti")])
