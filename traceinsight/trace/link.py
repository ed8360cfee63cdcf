"""Columns → linked frames: integer ns times, kinds, nesting, steps, and kernel-to-launch links.

Everything here is polars expressions and joins over whole columns; the only Python loops run
over nesting levels (a few dozen at most), never over events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from traceinsight.trace.schema import (
    EVENT_COLUMNS,
    GPU_KINDS,
    GPU_WORK_KINDS,
    KERNEL_COLUMNS,
    KIND_BY_CAT,
    KIND_DTYPE,
    LAUNCH_KINDS,
    PROFILER_STEP_PREFIX,
)


@dataclass
class LinkResult:
    events: pl.DataFrame
    kernels: pl.DataFrame
    counters: pl.DataFrame
    memory: pl.DataFrame
    origin_us: float
    warnings: list[str] = field(default_factory=list)


# Times beyond ±2**62 ns (~146 years) cannot be real and would overflow end = ts + dur.
_MAX_NS = float(2**62)


def _to_ns(col: str, origin_us: float) -> pl.Expr:
    # Subtract in µs first: for absolute epoch µs the subtraction is exact and keeps ns digits.
    value = ((pl.col(col) - origin_us) * 1000.0).round(0)
    return pl.when(value.abs() < _MAX_NS).then(value).cast(pl.Int64)


def _kind_expr() -> pl.Expr:
    cat = pl.col("cat").cast(pl.String).str.to_lowercase()
    mapped = cat.replace_strict(KIND_BY_CAT, default=None, return_dtype=pl.String)
    return (
        pl.when(mapped.is_not_null())
        .then(mapped)
        .when(cat.str.contains("runtime"))
        .then(pl.lit("runtime"))
        .when(cat.str.contains("driver"))
        .then(pl.lit("driver"))
        .when(cat.str.contains("kernel"))
        .then(pl.lit("kernel"))
        .otherwise(pl.lit("other"))
        .cast(KIND_DTYPE)
    )


def link(
    durations: pl.DataFrame,
    counters: pl.DataFrame,
    memory: pl.DataFrame,
    base_time_ns: int | None,
) -> LinkResult:
    warnings: list[str] = []
    origin_us = 0.0
    if base_time_ns is None:
        starts = [
            frame["ts"].min()
            for frame in (durations, counters, memory)
            if frame.height and frame["ts"].null_count() < frame.height
        ]
        origin_us = float(min(float(s) for s in starts if s is not None)) if starts else 0.0  # type: ignore[arg-type]
        warnings.append(
            "trace has no baseTimeNanoseconds: times are relative to its first event"
        )

    # Computed as a small frame of their own: adding columns to the reader's frame, which
    # arrives as one chunk per decoded piece, would make polars copy all of it into one chunk.
    # (Even a select on that frame rechunks all of it, so its columns are taken one by one.)
    times = pl.DataFrame([durations.get_column(c) for c in ("ts", "dur", "cat")]).select(
        ts=pl.when(((pl.col("ts") - origin_us) * 1000.0).abs() < _MAX_NS).then(pl.col("ts")),
        dur=pl.when(pl.col("dur") * 1000.0 < _MAX_NS).then(pl.col("dur")),
        cat=pl.col("cat"),
    )
    missing_ts = times["ts"].null_count()
    if missing_ts:
        warnings.append(f"{missing_ts} events without a usable timestamp were ignored")
    missing_dur = times["dur"].null_count()
    if missing_dur:
        warnings.append(f"{missing_dur} duration events had no usable 'dur'; treated as instantaneous")
    negative_dur = int((times["dur"] < 0).sum())
    if negative_dur:
        warnings.append(f"{negative_dur} events had a negative 'dur'; set to 0")

    if missing_ts:
        keep = times["ts"].is_not_null()
        durations = durations.filter(keep)
        times = times.filter(keep)
    derived = times.select(
        ts_ns=_to_ns("ts", origin_us),
        dur_ns=(pl.col("dur").fill_null(0.0) * 1000.0).round(0).cast(pl.Int64).clip(lower_bound=0),
        kind=_kind_expr(),
    )
    is_gpu = pl.col("kind").cast(pl.String).is_in(list(GPU_KINDS))
    order = derived.select(
        pl.arg_sort_by(["ts_ns", "dur_ns"], descending=[False, True], maintain_order=True)
    ).to_series()
    # Hand the only references over, so each source column is freed once it is gathered.
    owned = [durations.get_column(c) for c in durations.columns if c not in ("ts", "dur")]
    owned += derived.get_columns()
    del durations, derived, times
    events = _gather_freeing(owned, order)
    del order
    events = events.with_columns(
        id=pl.int_range(events.height, dtype=pl.Int64),
        end_ns=pl.col("ts_ns") + pl.col("dur_ns"),
        is_gpu=is_gpu,
        device=pl.when(is_gpu).then(pl.coalesce(pl.col("device"), pl.when(pl.col("pid") >= 0).then(pl.col("pid")))),
        stream=pl.when(is_gpu).then(pl.coalesce(pl.col("stream"), pl.col("tid"))),
    )

    # python_function frames get a tree of their own: record_function and ProfilerStep spans
    # open inside one Python frame and close inside another, so the two never nest together.
    # Narrow first, then filter: an eager filter copies every column it carries.
    host = events.select("id", "pid", "tid", "ts_ns", "end_ns", "kind", "name", "is_gpu").filter(~pl.col("is_gpu"))
    is_python = pl.col("kind") == "python"
    nesting_ops, improper_ops = _nest(host.filter(~is_python))
    nesting_py, improper_py = _nest(host.filter(is_python))
    improper = improper_ops + improper_py
    if improper:
        warnings.append(
            f"{improper} host events overlap a sibling without nesting; their parent is approximate"
        )
    # ids are row numbers, so per-event results are scattered into aligned columns
    # instead of joined: no copy of the wide frame per step.
    n = events.height
    nesting = pl.concat([nesting_ops, nesting_py])
    parent = _aligned(n, nesting["id"], nesting["parent"], pl.Int64)
    depth = _aligned(n, nesting["id"], nesting["depth"], pl.Int32)
    events = events.with_columns(parent=parent, depth=depth)

    host_steps = _host_steps(events, step_spans(events))
    kernels = _kernels(events, host_steps)
    unlaunched = kernels["launch_id"].null_count() if kernels.height else 0
    if unlaunched:
        warnings.append(
            f"{unlaunched} GPU events were launched before the trace window opened "
            "(no launch call in the trace); they have no host context"
        )
    step = _aligned(n, host_steps["id"], host_steps["step"], pl.Int64)
    step = step.scatter(kernels["id"], kernels["step"]) if kernels.height else step
    events = events.with_columns(step=step)

    events = events.with_columns(
        pl.col("name").fill_null("").cast(pl.Categorical),
        pl.col("cat").fill_null("").cast(pl.Categorical),
        pl.col("collective_name").cast(pl.Categorical),
        pl.col("comm_dtype").cast(pl.Categorical),
    ).select([pl.col(c).cast(t) for c, t in EVENT_COLUMNS.items()])

    counters = counters.filter(_to_ns("ts", origin_us).is_not_null())
    memory = memory.filter(_to_ns("ts", origin_us).is_not_null())
    counters_out = counters.select(
        ts_ns=_to_ns("ts", origin_us),
        pid=pl.col("pid"),
        device=pl.when(pl.col("pid") >= 0).then(pl.col("pid")),
        name=pl.col("name").cast(pl.Categorical),
        series=pl.col("series").cast(pl.Categorical),
        value=pl.col("value"),
    ).sort("ts_ns", maintain_order=True)
    memory_out = memory.select(
        ts_ns=_to_ns("ts", origin_us),
        pid=pl.col("pid"),
        tid=pl.col("tid"),
        device_type=pl.col("device_type"),
        device=pl.col("device"),
        addr=pl.col("addr"),
        bytes=pl.col("bytes"),
        total_allocated_bytes=pl.col("total_allocated_bytes"),
        total_reserved_bytes=pl.col("total_reserved_bytes"),
    ).sort("ts_ns", maintain_order=True)
    return LinkResult(events, kernels, counters_out, memory_out, origin_us, warnings)


def _group_ids() -> pl.Expr:
    return pl.struct("pid", "tid").rank("dense").cast(pl.Int64) - 1


def _nest(host: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Parent and depth of each host event among the events of its own (pid, tid).

    Events are ordered by start, longer first on ties. An event's depth is the number of
    events of its thread that started before it and had not yet ended; its parent is the
    latest earlier event one level up. Properly nested spans (the norm on a host thread)
    get exact answers; crossing spans get the nearest plausible parent and are counted.
    Sorted integer keys and binary searches over a few numpy arrays do the work, so the
    memory it needs is a few columns of the host events, not copies of frames.
    """
    empty = pl.DataFrame(schema={"id": pl.Int64, "parent": pl.Int64, "depth": pl.Int32})
    if host.height == 0:
        return empty, 0
    group = host.select(_group_ids())[:, 0].to_numpy()
    ts = host["ts_ns"].to_numpy()
    end = host["end_ns"].to_numpy()
    order = np.lexsort((-end, ts, group))
    group, ts, end = group[order], ts[order], end[order]
    ids = host["id"].to_numpy()[order]
    n = len(ids)
    position = np.arange(n, dtype=np.int64)
    # k: how many events of the same thread started before this one.
    k = position - np.searchsorted(group, group, side="left")
    # ended: how many events of the same thread ended at or before this one started, from one
    # sorted array of (thread, end) keys; a zero-length event counted its own end: give it back.
    t0 = int(ts.min())
    span = int(end.max()) - t0 + 2
    if int(group.max() + 1) * span >= 2**62:  # pragma: no cover - centuries of ns × many threads
        raise OverflowError("trace spans too long a time for nesting keys")
    end_keys = np.sort(group * span + (end - t0))
    ended = np.searchsorted(end_keys, group * span + (ts - t0), side="right") - np.searchsorted(
        end_keys, group * span, side="left"
    )
    depth = np.maximum(k - ended + (end == ts), 0)
    # parent: the latest earlier event of the same thread one level up, found in one sorted
    # array of (thread, depth, position) keys.
    levels = int(depth.max()) + 2
    level_key = (group * levels + depth) * n + position
    sorted_keys = np.sort(level_key)
    wanted_level = group * levels + depth - 1
    hit = np.searchsorted(sorted_keys, wanted_level * n + position, side="left") - 1
    found = (depth > 0) & (hit >= 0)
    hit_key = sorted_keys[np.where(found, hit, 0)]
    found &= hit_key // n == wanted_level
    parent_pos = np.where(found, hit_key % n, 0)
    parent = np.where(found, ids[parent_pos], -1)
    improper = int(np.count_nonzero(found & (end[parent_pos] < end)))
    result = pl.DataFrame({"id": ids, "parent": parent, "depth": depth.astype(np.int32)})
    return result.with_columns(pl.col("parent").replace(-1, None)), improper


