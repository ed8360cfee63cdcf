"""What-if and critical path over a trace: the results, and the functions that build them.

``whatif(trace, transformations)`` replays the trace as recorded and with the changes, and
reports the steps' predicted device times before and after, with the critical path after.
``saving_ns(trace, transformations)`` is what a finding that carries a transformation reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.lib.timeline import device_step_spans
from traceinsight.analysis.whatif import critical
from traceinsight.analysis.whatif.graph import StepGraph
from traceinsight.analysis.whatif.replay import Timeline, replay, span, step_times
from traceinsight.analysis.whatif.shared import recorded
from traceinsight.analysis.whatif.transforms import Transformation, apply_all
from traceinsight.trace.model import Trace

# The replay must give back each recorded step within this share to be said to explain it.
TOLERANCE = 0.05
BREAKDOWN_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "step": pl.Int64, "length_ns": pl.Int64, **{f"{k}_ns": pl.Int64 for k in critical.KINDS},
}


def _windows(graph: StepGraph, tl: Timeline) -> pl.DataFrame:
    """step, device_start_ns, device_end_ns; one row with step -1 when the trace has no steps."""
    steps = step_times(graph, tl)
    if steps.height:
        return steps
    lo, hi = span(graph, tl)
    return pl.DataFrame({"step": [-1], "device_start_ns": [lo], "device_end_ns": [hi], "device_dur_ns": [hi - lo]})


def _end_node(graph: StepGraph, tl: Timeline, step: int, hi: int) -> tuple[int | None, int | None]:
    """The node whose end closes the window: the step's last device work, else a host node."""
    gpu = np.flatnonzero((graph.gpu_step == step) if step >= 0 else np.ones(graph.gpu_nodes, dtype=bool))
    gpu = gpu[tl.gpu_end_ns[gpu] == hi] if gpu.size else gpu
    if gpu.size:
        return int(gpu[0]), None
    host = np.flatnonzero(tl.host_end_ns == hi)
    return None, (int(host[0]) if host.size else None)


def critical_paths(graph: StepGraph, tl: Timeline) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per window: the breakdown of its critical path by kind, and the path's pieces."""
    rows: list[dict[str, int]] = []
    paths: list[pl.DataFrame] = []
    for step, lo, hi in _windows(graph, tl).select("step", "device_start_ns", "device_end_ns").iter_rows():
        gpu, host = _end_node(graph, tl, int(step), int(hi))
        path = critical.walk(graph, tl, int(lo), gpu, host)
        rows.append({"step": int(step), "length_ns": int(hi - lo), **{f"{k}_ns": v for k, v in critical.breakdown(path).items()}})
        paths.append(critical.with_names(graph, path).with_columns(step=pl.lit(int(step), dtype=pl.Int64)))
    frame = pl.DataFrame(rows, schema=BREAKDOWN_SCHEMA)
    return frame, (pl.concat(paths) if paths else pl.DataFrame())


def validation(graph: StepGraph, tl: Timeline, recorded: pl.DataFrame) -> pl.DataFrame:
    """step, recorded_ns, replayed_ns, error_pct: the replay with recorded durations against
    the steps' recorded device time (``recorded``: step, device_dur_ns)."""
    replayed = step_times(graph, tl).select("step", pl.col("device_dur_ns").alias("replayed_ns"))
    return (
        recorded.select("step", pl.col("device_dur_ns").alias("recorded_ns"))
        .join(replayed, on="step", how="left")
        .with_columns(
            error_pct=pl.when(pl.col("recorded_ns") > 0)
            .then((pl.col("replayed_ns") - pl.col("recorded_ns")).abs() / pl.col("recorded_ns") * 100)
            .otherwise(0.0)
        )
    )


@dataclass(frozen=True)
class WhatIfResult(Result):
    """Predicted step times before and after a set of transformations."""

    name = "whatif"
    transformations: tuple[dict[str, Any], ...] = ()
    steps: pl.DataFrame = field(default_factory=pl.DataFrame)  # step, before_ns, after_ns, saving_ns
    before_ns: int = 0  # mean step (or the whole trace without steps)
    after_ns: int = 0
    saving_pct: float = 0.0
    # The steady state: the median step, which a first step draining a queue built before
    # the trace (or any one slow step) does not move. The headline figure.
    steady_before_ns: int = 0
    steady_after_ns: int = 0
    steady_saving_pct: float = 0.0
    critical_after: pl.DataFrame = field(default_factory=pl.DataFrame)
    path_after: pl.DataFrame = field(default_factory=pl.DataFrame)
    explained: bool = True
    notes: tuple[str, ...] = ()

    def to_polars(self) -> pl.DataFrame:
        return self.steps

    @property
    def saving_ns(self) -> int:
        return self.before_ns - self.after_ns


def _mean(values: pl.Series) -> int:
    # the mean, not the median: a change can move time between neighbouring steps' windows,
    # and the mean (the windows' total over their number) is what the run's length follows
    return round(float(values.mean() or 0)) if values.len() else 0  # type: ignore[arg-type]


def _median(values: pl.Series) -> int:
    return round(float(values.median() or 0)) if values.len() else 0  # type: ignore[arg-type]


def whatif(trace: Trace, transformations: tuple[Transformation, ...] | list[Transformation], graph: StepGraph | None = None) -> WhatIfResult:
    """Replay ``trace`` as recorded and with ``transformations`` applied together."""
    g, before = (graph, replay(graph)) if graph is not None else recorded(trace)
    if g.host_nodes == 0 and g.gpu_nodes == 0:
        return WhatIfResult(available=False, reason="the trace has no host spans or device work to replay")
    after = replay(g, apply_all(g, tuple(transformations)))
    wb, wa = _windows(g, before), _windows(g, after)
    steps = wb.select("step", pl.col("device_dur_ns").alias("before_ns")).join(
        wa.select("step", pl.col("device_dur_ns").alias("after_ns")), on="step", how="left"
    ).with_columns(saving_ns=pl.col("before_ns") - pl.col("after_ns"))
    notes = list(g.notes)
    explained = True
    if g.steps.height:
        check = validation(g, before, device_step_spans(trace))
        bad = check.filter(pl.col("error_pct") > TOLERANCE * 100)
        if bad.height:
            explained = False
            notes.append(f"the replay misses the recorded device time of {bad.height} step(s) by more than {TOLERANCE:.0%}: this trace is outside what the model explains")
    crit, path = critical_paths(g, after)
    b, a = _mean(steps["before_ns"]), _mean(steps["after_ns"])
    sb, sa = _median(steps["before_ns"]), _median(steps["after_ns"])
    return WhatIfResult(
        transformations=tuple(t.to_dict() for t in transformations),
        steps=steps,
        before_ns=b,
        after_ns=a,
        saving_pct=100.0 * (b - a) / b if b else 0.0,
        steady_before_ns=sb,
        steady_after_ns=sa,
        steady_saving_pct=100.0 * (sb - sa) / sb if sb else 0.0,
        critical_after=crit,
        path_after=path,
        explained=explained,
        notes=tuple(notes),
    )


def saving_ns(trace: Trace, transformations: tuple[Transformation, ...], graph: StepGraph | None = None) -> int:
    """Mean step time saved by ``transformations`` (what a finding's ``saving_ns`` reads)."""
    return whatif(trace, transformations, graph).saving_ns
