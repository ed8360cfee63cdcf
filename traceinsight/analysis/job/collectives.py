"""Collective wait: each collective matched across the ranks that ran it, how long each rank
waited in it for the last one to arrive, the arrival skew, and the bus bandwidth achieved.

Matching: by process group and sequence number when the trace has them, else by order within
the process group (the k-th collective of a group on one rank is the k-th on the others).

Wait, without trusting clocks across hosts: a collective completes on all ranks at about the
same moment, so a rank's kernel lasts its own wait plus the transfer, and the last rank to
arrive has the shortest kernel. Transfer = the shortest duration among the ranks; a rank's
wait = its duration minus that. Skew (last start minus first start) uses the trace clocks
(``baseTimeNanoseconds``), which are only comparable when the hosts' clocks are in sync.

Bus bandwidth follows nccl-tests (``doc/PERFORMANCE.md``): algbw = bytes / transfer time;
busbw = algbw × 2(n-1)/n for all-reduce, × (n-1)/n for all-gather, reduce-scatter and
all-to-all, × 1 otherwise; bytes are the op's buffer (all-gather: its output); the link's peak
comes from ``links`` (none for host collectives or ranks on several hosts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

from traceinsight.analysis.classify import collective_of
from traceinsight.analysis.core.base import AnalysisConfig, Result
from traceinsight.analysis.job.common import steps_frame
from traceinsight.analysis.job.links import job_link
from traceinsight.analysis.job.summary import RankSummary

DTYPE_BYTES = {
    "float": 4, "float32": 4, "int": 4, "int32": 4, "uint32": 4,
    "double": 8, "float64": 8, "long": 8, "int64": 8, "uint64": 8,
    "bfloat16": 2, "half": 2, "float16": 2, "short": 2, "int16": 2,
    "byte": 1, "char": 1, "bool": 1, "int8": 1, "uint8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
}  # fmt: skip
# Busbw factor: 2(n-1)/n for all-reduce, (n-1)/n for these, 1 for the rest.
HALF_RING_KINDS = ("allgather", "reduce_scatter", "all_to_all")

MATCHED_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "process_group": pl.String,
    "ordinal": pl.Int64,
    "collective": pl.String,
    "step": pl.Int64,
    "ranks": pl.Int64,
    "bytes": pl.Int64,
    "transfer_ns": pl.Int64,
    "last_rank": pl.Int64,
    "max_wait_ns": pl.Int64,
    "skew_ns": pl.Int64,
    "algbw_gbps": pl.Float64,
    "busbw_gbps": pl.Float64,
}
PER_RANK_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "rank": pl.Int64,
    "collectives": pl.Int64,
    "collective_ns": pl.Int64,
    "wait_ns": pl.Int64,
    "wait_share": pl.Float64,
    "last_arrivals": pl.Int64,
}
BY_KIND_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "collective": pl.String,
    "count": pl.Int64,
    "bytes": pl.Int64,
    "transfer_ns": pl.Int64,
    "busbw_median_gbps": pl.Float64,
    "busbw_max_gbps": pl.Float64,
    "link_gbps": pl.Float64,
    "link_share": pl.Float64,
}


def kind_of(collective: pl.Expr) -> pl.Expr:
    """allreduce / allgather / reduce_scatter / all_to_all / broadcast / send_recv / reduce
    (the kernel classifier's spellings) from a torch or NCCL name; barrier, else the name."""
    text = collective.cast(pl.String).str.to_lowercase()
    return pl.coalesce(
        collective_of(text),
        pl.when(text.str.contains("barrier")).then(pl.lit("barrier")),
        text.str.replace_all(r"[_\s]", ""),
    )


def all_collectives(summaries: Sequence[RankSummary]) -> pl.DataFrame:
    """Every rank's collectives with ``rank``, absolute start, kind and bytes."""
    frames = [
        s.collectives.with_columns(
            pl.lit(s.rank, pl.Int64).alias("rank"),
            (pl.col("start_ns") + s.offset_ns()).alias("abs_start_ns"),
        )
        for s in summaries
        if s.collectives.height
    ]
    if not frames:
        return pl.DataFrame()
    both = pl.concat(frames, how="vertical")
    elem = pl.col("dtype").str.to_lowercase().replace_strict(DTYPE_BYTES, default=None, return_dtype=pl.Int64)
    kind = kind_of(pl.col("collective"))
    nelems = pl.when(kind == "allgather").then(pl.col("out_nelems")).otherwise(pl.col("in_nelems"))
    return both.with_columns(kind.alias("kind"), (nelems * elem).alias("bytes"))


def match(summaries: Sequence[RankSummary]) -> pl.DataFrame:
    """One row per rank and matched collective, with ``wait_ns``, ``transfer_ns``, ``skew_ns``.

    A collective is matched when at least two ranks ran it; one seen on a single rank is left
    out (it shows up in the divergence check)."""
    rows = all_collectives(summaries)
    if rows.height == 0:
        return pl.DataFrame()
    has_seq = rows["seq"].is_not_null().all()
    key = ["process_group", "seq"] if has_seq else ["process_group", "ordinal"]
    over = pl.len().over(key)
    return (
        rows.filter(over >= 2)
        .with_columns(
            pl.col("dur_ns").min().over(key).alias("transfer_ns"),
            (pl.col("abs_start_ns").max() - pl.col("abs_start_ns").min()).over(key).alias("skew_ns"),
            pl.len().over(key).cast(pl.Int64).alias("ranks"),
        )
        .with_columns((pl.col("dur_ns") - pl.col("transfer_ns")).alias("wait_ns"))
        .with_columns(
            # The last arrival: the shortest kernel (ties: the latest start, then lowest rank).
            (pl.col("rank") == pl.col("rank").sort_by(["dur_ns", "abs_start_ns"], descending=[False, True]).first().over(key)).alias(
                "is_last"
            )
        )
    )


def link_gbps(summaries: Sequence[RankSummary]) -> float | None:
    """The link's one-direction peak where the traces tell it (``links.job_link``), else None."""
    return job_link(summaries).peak_gbps


@dataclass(frozen=True)
class CollectiveWaitResult(Result):
    name = "collective_wait"
    matched_by: str = "order"
    collectives: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=MATCHED_SCHEMA))
    per_rank: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=PER_RANK_SCHEMA))
    by_kind: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=BY_KIND_SCHEMA))
    wait_by_step: pl.DataFrame = field(default_factory=pl.DataFrame)
    link_gbps: float | None = None

    def to_polars(self) -> pl.DataFrame:
        return self.per_rank

    def wait_ns(self, rank: int) -> int:
        row = self.per_rank.filter(pl.col("rank") == rank)
        return int(row["wait_ns"][0]) if row.height else 0