def step_spans(events: pl.DataFrame) -> pl.DataFrame:
    """ProfilerStep#N host spans, one row per step: step, host_start_ns, host_end_ns, by start."""
    name = pl.col("name").cast(pl.String)
    return (
        events.filter((pl.col("kind") == "user_annotation") & name.str.starts_with(PROFILER_STEP_PREFIX))
        .select(
            step=name.str.slice(len(PROFILER_STEP_PREFIX)).cast(pl.Int64, strict=False),
            host_start_ns=pl.col("ts_ns"),
            host_end_ns=pl.col("end_ns"),
        )
        .drop_nulls("step")
        .group_by("step")
        .agg(pl.col("host_start_ns").min(), pl.col("host_end_ns").max())
        .sort("host_start_ns")
    )


def _gather_freeing(columns: list[pl.Series], order: pl.Series) -> pl.DataFrame:
    """A frame of ``columns`` with rows taken in ``order``, one column at a time.

    ``columns`` is emptied as it goes, so with no other reference held each source column is
    freed once gathered: a whole-frame gather would hold two copies of every column at its
    peak, this holds two copies of one column.
    """
    columns.reverse()
    gathered = []
    while columns:
        gathered.append(columns.pop().gather(order))
    return pl.DataFrame(gathered)


def _aligned(n: int, ids: pl.Series, values: pl.Series, dtype: Any) -> pl.Series:
    """A length-n column holding ``values`` at row ``ids`` and nulls elsewhere."""
    column = pl.Series(values.name, dtype=dtype).extend_constant(None, n)
    if ids.len() == 0:
        return column
    return column.scatter(ids, values.cast(dtype))


