"""The types a findings analysis returns: a finding, its typed evidence, and the result.

A finding's ``saving_pct`` is a share of the analysed time (the steps' device time where the
trace has steps, else the analysed window) and ``saving_ns`` the same saving per step (per
window when there are no steps). Both are estimates; ``method`` says how each was made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

import polars as pl

from traceinsight.analysis.core.base import Result

Confidence = Literal["high", "medium", "low"]
# The kind of device time a saving comes out of; savings that claim the same pool overlap.
Pool = Literal["idle", "compute", "communication", "memcpy"]


@dataclass(frozen=True)
class OpEvidence:
    """A host op (with its shapes and dtypes when the trace recorded them)."""

    name: str
    shapes: str | None = None
    dtypes: str | None = None
    calls: int = 0
    dur_ns: int = 0  # GPU time of its kernels (host time where it launches none)


@dataclass(frozen=True)
class KernelEvidence:
    name: str
    calls: int = 0
    dur_ns: int = 0
    tensor_core: bool | None = None


@dataclass(frozen=True)
class RegionEvidence:
    """A named host interval (annotation, step, DataLoader call, collective) and its time."""

    name: str
    calls: int = 0
    dur_ns: int = 0


@dataclass(frozen=True)
class Evidence:
    ops: tuple[OpEvidence, ...] = ()
    kernels: tuple[KernelEvidence, ...] = ()
    regions: tuple[RegionEvidence, ...] = ()
    locations: tuple[str, ...] = ()  # "file.py:123" from the Python stacks, innermost user frame
    rank: int | None = None
    figures: tuple[tuple[str, float], ...] = ()  # named numbers the estimate used, units in names


@dataclass(frozen=True)
class Lever:
    """One way to apply a finding's fix where there are several (TF32 matmuls or bf16
    autocast), priced on its own: what it saves applied alone, on the finding's clock."""

    label: str  # the lever in a few words: "TF32 matmuls", "bf16 autocast"
    fix: str  # the code change
    saving_pct: float = 0.0  # of the step (or the window without steps), applied alone
    saving_ns: int = 0  # per step where the finding is per step, else over the window
    method: str = ""  # how it was priced


@dataclass(frozen=True)
class Finding:
    id: str
    title: str
    saving_pct: float  # of the analysed time (steps, else window), after capping
    saving_ns: int  # per step where the trace has steps (and per_step), else over the window
    confidence: Confidence
    confidence_reason: str
    fix: str
    method: str
    evidence: Evidence = field(default_factory=Evidence)
    pool: Pool = "compute"
    saving_window_ns: int = 0  # the saving over the whole analysed time, after capping
    estimate_ns: int = 0  # the detector's own estimate over the analysed time, before capping
    overlap: str | None = None  # set when the saving was scaled down because findings share time
    material: bool = True
    per_step: bool = (
        True  # False for one-off costs (compilation): saving_ns is then over the window
    )
    action: str | None = None  # the fix in a few words for this device (else the catalogue's)
    # Where the saving was replayed (method "replayed: ..."): the pool estimate it replaced.
    claim_pct: float | None = None
    # What this fix saves applied alone, on the same clock (``saving_pct`` counts only what it
    # adds to the findings ranked above it, so that the listed savings add up).
    alone_pct: float | None = None
    # The fix only gives back the GPU's idle time (its every claim is idle time): its saving is
    # bounded by the idle time of the step it is priced on.
    host_side: bool = False
    # The ways to apply the fix, each priced alone (the finding's own saving is the first's).
    levers: tuple[Lever, ...] = ()

    @property
    def memory_text(self) -> str | None:
        """For a finding whose cost is memory (no time saving claimed): its figure in words."""
        figures = dict(self.evidence.figures)
        if "growth_per_step_bytes" in figures:
            return f"no time saving claimed; allocated memory grows {figures['growth_per_step_bytes'] / 2**20:.1f} MiB per step"
        if "peak_reserved_bytes" in figures and "device_bytes" in figures:
            return (
                f"no time saving claimed; peak reserved {figures['peak_reserved_bytes'] / 2**30:.1f} GiB of "
                f"{figures['device_bytes'] / 2**30:.1f} GiB"
            )
        return None


@dataclass(frozen=True)
class FindingsResult(Result):
    name: ClassVar[str] = "findings"
    findings: tuple[Finding, ...] = ()  # material ones, largest saving first
    not_material: tuple[Finding, ...] = ()  # below the materiality threshold
    # the step every share is of: the un-profiled step where the window has one (recorded by
    # capture, or estimated), else the traced one (mean device time, warm-up left out)
    step_ns: int | None = None
    traced_step_ns: int | None = None  # the profiled step
    clock: str = "traced"  # recorded / estimated / traced: which step the savings are priced on
    step_idle_ns: int | None = None  # the GPU's idle time in that step: what host-side fixes can give back
    steps: int = 0
    window_ns: int = 0  # the analysed time the shares are of
    # Applying every material finding together: their transformations replayed at once (where
    # the trace replays) plus the other findings' estimates; else the sum. Never above 100.
    total_saving_pct: float = 0.0
    replayed: bool = False  # savings of findings with a transformation come from the replay
    materiality_pct: float = 1.0
    rank: int | None = None
    skipped: tuple[str, ...] = ()  # detectors that could not run, with why
    # What the trace records (training, inference, decode, unknown) and why: the advice follows it.
    workload: str = "unknown"
    workload_reason: str = ""

    def to_polars(self) -> pl.DataFrame:
        rows = [
            {
                "id": f.id,
                "title": f.title,
                "saving_pct": f.saving_pct,
                "saving_ns": f.saving_ns,
                "confidence": f.confidence,
                "confidence_reason": f.confidence_reason,
                "fix": f.fix,
                "method": f.method,
                "pool": f.pool,
                "overlap": f.overlap,
                "material": f.material,
                "rank": f.evidence.rank,
                "locations": list(f.evidence.locations),
            }
            for f in (*self.findings, *self.not_material)
        ]
        schema: dict[str, pl.DataType | type[pl.DataType]] = {
            "id": pl.String,
            "title": pl.String,
            "saving_pct": pl.Float64,
            "saving_ns": pl.Int64,
            "confidence": pl.String,
            "confidence_reason": pl.String,
            "fix": pl.String,
            "method": pl.String,
            "pool": pl.String,
            "overlap": pl.String,
            "material": pl.Boolean,
            "rank": pl.Int64,
            "locations": pl.List(pl.String),
        }
        return pl.DataFrame(rows, schema=schema)
