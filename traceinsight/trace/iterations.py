"""Iterations of a trace recorded without ``ProfilerStep`` spans.

Inference and decode loops are usually profiled with a plain ``with profile():`` around the
loop, and serving engines never call ``prof.step()``, so the trace has no step spans. The loop
is still there, and this module finds its repeating unit so that every per-step analysis can
use it:

1. **A repeated span.** On the thread that launched most GPU work, a host span (a
   ``record_function`` such as ``decode_step``, or an op such as vLLM's ``execute_model``) whose
   name occurs at least ``MIN_ITERATIONS`` times without overlapping itself, and whose
   occurrences together launched at least ``MIN_COVERAGE`` of that thread's GPU work. When
   several names qualify (``decode_step`` holding ``forward`` holding a layer), the one with the
   fewest occurrences is the outermost repeating level; a span that occurs once or twice (the
   whole ``generate`` call) is the run, not its iteration.
2. **A periodic launch sequence.** Without such a span (HF ``generate`` launches each token's
   forward from bare aten ops), the names of the kernels that thread launched, in launch order,
   are searched for a period: a kernel name that occurs at least ``MIN_ITERATIONS`` times at a
   near-constant distance (in kernels) whose occurrences cover ``MIN_COVERAGE`` of the sequence.
   The fewest-occurring such name marks the outermost period, and each iteration starts at the
   top-level host call that launched one of its occurrences.
3. Otherwise there are no iterations.

An iteration that launched ``PREFILL_FACTOR`` times the median iteration's threads (grid x
block) is labelled *prefill*, a prompt's prefill before the per-token decode; the first one
is also when its GPU work took that many times the median's time. Only python_function frames
are not searched for spans: launches never nest inside them in the host tree.

Everything runs on numpy arrays indexed by row number and small polars group-bys; the only
Python loops run over nesting levels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

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
PERIODIC_SOURCE = "periodic kernels"


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
        """``repeated span decode_step`` or ``periodic kernels``."""
        return f"{self.source} {self.name}" if self.source == SPAN_SOURCE else self.source


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
    found = _repeated_span(events, rows, is_span, parent, depth, (main[0], main[1]), pid, tid)
    if found is None:
        found = _periodic(events, rows, gpu_rows[on_main], parent)
    if found is None:
        return None
    source, name, spans = found
    spans = spans.sort("host_start_ns").with_columns(step=pl.int_range(pl.len(), dtype=pl.Int64))
    return Iterations(source, name, spans, _prefill(events, spans, rows, gpu_rows[on_main]))


def describe(source: str | None, count: int, prefill: tuple[int, ...] = ()) -> str:
    """One line on the steps and where they came from, for the overview and steps views."""
    if source is None or count == 0:
        return "none recorded (no ProfilerStep spans, no repeating iteration found)"
    if source == "ProfilerStep":
        return f"{count} ProfilerStep"
    if source.startswith(SPAN_SOURCE):
        name = source.removeprefix(SPAN_SOURCE).strip()
        text = f"iterations: {count} \u00d7 {name} (found from a repeated span, no ProfilerStep)"
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
    if names.height == 0:
        return None
    name = names["name"][0]
    chosen = outer.filter(pl.col("name") == name).select("host_start_ns", "host_end_ns")
    return SPAN_SOURCE, str(name), chosen


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
