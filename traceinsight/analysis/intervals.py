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


def _sweep(frame: pl.DataFrame, *, keys: list[str], levels: int) -> pl.LazyFrame:
    """Elementary segments of ``frame`` (keys, start_ns, end_ns, _lvl in 0..levels-1).

    Every start and end becomes a boundary; a running count per level, taken after each
    boundary, says which levels are active on the segment up to the next boundary.
    Returns keys, start_ns, end_ns and one ``_c{k}`` count column per level.
    """
    over = keys or None
    bounds = pl.concat(
        [
            frame.lazy().select(*keys, pl.col(START).alias("_t"), "_lvl", pl.lit(1, pl.Int64).alias("_d")),
            frame.lazy().select(*keys, pl.col(END).alias("_t"), "_lvl", pl.lit(-1, pl.Int64).alias("_d")),
        ]
    ).sort([*keys, "_t"])
    counts = [
        (pl.when(pl.col("_lvl") == k).then(pl.col("_d")).otherwise(0)).cum_sum()
        for k in range(levels)
    ]
    nxt = pl.col("_t").shift(-1)
    return (
        bounds.with_columns(
            *[(c.over(over) if over else c).alias(f"_c{k}") for k, c in enumerate(counts)],
            (nxt.over(over) if over else nxt).alias(END),
        )
        .rename({"_t": START})
        .filter(pl.col(END) > pl.col(START))
    )


def _labelled(parts: Sequence[pl.DataFrame], keys: list[str], start: str, end: str) -> pl.DataFrame:
    frames = [
        p.select(*keys, pl.col(start).cast(pl.Int64).alias(START), pl.col(end).cast(pl.Int64).alias(END))
        .filter(pl.col(END) > pl.col(START))
        .with_columns(pl.lit(i, pl.Int64).alias("_lvl"))
        for i, p in enumerate(parts)
    ]
    return pl.concat(frames)


def _combine(
    a: pl.DataFrame,
    b: pl.DataFrame,
    keep: pl.Expr,
    *,
    by: Sequence[str],
    start: str,
    end: str,
) -> pl.DataFrame:
    keys = list(by)
    schema = {k: a.schema[k] for k in keys} | {START: pl.Int64, END: pl.Int64}
    both = _labelled([a, b], keys, start, end)
    if both.height == 0:
        return pl.DataFrame(schema=schema)
    segments = _sweep(both, keys=keys, levels=2).filter(keep).select(*keys, START, END).collect()
    return union(segments, by=keys).cast(schema)  # type: ignore[arg-type]


def intersection(
    a: pl.DataFrame,
    b: pl.DataFrame,
    *,
    by: Sequence[str] = (),
    start: str = START,
    end: str = END,
) -> pl.DataFrame:
    """Time covered by both ``a`` and ``b`` (each may overlap itself), as disjoint intervals."""
    return _combine(a, b, (pl.col("_c0") > 0) & (pl.col("_c1") > 0), by=by, start=start, end=end)


def difference(
    a: pl.DataFrame,
    b: pl.DataFrame,
    *,
    by: Sequence[str] = (),
    start: str = START,
    end: str = END,
) -> pl.DataFrame:
    """Time covered by ``a`` and not by ``b``, as disjoint intervals."""
    return _combine(a, b, (pl.col("_c0") > 0) & (pl.col("_c1") <= 0), by=by, start=start, end=end)


def flatten(
    frame: pl.DataFrame,
    *,
    level: str = "level",
    by: Sequence[str] = (),
    start: str = START,
    end: str = END,
) -> pl.DataFrame:
    """Overlapping intervals labelled by priority → disjoint segments, each with its winner.

    ``level`` holds small non-negative integers, lower = higher priority. Every instant
    covered by at least one interval is kept once, under the lowest level active there, so
    the segments' lengths per level sum exactly to the length of the union of ``frame``.
    Returns ``by`` + start_ns, end_ns, ``level`` (adjacent segments of a level merged).
    """
    keys = list(by)
    schema = {k: frame.schema[k] for k in keys} | {START: pl.Int64, END: pl.Int64, level: pl.Int64}
    body = frame.select(
        *keys,
        pl.col(start).cast(pl.Int64).alias(START),
        pl.col(end).cast(pl.Int64).alias(END),
        pl.col(level).cast(pl.Int64).alias("_lvl"),
    ).filter((pl.col(END) > pl.col(START)) & pl.col("_lvl").is_not_null())
    if body.height == 0:
        return pl.DataFrame(schema=schema)
    if int(body["_lvl"].min()) < 0:  # type: ignore[arg-type]
        raise ValueError("priority levels must be non-negative")
    levels = int(body["_lvl"].max()) + 1  # type: ignore[arg-type]
    winner = pl.coalesce([pl.when(pl.col(f"_c{k}") > 0).then(pl.lit(k, pl.Int64)) for k in range(levels)])
    segments = (
        _sweep(body, keys=keys, levels=levels)
        .select(*keys, START, END, winner.alias(level))
        .filter(pl.col(level).is_not_null())
        .collect()
    )
    return union(segments, by=[*keys, level]).select(list(schema)).sort([*keys, START])


def covered_ns(
    queries: pl.DataFrame,
    cover: pl.DataFrame,
    *,
    by: Sequence[str] = (),
    start: str = START,
    end: str = END,
    out: str = "covered_ns",
) -> pl.DataFrame:
    """``queries`` with a column ``out``: how much of each [start, end) ``cover`` covers.

    ``cover`` (start_ns, end_ns, plus ``by``) may overlap itself; it is merged first. With
    ``by``, a query only counts cover of its own group. Row order of ``queries`` is kept.
    """
    keys = list(by)
    merged = union(cover, by=keys)
    if merged.height == 0 or queries.height == 0:
        return queries.with_columns(pl.lit(0, pl.Int64).alias(out))
    over = keys or None
    length = pl.col(END) - pl.col(START)
    before = length.cum_sum().shift(1, fill_value=0)
    table = merged.select(
        *keys,
        pl.col(START).alias("_cs"),
        (pl.col(END) - pl.col(START)).alias("_cl"),
        (before.over(over) if over else before).alias("_cb"),
    ).sort("_cs")

    def cumulative(at: str) -> pl.DataFrame:
        # Covered time before instant `at`: all earlier cover intervals plus the part of the
        # one that started last at or before it.
        probe = (
            queries.select(*keys, pl.col(at).cast(pl.Int64).alias("_t"))
            .with_row_index("_row")
            .sort("_t")
        )
        hit = probe.join_asof(
            table, left_on="_t", right_on="_cs", by=keys or None, strategy="backward", check_sortedness=False
        )
        value = (pl.col("_cb") + (pl.col("_t") - pl.col("_cs")).clip(0, pl.col("_cl"))).fill_null(0)
        return hit.select("_row", value.alias("_v")).sort("_row")

    lo = cumulative(start)["_v"]
    hi = cumulative(end)["_v"]
    return queries.with_columns((hi - lo).clip(lower_bound=0).cast(pl.Int64).alias(out))
