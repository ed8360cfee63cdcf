"""The comparison statistics at their edges: empty and tiny samples, the tie-corrected normal
approximation against a hand-computed value, the exact/normal switch, and the verdict's
reasons."""

from __future__ import annotations

import numpy as np
import pytest

from traceinsight.analysis.lib.stats import (
    compare_samples,
    mann_whitney_u,
    median_ratio_ci,
    min_rank_p,
)


def test_rank_test_with_ties_matches_the_hand_computed_normal_approximation() -> None:
    # x = [1, 2, 2, 3], y = [2, 3, 4, 4, 5]: average ranks of x 1, 3, 3, 5.5 → U = 12.5 - 10
    # = 2.5; ties (1, 3, 2, 2, 1) → Σ(t³ - t) / (N(N - 1)) = 36 / 72 = 0.5; var = 20/12 ×
    # (10 - 0.5) = 15.833; z = (|2.5 - 10| - 0.5) / √var = 1.75919; p = erfc(z / √2) = 0.078546.
    t = mann_whitney_u([1, 2, 2, 3], [2, 3, 4, 4, 5])
    assert t.method == "normal"
    assert t.u_statistic == 2.5
    assert t.p_value == pytest.approx(0.0785459, abs=1e-6)


def test_rank_test_all_tied_gives_p_one() -> None:
    t = mann_whitney_u([1.0, 1.0, 1.0], [1.0, 1.0, 1.0])
    assert (t.method, t.p_value, t.u_statistic) == ("normal", 1.0, 4.5)


def test_exact_test_up_to_2500_pairs_then_normal() -> None:
    x = np.arange(50.0)
    assert mann_whitney_u(x, x + 0.5).method == "exact"  # 50 × 50 = 2500
    assert mann_whitney_u(np.arange(41.0), np.arange(61.0) + 0.5).method == "normal"  # 2501


def test_exact_test_small_value() -> None:
    # m = n = 3, U = 1: P(U <= 1) = 2/20; two-sided 0.2.
    t = mann_whitney_u([1, 2, 4], [3, 5, 6])
    assert (t.method, t.u_statistic) == ("exact", 1.0)
    assert t.p_value == pytest.approx(0.2)


@pytest.mark.parametrize(("x", "y"), [([], [1.0]), ([1.0], []), ([], [])])
def test_empty_sides_are_refused(x: list[float], y: list[float]) -> None:
    with pytest.raises(ValueError):
        mann_whitney_u(x, y)
    with pytest.raises(ValueError):
        median_ratio_ci(x, y)


def test_one_value_each_side_is_a_ratio() -> None:
    assert median_ratio_ci([2.0], [3.0]) == (1.5, 1.5, 1.5)


@pytest.mark.parametrize("before", [[0.0, 0.0, 0.0], [-1.0, -2.0, -1.0]])
def test_a_non_positive_before_median_has_no_ratio(before: list[float]) -> None:
    with pytest.raises(ValueError):
        median_ratio_ci(before, [1.0, 2.0, 3.0])
    c = compare_samples(before, [1.0, 2.0, 3.0])
    assert c.verdict == "no_significant_change" and "not positive" in c.reason
    assert c.ratio is None


def test_a_small_positive_before_median_has_a_ratio() -> None:
    c = compare_samples([0.5, 0.5], [1.0, 1.0])
    assert c.ratio == 2.0


@pytest.mark.parametrize(("before", "after"), [([], [1.0, 2.0, 3.0]), ([1.0, 2.0, 3.0], [])])
def test_compare_without_samples_on_one_side(before: list[float], after: list[float]) -> None:
    c = compare_samples(before, after)
    assert c.verdict == "no_significant_change" and c.reason == "no samples on one side"


@pytest.mark.parametrize(("nb", "na"), [(2, 10), (10, 2)])
def test_too_few_samples_on_either_side(nb: int, na: int) -> None:
    c = compare_samples([1.0] * nb, [4.0] * na)
    assert c.verdict == "no_significant_change" and "too few samples" in c.reason
    assert c.ratio == 4.0
    assert c.ci_low is None and c.p_value is None


def test_too_few_samples_with_a_zero_after_median() -> None:
    assert compare_samples([1.0, 1.0], [0.0, 0.0]).ratio == 0.0


def test_overlapping_samples_say_the_interval_contains_one() -> None:
    rng = np.random.default_rng(1)
    before = 10 + rng.normal(0, 1, 30)
    after = 10.2 + rng.normal(0, 1, 30)
    c = compare_samples(before, after)
    assert c.verdict == "no_significant_change"
    assert c.ci_low is not None and c.ci_high is not None
    assert c.ci_low < 1.0 < c.ci_high
    assert "contains 1" in c.reason


def test_three_samples_each_cannot_reach_significance_and_say_so() -> None:
    # Clearly slower, but with 3 and 3 samples the smallest possible p is 2/20 = 0.1.
    c = compare_samples([1.0, 1.1, 1.2], [2.0, 2.1, 2.2])
    assert c.verdict == "no_significant_change"
    assert c.ci_low is not None and c.ci_low > 1.0
    assert "record more steps" in c.reason and "0.1" in c.reason


def test_enough_clearly_slower_samples_are_slower() -> None:
    c = compare_samples([1.0, 1.1, 1.2, 1.05, 1.15, 1.1], [2.0, 2.1, 2.2, 2.05, 2.15, 2.1])
    assert c.verdict == "slower"
    assert c.p_value is not None and c.p_value < 0.05
    assert "record more steps" not in c.reason
    assert c.confidence == 0.95
    assert c.ratio == pytest.approx(2.1 / 1.1)  # medians 2.1 and 1.1