def wait_by_step(matched: pl.DataFrame) -> pl.DataFrame:
    """rank, step, wait_ns, collective_ns."""
    if matched.height == 0:
        return pl.DataFrame(schema={"rank": pl.Int64, "step": pl.Int64, "wait_ns": pl.Int64, "collective_ns": pl.Int64})
    return (
        matched.group_by("rank", "step")
        .agg(pl.col("wait_ns").sum(), pl.col("dur_ns").sum().alias("collective_ns"))
        .sort("rank", "step")
    )


def analyze(summaries: Sequence[RankSummary], config: AnalysisConfig | None = None) -> CollectiveWaitResult:
    matched = match(summaries)
    if matched.height == 0:
        return CollectiveWaitResult(available=False, reason="no collective operations matched across ranks")
    steps = steps_frame(summaries)
    step_total = steps.group_by("rank").agg(pl.col("dur_ns").sum().alias("_steps_ns"))
    per_rank = (
        matched.group_by("rank")
        .agg(
            pl.len().cast(pl.Int64).alias("collectives"),
            pl.col("dur_ns").sum().alias("collective_ns"),
            pl.col("wait_ns").sum(),
            pl.col("is_last").sum().cast(pl.Int64).alias("last_arrivals"),
        )
        .join(step_total, on="rank", how="left")
        .with_columns(
            wait_share=pl.when(pl.col("_steps_ns") > 0).then(pl.col("wait_ns") / pl.col("_steps_ns")).otherwise(0.0)
        )
        .sort("rank")
        .select(list(PER_RANK_SCHEMA))
        .cast(PER_RANK_SCHEMA)  # type: ignore[arg-type]
    )
    key = ["process_group", "seq"] if matched["seq"].is_not_null().all() else ["process_group", "ordinal"]
    n = pl.col("group_size").fill_null(pl.col("ranks")).cast(pl.Float64)
    factor = (
        pl.when(pl.col("kind") == "allreduce")
        .then(2 * (n - 1) / n)
        .when(pl.col("kind").is_in(list(HALF_RING_KINDS)))
        .then((n - 1) / n)
        .otherwise(1.0)
    )
    algbw = pl.when(pl.col("transfer_ns") > 0).then(pl.col("bytes") / pl.col("transfer_ns"))  # B/ns = GB/s
    per_op = (
        matched.group_by(key)
        .agg(
            pl.col("collective").first(),
            pl.col("kind").first(),
            pl.col("step").mode().first(),
            pl.col("ranks").first(),
            pl.col("bytes").max(),
            pl.col("group_size").max(),
            pl.col("transfer_ns").first(),
            pl.col("rank").filter(pl.col("is_last")).first().alias("last_rank"),
            pl.col("wait_ns").max().alias("max_wait_ns"),
            pl.col("skew_ns").first(),
        )
        .with_columns(algbw.cast(pl.Float64).alias("algbw_gbps"))
        .with_columns((pl.col("algbw_gbps") * factor).alias("busbw_gbps"))
        .sort(key)
    )
    if "ordinal" not in per_op.columns:
        per_op = per_op.with_columns(pl.col("seq").alias("ordinal"))
    link = link_gbps(summaries)
    by_kind = (
        per_op.group_by("kind")
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            pl.col("bytes").sum(),
            pl.col("transfer_ns").sum(),
            pl.col("busbw_gbps").median().alias("busbw_median_gbps"),
            pl.col("busbw_gbps").max().alias("busbw_max_gbps"),
        )
        .with_columns(
            pl.lit(link, pl.Float64).alias("link_gbps"),
            (pl.col("busbw_median_gbps") / link if link else pl.lit(None, pl.Float64)).alias("link_share"),
        )
        .rename({"kind": "collective"})
        .sort(["transfer_ns", "collective"], descending=[True, False])
        .select(list(BY_KIND_SCHEMA))
        .cast(BY_KIND_SCHEMA)  # type: ignore[arg-type]
    )
    return CollectiveWaitResult(
        matched_by="process group and sequence number" if "seq" in key else "order within the process group",
        collectives=per_op.select(list(MATCHED_SCHEMA)).cast(MATCHED_SCHEMA),  # type: ignore[arg-type]
        per_rank=per_rank,
        by_kind=by_kind,
        wait_by_step=wait_by_step(matched),
        link_gbps=link,
    )
