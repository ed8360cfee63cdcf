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


def _same_group(keys: list[str]) -> pl.Expr:
    """True where the next row belongs to the same group (always true without keys)."""
    if not keys:
        return pl.lit(True)
    return pl.all_horizontal([pl.col(k).eq_missing(pl.col(k).shift(-1)) for k in keys])


def _sweep(
    frame: pl.DataFrame, *, keys: list[str], levels: int, cuts: pl.DataFrame | None = None
) -> pl.LazyFrame:
    """Elementary segments of ``frame`` (keys, start_ns, end_ns, _lvl in 0..levels-1).

    Every start and end becomes a boundary; a running count per level, taken after each
    boundary, says which levels are active on the segment up to the next boundary. ``cuts``
    (keys, _t) adds boundaries that change no count, so no segment crosses them.
    Returns keys, start_ns, end_ns and one ``_c{k}`` count column per level.

    The counts are plain cumulative sums over all groups at once: each interval adds its +1
    and -1 inside its own group, so every count is back to zero where a group ends.
    """
    parts = [
        frame.lazy().select(*keys, pl.col(START).alias("_t"), "_lvl", pl.lit(1, pl.Int64).alias("_d")),
        frame.lazy().select(*keys, pl.col(END).alias("_t"), "_lvl", pl.lit(-1, pl.Int64).alias("_d")),
    ]
    if cuts is not None:
        parts.append(
            cuts.lazy().select(*keys, pl.col("_t").cast(pl.Int64), pl.lit(-1, pl.Int64).alias("_lvl"), pl.lit(0, pl.Int64).alias("_d"))
        )
    bounds = pl.concat(parts).sort([*keys, "_t"])
    counts = [
        pl.when(pl.col("_lvl") == k).then(pl.col("_d")).otherwise(0).cum_sum().alias(f"_c{k}")
        for k in range(levels)
    ]
    return (
        bounds.with_columns(
            *counts,
            pl.when(_same_group(keys)).then(pl.col("_t").shift(-1)).alias(END),
        )
        .rename({"_t": START})
        .filter(pl.col(END) > pl.col(START))
    )


def _levelled(frame: pl.DataFrame, keys: list[str], level: str, start: str, end: str) -> pl.DataFrame:
    body = frame.select(
        *keys,
        pl.col(start).cast(pl.Int64).alias(START),
        pl.col(end).cast(pl.Int64).alias(END),
        pl.col(level).cast(pl.Int64).alias("_lvl"),
    ).filter((pl.col(END) > pl.col(START)) & pl.col("_lvl").is_not_null())
    if body.height and int(body["_lvl"].min()) < 0:  # type: ignore[arg-type]
        raise ValueError("priority levels must be non-negative")
    return body


def _winner(levels: int) -> pl.Expr:
    return pl.coalesce([pl.when(pl.col(f"_c{k}") > 0).then(pl.lit(k, pl.Int64)) for k in range(levels)])


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
    body = _levelled(frame, keys, level, start, end)
    if body.height == 0:
        return pl.DataFrame(schema=schema)
    levels = int(body["_lvl"].max()) + 1  # type: ignore[arg-type]
    segments = (
        _sweep(body, keys=keys, levels=levels)
        .select(*keys, START, END, _winner(levels).alias(level))
        .filter(pl.col(level).is_not_null())
    )
    # Merge runs of touching segments of one level: a new run starts wherever the group or
    # level changes or the previous segment ended before this one starts.
    new_run = (pl.col(END).shift(1) != pl.col(START)) | ~pl.all_horizontal(
        [pl.col(c).eq_missing(pl.col(c).shift(1)) for c in [*keys, level]]
    )
    merged = (
        segments.with_columns(new_run.fill_null(True).cast(pl.Int64).cum_sum().alias("_run"))
        .group_by("_run")
        .agg(*[pl.col(c).first() for c in [*keys, level]], pl.col(START).min(), pl.col(END).max())
        .select(list(schema))
        .sort([*keys, START])
        .collect()
    )
    return merged.cast(schema)  # type: ignore[arg-type]


