"""Columns → linked frames: integer ns times, kinds, nesting, steps, and kernel-to-launch links.

Everything here works on whole columns: polars expressions, and numpy arrays indexed by row
number whose results are written back as aligned columns, so the wide events frame is never
filtered or joined as a whole (each would copy every column it carries). The only Python loops
run over nesting levels (a few dozen at most) and column batches, never over events.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from traceinsight.trace.iterations import Iterations
from traceinsight.trace.iterations import find as find_iterations
from traceinsight.trace.nesting import nest
from traceinsight.trace.schema import (
    DEVICE_EVENT_KINDS,
    EVENT_COLUMNS,
    GPU_KINDS,
    GPU_WORK_KINDS,
    KERNEL_COLUMNS,
    KIND_BY_CAT,
    KIND_DTYPE,
    KINDS,
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
    iterations: Iterations | None = None


# Times beyond ±2**62 ns (~146 years) cannot be real and would overflow end = ts + dur.
_MAX_NS = float(2**62)


def _to_ns(col: str, origin_us: float) -> pl.Expr:
    # Subtract in µs first: for absolute epoch µs the subtraction is exact and keeps ns digits.
    value = ((pl.col(col) - origin_us) * 1000.0).round(0)
    return pl.when(value.abs() < _MAX_NS).then(value).cast(pl.Int64)


_KIND_BY_LOWER_CAT = {cat.lower(): kind for cat, kind in KIND_BY_CAT.items()}
_HOST_STEP_KINDS = ("cpu_op", "user_annotation", "other")


def _kinds(times: pl.DataFrame) -> pl.Series:
    """Each event's kind, from its cat and whether its name is a step's.

    Worked out once per distinct (cat, is-step) pair, a dozen rows, and joined back on the
    categorical codes: the string work on every row took 0.4 s for 1.6M events.
    """
    keyed = times.select(
        "cat", step=pl.col("name").cat.starts_with(PROFILER_STEP_PREFIX).fill_null(False)
    )
    table = keyed.unique().with_columns(kind=_kind_expr(pl.col("step")))
    kinds = keyed.join(
        table, on=["cat", "step"], how="left", maintain_order="left", nulls_equal=True
    ).get_column("kind")
    cats = {cat for cat, _ in DEVICE_EVENT_KINDS}
    if not table["cat"].cast(pl.String).is_in(list(cats)).any():
        return kinds
    # Categories that mix kinds (MTIA's device events): the event's name decides.
    pairs = pl.DataFrame(
        {"cat": [c for c, _ in DEVICE_EVENT_KINDS], "name": [n for _, n in DEVICE_EVENT_KINDS], "_k": list(DEVICE_EVENT_KINDS.values())}
    )
    named = times.select(pl.col("cat").cast(pl.String), pl.col("name").cast(pl.String)).join(
        pairs, on=["cat", "name"], how="left", maintain_order="left"
    )["_k"]
    return pl.select(pl.coalesce(named, kinds)).to_series().alias("kind")


def _kind_expr(is_step: pl.Expr) -> pl.Expr:
    cat = pl.col("cat").cast(pl.String).str.to_lowercase()
    mapped = cat.replace_strict(_KIND_BY_LOWER_CAT, default=None, return_dtype=pl.String)
    # A step is a step by its name, whatever host category wrote it (2021-era: "Operator").
    host = mapped.is_null() | mapped.is_in(_HOST_STEP_KINDS)
    return (
        pl.when(is_step & host)
        .then(pl.lit("user_annotation"))
        .when(mapped.is_not_null())
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


def _device_from_pid_label(pid_labels: dict[int, str]) -> pl.Expr:
    """The device index named by a device timeline's text pid ("MTIA 0", "GPU 1"), if any."""
    indices = {}
    for pid, label in pid_labels.items():
        words = label.split()
        if len(words) >= 2 and words[-1].isdigit():
            indices[pid] = int(words[-1])
    if not indices:
        return pl.lit(None, dtype=pl.Int64)
    return pl.col("pid").replace_strict(indices, default=None, return_dtype=pl.Int64)


