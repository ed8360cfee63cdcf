"""Before/after tables of other sections: device time breakdown, idle by cause, peak memory and
bound labels per region."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from traceinsight.analysis.diff.side import Side
from traceinsight.analysis.diff.steps import step_parts
from traceinsight.analysis.sections.bound import BoundResult
from traceinsight.analysis.sections.breakdown import BreakdownResult
from traceinsight.analysis.sections.gaps import GapsResult
from traceinsight.analysis.sections.memory import MemoryResult


@dataclass(frozen=True)
class TableDiff:
    """A before/after table (breakdown, idle causes, memory, bound labels) or why it is missing."""

    available: bool = True
    reason: str | None = None
    table: pl.DataFrame = field(default_factory=pl.DataFrame)
    basis: str = ""


def breakdown_table(before: Side, after: Side) -> TableDiff:
    if before.steps_frame is not None and after.steps_frame is not None:
        table = _delta_table(step_parts(before, "before"), step_parts(after, "after"), "group")
        return TableDiff(table=table.rename({"group": "category"}), basis=KEPT_STEPS_BASIS)
    frames = []
    for side, prefix in ((before, "before"), (after, "after")):
        result, reason = side.section("breakdown", BreakdownResult)
        if result is None:
            return TableDiff(available=False, reason=f"{side.label}: {reason}")
        grouped = (
            # compute / communication / memcpy / memset / idle: the part before the first "_".
            result.by_device.with_columns(group=pl.col("category").cast(pl.String).str.split("_").list.first())
            .group_by("group")
            .agg((pl.col("dur_ns").sum() / side.window_per).alias(f"{prefix}_ns_per_step"))
            .sort("group")  # a fixed order for the float total below
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
    return TableDiff(table=table.rename({"group": "category"}), basis=WINDOW_BASIS)


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


KEPT_STEPS_BASIS = "mean of the kept steps (device step windows)"
WINDOW_BASIS = "whole trace window / profiled steps"


def _idle_in_kept_steps(side: Side, gaps: pl.DataFrame) -> pl.DataFrame:
    """Idle ns per cause inside the kept steps' device windows, per kept step and device: the
    denominator of the step-time table, so no cause can exceed the step it sits in."""
    assert side.steps_frame is not None
    windows = side.steps_frame.select(w_start="device_start_ns", w_end="device_end_ns").drop_nulls()
    devices = max(gaps["device"].n_unique(), 1)
    clipped = (
        gaps.select("device", "start_ns", "end_ns", "cause")
        .join(windows, how="cross")
        .with_columns(
            overlap_ns=(
                pl.min_horizontal("end_ns", "w_end") - pl.max_horizontal("start_ns", "w_start")
            ).clip(lower_bound=0)
        )
        .group_by("cause")
        .agg(idle_ns=pl.col("overlap_ns").sum())
    )
    total = clipped["idle_ns"].sum()
    return clipped.select(
        pl.col("cause").cast(pl.String),
        idle_ns_per_step=pl.col("idle_ns") / (side.per * devices),
        share=pl.col("idle_ns") / total if total else pl.lit(None, dtype=pl.Float64),
    )


# The idle the gaps section leaves out: gaps shorter than its threshold (launch spacing between
# back-to-back kernels, mostly). A row of its own, so that the causes add up to the idle of
# the breakdown table above them.
SHORT_GAPS = "short_gaps"


def _idle_per_step(side: Side, in_steps: bool) -> float | None:
    """The device idle per step (per window without steps) that the breakdown table shows."""
    if in_steps:
        parts = step_parts(side, "side")
        idle = parts.filter(pl.col("group") == "idle")["side_ns_per_step"]
        return float(idle[0]) if idle.len() else None
    result, _ = side.section("breakdown", BreakdownResult)
    if result is None:
        return None
    devices = max(result.by_device["device"].n_unique(), 1) if result.by_device.height else 1
    idle_ns = result.by_device.filter(pl.col("category").cast(pl.String) == "idle")["dur_ns"].sum()
    return float(idle_ns) / (side.window_per * devices)


def _with_short_gaps(per_cause: pl.DataFrame, idle_ns_per_step: float | None) -> pl.DataFrame:
    """``per_cause`` with the idle no gap holds (gaps below the threshold) as its own row, the
    shares taken over the whole idle time."""
    per_cause = per_cause.select("cause", pl.col("idle_ns_per_step").cast(pl.Float64))
    named = float(per_cause["idle_ns_per_step"].sum()) if per_cause.height else 0.0
    if idle_ns_per_step is not None and idle_ns_per_step - named > 0.5:  # below 1 ns: rounding
        short = pl.DataFrame({"cause": [SHORT_GAPS], "idle_ns_per_step": [idle_ns_per_step - named]})
        per_cause = pl.concat([per_cause, short])
    total = float(per_cause["idle_ns_per_step"].sum()) if per_cause.height else 0.0
    return per_cause.with_columns(
        share=pl.col("idle_ns_per_step") / total if total else pl.lit(None, dtype=pl.Float64)
    )


def idle_by_cause(before: Side, after: Side) -> TableDiff:
    in_steps = before.steps_frame is not None and after.steps_frame is not None
    frames = []
    for side, prefix in ((before, "before"), (after, "after")):
        result, reason = side.section("gaps", GapsResult)
        if result is None:
            return TableDiff(available=False, reason=f"{side.label}: {reason}")
        if in_steps:
            per_cause = _idle_in_kept_steps(side, result.gaps)
        else:
            per_cause = result.by_cause.select(
                pl.col("cause").cast(pl.String),
                idle_ns_per_step=pl.col("idle_ns") / side.window_per,
                share=pl.col("share"),
            )
        per_cause = _with_short_gaps(per_cause, _idle_per_step(side, in_steps))
        frames.append(
            per_cause.select(
                "cause",
                pl.col("idle_ns_per_step").alias(f"{prefix}_ns_per_step"),
                pl.col("share").alias(f"{prefix}_share"),
            )
        )
    table = (
        frames[0]
        .join(frames[1], on="cause", how="full", coalesce=True)
        .with_columns(pl.col("before_ns_per_step", "after_ns_per_step").fill_null(0.0))
        .with_columns(delta_ns_per_step=pl.col("after_ns_per_step") - pl.col("before_ns_per_step"))
        .sort(["delta_ns_per_step", "cause"])
    )
    return TableDiff(table=table, basis=KEPT_STEPS_BASIS if in_steps else WINDOW_BASIS)


def _peak_figures(result: MemoryResult) -> dict[str, float]:
    """Peak allocated and reserved bytes per device, from the memory result's ``peaks`` table."""
    return {
        f"{row['device']} {col.removeprefix('peak_').removesuffix('_bytes')} (peak)": float(row[col])
        for row in result.peaks.iter_rows(named=True)
        for col in ("peak_allocated_bytes", "peak_reserved_bytes")
        if row[col] is not None
    }


def memory_table(before: Side, after: Side) -> TableDiff:
    peaks = []
    for side in (before, after):
        result, reason = side.section("memory", MemoryResult)
        if result is None:
            return TableDiff(available=False, reason=f"{side.label}: {reason}")
        peaks.append(_peak_figures(result))
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


def _bound_labels(result: BoundResult) -> pl.DataFrame | None:
    regions = result.regions
    if regions.height == 0:
        return None
    # ProfilerStep numbers differ between runs; their labels are compared as one region.
    region = pl.col("name").cast(pl.String).str.replace(r"^ProfilerStep#\d+$", "ProfilerStep")
    return regions.group_by(region.alias("region")).agg(
        pl.col("label").cast(pl.String).mode().sort().first().alias("label")
    )


def bound_table(before: Side, after: Side) -> TableDiff:
    labels = []
    for side in (before, after):
        result, reason = side.section("bound", BoundResult)
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
