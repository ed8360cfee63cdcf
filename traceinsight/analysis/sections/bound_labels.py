"""Labelling rules: a mostly idle region is overhead/host/sync/data-bound by its dominant idle
cause, a busy one compute- or memory-bound by its roofline position; each label with a
confidence, a reason and the evidence (counters included)."""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.cost.roofline import confidence_text, pct_text, roofline_label
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.sections.bound_counters import counter_adjustment

# Gap cause (gaps analysis) → label. "untraced" means the launching thread recorded nothing:
# the host was busy with work the profiler did not see, which is host time all the same.
CAUSE_LABEL = {
    "allocator": "overhead",
    "launch_overhead": "overhead",
    "host_compute": "host",
    "python": "host",
    "untraced": "host",
    "sync": "sync",
    "data_loading": "data",
    "device_wait": "idle",
}
SHORT_IDLE = "launch_overhead"  # idle made of gaps below the threshold
# Idle caused by a one-time first call (analysis/lib/first_calls.py): left out of the window a
# label is judged on, so initialisation does not read as the steady state's overhead.
FIRST_CALL_CAUSE = "first_call"

IDLE_SHARE_THRESHOLD = 0.5  # the GPU is "mostly idle" above this share of the window
SHORT_KERNEL_IDLE_SHARE = 0.3  # with this much idle, kernels shorter than launches mean overhead
SHORT_KERNEL_SHARE = 0.5


def idle_causes(windows: pl.DataFrame, gaps: pl.DataFrame) -> pl.DataFrame:
    """Per region: idle time in reported gaps by cause (a column ``<cause>_ns`` each, and
    ``first_call_ns`` for gaps a one-time first call caused)."""
    out = windows.select("region_id", "device", "start_ns", "end_ns")
    causes = [*sorted(CAUSE_LABEL), FIRST_CALL_CAUSE]
    for cause in causes:
        cover = gaps.filter(pl.col("cause") == cause).select("device", "start_ns", "end_ns")
        out = intervals.covered_ns(out, cover, by=["device"], out=f"{cause}_ns")
    return out.drop("device", "start_ns", "end_ns")


