"""A/A: how often does the group comparison call a difference between runs of one and the same config?

Makes ``--runs`` (at least 10) separate pipeline runs of one small config on this machine, one after the other
(``snakemake`` of each run's targets, as ``accelbench ab`` runs a repetition; ids ``aa-01``, ``aa-02``, ...), or
reads existing ones (``--runs-dir RESULTS`` with ``--ids``, default: every run under it). Each run is loaded once
and summarised per point by its run median (``accelbench compare``'s points). Then, for each group size k
(``--sizes``; default 1, 2, 3 and the recommended R, ``accelbench.run.ab.DEFAULT_RUNS``, where enough runs exist),
every split into a baseline group and a disjoint candidate group of k runs each (every ordered pair of disjoint
k-subsets) is judged point by point with ``measure.runstats.compare_groups`` on log run medians, as ``accelbench
compare --baseline ... --candidate ...`` judges it. Every verdict other than ``same`` or ``inconclusive`` is a
false alarm: the runs are one config.

Prints a table per group size: splits, point comparisons, the share of false ``slower`` and false ``faster``
verdicts (target: together at most 5%), ``same`` and ``inconclusive``; and, for 1-vs-1, how many verdicts claimed
slower or faster without a measured spread (target: none; with one run a side there is no between-run spread).

The runs are sequential, not interleaved: a split that puts the early runs on one side and the late runs on the
other carries the machine's drift into the comparison, so this is harsher than an interleaved ``accelbench ab``,
whose sides alternate.

    python bench/aa_false_alarms.py --runs 10 --workdir /tmp/aa          # make 10 runs (resumable), then judge
    python bench/aa_false_alarms.py --runs-dir /tmp/aa/results           # judge existing runs
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from accelbench import registry
from accelbench.run import ab
from accelbench.run.config import check

REPO = Path(__file__).resolve().parents[1]
# The small config every A/A run measures (bench/aa_config.yaml, its comment says why each size).
AA_CONFIG = yaml.safe_load((Path(__file__).with_name("aa_config.yaml")).read_text())
PREFIX = "aa"


def make_runs(workdir: Path, n: int, cores: int) -> list[str]:
    """Runs aa-01 .. aa-NN in ``workdir`` (each a fresh snakemake), skipping those already finished."""
    workdir.mkdir(parents=True, exist_ok=True)
    ids = [f"{PREFIX}-{i:02d}" for i in range(1, n + 1)]
    snakefile = REPO / "Snakefile"
    for i, rid in enumerate(ids, 1):
        if (workdir / registry.RESULTS / rid / registry.HISTORY_RECEIPT).is_file():
            continue
        cfg = workdir / f"{rid}.yaml"
        check({**AA_CONFIG, "run": rid})
        cfg.write_text(yaml.safe_dump({**AA_CONFIG, "run": rid}, sort_keys=False))
        argv = ab.snakemake_argv(sys.executable, snakefile, workdir, cfg, rid, cores)
        t0 = time.monotonic()
        with open(workdir / f"{rid}.log", "w") as log:
            rc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=ab.run_env(sys.executable)).returncode
        print(f"run {i}/{n} {rid}: " + (f"{time.monotonic() - t0:.0f} s" if rc == 0 else f"FAILED (exit {rc})"),
              flush=True)
    return [r for r in ids if (workdir / registry.RESULTS / r / registry.HISTORY_RECEIPT).is_file()]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10, help="runs to make (at least 10)")
    p.add_argument("--workdir", type=Path, default=Path("aa-work"), help="where the runs are made")
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    p.add_argument("--make-only", action="store_true", help="make the runs, judge nothing")
    p.add_argument("--runs-dir", type=Path, default=None, help="judge the runs under this results folder instead")
    p.add_argument("--ids", nargs="+", default=None, help="with --runs-dir: these run ids (default: every run)")
    p.add_argument("--sizes", type=int, nargs="+", default=None, help="group sizes (default: 1, 2, 3 and R)")
    p.add_argument("--min-effect", type=float, default=None, help="compare's min effect (default: compare's)")
    args = p.parse_args()
    if args.runs_dir is None:
        if args.runs < 10:
            p.error("--runs: at least 10")
        ids = make_runs(args.workdir, args.runs, args.cores)
        results = args.workdir / registry.RESULTS
        if args.make_only:
            return
    else:
        results = args.runs_dir
        ids = args.ids or sorted(q.parent.name for q in results.glob(f"*/{registry.RUN_FILE}"))
    raise SystemExit("aa_false_alarms: judging is not written yet")


if __name__ == "__main__":
    main()
