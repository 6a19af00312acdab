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

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a subprocess benchmark
def test_harness_fidelity_prints_factors_then_the_ratio_last():
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "harness_fidelity.py"),
            "--sizes",
            "48",
            "64",
            "--threads",
            "1",
            "--rounds",
            "2",
            "--min-run-time",
            "0.01",
            "--gap-s",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
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


# ---- the GPU check (bench/gpu_check.sh) ----------------------------------------------------------------------


def gpu_check(*args, **env) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        ["bash", str(REPO / "bench" / "gpu_check.sh"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**os.environ, **env},
    )


def test_gpu_check_dry_run_fits_six_minutes_and_the_returned_files():
    """The plan the device machine runs: every step with a budget, key numbers (headline, fidelity) before the
    pipeline, the budgets plus the packing reserve within 360 s, at most 8 returned files."""
    out = gpu_check("--dry-run")
    assert out.returncode == 0, out.stdout + out.stderr
    steps = [line.split() for line in out.stdout.splitlines() if re.match(r"\s+\w+\s+\d+ s\s", line)]
    names = [s[0] for s in steps]
    budgets = [int(s[1]) for s in steps]
    assert names[:3] == ["device", "headline", "nvml"] and "pipeline" in names and "summary" in names
    assert all(b > 0 for b in budgets)
    total = re.search(r"total: (\d+) s of steps \+ (\d+) s reserved for packing = (\d+) s \(limit 360 s\)", out.stdout)
    assert total and int(total.group(1)) == sum(budgets) and int(total.group(3)) <= 360
    returned = re.search(r"returned: (.*) \((\d+) files, at most 8", out.stdout)
    assert returned and int(returned.group(2)) == len(returned.group(1).split()) <= 8
    assert "within the limits" in out.stdout


def test_gpu_check_dry_run_fails_when_the_budgets_pass_the_limit():
    out = gpu_check("--dry-run", GPU_CHECK_LIMIT_S="120")
    assert out.returncode == 1 and "NOT within the limits" in out.stderr
    assert gpu_check("--bogus").returncode == 2


@pytest.mark.slow  # a subprocess benchmark
def test_gpu_headline_prints_key_lines_for_each_point(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "gpu_headline.py"),
            "--device",
            "cpu",
            "--dtypes",
            "float32",
            "--sizes",
            "64",
            "--min-run-time",
            "0.01",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    keys = [line for line in out.stdout.splitlines() if line.startswith("KEY ")]
    assert keys[0].startswith("KEY device cpu: ") and len(keys) == 2
    assert re.match(r"KEY headline cpu float32 \(float32\) n=64: [\d.e+-]+ TFLOP/s, ", keys[1]), keys[1]
    import json

    rows = json.loads((tmp_path / "headline.json").read_text())
    assert [(r["dtype"], r["n"], r["torch_dtype"]) for r in rows] == [("float32", 64, "float32")]
    assert rows[0]["rel_error"] < 1e-4


def test_gpu_summary_lists_every_registry_table_and_the_headlines(tmp_path):
    """Tables it has never heard of by name still get their row counts (the registry says what a table is);
    a stage cut short is reported from its checkpoint."""
    import pandas as pd

    from accelbench import registry

    run = tmp_path / "results" / "r1"
    (run / "checkpoints").mkdir(parents=True)
    (run / "run.json").write_text("{}")
    pd.DataFrame(
        [
            {
                "device": "cuda:0",
                "dtype": d,
                "n": n,
                "tflops": t,
                "pct_of_peak": t / 9.894,
                "status": "ok",
                "torch_dtype": d,
            }
            for d, n, t in [("bfloat16", 4096, 700.0), ("bfloat16", 8192, 800.0)]
        ]
    ).to_csv(run / "matmul_cuda.csv", index=False)
    pd.DataFrame(
        [
            {
                "device": "cuda:0",
                "workload": "mlp",
                "mode": m,
                "speedup": s,
                "speedup_ci95_low": s - 0.1,
                "speedup_ci95_high": s + 0.1,
                "acc_diff": 0.001,
                "verdict": f"verdict {m}",
                "status": "ok",
            }
            for m, s in [("fp32", 1.0), ("amp_fp16", 2.5)]
        ]
    ).to_csv(run / "amp_cuda_summary.csv", index=False)
    (run / registry.checkpoint_file("amp", "cuda")).write_text('{"a": 1}\n{"a": 2}\n')
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu_summary.py"), str(tmp_path / "results")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert all(line.startswith("KEY ") for line in lines)
    assert "KEY matmul_cuda.csv: 2 rows (ok 2)" in lines
    assert "KEY   matmul cuda:0 bfloat16 (bfloat16) n=8192: 800 TFLOP/s, 80.9% of peak, ok" in lines
    assert any("amp cuda:0 mlp amp_fp16: speedup 2.5 [2.4, 2.6]" in line for line in lines)
    assert not any("mlp fp32: speedup" in line for line in lines)
    assert "KEY amp_cuda_steps.csv: missing (stage cut short?); 2 points in amp_cuda.jsonl" in lines
    assert lines[-1] == "KEY report: not written"


