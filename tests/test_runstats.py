"""``measure.runstats``: the run as the unit of replication. Checked against scipy's Welch test, TOST against the
90% interval, and by simulation calibrated to the measured spread and autocorrelation (``measure.power``): runs as
AR(1) series of timed blocks (lag-1 autocorrelation ``MEASURED_LAG1``) plus a run effect, sized so that the sd of
the log run medians is the measured ``MEASURED_SPREAD_LOG_SD``, compared in groups of ``DEFAULT_RUNS`` a side with
the real ``compare_groups``. The test fails if the A/A false-alarm rate
(slower or faster) passes 7% or the power against a planted 10% slowdown falls below 80%; the same simulation
shows that the old within-run method (timed blocks as replicates) gives far more false alarms there."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from accelbench.measure import power as P
from accelbench.measure import ratio as R
from accelbench.measure import runstats as RS

PHI = P.MEASURED_LAG1  # lag-1 autocorrelation of log block times within a run
BLOCK_SD = 0.02  # sd of one block's log time around its run's level
BLOCKS = 12
# the sd of a run median's log from the blocks alone (simulated once: AR(1) medians have no closed form)
_WITHIN = 0.0085
RUN_SD = math.sqrt(P.MEASURED_SPREAD_LOG_SD**2 - _WITHIN**2)  # the run effect (log): what a fresh process changes
REPS = 1000
SLOWDOWN = 0.10  # time ratio 1.10


def simulate_runs(rng, reps: int, runs: int, effect: float = 0.0, run_sd: float = RUN_SD) -> np.ndarray:
    """Log block times, shape (reps, runs, BLOCKS): a run effect plus a stationary AR(1) series of blocks."""
    innovation = BLOCK_SD * math.sqrt(1 - PHI**2)
    e = np.empty((reps, runs, BLOCKS))
    e[..., 0] = rng.normal(0, BLOCK_SD, (reps, runs))
    for k in range(1, BLOCKS):
        e[..., k] = PHI * e[..., k - 1] + rng.normal(0, innovation, (reps, runs))
    return math.log(1e-3) + effect + rng.normal(0, run_sd, (reps, runs, 1)) + e


def log_run_medians(blocks: np.ndarray) -> np.ndarray:
    return np.log(np.median(np.exp(blocks), axis=-1))


def verdict_rates(base: np.ndarray, cand: np.ndarray, min_effect: float = 0.05) -> dict:
    words = [RS.compare_groups(b, c, min_effect)["verdict"] for b, c in zip(base, cand)]
    return {w: words.count(w) / len(words) for w in RS.VERDICTS}


def test_simulated_false_alarms_and_power_with_runs_as_the_unit():
    rng = np.random.default_rng(20261202)
    r = P.DEFAULT_RUNS
    medians = log_run_medians(simulate_runs(rng, REPS, 2 * r))
    spread = float(np.sqrt(np.mean(np.var(medians, axis=1, ddof=1))))
    # the simulation is at the measured spread the default R is sized for
    assert spread == pytest.approx(P.MEASURED_SPREAD_LOG_SD, rel=0.1)
    aa = verdict_rates(medians[:, :r], medians[:, r:])
    assert aa["slower"] + aa["faster"] <= 0.07, aa
    slow = log_run_medians(simulate_runs(rng, REPS, r, effect=math.log1p(SLOWDOWN)))
    planted = verdict_rates(medians[:, :r], slow)
    assert planted["slower"] >= 0.80, planted
    assert planted["faster"] == 0.0


def test_the_same_simulation_catches_pseudo_replication():
    """Timed blocks of one run each as the replicates (the old ``measure.ratio`` verdict) in the A/A case:
    the run effect never enters its interval, so at a 5% run spread (a shared machine's) it calls about a third of
    them slower or faster."""
    rng = np.random.default_rng(7)
    blocks = np.exp(simulate_runs(rng, 300, 2, run_sd=0.049))
    words = [R.verdict(R.hodges_lehmann_ratio(b[0], b[1]), 0.05) for b in blocks]
    assert (words.count("slower") + words.count("faster")) / len(words) > 0.20


def test_one_run_a_side_never_claims_a_change_without_a_spread():
    rng = np.random.default_rng(3)
    for d in np.concatenate([rng.normal(0, 0.5, 200), [math.log(3.0), -math.log(3.0), 0.0]]):
        out = RS.compare_groups([0.0], [float(d)], 0.05)
        assert out["verdict"] == "inconclusive" and out["reason"] == "1 run per side"
        assert out["spread_source"] == "none" and math.isnan(out["ci95_low"]) and math.isnan(out["p_value"])
        assert out["ratio"] == pytest.approx(math.exp(d))


def test_one_run_a_side_with_a_given_spread():
    big = RS.compare_groups([0.0], [math.log(1.5)], 0.05, spread_log_sd=0.04, spread_df=9)
    assert big["verdict"] == "slower" and big["spread_source"] == "given" and big["t_df"] == 9
    half = stats.t.ppf(0.975, 9) * 0.04 * math.sqrt(2)
    assert big["ci95_low"] == pytest.approx(1.5 * math.exp(-half))
    small = RS.compare_groups([0.0], [math.log(1.06)], 0.05, spread_log_sd=0.04, spread_df=9)
    assert small["verdict"] == "inconclusive"  # 6% is within the reach of a 4% run-to-run spread, one run each
    # a given spread does not replace the groups' own
    own = RS.compare_groups([0.0, 0.01], [0.1, 0.11], 0.05, spread_log_sd=0.5)
    assert own["spread_source"] == "groups" and own["spread_log_sd"] == pytest.approx(math.sqrt(0.0001 / 2))


def test_welch_interval_and_p_value_are_scipys():
    rng = np.random.default_rng(11)
    b, c = rng.normal(0, 0.05, 5), rng.normal(0.08, 0.03, 7)
    out = RS.compare_groups(b, c, 0.05)
    ref = stats.ttest_ind(c, b, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert out["p_value"] == pytest.approx(ref.pvalue) and out["t_df"] == pytest.approx(ref.df)
    assert math.log(out["ci95_low"]) == pytest.approx(ci.low) and math.log(out["ci95_high"]) == pytest.approx(ci.high)
    assert out["ratio"] == pytest.approx(math.exp(c.mean() - b.mean()))
    pooled = math.sqrt((4 * b.var(ddof=1) + 6 * c.var(ddof=1)) / 10)
    assert out["spread_log_sd"] == pytest.approx(pooled)


def test_same_needs_the_90_percent_interval_inside_the_margin():
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(2, 9))
        b = rng.normal(0, rng.uniform(0.002, 0.05), n)
        c = rng.normal(rng.normal(0, 0.04), rng.uniform(0.002, 0.05), n)
        out = RS.compare_groups(b, c, 0.05)
        ref = stats.ttest_ind(c, b, equal_var=False)
        ci90 = ref.confidence_interval(0.90)
        lo, hi = RS.margin(0.05)
        inside = lo < ci90.low and ci90.high < hi
        assert (out["tost_p"] < 0.05) == inside
        if out["verdict"] == "same":
            assert inside
        if out["verdict"] in ("slower", "faster"):
            assert ref.pvalue < 0.05 and not inside


def test_a_significant_change_below_min_effect_is_never_slower():
    b = np.array([0.0, 0.001, -0.001, 0.0005, -0.0005, 0.0])
    out = RS.compare_groups(b, b + math.log(1.02), 0.05)  # 2% slower, resolved to a tenth of a percent
    assert out["p_value"] < 1e-6 and out["verdict"] == "same"
    assert RS.compare_groups(b, b + math.log(1.2), 0.05)["verdict"] == "slower"
    assert RS.compare_groups(b, b - math.log(1.2), 0.05)["verdict"] == "faster"


def test_one_against_many_uses_the_pooled_spread():
    out = RS.compare_groups([0.3], [0.0, 0.02, -0.02, 0.01], 0.05)
    assert out["spread_source"] == "groups" and out["t_df"] == 3 and out["verdict"] == "faster"


def test_bad_input():
    assert RS.compare_groups([], [0.0], 0.05)["verdict"] == "inconclusive"
    with pytest.raises(ValueError):
        RS.compare_groups([0.0, math.nan], [0.0, 0.1], 0.05)
    with pytest.raises(ValueError):
        RS.margin(1.5)


def test_the_default_floor_keeps_the_power_and_reaches_same_at_the_measured_spread():
    """The 5% floor (``measure.power.MIN_EFFECT``) at the default R and the measured spread: it still finds the 10%
    slowdown R is sized for, keeps A/A false alarms low, and reaches ``same`` far more often than a tighter floor;
    a 10% floor would cost the power (the estimate must lie beyond it)."""
    shares = {m: P.verdict_shares(min_effect=m, sims=1000, seed=2) for m in (0.03, P.MIN_EFFECT, 0.10)}
    found = {m: P.verdict_shares(min_effect=m, slowdown=P.SLOWDOWN, sims=1000, seed=3)["slower"] for m in shares}
    for s in shares.values():
        assert sum(s.values()) == pytest.approx(1.0)
    assert found[P.MIN_EFFECT] >= P.POWER > found[0.10]
    assert shares[P.MIN_EFFECT]["slower"] + shares[P.MIN_EFFECT]["faster"] <= 0.05
    assert shares[P.MIN_EFFECT]["same"] > 4 * shares[0.03]["same"]
