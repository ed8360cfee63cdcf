"""Is a region, op or kernel overhead-, host-, sync-, data-, memory- or compute-bound?

For every region (ProfilerStep, record_function annotation, compiled graph call, nn.Module
scope, the largest top-level ops, and the whole trace) this measures, on the device timeline:

- the window: from the region's host start to the end of the last GPU work launched inside
  it (or the host end, if later);
- how busy the GPU was in that window, and what the host was doing in the idle part (the
  causes the gap analysis assigns to idle gaps; idle slices shorter than the gap threshold
  are the back-to-back launch pattern and count as launch overhead);
- FLOPs and bytes of the region's own kernels (from the cost model), achieved TFLOP/s and
  TB/s, arithmetic intensity, the ridge point of the device for the dtypes used, and the
  share of the roofline reached;
- the NVML/GPM counters sampled inside the window.

The label follows from that: a mostly idle GPU is ``overhead``, ``host``, ``sync`` or
``data`` by the dominant idle cause; a busy one is ``compute`` or ``memory`` by where its
work sits against the ridge point. Each label carries the evidence and a confidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceinsight.analysis import costmodel, devices, intervals
from traceinsight.analysis.base import AnalysisConfig, AnalysisSpec, Inputs, Result
from traceinsight.analysis.gaps import GapsResult
from traceinsight.analysis.timeline import analysis_window, busy_intervals
from traceinsight.trace.model import Trace
from traceinsight.trace.schema import PROFILER_STEP_PREFIX

LABELS = ("overhead", "host", "sync", "data", "idle", "compute", "memory", "unclassified")
# Gap cause (gaps analysis) → label. "untraced" means the launching thread recorded nothing:
# the host was busy with work the profiler did not see, which is host time all the same.
CAUSE_LABEL = {
    "launch_overhead": "overhead",
    "host_compute": "host",
    "python": "host",
    "untraced": "host",
    "sync": "sync",
    "data_loading": "data",
    "device_wait": "idle",
}
SHORT_IDLE = "launch_overhead"  # idle made of gaps below the threshold

IDLE_SHARE_THRESHOLD = 0.5  # the GPU is "mostly idle" above this share of the window
SHORT_KERNEL_IDLE_SHARE = 0.3  # with this much idle, kernels shorter than launches mean overhead
SHORT_KERNEL_SHARE = 0.5
MIN_COST_COVERAGE = 0.5  # below this share of kernel time with known costs, fall back to families
GOOD_COST_COVERAGE = 0.8
NEAR_RIDGE_RATIO = 1.5  # compute vs memory time closer than this: near the ridge point
FAR_BELOW_ROOFLINE_PCT = 20.0
MAX_OP_REGIONS = 100
COUNTER_MIN_INSIDE = 0.75  # a counter sample counts for a region when most of its window is inside

COMPUTE_FAMILIES = ("gemm", "conv", "attention")
MEMORY_FAMILIES = ("elementwise", "reduction", "copy", "memcpy", "memset")
TENSOR_CLASSES = ("tf32", "bf16", "fp16", "fp8", "int8")

GPM_FAMILY = "gpm"
GPM_LAG_WINDOWS = 1.0  # how many sampling windows GPM values trail their timestamps
COUNTER_SERIES = {
    ("gpm", "tensor_util_pct"): "tensor_util_pct",
    ("gpm", "dram_bw_util_pct"): "dram_bw_util_pct",
    ("gpm", "sm_util_pct"): "sm_util_pct",
    ("nvml.utilization", "gpu_pct"): "gpu_util_pct",
}

REGION_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "name": pl.String,
    "kind": pl.String,
    "region_id": pl.Int64,
    "device": pl.Int64,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "dur_ns": pl.Int64,
    "host_dur_ns": pl.Int64,
    "label": pl.String,
    "confidence": pl.String,
    "reason": pl.String,
    "evidence": pl.String,
    "busy_pct": pl.Float64,
    "idle_ns": pl.Int64,
    "idle_cause": pl.String,
    "idle_cause_pct": pl.Float64,
    "kernels": pl.Int64,
    "kernel_ns": pl.Int64,
    "short_kernel_pct": pl.Float64,
    "flops": pl.Float64,
    "bytes": pl.Float64,
    "tflops": pl.Float64,
    "tbps": pl.Float64,
    "intensity": pl.Float64,
    "ridge": pl.Float64,
    "pct_of_roofline": pl.Float64,
    "pct_of_peak_flops": pl.Float64,
    "pct_of_peak_bw": pl.Float64,
    "cost_coverage_pct": pl.Float64,
    "tensor_util_pct": pl.Float64,
    "dram_bw_util_pct": pl.Float64,
    "sm_util_pct": pl.Float64,
    "gpu_util_pct": pl.Float64,
}

TABLE_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "name": pl.String,
    "shapes": pl.String,
    "device": pl.Int64,
    "family": pl.String,
    "calls": pl.Int64,
    "kernels": pl.Int64,
    "kernel_ns": pl.Int64,
    "launch_ns": pl.Int64,
    "label": pl.String,
    "confidence": pl.String,
    "reason": pl.String,
    "flops": pl.Float64,
    "bytes": pl.Float64,
    "tflops": pl.Float64,
    "tbps": pl.Float64,
    "intensity": pl.Float64,
    "ridge": pl.Float64,
    "pct_of_roofline": pl.Float64,
    "dtype_class": pl.String,
    "cost_source": pl.String,
}


@dataclass(frozen=True)
class BoundResult(Result):
    name = "bound"
    device_name: str | None = None
    peaks: dict[str, Any] | None = None
    roofline_available: bool = False
    roofline_reason: str | None = None
    gap_causes_available: bool = False
    gap_reason: str | None = None
    gap_threshold_ns: int = 0
    cost_coverage_pct: float | None = None
    regions: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=REGION_COLUMNS))
    ops: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=TABLE_COLUMNS))
    kernels: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=TABLE_COLUMNS))
    notes: tuple[str, ...] = ()

    def to_polars(self) -> pl.DataFrame:
        return self.regions

    def table(self, by: str) -> pl.DataFrame:
        if by == "region":
            return self.regions
        if by == "op":
            return self.ops
        if by == "kernel":
            return self.kernels
        raise ValueError(f"unknown grouping {by!r}; choose region, op or kernel")


# ---- peaks and per-kernel costs --------------------------------------------------------


def _primary_device(trace: Trace) -> int | None:
    busiest = (
        trace.kernels.filter(pl.col("device").is_not_null())
        .group_by("device")
        .agg(pl.col("dur_ns").sum())
        .sort(["dur_ns", "device"], descending=[True, False])
    )
    return int(busiest["device"][0]) if busiest.height else None


def _peaks_dict(peaks: devices.DevicePeaks) -> dict[str, Any]:
    return {
        "key": peaks.key,
        "name": peaks.name,
        "origin": peaks.origin,
        "mem_bw_tbps": peaks.mem_bw_tbps,
        "tflops": dict(peaks.tflops),
        "sources": dict(peaks.sources),
    }


def _kernel_frame(trace: Trace, peaks: devices.DevicePeaks | None) -> pl.DataFrame:
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
        pl.when(family.is_in(list(COMPUTE_FAMILIES)) | (pl.col("subfamily") == "template"))
        .then(pl.lit("compute"))
        .when(family.is_in(list(MEMORY_FAMILIES)) | (family == "triton"))
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


# ---- regions ---------------------------------------------------------------------------


def _named_regions(trace: Trace) -> pl.DataFrame:
    ev = trace.events
    name = pl.col("name").cast(pl.String)
    kind = pl.col("kind").cast(pl.String)
    compiled = (
        ((kind == "user_annotation") & name.str.starts_with("## Call CompiledFxGraph"))
        | ((kind == "cpu_op") & name.is_in(["CompiledFunction", "CompiledFunctionBackward"]))
        | name.str.starts_with("Torch-Compiled Region")
    )
    region_kind = (
        pl.when((kind == "user_annotation") & name.str.starts_with(PROFILER_STEP_PREFIX))
        .then(pl.lit("step"))
        .when(compiled)
        .then(pl.lit("compiled"))
        .when(kind == "user_annotation")
        .then(pl.lit("annotation"))
        .when((kind == "python") & name.str.starts_with("nn.Module:"))
        .then(pl.lit("module"))
    )
    return (
        ev.with_columns(region_kind.alias("rkind"))
        .filter(pl.col("rkind").is_not_null() & (pl.col("dur_ns") > 0))
        .select(
            pl.col("id").alias("region_id"),
            name.alias("name"),
            pl.col("rkind").alias("kind"),
            pl.col("ts_ns").alias("start_ns"),
            pl.col("end_ns").alias("host_end_ns"),
        )
    )


def _top_op_regions(trace: Trace) -> tuple[pl.DataFrame, int]:
    """Top-level ops that launched GPU work, the ones with the most GPU time first."""
    tops = (
        trace.kernels.filter(pl.col("top_op_id").is_not_null())
        .group_by("top_op_id")
        .agg(pl.col("dur_ns").sum().alias("gpu_ns"))
        .sort(["gpu_ns", "top_op_id"], descending=[True, False])
    )
    total = tops.height
    keep = tops.head(MAX_OP_REGIONS).select(pl.col("top_op_id").alias("region_id"))
    regions = trace.events.join(keep, left_on="id", right_on="region_id", how="inner").select(
        pl.col("id").alias("region_id"),
        pl.col("name").cast(pl.String).alias("name"),
        pl.lit("op").alias("kind"),
        pl.col("ts_ns").alias("start_ns"),
        pl.col("end_ns").alias("host_end_ns"),
    )
    return regions, max(total - MAX_OP_REGIONS, 0)


def _regions(trace: Trace) -> tuple[pl.DataFrame, int]:
    lo, hi = analysis_window(trace)
    whole = pl.DataFrame(
        {"region_id": [-1], "name": ["(whole trace)"], "kind": ["trace"], "start_ns": [lo], "host_end_ns": [hi]},
        schema={"region_id": pl.Int64, "name": pl.String, "kind": pl.String, "start_ns": pl.Int64, "host_end_ns": pl.Int64},
    )
    ops, left_out = _top_op_regions(trace)
    frames = [whole, _named_regions(trace), ops]
    # The same span can be recorded twice (e.g. a compiled region as op and as annotation).
    regions = pl.concat([f.cast(whole.schema) for f in frames]).unique(  # type: ignore[arg-type]
        ["name", "start_ns", "host_end_ns"], keep="first", maintain_order=True
    )
    return regions, left_out


def _assign(regions: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """(region, kernel) pairs: GPU work whose launch call started inside the region's host span."""
    launched = work.filter(pl.col("launch_ts_ns").is_not_null())
    if launched.height == 0 or regions.height == 0:
        return pl.DataFrame(schema={"region_id": pl.Int64} | dict(work.schema))
    return regions.select("region_id", "start_ns", "host_end_ns").join_where(
        launched,
        pl.col("launch_ts_ns") >= pl.col("start_ns"),
        pl.col("launch_ts_ns") < pl.col("host_end_ns"),
    ).drop("start_ns", "host_end_ns")


