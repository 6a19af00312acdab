# Helpers shared by all .smk files: config check, run id, paths, threads, resources, launcher.
import json
import os
import re
import socket
import subprocess
import sys

from snakemake.utils import validate

sys.path.insert(0, os.path.join(workflow.basedir, "src"))
from accelbench.config import ConfigError, check as check_config  # noqa: E402


# ---- config: checked before any job, one line naming the key on error ---------------
try:
    check_config(config)
except ConfigError as exc:
    sys.exit(f"accelbench: config error: {exc}")
validate(config, schema="../schemas/config.schema.yaml")  # fills defaults


def _run_id():
    if config["run"]:
        return config["run"]
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname().split(".")[0]) or "host"
    return f"{host}-{config['container']['runtime']}"


RUN = _run_id()
RESULTS = "results"
RUN_DIR = f"{RESULTS}/{RUN}"
BACKENDS = config["backends"]
GPU_BACKENDS = [b for b in BACKENDS if b in ("cuda", "rocm")]
ACCEL_BACKENDS = [b for b in BACKENDS if b != "cpu"]
REPORT_HTML = f"{RESULTS}/report.html"


def git_commit():
    try:
        out = subprocess.run(
            ["git", "-C", workflow.basedir, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        return out.stdout.strip() or "unknown"
    except Exception:
        return "unknown"


GIT_COMMIT = git_commit()


def bench_threads(wildcards):
    """CPU stages measure with every core they are granted (snakemake caps this at --cores);
    accelerator stages need one host thread to feed the device."""
    if wildcards.backend != "cpu":
        return 1
    return config["cpu_threads"] or (os.cpu_count() or 1)


def gpu_count(wildcards):
    """SLURM's --gpus / local --resources gpu=N: one GPU stage holds the GPUs it sweeps."""
    return 1 if wildcards.backend in ("cuda", "rocm") else 0


def gpu_model(wildcards):
    """SLURM plugin resource gpu_model (-> sbatch --gpus=<model>:1) for GPU stages when
    config cluster.gpu_model names one; None (unset) otherwise, so CPU stages never ask for a GPU."""
    return (config["cluster"]["gpu_model"] or None) if gpu_count(wildcards) else None


# detect runs where the GPU stages run, so devices.json describes their GPUs, not a CPU node's.
DETECT_GPUS = 1 if GPU_BACKENDS else 0


def launcher(wildcards):
    """Argv prefix that runs the CLI in the backend's Docker/Podman image (empty on the host
    and under Apptainer, which snakemake drives itself). Built and quoted by accelbench.containers."""
    from accelbench.containers import launch_prefix

    return launch_prefix(config, wildcards.backend, workdir=workflow.basedir)


def run_files(kind):
    """This run's per-backend outputs of one stage."""
    if kind == "transfer":
        return expand(f"{RUN_DIR}/transfer_{{backend}}.csv", backend=ACCEL_BACKENDS)
    if kind == "amp":
        return expand(f"{RUN_DIR}/amp_{{backend}}_summary.csv", backend=BACKENDS)
    return expand(f"{RUN_DIR}/{kind}_{{backend}}.csv", backend=BACKENDS)
