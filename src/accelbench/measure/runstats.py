"""Did the candidate get slower? Inference with the run (a fresh process) as the unit of replication: pure
statistics on two groups of log run medians (no torch, no files, nothing of the reporting).

**The unit.** Each run contributes one number per point: the log of its median time. The timed blocks inside
one run are autocorrelated (lag-1 about 0.3 on the machines measured, issue 21) and share everything that a
process fixes at start-up (the allocator's layout, the clock the governor settled on, the threads' placement),
so treating them as replicates understates the variance by the run-to-run part, which is usually the larger
one. The interval here covers the variance **between runs** (which includes the within-run noise of each run's
median), and nothing that is common to all runs of one side (the machine itself).

**The ratio** is candidate time / baseline time: exp of the difference of the mean log run medians (a ratio of
geometric means of the run medians).

**Its interval** (``compare_groups``):

- both sides with 2+ runs: Welch's t (Welch 1947, "The generalization of 'Student's' problem when several
  different population variances are involved", Biometrika 34: 28-35), ``scipy.stats.ttest_ind`` with
  ``equal_var=False``: the Welch-Satterthwaite degrees of freedom, no assumption that both sides spread alike;
- one side with 1 run, the other with 2+: Student's pooled t (the single run's variance is taken to be the
  other side's, df = n_b + n_c - 2), the only estimate there is;
- 1 run against 1 run: no between-run spread can be estimated from the runs. Then only a spread measured
  elsewhere (``spread_log_sd``, e.g. the history store's sd of this point's run medians on this testbed, with
  ``spread_df`` its degrees of freedom) gives an interval; without one the verdict is ``inconclusive``
  ("1 run per side") and no slower or faster is ever claimed.

The reported between-run spread (``spread_log_sd``) is the pooled sd of the log run medians,
sqrt((SS_b + SS_c) / (n_b + n_c - 2)), or the given one.

**The verdict**, with the equivalence margin on the log scale [log(1/(1+m)), log(1/(1-m))] for
``min_effect`` m (the log time ratios whose speed change, baseline/candidate - 1, is within +-m):

- ``slower`` / ``faster``: the two-sided test of "no change" rejects at ``alpha`` (the 95% interval excludes a
  ratio of 1) **and** the estimate lies beyond the margin (a change smaller than ``min_effect`` is never called
  a regression, however many runs resolve it);
- ``same``: the two one-sided tests (TOST; Schuirmann 1987, "A comparison of the two one-sided tests
  procedure and the power approach for assessing the equivalence of average bioavailability", J.
  Pharmacokinetics and Biopharmaceutics 15: 657-680) both reject at ``alpha``: the change is shown to lie
  within +-``min_effect`` (equivalently, the 90% interval lies inside the margin). Absence of a difference is
  not enough;
- ``inconclusive``: neither, with the reason.

The two are exclusive (slower needs the estimate beyond the margin, same needs the 90% interval inside it).
How many runs a side find a given slowdown at a given spread is ``measure.power`` (simulated with this
function); tests/test_runstats.py checks the false-alarm rate and the power of the default group size in a
simulation of autocorrelated runs at the measured spread. Showing "same" within +-5% needs a spread well below
the margin: docs/comparing.md gives sizes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

ALPHA = 0.05
METHOD = "welch_t_log_run_medians"
VERDICTS = ("slower", "faster", "same", "inconclusive")


def margin(min_effect: float) -> tuple[float, float]:
    """The equivalence margin on log time ratio for a speed-change bound ``min_effect``: (log(1/(1+m)),
    log(1/(1-m))); a speed change of -m (slower by m) is a time ratio of 1/(1-m)."""
    m = float(min_effect)
    if not (0 <= m < 1):
        raise ValueError(f"min_effect must be in [0, 1), got {min_effect!r}")
    return -math.log1p(m), -math.log1p(-m)


def pooled_sd(a: Sequence[float], b: Sequence[float]) -> float:
    """sqrt((SS_a + SS_b) / (n_a + n_b - 2)): the between-run sd pooled over both groups; NaN without a df."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    dof = a.size + b.size - 2
    if dof < 1:
        return math.nan
    ss = float(((a - a.mean()) ** 2).sum() if a.size else 0.0) + float(((b - b.mean()) ** 2).sum() if b.size else 0.0)
    return math.sqrt(ss / dof)


def _empty(reason: str, ratio: float = math.nan, spread: float = math.nan) -> dict:
    return {
        "verdict": "inconclusive",
        "ratio": ratio,
        "ci95_low": math.nan,
        "ci95_high": math.nan,
        "spread_log_sd": spread,
        "spread_source": "none",
        "t_df": math.nan,
        "p_value": math.nan,
        "tost_p": math.nan,
        "reason": reason,
    }


