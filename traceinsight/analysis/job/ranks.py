"""The per-rank table and the divergence check.

Per rank, over the steps every rank has (warm-up left out): device step time, and per step on
average compute, communication, exposed communication, idle by cause, and the time waited in
collectives for other ranks. ``comm_measured_on`` says where communication was measured:
"device" (collective kernels; exposed = with no compute kernel running) or "host" (the host
spans of a backend without device kernels, such as gloo; exposed = with the GPU idle), as
``summary`` explains; the collective wait section matches the same kernels or spans.

Divergence: ranks whose kernel count, collective count or collective sizes differ from the
most common ones (a rank running a different program, a different shape, or a retry).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

from traceinsight.analysis.core.base import AnalysisConfig, Result
from traceinsight.analysis.job import collectives as coll
from traceinsight.analysis.job.common import common_steps, steps_frame
from traceinsight.analysis.job.summary import IDLE_CAUSES, RankSummary

PER_STEP = ("compute_ns", "communication_ns", "exposed_comm_ns", "idle_ns", *(f"idle_{c}_ns" for c in IDLE_CAUSES))
TABLE_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "rank": pl.Int64,
    "steps": pl.Int64,
    "step_median_ns": pl.Float64,
    "step_mean_ns": pl.Float64,
    **{c: pl.Float64 for c in PER_STEP},
    "collective_wait_ns": pl.Float64,
    "kernels": pl.Int64,
    "collectives": pl.Int64,
    "comm_measured_on": pl.String,
}
DIVERGENCE_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "rank": pl.Int64,
    "what": pl.String,
    "value": pl.String,
    "expected": pl.String,
}


@dataclass(frozen=True)
class RankTableResult(Result):
    """Per-step averages per rank (ns per step), over ``steps_used``."""

    name = "rank_table"
    steps_used: tuple[int, ...] = ()
    table: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=TABLE_SCHEMA))
    divergence: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=DIVERGENCE_SCHEMA))

    def to_polars(self) -> pl.DataFrame:
        return self.table

    def row(self, rank: int) -> dict[str, float]:
        rows = self.table.filter(pl.col("rank") == rank).to_dicts()
        if not rows:
            raise KeyError(f"rank {rank} not in the table")
        return rows[0]


def divergence(summaries: Sequence[RankSummary]) -> pl.DataFrame:
    """Ranks that differ from the most common value of each signature."""
    rows = []
    for s in summaries:
        compute = s.kernel_mix.filter(pl.col("category") == "compute")
        sizes = s.collectives.select(pl.col("in_nelems").fill_null(-1)).to_series().to_list()
        rows.append(
            {
                "rank": s.rank,
                "kernel launches": str(int(compute["count"].sum() or 0)),
                "kernel names": str(compute.height),
                "collectives": str(s.collectives.height),
                "collective sizes": str(hash(tuple(sizes)) & 0xFFFFFFFF),
            }
        )
    frame = pl.DataFrame(rows)
    out = []
    for what in ("kernel launches", "kernel names", "collectives", "collective sizes"):
        counts = frame.group_by(what).len().sort(["len", what], descending=[True, False])
        if counts.height < 2:
            continue
        majority = int(counts["len"][0]) > int(counts["len"][1])
        expected = str(counts[what][0]) if majority else "(no majority)"
        differing = frame.filter(pl.col(what) != expected) if majority else frame
        for r in differing.iter_rows(named=True):
            shown = "differ" if what == "collective sizes" else r[what]
            out.append({"rank": r["rank"], "what": what, "value": shown, "expected": expected})
    return pl.DataFrame(out, schema=DIVERGENCE_SCHEMA)


def analyze(summaries: Sequence[RankSummary], config: AnalysisConfig | None = None) -> RankTableResult:
    if not summaries:
        return RankTableResult(available=False, reason="no rank was analysed")
    used = common_steps(summaries)
    steps = steps_frame(summaries).filter(pl.col("step").is_in(used))
    waits = coll.wait_by_step(coll.match(summaries))
    waits = waits.filter(pl.col("step").is_in(used)).group_by("rank").agg(pl.col("wait_ns").sum().alias("_wait"))
    counts = pl.DataFrame(
        {
            "rank": [s.rank for s in summaries],
            "kernels": [int(s.kernel_mix.filter(pl.col("category") == "compute")["count"].sum() or 0) for s in summaries],
            "collectives": [s.collectives.height for s in summaries],
            "comm_measured_on": [s.comm_measured_on for s in summaries],
        },
        schema={"rank": pl.Int64, "kernels": pl.Int64, "collectives": pl.Int64, "comm_measured_on": pl.String},
    )
    table = (
        steps.group_by("rank")
        .agg(
            pl.len().cast(pl.Int64).alias("steps"),
            pl.col("dur_ns").median().alias("step_median_ns"),
            pl.col("dur_ns").mean().alias("step_mean_ns"),
            *[pl.col(c).mean() for c in PER_STEP],
        )
        .join(waits, on="rank", how="left")
        .with_columns((pl.col("_wait").fill_null(0) / pl.col("steps")).alias("collective_wait_ns"))
        .join(counts, on="rank", how="left")
        .sort("rank")
        .select(list(TABLE_SCHEMA))
        .cast(TABLE_SCHEMA)  # type: ignore[arg-type]
    )
    return RankTableResult(steps_used=tuple(used), table=table, divergence=divergence(summaries))
