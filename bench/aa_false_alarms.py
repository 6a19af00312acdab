"""A/A: how often does the group comparison call a difference between runs of one and the same config?

Makes ``--runs`` (at least 10) separate pipeline runs of one small config on this machine, one after the other
(``snakemake`` of each run's targets, as ``accelbench ab`` runs a repetition; ids ``aa-01``, ``aa-02``, ...), or
reads existing ones (``--runs-dir RESULTS`` with ``--ids``, default: every run under it). Each run is loaded once
and summarised per point by its run median (``accelbench compare``'s points). Then, for each group size k
(``--sizes``; default 1, 2, 3, the recommended R, ``accelbench.measure.power.DEFAULT_RUNS``, and half the runs, where
enough runs exist),
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
from accelbench.measure import power, runstats
from accelbench.reporting import compare, history
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
            rc = subprocess.run(
                argv, stdout=log, stderr=subprocess.STDOUT, env=ab.run_env(sys.executable), check=False
            ).returncode
        print(
            f"run {i}/{n} {rid}: " + (f"{time.monotonic() - t0:.0f} s" if rc == 0 else f"FAILED (exit {rc})"),
            flush=True,
        )
    return [r for r in ids if (workdir / registry.RESULTS / r / registry.HISTORY_RECEIPT).is_file()]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10, help="runs to make (at least 10)")
    p.add_argument("--workdir", type=Path, default=Path("aa-work"), help="where the runs are made")
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    p.add_argument("--make-only", action="store_true", help="make the runs, judge nothing")
    p.add_argument("--runs-dir", type=Path, default=None, help="judge the runs under this results folder instead")
    p.add_argument("--ids", nargs="+", default=None, help="with --runs-dir: these run ids (default: every run)")
    p.add_argument(
        "--sizes", type=int, nargs="+", default=None, help="group sizes (default: 1, 2, 3, R and half the runs)"
    )
    p.add_argument("--min-effect", type=float, default=None, help="compare's min effect (default: compare's)")
    p.add_argument(
        "--max-splits",
        type=int,
        default=0,
        help="judge at most this many splits per size, drawn at random (default 0: every split)",
    )
    p.add_argument(
        "--history",
        action="store_true",
        help="also judge 1 vs 1 with the history store's measured spread of the point (the two runs left out)",
    )
    p.add_argument("--out", type=Path, default=None, help="also write the table as CSV")
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
    if len(ids) < 4:
        raise SystemExit(f"aa_false_alarms: {len(ids)} finished run(s) under {results}; at least 4 are needed")
    min_effect = compare.DEFAULT_MIN_EFFECT if args.min_effect is None else args.min_effect
    sizes = args.sizes or [k for k in dict.fromkeys((1, 2, 3, power.DEFAULT_RUNS, len(ids) // 2)) if 2 * k <= len(ids)]
    store = results / registry.HISTORY_FILE
    t0 = time.monotonic()
    runs, index = load(results, ids)
    print(
        f"{len(ids)} runs under {results} ({', '.join(ids)}): {len(index)} points matched in every run; "
        f"min effect {100 * min_effect:g}%; loaded in {time.monotonic() - t0:.0f} s",
        flush=True,
    )
    per_point = spreads(index)
    spread = [sd for sd, _ in per_point.values()]
    print(
        "between-run spread (sd of log run medians over all runs, trusted points): median "
        f"{100 * np.median(spread):.1f}%, largest {100 * np.max(spread):.1f}% over {len(spread)} points"
    )
    for label, (sd, used) in sorted(per_point.items(), key=lambda kv: kv[1][0]):
        print(f"  {100 * sd:5.1f}%  {label} ({used} of {len(ids)} runs trusted)")
    rows = []
    for k in sizes:
        splits = list(every_split(len(ids), k))
        if args.max_splits and len(splits) > args.max_splits:
            pick = np.random.default_rng(0).choice(len(splits), args.max_splits, replace=False)
            splits = [splits[i] for i in sorted(pick)]
        counts = judge_splits(runs, index, splits, min_effect)
        rows.append({"runs a side": k, "splits": len(splits), **counts})
        print(f"  {k} vs {k}: {len(splits)} splits judged", flush=True)
    if (
        args.history and store.is_file()
    ):  # 1 vs 1 with the spread history measured for the point (the two runs left out)
        counts = judge_splits(
            runs, index, list(every_split(len(ids), 1)), min_effect, spread_of=history.spread_lookup(store, min_effect)
        )
        rows.append({"runs a side": "1 (history spread)", "splits": len(list(every_split(len(ids), 1))), **counts})
    table = pd.DataFrame(rows)
    print(table.to_string(index=False))
    for row in rows:
        if row["runs a side"] == 1:
            claimed = row["false slower"] + row["false faster"]
            print(
                f"1 vs 1 without a measured spread: {claimed} slower/faster verdict(s) of {row['comparisons']} "
                + ("(none, as required)" if claimed == 0 else "(MUST be none)")
            )
    worst = max((r for r in rows if r["runs a side"] != 1), key=lambda r: r["false %"], default=None)
    if worst is not None:
        print(
            f"largest false-alarm share over the group sizes: {worst['false %']:.2f}% at {worst['runs a side']} a "
            f"side (target: at most 5%)" + ("" if worst["false %"] <= 5 else " - ABOVE the target")
        )
    if args.out:
        table.to_csv(args.out, index=False)


def load(results: Path, ids: list[str]):
    """Each run read and checked once (``accelbench compare``'s load_run), its points (run_points) indexed by
    compare's match key; only points every run has."""
    runs = [compare.load_run(compare.resolve_run(rid, results)) for rid in ids]
    per_run = []
    for run in runs:
        pts = compare.run_points(run)
        per_run.append({compare.match_key(r, False): compare._with_run(r, run) for _, r in pts.iterrows()})
    keys = [k for k in per_run[0] if all(k in p for p in per_run[1:])]
    return runs, {k: [p[k] for p in per_run] for k in keys}


def spreads(index: dict) -> dict[str, tuple[float, int]]:
    """Per point (its label): the sd of the log run medians of its trusted runs, and how many runs that is (3+)."""
    out = {}
    for rows in index.values():
        med = [compare.run_median(r) for r in rows if r["status"] in compare.TRUSTED]
        med = [m for m in med if math.isfinite(m) and m > 0]
        if len(med) >= 3:
            out[compare.point_label(rows[0])] = (float(np.std(np.log(med), ddof=1)), len(med))
    return out


def every_split(n: int, k: int):
    """Every ordered pair (baseline, candidate) of disjoint k-subsets of range(n)."""
    for base in itertools.combinations(range(n), k):
        rest = [i for i in range(n) if i not in base]
        for cand in itertools.combinations(rest, k):
            yield base, cand


def judge_splits(runs, index: dict, splits, min_effect: float, spread_of=None, check: int = 200) -> dict:
    """Every split's every point judged as ``accelbench compare --baseline ... --candidate ...`` judges it: the
    counts of each verdict and the false share.

    Without ``spread_of`` the verdict is computed from each run's usable log median (compare's rule: a trusted
    status and a median) with ``runstats.compare_groups``, which is what compare's ``judge`` does, but ~20x faster;
    the first ``check`` (split, point) pairs are also run through compare's own ``judge`` and must agree (else the
    bench stops). With ``spread_of`` (1 vs 1 with history's spread) every point goes through ``judge``."""
    keys = list(index)
    usable = {
        k: [r["status"] in compare.TRUSTED and not math.isnan(compare.run_median(r)) for r in index[k]] for k in keys
    }
    logmed = {
        k: [math.log(compare.run_median(r)) if ok else math.nan for r, ok in zip(index[k], usable[k])] for k in keys
    }
    counts = dict.fromkeys(("slower", "faster", "same", "inconclusive"), 0)
    checked = 0
    for base, cand in splits:
        exclude = [runs[i].run_id for i in (*base, *cand)]
        for k in keys:
            rows = index[k]
            if spread_of is not None:
                v = compare.judge(
                    [rows[i] for i in base], [rows[i] for i in cand], min_effect, spread_of, exclude=exclude
                )["verdict"]
            else:
                b = [logmed[k][i] for i in base if usable[k][i]]
                c = [logmed[k][i] for i in cand if usable[k][i]]
                v = runstats.compare_groups(b, c, min_effect)["verdict"] if b and c else "inconclusive"
                if checked < check:
                    checked += 1
                    ref = compare.judge([rows[i] for i in base], [rows[i] for i in cand], min_effect)["verdict"]
                    if ref != v:
                        raise SystemExit(f"aa_false_alarms: verdict {v!r} differs from compare's {ref!r} at {k}")
            counts[v] += 1
    n = sum(counts.values())
    return {
        "comparisons": n,
        "false slower": counts["slower"],
        "false faster": counts["faster"],
        "same": counts["same"],
        "inconclusive": counts["inconclusive"],
        "false %": round(100 * (counts["slower"] + counts["faster"]) / n, 2) if n else math.nan,
        "false % of judged": round(100 * (counts["slower"] + counts["faster"]) / max(1, n - counts["inconclusive"]), 2),
    }


if __name__ == "__main__":
    main()
