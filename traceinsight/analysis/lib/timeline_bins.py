"""A device's timeline in equal time bins, for a strip that a person reads at a glance.

Each bin says what most of its time was: busy (kernels, copies and memsets for at least half of
it), else the cause of most of its idle time, from the gaps analysis ("idle" for the time no
gap covers: gaps below the report's threshold). Neighbouring bins in the same state are one run,
so that a drawing stays small however long the trace. The steps' host spans, from the trace's
one definition of a step (``Trace.step_spans``), go with it.
"""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.timeline import work_intervals
from traceinsight.trace.model import Trace

RUNS_SCHEMA = {"state": pl.String, "b0": pl.Int64, "b1": pl.Int64, "busy_pct": pl.Float64}


def per_bin(frame: pl.DataFrame, lo: int, width: float, bins: int, by: list[str]) -> pl.DataFrame:
    """Time each group of intervals (``start_ns``, ``end_ns``) covers in each of ``bins`` equal
    bins of ``width`` ns starting at ``lo``."""
    if frame.height == 0:
        return pl.DataFrame(schema={**{k: pl.String for k in by}, "bin": pl.Int64, "ns": pl.Float64})
    rel = frame.with_columns(s=(pl.col("start_ns") - lo).cast(pl.Float64), e=(pl.col("end_ns") - lo).cast(pl.Float64))
    return (
        rel.with_columns(
            bin=pl.int_ranges(
                (pl.col("s") / width).floor().cast(pl.Int64).clip(0, bins - 1),
                (pl.col("e") / width).ceil().cast(pl.Int64).clip(1, bins),
            )
        )
        .explode("bin")
        .with_columns(
            ns=(pl.min_horizontal(pl.col("e"), (pl.col("bin") + 1) * width) - pl.max_horizontal(pl.col("s"), pl.col("bin") * width)).clip(lower_bound=0)
        )
        .group_by([*by, "bin"])
        .agg(pl.col("ns").sum())
    )


def device_runs(trace: Trace, gaps: pl.DataFrame, device: int, lo: int, hi: int, bins: int) -> pl.DataFrame:
    """One device's bins as runs (``RUNS_SCHEMA``): the state of bins ``b0``..``b1`` (busy, an
    idle cause, or "idle") and the GPU's mean busy share over them. ``gaps``: that device's idle
    gaps as ``start_ns``, ``end_ns``, ``cause``."""
    width = (hi - lo) / bins
    work = work_intervals(trace).filter(pl.col("device") == device)
    busy = intervals.union(work.select("start_ns", "end_ns")).with_columns(cause=pl.lit("busy"))
    parts = pl.concat([busy.select("start_ns", "end_ns", "cause"), gaps.select("start_ns", "end_ns", "cause")], how="vertical_relaxed")
    covered = per_bin(parts, lo, width, bins, ["cause"])
    table = (
        pl.DataFrame({"bin": pl.int_range(0, bins, eager=True)})
        .join(covered.pivot(on="cause", index="bin", values="ns"), on="bin", how="left")
        .fill_null(0.0)
    )
    causes = [c for c in table.columns if c not in ("bin", "busy")]
    busy_col = pl.col("busy") if "busy" in table.columns else pl.lit(0.0)
    untracked = (pl.lit(width) - busy_col - pl.sum_horizontal([pl.col(c) for c in causes] or [pl.lit(0.0)])).clip(lower_bound=0)
    table = table.with_columns(busy=busy_col, idle=untracked)
    idle_cols = [*causes, "idle"]
    table = table.with_columns(
        state=pl.when(pl.col("busy") >= width / 2)
        .then(pl.lit("busy"))
        .otherwise(pl.concat_list([pl.struct(c=pl.lit(c), v=pl.col(c)) for c in idle_cols]).list.eval(pl.element().sort_by(pl.element().struct.field("v"), descending=True).first().struct.field("c")).list.first()),
        busy_pct=100.0 * pl.col("busy") / width,
    )
    return (
        table.with_columns(run=(pl.col("state") != pl.col("state").shift(1)).fill_null(True).cum_sum())
        .group_by("run", maintain_order=True)
        .agg(pl.col("state").first(), pl.col("bin").min().alias("b0"), pl.col("bin").max().alias("b1"), pl.col("busy_pct").mean())
        .select(pl.col("state").cast(pl.String), pl.col("b0").cast(pl.Int64), pl.col("b1").cast(pl.Int64), "busy_pct")
    )


def host_steps(trace: Trace) -> tuple[str, pl.DataFrame]:
    """What stands for the steps on the host ("steps", from ProfilerStep spans, or "iterations",
    the loop iterations found at load) and their spans: ``label``, ``start_ns``, ``end_ns``."""
    spans = trace.step_spans()
    profiled = trace.step_source == "ProfilerStep"
    label = (pl.lit("ProfilerStep#") if profiled else pl.lit("iteration ")) + pl.col("step").cast(pl.String)
    return ("steps" if profiled else "iterations"), spans.select(
        label.alias("label"), pl.col("host_start_ns").alias("start_ns"), pl.col("host_end_ns").alias("end_ns")
    )
