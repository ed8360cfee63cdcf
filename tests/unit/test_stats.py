"""Noise-aware comparison statistics: bootstrap CI of the median ratio and the rank test."""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceinsight.analysis.lib.stats import (
    _exact_u_cdf,
    compare_samples,
    mann_whitney_u,
    median_ratio_ci,
)


@pytest.mark.parametrize(("m", "n"), [(1, 1), (2, 6), (3, 4), (5, 5), (4, 7)])
def test_exact_u_distribution_matches_enumeration(m: int, n: int) -> None:
    counts = np.zeros(m * n + 1)
    for chosen in itertools.combinations(range(m + n), m):
        u = sum(r + 1 for r in chosen) - m * (m + 1) // 2
        counts[u] += 1
    expected = np.cumsum(counts) / comb(m + n, m)
    np.testing.assert_allclose(_exact_u_cdf(m, n), expected)


def test_rank_test_fully_separated_samples_exact_p() -> None:
    test = mann_whitney_u([6, 7, 8, 9, 10], [1, 2, 3, 4, 5])
    assert test.method == "exact"
    assert test.u_statistic == 25.0
    assert test.p_value == pytest.approx(2 / comb(10, 5))


def test_rank_test_identical_samples_has_p_one() -> None:
    test = mann_whitney_u([3.0, 1.0, 2.0, 5.0], [1.0, 2.0, 3.0, 5.0])
    assert test.method == "normal"  # ties force the normal approximation
    assert test.p_value == pytest.approx(1.0)


def test_rank_test_large_samples_use_normal_approximation() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(10.0, 1.0, 200)
    y = rng.normal(10.5, 1.0, 200)
    test = mann_whitney_u(x, y)
    assert test.method == "normal"
    assert test.p_value < 1e-3


def test_bootstrap_is_deterministic_for_a_seed() -> None:
    rng = np.random.default_rng(3)
    b, a = rng.normal(100, 5, 20), rng.normal(90, 5, 20)
    assert median_ratio_ci(b, a, seed=7) == median_ratio_ci(b, a, seed=7)


def test_bootstrap_ci_covers_true_ratio_on_shifted_data() -> None:
    """Over many synthetic runs with a known 20 % slowdown, the 95 % interval covers 1.2 often."""
    rng = np.random.default_rng(0)
    true_ratio = 1.2
    covered = 0
    trials = 60
    for seed in range(trials):
        before = rng.lognormal(np.log(10.0), 0.05, 30)
        after = rng.lognormal(np.log(10.0 * true_ratio), 0.05, 30)
        _, lo, hi = median_ratio_ci(before, after, n_boot=1000, seed=seed)
        covered += lo <= true_ratio <= hi
    # Percentile intervals of a median run a little narrow on small samples; ≥ 85 % is healthy,
    # a broken interval (wrong side, ratio inverted) covers almost never.
    assert covered / trials >= 0.85


def test_identical_samples_are_no_change() -> None:
    samples = [7.6e6, 7.9e6, 8.1e6, 8.2e6, 7.3e6]
    cmp = compare_samples(samples, samples)
    assert cmp.verdict == "no_significant_change"
    assert cmp.ratio == pytest.approx(1.0)
    assert cmp.ci_low is not None and cmp.ci_low <= 1.0 <= (cmp.ci_high or 0)


def test_clear_speedup_is_detected() -> None:
    before = [7.6e6, 7.9e6, 8.1e6, 8.2e6, 7.3e6]
    after = [2.8e6, 2.8e6 + 30, 2.9e6, 3.1e6, 2.5e6]
    cmp = compare_samples(before, after)
    assert cmp.verdict == "faster"
    assert cmp.ratio is not None and cmp.ratio < 0.5
    assert cmp.ci_high is not None and cmp.ci_high < 1.0
    assert cmp.p_value is not None and cmp.p_value < 0.05


def test_clear_slowdown_is_detected() -> None:
    rng = np.random.default_rng(5)
    before = rng.normal(100.0, 2.0, 12)
    after = rng.normal(110.0, 2.0, 12)
    cmp = compare_samples(before, after)
    assert cmp.verdict == "slower"
    assert cmp.change_pct is not None and 5.0 < cmp.change_pct < 15.0


def test_too_few_samples_is_no_change_with_reason() -> None:
    cmp = compare_samples([10.0, 10.1], [20.0, 20.1])
    assert cmp.verdict == "no_significant_change"
    assert "too few samples" in cmp.reason
    assert cmp.ratio == pytest.approx(2.0, rel=0.01)


def test_three_samples_cannot_reach_significance_with_rank_test() -> None:
    # 3 vs 3 fully separated: the smallest two-sided exact p is 0.1, so no verdict is possible.
    cmp = compare_samples([10.0, 10.1, 10.2], [20.0, 20.1, 20.2])
    assert cmp.verdict == "no_significant_change"
    assert "rank test" in cmp.reason


def test_noisy_overlapping_samples_are_no_change() -> None:
    rng = np.random.default_rng(11)
    before = rng.normal(100.0, 10.0, 8)
    after = before[::-1] + rng.normal(0.0, 0.1, 8)
    assert compare_samples(before, after).verdict == "no_significant_change"


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(min_value=1.0, max_value=1e9, allow_nan=False), min_size=1, max_size=25),
    st.lists(st.floats(min_value=1.0, max_value=1e9, allow_nan=False), min_size=1, max_size=25),
)
def test_properties_of_any_comparison(before: list[float], after: list[float]) -> None:
    cmp = compare_samples(before, after, n_boot=200)
    assert cmp.verdict in {"faster", "slower", "no_significant_change"}
    if cmp.p_value is not None:
        assert 0.0 <= cmp.p_value <= 1.0
    if cmp.ci_low is not None and cmp.ci_high is not None:
        assert cmp.ci_low <= cmp.ci_high
    if cmp.verdict == "faster":
        assert cmp.ci_high is not None and cmp.ci_high < 1.0
    if cmp.verdict == "slower":
        assert cmp.ci_low is not None and cmp.ci_low > 1.0
    # Swapping the sides mirrors the verdict.
    swapped = compare_samples(after, before, n_boot=200)
    mirror = {"faster": "slower", "slower": "faster", "no_significant_change": "no_significant_change"}
    if cmp.verdict != "no_significant_change" and swapped.verdict != "no_significant_change":
        assert swapped.verdict == mirror[cmp.verdict]
    # The point estimates and the rank test are exactly symmetric, whatever the bootstrap does.
    if cmp.ratio is not None and swapped.ratio is not None:
        assert cmp.ratio * swapped.ratio == pytest.approx(1.0, rel=1e-9)
    if cmp.p_value is not None:
        assert swapped.p_value == pytest.approx(cmp.p_value, rel=1e-9, abs=1e-12)


def test_the_mean_sees_stalls_that_the_median_steps_over() -> None:
    """Reduced from dataloader_w4: most steps get faster, but every 4th stalls on a refill."""
    before = [100.0, 101.0, 99.0, 100.5, 100.2, 99.8, 100.1, 99.9, 100.3, 99.7]
    after = [60.0, 61.0, 400.0, 60.5, 60.2, 400.0, 60.1, 59.9, 400.0, 59.7]
    by_median = compare_samples(before, after)
    by_mean = compare_samples(before, after, statistic="mean")
    # The median reads 40 % faster; the run as a whole is 1.8x slower, which the mean says.
    assert by_median.ratio is not None and by_median.ratio < 0.7
    assert by_mean.verdict != "faster"
    assert by_mean.ratio == pytest.approx(sum(after) / sum(before))
    assert by_mean.ratio is not None and by_mean.ratio > 1.5