def link(
    durations: pl.DataFrame,
    counters: pl.DataFrame,
    memory: pl.DataFrame,
    base_time_ns: int | None,
    pid_labels: dict[int, str] | None = None,
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
        warnings.append("trace has no baseTimeNanoseconds: times are relative to its first event")

    # Computed as a small frame of their own: adding columns to the reader's frame, which
    # arrives as one chunk per decoded piece, would make polars copy all of it into one chunk.
    # (Even a select on that frame rechunks all of it, so its columns are taken one by one.)
    times = pl.DataFrame([durations.get_column(c) for c in ("ts", "dur", "cat", "name")]).select(
        ts=pl.when(((pl.col("ts") - origin_us) * 1000.0).abs() < _MAX_NS).then(pl.col("ts")),
        dur=pl.when((pl.col("dur") * 1000.0).abs() < _MAX_NS).then(pl.col("dur")),
        cat=pl.col("cat"),
        name=pl.col("name"),
    )
    missing_ts = times["ts"].null_count()
    if missing_ts:
        warnings.append(f"{missing_ts} events without a usable timestamp were ignored")
    missing_dur = times["dur"].null_count()
    if missing_dur:
        warnings.append(
            f"{missing_dur} duration events had no usable 'dur'; treated as instantaneous"
        )
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
    ).with_columns(kind=_kinds(times))
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
        device=pl.when(is_gpu).then(
            pl.coalesce(
                pl.col("device"),
                pl.when(pl.col("pid") >= 0).then(pl.col("pid")),
                _device_from_pid_label(pid_labels or {}),
            )
        ),
        stream=pl.when(is_gpu).then(pl.coalesce(pl.col("stream"), pl.col("tid"))),
    )
    # From here on, per-event work runs on numpy arrays indexed by row number (= id), and
    # results are written into aligned columns: filters and joins of the wide frame would
    # copy every column they carry.
    n = events.height
    kind = events["kind"].to_physical().to_numpy()
    is_host = ~np.isin(kind, _codes(GPU_KINDS))
    is_python = kind == _codes({"python"})[0]

    # python_function frames get a tree of their own: record_function and ProfilerStep spans
    # open inside one Python frame and close inside another, so the two never nest together.
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.full(n, -1, dtype=np.int32)
    improper = 0
    for rows in (np.flatnonzero(is_host & ~is_python), np.flatnonzero(is_python)):
        improper += nest(events, rows, parent, depth)
    if improper:
        warnings.append(
            f"{improper} host events overlap a sibling without nesting; their parent is approximate"
        )
    events = events.with_columns(
        parent=_nullable("parent", parent, parent >= 0), depth=_nullable("depth", depth, depth >= 0)
    )

    spans = step_spans(events)
    step, has_step = _host_steps(events, spans, is_host)
    kernels = _kernels(events, kind, parent, step, has_step)
    iterations = None
    if spans.height == 0 and kernels.height:
        # No ProfilerStep: the loop's own repeating unit stands in for steps.
        iterations = find_iterations(
            events,
            kernels["launch_id"].fill_null(-1).to_numpy(),
            np.isin(kind, _codes({"cpu_op", "user_annotation"})),
            parent,
            depth,
            kernels["id"].to_numpy(),
        )
        if iterations is not None:
            step, has_step = _host_steps(events, iterations.spans, is_host)
            launch_rows = kernels["launch_id"].fill_null(0).to_numpy()
            launched = kernels["launch_id"].is_not_null().to_numpy() & has_step[launch_rows]
            kernels = kernels.with_columns(step=_nullable("step", step[launch_rows], launched))
    del is_python
    unlaunched = kernels["launch_id"].null_count() if kernels.height else 0
    if unlaunched:
        # Work launched before the window runs on its stream before every work whose launch
        # was traced (the host runs ahead, streams run in order). Work after a linked one on
        # its stream cannot have been: it lacks the link (no correlation id, as some device
        # backends write), which says nothing about when it was launched.
        linked = kernels.filter(pl.col("launch_id").is_not_null())
        first = linked.group_by("device", "stream").agg(pl.col("ts_ns").min().alias("_first"))
        orphans = kernels.filter(pl.col("launch_id").is_null()).join(first, on=["device", "stream"], how="left")
        before = orphans.filter(pl.col("_first").is_null() | (pl.col("ts_ns") < pl.col("_first"))).height
        if before:
            warnings.append(
                f"{before} GPU events were launched before the trace window opened "
                "(no launch call in the trace); they have no host context"
            )
        if unlaunched - before:
            warnings.append(
                f"{unlaunched - before} GPU events have no launch call linked although work launched "
                "in the trace ran before them on their stream (no correlation id matches one); they have no host context"
            )
    if kernels.height:
        # GPU work belongs to the step of the host call that launched it.
        kernel_rows = kernels["id"].to_numpy()
        step[kernel_rows] = kernels["step"].fill_null(-1).to_numpy()
        has_step[kernel_rows] = kernels["step"].is_not_null().to_numpy()
    events = events.with_columns(step=_nullable("step", step, has_step))
    del kind, is_host, parent, depth, step, has_step

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
    return LinkResult(events, kernels, counters_out, memory_out, origin_us, warnings, iterations)