def test_smallest_possible_rank_p() -> None:
    assert min_rank_p(3, 3) == pytest.approx(0.1)  # 2 / C(6, 3)
    assert min_rank_p(5, 5) == pytest.approx(2 / 252)
    assert min_rank_p(1, 1) == 1.0  # 2 / 2


def test_exact_p_is_capped_at_one() -> None:
    # U = 2 sits at the centre of its distribution (m = n = 2): both tails are 4/6.
    t = mann_whitney_u([1, 4], [2, 3])
    assert (t.method, t.u_statistic, t.p_value) == ("exact", 2.0, 1.0)


def test_resamples_with_a_non_positive_before_median_are_dropped() -> None:
    # The before median is 2, but a resample of [-1, 2, 3] can have median -1: such a ratio
    # means nothing and is left out, so the interval stays positive.
    ratio, lo, hi = median_ratio_ci([-1.0, 2.0, 3.0], [2.0, 2.0, 2.0], n_boot=2_000)
    assert ratio == 1.0
    assert 0 < lo <= hi


def test_documented_bootstrap_defaults() -> None:
    # docs/diff.md: 4000 resamples, fixed seed.
    rng = np.random.default_rng(5)
    before, after = 10 + rng.normal(0, 1, 20), 11 + rng.normal(0, 1, 20)
    default = median_ratio_ci(before, after)
    assert default == median_ratio_ci(before, after, n_boot=4000, seed=0)
    # (the draw depends on the count: the check above could fail)
    assert default != median_ratio_ci(before, after, n_boot=3999, seed=0)


def test_every_before_run_is_equally_likely_in_a_resample() -> None:
    # Before: 19 runs of 1 and one of 100; after: all 1; the mean. A resample's before mean is
    # 1 + 99 k / 20 with k ~ Binomial(20, 1/20): P(k <= 2) = 0.925, P(k <= 3) = 0.984, so the
    # interval's low end is 1 / (1 + 99 × 3 / 20). (Were the last run drawn twice as often,
    # k's 97.5th percentile would be 5.)
    before = np.ones(20)
    before[-1] = 100.0
    _, lo, hi = median_ratio_ci(before, np.ones(20), n_boot=20_000, seed=11, statistic="mean")
    assert lo == pytest.approx(1 / (1 + 99 * 3 / 20))
    assert hi == 1.0


@pytest.mark.parametrize(("statistic", "ratio"), [("median", 1.0), ("mean", 2.0)])
def test_compare_uses_the_chosen_statistic(statistic: str, ratio: float) -> None:
    # Medians equal (1.0), means 1.0 and 2.0.
    before = [1.0, 1.0, 1.0, 1.0, 1.0]
    after = [1.0, 1.0, 1.0, 1.0, 6.0]
    c = compare_samples(before, after, statistic=statistic)  # type: ignore[arg-type]
    assert c.ratio == pytest.approx(ratio)
    assert c.statistic == statistic
    # Also the plain ratio given when there are too few samples to judge.
    few = compare_samples(before, after, statistic=statistic, min_samples=10)  # type: ignore[arg-type]
    assert "too few samples" in few.reason and few.ratio == pytest.approx(ratio)


def test_an_interval_ending_exactly_at_one_contains_one() -> None:
    # Resampled after medians are 0.5 or 1.0 against a before median of 1.0: hi is exactly 1.
    c = compare_samples([1.0] * 5, [0.5, 0.5, 1.0, 1.0, 1.0])
    assert c.ci_high == 1.0
    assert c.verdict == "no_significant_change" and "contains 1" in c.reason


def test_after_side_is_resampled_uniformly_too() -> None:
    after = np.ones(20)
    after[-1] = 100.0
    _, lo, hi = median_ratio_ci(np.ones(20), after, n_boot=20_000, seed=11, statistic="mean")
    assert (lo, hi) == (1.0, pytest.approx(1 + 99 * 3 / 20))


def test_exact_p_at_u_zero() -> None:
    # m = n = 3, every x below every y: U = 0, P(U <= 0) = 1/20, two-sided 0.1.
    t = mann_whitney_u([1, 2, 3], [4, 5, 6])
    assert (t.method, t.u_statistic) == ("exact", 0.0)
    assert t.p_value == pytest.approx(0.1)


def test_hint_when_the_smallest_possible_p_equals_alpha() -> None:
    # 1 and 39 samples: the smallest possible p is 2 / 40 = 0.05, not below alpha.
    c = compare_samples([1.0], [2.0 + 0.01 * i for i in range(39)], min_samples=1)
    assert c.verdict == "no_significant_change"
    assert c.p_value == pytest.approx(0.05)
    assert "the smallest possible p is 0.05: record more steps" in c.reason


def test_summary_figures() -> None:
    c = compare_samples([1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0])
    assert (c.before_mean, c.after_mean) == (2.5, 5.0)
    assert (c.before_median, c.after_median) == (2.5, 5.0)
    assert c.ratio == 2.0 and c.change_pct == pytest.approx(100.0)
    assert (c.n_before, c.n_after) == (4, 4)


def test_results_are_frozen() -> None:
    t = mann_whitney_u([1, 2, 4], [3, 5, 6])
    with pytest.raises(AttributeError):
        t.p_value = 0.0  # type: ignore[misc]
    c = compare_samples([1.0, 2.0, 3.0], [2.0, 4.0, 6.0])
    with pytest.raises(AttributeError):
        c.verdict = "faster"  # type: ignore[misc]
