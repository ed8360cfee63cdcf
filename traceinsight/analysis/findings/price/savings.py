"""Turning detector estimates into findings: shares, per-step figures, caps and ranking.

Each detector claims time from one or more pools of device time over the analysed window:
``idle`` (the breakdown's idle time), ``compute`` (kernel time), ``communication`` (collective
time not overlapped with compute) and ``memcpy`` (copy time). A fix cannot give back more
than its pool holds, so when the claims on a pool add up to more than the pool, each claim is
scaled by pool / claims and the finding says so in ``overlap``. The pools partition the
window, so the capped savings never add up to more than the analysed time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from traceinsight.analysis.findings.catalogue import CATALOGUE, MATERIALITY_PCT, MEMORY_FINDINGS
from traceinsight.analysis.findings.model import Confidence, Evidence, Finding, Lever, Pool
from traceinsight.analysis.findings.read.context import FindingContext

if TYPE_CHECKING:
    from traceinsight.analysis.whatif.transforms import Transformation

POOLS: tuple[Pool, ...] = ("idle", "compute", "communication", "memcpy")


@dataclass(frozen=True)
class Estimate:
    """A detector's answer before capping: the finding plus the time it claims per pool."""

    finding: Finding
    claims: tuple[tuple[Pool, int], ...]
    # (pool, finding id): this claim on the pool is part of that finding's claim (the same
    # idle seen from a narrower cause); the wider finding gives that part up.
    within: tuple[tuple[Pool, str, int | None], ...] = ()  # (pool, parent, ns or all)
    # The fix as a change to the step's dependency graph: where the trace replays, the
    # saving is the replayed change of step time (the claims are the fallback).
    transforms: tuple[Transformation, ...] = ()
    # Ways to apply the fix, each with its own change to the graph (the finding's own
    # transforms are the first lever's): priced alone when the findings are priced.
    levers: tuple[tuple[Lever, tuple[Transformation, ...]], ...] = ()


def estimate(
    ctx: FindingContext,
    finding_id: str,
    claims: dict[Pool, float],
    *,
    confidence: Confidence,
    confidence_reason: str,
    method: str,
    evidence: Evidence,
    title: str | None = None,
    fix: str | None = None,
    action: str | None = None,
    per_step: bool = True,
    within: dict[Pool, str] | None = None,
    within_parts: tuple[tuple[Pool, str, int], ...] = (),
    transforms: tuple[Transformation, ...] = (),
    levers: tuple[tuple[Lever, tuple[Transformation, ...]], ...] = (),
) -> Estimate:
    entry = CATALOGUE[finding_id]
    clean = tuple((pool, max(0, int(ns))) for pool, ns in claims.items())
    total = sum(ns for _, ns in clean)
    main: Pool = max(clean, key=lambda c: c[1])[0] if clean else "compute"
    finding = Finding(
        id=finding_id,
        title=title or entry.title,
        saving_pct=0.0,
        saving_ns=0,
        confidence=confidence,
        confidence_reason=confidence_reason,
        fix=fix or entry.fix,
        method=method,
        evidence=replace(evidence, rank=ctx.rank) if evidence.rank is None else evidence,
        pool=main,
        estimate_ns=total,
        per_step=per_step,
        action=action,
    )
    nested: tuple[tuple[Pool, str, int | None], ...] = tuple(
        (pool, parent, None) for pool, parent in (within or {}).items()
    )
    return Estimate(finding, clean, nested + within_parts, transforms, levers)


def _nest(estimates: list[Estimate]) -> tuple[list[Estimate], dict[str, list[str]]]:
    """Take each nested claim out of the wider finding's claim on the same pool."""
    by_id = {e.finding.id: e for e in estimates}
    claims = {e.finding.id: dict(e.claims) for e in estimates}
    notes: dict[str, list[str]] = {e.finding.id: [] for e in estimates}
    for est in estimates:
        for pool, parent, share in est.within:
            if parent not in by_id:
                continue
            part = dict(est.claims).get(pool, 0)
            part = part if share is None else min(part, share)
            if part <= 0 or claims[parent].get(pool, 0) <= 0:
                continue
            taken = min(part, claims[parent][pool])
            claims[parent][pool] -= taken
            notes[parent].append(
                f"{taken / 1e6:.2f} ms of its {pool} time is counted under {est.finding.id}"
            )
            note = f"its {pool} time is part of what {parent} reports; counted once, here"
            if note not in notes[est.finding.id]:
                notes[est.finding.id].append(note)
    return [
        replace(e, claims=tuple(claims[e.finding.id].items())) for e in estimates
    ], notes


def pool_sizes(ctx: FindingContext) -> dict[Pool, int]:
    """Device time per pool over the window (breakdown categories: compute first, then
    communication, copies; idle is what is left)."""
    if ctx.breakdown is None:
        window = ctx.window_ns
        return {"idle": window, "compute": window, "communication": window, "memcpy": window}
    return {
        "idle": ctx.category_ns("idle"),
        "compute": ctx.category_ns("compute", "memset"),
        "communication": ctx.category_ns("communication"),
        "memcpy": max(
            sum(
                int(v)
                for v in ctx.breakdown.by_device.filter(
                    ctx.breakdown.by_device["category"].str.starts_with("memcpy")
                )["dur_ns"].to_list()
            )
            - sum(ns for c, ns in ctx.excluded_busy_ns.items() if c.startswith("memcpy")),
            0,
        ),
    }


def settle(ctx: FindingContext, estimates: list[Estimate]) -> tuple[list[Finding], list[Finding]]:
    """Cap the claims by their pools, express them as shares and per-step time, rank them,
    and split off the ones below the materiality threshold."""
    window = ctx.window_ns
    sizes = pool_sizes(ctx)
    estimates, nested = _nest(estimates)
    claimed: dict[Pool, int] = {p: 0 for p in POOLS}
    claimants: dict[Pool, list[str]] = {p: [] for p in POOLS}
    for est in estimates:
        for pool, ns in est.claims:
            if ns > 0:
                claimed[pool] += ns
                claimants[pool].append(est.finding.id)
    scale = {p: (min(1.0, sizes[p] / claimed[p]) if claimed[p] > 0 else 1.0) for p in POOLS}
    step_ns = ctx.step_ns
    out: list[Finding] = []
    for est in estimates:
        kept = sum(int(ns * scale[pool]) for pool, ns in est.claims)
        notes = nested.get(est.finding.id, []) + [
            f"{pool} time is also claimed by {', '.join(i for i in claimants[pool] if i != est.finding.id)}: "
            f"claims scaled by {scale[pool]:.2f} so that together they fit the {pool} time"
            for pool, ns in est.claims
            if ns > 0 and scale[pool] < 1.0
        ]
        pct = 100.0 * kept / window if window > 0 else 0.0
        per_step = round(pct / 100.0 * step_ns) if step_ns and est.finding.per_step else kept
        f = replace(
            est.finding,
            saving_window_ns=kept,
            saving_pct=round(min(pct, 100.0), 3),
            saving_ns=per_step,
            overlap="; ".join(notes) or None,
        )
        out.append(
            replace(f, material=f.saving_pct >= MATERIALITY_PCT or f.id in MEMORY_FINDINGS)
        )
    out.sort(key=lambda f: (-f.saving_pct, f.id))
    return [f for f in out if f.material], [f for f in out if not f.material]
