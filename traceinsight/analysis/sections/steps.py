"""Training steps (``ProfilerStep#N``): host and device duration, what the device step was made
of, statistics over steps, outliers and the warm-up step.

A trace without ProfilerStep spans (an inference or decode loop under a plain ``profile()``)
gets the loop iterations found at load instead (:mod:`traceinsight.trace.iterations`);
``source`` says which. Iterations labelled prefill stay in the table but out of the statistics.

The CPU runs ahead of the GPU, so a step's host span says little about its cost. The *device
step* runs from the step's host start (or, when GPU work of earlier steps is still running
then, from the end of that work) to the end of the last GPU work launched inside the step.
Consecutive device steps therefore never overlap. A step that launched no GPU work keeps its
host end as device end.

The device step is split like TensorBoard's profiler plugin did: each instant counts once,
under the first category active then — kernel (compute kernels) > memcpy > memset >
communication (NCCL/RCCL kernels) > runtime (CUDA runtime/driver calls on the host) >
dataloader > CPU exec (CPU ops) > other (nothing of the above) — so the parts sum exactly to
the device step. GPU work of every device and host events of every thread take part.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from traceinsight.analysis.core.base import NO_INPUTS, AnalysisConfig, AnalysisSpec, Inputs, Result
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.host_names import with_name_flags
from traceinsight.analysis.lib.timeline import device_step_spans, gpu_work, step_spans
from traceinsight.trace.model import Trace

PARTS = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec")
OTHER = "other"

STEP_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "step": pl.Int64,
    "host_start_ns": pl.Int64,
    "host_end_ns": pl.Int64,
    "host_dur_ns": pl.Int64,
    "device_start_ns": pl.Int64,
    "device_end_ns": pl.Int64,
    "device_dur_ns": pl.Int64,
    **{f"{p}_ns": pl.Int64 for p in (*PARTS, OTHER)},
    "is_outlier": pl.Boolean,
    "is_warmup": pl.Boolean,
}
STATS_SCHEMA = {
    "metric": pl.String,
    "steps": pl.Int64,
    "mean_ns": pl.Float64,
    "median_ns": pl.Float64,
    "p90_ns": pl.Float64,
    "min_ns": pl.Int64,
    "max_ns": pl.Int64,
    "cv": pl.Float64,
}

# Outlier rule: slower than median + max(3 robust sigmas, 10 % of the median), or 1.5x median.
MAD_SIGMAS = 3.0
MAD_TO_SIGMA = 1.4826
MIN_EXCESS = 0.10
SLOW_FACTOR = 1.5
MIN_STEPS_FOR_OUTLIERS = 3


def _activity(trace: Trace) -> pl.DataFrame:
    """Device and host intervals labelled with their index in PARTS."""
    work = gpu_work(trace).select(
        "start_ns",
        "end_ns",
        pl.col("category")
        .replace_strict({"compute": 0, "memset": 2, "communication": 3}, default=1, return_dtype=pl.Int64)
        .alias("level"),
    )
    kind = pl.col("kind").cast(pl.String)
    level = (
        pl.when(kind.is_in(["runtime", "driver"]))
        .then(4)
        .when(kind.is_in(["cpu_op", "user_annotation", "python"]) & pl.col("is_data_name"))
        .then(5)
        .when(kind == "cpu_op")
        .then(6)
    )
    host = with_name_flags(
        trace.events.select("ts_ns", "end_ns", "kind", "name").filter(
            kind.is_in(["runtime", "driver", "cpu_op", "user_annotation", "python"])
        )
    ).select(pl.col("ts_ns").alias("start_ns"), "end_ns", level.cast(pl.Int64).alias("level"))
    return pl.concat([work, host.drop_nulls("level")])


def _breakdown(trace: Trace, steps: pl.DataFrame) -> pl.DataFrame:
    windows = steps.select("step", pl.col("device_start_ns").alias("start_ns"), pl.col("device_end_ns").alias("end_ns"))
    totals = intervals.level_totals(
        _activity(trace), windows, level="level", levels=len(PARTS), window_id="step"
    ).rename({f"level_{k}_ns": f"{part}_ns" for k, part in enumerate(PARTS)})
    parts = pl.sum_horizontal([pl.col(f"{p}_ns") for p in PARTS])
    return (
        windows.join(totals, on="step")
        .with_columns(other_ns=pl.col("end_ns") - pl.col("start_ns") - parts)
        .drop("start_ns", "end_ns")
    )


def _slow_limit(durations: pl.Series) -> float:
    """Durations above this are outliers: median + max(3 sigma, 10 % of median), capped at
    1.5x median; sigma is the median absolute deviation scaled to a standard deviation."""
    median = float(durations.median())  # type: ignore[arg-type]
    sigma = MAD_TO_SIGMA * float((durations - median).abs().median())  # type: ignore[arg-type]
    return min(median + max(MAD_SIGMAS * sigma, MIN_EXCESS * median), SLOW_FACTOR * median)


def _flags(steps: pl.DataFrame) -> pl.DataFrame:
    """is_warmup: the first step, when it is slower than ``_slow_limit`` of the others.
    is_outlier: the other steps above ``_slow_limit`` of all but the warm-up step (needs
    MIN_STEPS_FOR_OUTLIERS of them)."""
    dur = steps["device_dur_ns"].cast(pl.Float64)
    is_warmup = [False] * steps.height
    if steps.height >= 2:
        is_warmup[0] = bool(dur[0] > _slow_limit(dur[1:]))
    flagged = steps.with_columns(is_warmup=pl.Series(is_warmup, dtype=pl.Boolean))
    body = flagged.filter(~pl.col("is_warmup"))["device_dur_ns"].cast(pl.Float64)
    if body.len() < MIN_STEPS_FOR_OUTLIERS:
        return flagged.with_columns(is_outlier=pl.lit(False))
    limit = _slow_limit(body)
    return flagged.with_columns(
        is_outlier=~pl.col("is_warmup") & (pl.col("device_dur_ns").cast(pl.Float64) > limit)
    )


def _stats(steps: pl.DataFrame) -> pl.DataFrame:
    rows = []
    for metric, frame in (
        ("device_dur_ns", steps),
        ("host_dur_ns", steps),
        ("device_dur_ns_no_warmup", steps.filter(~pl.col("is_warmup"))),
    ):
        col = frame[metric.removesuffix("_no_warmup")].cast(pl.Float64)
        if col.len() == 0:
            continue
        mean = float(col.mean())  # type: ignore[arg-type]
        std = float(col.std(ddof=0))  # type: ignore[arg-type]
        rows.append(
            {
                "metric": metric,
                "steps": col.len(),
                "mean_ns": mean,
                "median_ns": float(col.median()),  # type: ignore[arg-type]
                "p90_ns": float(col.quantile(0.9, interpolation="linear")),  # type: ignore[arg-type]
                "min_ns": int(col.min()),  # type: ignore[arg-type]
                "max_ns": int(col.max()),  # type: ignore[arg-type]
                "cv": std / mean if mean else 0.0,
            }
        )
    return pl.DataFrame(rows, schema=STATS_SCHEMA)


@dataclass(frozen=True)
class StepsResult(Result):
    name = "steps"
    steps: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=STEP_SCHEMA))
    stats: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=STATS_SCHEMA))
    warmup_step: int | None = None
    outlier_steps: tuple[int, ...] = ()
    # "ProfilerStep", "repeated span NAME", "repeated call NAME" or "periodic kernels" (trace.iterations)
    source: str | None = None
    # iterations labelled prefill: left out of the statistics, the warm-up and outlier tests
    prefill_steps: tuple[int, ...] = ()

    def to_polars(self) -> pl.DataFrame:
        return self.steps


def run(trace: Trace, config: AnalysisConfig, inputs: Inputs = NO_INPUTS) -> StepsResult:
    spans = step_spans(trace)
    if spans.height == 0:
        return StepsResult(
            available=False,
            reason="no ProfilerStep#N spans and no repeating iteration found: record with a profiler "
            "schedule and call prof.step() each step, or wrap each iteration in record_function",
        )
    steps = device_step_spans(trace, spans)
    steps = steps.join(_breakdown(trace, steps), on="step", how="left").sort("host_start_ns")
    # A prefill is another kind of iteration: the decode steps' statistics leave it out.
    prefill = trace.prefill_steps
    is_prefill = pl.col("step").is_in(list(prefill))
    decode = _flags(steps.filter(~is_prefill))
    steps = pl.concat(
        [decode, steps.filter(is_prefill).with_columns(is_warmup=pl.lit(False), is_outlier=pl.lit(False))],
        how="diagonal_relaxed",
    ).sort("host_start_ns")
    steps = steps.select([pl.col(c).cast(t) for c, t in STEP_SCHEMA.items()])
    warmup = steps.filter(pl.col("is_warmup"))["step"].to_list()
    return StepsResult(
        steps=steps,
        stats=_stats(steps.filter(~is_prefill)),
        warmup_step=int(warmup[0]) if warmup else None,
        outlier_steps=tuple(int(s) for s in steps.filter(pl.col("is_outlier"))["step"].to_list()),
        source=trace.step_source,
        prefill_steps=prefill,
    )


SPEC = AnalysisSpec(
    name="steps",
    title="Steps",
    run=run,
    description=(
        "Per ProfilerStep: host and device duration, the device step split into kernel, memcpy, "
        "memset, communication, runtime, dataloader, CPU exec and other; stats, outliers, warm-up."
    ),
)
