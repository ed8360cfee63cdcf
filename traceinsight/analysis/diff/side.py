"""One side of a before/after comparison: its trace, its kept steps and the results of the
analyses the comparison reads, each computed once."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from traceinsight.analysis.core.base import AnalysisConfig, R, Result
from traceinsight.analysis.lib.stats import (
    DEFAULT_ALPHA,
    DEFAULT_BOOTSTRAP,
    DEFAULT_SEED,
    MIN_SAMPLES,
)
from traceinsight.analysis.lib.timeline import step_numbers
from traceinsight.analysis.runner import run_closure
from traceinsight.analysis.sections.steps import StepsResult
from traceinsight.trace.model import Trace

NO_ANNOTATION = "(no annotation)"
NO_OP = "(no op)"
# The registered analyses a comparison reads on each side.
SECTIONS = ("steps", "breakdown", "gaps", "memory", "bound", "compile", "findings")


@dataclass(frozen=True)
class DiffOptions:
    label_before: str | None = None
    label_after: str | None = None
    alpha: float = DEFAULT_ALPHA
    n_boot: int = DEFAULT_BOOTSTRAP
    seed: int = DEFAULT_SEED
    min_steps: int = MIN_SAMPLES
    # Drop the steps the step analysis flags as outliers (they are kept, and flagged, by
    # default: a stall every few steps is part of what the run costs).
    drop_outliers: bool = False
    top_n: int = 10
    config: AnalysisConfig = field(default_factory=AnalysisConfig)


@dataclass(frozen=True)
class Side:
    trace: Trace
    label: str
    kept_steps: list[int]
    all_steps: list[int]
    steps_frame: pl.DataFrame | None
    steps_reason: str | None
    dropped: int
    results: dict[str, Result] = field(default_factory=dict)
    # Kept steps the step analysis flags as outliers (counted in every figure).
    outliers: int = 0

    @property
    def per(self) -> int:
        return max(len(self.kept_steps), 1)

    @property
    def window_per(self) -> int:
        return max(len(self.all_steps), 1)

    def section(self, name: str, cls: type[R]) -> tuple[R | None, str | None]:
        """The available result of one analysis, or None and why it cannot be had."""
        result = self.results.get(name)
        if result is None:
            return None, f"the {name} analysis is not part of this build"
        if not isinstance(result, cls):
            raise TypeError(f"the {name} analysis returned a {type(result).__name__}, not a {cls.__name__}")
        if not result.available:
            return None, result.reason or f"{name} not available"
        return result, None


def make_side(trace: Trace, label: str, config: AnalysisConfig, drop_outliers: bool = False) -> Side:
    # An analysis that raises stops the diff as it stops ``analyze`` (runner.run_closure):
    # a comparison with a section silently swapped for an error line would read as a result.
    results = run_closure(trace, config, SECTIONS)
    all_steps = step_numbers(trace)
    steps = results.get("steps")
    frame = steps.steps if isinstance(steps, StepsResult) and steps.available else None
    if frame is not None and frame.height:
        outlier = pl.col("is_outlier").fill_null(False)
        keep = ~pl.col("is_warmup").fill_null(False)
        if drop_outliers:
            keep &= ~outlier
        kept_frame = frame.filter(keep).sort("step")
        kept = [int(s) for s in kept_frame["step"].to_list()]
        flagged = int(kept_frame.select(outlier.sum()).item())
        dropped = frame.height - kept_frame.height
        return Side(trace, label, kept, all_steps, kept_frame, None, dropped, results, flagged)
    # Without the step analysis, the profiled steps still give per-step normalisation.
    reason = steps.reason if isinstance(steps, StepsResult) else None
    return Side(trace, label, all_steps, all_steps, None, reason or "no steps in this trace", 0, results)


def kernels_in_steps(side: Side) -> pl.DataFrame:
    kernels = side.trace.kernels
    if side.kept_steps:
        return kernels.filter(pl.col("step").is_in(side.kept_steps))
    return kernels
