"""How aggregate, plots and report scale with the number of runs under results/ (issue 21, item 6).

A small run is copied N times (default 1, 100, 1000) under a temporary results/ with distinct run ids and times
a day apart; the last 40% of the copies are made 12% slower on every compared point (a planted step the
History section must show). Every copy is added to the history store first (``accelbench history add``, what
each nightly run does once when it finishes; timed on its own), then ``accelbench aggregate`` (default focus:
the latest runs in full, the rest as history), ``plots`` and ``report`` run as separate processes, each timed
(wall and CPU seconds: on a shared machine the CPU time is the better guess of a quiet one's wall time) with its
peak memory (the child's ru_maxrss, from os.wait4), and the report's size is measured.

    python bench/scale_report.py                          # the test fixture's CPU run as the source
    python bench/scale_report.py --source results/myrun --counts 1 100 1000 --out scale.csv

Targets (issue 21): at 1,000 runs aggregate + plots + report under 60 s and 2 GB together, the report under 5 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the checkout's package, installed or not

import pandas as pd

from accelbench import registry

REPO = Path(__file__).resolve().parents[1]

STEP_AT = 0.6  # the fraction of copies before the planted step
STEP = 1.12


def copy_run(source: Path, results: Path, run_id: str, factor: float = 1.0, when: datetime | None = None) -> Path:
    """A copy of run folder ``source`` as ``results/<run_id>``: its run id everywhere, its time ``when`` and every
    compared point's median (``Compare.median``, each table that declares one) times ``factor``."""
    info = json.loads((source / registry.RUN_FILE).read_text())
    old = str(info.get("run") or source.name)
    dest = results / run_id
    shutil.copytree(
        source, dest, ignore=shutil.ignore_patterns("logs", "checkpoints", "work", registry.HISTORY_RECEIPT)
    )
    info["run"] = run_id
    if isinstance(info.get("config"), dict):
        info["config"]["run"] = run_id
    (dest / registry.RUN_FILE).write_text(json.dumps(info))
    devices_path = dest / registry.DEVICES_FILE
    if devices_path.is_file():
        devices = json.loads(devices_path.read_text())
        devices["run_id"] = run_id
        if when is not None:
            devices["timestamp_utc"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        devices_path.write_text(json.dumps(devices))
    for csv in dest.glob("*.csv"):
        table = registry.table_of(csv.name)
        spec = registry.TABLES[table].compare if table else None
        if spec is not None and factor != 1.0:
            df = pd.read_csv(csv)
            df["run_id"] = run_id
            df[spec.median] = pd.to_numeric(df[spec.median], errors="coerce") * factor
            df.to_csv(csv, index=False)
        else:
            text = csv.read_text()
            csv.write_text(text.replace(f"\n{old},", f"\n{run_id},").replace(f",{old},", f",{run_id},"))
    return dest


def make_copies(source: Path, results: Path, n: int) -> list[Path]:
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    return [
        copy_run(
            source, results, f"night-{i:04d}", STEP if i >= int(n * STEP_AT) and n > 1 else 1.0, t0 + timedelta(days=i)
        )
        for i in range(n)
    ]


def timed(argv: list[str], cwd: Path) -> tuple[float, float, int, float]:
    """(wall seconds, peak RSS in GB, exit code, CPU seconds) of one command, as its own process under
    /usr/bin/time (a child forked from this process would count this process's memory in its own peak). On a
    shared machine the CPU seconds (user + system) are the better guess of a quiet machine's wall time: each
    step is one thread."""
    report = cwd / "time.txt"
    t = time.perf_counter()
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%M %U %S", "-o", str(report), *argv],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t
    if proc.returncode:
        print(f"  {' '.join(argv[2:4])}: exit {proc.returncode}\n{proc.stderr[-2000:]}", file=sys.stderr)
    kib, user, system = report.read_text().strip().splitlines()[-1].split()
    return wall, int(kib) / 1024**2, proc.returncode, float(user) + float(system)  # KiB -> GiB


def fixture_source(where: Path) -> Path:
    sys.path.insert(0, str(REPO / "tests"))
    from fixture_runs import (
        write_fixture_results,  # the tests' realistic CPU run (every table, samples)
    )

    write_fixture_results(where, ("cpu",))
    return where / "laptop-cpu"


def bench(source: Path, n: int, work: Path) -> dict:
    results = work / f"results-{n}"
    t = time.perf_counter()
    make_copies(source, results, n)
    copy_s = time.perf_counter() - t
    py = [sys.executable, "-m", "accelbench"]
    runs = sorted(str(p) for p in results.iterdir() if (p / registry.RUN_FILE).is_file())
    add_s, add_gb, rc, _ = timed([*py, "history", "add", *runs, "--store", str(results / registry.HISTORY_FILE)], work)
    assert rc == 0, "history add failed"
    agg, plots, html = results / registry.AGGREGATE_DIR, results / registry.PLOTS_DIR, results / registry.REPORT_HTML
    a = timed([*py, "aggregate", "--results", str(results), "--allow-incomplete"], work)
    p = timed([*py, "plots", "--aggregate-dir", str(agg), "--out-dir", str(plots)], work)
    r = timed([*py, "report", "--aggregate-dir", str(agg), "--plots-dir", str(plots), "--out", str(html)], work)
    report = html.read_text() if html.is_file() else ""
    row = {
        "runs": n,
        "copy_s": round(copy_s, 1),
        "history_add_s": round(add_s, 1),
        "history_add_gb": round(add_gb, 2),
        "aggregate_s": round(a[0], 1),
        "aggregate_gb": round(a[1], 2),
        "plots_s": round(p[0], 1),
        "plots_gb": round(p[1], 2),
        "report_s": round(r[0], 1),
        "report_gb": round(r[1], 2),
        "total_s": round(a[0] + p[0] + r[0], 1),
        "total_cpu_s": round(a[3] + p[3] + r[3], 1),
        "load_avg": round(os.getloadavg()[0], 1),
        "peak_gb": round(max(a[1], p[1], r[1]), 2),
        "report_mb": round(html.stat().st_size / 1e6, 2) if html.is_file() else None,
        "store_mb": round((results / registry.HISTORY_FILE).stat().st_size / 1e6, 1),
        "history_shown": 'id="history-table"' in report,
        "ok": not (a[2] or p[2] or r[2]),
    }
    shutil.rmtree(results, ignore_errors=True)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=None, help="a run folder to copy (default: the tests' fixture CPU run)")
    ap.add_argument("--counts", type=int, nargs="+", default=[1, 100, 1000])
    ap.add_argument("--out", default=None, help="also write the rows as CSV here")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="accelbench-scale-") as tmp:
        work = Path(tmp)
        source = Path(args.source) if args.source else fixture_source(work / "source")
        if not (source / registry.RUN_FILE).is_file():
            print(f"scale_report: --source {source}: not a run folder (no {registry.RUN_FILE})", file=sys.stderr)
            return 2
        rows = []
        for n in args.counts:
            rows.append(bench(source, n, work))
            print(json.dumps(rows[-1]), flush=True)
    df = pd.DataFrame(rows)
    print(df.to_markdown(index=False) if hasattr(df, "to_markdown") else df.to_string(index=False))
    if args.out:
        df.to_csv(args.out, index=False)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
