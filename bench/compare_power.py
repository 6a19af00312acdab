"""How often does ``accelbench compare`` cry wolf, and how often does it find a real slowdown?

Takes the raw matmul samples of two runs of one config (by default measured here: the real ``accelbench
matmul`` stage run twice, each in a fresh process, float32 on the CPU; or ``--samples A.parquet B.parquet``
from any two runs) and, over ``--resamplings`` (at least 200) resamplings per point:

- **false alarms, halves**: one run's samples of a point split at random into two halves, compared; a
  ``slower`` or ``faster`` verdict is a false alarm (the within-run view);
- **false alarms, runs**: each run's samples of the point resampled with replacement (a bootstrap of blocks),
  the second run compared with the first: the run-to-run view, which is what a user's two runs are;
- **detection**: the same, with the candidate's times multiplied by 1.05 and 1.10 (a point taking 5% and 10%
  longer): the share of comparisons that say ``slower``.

Prints one line per min effect and view, the rates over every point and resampling, then the rates per size
for the default min effect.

    python bench/compare_power.py [--sizes 256 512 1024] [--threads 2] [--resamplings 200]
                                  [--min-effect 0.05 0.02 0] [--samples A.parquet B.parquet]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from accelbench import registry
from accelbench.measure import ratio as R
from accelbench.reporting.compare import DEFAULT_MIN_EFFECT
from accelbench.run.config import check, config_hash, with_defaults
from accelbench.run.io import read_parquet

SLOWDOWNS = (1.05, 1.10)


def measure(sizes, threads: int, min_run_time: float, runs: int = 2) -> list[pd.DataFrame]:
    """The matmul samples of ``runs`` fresh runs of one float32 config on the CPU."""
    raw = {"run": "power", "matmul": {"sizes": sizes, "dtypes": ["float32"], "tf32": False, "fp8": False,
                                      "min_run_time_s": min_run_time, "point_budget_s": 30.0}}
    check(raw)
    cfg = with_defaults(raw)
    out = []
    with tempfile.TemporaryDirectory(prefix="accelbench-power-") as tmp:
        run_file = Path(tmp) / "run.json"
        run_file.write_text(json.dumps({"run": "power", "config": cfg, "config_hash": config_hash(cfg),
                                        "git_commit": "bench", "accelbench_version": "bench"}))
        for r in range(runs):
            run_dir = Path(tmp) / f"run{r}"
            subprocess.run([sys.executable, "-m", "accelbench", "matmul", "--run-file", str(run_file), "--backend",
                            "cpu", "--threads", str(threads), "--out-dir", str(run_dir), "--checkpoint",
                            str(Path(tmp) / f"ck{r}.jsonl")], check=True, stdout=subprocess.DEVNULL)
            out.append(read_parquet(run_dir / registry.SAMPLES["matmul"].filename("cpu")))
            print(f"measured run {r + 1}/{runs}", flush=True)
    return out


def points(df: pd.DataFrame) -> dict[str, np.ndarray]:
    df = df[df["steady"] & (df["table"] == "matmul")]
    return {p: g.sort_values("sample")["sample_s"].to_numpy(float) for p, g in df.groupby("point")}


def rates(a: dict, b: dict, min_effects, resamplings: int, rng) -> pd.DataFrame:
    """One row per (point, min effect, view, planted factor): the share of resamplings with each verdict."""
    rows = []
    for point in sorted(set(a) & set(b)):
        x, y = a[point], b[point]
        draws = []
        for _ in range(resamplings):
            perm = rng.permutation(x)
            half = len(perm) // 2
            draws.append(("halves", perm[:half], perm[half:2 * half]))
            draws.append(("runs", rng.choice(x, len(x)), rng.choice(y, len(y))))
        for view in ("halves", "runs"):
            pairs = [(p, q) for v, p, q in draws if v == view]
            for factor in (1.0, *SLOWDOWNS):
                estimates = [R.hodges_lehmann_ratio(p, q * factor) for p, q in pairs]
                for me in min_effects:
                    verdicts = [R.verdict(e, me) for e in estimates]
                    rows.append({"point": point, "n": int(point.split("n=")[1].split("|")[0]), "view": view,
                                 "factor": factor, "min_effect": me, "blocks": (len(x), len(y)),
                                 "alarm": np.mean([v in ("slower", "faster") for v in verdicts]),
                                 "slower": np.mean([v == "slower" for v in verdicts])})
    return pd.DataFrame(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024])
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--min-run-time", type=float, default=0.3)
    p.add_argument("--resamplings", type=int, default=200)
    p.add_argument("--min-effect", type=float, nargs="+", default=[DEFAULT_MIN_EFFECT, 0.02, 0.0])
    p.add_argument("--samples", nargs=2, metavar=("A", "B"), help="two runs' matmul samples files instead of measuring")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.resamplings < 200:
        p.error("--resamplings: at least 200")
    frames = [read_parquet(f) for f in args.samples] if args.samples else \
        measure(args.sizes, args.threads, args.min_run_time)
    a, b = points(frames[0]), points(frames[1])
    if not set(a) & set(b):
        sys.exit("compare_power: the two sample sets share no matmul point")
    table = rates(a, b, args.min_effect, args.resamplings, np.random.default_rng(args.seed))
    print(f"{len(set(a) & set(b))} point(s) x {args.resamplings} resamplings; blocks per point: "
          + ", ".join(f"{k.split('|')[1]}: {len(a[k])}/{len(b[k])}" for k in sorted(set(a) & set(b))))
    print(f"{'min effect':>10}  {'view':<6}  {'false alarms':>12}  {'found +5%':>9}  {'found +10%':>10}")
    for me in args.min_effect:
        for view in ("halves", "runs"):
            t = table[(table["min_effect"] == me) & (table["view"] == view)]
            null, five, ten = (t[t["factor"] == f] for f in (1.0, *SLOWDOWNS))
            print(f"{100 * me:>9g}%  {view:<6}  {100 * null['alarm'].mean():>11.1f}%  {100 * five['slower'].mean():>8.1f}%"
                  f"  {100 * ten['slower'].mean():>9.1f}%")
    d = table[table["min_effect"] == args.min_effect[0]]
    per = d.pivot_table(index="n", columns=["view", "factor"], values=["alarm", "slower"], aggfunc="mean")
    print(f"per size at min effect {100 * args.min_effect[0]:g}% (alarm: false-alarm share at factor 1.0; slower: "
          "detection share at 1.05 and 1.10):")
    keep = [c for c in per.columns if (c[0] == "alarm" and c[2] == 1.0) or (c[0] == "slower" and c[2] != 1.0)]
    print((100 * per[keep]).round(1).to_string())


if __name__ == "__main__":
    main()
