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

RECORDED = "the trace as recorded"
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


def _ends(graph: StepGraph, tl: Timeline, windows: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per window: the piece that closes it (the step's last device work ending at the window's
    end, else a host node ending there; -1: none) and where its path starts if it has no pieces."""
    g2 = 2 * graph.gpu_nodes
    win = windows.select("step", pl.col("device_end_ns").alias("hi"), pl.col("device_start_ns").alias("lo")).with_row_index("w")
    gpu = pl.DataFrame({"step": graph.gpu_step, "hi": tl.gpu_end_ns, "gpu": np.arange(graph.gpu_nodes, dtype=np.int64)})
    stepped = win.filter(pl.col("step") >= 0).join(gpu, on=["step", "hi"], how="inner")
    # a window without steps (the whole trace) ends with any device work
    whole = win.filter(pl.col("step") < 0).join(gpu.drop("step"), on="hi", how="inner")
    by_gpu = pl.concat([stepped.select("w", "gpu"), whole.select("w", "gpu")]).group_by("w").agg(pl.col("gpu").min())
    host = pl.DataFrame({"hi": tl.host_end_ns, "host": np.arange(graph.host_nodes, dtype=np.int64)})
    by_host = win.join(host, on="hi", how="inner").group_by("w").agg(pl.col("host").min())
    ends = win.join(by_gpu, on="w", how="left").join(by_host, on="w", how="left").sort("w")
    gpu_i = ends["gpu"].fill_null(-1).to_numpy()
    host_i = ends["host"].fill_null(-1).to_numpy()
    first = np.where(gpu_i >= 0, 2 * gpu_i, np.where(host_i >= 0, g2 + host_i, -1))
    lo = ends["lo"].to_numpy()
    no_end = tl.host_end_ns[0] if graph.host_nodes else lo
    fallback = np.where(
        gpu_i >= 0, tl.gpu_end_ns[np.maximum(gpu_i, 0)] if graph.gpu_nodes else lo,
        np.where(host_i >= 0, tl.host_end_ns[np.maximum(host_i, 0)] if graph.host_nodes else lo, no_end),
    )
    return first.astype(np.int64), fallback.astype(np.int64)


def critical_paths(graph: StepGraph, tl: Timeline) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per window: the breakdown of its critical path by kind, and the path's pieces (one walk
    over the pieces on the paths, whatever the number of windows)."""
    windows = _windows(graph, tl)
    first, fallback = _ends(graph, tl, windows)
    p = critical.pieces(graph, tl)
    walked = critical.walk_all(p, windows["device_start_ns"].to_numpy(), first, fallback)
    steps = windows.select(pl.col("step").cast(pl.Int64), (pl.col("device_end_ns") - pl.col("device_start_ns")).alias("length_ns")).with_row_index("window")
    path = critical.describe(graph, p, walked).join(
        steps.select(pl.col("window").cast(pl.Int64), "step"), on="window", how="left", maintain_order="left"
    )
    sums = path.group_by("window", "kind").agg(pl.col("dur_ns").sum()).pivot(on="kind", index="window", values="dur_ns")
    frame = steps.with_columns(pl.col("window").cast(pl.Int64)).join(sums, on="window", how="left")
    per_kind = [
        (pl.col(k).fill_null(0) if k in sums.columns else pl.lit(0)).cast(pl.Int64).alias(f"{k}_ns") for k in critical.KINDS
    ]
    frame = frame.select(pl.col("step").cast(pl.Int64), pl.col("length_ns").cast(pl.Int64), *per_kind)
    return frame, path.select("kind", "node", "index", "start_ns", "end_ns", "name", "dur_ns", "step")


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
    # the findings whose changes are replayed (``whatif --finding``), and what "before" is
    # when it is not the recording (the findings' step without the profiler)
    findings: tuple[str, ...] = ()
    before: str = RECORDED

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


def whatif(
    trace: Trace,
    transformations: tuple[Transformation, ...] | list[Transformation],
    graph: StepGraph | None = None,
    *,
    base: tuple[Transformation, ...] = (),
    before_is: str = "",
    steady_steps: tuple[int, ...] = (),
    findings: tuple[str, ...] = (),
    notes: tuple[str, ...] = (),
) -> WhatIfResult:
    """Replay ``trace`` as recorded and with ``transformations`` applied together. ``base``:
    applied before and after (the findings' step without the profiler), so the change is read
    against it, ``before_is`` saying what it is; ``steady_steps``: the steps the headline
    medians are over (all where empty); ``findings``: whose changes these are; ``notes``: the
    caller's, said first."""
    g, recorded_tl = (graph, replay(graph)) if graph is not None else recorded(trace)
    if g.host_nodes == 0 and g.gpu_nodes == 0:
        return WhatIfResult(available=False, reason="the trace has no host spans or device work to replay")
    before = replay(g, apply_all(g, base)) if base else recorded_tl
    after = replay(g, apply_all(g, (*base, *transformations)))
    wb, wa = _windows(g, before), _windows(g, after)
    steps = wb.select("step", pl.col("device_dur_ns").alias("before_ns")).join(
        wa.select("step", pl.col("device_dur_ns").alias("after_ns")), on="step", how="left"
    ).with_columns(saving_ns=pl.col("before_ns") - pl.col("after_ns"))
    said = list(notes)
    said += [n for n in g.notes if n not in said]
    explained = True
    if g.steps.height:
        check = validation(g, recorded_tl, device_step_spans(trace))
        bad = check.filter(pl.col("error_pct") > TOLERANCE * 100)
        if bad.height:
            explained = False
            said.append(f"the replay misses the recorded device time of {bad.height} step(s) by more than {TOLERANCE:.0%}: this trace is outside what the model explains")
    crit, path = critical_paths(g, after)
    b, a = _mean(steps["before_ns"]), _mean(steps["after_ns"])
    steady = steps.filter(pl.col("step").is_in(list(steady_steps))) if steady_steps else steps
    sb, sa = _median(steady["before_ns"]), _median(steady["after_ns"])
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
        notes=tuple(said),
        findings=findings,
        before=before_is if base and before_is else RECORDED,
    )


def saving_ns(trace: Trace, transformations: tuple[Transformation, ...], graph: StepGraph | None = None) -> int:
    """Mean step time saved by ``transformations`` (what a finding's ``saving_ns`` reads)."""
    return whatif(trace, transformations, graph).saving_ns
