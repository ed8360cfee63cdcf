"""Before/after comparison of two traces: did the change help, by how much, and why.

Alignment:

- steps: the step analysis marks warm-up and outlier steps; both are dropped and the kept
  steps are compared as two samples of device step time (host step time when a side has no
  GPU work). Kept steps are paired by position for the per-step table only; the verdict does
  not assume pairing.
- ops by top-level op name and input shapes, kernels by name (with their family), regions by
  annotation name; each side's GPU time is divided by its number of kept steps, so runs of
  different lengths compare. Without steps, per-trace totals are compared and said so.
- breakdown and idle-by-cause figures cover each trace's whole analysed window and are divided
  by the number of profiled steps in it.

The verdict is "faster"/"slower" only when the bootstrap interval of the median ratio excludes
1 AND the rank test gives p < alpha (see :mod:`traceinsight.analysis.stats`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Literal

import polars as pl

from traceinsight.analysis.base import AnalysisConfig, Result, jsonable
from traceinsight.analysis.stats import (
    DEFAULT_ALPHA,
    DEFAULT_BOOTSTRAP,
    DEFAULT_SEED,
    MIN_SAMPLES,
    compare_samples,
)
from traceinsight.analysis.timeline import step_numbers
from traceinsight.trace.model import Trace

DIFF_SCHEMA_VERSION = 1
Verdict = Literal["faster", "slower", "no_significant_change"]

CONTRIBUTION_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "before_ns_per_step": pl.Float64,
    "after_ns_per_step": pl.Float64,
    "delta_ns_per_step": pl.Float64,
    "ratio": pl.Float64,
    "before_calls_per_step": pl.Float64,
    "after_calls_per_step": pl.Float64,
    "status": pl.String,
    "share_of_delta": pl.Float64,
}
NO_ANNOTATION = "(no annotation)"
NO_OP = "(no op)"


@dataclass(frozen=True)
class DiffOptions:
    label_before: str | None = None
    label_after: str | None = None
    alpha: float = DEFAULT_ALPHA
    n_boot: int = DEFAULT_BOOTSTRAP
    seed: int = DEFAULT_SEED
    min_steps: int = MIN_SAMPLES
    top_n: int = 10
    config: AnalysisConfig = field(default_factory=AnalysisConfig)


@dataclass(frozen=True)
class StepTimeDiff:
    available: bool = True
    reason: str | None = None
    metric: str = "device_dur_ns"
    n_before: int = 0
    n_after: int = 0
    dropped_before: int = 0
    dropped_after: int = 0
    before_median_ns: float | None = None
    after_median_ns: float | None = None
    before_p90_ns: float | None = None
    after_p90_ns: float | None = None
    ratio: float | None = None
    change_pct: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float = 1.0 - DEFAULT_ALPHA
    p_value: float | None = None
    test: str | None = None
    verdict: Verdict = "no_significant_change"
    verdict_reason: str = ""
    steps: pl.DataFrame = field(default_factory=pl.DataFrame)


@dataclass(frozen=True)
class TableDiff:
    """A before/after table (breakdown, idle causes, memory, bound labels) or why it is missing."""

    available: bool = True
    reason: str | None = None
    table: pl.DataFrame = field(default_factory=pl.DataFrame)
    basis: str = ""


@dataclass(frozen=True)
class CompileDiff:
    available: bool = True
    reason: str | None = None
    compiled_side: str = ""
    metrics: pl.DataFrame = field(default_factory=pl.DataFrame)
    fusion_ratio: float | None = None
    region_speedups: pl.DataFrame = field(default_factory=pl.DataFrame)
    findings: tuple[str, ...] = ()
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None


@dataclass(frozen=True)
class DiffResult(Result):
    name = "diff"
    before_label: str = "before"
    after_label: str = "after"
    before_path: str = ""
    after_path: str = ""
    verdict: Verdict = "no_significant_change"
    per: str = "step"
    before_steps: int = 0
    after_steps: int = 0
    before_device: str | None = None
    after_device: str | None = None
    comparable: bool = True
    notes: tuple[str, ...] = ()
    step_time: StepTimeDiff = field(default_factory=StepTimeDiff)
    kernel_counts: dict[str, float] = field(default_factory=dict)
    breakdown: TableDiff = field(default_factory=TableDiff)
    idle_by_cause: TableDiff = field(default_factory=TableDiff)
    ops: pl.DataFrame = field(default_factory=pl.DataFrame)
    kernels: pl.DataFrame = field(default_factory=pl.DataFrame)
    regions: pl.DataFrame = field(default_factory=pl.DataFrame)
    added_kernels: tuple[str, ...] = ()
    removed_kernels: tuple[str, ...] = ()
    added_kernel_count: int = 0
    removed_kernel_count: int = 0
    gpu_delta_ns_per_step: float | None = None
    bound: TableDiff = field(default_factory=TableDiff)
    memory: TableDiff = field(default_factory=TableDiff)
    compile: CompileDiff = field(default_factory=lambda: CompileDiff(available=False, reason="not computed"))

    def to_polars(self) -> pl.DataFrame:
        return self.kernels

    def is_regression(self, threshold_pct: float) -> bool:
        """True when the after run is significantly slower by more than ``threshold_pct`` %."""
        ratio = self.step_time.ratio
        return self.verdict == "slower" and ratio is not None and (ratio - 1.0) * 100.0 > threshold_pct

    def to_json_dict(self) -> dict[str, Any]:
        from traceinsight import __version__

        data = jsonable(
            {"schema_version": DIFF_SCHEMA_VERSION, "traceinsight_version": __version__, "diff": self.to_dict()}
        )
        return data  # type: ignore[no-any-return]


# ---- running the analyses each side needs --------------------------------------------------


def _section(trace: Trace, name: str, config: AnalysisConfig) -> tuple[Result | None, str | None]:
    """The result of one registered analysis, or None and why it cannot be had."""
    try:
        module = importlib.import_module(f"traceinsight.analysis.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"traceinsight.analysis.{name}":
            return None, f"the {name} analysis is not part of this build"
        raise
    try:
        result: Result = module.SPEC.run(trace, config)
    except Exception as exc:
        if name == "steps":
            raise
        # One failing side section must not cost the user the verdict; say what failed.
        return None, f"the {name} analysis failed ({type(exc).__name__}: {exc})"
    if not result.available:
        return None, result.reason or f"{name} not available"
    return result, None


@dataclass(frozen=True)
class _Side:
    trace: Trace
    label: str
    kept_steps: list[int]
    all_steps: list[int]
    steps_frame: pl.DataFrame | None
    steps_reason: str | None
    dropped: int

    @property
    def per(self) -> int:
        return max(len(self.kept_steps), 1)

    @property
    def window_per(self) -> int:
        return max(len(self.all_steps), 1)


def _side(trace: Trace, label: str, config: AnalysisConfig) -> _Side:
    all_steps = step_numbers(trace)
    result, reason = _section(trace, "steps", config)
    frame = getattr(result, "steps", None) if result is not None else None
    if isinstance(frame, pl.DataFrame) and frame.height:
        keep = ~pl.col("is_warmup").fill_null(False) & ~pl.col("is_outlier").fill_null(False)
        kept_frame = frame.filter(keep).sort("step")
        kept = [int(s) for s in kept_frame["step"].to_list()]
        return _Side(trace, label, kept, all_steps, kept_frame, None, frame.height - kept_frame.height)
    # Without the step analysis, the profiled steps still give per-step normalisation.
    return _Side(trace, label, all_steps, all_steps, None, reason or "no steps in this trace", 0)


# ---- step time -------------------------------------------------------------------------------


def _step_metric(before: pl.DataFrame, after: pl.DataFrame) -> str:
    for frame in (before, after):
        if frame["device_dur_ns"].null_count() == frame.height:
            return "host_dur_ns"
    return "device_dur_ns"


def compare_steps(before: _Side, after: _Side, opts: DiffOptions) -> StepTimeDiff:
    if before.steps_frame is None or after.steps_frame is None:
        reasons = [f"{s.label}: {s.steps_reason}" for s in (before, after) if s.steps_frame is None]
        return StepTimeDiff(
            available=False,
            reason="; ".join(reasons),
            verdict="no_significant_change",
            verdict_reason="no step times to compare",
        )
    metric = _step_metric(before.steps_frame, after.steps_frame)
    b = before.steps_frame[metric].drop_nulls()
    a = after.steps_frame[metric].drop_nulls()
    cmp = compare_samples(
        b.to_numpy(), a.to_numpy(), alpha=opts.alpha, n_boot=opts.n_boot, seed=opts.seed, min_samples=opts.min_steps
    )
    paired = (
        before.steps_frame.select(pl.col("step").alias("before_step"), pl.col(metric).alias("before_ns"))
        .with_row_index("index")
        .join(
            after.steps_frame.select(pl.col("step").alias("after_step"), pl.col(metric).alias("after_ns")).with_row_index(
                "index"
            ),
            on="index",
            how="full",
            coalesce=True,
        )
        .sort("index")
        .with_columns(
            pl.col("index").cast(pl.Int64),
            ratio=pl.when(pl.col("before_ns") > 0).then(pl.col("after_ns") / pl.col("before_ns")),
        )
    )
    return StepTimeDiff(
        metric=metric,
        n_before=cmp.n_before,
        n_after=cmp.n_after,
        dropped_before=before.dropped,
        dropped_after=after.dropped,
        before_median_ns=cmp.before_median,
        after_median_ns=cmp.after_median,
        before_p90_ns=cmp.before_p90,
        after_p90_ns=cmp.after_p90,
        ratio=cmp.ratio,
        change_pct=cmp.change_pct,
        ci_low=cmp.ci_low,
        ci_high=cmp.ci_high,
        confidence=cmp.confidence,
        p_value=cmp.p_value,
        test=f"Mann-Whitney U ({cmp.test_method})" if cmp.test_method else None,
        verdict=cmp.verdict,
        verdict_reason=cmp.reason,
        steps=paired,
    )


# ---- contributions: ops, kernels, regions -------------------------------------------------


def _kernels_in_steps(side: _Side) -> pl.DataFrame:
    kernels = side.trace.kernels
    if side.kept_steps:
        return kernels.filter(pl.col("step").is_in(side.kept_steps))
    return kernels


def contributions(
    before: pl.DataFrame, after: pl.DataFrame, keys: list[str], before_per: int, after_per: int
) -> pl.DataFrame:
    """Per key: GPU ns and calls per step on each side, the delta, and its share of the total delta.

    ``before``/``after`` hold ``keys`` and ``dur_ns``, one row per kernel. Rows are ranked by
    the size of their delta; ``status`` says whether a key exists on both sides or only one.
    """
    schema = {k: pl.String for k in keys} | CONTRIBUTION_SCHEMA

    def agg(frame: pl.DataFrame, prefix: str, per: int) -> pl.DataFrame:
        return frame.group_by(keys).agg(
            (pl.col("dur_ns").sum() / per).alias(f"{prefix}_ns_per_step"),
            (pl.len() / per).alias(f"{prefix}_calls_per_step"),
        )

    if before.height == 0 and after.height == 0:
        return pl.DataFrame(schema=schema)
    cast_keys = [pl.col(k).cast(pl.String) for k in keys]
    b = agg(before.with_columns(cast_keys), "before", before_per)
    a = agg(after.with_columns(cast_keys), "after", after_per)
    joined = b.join(a, on=keys, how="full", coalesce=True, nulls_equal=True)
    status = (
        pl.when(pl.col("before_ns_per_step").is_null())
        .then(pl.lit("added"))
        .when(pl.col("after_ns_per_step").is_null())
        .then(pl.lit("removed"))
        .otherwise(pl.lit("both"))
    )
    table = joined.with_columns(status=status).with_columns(
        pl.col("before_ns_per_step", "after_ns_per_step", "before_calls_per_step", "after_calls_per_step").fill_null(0.0)
    )
    delta = pl.col("after_ns_per_step") - pl.col("before_ns_per_step")
    table = table.with_columns(
        delta_ns_per_step=delta,
        ratio=pl.when(pl.col("before_ns_per_step") > 0).then(pl.col("after_ns_per_step") / pl.col("before_ns_per_step")),
    )
    total_delta = float(table["delta_ns_per_step"].sum())
    table = table.with_columns(
        share_of_delta=(pl.col("delta_ns_per_step") / total_delta) if total_delta else pl.lit(None, dtype=pl.Float64)
    )
    return (
        table.with_columns(_abs=pl.col("delta_ns_per_step").abs())
        .sort(["_abs", *keys], descending=[True, *([False] * len(keys))], nulls_last=True)
        .drop("_abs")
        .select([pl.col(c).cast(t) for c, t in schema.items()])
    )


def _op_frame(side: _Side) -> pl.DataFrame:
    kernels = _kernels_in_steps(side).filter(pl.col("kind") == "kernel")
    shapes = side.trace.events.select(pl.col("id").alias("top_op_id"), pl.col("input_dims"))
    return kernels.join(shapes, on="top_op_id", how="left").select(
        op=pl.col("top_op_name").cast(pl.String).fill_null(NO_OP),
        input_dims=pl.col("input_dims").fill_null(""),
        dur_ns=pl.col("dur_ns"),
    )


def _kernel_frame(side: _Side) -> pl.DataFrame:
    from traceinsight.analysis.kernel_families import with_families

    kernels = _kernels_in_steps(side).select(pl.col("name").cast(pl.String), pl.col("kind").cast(pl.String), "dur_ns")
    if kernels.height == 0:
        return kernels.with_columns(family=pl.lit(None, dtype=pl.String))
    return with_families(kernels).select("name", "family", "kind", "dur_ns")


def _region_frame(side: _Side) -> pl.DataFrame:
    return _kernels_in_steps(side).select(
        region=pl.col("annotation").cast(pl.String).fill_null(NO_ANNOTATION), dur_ns=pl.col("dur_ns")
    )


# ---- breakdown, idle causes, memory, bound ---------------------------------------------------


def _step_parts(side: _Side, prefix: str) -> pl.DataFrame:
    """Mean device time per kept step by category, from the step analysis' split of each step.

    Compute, copies, memsets and communication are the GPU-busy parts; the rest of the device
    step (runtime, data loading, CPU work, nothing) is the device idle inside the step.
    """
    frame = side.steps_frame
    assert frame is not None
    busy = {"compute": "kernel_ns", "communication": "communication_ns", "memcpy": "memcpy_ns", "memset": "memset_ns"}
    means = frame.select(
        *[pl.col(col).cast(pl.Float64).mean().alias(name) for name, col in busy.items()],
        idle=(pl.col("device_dur_ns") - pl.sum_horizontal(*busy.values())).cast(pl.Float64).mean(),
        total=pl.col("device_dur_ns").cast(pl.Float64).mean(),
    ).row(0, named=True)
    total = means.pop("total") or 0.0
    return pl.DataFrame(
        {
            "group": list(means),
            f"{prefix}_ns_per_step": [float(v or 0.0) for v in means.values()],
            f"{prefix}_share": [float(v or 0.0) / total if total else None for v in means.values()],
        },
        schema={"group": pl.String, f"{prefix}_ns_per_step": pl.Float64, f"{prefix}_share": pl.Float64},
    )


def _breakdown_table(before: _Side, after: _Side, config: AnalysisConfig) -> TableDiff:
    if before.steps_frame is not None and after.steps_frame is not None:
        table = _delta_table(_step_parts(before, "before"), _step_parts(after, "after"), "group")
        return TableDiff(table=table.rename({"group": "category"}), basis="mean of the kept steps")
    frames = []
    for side, prefix in ((before, "before"), (after, "after")):
        result, reason = _section(side.trace, "breakdown", config)
        if result is None:
            return TableDiff(available=False, reason=f"{side.label}: {reason}")
        by_device: pl.DataFrame = result.by_device  # type: ignore[attr-defined]
        grouped = (
            # compute / communication / memcpy / memset / idle: the part before the first "_".
            by_device.with_columns(group=pl.col("category").cast(pl.String).str.split("_").list.first())
            .group_by("group")
            .agg((pl.col("dur_ns").sum() / side.window_per).alias(f"{prefix}_ns_per_step"))
        )
        total = grouped[f"{prefix}_ns_per_step"].sum()
        frames.append(
            grouped.with_columns(
                (pl.col(f"{prefix}_ns_per_step") / total if total else pl.lit(None, dtype=pl.Float64)).alias(
                    f"{prefix}_share"
                )
            )
        )
    table = _delta_table(frames[0], frames[1], "group")
    return TableDiff(table=table.rename({"group": "category"}), basis="whole trace window / profiled steps")


def _delta_table(b: pl.DataFrame, a: pl.DataFrame, key: str) -> pl.DataFrame:
    order = {"compute": 0, "communication": 1, "memcpy": 2, "memset": 3, "idle": 4}
    return (
        b.join(a, on=key, how="full", coalesce=True)
        .with_columns(pl.col("before_ns_per_step", "after_ns_per_step").fill_null(0.0))
        .with_columns(delta_ns_per_step=pl.col("after_ns_per_step") - pl.col("before_ns_per_step"))
        .with_columns(_o=pl.col(key).replace_strict(order, default=99, return_dtype=pl.Int64))
        .sort(["_o", key])
        .drop("_o")
    )


def _idle_by_cause(before: _Side, after: _Side, config: AnalysisConfig) -> TableDiff:
    frames = []
    for side, prefix in ((before, "before"), (after, "after")):
        result, reason = _section(side.trace, "gaps", config)
        if result is None:
            return TableDiff(available=False, reason=f"{side.label}: {reason}")
        by_cause = getattr(result, "by_cause", None)
        if not isinstance(by_cause, pl.DataFrame):
            return TableDiff(available=False, reason=f"{side.label}: the gaps result has no by_cause table")
        frames.append(
            by_cause.select(
                pl.col("cause").cast(pl.String),
                (pl.col("idle_ns") / side.window_per).alias(f"{prefix}_ns_per_step"),
                pl.col("share").alias(f"{prefix}_share"),
            )
        )
    table = (
        frames[0]
        .join(frames[1], on="cause", how="full", coalesce=True)
        .with_columns(pl.col("before_ns_per_step", "after_ns_per_step").fill_null(0.0))
        .with_columns(delta_ns_per_step=pl.col("after_ns_per_step") - pl.col("before_ns_per_step"))
        .sort("delta_ns_per_step", descending=False)
    )
    return TableDiff(table=table, basis="whole trace window / profiled steps")


def _numeric_peaks(result: Result) -> dict[str, float]:
    """Peak-memory figures of a memory result: per device from its ``peaks`` table (allocated
    and reserved bytes), else its top-level numeric fields whose name says they are a peak."""
    peaks = getattr(result, "peaks", None)
    if isinstance(peaks, pl.DataFrame) and peaks.height and "device" in peaks.columns:
        cols = [c for c in ("peak_allocated_bytes", "peak_reserved_bytes") if c in peaks.columns]
        return {
            f"{row['device']} {col.removeprefix('peak_').removesuffix('_bytes')} (peak)": float(row[col])
            for row in peaks.iter_rows(named=True)
            for col in cols
            if row[col] is not None
        }
    data = result.to_dict()
    return {
        k: float(v)
        for k, v in data.items()
        if "peak" in k and k.endswith("bytes") and isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def _memory(before: _Side, after: _Side, config: AnalysisConfig) -> TableDiff:
    peaks = []
    for side in (before, after):
        result, reason = _section(side.trace, "memory", config)
        if result is None:
            return TableDiff(available=False, reason=f"{side.label}: {reason}")
        peaks.append(_numeric_peaks(result))
    names = sorted(set(peaks[0]) & set(peaks[1]))
    if not names:
        return TableDiff(available=False, reason="no peak-memory figures on both sides")
    table = pl.DataFrame(
        {
            "metric": names,
            "before": [peaks[0][n] for n in names],
            "after": [peaks[1][n] for n in names],
        },
        schema={"metric": pl.String, "before": pl.Float64, "after": pl.Float64},
    ).with_columns(delta=pl.col("after") - pl.col("before"))
    return TableDiff(table=table)


def _bound_labels(result: Result) -> pl.DataFrame | None:
    regions = getattr(result, "regions", None)
    if not isinstance(regions, pl.DataFrame) or regions.height == 0:
        return None
    key = next((c for c in ("region", "name") if c in regions.columns), None)
    label = next((c for c in ("label", "bound") if c in regions.columns), None)
    if key is None or label is None:
        return None
    # ProfilerStep numbers differ between runs; their labels are compared as one region.
    region = pl.col(key).cast(pl.String).str.replace(r"^ProfilerStep#\d+$", "ProfilerStep")
    return regions.group_by(region.alias("region")).agg(
        pl.col(label).cast(pl.String).mode().sort().first().alias("label")
    )


def _bound(before: _Side, after: _Side, config: AnalysisConfig) -> TableDiff:
    labels = []
    for side in (before, after):
        result, reason = _section(side.trace, "bound", config)
        if result is None:
            return TableDiff(available=False, reason=f"{side.label}: {reason}")
        frame = _bound_labels(result)
        if frame is None:
            return TableDiff(available=False, reason=f"{side.label}: no labelled regions")
        labels.append(frame)
    table = (
        labels[0]
        .rename({"label": "before_label"})
        .join(labels[1].rename({"label": "after_label"}), on="region", how="full", coalesce=True)
        .with_columns(
            changed=pl.col("before_label").is_not_null()
            & pl.col("after_label").is_not_null()
            & (pl.col("before_label") != pl.col("after_label"))
        )
        .sort(["changed", "region"], descending=[True, False])
    )
    return TableDiff(table=table)


# ---- devices, compile ------------------------------------------------------------------------


def _device_name(trace: Trace) -> str | None:
    used = trace.gpu_devices
    names = [d.name for d in trace.meta.devices if not used or d.id in used]
    return ", ".join(sorted(set(names))) if names else None


def _device_notes(before: _Side, after: _Side) -> tuple[bool, list[str], str | None, str | None]:
    b_name, a_name = _device_name(before.trace), _device_name(after.trace)
    notes: list[str] = []
    comparable = True
    if before.trace.has_gpu != after.trace.has_gpu:
        comparable = False
        missing = before.label if not before.trace.has_gpu else after.label
        notes.append(f"{missing} has no GPU activity: GPU figures are one-sided")
    elif b_name and a_name and b_name != a_name:
        comparable = False
        notes.append(
            f"devices differ ({b_name} vs {a_name}): absolute kernel times and step times "
            "reflect the hardware as much as the change"
        )
    return comparable, notes, b_name, a_name


# Metrics of the compile comparison whose values are durations in ns (for the renderers).
DURATION_METRICS = frozenset(
    {"kernel_ns_per_step", "launch_api_ns_per_step", "host_step_ns", "cache_lookup_ns_per_step", "compile_ns"}
)
_COMPILE_METRICS = (
    ("launches_per_step", "launch calls per step"),
    ("launch_api_ns_per_step", "launch API time per step"),
    ("host_step_ns", "host step span, median"),
    ("triton_share", "Triton share of kernel time"),
    ("graph_launches_per_step", "cudaGraphLaunch per step"),
    ("cache_lookup_ns_per_step", "Dynamo cache lookup per step"),
    ("regions_per_step", "compiled regions per step"),
    ("compile_ns", "compile time in trace"),
    ("recompiles_in_trace", "recompiles in trace"),
)


def _compile_summary(trace: Trace, config: AnalysisConfig) -> dict[str, Any]:
    from traceinsight.analysis import compile as compile_analysis

    result = compile_analysis.run(trace, config)
    keys = [key for key, _ in _COMPILE_METRICS] + ["kernels_per_step", "kernel_ns_per_step"]
    summary = {key: getattr(result, key) for key in keys}
    summary["available"] = result.available
    summary["compiled"] = result.available
    summary["findings"] = list(result.findings)
    summary["graph_break_ops"] = result.graph_break_ops["name"].to_list() if result.available else []
    summary["recompiled_frames"] = list(result.recompiled_frames)
    if not result.available:
        # An eager run has no compile result: count its kernels and launches directly.
        kernels = trace.kernels.filter(pl.col("kind") == "kernel")
        per = max(len(step_numbers(trace)), 1)
        launches = trace.kernels.filter(pl.col("launch_id").is_not_null()).unique("launch_id")
        summary.update(
            kernels_per_step=kernels.height / per,
            kernel_ns_per_step=float(kernels["dur_ns"].sum()) / per,
            launches_per_step=launches.height / per,
            launch_api_ns_per_step=float((launches["launch_end_ns"] - launches["launch_ts_ns"]).sum() or 0) / per,
            host_step_ns=compile_analysis._host_step_ns(trace),
        )
    return summary


def _compile_diff(
    before: _Side,
    after: _Side,
    step_time: StepTimeDiff,
    regions: pl.DataFrame,
    kernels_per_step: tuple[float, float],
    gpu_ns_per_step: tuple[float, float],
    config: AnalysisConfig,
) -> CompileDiff:
    from traceinsight.analysis.compile import has_compile_markers

    b_compiled, a_compiled = has_compile_markers(before.trace), has_compile_markers(after.trace)
    if not (b_compiled or a_compiled):
        return CompileDiff(available=False, reason="neither run shows torch.compile markers")
    b, a = _compile_summary(before.trace, config), _compile_summary(after.trace, config)
    side = "both" if b_compiled and a_compiled else (before.label if b_compiled else after.label)
    rows = []
    for key, label in _COMPILE_METRICS:
        bv, av = b.get(key), a.get(key)
        bf = float(bv) if isinstance(bv, (int, float)) else None
        af = float(av) if isinstance(av, (int, float)) else None
        rows.append(
            {"metric": label, "key": key, "before": bf, "after": af, "ratio": (af / bf) if bf and af is not None else None}
        )
    metrics = pl.DataFrame(
        rows, schema={"metric": pl.String, "key": pl.String, "before": pl.Float64, "after": pl.Float64, "ratio": pl.Float64}
    )
    fusion = None
    if b_compiled != a_compiled:
        eager_k, compiled_k = (kernels_per_step[0], kernels_per_step[1]) if a_compiled else (kernels_per_step[1], kernels_per_step[0])
        fusion = eager_k / compiled_k if compiled_k else None
    speedups = (
        regions.filter((pl.col("status") == "both") & (pl.col("region") != NO_ANNOTATION))
        .select("region", "before_ns_per_step", "after_ns_per_step", "ratio")
        .with_columns(speedup=pl.when(pl.col("after_ns_per_step") > 0).then(pl.col("before_ns_per_step") / pl.col("after_ns_per_step")))
        if regions.height
        else pl.DataFrame()
    )
    findings = _compile_findings(b, a, b_compiled, a_compiled, fusion, step_time, gpu_ns_per_step)
    return CompileDiff(
        compiled_side=side,
        metrics=metrics,
        fusion_ratio=fusion,
        region_speedups=speedups,
        findings=tuple(findings),
        before=b,
        after=a,
    )


def _compile_findings(
    b: dict[str, Any],
    a: dict[str, Any],
    b_compiled: bool,
    a_compiled: bool,
    fusion: float | None,
    step_time: StepTimeDiff,
    gpu_ns_per_step: tuple[float, float],
) -> list[str]:
    out: list[str] = []
    if fusion is not None:
        out.append(f"fusion: the eager run launches {fusion:.2f}× as many kernels per step as the compiled one")
    compiled_slower = (a_compiled and not b_compiled and step_time.verdict == "slower") or (
        b_compiled and not a_compiled and step_time.verdict == "faster"
    )
    if not compiled_slower:
        return out
    comp, eager = (a, b) if a_compiled else (b, a)
    comp_gpu, eager_gpu = (gpu_ns_per_step[1], gpu_ns_per_step[0]) if a_compiled else gpu_ns_per_step
    out.append("the compiled run is slower; likely causes:")
    if comp.get("compile_ns"):
        out.append(f"  compilation inside the trace: {comp['compile_ns'] / 1e6:.1f} ms")
    if comp.get("recompiles_in_trace") or comp.get("recompiled_frames"):
        out.append("  recompiles (guard failures): see TORCH_LOGS=recompiles")
    if comp.get("graph_break_ops"):
        out.append(f"  graph breaks around: {', '.join(comp['graph_break_ops'][:5])}")
    if (comp.get("launch_api_ns_per_step") or 0) > (eager.get("launch_api_ns_per_step") or 0) or (
        comp.get("host_step_ns") or 0
    ) > (eager.get("host_step_ns") or 0):
        out.append("  more host time per step (dispatch, guards, wrappers)")
    if comp_gpu > eager_gpu:
        out.append("  more GPU kernel time per step: some generated kernels are slower than the library ones")
    return out


# ---- entry point -----------------------------------------------------------------------------


def label_for(path: str) -> str:
    """A short, deterministic label for a trace file: its name without .json/.gz suffixes."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    for suffix in (".gz", ".json", ".pt.trace"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name or "trace"


