"""Leaks: sites whose held bytes grow from one iteration to the next.

Iterations are found from the trace itself: in a training or inference loop most sites allocate
once per step, at a steady pace over the whole loop. A stack is a candidate marker when it
allocates at least 3 times, its allocations span at least half the trace, and the events between
them vary little (coefficient of variation at most 0.25: a site allocating 4 times per step, in a
burst, is not one). The most common count among candidates is the number of iterations (between
equally common counts, the smaller), and each allocation of the earliest such stack starts one;
the iterations compared are the whole ones, from one such allocation to the next (what follows
the last one may be a step cut short by an error, or the program's teardown).
Without such a marker, or when the caller names a count, the trace is cut into equal slices of
time (``time_us``; event order where times are missing). A site's memory grows when its bytes
held at the end of each iteration never fall, end higher than they began, and rise in at least
half the steps (and in two at least). It leaks when it also holds more blocks alive at the last
end than at the first (memory kept across iterations); the same number of blocks, only bigger
(an input that doubles each iteration, the previous one freed), is growth, told apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.snapshot.replay import DeviceReplay, live_at

MIN_ITERATIONS = 3
DEFAULT_SLICES = 10
# A single rise is a step change (a cache filled once), not a leak.
MIN_GROWTHS = 2
MAX_COMPARED = 100
MAX_GAP_CV = 0.25


@dataclass(frozen=True)
class LeaksResult(Result):
    """``boundaries`` are the last event index of each iteration; ``leaks`` one row per growing
    site: ``growth_per_iteration_bytes``, ``first_bytes`` / ``last_bytes`` (held at the end of
    the first and last iteration), ``grew_in`` (iterations in which it rose), ``live_bytes``."""

    name: ClassVar[str] = "memory_leaks"
    device: int = 0
    iterations: int = 0
    method: str = ""
    boundaries: tuple[int, ...] = ()
    compared: int = 0  # iteration ends compared (all of them, up to MAX_COMPARED)
    leaks: pl.DataFrame | None = None
    # Sites whose held bytes grow while the number of their blocks alive does not: one block
    # replaced by a bigger one each iteration (a growing batch or cache), not memory kept.
    growing: pl.DataFrame | None = None

    def to_polars(self) -> pl.DataFrame:
        return self.leaks if self.leaks is not None else pl.DataFrame()


def iteration_boundaries(
    replay: DeviceReplay, iterations: int | None = None
) -> tuple[list[int], str]:
    """The last event index of each iteration, and how the iterations were found."""
    bounds, method, _ = find_iterations(replay, iterations)
    return bounds, method


def find_iterations(
    replay: DeviceReplay, iterations: int | None = None
) -> tuple[list[int], str, int | None]:
    """:func:`iteration_boundaries`, and the first event of the first whole iteration when
    they were found from a marker allocation (what comes before it came before the loop, or
    is a step cut short by the trace's start); None for slices of time."""
    levels = replay.levels
    if levels.is_empty():
        return [], "no recorded trace", None
    if iterations is None:
        starts, marker_site = _repeating_starts(replay.allocations)
        # Whole iterations only: from one marker to the next. What follows the last marker
        # may be an iteration cut short or the program's teardown freeing everything.
        if len(starts) > MIN_ITERATIONS:
            bounds = [s - 1 for s in starts[1:]]
            return (
                bounds,
                f"{len(bounds)} whole iterations, each starting at an allocation at {marker_site} (the earliest site allocating once per iteration at a steady pace); the events after the last one are left out",
                starts[0],
            )
        iterations = DEFAULT_SLICES
    slices = max(1, min(iterations, levels.height))
    return (
        _equal_slices(levels, slices),
        f"{slices} equal slices of {'time' if levels['time_us'].null_count() == 0 else 'event order'}",
        None,
    )


def _repeating_starts(allocations: pl.DataFrame) -> tuple[list[int], str | None]:
    made = allocations.filter((pl.col("alloc_idx") >= 0) & pl.col("stack_id").is_not_null())
    if made.is_empty():
        return [], None
    low, high = made["alloc_idx"].min(), made["alloc_idx"].max()
    extent = max(int(high) - int(low), 1)  # type: ignore[arg-type]
    gaps = pl.col("alloc_idx").sort().diff().drop_nulls()
    per_stack = made.group_by("stack_id").agg(
        pl.len().alias("n"),
        pl.col("alloc_idx").min().alias("first"),
        (pl.col("alloc_idx").max() - pl.col("alloc_idx").min()).alias("span"),
        (gaps.std(ddof=0) / gaps.mean()).alias("cv"),
    )
    repeated = per_stack.filter(
        (pl.col("n") >= MIN_ITERATIONS)
        & (pl.col("span") * 2 >= extent)
        & (pl.col("cv") <= MAX_GAP_CV)
    )
    if repeated.is_empty():
        return [], None
    # The most common count; between equally common counts, the smaller (whole iterations
    # rather than pieces of them).
    modes = repeated.group_by("n").len().sort(["len", "n"], descending=[True, False])
    count = int(modes["n"][0])
    marker = int(repeated.filter(pl.col("n") == count).sort("first")["stack_id"][0])
    marked = made.filter(pl.col("stack_id") == marker)
    starts = marked["alloc_idx"].sort().to_list()
    return starts, str(marked["site"][0])


def _equal_slices(levels: pl.DataFrame, slices: int) -> list[int]:
    order = levels["time_us"] if levels["time_us"].null_count() == 0 else levels["idx"]
    low, high = int(order.min()), int(order.max())  # type: ignore[arg-type]
    span = max(high - low, 1)
    # Each event goes to the slice its time falls in; a slice's boundary is its last event.
    bucket = ((order - low) * slices // span).clip(0, slices - 1)
    ends = (
        levels.with_columns(bucket.alias("slice"))
        .group_by("slice")
        .agg(pl.col("idx").max())
        .sort("slice")
    )
    return [int(i) for i in ends["idx"].to_list()]


def run(replay: DeviceReplay, iterations: int | None = None) -> LeaksResult:
    bounds, method = iteration_boundaries(replay, iterations)
    if len(bounds) < MIN_ITERATIONS:
        return LeaksResult(
            available=False,
            reason=f"too few iterations to see growth ({len(bounds)}; at least {MIN_ITERATIONS} needed)",
            device=replay.device,
            iterations=len(bounds),
            method=method,
            boundaries=tuple(bounds),
        )
    # Thousands of iterations (a marker allocating in every micro-step) are compared at most
    # MAX_COMPARED evenly spread ends: the table grows with sites x ends.
    picks = list(range(len(bounds)))
    if len(bounds) > MAX_COMPARED:
        picks = sorted(
            {round(i * (len(bounds) - 1) / (MAX_COMPARED - 1)) for i in range(MAX_COMPARED)}
        )
    compared = [bounds[i] for i in picks]
    live = live_at(replay.allocations, compared)
    steps = len(compared) - 1
    span = picks[-1] - picks[0]  # iterations between the first and the last end compared
    per_site = live.sort("point").group_by("site").agg(pl.col("live_bytes").alias("live_bytes"))
    diffs = pl.col("live_bytes").list
    leaks = (
        per_site.with_columns(
            diffs.first().alias("first_bytes"),
            diffs.last().alias("last_bytes"),
            diffs.eval(pl.element().diff().drop_nulls() > 0).list.sum().alias("grew_in"),
            diffs.eval(pl.element().diff().drop_nulls() < 0).list.any().alias("fell"),
        )
        .filter(
            ~pl.col("fell")
            & (pl.col("last_bytes") > pl.col("first_bytes"))
            & (pl.col("grew_in") >= max(MIN_GROWTHS, (steps + 1) // 2))
        )
        .select(
            "site",
            ((pl.col("last_bytes") - pl.col("first_bytes")) / span)
            .round(0)
            .cast(pl.Int64)
            .alias("growth_per_iteration_bytes"),
            "first_bytes",
            "last_bytes",
            pl.col("grew_in").cast(pl.Int64),
            "live_bytes",
        )
        .sort(["growth_per_iteration_bytes", "site"], descending=[True, False])
    )
    # A leak keeps memory alive across iterations: more blocks alive at its site at the last
    # end than at the first. The same count of blocks, only bigger, is growth.
    counted = live_at(
        replay.allocations.with_columns(pl.lit(1, pl.Int64).alias("size_bytes")), compared
    )
    blocks = (
        counted.sort("point")
        .group_by("site")
        .agg(
            pl.col("live_bytes").first().alias("first_blocks"),
            pl.col("live_bytes").last().alias("last_blocks"),
        )
    )
    marked = leaks.join(blocks, on="site", how="left").with_columns(
        (pl.col("last_blocks") > pl.col("first_blocks")).fill_null(True).alias("retains")
    )
    return LeaksResult(
        device=replay.device,
        iterations=len(bounds),
        method=method,
        boundaries=tuple(bounds),
        compared=len(compared),
        leaks=marked.filter(pl.col("retains")).drop("retains"),
        growing=marked.filter(~pl.col("retains")).drop("retains"),
    )
