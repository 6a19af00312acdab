"""Timing statistics (pure) and the Measurer (torch.utils.benchmark with a synced timer)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from accelbench.measure import timing
from accelbench.measure.timing import MIN_BLOCKS, Measurer, iqr, is_unstable, median_ci95, summarize


def test_summarize_known_list():
    s = summarize([float(i) for i in range(1, 11)], calls_per_block=3)
    assert s.median_s == 5.5
    assert s.iqr_s == pytest.approx(7.75 - 3.25)  # linear interpolation, as torch.utils.benchmark
    assert (s.ci95_low_s, s.ci95_high_s) == (2.0, 9.0)  # x(2), x(9): coverage 1 - 2*11/1024 = 0.979
    assert s.blocks == 10 and s.repeats == 30 and s.calls_per_block == 3
    assert s.total_s == pytest.approx(55 * 3)
    assert s.iqr_ratio == pytest.approx(4.5 / 5.5)


def test_summarize_order_matters_only_to_the_order_statistics():
    a = summarize([3.0, 1.0, 2.0, 5.0, 4.0, 6.0, 7.0])
    b = summarize([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    # below 50 blocks (a descriptive interval) every statistic is the same but the lag-1 autocorrelation (a
    # sorted series is a trend); the samples keep the order they were measured in
    assert a.ci_method == b.ci_method == "descriptive"
    assert b.lag1_autocorr > a.lag1_autocorr
    assert dataclasses.replace(a, samples_s=(), lag1_autocorr=0.0) == dataclasses.replace(
        b, samples_s=(), lag1_autocorr=0.0
    )
    assert a.samples_s == (3.0, 1.0, 2.0, 5.0, 4.0, 6.0, 7.0)
    assert sorted(a.samples_s) == list(b.samples_s)


def test_iqr_matches_torch_measurement():
    """summarize of per-call block times (what Measurer hands it) agrees with torch's own Measurement."""
    from torch.utils.benchmark.utils.common import Measurement, TaskSpec

    times = [0.9, 1.3, 1.0, 2.5, 1.1, 0.95, 1.05, 1.2]
    m = Measurement(number_per_run=4, raw_times=[t * 4 for t in times], task_spec=TaskSpec("pass", "pass"))
    s = summarize([r / m.number_per_run for r in m.raw_times], m.number_per_run)
    assert s.median_s == pytest.approx(m.median)
    assert s.iqr_s == pytest.approx(m.iqr)
    assert s.repeats == 32 and s.blocks == 8


def test_no_interval_below_six_blocks():
    assert all(math.isnan(x) for x in median_ci95([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert median_ci95([6.0, 1.0, 5.0, 2.0, 4.0, 3.0]) == (1.0, 6.0)  # 1 - 2/64 = 0.969 >= 0.95


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=MIN_BLOCKS, max_value=300))
def test_interval_is_the_narrowest_order_statistic_pair_with_95_percent(m):
    """Independent check of the binomial rule: CI = [x(l), x(m-l+1)] with l the largest index whose
    coverage 1 - 2 P(B <= l-1) is still >= 0.95, B ~ Binom(m, 1/2)."""
    low, high = median_ci95(np.arange(1.0, m + 1))
    l_ = int(low)
    assert high == m - l_ + 1
    assert 1 - 2 * sps.binom.cdf(l_ - 1, m, 0.5) >= 0.95
    assert 1 - 2 * sps.binom.cdf(l_, m, 0.5) < 0.95  # one step narrower would not cover


def test_summarize_rejects_bad_input():
    with pytest.raises(ValueError):
        summarize([])
    with pytest.raises(ValueError):
        summarize([1.0, float("nan")])
    with pytest.raises(ValueError):
        summarize([1.0, -1.0])


def test_iqr_empty_is_nan():
    assert math.isnan(iqr([]))


@pytest.mark.parametrize(
    "iqr_s,median_s,threshold,expected",
    [
        (0.05, 1.0, 0.1, False),
        (0.1, 1.0, 0.1, False),  # at the threshold: not over it
        (0.11, 1.0, 0.1, True),
        (0.0, 0.0, 0.1, True),  # no time at all is not a stable measurement
        (float("nan"), 1.0, 0.1, True),
    ],
)
def test_is_unstable(iqr_s, median_s, threshold, expected):
    assert is_unstable(iqr_s, median_s, threshold) is expected


class FakeClock:
    """A clock that only the workload advances: every call of ``work`` costs ``cost_s`` of fake time."""

    def __init__(self, costs):
        self.now = 0.0
        self.costs = list(costs)
        self.calls = 0

    def work(self):
        self.now += self.costs[self.calls % len(self.costs)]
        self.calls += 1

    def __call__(self):
        return self.now


def test_measurer_times_through_the_given_timer_and_tops_up_to_six_blocks():
    clock = FakeClock([0.001])
    m = Measurer(clock, min_run_time_s=0.002, threads=1)
    s = m.measure(clock.work)
    assert s.median_s == pytest.approx(0.001)
    assert s.iqr_s == pytest.approx(0.0, abs=1e-12)
    assert s.blocks >= MIN_BLOCKS  # blocked_autorange alone stops after 2 blocks of 1 ms
    assert s.repeats == s.blocks * s.calls_per_block
    assert len(s.samples_s) == s.blocks and all(x == pytest.approx(0.001) for x in s.samples_s)
    assert not math.isnan(s.ci95_low_s)


def test_measurer_sees_spread():
    clock = FakeClock([0.001, 0.003])  # alternating calls: a bimodal workload
    s = Measurer(clock, min_run_time_s=0.02, threads=1).measure(clock.work)
    assert s.calls_per_block == 1  # 1 ms calls need no batching against a free clock
    assert s.iqr_s == pytest.approx(0.002)
    assert is_unstable(s.iqr_s, s.median_s, 0.1)


def test_measurer_respects_max_run_time():
    clock = FakeClock([1.0])  # one call takes 1 s of fake time
    s = Measurer(clock, min_run_time_s=0.5, threads=1, max_run_time_s=2.5).measure(clock.work)
    assert s.blocks == 3  # 1 block from autorange, then topped up until 2.5 s were spent


def test_measurer_statement_with_globals_and_warm_up_on_cpu():
    import torch

    from accelbench import backends

    x = torch.ones(1000)
    m = Measurer(backends.get("cpu").synced_timer("cpu"), min_run_time_s=0.01, threads=1)
    assert m.warm_up("x.sum()", {"x": x}, calls=3) > 0
    s = m.measure("x.sum()", {"x": x})
    assert s.median_s > 0 and s.blocks >= MIN_BLOCKS
    assert s.ci95_low_s <= s.median_s <= s.ci95_high_s


def test_measurer_hands_threads_to_the_timer(monkeypatch):
    """torch.utils.benchmark.Timer times with ONE thread unless told otherwise."""
    import torch
    import torch.utils.benchmark as tb

    seen = []
    real = tb.Timer

    class Spy(real):
        def __init__(self, *a, **k):
            seen.append(k.get("num_threads"))
            super().__init__(*a, **k)

    monkeypatch.setattr(timing, "Timer", Spy)  # measure.timing binds Timer at import
    clock = FakeClock([0.001])
    Measurer(clock, min_run_time_s=0.002, threads=2).measure(clock.work)
    assert seen and all(t == 2 for t in seen)
    assert torch.get_num_threads() >= 1
