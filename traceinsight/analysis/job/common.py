"""What the cross-rank analyses share: the steps every rank has, and thresholds."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from traceinsight.analysis.findings.model import Confidence, Evidence, Finding, Pool, RegionEvidence
from traceinsight.analysis.job.summary import RankSummary

# A cross-rank effect is worth a finding when it costs at least this share of the step time.
MATERIAL_SHARE = 0.05
# ... and at least this much in total (ns), so that noise on very short traces stays quiet.
MATERIAL_NS = 100_000


def steps_frame(summaries: Sequence[RankSummary]) -> pl.DataFrame:
    """Every rank's step table with a ``rank`` column and absolute start/end times."""
    frames = [
        s.steps.with_columns(
            pl.lit(s.rank, pl.Int64).alias("rank"),
            (pl.col("start_ns") + s.offset_ns()).alias("abs_start_ns"),
            (pl.col("end_ns") + s.offset_ns()).alias("abs_end_ns"),
        )
        for s in summaries
    ]
    if not frames:
        return pl.DataFrame()
    return pl.concat(frames, how="vertical")


def common_steps(summaries: Sequence[RankSummary]) -> list[int]:
    """Steps every rank has, less any a rank flags as its warm-up (unless none would be left)."""
    if not summaries:
        return []
    sets = [set(s.steps["step"].to_list()) for s in summaries]
    common = set.intersection(*sets)
    warm = {int(v) for s in summaries for v in s.steps.filter(pl.col("is_warmup"))["step"].to_list()}
    kept = sorted(common - warm)
    return kept or sorted(common)


def share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def job_finding(
    *, id: str, title: str, per_step: float, step: float, steps: int, confidence: Confidence,
    why: str, fix: str, method: str, rank: int | None, pool: Pool,
    figures: tuple[tuple[str, float], ...] = (), regions: tuple[RegionEvidence, ...] = (),
) -> Finding:  # fmt: skip
    """A cross-rank finding saving ``per_step`` ns of a ``step`` ns step over ``steps`` steps."""
    return Finding(
        id=id,
        title=title,
        saving_pct=min(100.0, 100 * share(per_step, step)),
        saving_ns=int(per_step),
        confidence=confidence,
        confidence_reason=why,
        fix=fix,
        method=method,
        evidence=Evidence(rank=rank, figures=figures, regions=regions),
        pool=pool,
        saving_window_ns=int(per_step * steps),
        estimate_ns=int(per_step * steps),
    )
