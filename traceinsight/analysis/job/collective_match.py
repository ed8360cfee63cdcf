"""Collectives across ranks: each one matched on every rank (``matching``), on aligned clocks.

Per collective (one row per matched collective):

- **arrival skew**: on the aligned clocks, the last rank to start it (``last_rank``), the
  spread of the arrivals (``skew_ns`` = last − first start) and ``late_by_ns`` = last − second
  last start: the time every other rank waits because of that one rank;
- **wait**: each rank's wait = last arrival − its own arrival (``total_wait_ns`` over ranks);
- **transfer proper**: the shortest duration among the ranks (the last arrival's, which waits
  for nobody); ``end_spread_ns``: how far apart the ends still are after alignment;
- **bandwidth**: algorithm bandwidth = bytes / transfer; bus bandwidth by nccl-tests'
  formulas (all-reduce × 2(n−1)/n; all-gather, reduce-scatter, all-to-all × (n−1)/n; others
  × 1), against the link's peak per direction when the traces tell it (``links``);
- **overlap with compute**: the share of the collective during which compute kernels run on
  the rank's device, averaged over ranks; ``exposed`` when the last rank (whose duration is the
  transfer) runs it with less than half of it hidden: its transfer adds to the step.

Late arrivals (``late``): per rank that arrived last, what it cost the others and what it was
doing before: its lead-in (since its previous collective) against the other ranks' on the same
collectives, split into compute kernels and the rest, with the host span that covered most of
its host time before the launch (``coll_context``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import polars as pl

from traceinsight.analysis.core.base import AnalysisConfig, Result
from traceinsight.analysis.job.common import common_steps
from traceinsight.analysis.job.lateness import late_arrivals
from traceinsight.analysis.job.links import job_link
from traceinsight.analysis.job.matching import KEY, match
from traceinsight.analysis.job.summary import RankSummary

HALF_RING_KINDS = ("allgather", "reduce_scatter", "all_to_all")
# Below this share of the link's peak a collective's bus bandwidth is "far below the link".
SLOW_LINK_SHARE = 0.25
# A collective is exposed when less than this share of it runs beside compute on the last rank.
EXPOSED_OVERLAP = 0.5

COLLECTIVE_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "process_group": pl.String,
    "p2p": pl.Boolean,
    "match_k": pl.Int64,
    "seq": pl.Int64,
    "collective": pl.String,
    "step": pl.Int64,
    "ranks": pl.Int64,
    "bytes": pl.Int64,
    "dtype": pl.String,
    "first_arrival_ns": pl.Int64,
    "last_rank": pl.Int64,
    "skew_ns": pl.Int64,
    "late_by_ns": pl.Int64,
    "total_wait_ns": pl.Int64,
    "transfer_ns": pl.Int64,
    "end_spread_ns": pl.Int64,
    "algbw_gbps": pl.Float64,
    "busbw_gbps": pl.Float64,
    "link_share": pl.Float64,
    "overlap_share": pl.Float64,
    "exposed": pl.Boolean,
}
RANK_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "rank": pl.Int64,
    "offset_ns": pl.Int64,
    "collectives": pl.Int64,
    "wait_ns": pl.Int64,
    "last_arrivals": pl.Int64,
}


@dataclass(frozen=True)
class CollectiveMatchResult(Result):
    name: ClassVar[str] = "collective_match"
    matched_by: str = ""
    unmatched: int = 0
    collectives: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=COLLECTIVE_SCHEMA))
    per_rank: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=RANK_SCHEMA))
    late: pl.DataFrame = field(default_factory=pl.DataFrame)
    link: str | None = None
    link_gbps: float | None = None
    link_reason: str = ""
    end_spread_p50_ns: int = 0
    end_spread_p90_ns: int = 0
    steps: int = 0  # steps the per-step figures are over (1: the whole trace)

    def to_polars(self) -> pl.DataFrame:
        return self.collectives


def _bus_factor() -> pl.Expr:
    n = pl.col("group_size").fill_null(pl.col("ranks")).cast(pl.Float64)
    return (
        pl.when(pl.col("collective") == "allreduce")
        .then(2 * (n - 1) / n)
        .when(pl.col("collective").is_in(list(HALF_RING_KINDS)))
        .then((n - 1) / n)
        .otherwise(1.0)
    )


def per_collective(rows: pl.DataFrame, link_gbps: float | None) -> pl.DataFrame:
    """One row per matched collective (see the module's docstring)."""
    overlap = (pl.col("overlap_compute_ns") / pl.col("dur_ns")).clip(0.0, 1.0).fill_nan(0.0)
    by_start = pl.col("start_al_ns").sort(descending=True)
    table = (
        rows.group_by(KEY)
        .agg(
            pl.col("seq").first(),
            pl.col("kind").first().alias("collective"),
            pl.col("step").mode().first(),
            pl.len().cast(pl.Int64).alias("ranks"),
            pl.col("bytes").max(),
            pl.col("dtype").first(),
            pl.col("group_size").max(),
            pl.col("start_al_ns").min().alias("first_arrival_ns"),
            pl.col("rank").filter(pl.col("is_last")).first().alias("last_rank"),
            (pl.col("start_al_ns").max() - pl.col("start_al_ns").min()).alias("skew_ns"),
            (by_start.first() - by_start.slice(1, 1).first()).alias("late_by_ns"),
            pl.col("arrival_wait_ns").sum().alias("total_wait_ns"),
            pl.col("dur_ns").min().alias("transfer_ns"),
            (pl.col("end_al_ns").max() - pl.col("end_al_ns").min()).alias("end_spread_ns"),
            overlap.mean().alias("overlap_share"),
            overlap.filter(pl.col("is_last")).first().alias("_last_overlap"),
        )
        .with_columns(
            pl.when(pl.col("transfer_ns") > 0).then(pl.col("bytes") / pl.col("transfer_ns")).cast(pl.Float64).alias("algbw_gbps"),
            (pl.col("_last_overlap").fill_null(0.0) < EXPOSED_OVERLAP).alias("exposed"),
        )
        .with_columns((pl.col("algbw_gbps") * _bus_factor()).alias("busbw_gbps"))
        .with_columns(
            (pl.col("busbw_gbps") / link_gbps if link_gbps else pl.lit(None, pl.Float64)).alias("link_share"),
        )
        .sort("first_arrival_ns", *KEY)
    )
    return table.select(list(COLLECTIVE_SCHEMA)).cast(COLLECTIVE_SCHEMA)  # type: ignore[arg-type]


def analyze(summaries: Sequence[RankSummary], config: AnalysisConfig | None = None) -> CollectiveMatchResult:
    matched = match(summaries)
    link = job_link(summaries)
    if matched.rows.height == 0:
        reason = "no collective operations matched across ranks"
        if matched.unmatched:
            reason += f" ({matched.unmatched} seen on one rank only)"
        return CollectiveMatchResult(available=False, reason=reason, link=link.name, link_gbps=link.peak_gbps, link_reason=link.reason)
    steps = common_steps(summaries)
    rows = matched.rows
    table = per_collective(rows, link.peak_gbps)
    per_rank = (
        rows.group_by("rank")
        .agg(
            pl.len().cast(pl.Int64).alias("collectives"),
            pl.col("arrival_wait_ns").sum().alias("wait_ns"),
            pl.col("is_last").sum().cast(pl.Int64).alias("last_arrivals"),
        )
        .join(matched.offsets.select("rank", "offset_ns"), on="rank", how="left")
        .sort("rank")
        .select(list(RANK_SCHEMA))
        .cast(RANK_SCHEMA)  # type: ignore[arg-type]
    )
    spread = table["end_spread_ns"].cast(pl.Float64)
    return CollectiveMatchResult(
        matched_by=matched.matched_by,
        unmatched=matched.unmatched,
        collectives=table,
        per_rank=per_rank,
        late=late_arrivals(rows, steps),
        link=link.name,
        link_gbps=link.peak_gbps,
        link_reason=link.reason,
        end_spread_p50_ns=int(spread.quantile(0.5) or 0),
        end_spread_p90_ns=int(spread.quantile(0.9) or 0),
        steps=max(len(steps), 1),
    )


def slow(result: CollectiveMatchResult) -> pl.DataFrame:
    """The exposed collectives far below the link's peak (none when the peak is unknown)."""
    if result.link_gbps is None or result.collectives.height == 0:
        return result.collectives.clear()
    return result.collectives.filter(
        pl.col("exposed") & (pl.col("link_share") < SLOW_LINK_SHARE) & pl.col("bytes").is_not_null()
    )
