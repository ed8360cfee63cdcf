"""What an allocator call costs the operator that made it, beyond the call itself.

An operator that had to ``cudaMalloc`` (the caching allocator had no free block: it was emptied,
or the shapes keep changing) is slower than the same operator with the same input shapes whose
block came from the cache, and by more than the ``cudaMalloc`` call's own time: the allocator's
bookkeeping around it, and a ``cudaFree`` that waits for the device. The trace holds both kinds
of call of the same operator, so the cached calls say what the allocating ones would cost warm.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from traceinsight.analysis.lib.lineage import climb, ids_at, parent_rows
from traceinsight.analysis.whatif.repeats import CollapseSpans
from traceinsight.trace.model import Trace

THREAD = ["pid", "tid"]


def allocating_ops(trace: Trace, calls: pl.DataFrame) -> pl.DataFrame:
    """Per (operator, input shapes) with calls that allocated and calls that did not: the
    allocating calls' spans, their mean host time, and the mean of the cached ones."""
    events = trace.events
    ops = events.filter(pl.col("kind") == "cpu_op").select(
        "id", *THREAD, "ts_ns", "end_ns", "dur_ns", pl.col("name").cast(pl.String), pl.col("input_dims").cast(pl.String)
    )
    # the op directly around each allocator call is the one priced (an op around it is priced
    # through it: scaling both would count the nested time twice) ...
    hit = calls.select(pl.col("parent").alias("id"), pl.col("dur_ns").alias("alloc_ns")).group_by("id").agg(pl.col("alloc_ns").sum())
    marked = ops.join(hit, on="id", how="left").with_columns(alloc=pl.col("alloc_ns").is_not_null())
    key = ["name", "input_dims"]
    # ... and no op with an allocator call anywhere inside it is a warm call (aten::pow calls
    # the inner aten::pow that allocates; counted warm, the outer one made every allocating
    # call look cheaper than the cached ones, and none was priced)
    cold = _around(trace, calls)
    warm = (
        marked.join(cold, on="id", how="anti")
        .group_by(key)
        .agg(pl.col("dur_ns").mean().alias("warm_ns"))
    )
    return (
        marked.filter(pl.col("alloc"))
        .join(warm, on=key, how="inner")
        .group_by(key)
        .agg(
            pl.col("dur_ns").mean().alias("with_ns"), pl.col("alloc_ns").mean(), pl.col("warm_ns").first(),
            pl.len().alias("calls"),
            pl.struct(*THREAD, "ts_ns", "end_ns").alias("spans"),
        )
        .with_columns(
            # the non-allocator part of an allocating call, as long as a warm call: never longer
            factor=(pl.col("warm_ns") / (pl.col("with_ns") - pl.col("alloc_ns")).clip(lower_bound=1)).clip(0.0, 1.0),
            excess_ns=((pl.col("with_ns") - pl.col("alloc_ns") - pl.col("warm_ns")).clip(lower_bound=0) * pl.len()),
        )
        .filter(pl.col("factor") < 1.0)
        .sort(key)
    )


def _around(trace: Trace, calls: pl.DataFrame) -> pl.DataFrame:
    """The ids of every op an allocator call lies inside, at any depth (the calls' parents,
    then theirs, up to the root)."""
    rows = parent_rows(trace, climb(trace, calls["id"], 0)[0])
    found = []
    while (rows >= 0).any():
        rows = rows[rows >= 0]
        found.append(rows)
        rows = parent_rows(trace, rows)
    every = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
    return pl.DataFrame({"id": ids_at(trace, every)})


def warm_allocations(slow: pl.DataFrame) -> tuple[CollapseSpans, ...]:
    """Each allocating call's own host time (the allocator call aside) as long as a warm one's."""
    return tuple(
        CollapseSpans(
            tuple((int(s["pid"]), int(s["tid"]), int(s["ts_ns"]), int(s["end_ns"])) for s in r["spans"]),
            float(r["factor"]),
            what=f"{r['name']} calls that allocated",
        )
        for r in slow.iter_rows(named=True)
    )
