"""The ``critical_path`` section: each step's critical path on the replayed trace, what kind of
work holds it (host, launch, gpu, copy, comm, sync), and whether the replay reproduces the
recorded steps (within 5 %; a trace it does not reproduce is outside what the model explains).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from traceinsight.analysis.core.base import NO_INPUTS, AnalysisConfig, AnalysisSpec, Inputs, Result
from traceinsight.analysis.lib.timeline import device_step_spans
from traceinsight.analysis.whatif import critical
from traceinsight.analysis.whatif.model import TOLERANCE, critical_paths, validation
from traceinsight.analysis.whatif.shared import recorded
from traceinsight.trace.model import Trace

TOP_PIECES = 10


@dataclass(frozen=True)
class CriticalPathResult(Result):
    name = "critical_path"
    steps: pl.DataFrame = field(default_factory=pl.DataFrame)  # per step: recorded, replayed, kinds
    shares: dict[str, float] = field(default_factory=dict)  # % of all steps' critical paths per kind
    top: pl.DataFrame = field(default_factory=pl.DataFrame)  # names holding most time on the paths
    explained: bool = True
    max_error_pct: float = 0.0
    graph_stats: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_polars(self) -> pl.DataFrame:
        return self.steps


def run(trace: Trace, config: AnalysisConfig, inputs: Inputs = NO_INPUTS) -> CriticalPathResult:
    if trace.events.height == 0:
        return CriticalPathResult(available=False, reason="the trace has no events")
    graph, tl = recorded(trace)  # built once, shared with the findings' replayed savings
    if graph.host_nodes == 0 and graph.gpu_nodes == 0:
        return CriticalPathResult(available=False, reason="the trace has no host spans or device work to replay")
    crit, path = critical_paths(graph, tl)
    notes = list(graph.notes)
    explained, max_err = True, 0.0
    steps = crit
    if graph.steps.height:
        check = validation(graph, tl, device_step_spans(trace))
        max_err = float(check["error_pct"].max() or 0.0)  # type: ignore[arg-type]
        explained = max_err <= TOLERANCE * 100
        if not explained:
            notes.append(f"the replay misses a recorded step by {max_err:.1f} % (> {TOLERANCE:.0%}): this trace is outside what the model explains")
        steps = check.join(crit, on="step", how="left")
    else:
        notes.append("no ProfilerStep spans: the critical path covers the whole trace")
    total = int(crit["length_ns"].sum())
    shares = {k: (100.0 * int(crit[f"{k}_ns"].sum()) / total if total else 0.0) for k in critical.KINDS}
    top = (
        path.group_by("kind", "name").agg(pl.col("dur_ns").sum(), pl.len().alias("pieces"))
        .sort(["dur_ns", "kind", "name"], descending=[True, False, False]).head(config.top_n or TOP_PIECES)
        .with_columns(share_pct=pl.col("dur_ns") / max(total, 1) * 100)
        if path.height else pl.DataFrame()
    )
    return CriticalPathResult(
        steps=steps, shares=shares, top=top, explained=explained, max_error_pct=max_err,
        graph_stats=dict(graph.stats), notes=tuple(notes),
    )


SPEC = AnalysisSpec(
    name="critical_path",
    title="Critical path",
    run=run,
    description=(
        "The dependency graph of each step replayed: the chain of host, launch, GPU, copy, "
        "communication and sync pieces that sets the step's length, with each kind's share."
    ),
)
