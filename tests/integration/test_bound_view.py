"""The Bound section shows each region once (one row, not a row and then a sentence), and
rows of a region seen once a step are numbered so that no two read the same."""

from __future__ import annotations

import pytest

from traceinsight.analysis.report import analyze
from traceinsight.render.formats import render
from traceinsight.render.sections.bound import region_names


def test_repeated_region_names_are_numbered() -> None:
    assert region_names(["a", "b", "a", "c", "a"]) == ["a (1 of 3)", "b", "a (2 of 3)", "c", "a (3 of 3)"]


@pytest.mark.parametrize("width", [80, 120, 200])
def test_each_region_is_shown_once(width: int, sample_trace) -> None:  # type: ignore[no-untyped-def]
    report = analyze(sample_trace("train_eager"), only=["bound"])
    text = render(report, "terminal", width=width)
    for step in ("ProfilerStep#3", "ProfilerStep#4"):
        assert sum(step in line for line in text.splitlines()) == 1, (step, text)
    rows = [line for line in text.splitlines() if " of 5)" in line]
    # Regions seen once per step are numbered (the optimizer's step and zero_grad at least),
    # and no two of their rows read the same.
    assert len(rows) >= 10 and len(rows) % 5 == 0
    assert len(rows) == len(set(rows))
    assert "—" not in text  # no sentence repeating a row


def test_bound_section_is_short_at_80_columns(sample_trace) -> None:  # type: ignore[no-untyped-def]
    report = analyze(sample_trace("train_eager"), only=["bound"])
    regions = report.bound.regions.height
    lines = render(report, "terminal", width=80).splitlines()
    assert len(lines) <= 3 * regions + 16, len(lines)  # a name line and its figures, no sentence
