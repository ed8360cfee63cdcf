"""The registered ``window`` analysis: every flag of :mod:`.assess`, and the host spans whose
device idle time is not steady state (findings leave it out of their savings)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import polars as pl

from traceinsight.analysis.core.base import (
    NO_INPUTS,
    RESULT_SCHEMA_VERSION,
    AnalysisConfig,
    AnalysisSpec,
    Inputs,
    Result,
)
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.timeline import analysis_window
from traceinsight.analysis.sections.steps import StepsResult
from traceinsight.analysis.window import assess, overhead
from traceinsight.analysis.window.assess import SPAN_SCHEMA, Flag
from traceinsight.analysis.window.realstep import RealStep, real_step
from traceinsight.trace.model import Trace

FLAG_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "flag": pl.String,
    "limits": pl.Boolean,
    "title": pl.String,
    "evidence": pl.String,
    "advice": pl.String,
    "excluded_ns": pl.Int64,
}


@dataclass(frozen=True)
class WindowResult(Result):
    name: ClassVar[str] = "window"
    window_ns: int = 0
    flags: tuple[Flag, ...] = ()
    # Host spans (merged) inside which device idle time is one-time, not steady state.
    excluded: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=SPAN_SCHEMA))
    # The step without the profiler (recorded by capture, estimated, or the traced one); None
    # without steps. Per-step savings are priced on it.
    real_step: RealStep | None = None

    @property
    def steady(self) -> bool:
        """True when no flag limits steady-state advice."""
        return not any(f.limits for f in self.flags)

    @property
    def limiting(self) -> tuple[Flag, ...]:
        return tuple(f for f in self.flags if f.limits)

    def flag(self, flag_id: str) -> Flag | None:
        return next((f for f in self.flags if f.id == flag_id), None)

    @property
    def excluded_ns(self) -> int:
        return assess.span_ns(self.excluded)

    def to_polars(self) -> pl.DataFrame:
        rows = [
            {
                "flag": f.id,
                "limits": f.limits,
                "title": f.title,
                "evidence": f.evidence,
                "advice": f.advice,
                "excluded_ns": assess.span_ns(f.excluded),
            }
            for f in self.flags
        ]
        return pl.DataFrame(rows, schema=FLAG_SCHEMA)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": RESULT_SCHEMA_VERSION,
            "available": self.available,
            "reason": self.reason,
            "steady": self.steady,
            "window_ns": self.window_ns,
            "excluded_ns": self.excluded_ns,
            "flags": [f.to_dict() for f in self.flags],
            "real_step": self.real_step.to_dict() if self.real_step is not None else None,
        }


def run(trace: Trace, config: AnalysisConfig, inputs: Inputs = NO_INPUTS) -> WindowResult:
    del config
    lo, hi = analysis_window(trace)
    window_ns = max(hi - lo, 0)
    steps = inputs.maybe("steps", StepsResult)
    step_rows = steps.steps if steps is not None and steps.available else pl.DataFrame()
    step_count = step_rows.height
    empty = 0
    if step_count:
        busy = step_rows.select(pl.sum_horizontal("kernel_ns", "memcpy_ns", "memset_ns", "communication_ns"))
        empty = int((busy.to_series() == 0).sum())
    flags = [
        assess.gpu_not_recorded(trace),
        # Start-up is judged against the GPU's idle time: a host-only trace has none to judge.
        assess.startup(trace, window_ns) if trace.has_gpu else None,
        assess.graph_capture(trace, window_ns),
        assess.partial_gpu(trace, window_ns),
        assess.late_device_start(trace, window_ns),
        assess.steps(step_count, empty, trace.step_source) if trace.has_gpu else None,
    ]
    real = real_step(trace, step_rows) if trace.has_gpu else None
    flags.append(overhead.profiler_overhead(trace, step_rows, real))
    kept = tuple(f for f in flags if f is not None)
    # Only the flags that limit the window take time out of the findings.
    spans = [f.excluded for f in kept if f.limits and f.excluded.height]
    excluded = intervals.union(pl.concat(spans)) if spans else pl.DataFrame(schema=SPAN_SCHEMA)
    return WindowResult(window_ns=window_ns, flags=kept, excluded=intervals.clip(excluded, lo, hi), real_step=real)


SPEC = AnalysisSpec(
    name="window",
    title="Window",
    run=run,
    requires=("steps",),
    description="Is the recorded window steady state? GPU activity not recorded, start-up, graph capture, "
    "GPU work traced in part, "
    "degenerate steps and profiler overhead, each with its evidence and what to record instead",
)
