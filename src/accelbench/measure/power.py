"""How many runs a side? The power of the group comparison (``measure.runstats.compare_groups``) and the
default group size, in one place: ``accelbench compare``'s docs, ``accelbench ab``'s ``--runs`` default, the
A/A bench and the simulation test all read them from here.

**The method as it is.** Power is simulated, not taken from a formula: log run medians are drawn normal with sd
``spread_log_sd`` (the between-run spread, which includes each run's own timing noise), the candidate's shifted by
log(1 + slowdown), and each simulated pair of groups is judged by ``compare_groups`` itself, so Welch's degrees
of freedom (smaller than the 2R - 2 of the noncentral-t textbook formula) and the rule that the estimate must lie
beyond ``min_effect`` are both in the figure. A textbook noncentral-t calculation says one run fewer than this
at small R. The seed is fixed, so a figure is reproducible; at 4,000 simulated comparisons its standard error is
at most 0.8 percentage points.

**The default R** (``DEFAULT_RUNS``) is ``runs_for_power(MEASURED_SPREAD_LOG_SD)``: the fewest runs a side that
find a 10% slowdown 80% of the time at the spread measured on this kind of machine (tests/test_ab.py checks the
constant is that calculation). The spread is a property of the machine and the point, not of the method: on a
shared or noisy machine, or for tiny points (tens of microseconds), it is several times larger, and R must grow
with its square (``runs_for_power`` at your own spread; ``accelbench history`` shows it per point).

No numpy or scipy at import: the CLI lists its subcommands, and reads ``DEFAULT_RUNS`` for a help text, without
them.
"""

from __future__ import annotations

import math

# The between-run spread (sd of the log run medians) of the headline points of one small config on a quiet 2-vCPU
# cloud VM: float32 matmul at n = 256 and 512 of bench/aa_config.yaml, measured by two interleaved A/B runs of 3 + 3
# fresh runs each, nothing else running: 2.3%, 2.6% and 3.8% (their root mean square 3.0%; docs/measurements.md,
# "A real planted slowdown through interleaved A/B runs", 2026-12-02). Smaller points, and any point on a shared
# machine, spread several times more (the same page's A/A entries: 9-30%).
MEASURED_SPREAD_LOG_SD = 0.030
# The lag-1 autocorrelation of log block times within one run, measured on real runs (issue 21: 0.27-0.36).
MEASURED_LAG1 = 0.3
SLOWDOWN = 0.10  # the change the default R is sized to find: time x 1.10
POWER = 0.80  # ... this often
# accelbench compare's default noise floor: the largest that keeps the power against SLOWDOWN at the measured
# spread and default R, and reaches "same" in a third of A/A comparisons (main --floors; docs/measurements.md)
MIN_EFFECT = 0.05
DEFAULT_RUNS = 4  # runs_for_power(MEASURED_SPREAD_LOG_SD); tests/test_ab.py checks it
SIMS = 4000  # simulated comparisons per figure: a standard error of at most 0.8 percentage points


def simulated_power(
    runs: int,
    spread_log_sd: float = MEASURED_SPREAD_LOG_SD,
    slowdown: float = SLOWDOWN,
    min_effect: float = MIN_EFFECT,
    sims: int = SIMS,
    seed: int = 0,
) -> float:
    """The share of ``sims`` simulated comparisons of ``runs`` runs a side, log run medians normal with sd
    ``spread_log_sd`` and the candidate ``slowdown`` slower, that ``compare_groups`` calls ``slower``. With ``slowdown`` 0 it is the false-alarm rate of one
    direction (an A/A comparison)."""
    return verdict_shares(runs, spread_log_sd, slowdown, min_effect, sims, seed)["slower"]


