"""Every row says where it came from: run, host, device, code, software, container, config.

Checked on a real (very small) pipeline run: every CSV every stage writes, and the aggregated
tables, carry the provenance columns with the right values; devices.json records the environment
variables and package versions that change the numbers.

``mini_run`` is shared with test_reproducibility and test_faults: a pipeline run is cached per name
for the whole pytest session, so the three modules together run it at most twice.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

import accelbench
from accelbench import registry
from accelbench.run.config import config_hash, with_defaults
from accelbench.run.provenance import git_commit, row_provenance
from workflow_runner import run_snakemake, snakemake_env

REPO = Path(__file__).resolve().parents[1]

# small enough for seconds per stage on 2 cores; every stage still runs for real
MINI = {
    "run": "mini",
    "backends": ["cpu"],
    "cpu_threads": 1,
    "seed": 0,
    "warmup": {"n": 32, "max_iters": 10, "window": 3, "rel_tol": 0.5},
    "matmul": {
        "sizes": [32, 64],
        "dtypes": ["float32", "bfloat16"],
        "min_run_time_s": 0.02,
        "point_budget_s": 30.0,
        "fp8": False,
        # one shape (32^3): the search's rows are the same in every run (test_reproducibility)
        "search": {
            "enabled": True,
            "m": {"min": 32, "max": 32, "step": 32},
            "n": {"min": 32, "max": 32, "step": 32},
            "k": {"min": 32, "max": 32, "step": 32},
            "budget_s": 15.0,
            "min_run_time_s": 0.01,
            "confirm": 1,
        },
    },
    "membw": {"min_kb": 64, "max_mb": 0.5, "min_run_time_s": 0.01},
    "transfer": {"sizes_mb": [1]},
    "amp": {
        "workloads": ["mlp"],
        "seeds": [0, 1],
        "steps": 6,
        "warmup_steps": 2,
        "batch_size": 16,
        "data": {"n_train": 64, "n_test": 32, "n_features": 8, "n_classes": 4},
        "mlp": {"hidden": 16, "layers": 1},
    },
}
# what the stages must record (set for the pipeline's processes)
PIPELINE_ENV = {
    "OMP_NUM_THREADS": "1",
    "PYTORCH_TUNABLEOP_ENABLED": "0",
    "HIP_VISIBLE_DEVICES": "",
    "CUDA_VISIBLE_DEVICES": "",
}
# every per-run file a CPU run writes -> its table (registry)
STAGE_KINDS = {name: registry.table_of(name) for name in registry.run_files(["cpu"])}


def pipeline_env() -> dict:
    return snakemake_env(PIPELINE_ENV)


def snakemake(workdir: Path, *args: str, timeout: int = 1200) -> subprocess.CompletedProcess:
    return run_snakemake(
        workdir, "--configfile", str(workdir / "config.yaml"), *args, env=PIPELINE_ENV, timeout=timeout
    )


def mini_run(tmp_path_factory, name: str, config: dict | None = None) -> Path:
    """The working directory of a complete pipeline run of ``config`` (MINI), made once per name per session."""
    work = tmp_path_factory.getbasetemp() / f"mini-pipeline-{name}"
    done = work / "DONE"
    if not done.exists():
        work.mkdir(parents=True, exist_ok=True)
        (work / "config.yaml").write_text(yaml.safe_dump(config or MINI))
        proc = snakemake(work, "--cores", "2")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
        done.write_text("ok\n")
    return work


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return mini_run(tmp_path_factory, "first")


def stage_csvs(run: Path) -> dict[str, pd.DataFrame]:
    return {name: pd.read_csv(run / name, keep_default_na=False) for name in STAGE_KINDS}


# ---- unit: row_provenance ---------------------------------------------------------------------


def test_row_provenance_columns_and_values(monkeypatch):
    import torch

    monkeypatch.setenv("ACCELBENCH_IMAGE_ID", "sha256:abc")
    row = row_provenance({"run": "r1", "config_hash": "h1", "git_commit": "c1"}, "matmul")
    assert list(row) == list(registry.PROVENANCE)
    assert row["run_id"] == "r1" and row["config_hash"] == "h1" and row["git_commit"] == "c1"
    assert row["host"] == socket.gethostname() and row["accelbench_version"] == accelbench.__version__
    assert row["torch_version"] == torch.__version__
    assert row["cuda_version"] == (torch.version.cuda or "") and row["hip_version"] == (torch.version.hip or "")
    assert row["container_image"] == "sha256:abc"
    assert row["method_version"] == registry.STAGES["matmul"].method_version >= 1


def test_git_commit_marks_uncommitted_changes(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], check=True)
    (repo / "f.txt").write_text("a\n")
    subprocess.run(git + ["add", "f.txt"], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    sha = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    env = {k: v for k, v in os.environ.items() if k != "ACCELBENCH_GIT_COMMIT"}
    code = f"from accelbench.run.provenance import git_commit; print(git_commit({str(repo)!r}))"
    out = lambda: subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout.strip()
    assert out() == sha
    (repo / "f.txt").write_text("b\n")
    assert out() == sha + "+dirty"
    assert git_commit(tmp_path / "not-a-repo") in ("unknown", os.environ.get("ACCELBENCH_GIT_COMMIT"))


# ---- a real run ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_every_row_of_every_stage_carries_provenance(run_dir):
    import torch

    run = run_dir / "results" / "mini"
    info = json.loads((run / "run.json").read_text())
    assert info["config"] == with_defaults(MINI)
    assert info["config_hash"] == config_hash(with_defaults(MINI))
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert info["git_commit"] == git_commit(REPO), (info["git_commit"], git_commit(REPO))
    if head:
        assert info["git_commit"].startswith(head)
    expected = {
        "run_id": "mini",
        "host": socket.gethostname(),
        "accelbench_version": accelbench.__version__,
        "git_commit": info["git_commit"],
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda or "",
        "hip_version": torch.version.hip or "",
        "container_image": "",
        "config_hash": info["config_hash"],
        "backend": "cpu",
        "device": "cpu",
    }
    for name, df in stage_csvs(run).items():
        assert len(df) > 0, name
        missing = [c for c in list(registry.PROVENANCE) + list(registry.DEVICE) if c not in df.columns]
        assert not missing, f"{name} lacks {missing}"
        for col, value in expected.items():
            bad = df[df[col].astype(str) != str(value)]
            assert bad.empty, f"{name}: {col} should be {value!r}, got {sorted(set(bad[col].astype(str)))}"
        assert (df["device_name"].astype(str).str.len() > 0).all(), f"{name}: empty device_name"
    # any other CSV a stage adds later must carry them too
    for path in run.glob("*.csv"):
        header = pd.read_csv(path, nrows=0).columns
        assert set(registry.PROVENANCE) <= set(header), path.name


@pytest.mark.slow
def test_aggregated_tables_keep_provenance(run_dir):
    agg = run_dir / "results" / "aggregate"
    manifest = json.loads((agg / "manifest.json").read_text())
    assert manifest["complete"] is True, manifest.get("problems")
    for table in ("matmul", "warmup", "amp_steps", "amp_trials", "amp_summary"):
        df = pd.read_csv(agg / f"{table}.csv", keep_default_na=False)
        assert len(df) > 0, table
        for col in list(registry.PROVENANCE):
            assert col in df.columns, (table, col)
        assert set(df["run_id"].astype(str)) == {"mini"}, table
        assert (df["config_hash"].astype(str).str.len() == 16).all(), table


@pytest.mark.slow
def test_devices_json_records_environment_and_versions(run_dir):
    import torch

    devices = json.loads((run_dir / "results" / "mini" / "devices.json").read_text())
    env = devices["env"]
    for var, value in PIPELINE_ENV.items():
        assert var in env, f"devices.json env lacks {var}"
        assert env[var] == value, (var, env[var], value)
    packages = devices["packages"]
    assert packages["torch"] == torch.__version__
    for name in ("snakemake", "numpy", "pandas"):
        assert packages.get(name), name
    info = json.loads((run_dir / "results" / "mini" / "run.json").read_text())
    for key in (
        "run_id",
        "host",
        "accelbench_version",
        "git_commit",
        "config_hash",
        "torch_version",
        "cuda_version",
        "hip_version",
        "container_image",
        "python_version",
    ):
        assert key in devices, key
    assert devices["config_hash"] == info["config_hash"] and devices["git_commit"] == info["git_commit"]
    assert devices["run_id"] == "mini" and devices["host"] == socket.gethostname()
