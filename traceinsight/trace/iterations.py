"""Iterations of a trace recorded without ``ProfilerStep`` spans.

Inference and decode loops are usually profiled with a plain ``with profile():`` around the
loop, and serving engines never call ``prof.step()``, so the trace has no step spans. The loop
is still there, and this module finds its repeating unit so that every per-step analysis can
use it:

1. **A repeated span.** On the thread that launched most GPU work, a host span (a
   ``record_function`` such as ``decode_step``, or an op such as vLLM's ``execute_model``) whose
   name occurs at least ``MIN_ITERATIONS`` times without overlapping itself, and whose
   occurrences together launched at least ``MIN_COVERAGE`` of that thread's GPU work, and held
   (by time) that share of the work every thread launched. When several names qualify
   (``decode_step`` holding ``forward`` holding a layer), the one with the fewest occurrences
   is the outermost repeating level; a span that occurs once or twice (the whole ``generate``
   call) is the run, not its iteration.
2. **A repeated top-level call.** A training loop has no span around its iteration: the
   backward runs on autograd's own thread, where ``ConvolutionBackward0`` recurs once per
   layer. Its iterations are marked by top-level calls that recur once per iteration (the
   DataLoader's ``__next__``, ``Optimizer.step``): a name whose occurrences cut the launched
   work, all threads', into alike stretches. It replaces a repeated span when it occurs fewer
   times (the outer level).
3. **A periodic launch sequence.** Without either (HF ``generate`` launches each token's
   forward from bare aten ops), the names of the kernels every thread launched, in launch
   order, are searched for a period (a training loop's backward thread alone repeats per
   layer): a kernel name that occurs at least ``MIN_ITERATIONS`` times at a
   near-constant distance (in kernels) whose occurrences cover ``MIN_COVERAGE`` of the sequence.
   The fewest-occurring such name marks the outermost period, and each iteration starts at the
   top-level host call that launched one of its occurrences.
4. Otherwise there are no iterations.

An iteration that launched ``PREFILL_FACTOR`` times the median iteration's threads (grid x
block) is labelled *prefill*, a prompt's prefill before the per-token decode; the first one
is also when its GPU work took that many times the median's time. A training loop (backward
or optimizer in the trace) has no prefill: its heavy first iteration is a warm-up. Only
python_function frames are not searched for spans: launches never nest inside them in the
host tree.

Everything runs on numpy arrays indexed by row number and small polars group-bys; the only
Python loops run over nesting levels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from traceinsight.trace.training import training_evidence

MIN_ITERATIONS = 3
# "Most" of the thread's launched GPU work (kernel count) must lie inside the iterations.
MIN_COVERAGE = 0.5
# A periodic anchor: this share of its gaps within PERIOD_TOLERANCE of the median gap.
PERIOD_REGULARITY = 0.9
PERIOD_TOLERANCE = 0.1
MULTIPLE_SLACK = 0.01
# A first iteration whose launched GPU time is this many times the median's is a prefill.
PREFILL_FACTOR = 2.0

# Operator names: namespace::op (aten::mm, c10d::allreduce_, _C::rms_norm, vllm::...).
OPERATOR_NAME = r"^[A-Za-z_][\w.]*::\w"

SPAN_SOURCE = "repeated span"
MARKER_SOURCE = "repeated call"
PERIODIC_SOURCE = "periodic kernels"
# An edge stretch (before the first marker, after the last) with this share of the median
# iteration's launches is an iteration of its own; less is set-up or tear-down.
EDGE_SHARE = 0.5


@dataclass(frozen=True)
class Iterations:
    """How the iterations were found and their host spans.

    ``spans``: step (0, 1, ...), host_start_ns, host_end_ns, by start; ``prefill``: the steps
    labelled prefill.
    """

    source: str
    name: str
    spans: pl.DataFrame
    prefill: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "name": self.name,
            "prefill": list(self.prefill),
            **{c: self.spans[c].to_list() for c in ("step", "host_start_ns", "host_end_ns")},
        }

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Iterations:
        spans = pl.DataFrame(
            {c: data[c] for c in ("step", "host_start_ns", "host_end_ns")},
            schema={"step": pl.Int64, "host_start_ns": pl.Int64, "host_end_ns": pl.Int64},
        )
        return Iterations(str(data["source"]), str(data["name"]), spans, tuple(data.get("prefill", ())))

    @property
    def label(self) -> str:
        """``repeated span decode_step``, ``repeated call Optimizer.step#SGD.step`` or
        ``periodic kernels``."""
        return f"{self.source} {self.name}" if self.source in (SPAN_SOURCE, MARKER_SOURCE) else self.source


def find(
    events: pl.DataFrame,
    launch_rows: np.ndarray,
    is_span: np.ndarray,
    parent: np.ndarray,
    depth: np.ndarray,
    gpu_rows: np.ndarray,
) -> Iterations | None:
    """The iterations of a trace without ProfilerStep spans, or None.

    ``launch_rows``: for each GPU work item, the row of its launch call (-1 for none);
    ``is_span``: the rows that may be an iteration (record_function annotations and
    CPU ops); ``parent`` and ``depth``: the host op tree (python frames have their own); ``gpu_rows``: each GPU work item's own row.
    """
    launched = launch_rows >= 0
    if launched.sum() < MIN_ITERATIONS:
        return None
    pid = events["pid"].to_numpy()
    tid = events["tid"].to_numpy()
    # The thread that launched most GPU work drives the loop.
    keys = pl.DataFrame({"pid": pid[launch_rows[launched]], "tid": tid[launch_rows[launched]]})
    main = keys.group_by("pid", "tid").len().sort("len", "pid", "tid", descending=[True, False, False]).row(0)
    on_main = launched.copy()
    on_main[launched] = (keys["pid"].to_numpy() == main[0]) & (keys["tid"].to_numpy() == main[1])
    rows = launch_rows[on_main]
    all_rows = launch_rows[launched]
    found = _repeated_span(events, rows, all_rows, is_span, parent, depth, (main[0], main[1]), pid, tid)
    marker = _marker(events, all_rows, is_span, parent, depth)
    # The outermost repeating level wins: a top-level call once per iteration (the optimizer
    # step) over a span that repeats inside one (a backward node on autograd's thread).
    if marker is not None and (found is None or marker[2].height < found[2].height):
        found = marker
    if found is None:
        found = _periodic(events, all_rows, gpu_rows[launched], parent)
    if found is None:
        return None
    source, name, spans = found
    spans = spans.sort("host_start_ns").with_columns(step=pl.int_range(pl.len(), dtype=pl.Int64))
    # A training loop's heavy first iteration is a warm-up (cuDNN's search, allocation), never
    # a prompt's prefill: prefill is a decode loop's notion.
    prefill = () if training_evidence(events) is not None else _prefill(events, spans, rows, gpu_rows[on_main])
    return Iterations(source, name, spans, prefill)


def describe(source: str | None, count: int, prefill: tuple[int, ...] = ()) -> str:
    """One line on the steps and where they came from, for the overview and steps views."""
    if source is None or count == 0:
        return "none recorded (no ProfilerStep spans, no repeating iteration found)"
    if source == "ProfilerStep":
        return f"{count} ProfilerStep"
    if source.startswith(SPAN_SOURCE):
        name = source.removeprefix(SPAN_SOURCE).strip()
        text = f"iterations: {count} \u00d7 {name} (found from a repeated span, no ProfilerStep)"
    elif source.startswith(MARKER_SOURCE):
        name = source.removeprefix(MARKER_SOURCE).strip()
        text = f"iterations: {count}, one per {name} (found from a top-level call, no ProfilerStep)"
    else:
        text = f"iterations: {count} (found from a periodic kernel sequence, no ProfilerStep)"
    if prefill:
        text += f"; prefill: {', '.join(map(str, prefill))}"
    return text


def _inclusive_counts(rows: np.ndarray, parent: np.ndarray, depth: np.ndarray, n: int) -> np.ndarray:
    """For every row, how many of ``rows`` (launch calls, repeats counted) nest inside it or
    are it: accumulated from the deepest level up, one pass per level."""
    counts = np.bincount(rows, minlength=n).astype(np.float64)
    nested = np.flatnonzero(parent >= 0)
    if nested.size == 0:
        return counts.astype(np.int64)
    order = nested[np.argsort(-depth[nested], kind="stable")]
    levels = depth[order]
    bounds = np.flatnonzero(np.diff(levels)) + 1
    for level_rows in np.split(order, bounds):
        counts += np.bincount(parent[level_rows], weights=counts[level_rows], minlength=n)
    return counts.astype(np.int64)


def _repeated_span(
    events: pl.DataFrame,
    rows: np.ndarray,
    all_rows: np.ndarray,
    is_span: np.ndarray,
    parent: np.ndarray,
    depth: np.ndarray,
    main: tuple[int, int],
    pid: np.ndarray,
    tid: np.ndarray,
) -> tuple[str, str, pl.DataFrame] | None:
    n = events.height
    counts = _inclusive_counts(rows, parent, depth, n)
    total = rows.size
    candidates = np.flatnonzero(is_span & (counts > 0) & (pid == main[0]) & (tid == main[1]))
    if candidates.size < MIN_ITERATIONS:
        return None
    spans = pl.DataFrame(
        {
            "name": events["name"].gather(candidates),
            "host_start_ns": events["ts_ns"].gather(candidates),
            "host_end_ns": events["end_ns"].gather(candidates),
            "depth": depth[candidates],
            "launches": counts[candidates],
        }
    ).sort("host_start_ns", "depth")
    # An operator (aten::mm, vllm::unified_attention) is a piece of an iteration, never its
    # loop body, however often it repeats: one forward pass calls aten::linear per layer.
    # (Tested once per distinct name.)
    distinct = spans.select(pl.col("name").unique())
    operators = distinct.filter(pl.col("name").cast(pl.String).str.contains(OPERATOR_NAME))["name"]
    spans = spans.filter(~pl.col("name").is_in(operators.implode()))
    # Outermost occurrences only: one nested in an earlier one of its name is part of it.
    earlier_end = pl.col("host_end_ns").cum_max().shift(1).over("name")
    outer = spans.filter(earlier_end.is_null() | (pl.col("host_start_ns") >= earlier_end))
    names = (
        outer.group_by("name")
        .agg(
            occurrences=pl.len(),
            launches=pl.col("launches").sum(),
            mean_depth=pl.col("depth").mean(),
            mean_dur_ns=(pl.col("host_end_ns") - pl.col("host_start_ns")).mean(),
        )
        .filter((pl.col("occurrences") >= MIN_ITERATIONS) & (pl.col("launches") >= MIN_COVERAGE * total))
        # the outermost repeating level: fewest occurrences, then the shallowest and longest
        .sort(["occurrences", "mean_depth", "mean_dur_ns"], descending=[False, False, True])
    )
    # The spans must also hold most of the work every thread launched, by time: a backward
    # node on autograd's thread holds most of that thread's launches but none of the forward's
    # or the optimizer's, which the main thread launches between its occurrences.
    launch_ts = np.sort(events["ts_ns"].to_numpy()[all_rows])
    for name in names["name"]:
        chosen = outer.filter(pl.col("name") == name).select("host_start_ns", "host_end_ns")
        inside = _launches_inside(launch_ts, chosen["host_start_ns"].to_numpy(), chosen["host_end_ns"].to_numpy())
        if inside.sum() >= MIN_COVERAGE * launch_ts.size:
            return SPAN_SOURCE, str(name), chosen
    return None


def _launches_inside(launch_ts: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each span (sorted, not overlapping), how many of the sorted ``launch_ts`` fall in it."""
    return np.searchsorted(launch_ts, ends, side="left") - np.searchsorted(launch_ts, starts, side="left")


