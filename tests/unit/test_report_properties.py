"""Property tests for the renderers' geometry: lanes nest, bins conserve time, ticks cover."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from traceinsight.analysis.lib.timeline_bins import per_bin
from traceinsight.render.perfetto_export import Slice, assign_lanes
from traceinsight.render.svg import nice_ticks

intervals = st.lists(
    st.tuples(st.integers(0, 10_000), st.integers(0, 3_000)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=40,
)


@given(intervals)
def test_lanes_keep_every_slice_and_nest(spans: list[tuple[int, int]]) -> None:
    slices = [Slice(s, e, str(i)) for i, (s, e) in enumerate(spans)]
    lanes = assign_lanes(slices)
    placed = [s.name for lane in lanes for s, _ in lane]
    assert sorted(placed) == sorted(s.name for s in slices)
    for lane in lanes:
        # Replaying the lane as BEGIN/END pairs must never close a slice before an inner one.
        stack: list[int] = []
        for s, depth in lane:
            while stack and stack[-1] <= s.ts:
                stack.pop()
            assert len(stack) == depth
            assert not stack or s.end <= stack[-1]
            stack.append(s.end)


@given(intervals, st.integers(1, 50))
@settings(max_examples=60)
def test_bins_conserve_time(spans: list[tuple[int, int]], bins: int) -> None:
    frame = pl.DataFrame(
        {"start_ns": [s for s, _ in spans], "end_ns": [e for _, e in spans], "cause": ["x"] * len(spans)},
        schema={"start_ns": pl.Int64, "end_ns": pl.Int64, "cause": pl.String},
    )
    lo, hi = 0, 13_000
    covered = per_bin(frame, lo, (hi - lo) / bins, bins, ["cause"])
    total = sum(e - s for s, e in spans)
    assert abs(float(covered["ns"].sum() or 0.0) - total) < 1e-6 * max(total, 1) + 1e-6
    if covered.height:
        assert covered["bin"].min() >= 0 and covered["bin"].max() < bins
        assert float(covered["ns"].max()) <= (hi - lo) / bins * max(len(spans), 1) + 1e-6


@given(st.floats(-1e6, 1e6, allow_nan=False), st.floats(1e-3, 1e6, allow_nan=False), st.integers(2, 10))
def test_ticks_are_inside_and_few(lo: float, span: float, n: int) -> None:
    hi = lo + span
    ticks = nice_ticks(lo, hi, n)
    assert ticks and all(lo - 1e-9 * abs(span) <= t <= hi + 1e-6 * span for t in ticks)
    assert len(ticks) <= 2 * n + 1
    assert ticks == sorted(ticks)


@given(st.floats(1e-6, 1e12, allow_nan=False))
def test_axis_top_covers_the_data(value: float) -> None:
    from traceinsight.render.svg import nice_max

    top = nice_max(value)
    assert value <= top <= 2.5 * value + 1e-9
