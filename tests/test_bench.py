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


def test_telemetry_overhead_prints_the_on_off_ratio_last():
    """bench/telemetry_overhead.py runs (tiny sizes) and its last line is the geometric mean of the per-size
    on/off ratios it printed (the figure itself is measured on a quiet machine and kept in the README)."""
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "telemetry_overhead.py"), "--sizes", "48", "64", "--threads", "1",
         "--rounds", "2", "--min-run-time", "0.01", "--gap-s", "0", "--hz", "50"],
        capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[-1].startswith("ratio sampler on / off"), lines[-1]
    ratio = float(re.search(r"(\d+\.\d+)\s*$", lines[-1]).group(1))
    rows = [l.split() for l in lines if re.match(r"\s+(48|64)\s", l)]
    assert len(rows) == 2
    per_size = [float(r[3]) for r in rows]  # n, off, on, on/off (paired), readings, best on/off, ...
    assert math.isclose(ratio, math.sqrt(per_size[0] * per_size[1]), rel_tol=0.01), (ratio, per_size)
    assert all(int(r[4]) >= 2 for r in rows) and all(float(r[5]) > 0 for r in rows)  # the "on" windows took readings
    assert any(l.startswith("one reading:") for l in lines)