def runs_for_power(
    spread_log_sd: float = MEASURED_SPREAD_LOG_SD,
    slowdown: float = SLOWDOWN,
    power: float = POWER,
    min_effect: float = MIN_EFFECT,
    max_runs: int = 50,
    sims: int = SIMS,
) -> int:
    """The fewest runs per side whose ``simulated_power`` reaches ``power`` (ValueError when none up to
    ``max_runs`` does)."""
    for r in range(2, max_runs + 1):
        if simulated_power(r, spread_log_sd, slowdown, min_effect, sims) >= power:
            return r
    raise ValueError(f"no R up to {max_runs} gives {power:.0%} power at a {spread_log_sd:.1%} spread")


def power_table(spreads=(0.02, 0.03, 0.04, 0.05, 0.08), runs=(2, 3, 4, 5, 6, 8, 12), sims: int = SIMS) -> list[dict]:
    """``simulated_power`` over a grid: rows of spread_log_sd, runs, power (docs/comparing.md's table)."""
    return [{"spread_log_sd": s, "runs": r, "power": simulated_power(r, s, sims=sims)} for s in spreads for r in runs]


def verdict_shares(
    runs: int = DEFAULT_RUNS,
    spread_log_sd: float = MEASURED_SPREAD_LOG_SD,
    slowdown: float = 0.0,
    min_effect: float = MIN_EFFECT,
    sims: int = SIMS,
    seed: int = 0,
) -> dict[str, float]:
    """The share of each verdict in ``sims`` simulated comparisons (as ``simulated_power``): with ``slowdown`` 0
    the A/A case, where slower and faster are false alarms and ``same`` is what a good floor reaches."""
    import numpy as np  # lazily: see the module doc

    from .runstats import VERDICTS, compare_groups  # lazily, as numpy: runstats imports scipy

    rng = np.random.default_rng(seed)
    delta = math.log1p(slowdown)
    words = [
        compare_groups(rng.normal(0.0, spread_log_sd, runs), rng.normal(delta, spread_log_sd, runs), min_effect)[
            "verdict"
        ]
        for _ in range(sims)
    ]
    return {w: words.count(w) / sims for w in VERDICTS}


def main(argv=None) -> None:
    """``python -m accelbench.measure.power``: the power table on docs/comparing.md; with ``--floors``, the verdicts
    at the default R and the measured spread for each candidate min effect (how the default floor was chosen)."""
    import argparse  # only for the command line

    p = argparse.ArgumentParser(prog="python -m accelbench.measure.power", description=main.__doc__.splitlines()[0])
    p.add_argument("--floors", type=float, nargs="*", default=None, help="min effects to tabulate, e.g. 0.03 0.05 0.1")
    p.add_argument("--sims", type=int, default=SIMS)
    args = p.parse_args(argv)
    if args.floors is None:
        rows = power_table(sims=args.sims)
        runs = sorted({r["runs"] for r in rows})
        print("| σ (between runs) | " + " | ".join(f"R = {r}" for r in runs) + " |")
        print("|---|" + "---|" * len(runs))
        for s in sorted({r["spread_log_sd"] for r in rows}):
            cells = [f"{100 * r['power']:.0f}%" for r in rows if r["spread_log_sd"] == s]
            print(f"| {100 * s:g}% | " + " | ".join(cells) + " |")
        return
    print(f"R = {DEFAULT_RUNS} a side, between-run sd {100 * MEASURED_SPREAD_LOG_SD:g}%, {args.sims} comparisons each")
    print("| min effect | A/A false (slower + faster) | A/A same | A/A inconclusive | +10% found slower |")
    print("|---|---|---|---|---|")
    for m in args.floors:
        aa = verdict_shares(min_effect=m, sims=args.sims)
        hit = verdict_shares(min_effect=m, slowdown=SLOWDOWN, sims=args.sims)["slower"]
        print(
            f"| {100 * m:g}% | {100 * (aa['slower'] + aa['faster']):.1f}% | {100 * aa['same']:.1f}% | "
            f"{100 * aa['inconclusive']:.1f}% | {100 * hit:.1f}% |"
        )


if __name__ == "__main__":
    main()