def _host_steps(events: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """(id, step) of host events that fall inside a ProfilerStep span."""
    if steps.height == 0:
        return pl.DataFrame(schema={"id": pl.Int64, "step": pl.Int64})
    return (
        events.select("id", "ts_ns", "is_gpu")
        .filter(~pl.col("is_gpu"))
        .join_asof(steps, left_on="ts_ns", right_on="host_start_ns", strategy="backward", check_sortedness=False)
        .filter(pl.col("ts_ns") < pl.col("host_end_ns"))
        .select("id", "step")
    )


def _host_context(events: pl.DataFrame, launch_ids: pl.Series) -> pl.DataFrame:
    """For each launch call: its innermost cpu_op, outermost cpu_op and innermost annotation.

    Climbs the host nesting (``parent``) from every launch at once, one level per pass, with
    array gathers; the passes number the nesting depth (tens), never the events.
    """
    name_s = pl.col("name").cast(pl.String)
    table = events.select(
        parent=pl.col("parent").fill_null(-1),
        is_op=pl.col("kind") == "cpu_op",
        is_annotation=(
            (pl.col("kind") == "user_annotation") & ~name_s.str.starts_with(PROFILER_STEP_PREFIX)
        ).fill_null(False),
    )
    parents = table["parent"].to_numpy()
    is_op = table["is_op"].to_numpy()
    is_annotation = table["is_annotation"].to_numpy()
    launches = launch_ids.to_numpy().astype(np.int64)
    op = np.full(len(launches), -1, dtype=np.int64)
    top = np.full(len(launches), -1, dtype=np.int64)
    annotation = np.full(len(launches), -1, dtype=np.int64)
    rows = np.arange(len(launches))
    current = parents[launches]
    while rows.size:
        alive = current >= 0
        rows, current = rows[alive], current[alive]
        if not rows.size:
            break
        op_here = is_op[current]
        first_op = op_here & (op[rows] < 0)
        op[rows[first_op]] = current[first_op]
        top[rows[op_here]] = current[op_here]
        ann_here = is_annotation[current] & (annotation[rows] < 0)
        annotation[rows[ann_here]] = current[ann_here]
        current = parents[current]
    names = events["name"].cast(pl.String)

    def column(ids: np.ndarray, label: str) -> list[pl.Series]:
        series = pl.Series(f"{label}_id", ids).replace(-1, None)
        return [series, names.gather(series).alias(f"{label}_name" if label != "annotation" else label)]

    return pl.DataFrame(
        [
            pl.Series("launch_id", launches),
            *column(op, "op"),
            *column(top, "top_op"),
            *column(annotation, "annotation"),
        ]
    )


def _kernels(events: pl.DataFrame, host_steps: pl.DataFrame) -> pl.DataFrame:
    """GPU work joined to its launch call (by correlation) and that call's host context."""
    kind_s = pl.col("kind").cast(pl.String)
    gpu = events.filter(kind_s.is_in(list(GPU_WORK_KINDS)))
    if gpu.height == 0:
        return pl.DataFrame(schema=KERNEL_COLUMNS)
    # cudaGraphLaunch starts many kernels under one correlation; when a runtime and a driver
    # call share a correlation, the later-starting (inner) one is the launch.
    launches = (
        events.lazy()
        .filter(kind_s.is_in(list(LAUNCH_KINDS)) & pl.col("correlation").is_not_null())
        .select(
            "correlation",
            pl.col("id").alias("launch_id"),
            pl.col("name").cast(pl.String).alias("launch_name"),
            pl.col("ts_ns").alias("launch_ts_ns"),
            pl.col("end_ns").alias("launch_end_ns"),
            pl.col("tid").alias("launch_tid"),
        )
        .unique("correlation", keep="last", maintain_order=True)
        .collect()
        .join(host_steps.rename({"id": "launch_id"}), on="launch_id", how="left")
    )
    kernels = gpu.join(launches, on="correlation", how="left")
    context = _host_context(events, launches["launch_id"])
    kernels = kernels.join(context, on="launch_id", how="left")
    return kernels.select(
        [
            (pl.col(c).cast(pl.String).cast(t) if t == pl.Categorical else pl.col(c).cast(t))
            for c, t in KERNEL_COLUMNS.items()
        ]
    ).sort("ts_ns", maintain_order=True)
