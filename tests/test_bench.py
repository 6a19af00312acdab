"""The benchmark scripts run and say what they must: bench/harness_fidelity.py prints its factors,
then the ratio accelbench / best last, and the factors multiply to that ratio.

Tiny sizes and run times: this checks the script and its arithmetic, not the numbers (which
live in the README, measured side by side on a quiet machine).
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_harness_fidelity_prints_factors_then_the_ratio_last():
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "harness_fidelity.py"), "--sizes", "48", "64", "--threads", "1",
         "--rounds", "2", "--min-run-time", "0.01", "--gap-s", "0"],
        capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[-1].startswith("ratio accelbench/best"), lines[-1]
    factors = {}
    for line in lines[-4:]:
        name = line.split(":")[0].split()[0]
        factors[name] = float(re.search(r"(\d+\.\d+)\s*$", line).group(1))
    assert set(factors) == {"harness", "library", "rotation", "ratio"}
    assert all(0 < v < 10 for v in factors.values())
    # per size, total = harness x library x rotation, so the geometric means multiply too (to rounding)
    product = factors["harness"] * factors["library"] * factors["rotation"]
    assert math.isclose(product, factors["ratio"], rel_tol=0.01), (factors, product)
    rows = [l for l in lines if re.match(r"\s+(48|64)\s", l)]
    assert len(rows) == 2 and all(len(r.split()) == 6 for r in rows), rows  # n, 4 methods, acc/best


def _last_ratio(stdout: str) -> tuple[float, float]:
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("ratio best-found/exhaustive-best: "), last
    ratio = float(re.search(r"exhaustive-best: (\d+\.\d+)", last).group(1))
    share = float(re.search(r"share of evaluations: (\d+\.\d+)%", last).group(1))
    return ratio, share


def test_search_quality_on_the_synthetic_device_prints_the_ratio_and_the_share():
    """--fake: the method alone (no timing), so its numbers are exact: the known optimum of a 4096-shape grid
    found measuring a few percent of it."""
    out = subprocess.run([sys.executable, str(REPO / "bench" / "search_quality.py"), "--fake", "--max", "1024"],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    ratio, share = _last_ratio(out.stdout)
    assert ratio >= 0.99 and 0 < share <= 15
    assert "exhaustive: best 896x1024x768" in out.stdout


def test_search_quality_runs_on_the_cpu():
    """A real (tiny) run: exhaustive, search and the side-by-side rounds all happen; the numbers live in the
    README, measured on a quiet machine."""
    out = subprocess.run([sys.executable, str(REPO / "bench" / "search_quality.py"), "--min", "32", "--max", "64",
                          "--step", "32", "--budget-s", "30", "--rounds", "2", "--min-run-time", "0.005",
                          "--confirm-run-time", "0.01", "--cache-mb", "1", "--threads", "1"],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    ratio, share = _last_ratio(out.stdout)
    assert ratio > 0 and share == 100.0  # a 2 x 2 x 2 grid: the coarse grid is all of it
    assert re.search(r"search 1: best \d+x\d+x\d+ [\d.e+-]+ TFLOP/s", out.stdout)
    assert "exhaustive: best" in out.stdout
