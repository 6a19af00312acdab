"""The statistics of ``accelbench compare`` (``measure.ratio``) on fixture samples: the exact Mann-Whitney
distribution against scipy's, the Hodges-Lehmann ratio and its interval on known shifts, the verdict rules,
and the error rates the issue asks for (planted slowdowns found, identical samples the same, false alarms rare).
Every random sample here comes from a seeded generator: the rates below are the same on every run."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from accelbench.measure import ratio as R
from accelbench.reporting.compare import DEFAULT_MIN_EFFECT


def lognormal_times(rng, n, median=0.01, sigma=0.01):
    """Per-call times as a quiet machine gives them: a log-normal spread of ``sigma`` around ``median``."""
    return median * np.exp(rng.normal(0.0, sigma, n))


@pytest.mark.parametrize("m,n", [(3, 3), (4, 7), (6, 6), (10, 13), (25, 25), (50, 40)])
def test_exact_null_distribution_matches_scipy(m, n):
    """P(U <= u) from the Gaussian-binomial construction equals scipy's exact Mann-Whitney p-value."""
    cdf = R.mann_whitney_cdf(m, n)
    assert cdf.shape == (m * n + 1,) and cdf[-1] == pytest.approx(1.0)
    rng = np.random.default_rng(m * 100 + n)
    for _ in range(20):
        x, y = rng.normal(size=m), rng.normal(size=n) + rng.normal()
        res = stats.mannwhitneyu(x, y, alternative="less", method="exact")
        assert cdf[int(res.statistic)] == pytest.approx(res.pvalue, rel=1e-9, abs=1e-12)


def test_null_distribution_is_symmetric_and_order_free():
    cdf = R.mann_whitney_cdf(7, 9)
    pmf = np.diff(np.concatenate([[0.0], cdf]))
    assert np.allclose(pmf, pmf[::-1])
    assert np.allclose(R.mann_whitney_cdf(9, 7), cdf)


def test_critical_rank_known_values_and_no_interval_for_tiny_samples():
    # 3 vs 3: P(U = 0) = 1/20 = 0.05 > 0.025: no 95% interval exists
    assert R.critical_rank(3, 3) == 0
    # 6 vs 6 (the fewest timed blocks accelbench takes): P(U <= 5) = 0.0206 <= 0.025 < P(U <= 6): k = 6
    cdf = R.mann_whitney_cdf(6, 6)
    assert cdf[5] <= 0.025 < cdf[6]
    assert R.critical_rank(6, 6) == 6
    # beyond the exact range the normal approximation takes over, within one rank of exact at the border
    exact = R.critical_rank(50, 50)
    z = stats.norm.ppf(0.975)
    approx = math.floor(2500 / 2 - z * math.sqrt(2500 * 101 / 12) + 0.5)
    assert abs(exact - approx) <= 1


def test_estimate_recovers_a_known_ratio():
    rng = np.random.default_rng(1)
    base = lognormal_times(rng, 40)
    est = R.hodges_lehmann_ratio(base, base * 1.25)
    assert est.ratio == pytest.approx(1.25, rel=1e-12)  # an exact scale change: every pairwise median is log 1.25
    assert est.low <= 1.25 <= est.high
    assert est.speed_change == pytest.approx(1 / 1.25 - 1)


def test_one_outlier_block_moves_the_estimate_little():
    rng = np.random.default_rng(2)
    base, cand = lognormal_times(rng, 12), lognormal_times(rng, 12)
    clean = R.hodges_lehmann_ratio(base, cand)
    cand_outlier = cand.copy()
    cand_outlier[3] *= 50  # one block preempted by the OS
    dirty = R.hodges_lehmann_ratio(base, cand_outlier)
    assert abs(math.log(dirty.ratio / clean.ratio)) < 0.01
    assert np.median(cand_outlier) / np.median(base) == pytest.approx(np.median(cand) / np.median(base), rel=0.02)