def _marker(
    events: pl.DataFrame, all_rows: np.ndarray, is_span: np.ndarray, parent: np.ndarray, depth: np.ndarray
) -> tuple[str, str, pl.DataFrame] | None:
    """Iterations cut at a top-level call that recurs once per iteration, on any thread.

    A training loop without ProfilerStep has no span around its iteration: the forward runs on
    the main thread, the backward on autograd's own, and each iteration is marked only by
    calls that recur once per iteration (the DataLoader's ``__next__``, ``Optimizer.step``, a
    top-level annotation). A candidate is top-level (nested in no other host op or annotation:
    the layers inside a wrapper that runs once, such as vLLM's ``capture_8192_PIECEWISE``
    around one forward, are pieces of that call) and no operator. A name qualifies when it
    recurs at least ``MIN_ITERATIONS`` times and the stretches between its occurrences launched
    alike work (kernel count within ``PERIOD_TOLERANCE`` of the median on
    ``PERIOD_REGULARITY`` of them). The fewest occurrences is the outermost level; of names as
    frequent, the one with the least work before its first occurrence starts the iterations
    (the DataLoader's fetch, not the optimizer step at their end). Each iteration runs from one
    occurrence to the next; the work before the first and after the last is an iteration too
    when it launched at least ``EDGE_SHARE`` of the median's, else set-up or tear-down.
    """
    top = np.flatnonzero(is_span & (depth == 0))
    if top.size < MIN_ITERATIONS or all_rows.size < MIN_ITERATIONS:
        return None
    spans = pl.DataFrame(
        {
            "name": events["name"].gather(top),
            "host_start_ns": events["ts_ns"].gather(top),
            "host_end_ns": events["end_ns"].gather(top),
        }
    )
    distinct = spans.select(pl.col("name").unique())
    operators = distinct.filter(pl.col("name").cast(pl.String).str.contains(OPERATOR_NAME))["name"]
    spans = spans.filter(~pl.col("name").is_in(operators.implode())).sort("host_start_ns")
    earlier_end = pl.col("host_end_ns").cum_max().shift(1).over("name")
    outer = spans.filter(earlier_end.is_null() | (pl.col("host_start_ns") >= earlier_end))
    names = (
        outer.group_by("name")
        .agg(occurrences=pl.len(), first_ns=pl.col("host_start_ns").min())
        .filter(pl.col("occurrences") >= MIN_ITERATIONS)
        .sort("occurrences", "first_ns")
    )
    if names.height == 0:
        return None
    launch_ts = events["ts_ns"].to_numpy()[all_rows]
    order = np.argsort(launch_ts, kind="stable")
    launch_ts = launch_ts[order]
    # The work before the first occurrence starts at its top-level host call, like a periodic
    # iteration's; the work after the last ends with the last top-level call's end.
    roots = _roots(all_rows[order], parent)
    root_start = events["ts_ns"].to_numpy()[roots]
    work_start, work_end = int(root_start.min()), int(events["end_ns"].to_numpy()[roots].max())
    best: tuple[int, int, str, pl.DataFrame] | None = None
    for name, occurrences in zip(names["name"], names["occurrences"], strict=True):
        if best is not None and occurrences > best[0]:
            break
        starts = outer.filter(pl.col("name") == name)["host_start_ns"].to_numpy()
        cut = _cut(launch_ts, starts, work_start, work_end)
        if cut is None:
            continue
        before = int(np.searchsorted(launch_ts, starts[0], side="left"))
        if best is None or before < best[1]:
            best = (int(occurrences), before, str(name), cut)
    if best is None:
        return None
    return MARKER_SOURCE, best[2], best[3]


