"""A series of runs (a sweep of sizes, batch sizes, settings): one row per run and each run's
change against the first, judged with the same statistics as ``diff`` (bootstrap interval of
the median step ratio plus a rank test, ``traceinsight.analysis.stats``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

from traceinsight.analysis import stats
from traceinsight.analysis.base import AnalysisConfig, Result
from traceinsight.analysis.job.summary import IDLE_CAUSES, RankSummary

ROW_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "run": pl.Int64,
    "path": pl.String,
    "steps": pl.Int64,
    "step_median_ns": pl.Float64,
    "step_mean_ns": pl.Float64,
    "compute_ns": pl.Float64,
    "communication_ns": pl.Float64,
    "exposed_comm_ns": pl.Float64,
    "idle_ns": pl.Float64,
    "top_kernel": pl.String,
    "top_kernel_share": pl.Float64,
    "top_idle_cause": pl.String,
    "ratio": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "p_value": pl.Float64,
    "verdict": pl.String,
}


@dataclass(frozen=True)
class SeriesResult(Result):
    """Per-step means per run (ns); ``ratio`` = median step of the run / of the first run."""

    name = "series"
    runs: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=ROW_SCHEMA))

    def to_polars(self) -> pl.DataFrame:
        return self.runs


def _samples(summary: RankSummary) -> pl.Series:
    steps = summary.steps.filter(~pl.col("is_warmup")) if summary.steps.height > 1 else summary.steps
    return steps["dur_ns"].cast(pl.Float64)


def analyze(summaries: Sequence[RankSummary], config: AnalysisConfig | None = None) -> SeriesResult:
    if not summaries:
        return SeriesResult(available=False, reason="no run was analysed")
    base = _samples(summaries[0]).to_numpy()
    rows = []
    for i, s in enumerate(summaries):
        durs = _samples(s)
        steps = s.steps.filter(~pl.col("is_warmup")) if s.steps.height > 1 else s.steps
        kernels = s.kernel_mix.filter(pl.col("category") == "compute")
        total_kernel = float(kernels["dur_ns"].sum() or 0)
        idle = {c: float(steps[f"idle_{c}_ns"].sum()) for c in IDLE_CAUSES}
        top_cause = max(idle, key=lambda c: idle[c]) if any(idle.values()) else None
        cmp = stats.compare_samples(base, durs.to_numpy())
        rows.append(
            {
                "run": i,
                "path": s.path,
                "steps": durs.len(),
                "step_median_ns": durs.median(),
                "step_mean_ns": durs.mean(),
                **{c: steps[c].cast(pl.Float64).mean() for c in ("compute_ns", "communication_ns", "exposed_comm_ns", "idle_ns")},
                "top_kernel": kernels["name"][0] if kernels.height else None,
                "top_kernel_share": float(kernels["dur_ns"][0]) / total_kernel if total_kernel else None,
                "top_idle_cause": top_cause,
                "ratio": cmp.ratio,
                "ci_low": cmp.ci_low,
                "ci_high": cmp.ci_high,
                "p_value": cmp.p_value,
                "verdict": "baseline" if i == 0 else cmp.verdict,
            }
        )
    return SeriesResult(runs=pl.DataFrame(rows, schema=ROW_SCHEMA))
