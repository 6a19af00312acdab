"""Paired intervals over runs (a seed, a run: one pair of a baseline and a candidate measured alike): the
statistics the AMP verdict, the scaling efficiency and ``accelbench compare`` share. Pure functions (numpy,
scipy.stats); the interval is over the pairs, so it covers the variance between pairs (between runs or seeds),
not the timing noise inside one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from scipy import stats


def _t_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and its Student-t interval; (mean, nan, nan) with fewer than two values."""
    values = np.asarray(values, dtype=float)
    n = len(values)
    if n == 0:
        return math.nan, math.nan, math.nan
    mean = float(values.mean())
    if n < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + level / 2, n - 1) * values.std(ddof=1) / math.sqrt(n))
    return mean, mean - half, mean + half


def speedup_ci(baseline_s: Iterable[float], mode_s: Iterable[float], level: float = 0.95) -> tuple[float, float, float]:
    """Paired speedup baseline/mode: geometric mean and a t-interval on the log ratios (see module doc)."""
    log_ratios = np.log(np.asarray(list(baseline_s), float)) - np.log(np.asarray(list(mode_s), float))
    mean, low, high = _t_interval(log_ratios, level)
    return math.exp(mean) if not math.isnan(mean) else math.nan, math.exp(low), math.exp(high)


def paired_diff_ci(mode: Iterable[float], baseline: Iterable[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean of the paired differences mode - baseline and its paired-t interval."""
    diffs = np.asarray(list(mode), float) - np.asarray(list(baseline), float)
    return _t_interval(diffs, level)
