"""Cross-rank findings (``rank_straggler``, ``collective_wait``, ``exposed_communication``,
``load_imbalance``) as the same :class:`Finding` the single-trace findings use, with the rank
in ``evidence.rank``.

``saving_ns`` is per step (over the steps every rank has) and ``saving_window_ns`` over all of
them; each saving is an estimate with its method and never more than the time the trace shows
is spent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import polars as pl

from traceinsight.analysis.classify import collective_of
from traceinsight.analysis.findings.detect.comm_fixes import MIXED_FIX_SHARE, job_exposed_fix
from traceinsight.analysis.findings.model import (
    Confidence,
    Finding,
    FindingsResult,
    RegionEvidence,
)
from traceinsight.analysis.job import collectives, ranks, stragglers
from traceinsight.analysis.job.coll_findings import matched_findings
from traceinsight.analysis.job.collective_match import CollectiveMatchResult
from traceinsight.analysis.job.common import MATERIAL_NS, MATERIAL_SHARE, job_finding, share
from traceinsight.analysis.job.summary import RankSummary

_FIXES = {
    "data_loading": "give rank {r} more DataLoader workers / faster storage, or balance its input",
    "host": "cut host work on rank {r} (CPU contention, pinned cores, fewer small ops; CUDA graphs)",
    "slower_kernel_mix": "balance the work of rank {r} (shapes, sequence lengths) or check its GPU (clocks, throttling)",
    "memory_copies": "pin the host memory rank {r} copies from, or overlap its copies with compute",
    "untraced_host": "profile rank {r}'s host with with_stack=True to see what it does between launches",
}


@dataclass(frozen=True)
class JobFindingsResult(FindingsResult):
    """The job's findings, largest saving first (the per-step unit is the median rank's step)."""

    name: ClassVar[str] = "job_findings"


def _straggler(result: stragglers.StragglerResult, step: float) -> Finding | None:
    if not result.material or result.straggler is None:
        return None
    steps = len(result.steps_used)
    led = result.steps_led
    confidence: Confidence = "high" if led >= 0.75 * steps else "medium" if led >= 0.5 * steps else "low"
    parts = tuple(
        RegionEvidence(name=str(row["part"]), dur_ns=int(row["excess_ns"]))
        for row in result.excess_parts.head(3).to_dicts()
        if "part" in row and "excess_ns" in row
    )
    return job_finding(
        id="rank_straggler",
        title=f"Rank {result.straggler} holds the other ranks back: {result.reason_text or 'it is slower'}",
        per_step=result.lost_ns / steps if steps else 0.0,
        step=step,
        steps=steps,
        confidence=confidence,
        why=f"it is the slowest rank in {led} of {steps} steps",
        fix=_FIXES.get(result.reason or "", "find what rank {r} does differently").format(r=result.straggler),
        method=(
            "per step, own time = device step time minus collective wait; the straggler's own time "
            "minus the median of the other ranks', summed over the steps every rank has"
        ),
        rank=result.straggler,
        pool="idle",
        figures=(("steps_led", float(led)), ("steps", float(steps)), ("lost_share", result.lost_share)),
        regions=parts,
    )


def _wait(result: collectives.CollectiveWaitResult, table: ranks.RankTableResult, step: float) -> Finding | None:
    if not result.available or table.table.height == 0:
        return None
    worst = table.table.sort(["collective_wait_ns", "rank"], descending=[True, False]).row(0, named=True)
    mean_wait = float(table.table["collective_wait_ns"].mean() or 0.0)  # type: ignore[arg-type]
    steps = len(table.steps_used)
    if share(mean_wait, step) < MATERIAL_SHARE or mean_wait * steps < MATERIAL_NS:
        return None
    by_group = result.matched_by.startswith("process group")
    return job_finding(
        id="collective_wait",
        title=(
            f"Ranks wait {mean_wait / 1e6:.2f} ms per step in collectives for other ranks "
            f"(rank {worst['rank']}: {worst['collective_wait_ns'] / 1e6:.2f} ms)"
        ),
        per_step=mean_wait,
        step=step,
        steps=steps,
        confidence="high" if by_group else "medium",
        why=f"collectives matched by {result.matched_by}",
        fix="remove the imbalance that makes ranks arrive late (see rank_straggler / load_imbalance)",
        method="per matched collective, a rank's duration minus the shortest duration among the ranks; mean over ranks",
        rank=int(worst["rank"]),
        pool="communication",
        figures=(("wait_ns_per_step", float(worst["collective_wait_ns"])),),
    )


def collective_kinds(summaries: Sequence[RankSummary]) -> list[str | None]:
    """The collective kinds holding at least a quarter of the ranks' collective time, largest
    first (``_allgather_base`` and ``all_gather_into_tensor`` are both ``allgather``)."""
    frames = [s.collectives.select("collective", "dur_ns") for s in summaries if s.collectives.height]
    if not frames:
        return []
    by = (
        pl.concat(frames)
        .with_columns(kind=collective_of(pl.col("collective")))
        .group_by("kind")
        .agg(pl.col("dur_ns").sum())
        .sort(["dur_ns", "kind"], descending=[True, False], nulls_last=True)
    )
    total = max(float(by["dur_ns"].sum()), 1.0)
    return [k for k, ns in by.iter_rows() if ns >= MIXED_FIX_SHARE * total]


def _exposed(table: ranks.RankTableResult, step: float, kinds: list[str | None]) -> Finding | None:
    if table.table.height == 0:
        return None
    # Waiting for a late rank is not overlappable communication; leave it out.
    frame = table.table.with_columns(
        (pl.col("exposed_comm_ns") - pl.col("collective_wait_ns")).clip(lower_bound=0).alias("_overlappable")
    )
    value = float(frame["_overlappable"].median() or 0.0)  # type: ignore[arg-type]
    steps = len(table.steps_used)
    if share(value, step) < MATERIAL_SHARE or value * steps < MATERIAL_NS:
        return None
    worst = frame.sort(["_overlappable", "rank"], descending=[True, False]).row(0, named=True)
    on_host = "host" in table.table["comm_measured_on"].to_list()
    # The fix depends on what the collectives are (an all-to-all gets no DDP bucket advice).
    fix = job_exposed_fix(kinds) or (
        "overlap communication with compute: smaller/earlier DDP buckets, FSDP prefetch, or async collectives"
    )
    if on_host:
        # Host collectives (gloo) move GPU tensors through host memory while the GPU idles.
        fix = "run the collectives of GPU tensors on the device (backend nccl, or cuda:nccl in a mixed backend), then " + fix
    return job_finding(
        id="exposed_communication",
        title=f"{value / 1e6:.2f} ms per step of communication runs with no compute to hide it",
        per_step=value,
        step=step,
        steps=steps,
        confidence="medium",
        why="overlap could hide it, but how much depends on the model's dependencies",
        fix=fix,
        method=(
            "median over ranks of (host-side collective time with the GPU idle − collective wait) per step"
            if on_host
            else "median over ranks of (communication with no compute kernel running − collective wait) per step"
        ),
        rank=int(worst["rank"]),
        pool="communication",
        figures=(("exposed_comm_ns_per_step", float(worst["exposed_comm_ns"])),),
    )


def _imbalance(table: ranks.RankTableResult, step: float) -> Finding | None:
    if table.table.height < 2:
        return None
    compute = table.table["compute_ns"]
    top = float(compute.max() or 0.0)  # type: ignore[arg-type]
    median = float(compute.median() or 0.0)  # type: ignore[arg-type]
    steps = len(table.steps_used)
    excess = top - median
    if share(excess, step) < MATERIAL_SHARE or excess * steps < MATERIAL_NS:
        return None
    worst = table.table.sort(["compute_ns", "rank"], descending=[True, False]).row(0, named=True)
    return job_finding(
        id="load_imbalance",
        title=f"Rank {worst['rank']} computes {excess / 1e6:.2f} ms per step more than the median rank",
        per_step=excess,
        step=step,
        steps=steps,
        confidence="medium",
        why="compute time differs between ranks running the same step",
        fix="balance the work per rank (batch composition, sequence lengths, uneven sharding)",
        method="largest per-step compute time minus the median rank's, over the steps every rank has",
        rank=int(worst["rank"]),
        pool="compute",
        figures=(("compute_ns_per_step", top), ("median_compute_ns_per_step", median)),
    )


def _same_as_straggler(finding: Finding, found: Sequence[Finding]) -> bool:
    """A late arrival of the straggler's rank is the straggler's time seen from the collectives:
    counted once in the total."""
    return finding.id == "late_arrival" and any(
        f.id == "rank_straggler" and f.evidence.rank == finding.evidence.rank for f in found
    )


def analyze(
    table: ranks.RankTableResult,
    straggler: stragglers.StragglerResult,
    wait: collectives.CollectiveWaitResult,
    summaries: Sequence[RankSummary] = (),
    *,
    matched: CollectiveMatchResult | None = None,
) -> JobFindingsResult:
    if table.table.height == 0:
        return JobFindingsResult(available=False, reason=table.reason or "no rank was analysed")
    step = float(table.table["step_median_ns"].median() or 0.0)  # type: ignore[arg-type]
    found = [_straggler(straggler, step), _wait(wait, table, step), _exposed(table, step, collective_kinds(summaries)), _imbalance(table, step)]
    if matched is not None:
        found.extend(matched_findings(matched, step))
    ordered = tuple(sorted((f for f in found if f is not None), key=lambda f: -f.saving_ns))
    return JobFindingsResult(
        findings=ordered,
        step_ns=int(step),
        steps=len(table.steps_used),
        window_ns=int(step * len(table.steps_used)),
        total_saving_pct=min(100.0, sum(f.saving_pct for f in ordered if not _same_as_straggler(f, ordered))),
    )