def _aggregate(pairs: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
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


def _roofline_columns(bw_tbps: float | None) -> list[pl.Expr]:
    """Achieved rates, intensity, ridge and % of roofline from the aggregated sums.

    Rates are over the run time of the kernels whose costs are known, so that a partly
    costed region does not read as slow.
    """
    busy = pl.col("costed_ns")
    flops, nbytes, tc, tm = pl.col("flops"), pl.col("bytes"), pl.col("tc_ns"), pl.col("tm_ns")
    costed_ns = pl.col("costed_ns")
    # Figures from a small costed minority (say, a memset) would misrepresent the whole.
    have = (costed_ns > 0) & ((flops > 0) | (nbytes > 0)) & (costed_ns >= MIN_COST_COVERAGE * pl.col("kernel_ns"))
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
        pl.when(have).then(pl.max_horizontal(tc.fill_null(0), tm.fill_null(0)) / costed_ns * 100.0).alias("pct_of_roofline"),
        pl.when(have).then(tc / costed_ns * 100.0).alias("pct_of_peak_flops"),
        pl.when(have).then(tm / costed_ns * 100.0).alias("pct_of_peak_bw"),
        pl.when(pl.col("kernel_ns") > 0).then(costed_ns / pl.col("kernel_ns") * 100.0).alias("cost_coverage_pct"),
    ]


