"""The whole DAG, for real: `snakemake` on a tiny config in a temporary directory, then the outputs
checked — files exist, documented columns, plausible values."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from accelbench import registry
from tiny_config import TINY
from workflow_runner import run_snakemake

PLOTS = list(registry.FIGURES)


def snakemake(workdir: Path, *args: str, timeout: int = 900):
    return run_snakemake(workdir, "--configfile", str(workdir / "config.yaml"), *args, timeout=timeout)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("pipeline")
    (work / "config.yaml").write_text(yaml.safe_dump(TINY))
    proc = snakemake(work, "--cores", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return work


@pytest.mark.slow
def test_every_stage_output_exists(tiny_run):
    run = tiny_run / "results" / "tiny"
    for name in ["run.json", "devices.json", *registry.run_files(["cpu"]), *registry.sample_files(["cpu"])]:
        assert (run / name).stat().st_size > 0, name
    for table in registry.TABLES:
        assert (tiny_run / "results" / "aggregate" / f"{table}.csv").exists(), table
    for p in PLOTS:
        for ext in ("png", "svg"):
            assert (tiny_run / "results" / "plots" / f"{p}.{ext}").stat().st_size > 1000, (p, ext)
    html = (tiny_run / "results" / "report.html").read_text()
    assert "<html" in html.lower() and "data:image/png;base64," in html


@pytest.mark.slow
@pytest.mark.parametrize("name,kind", [(name, registry.table_of(name)) for name in registry.run_files(["cpu"])])
def test_documented_columns(tiny_run, name, kind):
    df = pd.read_csv(tiny_run / "results" / "tiny" / name)
    missing = [c for c in list(registry.TABLES[kind].columns) if c not in df.columns]
    assert not missing, f"{name} lacks documented columns {missing}"
    assert len(df) > 0
    assert (df["run_id"] == "tiny").all()


@pytest.mark.slow
def test_matmul_values_plausible(tiny_run):
    df = pd.read_csv(tiny_run / "results" / "tiny" / "matmul_cpu.csv")
    assert set(df["n"]) == {64, 128}
    assert {"float32", "bfloat16"} <= set(df["dtype"])  # fp8 joins when matmul.fp8 is on and torch has it
    assert set(df["status"]) <= set(registry.MATMUL_STATUSES)
    fp32 = df[df["dtype"] == "float32"]
    assert (fp32["tflops"] > 0).all(), fp32[["n", "tflops", "status"]]
    # tflops is 2n^3 / median_s, in units of 1e12 FLOP/s
    expected = 2 * fp32["n"].astype(float) ** 3 / fp32["median_s"] / 1e12
    assert ((fp32["tflops"] - expected).abs() <= 1e-6 * expected).all()
    assert (fp32["ci95_low_s"] <= fp32["median_s"]).all() and (fp32["median_s"] <= fp32["ci95_high_s"]).all()
    assert (fp32["rel_error"] < fp32["rel_error_max"]).all()
    assert (df["threads"] == 1).all()


@pytest.mark.slow
def test_devices_json_reports_every_backend(tiny_run):
    devices = json.loads((tiny_run / "results" / "tiny" / "devices.json").read_text())
    assert set(devices["backends"]) == set(registry.backends.NAMES) == {"cpu", "cuda", "rocm", "mps", "xla", "xpu"}
    assert devices["backends"]["cpu"]["present"] is True
    import torch

    assert devices["torch_version"] == torch.__version__


@pytest.mark.slow
def test_amp_summary_has_verdict(tiny_run):
    summary = pd.read_csv(tiny_run / "results" / "tiny" / "amp_cpu_summary.csv")
    amp = summary[summary["mode"].str.startswith("amp")]
    assert len(amp) == 2  # one per workload
    assert amp["verdict"].str.len().gt(10).all()
    assert amp["speedup"].gt(0).all()


@pytest.mark.slow
def test_rerun_is_a_no_op(tiny_run):
    proc = snakemake(tiny_run, "--cores", "2", "--dry-run")
    assert proc.returncode == 0
    assert "Nothing to be done" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_snakemakes_own_report(tiny_run):
    """`snakemake --report` bundles the outputs marked with report() and their captions."""
    out = tiny_run / "results" / "snakemake-report.html"
    proc = snakemake(tiny_run, "--report", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = out.read_text(errors="replace")
    assert "matmul_tflops" in html and "devices.json" in html