def _cut(launch_ts: np.ndarray, starts: np.ndarray, work_start: int, work_end: int) -> pl.DataFrame | None:
    """The iterations between successive ``starts`` (and the edge ones), or None when the
    stretches between them are not alike or hold too little of the work."""
    bounds = np.concatenate(([min(work_start, starts[0])], starts, [max(work_end, starts[-1])]))
    counts = _launches_inside(launch_ts, bounds[:-1], bounds[1:])
    # the last stretch ends at the work's end: a launch at that very instant is inside it
    counts[-1] += int(np.sum(launch_ts == bounds[-1]))
    inner = counts[1:-1]
    median = float(np.median(inner))
    if median <= 0:
        return None
    steady = np.abs(inner - median) <= PERIOD_TOLERANCE * median
    if steady.mean() < PERIOD_REGULARITY:
        return None
    keep = np.ones(counts.size, dtype=bool)
    keep[0] = counts[0] >= EDGE_SHARE * median
    keep[-1] = counts[-1] >= EDGE_SHARE * median
    if counts[keep].sum() < MIN_COVERAGE * launch_ts.size or keep.sum() < MIN_ITERATIONS:
        return None
    return pl.DataFrame(
        {"host_start_ns": bounds[:-1][keep], "host_end_ns": bounds[1:][keep]},
        schema={"host_start_ns": pl.Int64, "host_end_ns": pl.Int64},
    )


