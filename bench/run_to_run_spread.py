"""How much does a float32 matmul number move from one run to the next?

Runs the real ``accelbench matmul`` stage ``--runs`` times, each in a fresh process (so process
start-up, allocator state and thread-pool creation vary as they would between two pipeline runs),
float32 only, on the CPU, and prints per size: runs, min / median / max TFLOP/s, the coefficient of
variation (std/mean) across runs, the median of the within-run IQR/median for comparison, and the largest
speed change between any two runs (``max_pair_change_pct``: what ``accelbench compare`` would see between two
runs of one config, before any interval). The last lines are the worst CV over sizes and the largest pairwise
change over sizes n >= 512: ``accelbench compare``'s ``--min-effect`` must lie above it (docs/comparing.md).

    python bench/run_to_run_spread.py [--runs 5] [--sizes 256 512 1024] [--threads 2] [--min-run-time 0.3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from accelbench import registry
from accelbench.run.config import check, config_hash, with_defaults
from accelbench.stages.matmul import PLUGIN as MATMUL


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024])
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--min-run-time", type=float, default=0.3)
    p.add_argument("--budget", type=float, default=10.0, help="matmul.point_budget_s")
    args = p.parse_args()

    sweep = {
        "sizes": args.sizes,
        "dtypes": ["float32"],
        "tf32": False,
        "fp8": False,
        "min_run_time_s": args.min_run_time,
        "point_budget_s": args.budget,
    }
    raw = {"run": "spread", MATMUL.config_key: sweep}
    check(raw)
    cfg = with_defaults(raw)
    frames = []
    with tempfile.TemporaryDirectory(prefix="accelbench-spread-") as tmp:
        run_file = Path(tmp) / "run.json"
        run_file.write_text(
            json.dumps(
                {
                    "run": "spread",
                    "config": cfg,
                    "config_hash": config_hash(cfg),
                    "git_commit": "bench",
                    "accelbench_version": "bench",
                }
            )
        )
        for r in range(args.runs):
            run_dir = Path(tmp) / f"run{r}"
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "accelbench",
                    MATMUL.name,
                    "--run-file",
                    str(run_file),
                    "--backend",
                    "cpu",
                    "--threads",
                    str(args.threads),
                    "--out-dir",
                    str(run_dir),
                    "--checkpoint",
                    str(Path(tmp) / f"ck_{r}.jsonl"),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            out = run_dir / registry.TABLES[MATMUL.tables[0].name].filename("cpu")  # its sweep
            df = pd.read_csv(out)
            df["run"] = r
            frames.append(df)
            points = zip(df["n"], df["tflops"], strict=True)
            print(f"run {r + 1}/{args.runs}: " + ", ".join(f"n={n}: {t:.4g}" for n, t in points), flush=True)
    df = pd.concat(frames)
    df["iqr_ratio"] = df["iqr_s"] / df["median_s"]
    g = df.groupby("n")
    table = pd.DataFrame(
        {
            "runs": g["tflops"].count(),
            "tflops_min": g["tflops"].min(),
            "tflops_median": g["tflops"].median(),
            "tflops_max": g["tflops"].max(),
            "cv_pct": 100 * g["tflops"].std(ddof=1) / g["tflops"].mean(),
            "within_run_iqr_pct": 100 * g["iqr_ratio"].median(),
            "not_ok": g["status"].apply(lambda s: int((s != "ok").sum())),
            "max_pair_change_pct": g["tflops"].apply(
                lambda t: 100 * (t.max() / t.min() - 1) if t.min() > 0 else float("nan")
            ),
        }
    )
    print(f"threads={args.threads} min_run_time_s={args.min_run_time}")
    print(table.to_string(float_format=lambda x: f"{x:.4g}"))
    print(f"worst run-to-run CV over sizes: {table['cv_pct'].max():.2f}%")
    large = table[table.index >= 512]
    if len(large):
        print(f"largest speed change between two runs, n >= 512: {large['max_pair_change_pct'].max():.2f}%")


if __name__ == "__main__":
    main()
