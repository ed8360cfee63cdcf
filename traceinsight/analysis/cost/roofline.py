"""Roofline arithmetic: each kernel's ideal compute and memory time on the device, sums per
group, achieved TFLOP/s and TB/s, arithmetic intensity, the ridge point and % of roofline, and
the compute/memory label that follows (with a confidence and its reason)."""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.classify import MATRIX_FAMILIES
from traceinsight.analysis.cost import model as costmodel
from traceinsight.analysis.device import peaks as devices
from traceinsight.trace.model import Trace

MIN_COST_COVERAGE = 0.5  # below this share of kernel time with known costs, fall back to families
GOOD_COST_COVERAGE = 0.8
NEAR_RIDGE_RATIO = 1.5  # compute vs memory time closer than this: near the ridge point
FAR_BELOW_ROOFLINE_PCT = 20.0

# Families whose work is matrix math (compute-heavy), and those that stream memory.
COMPUTE_FAMILIES = MATRIX_FAMILIES
MEMORY_FAMILIES = (
    "elementwise",
    "reduction",
    "normalization",
    "softmax",
    "copy",
    "embedding",
    "optimizer",
    "memcpy",
    "memset",
)
TENSOR_CLASSES = ("tf32", "bf16", "fp16", "fp8", "int8")
NO_PEAKS_REASON = (
    "unknown: the device peaks (FLOP/s and memory bandwidth) are missing, so compute/memory "
    "cannot be judged; give --peak-tflops and --peak-bw or --devices FILE.toml"
)


def kernel_work(trace: Trace, peaks: devices.DevicePeaks | None) -> pl.DataFrame:
    """GPU work with costs, ideal compute/memory times on this device and a family guess."""
    costs = costmodel.kernel_costs(trace)
    work = trace.kernels.select(
        "id",
        pl.col("name").cast(pl.String),
        pl.col("kind").cast(pl.String),
        "device",
        "ts_ns",
        "end_ns",
        "dur_ns",
        "op_id",
        "launch_ts_ns",
        (pl.col("launch_end_ns") - pl.col("launch_ts_ns")).alias("launch_ns"),
    ).join(costs, on="id", how="left")
    classes = list(devices.DTYPE_CLASSES)
    peak_map = {c: (peaks.peak_tflops(c) if peaks else None) for c in classes}
    bw = peaks.mem_bw_tbps if peaks else None
    peak_tflops = pl.col("dtype_class").replace_strict(peak_map, default=None, return_dtype=pl.Float64)
    # TFLOP/s = 1e3 FLOP/ns and TB/s = 1e3 B/ns: ideal times in ns.
    tc = pl.when(peak_tflops > 0).then(pl.col("flops") / (peak_tflops * 1e3))
    tm = pl.lit(None, dtype=pl.Float64) if not bw else pl.col("bytes") / (bw * 1e3)
    family = pl.col("family")
    guess = (
        pl.when(family.is_in(list(COMPUTE_FAMILIES)))
        .then(pl.lit("compute"))
        .when(family.is_in(list(MEMORY_FAMILIES)))
        .then(pl.lit("memory"))
    )
    return work.with_columns(
        tc_ns=tc,
        tm_ns=tm,
        peak_tflops=peak_tflops,
        guess=guess,
        costed=pl.col("cost_source").is_not_null(),
        short=(pl.col("launch_ns") > pl.col("dur_ns")),
    )


def aggregate(pairs: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Sums over each group's kernels: counts, times, costs, ideal times, family guesses."""
    costed = pl.col("costed")
    return pairs.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("kernels"),
        pl.col("dur_ns").sum().cast(pl.Int64).alias("kernel_ns"),
        pl.col("launch_ns").sum().cast(pl.Int64).alias("launch_ns"),
        pl.col("end_ns").max().alias("last_end_ns"),
        (pl.col("short").sum() / pl.col("short").count() * 100.0).alias("short_kernel_pct"),
        pl.col("flops").filter(costed).sum().alias("flops"),
        pl.col("bytes").filter(costed).sum().alias("bytes"),
        pl.col("tc_ns").filter(costed).sum().alias("tc_ns"),
        pl.col("tm_ns").filter(costed).sum().alias("tm_ns"),
        pl.col("dur_ns").filter(costed).sum().alias("costed_ns"),
        pl.col("dur_ns").filter(pl.col("guess") == "compute").sum().alias("guess_compute_ns"),
        pl.col("dur_ns").filter(pl.col("guess") == "memory").sum().alias("guess_memory_ns"),
        # The compute class behind most of the ideal compute time names the ridge point.
        pl.col("dtype_class").filter(costed).sort_by(pl.col("tc_ns").filter(costed)).last().alias("dtype_class"),
        pl.col("peak_tflops").filter(costed).sort_by(pl.col("tc_ns").filter(costed)).last().alias("peak_tflops"),
    )