def _pct(expr: pl.Expr) -> pl.Expr:
    return expr.round(0).cast(pl.Int64).cast(pl.String) + pl.lit("%")


def _roofline_label(roofline_ok: bool) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """(label, confidence score 0..2, reason) of busy work, from its roofline position."""
    tc, tm = pl.col("tc_ns").fill_null(0), pl.col("tm_ns").fill_null(0)
    coverage = pl.col("cost_coverage_pct").fill_null(0) / 100.0
    by_cost = coverage >= MIN_COST_COVERAGE
    guess_c, guess_m = pl.col("guess_compute_ns").fill_null(0), pl.col("guess_memory_ns").fill_null(0)
    has_guess = (guess_c + guess_m) > 0
    cost_label = pl.when(tc >= tm).then(pl.lit("compute")).otherwise(pl.lit("memory"))
    guess_label = pl.when(guess_c >= guess_m).then(pl.lit("compute")).otherwise(pl.lit("memory"))
    usable = pl.lit(roofline_ok) & by_cost & ((tc + tm) > 0)
    label = (
        pl.when(usable)
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
            pl.when(coverage < GOOD_COST_COVERAGE).then(pl.lit("; costs known for ") + _pct(coverage * 100) + pl.lit(" of kernel time")),
            pl.when(ratio < NEAR_RIDGE_RATIO).then(pl.lit("; close to the ridge point")),
            pl.when(roof < FAR_BELOW_ROOFLINE_PCT).then(
                pl.lit("; at ") + _pct(roof) + pl.lit(" of roofline: latency/occupancy-limited more than throughput-limited")
            ),
        ],
        ignore_nulls=True,
    )
    reason = (
        pl.when(usable)
        .then(position + pl.lit(", ") + _pct(roof) + pl.lit(" of roofline") + caveats)
        .when(has_guess)
        .then(
            pl.lit("guessed from kernel families (gemm/conv/attention → compute; elementwise/reduction/copy/Triton → memory): ")
            + (
                pl.lit("no device peaks")
                if not roofline_ok
                else pl.lit("no op shapes for ") + _pct((1 - coverage) * 100) + pl.lit(" of kernel time")
            )
        )
        .when(pl.lit(not roofline_ok))
        .then(pl.lit("roofline unavailable: no peak figures for this device"))
        .otherwise(pl.lit("no FLOP/byte estimate and no recognisable kernel family"))
    )
    return label, score, reason


