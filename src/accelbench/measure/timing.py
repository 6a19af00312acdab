"""How every duration in accelbench is measured, and what is said about it.

Two layers:

- Pure statistics on a list of per-call times (``summarize``, ``median_ci95``, ``iqr``,
  ``is_unstable``): no torch, no clock, tested on known lists.
- ``Measurer``: times one statement on one device with ``torch.utils.benchmark.Timer``, passing
  ``timer=backend.synced_timer(device)`` (``accelbench.backends``) so the clock is read only after
  *that* device finished its queued work (every CUDA/ROCm index, MPS, and XLA, whose lazy graph the
  synced timer cuts and waits for). ``blocked_autorange`` picks a block size that makes the timer's own overhead
  negligible (under 0.01% of a block) and repeats blocks for ``min_run_time_s``.

What we add on top of torch.utils.benchmark:

- At least ``MIN_BLOCKS`` (6) blocks: the fewest from which a distribution-free 95% interval of
  the median exists (with m blocks, [min, max] covers the median with probability 1 - 2 * 0.5**m,
  which first reaches 95% at m = 6). ``blocked_autorange`` alone returns 1-3 blocks for calls
  longer than a third of ``min_run_time_s``, from which no interval can be given.
- A 95% interval of the median that respects the blocks' time order (``measure.blocks``): non-overlapping
  batch means (10 batches, sectioning around the median) from 50 blocks on, which absorbs the correlation
  between neighbouring blocks (lag-1 0.27-0.36 measured here); from fewer blocks the order-statistic
  interval (binomial, ``scipy.stats.quantile_test``), which assumes exchangeable blocks and is therefore
  labelled ``descriptive``. ``ci_method`` says which, ``lag1_autocorr`` gives the blocks' measured lag-1
  autocorrelation. Either covers variation within this one process, never run-to-run variation.
- ``repeats`` (timed calls in all) and ``blocks`` reported alongside the median, and the
  ``unstable`` verdict (IQR/median over a configured threshold) taken per point.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.benchmark import Timer
from torch.utils.benchmark.utils.common import set_torch_threads

from . import blocks

# The fewest blocks from which an order-statistic 95% interval of the median exists.
MIN_BLOCKS = 6


@dataclass(frozen=True)
class TimingStats:
    """Summary of one measurement; every time is seconds per call (one block's time / calls per block)."""

    median_s: float
    iqr_s: float
    ci95_low_s: float  # within-run 95% interval of the median (measure.blocks); NaN from fewer than 6 blocks
    ci95_high_s: float
    blocks: int  # timed blocks (one sample each)
    repeats: int  # timed calls in all: blocks * calls_per_block
    calls_per_block: int
    total_s: float  # time spent in the timed blocks
    samples_s: tuple[float, ...] = ()  # per-call time of each block, in the order measured
    ci_method: str = blocks.DESCRIPTIVE  # batch_means, or descriptive (too few blocks, taken as exchangeable)
    lag1_autocorr: float = math.nan  # lag-1 autocorrelation of the log block times, in the order measured

    @property
    def iqr_ratio(self) -> float:
        """IQR / median: the spread the ``unstable`` flag is judged on."""
        return self.iqr_s / self.median_s if self.median_s > 0 else math.inf


def iqr(times_s: Sequence[float]) -> float:
    """Interquartile range, linear interpolation between order statistics (as torch.utils.benchmark)."""
    x = np.asarray(times_s, dtype=float)
    if x.size == 0:
        return math.nan
    q25, q75 = np.quantile(x, [0.25, 0.75])
    return float(q75 - q25)


def median_ci95(times_s: Sequence[float]) -> tuple[float, float]:
    """Distribution-free 95% confidence interval of the median *for exchangeable samples*: the order statistics
    x(l) and x(m-l+1) with l the largest index whose binomial coverage 1 - 2 P(Binom(m, 1/2) < l) is still
    >= 95% (``blocks.order_statistic_ci``; (NaN, NaN) from fewer than 6 samples, where no such interval exists).
    Consecutive blocks are not exchangeable: ``summarize`` uses ``blocks.median_interval`` instead."""
    return blocks.order_statistic_ci(times_s)


def is_unstable(iqr_s: float, median_s: float, threshold: float) -> bool:
    """IQR/median over ``threshold``: the spread says the machine was not steady during the measurement."""
    if not (median_s > 0) or math.isnan(iqr_s):
        return True
    return iqr_s / median_s > threshold


def summarize(times_s: Sequence[float], calls_per_block: int = 1) -> TimingStats:
    """Statistics of per-call times, one per block (block time / ``calls_per_block``)."""
    x = np.asarray(times_s, dtype=float)
    if x.size == 0:
        raise ValueError("summarize: no times")
    if not np.all(np.isfinite(x)) or np.any(x < 0):
        raise ValueError(f"summarize: times must be finite and >= 0, got {list(x)}")
    ci = blocks.median_interval(x)
    return TimingStats(
        median_s=float(np.median(x)),
        iqr_s=iqr(x),
        ci95_low_s=ci.low,
        ci95_high_s=ci.high,
        blocks=int(x.size),
        repeats=int(x.size) * int(calls_per_block),
        calls_per_block=int(calls_per_block),
        total_s=float(x.sum()) * calls_per_block,
        samples_s=tuple(float(v) for v in x),
        ci_method=ci.method,
        lag1_autocorr=ci.lag1_autocorr,
    )


class Measurer:
    """Times statements on one device with ``torch.utils.benchmark.Timer`` and ``timer``, the device's
    synced timer (``Backend.synced_timer(device)``).

    ``min_run_time_s`` is spent in timed blocks (``blocked_autorange``); then, if fewer than
    ``min_blocks`` blocks were taken, more blocks of the same size are added so that an interval
    of the median exists, unless ``max_run_time_s`` of timed blocks has already been spent.
    ``threads`` is handed to the Timer, which otherwise times with ONE torch thread (its default).
    """

    def __init__(
        self,
        timer: Callable[[], float],
        *,
        min_run_time_s: float,
        threads: int | None = None,
        min_blocks: int = MIN_BLOCKS,
        max_run_time_s: float | None = None,
    ):
        self.min_run_time_s = float(min_run_time_s)
        self.threads = int(threads) if threads else torch.get_num_threads()
        self.min_blocks = int(min_blocks)
        self.max_run_time_s = float(max_run_time_s) if max_run_time_s else max(10 * self.min_run_time_s, 1.0)
        self.timer = timer

    def _timer(self, stmt: str, globals_: dict):
        return Timer(stmt=stmt, globals=globals_, timer=self.timer, num_threads=self.threads)

    def _block(self, t, number: int) -> float:
        """Seconds for one timed block of ``number`` calls (synced at both ends).

        ``Timer.timeit`` would first run a warm-up of its own (at least 2 calls), which for a call of
        seconds doubles the cost of one extra block; its block primitive ``_timeit`` does not.
        """
        block = getattr(t, "_timeit", None)
        if block is None:  # a future torch without the primitive: the public call, warm-up included
            return t.timeit(number).raw_times[0]
        with set_torch_threads(self.threads):
            return block(number)

    def warm_up(self, stmt: str | Callable[[], object], globals_: dict | None = None, calls: int = 2) -> float:
        """Run ``stmt`` ``calls`` times in one synchronized block; return seconds per call."""
        if callable(stmt):
            globals_, stmt = {"_fn": stmt}, "_fn()"
        calls = max(1, int(calls))
        return self._block(self._timer(stmt, dict(globals_ or {})), calls) / calls

    def measure(self, stmt: str | Callable[[], object], globals_: dict | None = None) -> TimingStats:
        """Time ``stmt`` (a statement over ``globals_``, or a no-argument callable)."""
        if callable(stmt):
            globals_, stmt = {"_fn": stmt}, "_fn()"
        t = self._timer(stmt, dict(globals_ or {}))
        m = t.blocked_autorange(min_run_time=self.min_run_time_s)
        raw = list(m.raw_times)
        number = m.number_per_run
        while len(raw) < self.min_blocks and sum(raw) < self.max_run_time_s:
            raw.append(self._block(t, number))
        return summarize([r / number for r in raw], number)