def roofline_columns(bw_tbps: float | None) -> list[pl.Expr]:
    """Achieved rates, intensity, ridge and % of roofline from the aggregated sums.

    Rates are over the run time of the kernels whose costs are known, so that a partly
    costed region does not read as slow. Without peak figures (``bw_tbps`` None) the shares
    of peak are null: a roofline that is not known is not 0 % of it.
    """
    busy = pl.col("costed_ns")
    flops, nbytes, tc, tm = pl.col("flops"), pl.col("bytes"), pl.col("tc_ns"), pl.col("tm_ns")
    costed_ns = pl.col("costed_ns")
    # Figures from a small costed minority (say, a memset) would misrepresent the whole.
    have = (costed_ns > 0) & ((flops > 0) | (nbytes > 0)) & (costed_ns >= MIN_COST_COVERAGE * pl.col("kernel_ns"))
    known = pl.lit(bool(bw_tbps))
    ridge = (
        pl.when(have & (tc > 0) & pl.lit(bool(bw_tbps)))
        .then(flops / tc / pl.lit((bw_tbps or 1.0) * 1e3))
        .otherwise(pl.col("peak_tflops") / pl.lit(bw_tbps or float("nan")))
    )
    return [
        pl.when(have & (busy > 0)).then(flops / busy / 1e3).alias("tflops"),
        pl.when(have & (busy > 0)).then(nbytes / busy / 1e3).alias("tbps"),
        pl.when(have & (nbytes > 0)).then(flops / nbytes).alias("intensity"),
        pl.when(have & ridge.is_finite()).then(ridge).alias("ridge"),
        pl.when(have & known).then(pl.max_horizontal(tc.fill_null(0), tm.fill_null(0)) / costed_ns * 100.0).alias("pct_of_roofline"),
        pl.when(have & known).then(tc / costed_ns * 100.0).alias("pct_of_peak_flops"),
        pl.when(have & known).then(tm / costed_ns * 100.0).alias("pct_of_peak_bw"),
        pl.when(pl.col("kernel_ns") > 0).then(costed_ns / pl.col("kernel_ns") * 100.0).alias("cost_coverage_pct"),
    ]


def above_peak_reason(l2_bytes: int | None) -> pl.Expr:
    """Why a share of peak reads above 100 % (null when it does not).

    The roofline's memory time is ideal DRAM traffic at the HBM bandwidth. Kernels whose
    data fits in L2 (inputs written just before, small tensors re-read) are served from the
    cache at several times that bandwidth, so they can pass the HBM ceiling; the share is
    kept as measured and this reason says so. Above the compute peak there is no cache to
    blame: the FLOP count assumed more work than the kernel did.
    """
    per_kernel = pl.col("bytes") / pl.col("kernels").cast(pl.Float64).clip(lower_bound=1)
    fits = pl.lit(False) if not l2_bytes else per_kernel <= l2_bytes
    mb = (per_kernel / 1e6).round(1).cast(pl.String)
    l2_mb = f"{(l2_bytes or 0) / 1024**2:.0f}"
    over_bw = pl.col("pct_of_peak_bw").fill_null(0) > 100.0
    over_flops = pl.col("pct_of_peak_flops").fill_null(0) > 100.0
    return (
        pl.when(over_flops)
        .then(
            pl.lit("above the ") + pl.col("dtype_class").fill_null("?") + pl.lit(" compute peak: the FLOP count assumes more work "
            "than the kernels did (e.g. a masked or sparse path), or they ran on a faster unit than that class")
        )
        .when(over_bw & fits)
        .then(
            pl.lit("cache-resident: ") + mb + pl.lit(f" MB per kernel fits in the {l2_mb} MB L2, which serves re-reads faster "
            "than HBM; the roofline counts ideal DRAM traffic at HBM bandwidth")
        )
        .when(over_bw)
        .then(pl.lit("above HBM bandwidth: part of the counted traffic was served from cache (inputs read twice or "
                     "written just before) or the byte count over-states what the kernels moved"))
        .when(pl.col("pct_of_roofline").fill_null(0) > 100.0)
        .then(pl.lit("above the roofline by the cost model's estimate"))
        .alias("above_peak_reason")
    )


