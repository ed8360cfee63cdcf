"""Findings from the matched collectives (``collective_match``): ``late_arrival`` (the rank,
and the work, that made the others wait) and ``slow_collective`` (exposed collectives far below
the link's bandwidth).

How they are priced, and what that is not: both come from the job's own aligned timeline, not
from the what-if replay, which replays one trace's graph and has no edges between ranks.

- ``late_arrival``: the sum, over the collectives the rank arrived last at, of its arrival minus
  the second-last arrival. Had it arrived with the second-last rank, each of those collectives
  would have started, and ended, that much earlier on every rank; the step shrinks by that
  much only if nothing else holds it (an upper bound when the ranks' next work differs).
- ``slow_collective``: per exposed collective (its transfer not hidden behind compute on the
  last rank), its transfer time minus its bytes at the best algorithm bandwidth this job reaches
  for that kind: what it would cost merged into a bucket that runs as fast as the job's best
  (the fix for small messages). When even the job's best is far below the link, the fix is
  not bucketing, and no saving is claimed for it.
"""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.findings.model import Confidence, Finding, RegionEvidence
from traceinsight.analysis.job.collective_match import SLOW_LINK_SHARE, CollectiveMatchResult, slow
from traceinsight.analysis.job.common import MATERIAL_NS, MATERIAL_SHARE, job_finding, share

# A bucket is "small" below this many bytes: NCCL's ring/tree reach their bandwidth from a few MB.
SMALL_BYTES = 4 << 20


def _material(per_step: float, step: float, steps: int) -> bool:
    return share(per_step, step) >= MATERIAL_SHARE and per_step * steps >= MATERIAL_NS


def _ms(value: float) -> str:
    return f"{value / 1e6:.2f} ms"


def late_arrival(result: CollectiveMatchResult, step: float) -> Finding | None:
    if result.late.height == 0:
        return None
    top = result.late.row(0, named=True)
    per_step = float(top["late_by_per_step_ns"])
    if not _material(per_step, step, result.steps):
        return None
    rank = int(top["rank"])
    total = int(result.collectives.height)
    if top["cause"] == "kernels":
        what = f"its compute kernels before them run {_ms(float(top['compute_excess_ns'] or 0))} longer than the others'"
        fix = f"balance rank {rank}'s work (shapes, sequence lengths, its share of the model) or check its GPU (clocks, throttling)"
    elif top["work"] and float(top["work_ns"] or 0) - float(top["others_work_ns"] or 0) >= 0.5 * float(top["lead_excess_ns"] or 0):
        what = (
            f"its host spends {_ms(float(top['work_ns'] or 0))} in {top['work']} before each launch "
            f"(the others {_ms(float(top['others_work_ns'] or 0))})"
        )
        fix = f"shorten or move {top['work']} on rank {rank} (off the step's path: a DataLoader worker, a thread, another rank's share)"
    elif top["work"]:
        what = (
            f"its collectives start {_ms(float(top['lead_excess_ns'] or 0))} later than the others' after the previous one, "
            f"spread over its host work (the largest span, {top['work']}: {_ms(float(top['work_ns'] or 0))} "
            f"against {_ms(float(top['others_work_ns'] or 0))})"
        )
        fix = f"cut host work on rank {rank} (CPU contention, pinned cores, fewer small ops; CUDA graphs)"
    else:
        what = "its device idles waiting for the launch, and the host time before it is not traced"
        fix = f"profile rank {rank}'s host with with_stack=True to see what it does before the collective"
    by_seq = result.matched_by.startswith("process group and sequence")
    clocks_ok = result.end_spread_p90_ns * 10 <= max(per_step, 1.0)
    confidence: Confidence = "high" if clocks_ok and by_seq else "medium" if clocks_ok else "low"
    regions = (RegionEvidence(name=str(top["work"]), calls=int(top["collectives"]), dur_ns=int(top["work_ns"] or 0)),) if top["work"] else ()
    return job_finding(
        id="late_arrival",
        title=(
            f"Rank {rank} arrives last at {top['collectives']} of {total} collectives, "
            f"{_ms(per_step)} per step after the others: {what}"
        ),
        per_step=per_step,
        step=step,
        steps=result.steps,
        confidence=confidence,
        why=(
            f"collectives matched by {result.matched_by}; clocks aligned on their ends "
            f"(90 % agree within {result.end_spread_p90_ns / 1e3:.1f} µs)"
        ),
        fix=fix,
        method=(
            "on the aligned clocks, its arrival minus the second-last arrival, summed over the collectives "
            "it was last at, per step; from the job's timeline, not the single-trace what-if replay"
        ),
        rank=rank,
        pool="idle",
        figures=(
            ("lead_excess_ns", float(top["lead_excess_ns"] or 0.0)),
            ("compute_excess_ns", float(top["compute_excess_ns"] or 0.0)),
            ("collectives_last", float(top["collectives"])),
        ),
        regions=regions,
    )


def slow_collective(result: CollectiveMatchResult, step: float) -> Finding | None:
    found = slow(result)
    if found.height == 0 or result.link_gbps is None:
        return None
    best = result.collectives.group_by("collective").agg(pl.col("algbw_gbps").max().alias("_best"))
    priced = found.join(best, on="collective", how="left").with_columns(
        (pl.col("transfer_ns") - pl.col("bytes") / pl.col("_best")).clip(lower_bound=0).alias("_saving"),
        ((pl.col("_best") / pl.col("algbw_gbps") * pl.col("link_share")) < SLOW_LINK_SHARE).alias("_best_slow"),
    )
    kind = str(priced.group_by("collective").agg(pl.col("_saving").sum()).sort("_saving", descending=True)["collective"][0])
    mine = priced.filter(pl.col("collective") == kind)
    per_step = float(mine["_saving"].sum()) / result.steps
    if not _material(per_step, step, result.steps):
        return None
    size = int(mine["bytes"].median() or 0)  # type: ignore[arg-type]
    bus = float(mine["busbw_gbps"].median() or 0.0)  # type: ignore[arg-type]
    count = mine.height / result.steps
    small = size < SMALL_BYTES
    if small:
        fix = (
            "send fewer, larger collectives: DDP bucket_cap_mb (default 25), FSDP larger wrap units, "
            "or flatten the tensors into one buffer before the collective"
        )
    else:
        fix = (
            "large messages far below the link: check NCCL's transport and algorithm (NCCL_DEBUG=INFO: "
            "P2P/NVLink vs SHM or sockets, NCCL_P2P_DISABLE), and traffic competing for the link"
        )
    return job_finding(
        id="slow_collective",
        title=(
            f"{count:.0f} {kind} per step run at {100 * bus / result.link_gbps:.0f} % of {result.link}'s "
            f"{result.link_gbps:.0f} GB/s (bus bandwidth {bus:.1f} GB/s, median message {size / 1024:.0f} KiB), with nothing to hide them"
        ),
        per_step=per_step,
        step=step,
        steps=result.steps,
        confidence="medium" if small else "low",
        why=f"{result.link_reason}; bus bandwidth by nccl-tests' formulas",
        fix=fix,
        method=(
            "per exposed collective, its transfer minus its bytes at the best algorithm bandwidth the job "
            "reaches for that kind (merged into a bucket as fast as the job's best), per step"
        ),
        rank=None,
        pool="communication",
        figures=(("busbw_gbps", bus), ("link_gbps", float(result.link_gbps)), ("median_bytes", float(size))),
    )


def matched_findings(result: CollectiveMatchResult, step: float) -> list[Finding]:
    if not result.available:
        return []
    return [f for f in (late_arrival(result, step), slow_collective(result, step)) if f is not None]
