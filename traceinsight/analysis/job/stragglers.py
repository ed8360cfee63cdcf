"""Stragglers: per step and overall, the rank the others wait for, and why it is late.

In a synchronous job every rank's step lasts about as long as the slowest rank's, because
the others wait for it in a collective. So a rank's *own* time in a step is its device step
time minus what it waited in collectives (see ``collectives``); the straggler of a step is the
rank with the most own time, and it costs the others its own time minus the median of theirs
(``lost_ns``). Without collectives the own time is the step time.

The reason comes from the straggler's own step breakdown (``steps``' parts), against the
median of the other ranks: the part with the largest excess names it — data loading, host
(CPU ops, runtime calls), a slower kernel mix (more or slower compute kernels), memory
copies, or host time the trace does not explain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceinsight.analysis.core.base import AnalysisConfig, Result
from traceinsight.analysis.job import collectives as coll
from traceinsight.analysis.job.common import (
    MATERIAL_NS,
    MATERIAL_SHARE,
    common_steps,
    share,
    steps_frame,
)
from traceinsight.analysis.job.summary import STEP_PARTS, RankSummary

REASON_OF_PART = {
    "dataloader": "data_loading",
    "kernel": "slower_kernel_mix",
    "memcpy": "memory_copies",
    "memset": "memory_copies",
    "runtime": "host",
    "cpu_exec": "host",
    "other": "untraced_host",
}
REASON_TEXT = {
    "data_loading": "it spends longer loading data",
    "slower_kernel_mix": "its kernels take longer (more work or slower kernels)",
    "memory_copies": "its memory copies take longer",
    "host": "its host is slower to run ops and launch work",
    "untraced_host": "its device idles for host time the trace does not explain",
}
PER_STEP_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "step": pl.Int64,
    "straggler": pl.Int64,
    "own_ns": pl.Int64,
    "others_median_own_ns": pl.Float64,
    "lost_ns": pl.Float64,
    "step_ns": pl.Float64,
}
EXCESS_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "part": pl.String,
    "straggler_ns": pl.Float64,
    "others_median_ns": pl.Float64,
    "excess_ns": pl.Float64,
}
KERNEL_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "name": pl.String,
    "straggler_ns": pl.Float64,
    "others_median_ns": pl.Float64,
    "excess_ns": pl.Float64,
    "straggler_count": pl.Int64,
    "others_median_count": pl.Float64,
}


@dataclass(frozen=True)
class StragglerResult(Result):
    name = "stragglers"
    straggler: int | None = None  # the overall straggler, when material
    material: bool = False
    reason: str | None = None
    reason_text: str | None = None
    lost_ns: int = 0  # what the other ranks lose to it over ``steps_used``
    lost_share: float = 0.0  # per step, of the job's median step (as the straggler finding)
    steps_led: int = 0  # steps in which it was the straggler
    steps_used: tuple[int, ...] = ()
    per_step: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=PER_STEP_SCHEMA))
    by_rank: pl.DataFrame = field(default_factory=pl.DataFrame)
    excess_parts: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=EXCESS_SCHEMA))
    excess_kernels: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=KERNEL_SCHEMA))

    def to_polars(self) -> pl.DataFrame:
        return self.per_step


def own_time(summaries: Sequence[RankSummary], used: list[int]) -> pl.DataFrame:
    """rank, step, dur_ns, wait_ns, own_ns over the steps ``used``."""
    steps = steps_frame(summaries).filter(pl.col("step").is_in(used)).select("rank", "step", "dur_ns")
    waits = coll.wait_by_step(coll.match(summaries)).select("rank", "step", "wait_ns")
    return (
        steps.join(waits, on=["rank", "step"], how="left")
        .with_columns(pl.col("wait_ns").fill_null(0))
        .with_columns(own_ns=(pl.col("dur_ns") - pl.col("wait_ns")).clip(lower_bound=0))
    )


def _per_step(own: pl.DataFrame) -> pl.DataFrame:
    ranked = own.sort(["step", "own_ns", "rank"], descending=[False, True, False])
    top = ranked.group_by("step", maintain_order=True).first().select(
        "step", pl.col("rank").alias("straggler"), "own_ns"
    )
    others = (
        own.join(top.select("step", "straggler"), on="step")
        .filter(pl.col("rank") != pl.col("straggler"))
        .group_by("step")
        .agg(pl.col("own_ns").median().alias("others_median_own_ns"))
    )
    step_ns = own.group_by("step").agg(pl.col("dur_ns").median().cast(pl.Float64).alias("step_ns"))
    return (
        top.join(others, on="step", how="left")
        .join(step_ns, on="step")
        .with_columns(
            lost_ns=(pl.col("own_ns") - pl.col("others_median_own_ns").fill_null(pl.col("own_ns"))).clip(lower_bound=0)
        )
        .sort("step")
        .select(list(PER_STEP_SCHEMA))
        .cast(PER_STEP_SCHEMA)  # type: ignore[arg-type]
    )


def _excess_parts(summaries: Sequence[RankSummary], rank: int, used: list[int]) -> pl.DataFrame:
    parts = [p for p in STEP_PARTS if p != "communication"]
    steps = steps_frame(summaries).filter(pl.col("step").is_in(used))
    means = steps.group_by("rank").agg([pl.col(f"part_{p}_ns").mean().alias(p) for p in parts])
    mine = means.filter(pl.col("rank") == rank)
    others = means.filter(pl.col("rank") != rank)
    rows = []
    for p in parts:
        own = float(mine[p][0]) if mine.height else 0.0
        median = float(others[p].median() or 0.0) if others.height else 0.0  # type: ignore[arg-type]
        rows.append({"part": p, "straggler_ns": own, "others_median_ns": median, "excess_ns": own - median})
    return pl.DataFrame(rows, schema=EXCESS_SCHEMA).sort(["excess_ns", "part"], descending=[True, False])


def _excess_kernels(summaries: Sequence[RankSummary], rank: int, top_n: int) -> pl.DataFrame:
    mixes = [
        s.kernel_mix.filter(pl.col("category") == "compute").with_columns(pl.lit(s.rank, pl.Int64).alias("rank"))
        for s in summaries
    ]
    if not mixes:
        return pl.DataFrame(schema=KERNEL_SCHEMA)
    every = pl.concat(mixes)
    other_ranks = pl.DataFrame({"rank": [s.rank for s in summaries if s.rank != rank]}, schema={"rank": pl.Int64})
    # Ranks without a kernel count zero for it.
    grid = every.select("name").unique().join(other_ranks, how="cross")
    others = (
        grid.join(every, on=["name", "rank"], how="left")
        .fill_null(0)
        .group_by("name")
        .agg(
            pl.col("dur_ns").median().alias("others_median_ns"),
            pl.col("count").median().alias("others_median_count"),
        )
    )
    mine = every.filter(pl.col("rank") == rank).select("name", pl.col("dur_ns").alias("straggler_ns"), pl.col("count").alias("straggler_count"))
    return (
        mine.join(others, on="name", how="full", coalesce=True)
        .with_columns(
            pl.col("straggler_ns").fill_null(0).cast(pl.Float64),
            pl.col("straggler_count").fill_null(0),
            pl.col("others_median_ns").fill_null(0.0),
            pl.col("others_median_count").fill_null(0.0),
        )
        .with_columns(excess_ns=pl.col("straggler_ns") - pl.col("others_median_ns"))
        .sort(["excess_ns", "name"], descending=[True, False])
        .head(top_n)
        .select(list(KERNEL_SCHEMA))
        .cast(KERNEL_SCHEMA)  # type: ignore[arg-type]
    )


def analyze(summaries: Sequence[RankSummary], config: AnalysisConfig | None = None) -> StragglerResult:
    cfg = config or AnalysisConfig()
    if len(summaries) < 2:
        return StragglerResult(available=False, reason="needs at least two ranks")
    used = common_steps(summaries)
    if not used:
        return StragglerResult(available=False, reason="the ranks share no step")
    own = own_time(summaries, used)
    per_step = _per_step(own)
    by_rank = (
        per_step.group_by("straggler")
        .agg(pl.len().cast(pl.Int64).alias("steps_led"), pl.col("lost_ns").sum())
        .rename({"straggler": "rank"})
        .sort(["lost_ns", "rank"], descending=[True, False])
    )
    top = by_rank.row(0, named=True)
    # The job's step as the rank table and the findings take it (the median over ranks of each
    # rank's median step), so that the share printed here is the straggler finding's saving.
    job_step = float(
        own.group_by("rank").agg(pl.col("dur_ns").median())["dur_ns"].median() or 0.0  # type: ignore[arg-type]
    )
    lost = float(top["lost_ns"])
    lost_share = share(lost / len(used), job_step)
    material = lost >= MATERIAL_NS and lost_share >= MATERIAL_SHARE
    rank = int(top["rank"])
    parts = _excess_parts(summaries, rank, used)
    kernels = _excess_kernels(summaries, rank, cfg.top_n)
    reason: str | None = None
    if parts.height and float(parts["excess_ns"][0]) > 0:
        reason = REASON_OF_PART[str(parts["part"][0])]
    common: dict[str, Any] = {
        "steps_used": tuple(used),
        "per_step": per_step,
        "by_rank": by_rank,
        "lost_ns": int(lost),
        "lost_share": lost_share,
        "steps_led": int(top["steps_led"]),
    }
    if not material:
        return StragglerResult(material=False, excess_parts=parts, excess_kernels=kernels, **common)
    return StragglerResult(
        straggler=rank,
        material=True,
        reason=reason,
        reason_text=REASON_TEXT.get(reason or ""),
        excess_parts=parts,
        excess_kernels=kernels,
        **common,
    )
