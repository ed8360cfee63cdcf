"""All cross-rank analyses of one job, and the findings they support.

Findings (ids ``rank_straggler``, ``collective_wait``, ``exposed_communication``,
``load_imbalance``) are ranked by saving; each saving is an estimate over the steps every rank
has, with its method, and never more than the time the trace shows is spent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceinsight.analysis.base import AnalysisConfig, Result, jsonable
from traceinsight.analysis.job import collectives, ranks, stragglers
from traceinsight.analysis.job.common import MATERIAL_NS, MATERIAL_SHARE, JobFinding, share
from traceinsight.analysis.job.summary import RankSummary


@dataclass(frozen=True)
class JobReport:
    rank_table: ranks.RankTableResult
    stragglers: stragglers.StragglerResult
    collective_wait: collectives.CollectiveWaitResult
    findings: tuple[JobFinding, ...] = ()
    failed: tuple[Any, ...] = ()
    sections: dict[str, Result] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank_table": self.rank_table.to_dict(),
            "stragglers": self.stragglers.to_dict(),
            "collective_wait": self.collective_wait.to_dict(),
            "findings": [f.to_dict() for f in self.findings],
            "failed": jsonable(list(self.failed)),
        }


def _straggler_finding(result: stragglers.StragglerResult) -> JobFinding | None:
    if not result.material or result.straggler is None:
        return None
    steps = len(result.steps_used)
    confidence = "high" if result.steps_led >= 0.75 * steps else "medium" if result.steps_led >= 0.5 * steps else "low"
    fixes = {
        "data_loading": "give rank {r} more DataLoader workers / faster storage, or balance its input",
        "host": "cut host work on rank {r} (CPU contention, pinned cores, fewer small ops; CUDA graphs)",
        "slower_kernel_mix": "balance the work of rank {r} (shapes, sequence lengths) or check its GPU (clocks, throttling)",
        "memory_copies": "pin the host memory rank {r} copies from, or overlap its copies with compute",
        "untraced_host": "profile rank {r}'s host with with_stack=True to see what it does between launches",
    }
    top = result.excess_parts.head(3).to_dicts()
    return JobFinding(
        id="rank_straggler",
        title=f"Rank {result.straggler} holds the other ranks back: {result.reason_text or 'it is slower'}",
        saving_pct=100 * result.lost_share,
        saving_ns=result.lost_ns,
        confidence=confidence,
        fix=fixes.get(result.reason or "", "find what rank {r} does differently").format(r=result.straggler),
        evidence={
            "rank": result.straggler,
            "reason": result.reason,
            "steps_led": result.steps_led,
            "steps": steps,
            "excess_parts": top,
        },
        method=(
            "per step, own time = device step time minus collective wait; the straggler's own time "
            "minus the median of the other ranks', summed over the steps every rank has"
        ),
    )


def _wait_finding(result: collectives.CollectiveWaitResult, table: ranks.RankTableResult) -> JobFinding | None:
    if not result.available or table.table.height == 0:
        return None
    rows = table.table.sort("collective_wait_ns", descending=True)
    worst = rows.row(0, named=True)
    step = float(table.table["step_median_ns"].median() or 0.0)  # type: ignore[arg-type]
    mean_wait = float(table.table["collective_wait_ns"].mean() or 0.0)  # type: ignore[arg-type]
    steps = len(table.steps_used)
    if share(mean_wait, step) < MATERIAL_SHARE or mean_wait * steps < MATERIAL_NS:
        return None
    return JobFinding(
        id="collective_wait",
        title=f"Ranks wait {mean_wait / 1e6:.2f} ms per step in collectives for other ranks (rank {worst['rank']}: {worst['collective_wait_ns'] / 1e6:.2f} ms)",
        saving_pct=100 * share(mean_wait, step),
        saving_ns=int(mean_wait * steps),
        confidence="high" if result.matched_by.startswith("process group") else "medium",
        fix="remove the imbalance that makes ranks arrive late (see rank_straggler / load_imbalance)",
        evidence={
            "rank": int(worst["rank"]),
            "wait_ns_per_step": worst["collective_wait_ns"],
            "matched_by": result.matched_by,
            "per_rank": result.per_rank.to_dicts(),
        },
        method="per matched collective, a rank's duration minus the shortest duration among the ranks; mean over ranks",
    )


def _exposed_finding(table: ranks.RankTableResult) -> JobFinding | None:
    if table.table.height == 0:
        return None
    # Waiting for a late rank is not overlappable communication; leave it out.
    frame = table.table.with_columns(
        (pl.col("exposed_comm_ns") - pl.col("collective_wait_ns")).clip(lower_bound=0).alias("_overlappable")
    )
    value = float(frame["_overlappable"].median() or 0.0)  # type: ignore[arg-type]
    step = float(frame["step_median_ns"].median() or 0.0)  # type: ignore[arg-type]
    steps = len(table.steps_used)
    if share(value, step) < MATERIAL_SHARE or value * steps < MATERIAL_NS:
        return None
    worst = frame.sort("_overlappable", descending=True).row(0, named=True)
    return JobFinding(
        id="exposed_communication",
        title=f"{value / 1e6:.2f} ms per step of communication runs with no compute to hide it",
        saving_pct=100 * share(value, step),
        saving_ns=int(value * steps),
        confidence="medium",
        fix="overlap communication with compute: smaller/earlier DDP buckets, FSDP prefetch, or async collectives",
        evidence={"rank": int(worst["rank"]), "exposed_comm_ns_per_step": worst["exposed_comm_ns"]},
        method="median over ranks of (communication with no compute kernel running − collective wait) per step",
    )


def _imbalance_finding(table: ranks.RankTableResult) -> JobFinding | None:
    if table.table.height < 2:
        return None
    compute = table.table["compute_ns"]
    top = float(compute.max() or 0.0)  # type: ignore[arg-type]
    median = float(compute.median() or 0.0)  # type: ignore[arg-type]
    step = float(table.table["step_median_ns"].median() or 0.0)  # type: ignore[arg-type]
    steps = len(table.steps_used)
    excess = top - median
    if share(excess, step) < MATERIAL_SHARE or excess * steps < MATERIAL_NS:
        return None
    worst = table.table.sort("compute_ns", descending=True).row(0, named=True)
    return JobFinding(
        id="load_imbalance",
        title=f"Rank {worst['rank']} computes {excess / 1e6:.2f} ms per step more than the median rank",
        saving_pct=100 * share(excess, step),
        saving_ns=int(excess * steps),
        confidence="medium",
        fix="balance the work per rank (batch composition, sequence lengths, uneven sharding)",
        evidence={"rank": int(worst["rank"]), "compute_ns_per_step": top, "median_compute_ns_per_step": median},
        method="largest per-step compute time minus the median rank's, over the steps every rank has",
    )


def findings(
    table: ranks.RankTableResult,
    straggler: stragglers.StragglerResult,
    wait: collectives.CollectiveWaitResult,
) -> tuple[JobFinding, ...]:
    found = [
        _straggler_finding(straggler),
        _wait_finding(wait, table),
        _exposed_finding(table),
        _imbalance_finding(table),
    ]
    return tuple(sorted((f for f in found if f is not None), key=lambda f: -f.saving_ns))


def analyze_job(
    summaries: Sequence[RankSummary],
    config: AnalysisConfig | None = None,
    *,
    failed: Sequence[Any] = (),
) -> JobReport:
    cfg = config or AnalysisConfig()
    table = ranks.analyze(summaries, cfg)
    straggler = stragglers.analyze(summaries, cfg)
    wait = collectives.analyze(summaries, cfg)
    return JobReport(
        rank_table=table,
        stragglers=straggler,
        collective_wait=wait,
        findings=findings(table, straggler, wait),
        failed=tuple(failed),
        sections={"rank_table": table, "stragglers": straggler, "collective_wait": wait},
    )