def _fold_groups(
    body: pl.DataFrame, win: pl.DataFrame, keys: list[str]
) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """Lay the groups end to end on one time axis (group g shifted by g * span), so that the
    keyed problem becomes an unkeyed one: sorts and as-of joins on one Int64 column are far
    cheaper than on several keys. None when the shifted times would not fit in an Int64."""
    t0 = min(int(body[START].min()), int(win["_ws"].min()))  # type: ignore[arg-type]
    t1 = max(int(body[END].max()), int(win["_we"].max()))  # type: ignore[arg-type]
    span = t1 - t0 + 1
    groups = pl.concat([body.select(keys), win.select(keys)]).unique().with_row_index("_g")
    if groups.height * span >= 2**62:
        return None
    offset = pl.col("_g").cast(pl.Int64) * span - t0
    body = (
        body.join(groups, on=keys, how="left", nulls_equal=True)
        .with_columns(pl.col(START) + offset, pl.col(END) + offset)
        .drop([*keys, "_g"])
    )
    win = (
        win.join(groups, on=keys, how="left", nulls_equal=True, maintain_order="left")
        .with_columns(pl.col("_ws") + offset, pl.col("_we") + offset)
        .drop([*keys, "_g"])
    )
    return body, win


def level_totals(
    frame: pl.DataFrame,
    windows: pl.DataFrame,
    *,
    level: str = "level",
    levels: int | None = None,
    window_id: str = "id",
    by: Sequence[str] = (),
    start: str = START,
    end: str = END,
) -> pl.DataFrame:
    """Per window, the ns each priority level wins inside it (as ``flatten`` counts them).

    ``windows`` has ``by`` + ``window_id``, start_ns, end_ns; windows of one group must not
    overlap each other. Returns ``window_id`` and one ``level_<k>_ns`` column per level
    (0..levels-1), a row for every window, in the order of ``windows``.
    """
    keys = list(by)
    body = _levelled(frame, keys, level, start, end)
    n = levels if levels is not None else (int(body["_lvl"].max()) + 1 if body.height else 0)  # type: ignore[arg-type]
    cols = [f"level_{k}_ns" for k in range(n)]
    win = windows.select(*keys, window_id, pl.col(START).cast(pl.Int64).alias("_ws"), pl.col(END).cast(pl.Int64).alias("_we"))
    empty = windows.select(window_id).with_columns([pl.lit(0, pl.Int64).alias(c) for c in cols])
    if body.height == 0 or win.height == 0 or n == 0:
        return empty
    if keys:
        folded = _fold_groups(body, win, keys)
        if folded is not None:
            body, win = folded
            keys = []
    by_keys = keys or None
    win_sorted = win.sort("_ws")
    # Only intervals that meet a window matter: the last window starting at or before an
    # interval's last instant meets it if it ends after the interval starts (windows of a
    # group are disjoint).
    body = (
        body.with_columns((pl.col(END) - 1).alias("_last"))
        .sort("_last")
        .join_asof(win_sorted.select(*keys, "_ws", "_we"), left_on="_last", right_on="_ws", by=by_keys, strategy="backward", check_sortedness=False)
        .filter(pl.col("_ws").is_not_null() & (pl.col("_we") > pl.col(START)))
        .drop("_ws", "_we", "_last")
    )
    if body.height == 0:
        return empty
    cuts = pl.concat([win.select(*keys, pl.col("_ws").alias("_t")), win.select(*keys, pl.col("_we").alias("_t"))])
    segments = (
        _sweep(body, keys=keys, levels=n, cuts=cuts)
        .select(*keys, START, END, _winner(n).alias("_win"))
        .filter(pl.col("_win").is_not_null())
        .sort(START)
        .collect()
    )
    placed = segments.join_asof(
        win_sorted, left_on=START, right_on="_ws", by=by_keys, strategy="backward", check_sortedness=False
    ).filter(pl.col(END) <= pl.col("_we"))
    length = pl.col(END) - pl.col(START)
    totals = placed.group_by(window_id).agg(
        [length.filter(pl.col("_win") == k).sum().alias(c) for k, c in enumerate(cols)]
    )
    return (
        windows.select(window_id)
        .join(totals, on=window_id, how="left", maintain_order="left")
        .with_columns([pl.col(c).fill_null(0).cast(pl.Int64) for c in cols])
    )


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