def _t_cdf(x: float, dof: float) -> float:
    return float(stats.norm.cdf(x)) if math.isinf(dof) else float(stats.t.cdf(x, dof))


def _t_ppf(q: float, dof: float) -> float:
    return float(stats.norm.ppf(q)) if math.isinf(dof) else float(stats.t.ppf(q, dof))


def compare_groups(
    base_log_medians: Sequence[float],
    cand_log_medians: Sequence[float],
    min_effect: float,
    alpha: float = ALPHA,
    spread_log_sd: float | None = None,
    spread_df: float | None = None,
) -> dict:
    """Verdict on candidate vs baseline from each run's log median time at one point (see the module doc).

    ``spread_log_sd``: a between-run sd of log run medians measured elsewhere (history), used only when the
    groups cannot estimate one (1 run against 1); ``spread_df``: its degrees of freedom (runs - 1; None: taken
    as known, a normal quantile).

    Returns a dict: verdict (slower/faster/same/inconclusive), ratio (candidate/baseline time), ci95_low,
    ci95_high (of the ratio, level 1 - alpha), spread_log_sd, spread_source (groups/given/none), t_df, p_value
    (two-sided, no change), tost_p (the larger of the two one-sided p values against the margin), reason
    (empty unless inconclusive)."""
    b = np.asarray(base_log_medians, float).ravel()
    c = np.asarray(cand_log_medians, float).ravel()
    if not (np.all(np.isfinite(b)) and np.all(np.isfinite(c))):
        raise ValueError("compare_groups: log medians must be finite")
    lo_m, hi_m = margin(min_effect)
    nb, nc = b.size, c.size
    if nb == 0 or nc == 0:
        return _empty(f"no run on the {'baseline' if nb == 0 else 'candidate'} side")
    d = float(c.mean() - b.mean())
    ratio = math.exp(d)
    if nb >= 2 and nc >= 2:
        source = "groups"
        spread = pooled_sd(b, c)
        vb, vc = float(b.var(ddof=1)), float(c.var(ddof=1))
        se = math.sqrt(vb / nb + vc / nc)
        if se > 0:
            dof = float(stats.ttest_ind(c, b, equal_var=False).df)
        else:
            dof = float(nb + nc - 2)
    elif nb + nc >= 3:
        source = "groups"
        spread = pooled_sd(b, c)
        se = spread * math.sqrt(1 / nb + 1 / nc)
        dof = float(nb + nc - 2)
    elif spread_log_sd is not None and math.isfinite(spread_log_sd) and spread_log_sd > 0:
        source = "given"
        spread = float(spread_log_sd)
        se = spread * math.sqrt(1 / nb + 1 / nc)
        dof = math.inf if spread_df is None else float(spread_df)
        if not dof >= 1:
            return _empty(f"1 run per side; the given spread has {spread_df} degrees of freedom", ratio)
    else:
        return _empty("1 run per side", ratio)  # no between-run spread: more runs, or a measured one
    if se == 0:  # every run of both sides gave the same median: an exact answer
        p = 0.0 if d != 0 else 1.0
        tost = 0.0 if lo_m < d < hi_m else 1.0
        low = high = ratio
    else:
        t = d / se
        p = 2.0 * _t_cdf(-abs(t), dof)
        tost = max(1.0 - _t_cdf((d - lo_m) / se, dof), _t_cdf((d - hi_m) / se, dof))
        half = _t_ppf(1.0 - alpha / 2.0, dof) * se
        low, high = math.exp(d - half), math.exp(d + half)
    if p < alpha and d > hi_m:
        verdict, reason = "slower", ""
    elif p < alpha and d < lo_m:
        verdict, reason = "faster", ""
    elif tost < alpha:
        verdict, reason = "same", ""
    else:
        verdict = "inconclusive"
        if p < alpha:
            reason = f"a change smaller than \u00b1{100 * min_effect:g}% that is not shown to be within it"
        else:
            reason = (
                f"interval crosses \u00b1{100 * min_effect:g}% ({nb} vs {nc} runs, between-run sd {100 * spread:.1f}%)"
            )
    return {
        "verdict": verdict,
        "ratio": ratio,
        "ci95_low": low,
        "ci95_high": high,
        "spread_log_sd": spread,
        "spread_source": source,
        "t_df": dof,
        "p_value": p,
        "tost_p": tost,
        "reason": reason,
    }