def _codes(kinds: frozenset[str] | set[str]) -> list[int]:
    """Physical codes of ``kinds`` in the kind Enum."""
    return [KINDS.index(k) for k in kinds]


def _nullable(name: str, values: np.ndarray | pl.Series, valid: np.ndarray) -> pl.Series:
    """``values`` as a polars column, null where ``valid`` is False."""
    return (
        pl.select(pl.when(pl.Series(valid)).then(pl.Series(name, values))).to_series().alias(name)
    )


def step_spans(events: pl.DataFrame) -> pl.DataFrame:
    """ProfilerStep#N host spans, one row per step: step, host_start_ns, host_end_ns, by start."""
    name = pl.col("name").cast(pl.String)
    # Filter on the kind first: the name test casts to strings, which only a few rows need.
    annotations = events.select("kind", "name", "ts_ns", "end_ns").filter(
        pl.col("kind") == "user_annotation"
    )
    return (
        annotations.filter(name.str.starts_with(PROFILER_STEP_PREFIX))
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


# Columns gathered per polars call: polars runs the columns of one call in parallel, and the
# sources of a batch are freed before the next starts, so the transient copy stays small.
_GATHER_BATCH = 4


def _gather_freeing(columns: list[pl.Series], order: pl.Series) -> pl.DataFrame:
    """A frame of ``columns`` with rows taken in ``order``, a few columns at a time.

    ``columns`` is emptied as it goes, so with no other reference held each source column is
    freed once gathered: a whole-frame gather would hold two copies of every column at its
    peak, this holds two copies of a few. All-null columns (NCCL fields in a one-GPU trace,
    say) are made anew instead of gathered.
    """
    n = order.len()
    names = [c.name for c in columns]
    done: dict[str, pl.Series] = {}
    columns.reverse()
    while columns:
        batch: list[pl.Series] = []
        while columns and len(batch) < _GATHER_BATCH:
            column = columns.pop()
            if column.null_count() == column.len():
                done[column.name] = pl.Series(column.name, dtype=column.dtype).extend_constant(None, n)
            else:
                # one chunk first: a gather from the reader's hundred chunks (one or two per
                # piece) costs three times as much as the copy and a gather from one
                batch.append(column.rechunk())
            del column
        if batch:
            gathered = pl.DataFrame(batch).select(pl.all().gather(order))
            del batch
            done.update((c.name, c) for c in gathered.get_columns())
            del gathered
    return pl.DataFrame([done.pop(name) for name in names])


def _host_steps(
    events: pl.DataFrame, spans: pl.DataFrame, is_host: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Step number of each host event inside a step span (step, host_start_ns, host_end_ns,
    by start), and which events have one.

    A host event belongs to the latest step that started at or before it, while that step
    is still open.
    """
    n = events.height
    step = np.full(n, -1, dtype=np.int64)
    has_step = np.zeros(n, dtype=bool)
    if spans.height == 0:
        return step, has_step
    starts = spans["host_start_ns"].to_numpy()
    ends = spans["host_end_ns"].to_numpy()
    ts = events["ts_ns"].to_numpy()
    span = np.searchsorted(starts, ts, side="right") - 1
    has_step[:] = is_host & (span >= 0)
    np.maximum(span, 0, out=span)
    has_step &= ts < ends[span]
    step[has_step] = spans["step"].to_numpy()[span[has_step]]
    return step, has_step


def host_context(
    parents: np.ndarray, is_op: np.ndarray, is_annotation: np.ndarray, launches: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each launch call (row number, -1 for none): its innermost cpu_op, outermost cpu_op
    and innermost annotation, as row numbers (-1 for none).

    Climbs the host nesting (``parents``) from every launch at once, one level per pass, with
    array gathers; the passes number the nesting depth (tens), never the events.
    """
    op = np.full(len(launches), -1, dtype=np.int64)
    top = np.full(len(launches), -1, dtype=np.int64)
    annotation = np.full(len(launches), -1, dtype=np.int64)
    rows = np.flatnonzero(launches >= 0)
    current = parents[launches[rows]]
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
    return op, top, annotation


def _kernels(
    events: pl.DataFrame,
    kind: np.ndarray,
    parent: np.ndarray,
    step: np.ndarray,
    has_step: np.ndarray,
) -> pl.DataFrame:
    """GPU work joined to its launch call (by correlation) and that call's host context.

    Built column by column from row numbers, so the wide events frame is never filtered or
    joined as a whole.
    """
    gpu_rows = np.flatnonzero(np.isin(kind, _codes(GPU_WORK_KINDS)))
    if gpu_rows.size == 0:
        return pl.DataFrame(schema=KERNEL_COLUMNS)
    # cudaGraphLaunch starts many kernels under one correlation; when a runtime and a driver
    # call share a correlation, the later-starting (inner) one is the launch.
    is_launch = pl.Series(np.isin(kind, _codes(LAUNCH_KINDS)))
    launches = (
        events.select("id", "correlation")
        .filter(is_launch & pl.col("correlation").is_not_null())
        .unique("correlation", keep="last", maintain_order=True)
        .rename({"id": "launch_id"})
    )
    gpu = pl.DataFrame({"row": gpu_rows, "correlation": events["correlation"].gather(gpu_rows)})
    launch = gpu.join(launches, on="correlation", how="left", maintain_order="left")["launch_id"]
    launch_rows = launch.fill_null(-1).to_numpy()
    has_launch = launch_rows >= 0

    cpu_op, user_annotation = _codes({"cpu_op"})[0], _codes({"user_annotation"})[0]
    is_annotation = kind == user_annotation
    annotation_rows = np.flatnonzero(is_annotation)
    is_step_span = (
        events["name"]
        .gather(annotation_rows)
        .cast(pl.String)
        .str.starts_with(PROFILER_STEP_PREFIX)
        .fill_null(False)
    )
    is_annotation[annotation_rows[is_step_span.to_numpy()]] = False
    op, top, annotation = host_context(parent, kind == cpu_op, is_annotation, launch_rows)

    def at(column: str, rows: np.ndarray, alias: str) -> pl.Series:
        valid = rows >= 0
        return _nullable(alias, events[column].gather(np.where(valid, rows, 0)), valid)

    own = [events[c].gather(gpu_rows) for c in KERNEL_COLUMNS if c in events.columns]
    launch_or_first = np.where(has_launch, launch_rows, 0)
    launch_step = step[launch_or_first]
    launch_has_step = has_launch & has_step[launch_or_first]
    derived = [
        launch.alias("launch_id"),
        at("name", launch_rows, "launch_name"),
        at("ts_ns", launch_rows, "launch_ts_ns"),
        at("end_ns", launch_rows, "launch_end_ns"),
        at("tid", launch_rows, "launch_tid"),
        _nullable("op_id", op, op >= 0),
        at("name", op, "op_name"),
        _nullable("top_op_id", top, top >= 0),
        at("name", top, "top_op_name"),
        _nullable("annotation_id", annotation, annotation >= 0),
        at("name", annotation, "annotation"),
        _nullable("step", launch_step, launch_has_step),
    ]
    kernels = pl.DataFrame(own + derived)
    return kernels.select(
        [
            (
                pl.col(c).cast(pl.String).cast(t)
                if t == pl.Categorical and kernels.schema[c] != pl.Categorical
                else pl.col(c).cast(t)
            )
            for c, t in KERNEL_COLUMNS.items()
        ]
    )
