"""measure.blocks: within-run intervals that account for the autocorrelation of consecutive blocks.

Validated by coverage on simulated AR(1) series with a known mean and a known lag-1 correlation phi (seeded):
the batch-means 95% interval must cover the true mean about 95% of the time, where the interval that treats
the values as independent is shown to under-cover.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import signal

from accelbench.measure import blocks
from accelbench.measure.timing import summarize

REPS = 400
N = 200
MU = 1.0e-3  # seconds: the true mean (and median) of the simulated block times


def ar1(rng: np.random.Generator, n: int, phi: float, sd: float = 0.05 * MU, burn: int = 200) -> np.ndarray:
    """A stationary Gaussian AR(1) series around MU with marginal sd ``sd`` and lag-1 correlation phi."""
    e = rng.standard_normal(n + burn) * sd * math.sqrt(1 - phi**2)
    return MU + signal.lfilter([1.0], [1.0, -phi], e)[burn:]


def coverage(phi: float, ci, seed: int, n: int = N) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(REPS):
        _, low, high = ci(ar1(rng, n, phi))
        hits += low <= MU <= high
    return hits / REPS


@pytest.mark.parametrize("phi", [0.0, 0.35, 0.5])
@pytest.mark.parametrize("statistic", ["mean", "median"])
def test_batch_means_cover_the_true_centre_at_about_95_percent(phi, statistic):
    cov = coverage(phi, lambda x: blocks.batch_means_ci(x, statistic), seed=int(phi * 100) + len(statistic))
    assert 0.90 <= cov <= 0.98, f"{statistic} phi={phi}: coverage {cov:.3f}"


def test_the_iid_interval_under_covers_a_correlated_series_where_batch_means_do_not():
    naive = coverage(0.5, blocks.iid_mean_ci, seed=7)
    batched = coverage(0.5, lambda x: blocks.batch_means_ci(x, "mean"), seed=7)
    assert naive < 0.85, naive  # (1 + phi) / (1 - phi) = 3x the variance it assumes: ~74%
    assert batched >= 0.90 and batched - naive > 0.10, (batched, naive)
    # and on independent values the two agree (the test can tell a correct iid interval from a wrong one)
    assert coverage(0.0, blocks.iid_mean_ci, seed=8) >= 0.92


def test_the_order_statistic_interval_of_the_median_under_covers_too():
    """What summarize gave before batch means: exact for exchangeable blocks, too narrow for correlated ones."""

    def order_ci(x):
        return (float(np.median(x)), *blocks.order_statistic_ci(x))

    assert coverage(0.6, order_ci, seed=9) < 0.85  # ~82% at phi 0.5, ~78% at 0.6 (bench/within_run_coverage.py)
    assert coverage(0.0, order_ci, seed=10) >= 0.92


@pytest.mark.parametrize("phi", [0.0, 0.3, 0.6])
def test_lag1_estimate(phi):
    rng = np.random.default_rng(11)
    x = ar1(rng, 5000, phi, sd=0.01 * MU)  # small sd: log(x) is x's affine image to first order
    assert blocks.lag1_autocorr(x) == pytest.approx(phi, abs=0.04)


def test_lag1_edge_cases():
    assert math.isnan(blocks.lag1_autocorr([1.0, 2.0]))  # too few
    assert math.isnan(blocks.lag1_autocorr([2.0] * 10))  # constant
    assert math.isnan(blocks.lag1_autocorr([1.0, -1.0, 2.0, 3.0]))  # log of a non-positive time
    assert blocks.lag1_autocorr([1.0, -1.0, 1.0, -1.0, 1.0], log=False) == pytest.approx(-0.8)
    assert blocks.lag1_autocorr(np.exp(np.arange(20.0))) > 0.8  # a trend is strongly autocorrelated


def test_short_series_fall_back_to_a_descriptive_interval():
    x = list(np.random.default_rng(3).uniform(1.0, 2.0, blocks.MIN_BATCH_BLOCKS - 1))
    iv = blocks.median_interval(x)
    assert iv.method == blocks.DESCRIPTIVE and iv.batches == 0
    assert (iv.low, iv.high) == blocks.order_statistic_ci(x)
    assert iv.low <= np.median(x) <= iv.high
    assert math.isfinite(iv.lag1_autocorr)
    few = blocks.median_interval([1.0, 2.0, 3.0, 4.0, 5.0])  # 5 values: no 95% order-statistic interval exists
    assert few.method == blocks.DESCRIPTIVE and math.isnan(few.low) and math.isnan(few.high)
    assert blocks.median_interval([]).method == blocks.DESCRIPTIVE


def test_long_series_get_batch_means_around_the_whole_series_median():
    x = ar1(np.random.default_rng(4), blocks.MIN_BATCH_BLOCKS, 0.3)
    iv = blocks.median_interval(x)
    assert iv.method == blocks.BATCH_MEANS and iv.batches == blocks.BATCHES
    centre, low, high = blocks.batch_means_ci(x, "median")
    assert (iv.low, iv.high) == (low, high) and centre == np.median(x)
    assert low < centre < high and centre - low == pytest.approx(high - centre)


def test_batches_keep_time_order_and_drop_the_first_values():
    """A step in the series is one batch's worth of difference: the batches must be consecutive runs of values,
    not a shuffle. 10 batches of 5 from 53 values: the first 3 are left out."""
    x = np.r_[[1e6] * 3, [1.0] * 25, [2.0] * 25]
    centre, low, high = blocks.batch_means_ci(x, "mean")
    means = np.r_[[1.0] * 5, [2.0] * 5]
    half = 2.2621571627 * means.std(ddof=1) / math.sqrt(10)
    assert centre == pytest.approx(x.mean())  # the estimate is the whole series'
    assert high - low == pytest.approx(2 * half, rel=1e-6)


def test_batch_means_needs_two_values_a_batch():
    assert math.isnan(blocks.batch_means_ci([1.0] * 19)[1])
    with pytest.raises(ValueError):
        blocks.batch_means_ci([1.0] * 50, "mode")


def test_summarize_labels_its_interval():
    short = summarize([1.0, 1.1, 1.2, 0.9, 1.05, 1.15])
    assert short.ci_method == "descriptive" and math.isfinite(short.ci95_low_s)
    x = ar1(np.random.default_rng(5), 120, 0.35)
    long = summarize(x)
    assert long.ci_method == "batch_means"
    assert (long.ci95_low_s, long.ci95_high_s) == blocks.batch_means_ci(x, "median")[1:]
    assert long.lag1_autocorr == pytest.approx(blocks.lag1_autocorr(x))
