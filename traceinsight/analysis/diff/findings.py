"""Findings compared between two runs: which appeared, which disappeared, which changed saving.

A finding is matched by its id (and rank). "Material" is each side's own judgement: a finding
below the materiality threshold on one side counts as absent there, so ``amp_off -> amp_on``
reads "fp32_no_tensor_cores disappeared".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import polars as pl

from traceinsight.analysis.core.base import RESULT_SCHEMA_VERSION, Result
from traceinsight.analysis.findings.model import Finding, FindingsResult

Status = Literal["appeared", "disappeared", "changed", "unchanged"]
# A change in saving smaller than this many percentage points reads as unchanged.
CHANGED_POINTS = 2.0


@dataclass(frozen=True)
class FindingChange:
    id: str
    title: str
    status: Status
    before_saving_pct: float | None  # None where the finding is not material on that side
    after_saving_pct: float | None
    before_saving_ns: int | None
    after_saving_ns: int | None
    rank: int | None = None

    @property
    def delta_points(self) -> float:
        return (self.after_saving_pct or 0.0) - (self.before_saving_pct or 0.0)


@dataclass(frozen=True)
class FindingsDiff(Result):
    name: ClassVar[str] = "findings_diff"
    changes: tuple[FindingChange, ...] = ()  # appeared, disappeared, changed, then unchanged

    def of(self, status: Status) -> tuple[FindingChange, ...]:
        return tuple(c for c in self.changes if c.status == status)

    def to_polars(self) -> pl.DataFrame:
        return pl.DataFrame([c.__dict__ for c in self.changes]) if self.changes else pl.DataFrame()

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": RESULT_SCHEMA_VERSION,
            "available": self.available,
            "reason": self.reason,
            "changed_points": CHANGED_POINTS,
            "changes": [
                {
                    "id": c.id,
                    "title": c.title,
                    "status": c.status,
                    "before_saving_pct": c.before_saving_pct,
                    "after_saving_pct": c.after_saving_pct,
                    "before_saving_ns": c.before_saving_ns,
                    "after_saving_ns": c.after_saving_ns,
                    "delta_points": round(c.delta_points, 3),
                    "rank": c.rank,
                }
                for c in self.changes
            ],
        }


def _key(f: Finding) -> tuple[str, int | None]:
    return f.id, f.evidence.rank


def compare_findings(before: FindingsResult | None, after: FindingsResult | None) -> FindingsDiff:
    """The material findings of both runs matched by id; savings as each run estimates them."""
    missing = [label for label, r in (("before", before), ("after", after)) if r is None or not r.available]
    if before is None or after is None or not before.available or not after.available:
        return FindingsDiff(available=False, reason=f"findings not available for {' and '.join(missing)}")
    b = {_key(f): f for f in before.findings}
    a = {_key(f): f for f in after.findings}
    changes = []
    for key in dict.fromkeys([*b, *a]):
        fb, fa = b.get(key), a.get(key)
        if fb is not None and fa is not None:
            moved = abs(fa.saving_pct - fb.saving_pct) >= CHANGED_POINTS
            status: Status = "changed" if moved else "unchanged"
        else:
            status = "appeared" if fb is None else "disappeared"
        shown = fa if fa is not None else fb
        assert shown is not None
        changes.append(
            FindingChange(
                id=key[0],
                title=shown.title,
                status=status,
                before_saving_pct=None if fb is None else round(fb.saving_pct, 3),
                after_saving_pct=None if fa is None else round(fa.saving_pct, 3),
                before_saving_ns=None if fb is None else fb.saving_ns,
                after_saving_ns=None if fa is None else fa.saving_ns,
                rank=key[1],
            )
        )
    order = {"disappeared": 0, "appeared": 1, "changed": 2, "unchanged": 3}
    changes.sort(key=lambda c: (order[c.status], -abs(c.delta_points)))
    return FindingsDiff(changes=tuple(changes))