def _counter_windows(trace: Trace) -> pl.DataFrame:
    """Each sample of the counters used here with the window it averages (previous sample → it)."""
    schema = {"device": pl.Int64, "metric": pl.String, "c_start": pl.Int64, "c_end": pl.Int64, "value": pl.Float64}
    wanted = pl.DataFrame(
        [(n, s, m) for (n, s), m in COUNTER_SERIES.items()],
        schema={"_name": pl.String, "_series": pl.String, "metric": pl.String},
        orient="row",
    )
    picked = trace.counters.with_columns(
        pl.col("name").cast(pl.String).alias("_name"), pl.col("series").cast(pl.String).alias("_series")
    ).join(wanted, on=["_name", "_series"], how="inner")
    if picked.height == 0:
        return pl.DataFrame(schema=schema)
    frame = picked.sort("ts_ns")
    prev = pl.col("ts_ns").shift(1).over("device", "metric")
    step = (pl.col("ts_ns") - prev).median().over("device", "metric").fill_null(0)
    # GPM values average the window between two GPM reads and are stamped at its middle, but
    # on recorded H100/H200 traces they trail the kernels they describe by about one window
    # (aligning tensor-core utilisation with GEMM kernels fits best one window earlier), so
    # each GPM value is taken to describe the window before the one centred on its stamp.
    # NVML utilisation is read at the end of the period it describes.
    gpm = pl.col("_name") == GPM_FAMILY
    lag = (step * GPM_LAG_WINDOWS).cast(pl.Int64)
    start = pl.when(gpm).then(pl.col("ts_ns") - step // 2 - lag).otherwise(pl.coalesce(prev, pl.col("ts_ns") - step))
    end = pl.when(gpm).then(pl.col("ts_ns") + step // 2 - lag).otherwise(pl.col("ts_ns"))
    return (
        frame.select(
            pl.col("device"),
            "metric",
            start.cast(pl.Int64).alias("c_start"),
            end.cast(pl.Int64).alias("c_end"),
            "value",
        )
        .filter(pl.col("c_end") > pl.col("c_start"))
        .cast(schema)  # type: ignore[arg-type]
    )


def _counter_means(windows: pl.DataFrame, samples: pl.DataFrame) -> pl.DataFrame:
    """Per region and metric, the overlap-weighted mean of samples mostly inside the window."""
    out_schema = {"region_id": pl.Int64} | {m: pl.Float64 for m in COUNTER_SERIES.values()}
    if samples.height == 0 or windows.height == 0:
        return pl.DataFrame(schema=out_schema)
    pairs = windows.select("region_id", "device", "start_ns", "end_ns").join_where(
        samples.rename({"device": "c_device"}),
        pl.col("c_start") < pl.col("end_ns"),
        pl.col("c_end") > pl.col("start_ns"),
    ).filter(pl.col("c_device").is_null() | (pl.col("c_device") == pl.col("device")) | pl.col("device").is_null())
    overlap = pl.min_horizontal("c_end", "end_ns") - pl.max_horizontal("c_start", "start_ns")
    inside = overlap / (pl.col("c_end") - pl.col("c_start"))
    good = pairs.with_columns(w=overlap).filter(inside >= COUNTER_MIN_INSIDE)
    if good.height == 0:
        return pl.DataFrame(schema=out_schema)
    means = good.group_by("region_id", "metric").agg(((pl.col("value") * pl.col("w")).sum() / pl.col("w").sum()).alias("v"))
    wide = means.pivot(on="metric", index="region_id", values="v")
    for m in COUNTER_SERIES.values():
        if m not in wide.columns:
            wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias(m))
    return wide.select(list(out_schema)).cast(out_schema)  # type: ignore[arg-type]


def _idle_causes(windows: pl.DataFrame, gaps: pl.DataFrame) -> pl.DataFrame:
    """Per region: idle time in reported gaps by cause (a column ``<cause>_ns`` each)."""
    out = windows.select("region_id", "device", "start_ns", "end_ns")
    causes = sorted(CAUSE_LABEL)
    for cause in causes:
        cover = gaps.filter(pl.col("cause") == cause).select("device", "start_ns", "end_ns")
        out = intervals.covered_ns(out, cover, by=["device"], out=f"{cause}_ns")
    return out.drop("device", "start_ns", "end_ns")


def _confidence(score: pl.Expr) -> pl.Expr:
    return score.clip(0, 2).replace_strict({0: "low", 1: "medium", 2: "high"}, return_dtype=pl.String)


def _counter_adjustment(label: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(score delta, evidence text) from GPM/NVML counters that agree or disagree with a label."""
    tensor, dram, sm, util = (pl.col(c) for c in ("tensor_util_pct", "dram_bw_util_pct", "sm_util_pct", "gpu_util_pct"))
    tensor_class = pl.col("dtype_class").is_in(list(TENSOR_CLASSES))
    idle_label = label.is_in(["overhead", "host", "sync", "data", "idle"])
    busy_gauge = pl.coalesce(sm, util)
    delta = (
        pl.when((label == "compute") & tensor_class & (tensor >= 50)).then(1)
        .when((label == "compute") & tensor_class & (tensor < 10)).then(-1)
        .when((label == "compute") & ~tensor_class & (sm >= 80)).then(1)
        .when((label == "memory") & (dram >= 50)).then(1)
        .when((label == "memory") & (dram < 20)).then(-1)
        .when((label == "compute") & (dram >= 60) & (tensor.fill_null(0) < 30)).then(-1)
        .when(idle_label & (busy_gauge < 50)).then(1)
        .when(idle_label & (busy_gauge >= 80)).then(-1)
        .otherwise(0)
    )
    parts = pl.concat_str(
        [
            pl.when(tensor.is_not_null()).then(pl.lit("tensor ") + _pct(tensor)),
            pl.when(dram.is_not_null()).then(pl.lit("DRAM bw ") + _pct(dram)),
            pl.when(sm.is_not_null()).then(pl.lit("SM ") + _pct(sm)),
            pl.when(util.is_not_null()).then(pl.lit("NVML util ") + _pct(util)),
        ],
        separator=", ",
        ignore_nulls=True,
    )
    verdict = pl.when(delta > 0).then(pl.lit(" (agrees)")).when(delta < 0).then(pl.lit(" (disagrees)")).otherwise(pl.lit(""))
    text = pl.when(parts != "").then(pl.lit("counters: ") + parts + verdict)
    return delta, text


def _label_regions(
    frame: pl.DataFrame, *, roofline_ok: bool, gaps_ok: bool
) -> pl.DataFrame:
    causes = sorted(CAUSE_LABEL)
    cause_cols = [f"{c}_ns" for c in causes]
    idle = pl.col("idle_ns")
    idle_share = pl.when(pl.col("dur_ns") > 0).then(idle / pl.col("dur_ns")).otherwise(0.0)
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
    roof_label, roof_score, roof_reason = _roofline_label(roofline_ok)
    idle_txt = pl.lit("GPU idle ") + _pct(pl.col("_idle_share") * 100) + pl.lit(" of the window")
    cause_txt = pl.lit(", mostly ") + pl.col("idle_cause").fill_null("") + pl.lit(" (") + _pct(pl.col("idle_cause_pct").fill_null(0)) + pl.lit(" of idle)")
    short_txt = pl.lit("; ") + _pct(pl.col("short_kernel_pct").fill_null(0)) + pl.lit(" of kernels shorter than their launch call")
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
            pl.lit("launched no GPU work; the GPU was busy ") + _pct(pl.col("busy_pct")) + pl.lit(" of the window with work launched earlier")
        )
        .otherwise(
            pl.lit("GPU busy ") + _pct(pl.col("busy_pct")) + pl.lit("; ") + roof_reason
            + pl.when(pl.col("_idle_share") >= SHORT_KERNEL_IDLE_SHARE)
            .then(pl.lit("; but GPU idle ") + _pct(pl.col("_idle_share") * 100) + pl.lit(" of the window") + cause_txt)
            .otherwise(pl.lit(""))
        )
    )
    frame = frame.with_columns(label.alias("label"), score.alias("_score"), reason.alias("reason"))
    delta, counter_txt = _counter_adjustment(pl.col("label"))
    evidence = pl.concat_str(
        [
            pl.lit("window ") + (pl.col("dur_ns") / 1e6).round(3).cast(pl.String) + pl.lit(" ms, busy ") + _pct(pl.col("busy_pct")),
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
        _confidence(pl.col("_score") + delta).alias("confidence"),
        evidence.alias("evidence"),
    )


def _region_table(
    trace: Trace, work: pl.DataFrame, peaks: devices.DevicePeaks | None, gaps: pl.DataFrame | None, primary: int
) -> tuple[pl.DataFrame, int]:
    regions, left_out = _regions(trace)
    pairs = _assign(regions, work)
    # A region's device: the one its kernels spent most time on (else the busiest device).
    main_device = (
        pairs.group_by("region_id", "device")
        .agg(pl.col("dur_ns").sum().alias("_d"))
        .sort(["region_id", "_d", "device"], descending=[False, True, False])
        .unique("region_id", keep="first")
        .select("region_id", "device")
    )
    pairs = pairs.join(main_device, on=["region_id", "device"], how="semi")
    agg = _aggregate(pairs, ["region_id"])
    table = (
        regions.join(main_device, on="region_id", how="left")
        .with_columns(pl.col("device").fill_null(primary))
        .join(agg, on="region_id", how="left")
        .with_columns(
            pl.max_horizontal("host_end_ns", pl.col("last_end_ns").fill_null(pl.col("host_end_ns"))).alias("end_ns"),
            (pl.col("host_end_ns") - pl.col("start_ns")).alias("host_dur_ns"),
            pl.col("kernels").fill_null(0),
            pl.col("kernel_ns").fill_null(0),
        )
        .with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"))
    )
    table = intervals.covered_ns(table, busy_intervals(trace), by=["device"], out="busy_ns")
    table = table.with_columns(
        (pl.col("dur_ns") - pl.col("busy_ns")).clip(lower_bound=0).alias("idle_ns"),
        pl.when(pl.col("dur_ns") > 0).then(pl.col("busy_ns") / pl.col("dur_ns") * 100.0).otherwise(0.0).alias("busy_pct"),
    )
    gaps_ok = gaps is not None
    cause_frame = _idle_causes(table, gaps if gaps is not None else pl.DataFrame(schema={"device": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64, "cause": pl.String}))
    table = table.join(cause_frame, on="region_id", how="left")
    bw = peaks.mem_bw_tbps if peaks else None
    table = table.with_columns(_roofline_columns(bw))
    table = table.join(_counter_means(table, _counter_windows(trace)), on="region_id", how="left")
    labelled = _label_regions(table, roofline_ok=bool(peaks and peaks.complete), gaps_ok=gaps_ok)
    kind_order = {"trace": 0, "step": 1, "compiled": 2, "annotation": 3, "module": 4, "op": 5}
    out = (
        labelled.with_columns(pl.col("kind").replace_strict(kind_order, default=9, return_dtype=pl.Int64).alias("_k"))
        .sort(["_k", "start_ns", "region_id"])
        .select([pl.col(c).cast(t) for c, t in REGION_COLUMNS.items()])
    )
    return out, left_out


# ---- ops and kernels -------------------------------------------------------------------


def _group_table(work: pl.DataFrame, keys: list[str], roofline_ok: bool, bw: float | None) -> pl.DataFrame:
    agg = work.group_by(keys).agg(
        pl.col("op_key").n_unique().cast(pl.Int64).alias("calls"),
        pl.col("family").drop_nulls().mode().first().alias("family"),
        pl.col("cost_source").drop_nulls().first().alias("cost_source"),
    ).join(_aggregate(work, keys), on=keys, how="left", nulls_equal=True)
    agg = agg.with_columns(_roofline_columns(bw))
    roof_label, roof_score, roof_reason = _roofline_label(roofline_ok)
    # Serially launched, work shorter than its launch call leaves the GPU waiting on the host.
    overhead = pl.col("launch_ns").fill_null(0) > pl.col("kernel_ns")
    label = pl.when(overhead).then(pl.lit("overhead")).otherwise(roof_label)
    score = pl.when(overhead).then(pl.lit(1)).otherwise(roof_score)
    reason = (
        pl.when(overhead)
        .then(
            pl.lit("kernels (") + (pl.col("kernel_ns") / 1e3).round(1).cast(pl.String)
            + pl.lit(" µs) shorter than their launch calls (") + (pl.col("launch_ns") / 1e3).round(1).cast(pl.String)
            + pl.lit(" µs): launched one by one they starve the GPU")
        )
        .otherwise(roof_reason)
    )
    return agg.with_columns(label.alias("label"), _confidence(score).alias("confidence"), reason.alias("reason"))


def _op_table(trace: Trace, work: pl.DataFrame, roofline_ok: bool, bw: float | None) -> pl.DataFrame:
    ops = trace.events.select(
        pl.col("id").alias("op_key"), pl.col("name").cast(pl.String).alias("op_name"), pl.col("input_dims").alias("shapes")
    )
    keyed = (
        work.filter(pl.col("kind") == "kernel")
        .with_columns(pl.coalesce("costed_op_id", "op_id").alias("op_key"))
        .join(ops, on="op_key", how="left")
        .with_columns(
            pl.when(pl.col("op_name").is_not_null())
            .then(pl.col("op_name"))
            .when(pl.col("launch_ts_ns").is_null())
            .then(pl.lit("(launched before the trace)"))
            .otherwise(pl.lit("(no recorded op)"))
            .alias("op_name")
        )
    )
    table = _group_table(keyed, ["op_name", "shapes", "device"], roofline_ok, bw).rename({"op_name": "name"})
    return (
        table.sort(["kernel_ns", "name"], descending=[True, False])
        .select([pl.col(c).cast(t) if c in table.columns else pl.lit(None, dtype=t).alias(c) for c, t in TABLE_COLUMNS.items()])
    )


def _kernel_table(work: pl.DataFrame, roofline_ok: bool, bw: float | None) -> pl.DataFrame:
    keyed = work.with_columns(pl.col("id").alias("op_key"))
    table = _group_table(keyed, ["name", "device"], roofline_ok, bw).with_columns(pl.lit(None, dtype=pl.String).alias("shapes"))
    return (
        table.sort(["kernel_ns", "name"], descending=[True, False])
        .select([pl.col(c).cast(t) if c in table.columns else pl.lit(None, dtype=t).alias(c) for c, t in TABLE_COLUMNS.items()])
    )


# ---- entry point -----------------------------------------------------------------------


def run(trace: Trace, config: AnalysisConfig, inputs: Inputs | None = None) -> BoundResult:
    gpu = trace.kernels.filter(pl.col("device").is_not_null())
    if gpu.height == 0:
        return BoundResult(available=False, reason="no GPU kernels, memcpys or memsets in this trace")
    primary = _primary_device(trace)
    assert primary is not None
    props = trace.meta.device(primary)
    device_name = props.name if props else None
    peaks = devices.resolve(
        device_name,
        peak_tflops=config.peak_tflops,
        peak_bw_tbps=config.peak_bw_tbps,
        devices_toml=config.devices_toml,
    )
    notes: list[str] = []
    roofline_ok = bool(peaks and peaks.complete)
    roofline_reason = None
    if not roofline_ok:
        missing = "no peak figures" if peaks is None else "incomplete peak figures (need FLOP/s and bandwidth)"
        roofline_reason = (
            f"{missing} for device {device_name or '?'}: compute/memory labels are unavailable; "
            "give --peak-tflops and --peak-bw or --devices FILE.toml (overhead, host, sync and data labels still apply)"
        )
    if not trace.has_shapes:
        notes.append(
            "no input shapes recorded (record_shapes=False): FLOPs and bytes are unknown, so compute/memory "
            "labels are guessed from kernel families with low confidence"
        )
    work = _kernel_frame(trace, peaks if roofline_ok else None)
    inputs = inputs if inputs is not None else Inputs.compute(trace, config, SPEC.requires)
    gaps_result = inputs.maybe("gaps", GapsResult)
    # An unavailable gaps result still carries an (empty) gaps table with the right columns.
    gaps = gaps_result.gaps if gaps_result is not None else None
    gap_reason = None if gaps_result is not None else "the gap analysis did not run"
    regions, left_out = _region_table(trace, work, peaks if roofline_ok else None, gaps, primary)
    if left_out:
        notes.append(f"{left_out} smaller top-level ops are not listed as regions (see --by op)")
    bw = peaks.mem_bw_tbps if roofline_ok and peaks else None
    ops = _op_table(trace, work, roofline_ok, bw)
    kernels = _kernel_table(work, roofline_ok, bw)
    kernel_time = work.filter(pl.col("kind") == "kernel")
    total = int(kernel_time["dur_ns"].sum() or 0)
    costed = int(kernel_time.filter(pl.col("costed"))["dur_ns"].sum() or 0)
    if total and costed < total:
        uncosted = kernel_time.filter(~pl.col("costed"))
        no_launch = int(uncosted.filter(pl.col("launch_ts_ns").is_null())["dur_ns"].sum() or 0)
        no_op = int(uncosted.filter(pl.col("launch_ts_ns").is_not_null() & pl.col("op_id").is_null())["dur_ns"].sum() or 0)
        if no_launch:
            notes.append(
                f"{100.0 * no_launch / total:.0f}% of kernel time comes from kernels launched before the trace "
                "started: they count as device busy time but belong to no region"
            )
        if no_op:
            notes.append(
                f"{100.0 * no_op / total:.0f}% of kernel time has no recorded op (Triton/Inductor kernels, CUDA graphs): "
                "their bound is guessed from the kernel family"
            )
    return BoundResult(
        device_name=device_name,
        peaks=_peaks_dict(peaks) if peaks else None,
        roofline_available=roofline_ok,
        roofline_reason=roofline_reason,
        gap_causes_available=gaps is not None,
        gap_reason=gap_reason,
        gap_threshold_ns=int(config.gap_threshold_ns),
        cost_coverage_pct=(100.0 * costed / total) if total else None,
        regions=regions,
        ops=ops,
        kernels=kernels,
        notes=tuple(notes),
    )


SPEC = AnalysisSpec(
    name="bound",
    title="Bound: overhead, memory or compute",
    run=run,
    requires=("gaps",),
    description=(
        "Per region, op and kernel: GPU busy share, idle causes, achieved TFLOP/s and TB/s against "
        "the device roofline, and a label (overhead/host/sync/data/memory/compute) with evidence."
    ),
)
