"""diff and compare tell the same story as analyze: the headline with too few steps says so
with the measured change, idle is the same figure in every view and its causes add up to it
(gaps below the threshold included), compare on profiler folders lists the findings analyze
finds there, and the diff page's columns say what they hold. Hand-made traces are written by
hand, not recorded (see tests/integration/test_diff.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import sample_path
from tests.integration.test_diff import hand_made_trace
from traceinsight.api import compare, diff
from traceinsight.render.diff.view import change_pct
from traceinsight.render.formats import render


def test_too_few_steps_is_said_with_the_measured_change(tmp_path: Path) -> None:
    before = hand_made_trace(tmp_path / "a.json", [3000.0, 3001.0])
    after = hand_made_trace(tmp_path / "b.json", [1200.0, 1201.0])
    result = diff(before, after)
    for fmt in ("terminal", "md", "html"):
        text = render(result, fmt, width=100)  # type: ignore[arg-type]
        assert "not enough steps to test" in text, fmt
        # the change measured (about −60 %), though no test could be made
        assert f"mean step {change_pct(result.step_time.ratio)}" in text, fmt
        assert change_pct(result.step_time.ratio).startswith(("−59.", "−60.")), fmt
        assert "NO SIGNIFICANT CHANGE" not in text and "no significant change" not in text, fmt
        # the reason is said once, in other words (the page's raw figures, folded away, keep
        # the statistics' own wording)
        assert text.split("All figures")[0].count("too few") == 0, fmt


def test_a_verdict_is_in_lower_case_words(tmp_path: Path) -> None:
    before = hand_made_trace(tmp_path / "a.json", [1000.0] * 8)
    after = hand_made_trace(tmp_path / "b.json", [1500.0] * 8)
    text = render(diff(before, after), "terminal", width=100)
    assert text.startswith("╭") or "slower: b vs a: mean step +" in text
    assert "SLOWER" not in text


def _idle_rows(table: pl.DataFrame, side: str) -> float:
    return float(table[f"{side}_ns_per_step"].sum())


def test_idle_causes_add_up_to_the_idle_in_diff_and_compare_shows_the_same_idle(tmp_path: Path) -> None:
    # Steps whose gaps are all shorter than the gaps' threshold: the causes used to be all zero.
    before = hand_made_trace(tmp_path / "a.json", [1000.0] * 6, step_gap_us=3.0)
    after = hand_made_trace(tmp_path / "b.json", [800.0] * 6, step_gap_us=3.0)
    result = diff(before, after)
    breakdown = result.breakdown.table
    for side in ("before", "after"):
        idle = float(breakdown.filter(pl.col("category") == "idle")[f"{side}_ns_per_step"].item())
        assert idle > 0
        assert _idle_rows(result.idle_by_cause.table, side) == pytest.approx(idle, abs=1.0)
        # compute + copies + communication + idle = the mean step
        assert float(breakdown[f"{side}_ns_per_step"].sum()) == pytest.approx(
            getattr(result.step_time, f"{side}_mean_ns"), rel=1e-9
        )
    series = compare([str(before), str(after)], only=["runs", "breakdown"])
    idle_diff = [float(breakdown.filter(pl.col("category") == "idle")[f"{s}_ns_per_step"].item()) for s in ("before", "after")]
    assert series.runs["idle_ns"].to_list() == pytest.approx(idle_diff, rel=1e-9)
    parts = series.runs.select(pl.sum_horizontal("compute_ns", "copies_ns", "part_communication_ns", "idle_ns")).to_series()
    assert parts.to_list() == pytest.approx(series.runs["step_mean_ns"].to_list(), rel=1e-9)


def test_the_diff_page_says_what_its_columns_hold(tmp_path: Path) -> None:
    before = hand_made_trace(tmp_path / "a.json", [1000.0] * 6)
    after = hand_made_trace(tmp_path / "b.json", [1500.0] * 6, kernels=("gemm_kernel_a", "other_kernel_c"))
    page = render(diff(before, after), "html")
    assert "share of delta" not in page and "calls per step" not in page
    assert "delta share %" in page and "kernels per step" in page


def _tensorboard_folder(root: Path, name: str, sample: str, stamp: str) -> Path:
    folder = root / name
    folder.mkdir()
    shutil.copy(sample_path(sample), folder / f"vm_470.{stamp}.pt.trace.json.gz")
    return folder


def test_compare_on_profiler_folders_lists_the_findings_analyze_finds(tmp_path: Path) -> None:
    from traceinsight.api import analyze

    base = _tensorboard_folder(tmp_path, "base", "amp_off", "1795560912")
    amp = _tensorboard_folder(tmp_path, "amp", "amp_on", "1795560977")
    series = compare([str(base), str(amp)])
    first = analyze(str(base)).sections["findings"].findings[0]  # type: ignore[attr-defined]
    listed = series.runs["top_findings"].to_list()[0]
    assert listed and listed[0].startswith(first.title)
    text = render(series, "terminal", width=100)
    assert "none material" not in text
    # runs named by their folders (the files share a host name and most of a timestamp)
    assert " base " in text and " amp " in text and "vm_470" not in text
    assert diff(str(base), str(amp)).before_label == "base"
