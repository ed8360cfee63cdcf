"""Who made the others wait, and with what work: the late arrivals of matched collectives.

For each rank that arrived last at some collectives, over those collectives (in the steps
every rank has, or the whole trace without steps):

- ``late_by_ns``: the sum of (its arrival − the second-last arrival): what the others waited
  for it alone; had it arrived with the second-last rank, each of those collectives would have
  started that much earlier on every rank;
- ``lead_excess_ns``: its lead-in (end of its previous collective → this one's start) minus
  the median of the other ranks' on the same collectives, and ``compute_excess_ns``: the part
  of that which is compute kernels. More than half compute: it was late because of its
  **kernels**; else because of its **host** (the device idled waiting for the launch);
- ``work`` / ``work_ns`` / ``others_work_ns``: the host span that covered most of its host time
  before the launches (its most frequent one over those collectives), its mean time per
  collective, and the other ranks' mean time in a span of that name on the same collectives.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from traceinsight.analysis.job.matching import KEY

LATE_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "rank": pl.Int64,
    "collectives": pl.Int64,
    "late_by_ns": pl.Int64,
    "late_by_per_step_ns": pl.Float64,
    "lead_excess_ns": pl.Float64,
    "compute_excess_ns": pl.Float64,
    "cause": pl.String,
    "work": pl.String,
    "work_ns": pl.Float64,
    "others_work_ns": pl.Float64,
}


def late_arrivals(rows: pl.DataFrame, steps: Sequence[int]) -> pl.DataFrame:
    """One row per rank that arrived last somewhere, largest ``late_by_ns`` first."""
    if rows.height == 0:
        return pl.DataFrame(schema=LATE_SCHEMA)
    scope = rows.filter(pl.col("step").is_in(list(steps))) if steps else rows
    if scope.height == 0:
        scope = rows
    n_steps = max(len(steps), 1)
    by_start = pl.col("start_al_ns").sort(descending=True)
    per_coll = scope.with_columns(
        (by_start.first() - by_start.slice(1, 1).first()).over(KEY).alias("_late_by"),
        pl.col("rank").filter(pl.col("is_last")).first().over(KEY).alias("_last"),
    )
    last = per_coll.filter(pl.col("is_last"))
    others = per_coll.filter(~pl.col("is_last"))
    # The other ranks on the same collectives: median lead-in, and their time in the late
    # rank's work span where theirs has the same name.
    theirs = others.join(
        last.select(*KEY, pl.col("lead_host").alias("_late_work")), on=KEY, how="inner"
    ).group_by(KEY).agg(
        pl.col("lead_ns").median().alias("_o_lead"),
        pl.col("lead_compute_ns").median().alias("_o_compute"),
        pl.when(pl.col("lead_host") == pl.col("_late_work")).then(pl.col("lead_host_ns")).otherwise(0).mean().alias("_o_work"),
    )
    joined = last.join(theirs, on=KEY, how="left")
    work = (
        joined.filter(pl.col("lead_host").is_not_null())
        .group_by("rank", "lead_host")
        .agg(pl.len().alias("_n"), pl.col("lead_host_ns").sum().alias("_w"))
        .sort(["rank", "_n", "_w", "lead_host"], descending=[False, True, True, False])
        .group_by("rank", maintain_order=True)
        .first()
        .select("rank", pl.col("lead_host").alias("work"))
    )
    out = (
        joined.join(work, on="rank", how="left")
        .group_by("rank")
        .agg(
            pl.len().cast(pl.Int64).alias("collectives"),
            pl.col("_late_by").sum().cast(pl.Int64).alias("late_by_ns"),
            (pl.col("lead_ns") - pl.col("_o_lead")).mean().alias("lead_excess_ns"),
            (pl.col("lead_compute_ns") - pl.col("_o_compute")).mean().alias("compute_excess_ns"),
            pl.col("work").first(),
            pl.col("lead_host_ns").filter(pl.col("lead_host") == pl.col("work")).mean().alias("work_ns"),
            pl.col("_o_work").filter(pl.col("lead_host") == pl.col("work")).mean().alias("others_work_ns"),
        )
        .with_columns(
            (pl.col("late_by_ns") / n_steps).alias("late_by_per_step_ns"),
            pl.when(pl.col("compute_excess_ns").fill_null(0) >= 0.5 * pl.col("lead_excess_ns").fill_null(0).clip(lower_bound=1))
            .then(pl.lit("kernels"))
            .otherwise(pl.lit("host"))
            .alias("cause"),
        )
        .sort(["late_by_ns", "rank"], descending=[True, False])
    )
    return out.select(list(LATE_SCHEMA)).cast(LATE_SCHEMA)  # type: ignore[arg-type]