def _periodic(
    events: pl.DataFrame, rows: np.ndarray, gpu_rows: np.ndarray, parent: np.ndarray
) -> tuple[str, str, pl.DataFrame] | None:
    """Iterations from a kernel name that recurs at a steady distance in the launch order."""
    if rows.size < 2 * MIN_ITERATIONS:
        return None
    ts = events["ts_ns"].to_numpy()
    # Launch order; the kernels of one graph launch run in their recorded order.
    order = np.lexsort((ts[gpu_rows], ts[rows]))
    rows, gpu_rows = rows[order], gpu_rows[order]
    names = events["name"].gather(gpu_rows)
    codes = (names.to_physical() if names.dtype == pl.Categorical else names.cast(pl.String).rank("dense")).cast(pl.Int64)
    size = rows.size
    # Each iteration starts at the top-level host call holding its anchor's launch.
    roots = _roots(rows, parent)
    start_ns = events["ts_ns"].to_numpy()[roots]
    seq = pl.DataFrame({"code": codes, "pos": np.arange(size, dtype=np.int64), "root_ns": start_ns})
    gap = pl.col("pos").diff().over("code")
    anchors = (
        seq.with_columns(gap=gap, apart=pl.col("root_ns").diff().over("code"))
        .with_columns(period=pl.col("gap").median().over("code"))
        .group_by("code")
        .agg(
            occurrences=pl.len(),
            first=pl.col("pos").min(),
            tail=size - pl.col("pos").max(),
            period=pl.col("period").first(),
            # the share of the name's span covered by gaps near the median: a per-layer
            # kernel's long gap over the embedding and head weighs what it covers
            steady=pl.col("gap").filter((pl.col("gap") - pl.col("period")).abs() <= PERIOD_TOLERANCE * pl.col("period")).sum()
            / pl.col("gap").sum(),
            # one kernel per top-level call: a per-layer kernel inside one graph replay is not
            # an iteration's start, however steady its period
            apart=(pl.col("apart").drop_nulls() > 0).all(),
        )
        .filter(
            (pl.col("occurrences") >= MIN_ITERATIONS)
            & (pl.col("period") >= 2)
            & (pl.col("steady") >= PERIOD_REGULARITY)
            & pl.col("apart")
            # its last occurrence starts a whole iteration, not a few stray kernels at the end
            & (pl.col("tail") >= (1 - PERIOD_TOLERANCE) * pl.col("period"))
            & (pl.col("occurrences") * pl.col("period") >= MIN_COVERAGE * size)
        )
        .sort("first")
    )
    period = _fundamental_period(anchors["period"].to_numpy())
    if period is None:
        return None
    # Most names at that period recur once per iteration (a few also run before the loop or
    # after it): the commonest count is the iteration count, the earliest such name the phase.
    at_period = anchors.filter((pl.col("period") - period).abs() <= PERIOD_TOLERANCE * period)
    count = at_period["occurrences"].mode().sort()[-1]
    code = at_period.filter(pl.col("occurrences") == count)["code"][0]
    starts = seq.filter(pl.col("code") == code)["pos"].to_numpy()
    end_ns = events["end_ns"].to_numpy()[roots]
    first_pos = starts
    last_pos = np.append(starts[1:] - 1, min(size - 1, starts[-1] + period - 1))
    host_start = start_ns[first_pos]
    host_end = np.append(host_start[1:], np.maximum.accumulate(end_ns)[last_pos[-1]])
    host_end = np.maximum(host_end, host_start)
    spans = pl.DataFrame({"host_start_ns": host_start, "host_end_ns": host_end})
    return PERIODIC_SOURCE, str(names[int(first_pos[0])]), spans


