"""The GPU check's summary of a pipeline run: one ``KEY`` line per thing worth reading first.

For every run folder under RESULTS (a folder with a run.json), and every per-run table the registry
knows (``registry.TABLES``: stages added later are summarized without a change here):

- ``<file>: N rows (ok 12, unsupported 1, ...)``, or, for a stage cut short, the points its checkpoint holds;
- then the lines the table declares for it (``Table.gpu_summary``, in its stage's package): the matmul sweep's
  TFLOP/s and % of peak at the largest size, the AMP speedups with their intervals and verdicts, the best
  transfer bandwidths.

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
    backends = sorted(
        {
            m.group("backend")
            for t in registry.RUN_TABLES
            for f in run.iterdir()
            if (m := registry.TABLES[t].pattern.match(f.name))
        }
    )
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
    """The table's own lines (``Table.gpu_summary``, declared in its stage's package), if it declares any."""
    hook = registry.TABLES[table].gpu_summary
    if hook is None or df.empty or "status" not in df or set(df["status"].astype(str)) <= {"absent"}:
        return []
    return hook.load()(df, _num)


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
    print(f"KEY report: {report.stat().st_size / 2**20:.1f} MiB" if report.exists() else "KEY report: not written")


if __name__ == "__main__":
    main()
