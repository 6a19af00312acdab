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


def test_compare_power_reports_false_alarms_and_detection_over_200_resamplings(tmp_path):
    """On two synthetic runs of one quiet config (30 blocks a point, 1% log-normal spread, the same medians) the
    bench must find no false alarm at the default min effect and every planted 10% slowdown; the numbers come
    from the script's own resampling, so this checks its arithmetic end to end."""
    import numpy as np

    from accelbench.measure import samples as S
    from accelbench.run.io import atomic_write_parquet

    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        rows = [{"run_id": name, "backend": "cpu", "device": "cpu", "dtype": "float32", "n": n, "allow_tf32": False,
                 "blocks": 30, "repeats": 30, S.SAMPLES_KEY: list(1e-3 * n / 512 * np.exp(rng.normal(0, 0.01, 30)))}
                for n in (512, 1024)]
        atomic_write_parquet(tmp_path / f"{name}.parquet", S.from_block_rows("matmul", rows))
    out = subprocess.run([sys.executable, str(REPO / "bench" / "compare_power.py"), "--samples",
                          str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"), "--resamplings", "200"],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("2 point(s) x 200 resamplings")
    table = {tuple(l.split()[:2]): [float(x.rstrip("%")) for x in l.split()[2:]] for l in lines[2:8]}
    assert set(table) == {(me, view) for me in ("5%", "2%", "0%") for view in ("halves", "runs")}
    for view in ("halves", "runs"):
        alarms, found5, found10 = table[("5%", view)]
        assert alarms == 0.0 and found10 == 100.0
    # no floor at all: within one run about the 5% the interval promises; between two runs more, since their
    # medians differ by chance: the reason for a min effect
    assert table[("0%", "halves")][0] <= 7.0
    assert "per size at min effect 5%" in out.stdout
    bad = subprocess.run([sys.executable, str(REPO / "bench" / "compare_power.py"), "--resamplings", "50"],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert bad.returncode != 0 and "at least 200" in bad.stderr
