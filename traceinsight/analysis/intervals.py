"""Interval algebra on polars frames of [start_ns, end_ns) intervals, optionally per group.

Every function is vectorised (sorts, cumulative maxima and joins); none loops over rows.
Zero-length intervals contribute no time; results never contain negative lengths.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

START, END = "start_ns", "end_ns"


def union(
    frame: pl.DataFrame,
    *,
    by: Sequence[str] = (),
    start: str = START,
    end: str = END,
) -> pl.DataFrame:
    """Merge overlapping or touching intervals; returns ``by`` + start_ns, end_ns, sorted."""
    keys = list(by)
    schema = {k: frame.schema[k] for k in keys} | {START: pl.Int64, END: pl.Int64}
    if frame.height == 0:
        return pl.DataFrame(schema=schema)
    over = keys or None
    prev_end = pl.col(END).cum_max().shift(1)
    merged = (
        frame.lazy()
        .select(*keys, pl.col(start).alias(START), pl.col(end).alias(END))
        .filter(pl.col(END) > pl.col(START))
        .sort([*keys, START])
        .with_columns(
            _run=(
                (prev_end.over(over) if over else prev_end).is_null()
                | (pl.col(START) > (prev_end.over(over) if over else prev_end))
            )
            .cast(pl.Int64)
            .cum_sum()
        )
        .group_by([*keys, "_run"])
        .agg(pl.col(START).min(), pl.col(END).max())
        .drop("_run")
        .sort([*keys, START])
        .collect()
    )
    return merged.select(list(schema)).cast(schema)  # type: ignore[arg-type]


def total_ns(intervals: pl.DataFrame, *, by: Sequence[str] = ()) -> pl.DataFrame | int:
    """Sum of lengths of already-disjoint intervals (per group when ``by`` is given)."""
    length = (pl.col(END) - pl.col(START)).sum()
    if by:
        return intervals.group_by(list(by)).agg(length.alias("dur_ns")).sort(list(by))
    return int(intervals.select(length).item() or 0)


def clip(intervals: pl.DataFrame, lo_ns: int, hi_ns: int) -> pl.DataFrame:
    """Intervals cut to [lo_ns, hi_ns); the ones left empty are dropped."""
    return intervals.with_columns(
        pl.col(START).clip(lo_ns, hi_ns), pl.col(END).clip(lo_ns, hi_ns)
    ).filter(pl.col(END) > pl.col(START))


def complement(
    intervals: pl.DataFrame, lo_ns: int, hi_ns: int, *, by: Sequence[str] = ()
) -> pl.DataFrame:
    """The parts of [lo_ns, hi_ns) that disjoint, sorted ``intervals`` do not cover.

    With ``by``, the window is the same for every group present in ``intervals``.
    """
    keys = list(by)
    cut = union(clip(intervals, lo_ns, hi_ns), by=keys)
    schema = {k: intervals.schema[k] for k in keys} | {START: pl.Int64, END: pl.Int64}
    if cut.height == 0:
        if keys:
            return pl.DataFrame(schema=schema)
        return pl.DataFrame({START: [lo_ns], END: [hi_ns]}, schema=schema).filter(
            pl.col(END) > pl.col(START)
        )
    over = keys or None
    prev_end = pl.col(END).shift(1)
    gaps_before = cut.select(
        *keys,
        (prev_end.over(over) if over else prev_end).fill_null(lo_ns).alias(START),
        pl.col(START).alias(END),
    )
    last = cut.group_by(keys, maintain_order=True).agg(pl.col(END).max()) if keys else cut.select(pl.col(END).max())
    tail = last.select(*keys, pl.col(END).alias(START), pl.lit(hi_ns, dtype=pl.Int64).alias(END))
    return (
        pl.concat([gaps_before.cast(schema), tail.cast(schema)])  # type: ignore[arg-type]
        .filter(pl.col(END) > pl.col(START))
        .sort([*keys, START])
    )
