"""Within-run intervals that respect the order of a time series: the timed blocks of one measurement (matmul,
membw, transfer, attention) or the timed steps of one training trial (AMP). Pure functions (numpy, scipy).

**Why.** Consecutive blocks of one process are not exchangeable: a clock that ramps, a cache that warms, a
neighbour on the machine that comes and goes make neighbouring blocks alike. The lag-1 autocorrelation of log
block times measured on real runs here is 0.27-0.36 (issue 21). An interval that treats the blocks as
independent (the order-statistic interval of the median, a t-interval over blocks) is then too narrow: for an
AR(1) series with lag-1 correlation phi the variance of the mean is about (1 + phi) / (1 - phi) times what
the independent formula says (3x at phi = 0.5: the t-interval over blocks then covers ~74% instead of 95%, the
order-statistic interval of the median 82-85%).

**Non-overlapping batch means** (Schmeiser 1982, "Batch size effects in the analysis of simulation output",
Operations Research 30(3):556-568; Law & Kelton, *Simulation Modeling and Analysis*, ch. 9.5.3; Alexopoulos &
Seila 1998, "Output data analysis", *Handbook of Simulation*, ch. 7). The series of n values, in time order, is
cut into ``BATCHES`` (10) consecutive batches of m = n // 10 values (the first n mod 10 values are left out of
the batches). If m is large against the series' correlation time, the batch statistics are nearly independent
and nearly normal, and the spread of the 10 batch statistics measures the variance of the whole-series
statistic, correlation included: half-width = t(0.975, 9) * sd(batch statistics) / sqrt(10). Schmeiser shows
10 to 30 batches lose little against the optimum; fewer batches cost degrees of freedom, more make each batch
too short to absorb the correlation. With 10 fixed batches the interval is asymptotically exact (t with 9
degrees of freedom) as n grows, whatever the correlation.

**The median** (what the tables report) is batched the same way ("sectioning", Asmussen & Glynn 2007,
*Stochastic Simulation*, III.5; Nakayama 2014, "Confidence intervals for quantiles using sectioning", ACM
TOMACS 24(4)): the centre is the median of the whole series, the half-width comes from the spread of the 10
batch medians. Centring on the whole-series median rather than on the mean of batch medians avoids the
small-batch bias of a median of few values.

**When there are too few values.** Batch means need batches of at least ``MIN_BATCH_SIZE`` (5) values, so at
least ``MIN_BATCH_BLOCKS`` (50) in all: in a simulation of AR(1) series with phi = 0.35 (the measured value;
``bench/within_run_coverage.py``, docs/measurements.md) the median's 95% interval then covers 93% (n = 50 to
200), the mean's 94-95%; from 30 values (batches of 3) 91-92%, and 89-90% at phi = 0.5. Below 50 values the
interval given is the order-statistic interval of the median
(``order_statistic_ci``), which assumes exchangeable values, and it is labelled ``descriptive``: it describes
the spread of these values, not the uncertainty of their median.

**What variance it covers.** Either interval covers variation *within this one process only*: the timing noise
of its blocks or steps, drift inside the run included (batch means). It says nothing about the next run: a
fresh process lands on another clock, memory layout, neighbour load. That run-to-run variance is measured by
repeating runs and comparing run medians (``accelbench compare`` with several runs a side).

**The lag-1 autocorrelation** (``lag1_autocorr``) is the ordinary sample estimate on log values,
r1 = sum (y_t - ybar)(y_t+1 - ybar) / sum (y_t - ybar)^2 (Box & Jenkins), the figure quoted above. It is biased
low by about (1 + 3 phi) / n for short series, and NaN from fewer than 3 values or a constant series.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

LEVEL = 0.95
BATCHES = 10  # Schmeiser (1982): 10 to 30 batches
MIN_BATCH_SIZE = 5  # values per batch before batch means are trusted
MIN_BATCH_BLOCKS = BATCHES * MIN_BATCH_SIZE
BATCH_MEANS = "batch_means"
DESCRIPTIVE = "descriptive"
CI_METHODS = (BATCH_MEANS, DESCRIPTIVE)
ORDER_MIN = 6  # the fewest values from which an order-statistic 95% interval of the median exists


@dataclass(frozen=True)
class Interval:
    """A within-run interval: ``low``..``high`` (NaN where none exists), how it was computed (``method``:
    ``batch_means`` or ``descriptive``), the number of batches it used (0 when descriptive) and the series'
    lag-1 autocorrelation of log values."""

    low: float
    high: float
    method: str
    batches: int
    lag1_autocorr: float


def lag1_autocorr(values: Sequence[float], log: bool = True) -> float:
    """Sample lag-1 autocorrelation of ``values`` in time order (of their logs when ``log``; values must then be
    > 0, else NaN). NaN from fewer than 3 values or when they do not vary."""
    x = np.asarray(values, dtype=float)
    if x.size < 3 or not np.all(np.isfinite(x)):
        return math.nan
    if log:
        if np.any(x <= 0):
            return math.nan
        x = np.log(x)
    d = x - x.mean()
    denom = float(np.dot(d, d))
    if not denom > 0:
        return math.nan
    return float(np.dot(d[:-1], d[1:]) / denom)


def _batches(x: np.ndarray, batches: int) -> np.ndarray:
    """The last ``batches * (n // batches)`` values as a (batches, m) array, in time order."""
    m = x.size // batches
    return x[x.size - batches * m :].reshape(batches, m)


def batch_means_ci(
    values: Sequence[float], statistic: str = "mean", batches: int = BATCHES, level: float = LEVEL
) -> tuple[float, float, float]:
    """(estimate, low, high): the whole-series ``statistic`` ("mean" or "median") and its non-overlapping
    batch-means interval over ``batches`` consecutive batches (see the module doc). Computed from any series
    with at least 2 values per batch; (estimate, NaN, NaN) from fewer. Whether the batches are long enough to
    trust is the caller's question (``interval``)."""
    if statistic not in ("mean", "median"):
        raise ValueError(f"batch_means_ci: statistic must be 'mean' or 'median', got {statistic!r}")
    f = np.mean if statistic == "mean" else np.median
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    centre = float(f(x))
    if batches < 2 or x.size < 2 * batches:
        return centre, math.nan, math.nan
    per_batch = f(_batches(x, batches), axis=1)
    half = float(stats.t.ppf(0.5 + level / 2, batches - 1) * per_batch.std(ddof=1) / math.sqrt(batches))
    return centre, centre - half, centre + half


def order_statistic_ci(values: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """Distribution-free interval of the median for *exchangeable* values: the order statistics x(l) and
    x(n-l+1) with l the largest index whose binomial coverage 1 - 2 P(Binom(n, 1/2) < l) is still >= ``level``
    (``scipy.stats.quantile_test(...).confidence_interval``); (NaN, NaN) from fewer than ``ORDER_MIN`` (6)
    values, where no 95% interval exists ([min, max] covers with probability 1 - 2 * 0.5**n)."""
    x = np.asarray(values, dtype=float)
    if x.size < ORDER_MIN:
        return math.nan, math.nan
    ci = stats.quantile_test(x, q=float(np.median(x)), p=0.5).confidence_interval(confidence_level=level)
    return float(ci.low), float(ci.high)


def iid_mean_ci(values: Sequence[float], level: float = LEVEL) -> tuple[float, float, float]:
    """(mean, low, high): the Student-t interval that treats the values as independent. Shown only to measure
    how much it under-covers on a correlated series (tests/test_blocks.py); no table uses it."""
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return (float(x.mean()) if x.size else math.nan), math.nan, math.nan
    half = float(stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return float(x.mean()), float(x.mean()) - half, float(x.mean()) + half


def median_interval(values: Sequence[float], min_blocks: int = MIN_BATCH_BLOCKS, batches: int = BATCHES) -> Interval:
    """The within-run 95% interval of the median of a time series of block (or step) times: batch means
    (sectioning) from ``min_blocks`` values on, else the order-statistic interval labelled ``descriptive``
    (NaN from fewer than 6 values, where none exists). See the module doc for what it covers."""
    x = np.asarray(values, dtype=float)
    r1 = lag1_autocorr(x)
    if x.size >= max(int(min_blocks), 2 * batches):
        _, low, high = batch_means_ci(x, "median", batches)
        return Interval(low, high, BATCH_MEANS, int(batches), r1)
    low, high = order_statistic_ci(x)
    return Interval(low, high, DESCRIPTIVE, 0, r1)