@pytest.mark.slow  # a subprocess benchmark
def test_telemetry_overhead_prints_the_on_off_ratio_last():
    """bench/telemetry_overhead.py runs (tiny sizes) and its last line is the geometric mean of the per-size
    on/off ratios it printed (the figure itself is measured on a quiet machine and kept in the README)."""
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "telemetry_overhead.py"),
            "--sizes",
            "48",
            "64",
            "--threads",
            "1",
            "--rounds",
            "2",
            "--min-run-time",
            "0.01",
            "--gap-s",
            "0",
            "--hz",
            "50",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
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


def _last_ratio(stdout: str) -> tuple[float, float]:
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("ratio best-found/exhaustive-best: "), last
    ratio = float(re.search(r"exhaustive-best: (\d+\.\d+)", last).group(1))
    share = float(re.search(r"share of evaluations: (\d+\.\d+)%", last).group(1))
    return ratio, share


@pytest.mark.slow  # a subprocess benchmark
def test_search_quality_on_the_synthetic_device_prints_the_ratio_and_the_share():
    """--fake: the method alone (no timing), so its numbers are exact: the known optimum of a 4096-shape grid
    found measuring a few percent of it."""
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "search_quality.py"), "--fake", "--max", "1024"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    ratio, share = _last_ratio(out.stdout)
    assert ratio >= 0.99 and 0 < share <= 15
    assert "exhaustive: best 896x1024x768" in out.stdout


@pytest.mark.slow  # a subprocess benchmark
def test_search_quality_runs_on_the_cpu():
    """A real (tiny) run: exhaustive, search and the side-by-side rounds all happen; the numbers live in the
    README, measured on a quiet machine."""
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "search_quality.py"),
            "--min",
            "32",
            "--max",
            "64",
            "--step",
            "32",
            "--budget-s",
            "30",
            "--rounds",
            "2",
            "--min-run-time",
            "0.005",
            "--confirm-run-time",
            "0.01",
            "--cache-mb",
            "1",
            "--threads",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    ratio, share = _last_ratio(out.stdout)
    assert ratio > 0 and share == 100.0  # a 2 x 2 x 2 grid: the coarse grid is all of it
    assert re.search(r"search 1: best \d+x\d+x\d+ [\d.e+-]+ TFLOP/s", out.stdout)
    assert "exhaustive: best" in out.stdout


def _power_table(stdout: str) -> dict[str, list[float]]:
    """compare_power's table: view -> [comparisons, false slower %, false faster %, found +5% %, found +10% %]."""
    out = {}
    for line in stdout.splitlines():
        m = re.match(r"^\s*([a-z0-9 ,]+?)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", line)
        if m:
            out[m.group(1)] = [float(x) for x in m.groups()[1:]]
    return out