def _fundamental_period(periods: np.ndarray) -> int | None:
    """The shortest steady period that every longer one is a whole multiple of.

    A kernel that recurs every 4 tokens (a cache that grows in chunks) has a steady period too,
    a whole number of the per-token one; a per-layer period is shorter, but the token's (layers
    plus embedding and head) is no whole multiple of it.
    """
    distinct = np.unique(periods)
    for period in distinct:
        longer = distinct[distinct > period * (1 + PERIOD_TOLERANCE)]
        off = np.abs(longer - np.round(longer / period) * period)
        # a whole run of a loop (one generate call among several) adds a few kernels of its
        # own before and after its iterations: 1 % of the longer period is let pass
        if np.all(off <= np.maximum(PERIOD_TOLERANCE * period, MULTIPLE_SLACK * longer)):
            return int(period)
    return None


def _far_above(values: np.ndarray) -> np.ndarray:
    median = float(np.median(values))
    return (values > PREFILL_FACTOR * median) & (median > 0)


def _threads(events: pl.DataFrame, gpu_rows: np.ndarray) -> np.ndarray:
    """Threads each GPU work item launched (grid x block), 0 where the trace has no shape."""
    if "grid" not in events.columns or "block" not in events.columns:
        return np.zeros(gpu_rows.size)
    shape = pl.DataFrame({"grid": events["grid"].gather(gpu_rows), "block": events["block"].gather(gpu_rows)})
    # three dimensions each (x, y, z); list.eval would cost seconds on a million kernels
    dims = [pl.col(c).list.get(i, null_on_oob=True).fill_null(1) for c in ("grid", "block") for i in range(3)]
    product = shape.select(
        pl.when(pl.col("grid").is_not_null() & pl.col("block").is_not_null())
        .then(pl.reduce(lambda a, b: a * b, dims).cast(pl.Float64))
        .otherwise(0.0)
    )
    return product.to_series().to_numpy()


