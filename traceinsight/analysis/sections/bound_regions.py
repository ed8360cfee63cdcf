"""The regions the bound analysis judges: the whole trace, ProfilerSteps, compiled graph calls,
annotations, nn.Module scopes and the top-level ops with the most GPU time; and the GPU work
each one launched."""

from __future__ import annotations

import re

import polars as pl

from traceinsight.analysis.lib.host_names import name_matches
from traceinsight.analysis.lib.timeline import analysis_window
from traceinsight.trace.model import Trace
from traceinsight.trace.schema import PROFILER_STEP_PREFIX

MAX_OP_REGIONS = 100


def named_regions(trace: Trace) -> pl.DataFrame:
    ev = trace.events.select("id", "name", "kind", "ts_ns", "end_ns", "dur_ns")
    kind = pl.col("kind").cast(pl.String)

    # Name prefixes are matched once per distinct name (not cast and searched per event).
    def starts(prefix: str) -> pl.Expr:
        return name_matches(ev, "^" + re.escape(prefix))

    compiled = (
        ((kind == "user_annotation") & starts("## Call CompiledFxGraph"))
        | ((kind == "cpu_op") & pl.col("name").is_in(["CompiledFunction", "CompiledFunctionBackward"]))
        | starts("Torch-Compiled Region")
    )
    region_kind = (
        pl.when((kind == "user_annotation") & starts(PROFILER_STEP_PREFIX))
        .then(pl.lit("step"))
        .when(compiled)
        .then(pl.lit("compiled"))
        .when(kind == "user_annotation")
        .then(pl.lit("annotation"))
        .when((kind == "python") & starts("nn.Module:"))
        .then(pl.lit("module"))
    )
    return (
        ev.with_columns(region_kind.alias("rkind"))
        .filter(pl.col("rkind").is_not_null() & (pl.col("dur_ns") > 0))
        .select(
            pl.col("id").alias("region_id"),
            pl.col("name").cast(pl.String).alias("name"),
            pl.col("rkind").alias("kind"),
            pl.col("ts_ns").alias("start_ns"),
            pl.col("end_ns").alias("host_end_ns"),
        )
    )


def top_op_regions(trace: Trace) -> tuple[pl.DataFrame, int]:
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


def region_spans(trace: Trace) -> tuple[pl.DataFrame, int]:
    lo, hi = analysis_window(trace)
    whole = pl.DataFrame(
        {"region_id": [-1], "name": ["(whole trace)"], "kind": ["trace"], "start_ns": [lo], "host_end_ns": [hi]},
        schema={"region_id": pl.Int64, "name": pl.String, "kind": pl.String, "start_ns": pl.Int64, "host_end_ns": pl.Int64},
    )
    ops, left_out = top_op_regions(trace)
    frames = [whole, named_regions(trace), ops]
    # The same span can be recorded twice (e.g. a compiled region as op and as annotation).
    regions = pl.concat([f.cast(whole.schema) for f in frames]).unique(
        ["name", "start_ns", "host_end_ns"], keep="first", maintain_order=True
    )
    return regions, left_out


def assign(regions: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """(region, kernel) pairs: GPU work whose launch call started inside the region's host span."""
    launched = work.filter(pl.col("launch_ts_ns").is_not_null())
    if launched.height == 0 or regions.height == 0:
        return pl.DataFrame(schema={"region_id": pl.Int64} | dict(work.schema))
    return regions.select("region_id", "start_ns", "host_end_ns").join_where(
        launched,
        pl.col("launch_ts_ns") >= pl.col("start_ns"),
        pl.col("launch_ts_ns") < pl.col("host_end_ns"),
    ).drop("start_ns", "host_end_ns")


def behind_queue(trace: Trace, table: pl.DataFrame) -> pl.DataFrame:
    """Regions other than the whole trace and steps start on the device no earlier than the
    end of the GPU work launched before them: when the host runs ahead, a region's kernels
    queue behind earlier work, and that wait is the earlier work's time, not the region's.

    The region keeps its own GPU work and the idle its host time caused (the device idle
    between the queue's end and its first kernel); ``end_ns`` is unchanged. Steps already
    start this way (timeline.device_step_spans)."""
    work = trace.kernels.filter(pl.col("device").is_not_null()).select(
        "device",
        # Work whose launch is not in the trace was queued before it began.
        pl.col("launch_ts_ns").fill_null(-(2**62)).alias("_launch"),
        "end_ns",
    )
    if work.height == 0 or table.height == 0:
        return table
    queued = (
        work.sort("_launch")
        .with_columns(pl.col("end_ns").cum_max().over("device").alias("_queue_end"))
        .group_by("device", "_launch")
        .agg(pl.col("_queue_end").max())
        .sort("_launch")
    )
    moved = pl.col("kind").is_in(["trace", "step"]).not_()
    probe = table.with_row_index("_row").with_columns((pl.col("start_ns") - 1).alias("_probe")).sort("_probe")
    hit = probe.join_asof(
        queued, left_on="_probe", right_on="_launch", by="device", strategy="backward", check_sortedness=False
    )
    start = pl.min_horizontal(pl.max_horizontal("start_ns", pl.col("_queue_end").fill_null(pl.col("start_ns"))), "end_ns")
    return (
        hit.with_columns(pl.when(moved).then(start).otherwise(pl.col("start_ns")).alias("start_ns"))
        .sort("_row")
        .drop("_row", "_probe", "_launch", "_queue_end")
    )
