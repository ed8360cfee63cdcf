"""Noise-aware comparison of two samples (per-step times of a before and an after run).

Two independent pieces of evidence, both needed before a change is called real:

- a bootstrap confidence interval of the ratio of a location statistic (after / before),
  resampling each side on its own with a fixed seed so that the same inputs always give the
  same interval. The statistic is the mean by default: the mean step is the total time of the
  steps divided by their number, so a stall every few steps moves it by exactly its share of
  the time, where a median can step over it. The median stays available for callers that
  want a typical step rather than the cost of the run;
- a two-sided Mann-Whitney U rank test (exact distribution for small samples without ties,
  normal approximation with tie and continuity corrections otherwise).

Only numpy is used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

Verdict = Literal["faster", "slower", "no_significant_change"]
Statistic = Literal["mean", "median"]

MIN_SAMPLES = 3
DEFAULT_ALPHA = 0.05
DEFAULT_BOOTSTRAP = 4000
DEFAULT_SEED = 0
# Above this many possible rank arrangements' support, the exact distribution is not worth it.
_EXACT_MAX_MN = 2500


@dataclass(frozen=True)
class RankTest:
    u_statistic: float
    p_value: float
    method: Literal["exact", "normal"]


@dataclass(frozen=True)
class SampleComparison:
    """Before/after samples summarised, with the verdict and the evidence behind it."""

    n_before: int
    n_after: int
    before_mean: float | None
    after_mean: float | None
    before_median: float | None
    after_median: float | None
    before_p90: float | None
    after_p90: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    p_value: float | None
    u_statistic: float | None
    test_method: str | None
    verdict: Verdict
    reason: str
    # Which location statistic ``ratio`` and its interval compare.
    statistic: Statistic = "median"

    @property
    def change_pct(self) -> float | None:
        return None if self.ratio is None else 100.0 * (self.ratio - 1.0)


def _as_array(values: npt.ArrayLike) -> npt.NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64).ravel()
    return arr[np.isfinite(arr)]


def median_ratio_ci(
    before: npt.ArrayLike,
    after: npt.ArrayLike,
    *,
    confidence: float = 1.0 - DEFAULT_ALPHA,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
    statistic: Statistic = "median",
) -> tuple[float, float, float]:
    """Ratio of medians (or means: ``statistic``), after / before, and its percentile
    bootstrap interval.

    Each side is resampled with replacement independently (the runs are not paired).
    Raises ValueError on an empty side or a non-positive before median (mean).
    """
    b = _as_array(before)
    a = _as_array(after)
    if b.size == 0 or a.size == 0:
        raise ValueError("both samples need at least one finite value")
    stat = np.mean if statistic == "mean" else np.median
    b_med = float(stat(b))
    if b_med <= 0:
        raise ValueError(f"the before {statistic} must be positive to form a ratio")
    rng = np.random.default_rng(seed)
    b_boot = stat(b[rng.integers(0, b.size, size=(n_boot, b.size))], axis=1)
    a_boot = stat(a[rng.integers(0, a.size, size=(n_boot, a.size))], axis=1)
    # A resample of the before side can only hold its own values, all positive when the
    # median is; guard anyway so a zero never turns into inf.
    ratios = a_boot / np.where(b_boot > 0, b_boot, np.nan)
    ratios = ratios[np.isfinite(ratios)]
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(ratios, [tail, 1.0 - tail])
    return float(stat(a)) / b_med, float(lo), float(hi)


def _exact_u_cdf(m: int, n: int) -> npt.NDArray[np.float64]:
    """P(U <= u) for u = 0..m*n under H0, without ties.

    The counts of U are the coefficients of the Gaussian binomial [m+n choose m]_q =
    prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i); dividing by (1 - q^i) is a running sum over
    each residue class mod i, done with one reshape and cumsum.
    """
    size = m * n + 1
    poly = np.zeros(size, dtype=np.float64)
    poly[0] = 1.0
    for i in range(1, m + 1):
        shift = n + i
        if shift < size:
            poly[shift:] -= poly[:-shift].copy()
        padded_len = -(-size // i) * i
        padded = np.zeros(padded_len, dtype=np.float64)
        padded[:size] = poly
        poly = np.cumsum(padded.reshape(-1, i), axis=0).ravel()[:size]
    cdf = np.cumsum(poly)
    out: npt.NDArray[np.float64] = cdf / cdf[-1]
    return out


def mann_whitney_u(x: npt.ArrayLike, y: npt.ArrayLike) -> RankTest:
    """Two-sided Mann-Whitney U test of ``x`` against ``y``; U counts pairs with x > y."""
    xa = _as_array(x)
    ya = _as_array(y)
    m, n = xa.size, ya.size
    if m == 0 or n == 0:
        raise ValueError("both samples need at least one finite value")
    both = np.concatenate([xa, ya])
    order = np.argsort(both, kind="mergesort")
    sorted_vals = both[order]
    # Average ranks over ties: every member of a tie group gets the mean of its positions.
    _, first_idx, counts = np.unique(sorted_vals, return_index=True, return_counts=True)
    avg_rank = first_idx + (counts + 1) / 2.0
    ranks_sorted = np.repeat(avg_rank, counts)
    ranks = np.empty_like(ranks_sorted)
    ranks[order] = ranks_sorted
    u = float(ranks[:m].sum() - m * (m + 1) / 2.0)
    has_ties = bool((counts > 1).any())
    if not has_ties and m * n <= _EXACT_MAX_MN:
        cdf = _exact_u_cdf(m, n)
        k = round(u)
        p_low = cdf[k]
        p_high = 1.0 - (cdf[k - 1] if k > 0 else 0.0)
        p = min(1.0, 2.0 * min(p_low, p_high))
        return RankTest(u_statistic=u, p_value=float(p), method="exact")
    total = m + n
    mean_u = m * n / 2.0
    tie_term = float((counts**3 - counts).sum()) / (total * (total - 1))
    var_u = m * n / 12.0 * ((total + 1) - tie_term)
    if var_u <= 0:
        return RankTest(u_statistic=u, p_value=1.0, method="normal")
    z = (abs(u - mean_u) - 0.5) / math.sqrt(var_u)
    p = math.erfc(max(z, 0.0) / math.sqrt(2.0))
    return RankTest(u_statistic=u, p_value=float(min(1.0, p)), method="normal")


def min_rank_p(m: int, n: int) -> float:
    """The smallest two-sided p the rank test can give for samples of sizes m and n (no ties)."""
    return min(1.0, 2.0 / math.comb(m + n, m))


# A change of the step time this large (as a fraction) deserves a word when it is not significant.
LARGE_CHANGE = 0.05


def steps_needed(alpha: float = DEFAULT_ALPHA, min_samples: int = MIN_SAMPLES) -> int:
    """The fewest steps per run (both runs alike) with which the rank test can reach p < ``alpha``."""
    n = max(min_samples, 2)
    while min_rank_p(n, n) >= alpha and n < 1000:
        n += 1
    return n


def why_not_significant(
    n_before: int,
    n_after: int,
    ratio: float | None,
    ci_low: float | None,
    ci_high: float | None,
    p_value: float | None,
    *,
    alpha: float = DEFAULT_ALPHA,
    min_samples: int = MIN_SAMPLES,
) -> str | None:
    """Why a large change (``LARGE_CHANGE`` or more) was not called significant, in a few words
    for a headline; None for a small change. Few steps come first: with 3 steps a run, no
    difference however large gets the rank test below 0.05."""
    if ratio is None or abs(ratio - 1.0) < LARGE_CHANGE:
        return None
    need = steps_needed(alpha, min_samples)
    if n_before < min_samples or n_after < min_samples:
        return f"too few steps to test ({n_before} and {n_after}; the test needs {min_samples} per run, {need} to reach p < {alpha:g})"
    floor = min_rank_p(n_before, n_after)
    if floor >= alpha:
        return (
            f"{n_before} and {n_after} steps cannot reach significance: the rank test's smallest "
            f"possible p is {floor:.2g}, not below {alpha:g}; record {need} or more steps per run"
        )
    if ci_low is not None and ci_high is not None and ci_low <= 1.0 <= ci_high:
        return f"the steps vary too much: the interval of the ratio [{ci_low:.2f}, {ci_high:.2f}] contains 1"
    if p_value is not None and p_value >= alpha:
        return f"the rank test gives p={p_value:.2g}, not below {alpha:g}; more steps would tell"
    return None


def _describe(values: npt.NDArray[np.float64]) -> tuple[float | None, float | None]:
    if values.size == 0:
        return None, None
    return float(np.median(values)), float(np.quantile(values, 0.9))


def compare_samples(
    before: npt.ArrayLike,
    after: npt.ArrayLike,
    *,
    alpha: float = DEFAULT_ALPHA,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
    min_samples: int = MIN_SAMPLES,
    statistic: Statistic = "median",
) -> SampleComparison:
    """Compare two samples of durations: faster/slower only when both tests agree.

    "faster" / "slower" need the bootstrap interval of the ratio of ``statistic`` (median or
    mean) to exclude 1 AND the rank test to give p < ``alpha``; anything less is
    "no_significant_change", with the reason.
    """
    b = _as_array(before)
    a = _as_array(after)
    b_med, b_p90 = _describe(b)
    a_med, a_p90 = _describe(a)
    b_mean = float(b.mean()) if b.size else None
    a_mean = float(a.mean()) if a.size else None
    b_loc, a_loc = (b_mean, a_mean) if statistic == "mean" else (b_med, a_med)
    confidence = 1.0 - alpha

    def result(
        verdict: Verdict,
        reason: str,
        ratio: float | None = None,
        lo: float | None = None,
        hi: float | None = None,
        test: RankTest | None = None,
    ) -> SampleComparison:
        return SampleComparison(
            n_before=int(b.size),
            n_after=int(a.size),
            before_mean=b_mean,
            after_mean=a_mean,
            before_median=b_med,
            after_median=a_med,
            before_p90=b_p90,
            after_p90=a_p90,
            ratio=ratio,
            ci_low=lo,
            ci_high=hi,
            confidence=confidence,
            p_value=test.p_value if test else None,
            u_statistic=test.u_statistic if test else None,
            test_method=test.method if test else None,
            verdict=verdict,
            reason=reason,
            statistic=statistic,
        )

    if b.size == 0 or a.size == 0:
        return result("no_significant_change", "no samples on one side")
    if b_loc is None or b_loc <= 0:
        return result("no_significant_change", f"the before {statistic} is not positive; no ratio")
    plain_ratio = (a_loc or 0.0) / b_loc
    if b.size < min_samples or a.size < min_samples:
        return result(
            "no_significant_change",
            f"too few samples to judge ({b.size} before, {a.size} after; need at least "
            f"{min_samples} on each side)",
            ratio=plain_ratio,
        )
    ratio, lo, hi = median_ratio_ci(
        b, a, confidence=confidence, n_boot=n_boot, seed=seed, statistic=statistic
    )
    test = mann_whitney_u(a, b)
    ci_text = f"{confidence:.0%} CI of the {statistic} ratio [{lo:.3f}, {hi:.3f}]"
    p_text = f"rank test p={test.p_value:.3g}"
    if lo <= 1.0 <= hi:
        return result("no_significant_change", f"{ci_text} contains 1", ratio, lo, hi, test)
    if test.p_value >= alpha:
        floor = min_rank_p(b.size, a.size)
        hint = (
            f"; with {b.size} and {a.size} samples the smallest possible p is {floor:.3g}: record more steps"
            if floor >= alpha
            else ""
        )
        return result(
            "no_significant_change", f"{p_text} ≥ {alpha:g} ({ci_text} excludes 1){hint}", ratio, lo, hi, test
        )
    verdict: Verdict = "slower" if lo > 1.0 else "faster"
    return result(verdict, f"{ci_text} excludes 1 and {p_text} < {alpha:g}", ratio, lo, hi, test)