def _roots(rows: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """The outermost host ancestor of each of ``rows``: climbed one nesting level per pass."""
    roots = rows.copy()
    up = parent[roots]
    while (alive := up >= 0).any():
        roots[alive] = up[alive]
        up = np.where(alive, parent[np.maximum(roots, 0)], -1)
    return roots


def _prefill(
    events: pl.DataFrame, spans: pl.DataFrame, rows: np.ndarray, gpu_rows: np.ndarray
) -> tuple[int, ...]:
    """Iterations that launched far more work than the median one: the first by GPU time or
    threads, any later one by threads (a new prompt in a run of several)."""
    if spans.height < MIN_ITERATIONS:
        return ()
    starts = spans["host_start_ns"].to_numpy()
    ends = spans["host_end_ns"].to_numpy()
    launch_ts = events["ts_ns"].to_numpy()[rows]
    span = np.searchsorted(starts, launch_ts, side="right") - 1
    inside = (span >= 0) & (launch_ts < ends[np.maximum(span, 0)])
    work_ns = np.bincount(span[inside], weights=events["dur_ns"].to_numpy()[gpu_rows][inside], minlength=spans.height)
    # Launched threads (grid x block) measure the work's size where GPU time does not: a
    # short prompt's prefill on a small model takes about as long as a decode step.
    threads = _threads(events, gpu_rows)
    size = np.bincount(span[inside], weights=threads[inside], minlength=spans.height)
    # The first iteration may stand out by its GPU time or by its size; a later one only by
    # its size: a slow iteration mid-run that launched ordinary work waited on something else.
    prefill = _far_above(size)
    prefill[0] |= bool(_far_above(work_ns)[0])
    return tuple(int(s) for s in spans["step"].to_numpy()[prefill])
