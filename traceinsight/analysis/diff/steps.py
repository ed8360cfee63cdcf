"""Step time before and after: two samples of device (or host) step time and a noise-aware verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import polars as pl

from traceinsight.analysis.diff.side import DiffOptions, Side
from traceinsight.analysis.lib.stats import DEFAULT_ALPHA, compare_samples

Verdict = Literal["faster", "slower", "no_significant_change"]


@dataclass(frozen=True)
class StepTimeDiff:
    available: bool = True
    reason: str | None = None
    metric: str = "device_dur_ns"
    n_before: int = 0
    n_after: int = 0
    dropped_before: int = 0
    dropped_after: int = 0
    outliers_before: int = 0
    outliers_after: int = 0
    # Which statistic ``ratio``, ``change_pct`` and the interval compare ("mean": the total
    # time of the kept steps over their number, which no stall can hide from).
    statistic: str = "mean"
    before_mean_ns: float | None = None
    after_mean_ns: float | None = None
    before_total_ns: int | None = None
    after_total_ns: int | None = None
    before_median_ns: float | None = None
    after_median_ns: float | None = None
    before_p90_ns: float | None = None
    after_p90_ns: float | None = None
    ratio: float | None = None
    change_pct: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float = 1.0 - DEFAULT_ALPHA
    p_value: float | None = None
    test: str | None = None
    verdict: Verdict = "no_significant_change"
    verdict_reason: str = ""
    # The fewest kept steps a run needs for the test to be made at all.
    min_steps: int = 3
    steps: pl.DataFrame = field(default_factory=pl.DataFrame)


def _step_metric(before: pl.DataFrame, after: pl.DataFrame) -> str:
    for frame in (before, after):
        if frame["device_dur_ns"].null_count() == frame.height:
            return "host_dur_ns"
    return "device_dur_ns"


def compare_steps(before: Side, after: Side, opts: DiffOptions) -> StepTimeDiff:
    if before.steps_frame is None or after.steps_frame is None:
        reasons = [f"{s.label}: {s.steps_reason}" for s in (before, after) if s.steps_frame is None]
        return StepTimeDiff(
            available=False,
            reason="; ".join(reasons),
            verdict="no_significant_change",
            verdict_reason="no step times to compare",
        )
    metric = _step_metric(before.steps_frame, after.steps_frame)
    b = before.steps_frame[metric].drop_nulls()
    a = after.steps_frame[metric].drop_nulls()
    cmp = compare_samples(
        b.to_numpy(),
        a.to_numpy(),
        alpha=opts.alpha,
        n_boot=opts.n_boot,
        seed=opts.seed,
        min_samples=opts.min_steps,
        statistic="mean",
    )
    paired = (
        before.steps_frame.select(pl.col("step").alias("before_step"), pl.col(metric).alias("before_ns"))
        .with_row_index("index")
        .join(
            after.steps_frame.select(pl.col("step").alias("after_step"), pl.col(metric).alias("after_ns")).with_row_index(
                "index"
            ),
            on="index",
            how="full",
            coalesce=True,
        )
        .sort("index")
        .with_columns(
            pl.col("index").cast(pl.Int64),
            ratio=pl.when(pl.col("before_ns") > 0).then(pl.col("after_ns") / pl.col("before_ns")),
        )
    )
    return StepTimeDiff(
        metric=metric,
        n_before=cmp.n_before,
        n_after=cmp.n_after,
        dropped_before=before.dropped,
        dropped_after=after.dropped,
        outliers_before=before.outliers,
        outliers_after=after.outliers,
        statistic=cmp.statistic,
        before_mean_ns=cmp.before_mean,
        after_mean_ns=cmp.after_mean,
        before_total_ns=int(b.sum()) if b.len() else None,
        after_total_ns=int(a.sum()) if a.len() else None,
        before_median_ns=cmp.before_median,
        after_median_ns=cmp.after_median,
        before_p90_ns=cmp.before_p90,
        after_p90_ns=cmp.after_p90,
        ratio=cmp.ratio,
        change_pct=cmp.change_pct,
        ci_low=cmp.ci_low,
        ci_high=cmp.ci_high,
        confidence=cmp.confidence,
        p_value=cmp.p_value,
        test=f"Mann-Whitney U ({cmp.test_method})" if cmp.test_method else None,
        verdict=cmp.verdict,
        verdict_reason=cmp.reason,
        min_steps=opts.min_steps,
        steps=paired,
    )


def step_parts(side: Side, prefix: str) -> pl.DataFrame:
    """Mean device time per kept step by category, from the step analysis' split of each step.

    Compute, copies, memsets and communication are the GPU-busy parts; the rest of the device
    step (runtime, data loading, CPU work, nothing) is the device idle inside the step.
    """
    frame = side.steps_frame
    assert frame is not None
    busy = {"compute": "kernel_ns", "communication": "communication_ns", "memcpy": "memcpy_ns", "memset": "memset_ns"}
    means = frame.select(
        *[pl.col(col).cast(pl.Float64).mean().alias(name) for name, col in busy.items()],
        idle=(pl.col("device_dur_ns") - pl.sum_horizontal(*busy.values())).cast(pl.Float64).mean(),
        total=pl.col("device_dur_ns").cast(pl.Float64).mean(),
    ).row(0, named=True)
    total = means.pop("total") or 0.0
    return pl.DataFrame(
        {
            "group": list(means),
            f"{prefix}_ns_per_step": [float(v or 0.0) for v in means.values()],
            f"{prefix}_share": [float(v or 0.0) / total if total else None for v in means.values()],
        },
        schema={"group": pl.String, f"{prefix}_ns_per_step": pl.Float64, f"{prefix}_share": pl.Float64},
    )
