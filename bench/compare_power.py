"""Can ``accelbench compare``'s method tell noise from a change? False alarms and power, with a check that detects
pseudo-replication (treating the timed blocks of one process as independent replicates).

The earlier version of this bench could not: its "halves" were a random permutation of one run's blocks, which are
exchangeable by construction whatever the blocks' real dependence, and its "runs" view bootstrapped the blocks of
one pair of runs, so run-to-run variance never entered (issue 21). Now, from the raw samples of N separate
runs of one config (measured here: a real stage, ``--stage``, default the first sampled stage that sweeps its
points, with its section of ``--config``, each run a fresh process on the CPU; or ``--samples`` files from any
runs; or ``--simulate``: AR(1) blocks plus a run effect, the model issue 21 measured), per point:

- **halves, random** (the old check, kept as the contrast): one run's blocks split at random into two halves,
  compared with the within-run interval (``measure.ratio``: Hodges-Lehmann with the Mann-Whitney interval, which
  treats the blocks as exchangeable). Exchangeable by construction, so it cannot see dependence.
- **halves, in time order**: the same run's first half of blocks against its second half, in the order they were
  timed, with the same interval. With no drift inside the process this is as exchangeable as the random halves;
  autocorrelated or drifting blocks (a clock settling, a neighbour starting) make it cry wolf: its false-alarm
  rate above the random halves' (and above the nominal 5%) is the signature of pseudo-replication. The lag-1
  autocorrelation of each run's log block times is printed with it.
- the two halves views again with no floor (``min_effect`` 0): the interval's own promise, about 5% false
  verdicts between exchangeable halves; the floor would otherwise hide a too-narrow interval. The
  pseudo-replication check compares the time-ordered halves' rate with the random halves' here.
- **blocks of two runs**: two separate runs' blocks compared with the within-run interval, as ``accelbench compare
  A B`` did before the run became the unit: every ordered pair of runs. Its false alarms are the run-to-run
  variance that the interval does not cover.
- **runs as the unit**: the runs split into a baseline and a candidate group of k runs each (every split, capped by
  ``--max-splits``), each run summarised by its median, judged by ``measure.runstats.compare_groups`` (Welch t on
  log run medians, the verdict ``accelbench compare --baseline ... --candidate ...`` gives). And 1 vs 1 with the
  same function: with no between-run spread it must never say slower or faster.

Each view also plants a slowdown (the candidate's times, or the second half's, multiplied by 1.05 and 1.10) and
reports the share found ``slower``. A false alarm is a ``slower`` or ``faster`` verdict at factor 1.

    python bench/compare_power.py [--runs 6] [--stage STAGE] [--config bench/aa_config.yaml] [--threads 1]
    python bench/compare_power.py --samples run1/<stage>_cpu_samples.parquet run2/... [...]
    python bench/compare_power.py --simulate [--runs 10] [--phi 0.3] [--run-sd 0.08] [--block-sd 0.03]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from accelbench import registry
from accelbench.measure import ratio as R
from accelbench.measure.power import DEFAULT_RUNS, MIN_EFFECT
from accelbench.measure.runstats import compare_groups
from accelbench.run.config import check, config_hash, with_defaults
from accelbench.run.io import read_parquet

AA_CONFIG = Path(__file__).with_name("aa_config.yaml")
# the stage measured by default: the first whose compared table is a sweep (several points of many timed blocks each;
# a one-point stage such as the warm-up call says little about blocks against runs)
FIRST_SAMPLED = next(
    t.stage for t in registry.TABLES.values() if t.samples and t.compare is not None and t.compare.sweep is not None
)
DEFAULT_MIN_EFFECT = MIN_EFFECT  # accelbench compare's default noise floor (measure.power)
SLOWDOWNS = (1.05, 1.10)
FACTORS = (1.0, *SLOWDOWNS)
VIEWS = (
    "halves, random",
    "halves, time order",
    "halves, random, no floor",
    "halves, time order, no floor",
    "blocks of two runs",
    "runs as the unit",
    "1 run vs 1 run",
)


def measure(stage_name: str, config_file: Path, threads: int, runs: int) -> list[dict[str, np.ndarray]]:
    """The raw samples of ``runs`` fresh runs of one stage on the CPU, one after another: ``accelbench <stage>``
    with the stage's config section from ``config_file`` (default bench/aa_config.yaml, the A/A config)."""
    stage = registry.STAGES[stage_name]
    section = yaml.safe_load(config_file.read_text()).get(stage.config_key or stage.name)
    raw = {"run": "power", **({stage.config_key: section} if stage.config_key and section else {})}
    check(raw)
    cfg = with_defaults(raw)
    out = []
    with tempfile.TemporaryDirectory(prefix="accelbench-power-") as tmp:
        run_file = Path(tmp) / "run.json"
        run_file.write_text(
            json.dumps(
                {
                    "run": "power",
                    "config": cfg,
                    "config_hash": config_hash(cfg),
                    "git_commit": "bench",
                    "accelbench_version": "bench",
                }
            )
        )
        for r in range(runs):
            run_dir = Path(tmp) / f"run{r}"
            argv = [sys.executable, "-m", "accelbench", stage.name, "--run-file", str(run_file), "--backend", "cpu"]
            argv += ["--threads", str(threads), "--out-dir", str(run_dir)]
            if stage.checkpoint:
                argv += ["--checkpoint", str(Path(tmp) / f"ck{r}.jsonl")]
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            out.append(points(read_parquet(run_dir / registry.SAMPLES[stage.name].filename("cpu"))))
            print(f"measured run {r + 1}/{runs}", flush=True)
    return out