def pct_text(expr: pl.Expr) -> pl.Expr:
    return expr.round(0).cast(pl.Int64).cast(pl.String) + pl.lit("%")


def roofline_label(roofline_ok: bool) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """(label, confidence score 0..2, reason) of busy work, from its roofline position."""
    tc, tm = pl.col("tc_ns").fill_null(0), pl.col("tm_ns").fill_null(0)
    coverage = pl.col("cost_coverage_pct").fill_null(0) / 100.0
    by_cost = coverage >= MIN_COST_COVERAGE
    guess_c, guess_m = pl.col("guess_compute_ns").fill_null(0), pl.col("guess_memory_ns").fill_null(0)
    has_guess = (guess_c + guess_m) > 0
    cost_label = pl.when(tc >= tm).then(pl.lit("compute")).otherwise(pl.lit("memory"))
    guess_label = pl.when(guess_c >= guess_m).then(pl.lit("compute")).otherwise(pl.lit("memory"))
    usable = pl.lit(roofline_ok) & by_cost & ((tc + tm) > 0)
    # Without device peaks no share of the roofline exists: the label is "unknown", never a
    # family guess (a guess would pass for a measurement in findings and headlines).
    label = (
        pl.when(pl.lit(not roofline_ok))
        .then(pl.lit("unknown"))
        .when(usable)
        .then(cost_label)
        .when(has_guess)
        .then(guess_label)
        .otherwise(pl.lit("unclassified"))
    )
    ratio = pl.max_horizontal(tc, tm) / pl.min_horizontal(tc, tm).clip(lower_bound=1e-9)
    roof = pl.col("pct_of_roofline").fill_null(0)
    score = (
        pl.lit(2)
        - (coverage < GOOD_COST_COVERAGE).cast(pl.Int64)
        - (ratio < NEAR_RIDGE_RATIO).cast(pl.Int64)
        - (roof < FAR_BELOW_ROOFLINE_PCT).cast(pl.Int64)
    )
    score = pl.when(usable).then(score).otherwise(pl.lit(0))
    position = (
        pl.when(tc >= tm)
        .then(pl.lit("intensity ") + pl.col("intensity").round(1).cast(pl.String) + pl.lit(" FLOP/B ≥ ridge ") + pl.col("ridge").round(1).cast(pl.String))
        .otherwise(pl.lit("intensity ") + pl.col("intensity").round(1).cast(pl.String) + pl.lit(" FLOP/B < ridge ") + pl.col("ridge").round(1).cast(pl.String))
    )
    caveats = pl.concat_str(
        [
            pl.when(coverage < GOOD_COST_COVERAGE).then(pl.lit("; costs known for ") + pct_text(coverage * 100) + pl.lit(" of kernel time")),
            pl.when(ratio < NEAR_RIDGE_RATIO).then(pl.lit("; close to the ridge point")),
            pl.when(roof < FAR_BELOW_ROOFLINE_PCT).then(
                pl.lit("; at ") + pct_text(roof) + pl.lit(" of roofline: latency/occupancy-limited more than throughput-limited")
            ),
        ],
        ignore_nulls=True,
    )
    reason = (
        pl.when(pl.lit(not roofline_ok))
        .then(pl.lit(NO_PEAKS_REASON))
        .when(usable)
        .then(position + pl.lit(", ") + pct_text(roof) + pl.lit(" of roofline") + caveats)
        .when(has_guess)
        .then(
            pl.lit("guessed from kernel families (gemm/conv/attention → compute; elementwise/reduction/normalization/copy → memory): ")
            + pl.lit("no op shapes for ") + pct_text((1 - coverage) * 100) + pl.lit(" of kernel time")
        )
        .otherwise(pl.lit("no FLOP/byte estimate and no recognisable kernel family"))
    )
    return label, score, reason


def confidence_text(score: pl.Expr) -> pl.Expr:
    return score.clip(0, 2).replace_strict({0: "low", 1: "medium", 2: "high"}, return_dtype=pl.String)
