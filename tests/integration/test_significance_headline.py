"""A large change that is not significant says why in the headline of ``diff`` and ``compare``:
three steps a run can never reach the rank test's 0.05, however large the change."""

from __future__ import annotations

import pytest

import traceinsight as ti
from tests.conftest import ROOT
from traceinsight.analysis.lib.stats import min_rank_p, steps_needed, why_not_significant
from traceinsight.render import formats
from traceinsight.render.job.view import series_headline

MODELS = ROOT / "sample_traces" / "models"


def test_why_names_the_few_steps() -> None:
    why = why_not_significant(3, 3, 0.646, 0.644, 0.647, 0.1)
    assert why is not None and "3 and 3 steps" in why and "0.1" in why and "4 or more" in why


def test_why_names_other_reasons_and_small_changes_get_none() -> None:
    assert why_not_significant(3, 3, 0.99, 0.98, 1.0, 0.1) is None  # −1 %: nothing to explain
    too_few = why_not_significant(2, 5, 0.5, None, None, None)
    assert too_few is not None and "too few steps" in too_few
    noisy = why_not_significant(10, 10, 0.8, 0.6, 1.1, 0.2)
    assert noisy is not None and "vary" in noisy and "[0.60, 1.10]" in noisy


def test_steps_needed_is_where_the_floor_drops_below_alpha() -> None:
    n = steps_needed(0.05)
    assert min_rank_p(n, n) < 0.05 <= min_rank_p(n - 1, n - 1)


@pytest.fixture(scope="module")
def attention_pair() -> tuple[str, str]:
    before, after = MODELS / "model_attention_before.json.gz", MODELS / "model_attention_after.json.gz"
    if not before.exists():
        pytest.skip("model samples not present")
    return str(before), str(after)


def test_diff_headline_says_why(attention_pair: tuple[str, str]) -> None:
    result = ti.diff(*attention_pair)
    assert result.verdict == "no_significant_change" and result.step_time.ratio is not None
    assert result.step_time.ratio < 0.8  # a third faster, yet three steps a run
    head = " ".join(formats.render(result, "terminal", width=80).splitlines()[:5])
    assert "not significant" in head and "3 and 3 steps" in head
    md = formats.render(result, "md").split("| step time", 1)[0]
    assert "not significant" in md and "record 4 or more steps" in md
    html = formats.render(result, "html")
    verdict = html.split("class='verdict'", 1)[1][:600]
    assert "3 and 3 steps" in verdict


def test_compare_headline_says_why(attention_pair: tuple[str, str]) -> None:
    series = ti.compare(list(attention_pair), only=["runs"])
    head = series_headline(series)
    assert "run 1 -35.4 %" in head and "not significant" in head and "3 and 3 steps" in head
    assert "not significant" in formats.render(series, "md").split("\n\n", 3)[1]