def label_regions(
    frame: pl.DataFrame, *, roofline_ok: bool, gaps_ok: bool
) -> pl.DataFrame:
    causes = sorted(CAUSE_LABEL)
    cause_cols = [f"{c}_ns" for c in causes]
    first_ns = f"{FIRST_CALL_CAUSE}_ns"
    if first_ns not in frame.columns:
        frame = frame.with_columns(pl.lit(0, dtype=pl.Int64).alias(first_ns))
    # The label is judged on the window without the idle a one-time first call caused.
    set_apart = pl.col(first_ns).fill_null(0)
    dur = pl.col("dur_ns") - set_apart
    idle = (pl.col("idle_ns") - set_apart).clip(lower_bound=0)
    idle_share = pl.when(dur > 0).then(idle / dur).otherwise(0.0)
    # Idle that no reported gap covers is made of sub-threshold slices between launches.
    frame = frame.with_columns(
        (idle - pl.sum_horizontal(cause_cols)).clip(lower_bound=0).alias("short_idle_ns"),
    ).with_columns(pl.col(f"{SHORT_IDLE}_ns") + pl.col("short_idle_ns"))
    top_ns = pl.max_horizontal(cause_cols)
    dominant = pl.coalesce([pl.when(pl.col(f"{c}_ns") == top_ns).then(pl.lit(c)) for c in causes])
    frame = frame.with_columns(
        idle_share.alias("_idle_share"),
        pl.when(idle > 0).then(dominant).alias("idle_cause"),
        pl.when(idle > 0).then(top_ns / idle * 100.0).alias("idle_cause_pct"),
    )
    mostly_idle = pl.col("_idle_share") >= IDLE_SHARE_THRESHOLD
    # Without gap causes, kernels shorter than their launch calls are the overhead signature.
    short_kernels = (
        pl.lit(not gaps_ok)
        & (pl.col("_idle_share") >= SHORT_KERNEL_IDLE_SHARE)
        & (pl.col("short_kernel_pct").fill_null(0) >= SHORT_KERNEL_SHARE * 100)
    )
    cause_label = pl.col("idle_cause").replace_strict(CAUSE_LABEL, default="idle", return_dtype=pl.String)
    roof_label, roof_score, roof_reason = roofline_label(roofline_ok)
    idle_txt = pl.lit("GPU idle ") + pct_text(pl.col("_idle_share") * 100) + pl.lit(" of the window")
    cause_txt = pl.lit(", mostly ") + pl.col("idle_cause").fill_null("") + pl.lit(" (") + pct_text(pl.col("idle_cause_pct").fill_null(0)) + pl.lit(" of idle)")
    short_txt = pl.lit("; ") + pct_text(pl.col("short_kernel_pct").fill_null(0)) + pl.lit(" of kernels shorter than their launch call")
    cause_share = pl.col("idle_cause_pct").fill_null(0) / 100.0
    idle_score = (
        pl.when((pl.col("_idle_share") >= 0.7) & (cause_share >= 0.6)).then(2)
        .when(cause_share >= 0.4).then(1)
        .otherwise(0)
        - (pl.col("idle_cause") == "untraced").fill_null(False).cast(pl.Int64)
    )
    label = (
        pl.when(pl.col("dur_ns") <= 0).then(pl.lit("unclassified"))
        .when(mostly_idle & pl.lit(gaps_ok)).then(cause_label)
        .when(mostly_idle & short_kernels).then(pl.lit("overhead"))
        .when(mostly_idle).then(pl.lit("idle"))
        .when(short_kernels).then(pl.lit("overhead"))
        .when(pl.col("kernels") == 0).then(pl.lit("unclassified"))
        .otherwise(roof_label)
    )
    score = (
        pl.when(pl.col("dur_ns") <= 0).then(0)
        .when(mostly_idle & pl.lit(gaps_ok)).then(idle_score)
        .when(mostly_idle & short_kernels).then(1)
        .when(mostly_idle).then(0)
        .when(short_kernels).then(1)
        .when(pl.col("kernels") == 0).then(0)
        .otherwise(roof_score - (pl.col("_idle_share") >= SHORT_KERNEL_IDLE_SHARE).cast(pl.Int64))
    )
    reason = (
        pl.when(pl.col("dur_ns") <= 0).then(pl.lit("empty window"))
        .when(mostly_idle & pl.lit(gaps_ok)).then(
            idle_txt + cause_txt
            + pl.when(pl.col("idle_cause") == "untraced").then(pl.lit("; the host ran code the profiler did not record")).otherwise(pl.lit(""))
        )
        .when(mostly_idle & short_kernels).then(idle_txt + short_txt)
        .when(mostly_idle).then(idle_txt + pl.lit("; idle causes unavailable (gap analysis missing)"))
        .when(short_kernels).then(idle_txt + short_txt)
        .when(pl.col("kernels") == 0).then(
            pl.lit("launched no GPU work; the GPU was busy ") + pct_text(pl.col("busy_pct")) + pl.lit(" of the window with work launched earlier")
        )
        .otherwise(
            pl.lit("GPU busy ") + pct_text((1 - pl.col("_idle_share")) * 100) + pl.lit("; ") + roof_reason
            + pl.when(pl.col("_idle_share") >= SHORT_KERNEL_IDLE_SHARE)
            .then(pl.lit("; but GPU idle ") + pct_text(pl.col("_idle_share") * 100) + pl.lit(" of the window") + cause_txt)
            .otherwise(pl.lit(""))
        )
    )
    reason = reason + (
        pl.when(set_apart > 0)
        .then(pl.lit("; ") + (set_apart / 1e6).round(1).cast(pl.String) + pl.lit(" ms idle behind a one-time first call left out (see first_calls)"))
        .otherwise(pl.lit(""))
    )
    frame = frame.with_columns(label.alias("label"), score.alias("_score"), reason.alias("reason"))
    delta, counter_txt = counter_adjustment(pl.col("label"))
    evidence = pl.concat_str(
        [
            pl.lit("window ") + (pl.col("dur_ns") / 1e6).round(3).cast(pl.String) + pl.lit(" ms, busy ") + pct_text(pl.col("busy_pct")),
            pl.when(pl.col("kernels") > 0).then(
                pl.col("kernels").cast(pl.String) + pl.lit(" kernels, ") + (pl.col("kernel_ns") / 1e6).round(3).cast(pl.String) + pl.lit(" ms GPU")
            ),
            pl.when(pl.col("tflops").is_not_null()).then(
                pl.col("tflops").round(1).cast(pl.String) + pl.lit(" TFLOP/s, ") + pl.col("tbps").round(2).cast(pl.String) + pl.lit(" TB/s")
            ),
            counter_txt,
        ],
        separator="; ",
        ignore_nulls=True,
    )
    return frame.with_columns(
        confidence_text(pl.col("_score") + delta).alias("confidence"),
        evidence.alias("evidence"),
    )
