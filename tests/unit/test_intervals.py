"""Property tests of the interval algebra against a brute-force model (a bitmap of instants)."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from traceinsight.analysis.lib import intervals as iv

SPAN = 120  # instants 0..SPAN-1 of the model; intervals are [start, end)

spans = st.lists(
    st.tuples(st.integers(0, SPAN - 1), st.integers(0, 40)).map(lambda t: (t[0], min(t[0] + t[1], SPAN))),
    max_size=25,
)
grouped = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, SPAN - 1), st.integers(0, 40)).map(
        lambda t: (t[0], t[1], min(t[1] + t[2], SPAN))
    ),
    max_size=30,
)


def frame(items: list[tuple[int, int]]) -> pl.DataFrame:
    return pl.DataFrame(
        {"start_ns": [s for s, _ in items], "end_ns": [e for _, e in items]},
        schema={"start_ns": pl.Int64, "end_ns": pl.Int64},
    )


def bitmap(items: list[tuple[int, int]] | pl.DataFrame) -> list[bool]:
    if isinstance(items, pl.DataFrame):
        items = list(zip(items["start_ns"].to_list(), items["end_ns"].to_list(), strict=True))
    bits = [False] * SPAN
    for s, e in items:
        for t in range(s, e):
            bits[t] = True
    return bits


def is_disjoint_sorted(result: pl.DataFrame) -> bool:
    starts, ends = result["start_ns"].to_list(), result["end_ns"].to_list()
    if any(e <= s for s, e in zip(starts, ends, strict=True)):
        return False
    # Maximal: consecutive intervals neither overlap nor touch.
    return all(ends[i] < starts[i + 1] for i in range(len(starts) - 1))


@given(spans)
def test_union_matches_model_and_is_maximal(items: list[tuple[int, int]]) -> None:
    result = iv.union(frame(items))
    assert bitmap(result) == bitmap(items)
    assert is_disjoint_sorted(result)
    assert iv.total_ns(result) == sum(bitmap(items))


@given(spans)
def test_union_is_idempotent(items: list[tuple[int, int]]) -> None:
    once = iv.union(frame(items))
    assert iv.union(once).equals(once)


@given(spans, spans)
def test_intersection_and_difference_match_model(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> None:
    ba, bb = bitmap(a), bitmap(b)
    inter = iv.intersection(frame(a), frame(b))
    diff = iv.difference(frame(a), frame(b))
    assert bitmap(inter) == [x and y for x, y in zip(ba, bb, strict=True)]
    assert bitmap(diff) == [x and not y for x, y in zip(ba, bb, strict=True)]
    assert is_disjoint_sorted(inter)
    assert is_disjoint_sorted(diff)
    # a = (a ∩ b) ∪ (a \ b), and the two parts are disjoint, so their lengths add up.
    assert iv.total_ns(inter) + iv.total_ns(diff) == sum(ba)


@given(spans, st.integers(0, SPAN // 2), st.integers(SPAN // 2, SPAN))
def test_complement_and_union_tile_the_window(items: list[tuple[int, int]], lo: int, hi: int) -> None:
    merged = iv.union(frame(items))
    comp = iv.complement(merged, lo, hi)
    assert all(d >= 0 for d in (comp["end_ns"] - comp["start_ns"]).to_list())
    inside = iv.clip(merged, lo, hi)
    assert iv.total_ns(comp) + iv.total_ns(inside) == hi - lo
    together = iv.union(pl.concat([comp, inside]))
    expected = [] if hi == lo else [(lo, hi)]
    assert list(zip(together["start_ns"].to_list(), together["end_ns"].to_list(), strict=True)) == expected
    assert iv.total_ns(iv.intersection(comp, inside)) == 0


@given(st.lists(st.tuples(st.integers(0, SPAN - 1), st.integers(0, 40), st.integers(0, 4)), max_size=25))
def test_flatten_keeps_each_instant_once_under_its_top_level(items: list[tuple[int, int, int]]) -> None:
    rows = [(s, min(s + d, SPAN), lvl) for s, d, lvl in items]
    f = pl.DataFrame(
        {"start_ns": [r[0] for r in rows], "end_ns": [r[1] for r in rows], "level": [r[2] for r in rows]},
        schema={"start_ns": pl.Int64, "end_ns": pl.Int64, "level": pl.Int64},
    )
    flat = iv.flatten(f, level="level")
    expected: list[int | None] = [None] * SPAN
    for s, e, lvl in rows:
        for t in range(s, e):
            cur = expected[t]
            expected[t] = lvl if cur is None else min(cur, lvl)
    got: list[int | None] = [None] * SPAN
    for s, e, lvl in flat.iter_rows():
        for t in range(s, e):
            assert got[t] is None, "segments overlap"
            got[t] = lvl
    assert got == expected
    assert int((flat["end_ns"] - flat["start_ns"]).sum() or 0) == sum(bitmap([(s, e) for s, e, _ in rows]))


@given(spans, spans)
def test_covered_ns_counts_the_overlap(queries: list[tuple[int, int]], cover: list[tuple[int, int]]) -> None:
    cb = bitmap(cover)
    out = iv.covered_ns(frame(queries), frame(cover))
    assert out["covered_ns"].to_list() == [sum(cb[s:e]) for s, e in queries]


@settings(max_examples=60)
@given(grouped, grouped)
def test_grouped_operations_stay_within_their_group(a: list[tuple[int, int, int]], b: list[tuple[int, int, int]]) -> None:
    def gframe(items: list[tuple[int, int, int]]) -> pl.DataFrame:
        return pl.DataFrame(
            {"g": [x[0] for x in items], "start_ns": [x[1] for x in items], "end_ns": [x[2] for x in items]},
            schema={"g": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64},
        )

    inter = iv.intersection(gframe(a), gframe(b), by=["g"])
    diff = iv.difference(gframe(a), gframe(b), by=["g"])
    queries = gframe(a)
    cov = iv.covered_ns(queries, gframe(b), by=["g"])
    for g in range(3):
        ga = [(s, e) for k, s, e in a if k == g]
        gb = [(s, e) for k, s, e in b if k == g]
        ba, bb = bitmap(ga), bitmap(gb)
        assert bitmap(inter.filter(pl.col("g") == g)) == [x and y for x, y in zip(ba, bb, strict=True)]
        assert bitmap(diff.filter(pl.col("g") == g)) == [x and not y for x, y in zip(ba, bb, strict=True)]
        got = cov.filter(pl.col("g") == g)["covered_ns"].to_list()
        assert got == [sum(bb[s:e]) for s, e in ga]


def test_empty_inputs_give_empty_typed_results() -> None:
    empty = frame([])
    assert iv.union(empty).height == 0
    assert iv.intersection(empty, frame([(0, 5)])).height == 0
    assert iv.difference(frame([(0, 5)]), empty).rows() == [(0, 5)]
    assert iv.flatten(empty.with_columns(level=pl.lit(0, pl.Int64)), level="level").height == 0
    assert iv.covered_ns(frame([(0, 5)]), empty)["covered_ns"].to_list() == [0]
    assert iv.complement(empty, 0, 10).rows() == [(0, 10)]


@given(
    st.lists(st.tuples(st.integers(0, 1), st.integers(0, SPAN - 1), st.integers(0, 40), st.integers(0, 3)), max_size=25),
    st.lists(st.tuples(st.integers(0, SPAN - 1), st.integers(0, 30)), max_size=8),
)
def test_level_totals_match_the_model_per_window(
    items: list[tuple[int, int, int, int]], raw_windows: list[tuple[int, int]]
) -> None:
    # Disjoint windows per group: cut the raw ones into non-overlapping pieces, same for both groups.
    merged = iv.union(frame([(s, min(s + d, SPAN)) for s, d in raw_windows]))
    # Split each merged window in two touching halves so that windows also meet end to start.
    pieces = [p for s, e in merged.rows() for p in ((s, (s + e) // 2), ((s + e) // 2, e)) if p[1] > p[0]]
    wins = [(g, i, s, e) for g in (0, 1) for i, (s, e) in enumerate(pieces)]
    windows = pl.DataFrame(
        {"g": [w[0] for w in wins], "id": [1000 * w[0] + w[1] for w in wins], "start_ns": [w[2] for w in wins], "end_ns": [w[3] for w in wins]},
        schema={"g": pl.Int64, "id": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64},
    )
    rows = [(g, s, min(s + d, SPAN), lvl) for g, s, d, lvl in items]
    f = pl.DataFrame(
        {"g": [r[0] for r in rows], "start_ns": [r[1] for r in rows], "end_ns": [r[2] for r in rows], "level": [r[3] for r in rows]},
        schema={"g": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64, "level": pl.Int64},
    )
    got = iv.level_totals(f, windows, level="level", levels=4, by=["g"])
    assert got["id"].to_list() == windows["id"].to_list()
    for g, i, ws, we in wins:
        top: list[int | None] = [None] * SPAN
        for rg, s, e, lvl in rows:
            if rg != g:
                continue
            for t in range(s, e):
                top[t] = lvl if top[t] is None else min(top[t], lvl)  # type: ignore[type-var]
        row = got.filter(pl.col("id") == 1000 * g + i).row(0, named=True)
        for k in range(4):
            assert row[f"level_{k}_ns"] == sum(1 for t in range(ws, we) if top[t] == k)
