"""How much slower or faster is one measurement than another, with what certainty: pure statistics on two
lists of per-call times (no torch, no files).

**The ratio.** candidate time / baseline time, estimated by the Hodges-Lehmann estimator on log times: the
median of every pairwise difference log(c_j) - log(b_i), exponentiated. Its 95% interval is the Moses
interval that goes with the Mann-Whitney test: the k-th smallest and k-th largest of those m*n differences,
with k from the exact null distribution of the Mann-Whitney U statistic (``mann_whitney_cdf``; the normal
approximation beyond ``EXACT_MAX`` samples a side, where it is accurate to well under one rank).

**Why this and not a bootstrap over blocks.** A matmul point has as few as 6 timed blocks (``MIN_BLOCKS``).
A bootstrap of 6 values has at most 462 distinct resamples, and its percentile interval of a median is
known to undercover at such sizes; the Mann-Whitney interval is exact for any sample size, needs no
random numbers (the same two runs always give the same verdict), and tells honestly when no 95% interval
exists (3 blocks against 3 cannot reach 95%: the verdict is then ``inconclusive``). On log times the model
is "the candidate's times are the baseline's times scaled by a factor", which is what a slower clock, a
thread fewer or a worse kernel does; being rank-based, one block preempted by the OS moves the estimate by
one rank, not by its size. It assumes the blocks within a run are exchangeable, as any within-run interval
does: the drift from one run to the next is what ``min_effect`` is for.

**The verdict** (``verdict``), on the speed change = baseline time / candidate time - 1 (negative: slower):
``slower`` when its whole interval lies below -min_effect, ``faster`` when above +min_effect, ``same``
when it lies within +-min_effect, ``inconclusive`` otherwise, and whenever either side is flagged unstable
or no interval exists.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats

LEVEL = 0.95
METHOD = "hodges_lehmann"
EXACT_MAX = 50  # exact Mann-Whitney null distribution when the smaller side has at most this many samples
MAX_SAMPLES = 2000  # a side with more samples is thinned evenly to this many (m*n pairwise differences)
VERDICTS = ("slower", "faster", "same", "inconclusive")


@dataclass(frozen=True)
class RatioEstimate:
    """candidate / baseline time: Hodges-Lehmann point estimate and its Moses 95% interval (NaN when none exists)."""

    ratio: float
    low: float
    high: float
    n_baseline: int
    n_candidate: int

    @property
    def has_interval(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def speed_change(self) -> float:
        """baseline / candidate time - 1: +0.10 is 10% faster, -0.12 is 12% slower."""
        return speed_change(self.ratio)

    @property
    def speed_change_interval(self) -> tuple[float, float]:
        return speed_change(self.high), speed_change(self.low)


def speed_change(time_ratio: float) -> float:
    """The change in speed (throughput) a candidate/baseline time ratio means: 1/ratio - 1."""
    return 1.0 / time_ratio - 1.0 if time_ratio and math.isfinite(time_ratio) else math.nan


@lru_cache(maxsize=256)
def mann_whitney_cdf(m: int, n: int) -> np.ndarray:
    """P(U <= u) for u = 0 .. m*n under the null (no shift, no ties), exactly.

    The number of arrangements with U = u is the coefficient of q^u in the Gaussian binomial coefficient
    [m+n choose m]_q = prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i): built factor by factor (each partial
    product is itself a Gaussian binomial, so every coefficient stays >= 0), in floats scaled as they go.
    """
    m, n = (int(m), int(n)) if m <= n else (int(n), int(m))
    counts = np.zeros(m * n + 1)
    counts[0] = 1.0
    for i in range(1, m + 1):
        shift = n + i
        counts[shift:] -= counts[:-shift].copy()  # times (1 - q^(n+i))
        for r in range(i):  # divided by (1 - q^i): a running sum along each residue class mod i
            counts[r::i] = np.cumsum(counts[r::i])
        counts /= counts.max()
    counts = np.clip(counts, 0.0, None)
    cdf = np.cumsum(counts)
    return cdf / cdf[-1]


def critical_rank(m: int, n: int, level: float = LEVEL) -> int:
    """k: the Moses interval is the k-th smallest to the k-th largest pairwise difference; 0 when no interval
    of this level exists with m and n samples. k is the largest integer with P(U <= k - 1) <= (1 - level)/2."""
    alpha2 = (1.0 - level) / 2.0
    if min(m, n) <= EXACT_MAX:
        cdf = mann_whitney_cdf(m, n)
        return int(np.searchsorted(cdf, alpha2 * (1 + 1e-9), side="right"))  # count of u with P(U <= u) <= a/2
    z = stats.norm.ppf(1.0 - alpha2)
    k = math.floor(m * n / 2.0 - z * math.sqrt(m * n * (m + n + 1) / 12.0) + 0.5)
    return max(0, k)


def _thin(x: np.ndarray) -> np.ndarray:
    if x.size <= MAX_SAMPLES:
        return x
    return x[np.linspace(0, x.size - 1, MAX_SAMPLES).round().astype(int)]


def hodges_lehmann_ratio(
    baseline_s: Sequence[float], candidate_s: Sequence[float], level: float = LEVEL
) -> RatioEstimate:
    """candidate/baseline time ratio with its Moses interval (see the module doc). Times must be > 0."""
    b = _thin(np.asarray(baseline_s, dtype=float))
    c = _thin(np.asarray(candidate_s, dtype=float))
    if b.size == 0 or c.size == 0:
        return RatioEstimate(math.nan, math.nan, math.nan, int(b.size), int(c.size))
    if not (np.all(np.isfinite(b)) and np.all(np.isfinite(c)) and np.all(b > 0) and np.all(c > 0)):
        raise ValueError("hodges_lehmann_ratio: times must be finite and > 0")
    diffs = np.sort(np.subtract.outer(np.log(c), np.log(b)).ravel())
    estimate = math.exp(float(np.median(diffs)))
    k = critical_rank(b.size, c.size, level)
    if k < 1:
        return RatioEstimate(estimate, math.nan, math.nan, int(b.size), int(c.size))
    low, high = math.exp(float(diffs[k - 1])), math.exp(float(diffs[diffs.size - k]))
    return RatioEstimate(estimate, low, high, int(b.size), int(c.size))


def verdict(estimate: RatioEstimate, min_effect: float, unstable: bool = False) -> str:
    """``slower``/``faster``: the speed-change interval lies wholly beyond -/+ ``min_effect``; ``same``: it lies
    within +-``min_effect``; ``inconclusive``: otherwise, without an interval, or when either side is unstable."""
    if unstable or not estimate.has_interval:
        return "inconclusive"
    low, high = estimate.speed_change_interval
    if high < -min_effect:
        return "slower"
    if low > min_effect:
        return "faster"
    if -min_effect <= low and high <= min_effect:
        return "same"
    return "inconclusive"


def describe(estimate: RatioEstimate, verdict_word: str) -> str:
    """``slower -12% [-14, -10]``: the verdict, the speed change and its interval, in percent."""
    if not math.isfinite(estimate.ratio):
        return verdict_word
    change = 100 * estimate.speed_change
    text = f"{verdict_word} {_pct(change)}"
    if estimate.has_interval:
        low, high = (100 * v for v in estimate.speed_change_interval)
        text += f" [{_pct(low, sign=False)}, {_pct(high, sign=False)}]"
    return text


def _pct(value: float, sign: bool = True) -> str:
    digits = 0 if abs(value) >= 10 else 1
    text = f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"
    text = text.replace("-", "\u2212")
    return f"{text}%" if sign else text