@pytest.mark.slow  # a subprocess benchmark
def test_compare_power_detects_pseudo_replication_and_judges_runs_as_the_unit(tmp_path):
    """Simulated runs (the bench's own model): with a run effect (8% sd) the old within-run interval applied to two
    runs' blocks cries wolf while the runs-as-the-unit view stays near its nominal rate; with slowly wandering blocks
    (lag-1 0.9) the time-ordered halves flag the dependence that random halves cannot see; with independent blocks
    and no run effect nothing is flagged; 1 vs 1 never claims a verdict."""
    bench = [sys.executable, str(REPO / "bench" / "compare_power.py"), "--simulate"]
    run = lambda *a: subprocess.run([*bench, *a], capture_output=True, text=True, timeout=600, cwd=REPO, check=False)
    drift = run("--runs", "10", "--phi", "0.3", "--run-sd", "0.08")
    assert drift.returncode == 0, drift.stderr[-2000:]
    t = _power_table(drift.stdout)
    assert set(t) >= {
        "halves, random",
        "halves, time order, no floor",
        "blocks of two runs",
        "runs as the unit",
        "1 run vs 1 run",
    }
    assert t["blocks of two runs"][1] + t["blocks of two runs"][2] > 20.0  # pseudo-replication across runs
    assert t["runs as the unit"][0] == 2 * 500 and t["runs as the unit"][1] + t["runs as the unit"][2] <= 7.0
    assert t["1 run vs 1 run"][1:] == [0.0, 0.0, 0.0, 0.0]
    wander = run("--runs", "8", "--phi", "0.9", "--run-sd", "0")
    assert "NOT exchangeable" in wander.stdout, wander.stdout
    quiet = run("--runs", "8", "--phi", "0", "--run-sd", "0")
    assert "no sign of dependence" in quiet.stdout, quiet.stdout
    assert _power_table(quiet.stdout)["runs as the unit"][4] == 100.0  # every planted 10% found
    few = run("--runs", "3")
    assert few.returncode != 0 and "at least 4 runs" in few.stderr


@pytest.mark.slow  # a subprocess benchmark
def test_compare_power_reads_sample_files_of_separate_runs(tmp_path):
    import numpy as np

    from accelbench.measure import samples as S
    from accelbench.run.io import atomic_write_parquet

    rng = np.random.default_rng(0)
    files = []
    for name in "abcd":
        rows = [
            {
                "run_id": name,
                "backend": "cpu",
                "device": "cpu",
                "dtype": "float32",
                "n": n,
                "allow_tf32": False,
                "blocks": 30,
                "repeats": 30,
                S.SAMPLES_KEY: list(1e-3 * n / 512 * np.exp(rng.normal(0, 0.01, 30))),
            }
            for n in (512, 1024)
        ]
        files.append(tmp_path / f"{name}.parquet")
        atomic_write_parquet(files[-1], S.from_block_rows("matmul", rows))
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "compare_power.py"), "--samples", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("4 runs from --samples")
    t = _power_table(out.stdout)
    assert t["halves, random"][1:3] == [0.0, 0.0] and t["halves, time order"][4] == 100.0
    assert t["runs as the unit"][0] == 2 * 6  # 2 points x every ordered split of 4 runs into 2 and 2


def test_gpu_config_joins_each_stage_section_to_the_run_wide_keys(tmp_path):
    """bench/gpu_config.py: the GPU check's config is bench/gpu_config.yaml's run-wide keys plus each stage's own
    gpu_check section (declared once, in its package); the result is a valid config."""
    import json

    import yaml

    from accelbench import registry
    from accelbench.run.config import check

    out = tmp_path / "config.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu_config.py"), str(REPO / "bench" / "gpu_config.yaml"), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    config = json.loads(out.read_text())
    check(config)
    base = yaml.safe_load((REPO / "bench" / "gpu_config.yaml").read_text())
    declared = {s.config_key: s.gpu_check for s in registry.STAGES.values() if s.gpu_check}
    assert {"matmul", "membw", "amp"} <= set(declared)
    assert not set(declared) & set(base), "a stage's GPU-check section is declared in its package only"
    for key, section in declared.items():
        assert config[key] == section, key
    assert config["matmul"]["search"]["enabled"] and config["backends"] == ["cuda"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**base, "matmul": {"sizes": [0]}}))
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu_config.py"), str(bad), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.startswith("gpu_config.py: matmul.sizes"), proc.stderr