def _labels(before: Trace, after: Trace, opts: DiffOptions) -> tuple[str, str]:
    b = opts.label_before or label_for(before.meta.path)
    a = opts.label_after or label_for(after.meta.path)
    if b == a:
        b, a = f"{b} (before)", f"{a} (after)"
    return b, a


def diff_traces(before: Trace, after: Trace, opts: DiffOptions | None = None) -> DiffResult:
    """Compare two loaded traces; see the module docstring for how they are aligned."""
    opts = opts or DiffOptions()
    config = opts.config
    b_label, a_label = _labels(before, after, opts)
    b, a = _side(before, b_label, config), _side(after, a_label, config)
    comparable, notes, b_dev, a_dev = _device_notes(b, a)
    step_time = compare_steps(b, a, opts)
    per = "step" if b.kept_steps and a.kept_steps else "trace"
    if per == "trace":
        notes.append("no steps on at least one side: GPU figures are per-trace totals, not per step")
        b_per = a_per = 1
    else:
        b_per, a_per = b.per, a.per
    if len(b.kept_steps) != len(a.kept_steps) and per == "step":
        notes.append(f"step counts differ ({len(b.kept_steps)} vs {len(a.kept_steps)}): figures are per step")

    ops = contributions(_op_frame(b), _op_frame(a), ["op", "input_dims"], b_per, a_per)
    kernels = contributions(_kernel_frame(b), _kernel_frame(a), ["name", "family"], b_per, a_per)
    regions = contributions(_region_frame(b), _region_frame(a), ["region"], b_per, a_per)
    b_k = _kernel_frame(b).filter(pl.col("kind") == "kernel")
    a_k = _kernel_frame(a).filter(pl.col("kind") == "kernel")
    kernel_counts = {
        "before_kernels_per_step": b_k.height / b_per,
        "after_kernels_per_step": a_k.height / a_per,
        "before_gpu_ns_per_step": float(b_k["dur_ns"].sum()) / b_per,
        "after_gpu_ns_per_step": float(a_k["dur_ns"].sum()) / a_per,
    }
    if not comparable:
        notes.append("kernel names and times are compared as recorded; treat per-kernel deltas as indicative")
    top = opts.top_n
    added = tuple(kernels.filter(pl.col("status") == "added").sort("after_ns_per_step", descending=True)["name"].to_list())
    removed = tuple(
        kernels.filter(pl.col("status") == "removed").sort("before_ns_per_step", descending=True)["name"].to_list()
    )
    return DiffResult(
        before_label=b_label,
        after_label=a_label,
        before_path=before.meta.path,
        after_path=after.meta.path,
        verdict=step_time.verdict,
        per=per,
        before_steps=len(b.kept_steps),
        after_steps=len(a.kept_steps),
        before_device=b_dev,
        after_device=a_dev,
        comparable=comparable,
        notes=tuple(notes),
        step_time=step_time,
        kernel_counts=kernel_counts,
        breakdown=_breakdown_table(b, a, config),
        idle_by_cause=_idle_by_cause(b, a, config),
        ops=ops.head(top),
        kernels=kernels.head(top),
        regions=regions.head(top),
        added_kernels=added[:top],
        removed_kernels=removed[:top],
        added_kernel_count=len(added),
        removed_kernel_count=len(removed),
        gpu_delta_ns_per_step=kernel_counts["after_gpu_ns_per_step"] - kernel_counts["before_gpu_ns_per_step"],
        bound=_bound(b, a, config),
        memory=_memory(b, a, config),
        compile=_compile_diff(
            b,
            a,
            step_time,
            regions,
            (kernel_counts["before_kernels_per_step"], kernel_counts["after_kernels_per_step"]),
            (kernel_counts["before_gpu_ns_per_step"], kernel_counts["after_gpu_ns_per_step"]),
            config,
        ),
    )
