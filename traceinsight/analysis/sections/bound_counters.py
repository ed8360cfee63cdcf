"""NVML/GPM counter samples aligned with regions: the window each sample describes, the
overlap-weighted mean inside a region, and whether the counters agree with its label."""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.cost.roofline import TENSOR_CLASSES, pct_text
from traceinsight.trace.model import Trace

COUNTER_MIN_INSIDE = 0.75  # a counter sample counts for a region when most of its window is inside
GPM_FAMILY = "gpm"
GPM_LAG_WINDOWS = 1.0  # how many sampling windows GPM values trail their timestamps
COUNTER_SERIES = {
    ("gpm", "tensor_util_pct"): "tensor_util_pct",
    ("gpm", "dram_bw_util_pct"): "dram_bw_util_pct",
    ("gpm", "sm_util_pct"): "sm_util_pct",
    ("nvml.utilization", "gpu_pct"): "gpu_util_pct",
}


def counter_windows(trace: Trace) -> pl.DataFrame:
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


def counter_means(windows: pl.DataFrame, samples: pl.DataFrame) -> pl.DataFrame:
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


def counter_adjustment(label: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
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
            pl.when(tensor.is_not_null()).then(pl.lit("tensor ") + pct_text(tensor)),
            pl.when(dram.is_not_null()).then(pl.lit("DRAM bw ") + pct_text(dram)),
            pl.when(sm.is_not_null()).then(pl.lit("SM ") + pct_text(sm)),
            pl.when(util.is_not_null()).then(pl.lit("NVML util ") + pct_text(util)),
        ],
        separator=", ",
        ignore_nulls=True,
    )
    verdict = pl.when(delta > 0).then(pl.lit(" (agrees)")).when(delta < 0).then(pl.lit(" (disagrees)")).otherwise(pl.lit(""))
    text = pl.when(parts != "").then(pl.lit("counters: ") + parts + verdict)
    return delta, text