def test_planted_ten_percent_slowdown_is_slower_with_an_interval_excluding_one():
    rng = np.random.default_rng(3)
    base = lognormal_times(rng, 20)
    cand = lognormal_times(rng, 20) * 1.10
    est = R.hodges_lehmann_ratio(base, cand)
    assert est.low > 1.0  # the interval of the time ratio excludes 1
    assert est.low < 1.10 < est.high
    assert R.verdict(est, DEFAULT_MIN_EFFECT) == "slower"
    assert R.describe(est, "slower").startswith("slower \u22129")


def test_identical_samples_are_the_same():
    rng = np.random.default_rng(4)
    base = lognormal_times(rng, 20)
    est = R.hodges_lehmann_ratio(base, base.copy())
    assert est.ratio == pytest.approx(1.0)
    assert R.verdict(est, DEFAULT_MIN_EFFECT) == "same"


def test_false_alarm_rate_over_200_resamplings():
    """Two halves of one point's samples (a random split, 200 times): with the default min effect no split may
    be called slower or faster; with no min effect at all the rate stays at the 5% the interval promises."""
    rng = np.random.default_rng(5)
    samples = lognormal_times(rng, 30, sigma=0.02)
    alarms_default, alarms_zero = 0, 0
    for _ in range(200):
        perm = rng.permutation(samples)
        est = R.hodges_lehmann_ratio(perm[:15], perm[15:])
        alarms_default += R.verdict(est, DEFAULT_MIN_EFFECT) in ("slower", "faster")
        alarms_zero += R.verdict(est, 0.0) in ("slower", "faster")
    assert alarms_default / 200 <= 0.05
    assert alarms_default == 0
    assert alarms_zero / 200 <= 0.05


def test_detection_rate_of_planted_slowdowns():
    rng = np.random.default_rng(6)
    hits = {1.05: 0, 1.10: 0}
    for _ in range(200):
        base, cand = lognormal_times(rng, 15), lognormal_times(rng, 15)
        for factor in hits:
            hits[factor] += R.verdict(R.hodges_lehmann_ratio(base, cand * factor), 0.02) == "slower"
    assert hits[1.10] == 200  # a 10% slowdown on a quiet machine is always found
    assert hits[1.05] >= 190  # 5% (-4.8% speed) against a 2% floor: found nearly always


@pytest.mark.parametrize(
    "low,high,min_effect,expected",
    [
        (1.20, 1.30, 0.05, "slower"),  # speed change [-23%, -17%]: wholly below -5%
        (0.80, 0.90, 0.05, "faster"),  # [+11%, +25%]
        (0.98, 1.03, 0.05, "same"),  # [-3%, +2%]: within +-5%
        (1.02, 1.08, 0.05, "inconclusive"),  # [-7.4%, -2%]: crosses -5%
        (1.20, 1.30, 0.30, "same"),  # a floor of +-30% swallows a 20% change
        (1.000, 1.0001, 0.0, "inconclusive"),
    ],
)
def test_verdict_rules(low, high, min_effect, expected):
    est = R.RatioEstimate((low + high) / 2, low, high, 10, 10)
    assert R.verdict(est, min_effect) == expected


def test_unstable_or_no_interval_is_inconclusive():
    slow = R.RatioEstimate(1.5, 1.4, 1.6, 10, 10)
    assert R.verdict(slow, 0.05) == "slower"
    assert R.verdict(slow, 0.05, unstable=True) == "inconclusive"
    tiny = R.hodges_lehmann_ratio([1.0, 1.1, 0.9], [2.0, 2.1, 1.9])
    assert not tiny.has_interval and tiny.ratio == pytest.approx(2.0, rel=0.1)
    assert R.verdict(tiny, 0.05) == "inconclusive"


def test_bad_times_are_refused():
    with pytest.raises(ValueError):
        R.hodges_lehmann_ratio([0.0, 1.0], [1.0, 1.0])
    assert math.isnan(R.hodges_lehmann_ratio([], [1.0]).ratio)


def test_long_sides_are_thinned_not_refused():
    rng = np.random.default_rng(7)
    est = R.hodges_lehmann_ratio(lognormal_times(rng, 5000), lognormal_times(rng, 3000) * 1.2)
    assert est.n_baseline == R.MAX_SAMPLES and est.n_candidate == R.MAX_SAMPLES
    assert est.low < 1.2 < est.high and est.high / est.low < 1.01
