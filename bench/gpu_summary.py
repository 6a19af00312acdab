"""The GPU check's summary of a pipeline run: one ``KEY`` line per thing worth reading first.

For every run folder under RESULTS (a folder with a run.json), and every per-run table the registry
knows (``registry.TABLES``: stages added later are summarized without a change here):

- ``<file>: N rows (ok 12, unsupported 1, ...)``, or, for a stage cut short, the points its checkpoint holds;
- matmul: TFLOP/s and % of peak at the largest size of every (device, dtype);
- amp: every mode's speedup over FP32 with its interval, the accuracy difference and the verdict;
- transfer: the best bandwidth per direction and memory kind.

    python bench/gpu_summary.py /tmp/work/results
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

from accelbench import registry


def _num(x, fmt=".4g") -> str:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return "?"
    return format(x, fmt) if math.isfinite(x) else "nan"


def table_lines(run: Path) -> list[str]:
    out = []
    backends = sorted({m.group("backend") for t in registry.RUN_TABLES for f in run.iterdir()
                       if (m := registry.TABLES[t].pattern.match(f.name))})
    for name in registry.RUN_TABLES:
        table = registry.TABLES[name]
        for backend in backends:
            path = run / table.filename(backend)
            if not path.exists():
                ck = run / registry.checkpoint_file(table.stage, backend)
                if ck.exists():
                    points = sum(1 for line in ck.read_text().splitlines() if line.strip())
                    out.append(f"{path.name}: missing (stage cut short?); {points} points in {ck.name}")
                continue
            df = pd.read_csv(path)
            counts = df["status"].astype(str).value_counts().to_dict() if "status" in df else {}
            out.append(f"{path.name}: {len(df)} rows (" + ", ".join(f"{k} {v}" for k, v in counts.items()) + ")")
            out += detail_lines(name, df)
    return out


def detail_lines(table: str, df: pd.DataFrame) -> list[str]:
    if df.empty or "status" not in df or set(df["status"].astype(str)) <= {"absent"}:
        return []
    if table == "matmul":
        lines = []
        for (device, dtype), g in df.groupby(["device", "dtype"], sort=False):
            r = g.sort_values("n").iloc[-1]
            used = f" ({r['torch_dtype']})" if "torch_dtype" in r and isinstance(r["torch_dtype"], str) else ""
            lines.append(f"  matmul {device} {dtype}{used} n={int(r['n'])}: {_num(r['tflops'])} TFLOP/s, "
                         f"{_num(r['pct_of_peak'], '.1f')}% of peak, {r['status']}")
        return lines
    if table == "amp_summary":
        return [f"  amp {r['device']} {r['workload']} {r['mode']}: speedup {_num(r['speedup'], '.3g')} "
                f"[{_num(r['speedup_ci95_low'], '.3g')}, {_num(r['speedup_ci95_high'], '.3g')}], "
                f"acc diff {_num(r['acc_diff'], '+.3f')}: {r['verdict']}"
                for _, r in df.iterrows() if str(r.get("mode")) != "fp32"]
    if table == "transfer":
        ok = df[df["status"].astype(str).isin(["ok", "unstable"])]
        return [f"  transfer {device} {direction} {memory}: best {_num(g['gbps'].max(), '.3g')} GB/s"
                for (device, direction, memory), g in ok.groupby(["device", "direction", "memory"])]
    return []


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", help="the pipeline's results/ folder")
    args = p.parse_args()
    results = Path(args.results)
    runs = sorted(d for d in results.iterdir() if (d / "run.json").exists()) if results.is_dir() else []
    if not runs:
        print(f"KEY pipeline: no run folder under {results}")
    for run in runs:
        print(f"KEY run {run.name}")
        for line in table_lines(run):
            print(f"KEY {line}")
    report = results / "report.html"
    print(f"KEY report: {report.stat().st_size / 2 ** 20:.1f} MiB" if report.exists() else "KEY report: not written")


if __name__ == "__main__":
    main()