def points(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each point's steady block times, in the order they were timed (``sample``), named ``<table> <point>``."""
    df = df[df["steady"]]
    return {
        f"{t} {p}": g.sort_values("sample")["sample_s"].to_numpy(float) for (t, p), g in df.groupby(["table", "point"])
    }


def simulate(runs: int, blocks: int, phi: float, run_sd: float, block_sd: float, rng) -> list[dict[str, np.ndarray]]:
    """``runs`` runs of two points: log block times an AR(1) series (lag-1 ``phi``, marginal sd ``block_sd``)
    around a run effect drawn once per run (sd ``run_sd``): the model of issue 21's measurement."""
    out = []
    for _ in range(runs):
        run = {}
        for point, base in (("n=256", 1e-3), ("n=512", 8e-3)):
            effect = rng.normal(0.0, run_sd)
            e = np.empty(blocks)
            e[0] = rng.normal(0.0, block_sd)
            for i in range(1, blocks):
                e[i] = phi * e[i - 1] + rng.normal(0.0, block_sd * math.sqrt(1 - phi**2))
            run[point] = base * np.exp(effect + e)
        out.append(run)
    return out


def lag1(x: np.ndarray) -> float:
    y = np.log(x) - np.log(x).mean()
    return float((y[:-1] * y[1:]).sum() / (y**2).sum()) if len(y) > 2 and (y**2).sum() > 0 else math.nan


def _old(base: np.ndarray, cand: np.ndarray, min_effect: float) -> str:
    return R.verdict(R.hodges_lehmann_ratio(base, cand), min_effect)


def judge(runs: list[dict[str, np.ndarray]], min_effect: float, group: int, max_splits: int, rng) -> pd.DataFrame:
    """One row per (view, point, comparison, factor): its verdict."""
    rows = []
    common = sorted(set.intersection(*(set(r) for r in runs)))
    for point in common:
        series = [r[point] for r in runs]
        for i, x in enumerate(series):
            half = len(x) // 2
            perm = rng.permutation(x)
            for f in FACTORS:
                for floor, tail in ((min_effect, ""), (0.0, ", no floor")):
                    rows.append(
                        (f"halves, random{tail}", point, i, f, _old(perm[:half], perm[half : 2 * half] * f, floor))
                    )
                    rows.append(
                        (f"halves, time order{tail}", point, i, f, _old(x[:half], x[half : 2 * half] * f, floor))
                    )
        for i, j in itertools.permutations(range(len(series)), 2):
            for f in FACTORS:
                rows.append(("blocks of two runs", point, (i, j), f, _old(series[i], series[j] * f, min_effect)))
        logmed = np.log([np.median(x) for x in series])
        for i, j in itertools.permutations(range(len(series)), 2):
            for f in FACTORS:
                v = compare_groups([logmed[i]], [logmed[j] + math.log(f)], min_effect)["verdict"]
                rows.append(("1 run vs 1 run", point, (i, j), f, v))
        splits = [
            (b, c)
            for b in itertools.combinations(range(len(series)), group)
            for c in itertools.combinations(sorted(set(range(len(series))) - set(b)), group)
        ]
        if len(splits) > max_splits:
            splits = [splits[k] for k in rng.choice(len(splits), max_splits, replace=False)]
        for b, c in splits:
            for f in FACTORS:
                v = compare_groups(logmed[list(b)], logmed[list(c)] + math.log(f), min_effect)["verdict"]
                rows.append(("runs as the unit", point, (b, c), f, v))
    return pd.DataFrame(rows, columns=["view", "point", "comparison", "factor", "verdict"])


def summary(table: pd.DataFrame) -> pd.DataFrame:
    out = []
    for view in VIEWS:
        t = table[table["view"] == view]
        null = t[t["factor"] == 1.0]
        row = {
            "view": view,
            "comparisons": len(null),
            "false slower %": 100 * (null["verdict"] == "slower").mean(),
            "false faster %": 100 * (null["verdict"] == "faster").mean(),
        }
        for f in SLOWDOWNS:
            row[f"found +{round(100 * (f - 1))}% %"] = 100 * (t[t["factor"] == f]["verdict"] == "slower").mean()
        out.append(row)
    return pd.DataFrame(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=6, help="separate runs to measure or simulate (at least 4)")
    p.add_argument(
        "--stage",
        default=FIRST_SAMPLED,
        choices=sorted(registry.SAMPLES),
        help=f"the stage to measure (default {FIRST_SAMPLED}, the first sampled stage that sweeps its points)",
    )
    p.add_argument(
        "--config",
        type=Path,
        default=AA_CONFIG,
        help="a YAML whose section for --stage is measured (default bench/aa_config.yaml, the A/A config)",
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--samples",
        nargs="+",
        default=None,
        metavar="PARQUET",
        help="the samples files (<stage>_<backend>_samples.parquet) of at least 4 runs of one config instead of measuring",
    )
    p.add_argument("--simulate", action="store_true", help="AR(1) blocks plus a run effect instead of measuring")
    p.add_argument("--blocks", type=int, default=30, help="--simulate: blocks per point")
    p.add_argument("--phi", type=float, default=0.3, help="--simulate: lag-1 autocorrelation of log block times")
    p.add_argument("--run-sd", type=float, default=0.08, help="--simulate: sd of the run effect (log)")
    p.add_argument("--block-sd", type=float, default=0.03, help="--simulate: sd of log block times within a run")
    p.add_argument(
        "--group",
        type=int,
        default=None,
        help="runs per side in the runs-as-the-unit view (default: half the runs, at most accelbench ab's default R)",
    )
    p.add_argument("--max-splits", type=int, default=500)
    p.add_argument("--min-effect", type=float, default=DEFAULT_MIN_EFFECT)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.samples:
        runs = [points(read_parquet(f)) for f in args.samples]
        source = f"{len(runs)} runs from --samples"
    elif args.simulate:
        runs = simulate(args.runs, args.blocks, args.phi, args.run_sd, args.block_sd, rng)
        source = (
            f"{args.runs} simulated runs: AR(1) phi={args.phi}, block sd {args.block_sd}, run effect sd "
            f"{args.run_sd}, {args.blocks} blocks"
        )
    else:
        runs = measure(args.stage, args.config, args.threads, args.runs)
        source = f"{args.runs} measured runs of {args.stage} ({args.config}), {args.threads} thread(s)"
    if len(runs) < 4:
        sys.exit("compare_power: at least 4 runs (two groups of 2)")
    if not set.intersection(*(set(r) for r in runs)):
        sys.exit("compare_power: the runs share no point")

    group = args.group or max(2, min(DEFAULT_RUNS, len(runs) // 2))
    table = judge(runs, args.min_effect, group, args.max_splits, rng)
    common = sorted(set.intersection(*(set(r) for r in runs)))
    print(
        f"{source}; points: {', '.join(common)}; min effect {100 * args.min_effect:g}%; runs as the unit: "
        f"{group} vs {group}"
    )
    print(
        "lag-1 autocorrelation of log block times, per point (median over runs): "
        + ", ".join(f"{pt}: {np.nanmedian([lag1(r[pt]) for r in runs]):.2f}" for pt in common)
    )
    spread = [np.std(np.log([np.median(r[pt]) for r in runs]), ddof=1) for pt in common]
    print(
        "between-run spread (sd of log run medians), per point: "
        + ", ".join(f"{pt}: {100 * s:.1f}%" for pt, s in zip(common, spread))
    )
    print(summary(table).round(1).to_string(index=False))
    s = summary(table).set_index("view")
    rand = s.loc["halves, random, no floor", "false slower %"] + s.loc["halves, random, no floor", "false faster %"]
    timed = (
        s.loc["halves, time order, no floor", "false slower %"]
        + s.loc["halves, time order, no floor", "false faster %"]
    )
    print(
        f"pseudo-replication check (the within-run interval with no floor, nominal 5%): false verdicts between "
        f"time-ordered halves {timed:.1f}% vs random halves {rand:.1f}%: "
        + (
            "the blocks of one run are NOT exchangeable: the within-run interval is too narrow"
            if timed > max(10.0, 2 * rand)
            else "no sign of dependence between the blocks of a run"
        )
    )
    lone = s.loc["1 run vs 1 run"]
    print(
        f"1 run vs 1 run: {lone['false slower %'] + lone['false faster %']:.1f}% slower/faster at factor 1, "
        f"{lone['found +10% %']:.1f}% slower at +10% (with no measured spread: must be 0 and 0)"
    )


if __name__ == "__main__":
    main()
