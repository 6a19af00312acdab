"""Where every row comes from: run, host, code, software, container, config.

``row_provenance`` is merged into every row every stage writes, so a CSV copied to another
machine still says what produced it.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path

from .. import __version__, registry

# The checkout this package runs from (src/accelbench/run/provenance.py -> the repository root).
CHECKOUT = Path(__file__).resolve().parents[3]

# Packages whose versions change the numbers.
RELEVANT_PACKAGES = ("torch", "torch_xla", "numpy", "pandas", "snakemake", "seaborn", "matplotlib", "jinja2", "scipy")
# Environment variables that change what is measured.
RELEVANT_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "PYTORCH_TUNABLEOP_ENABLED",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "SLURM_JOB_ID",
    "SLURMD_NODENAME",
    "ACCELBENCH_FLEET_NODE",
    "ACCELBENCH_IMAGE",
    "ACCELBENCH_IMAGE_ID",
    "APPTAINER_CONTAINER",
    "SINGULARITY_CONTAINER",
    "ACCELBENCH_IN_CONTAINER",
    "ACCELBENCH_CONTAINER_RUNTIME",
)


def git_commit(repo: str | Path | None = None) -> str:
    """The commit of the pipeline's checkout (``+dirty`` when it has uncommitted changes), or ``unknown``."""
    env = os.environ.get("ACCELBENCH_GIT_COMMIT")
    if env:
        return env
    repo = Path(repo) if repo else CHECKOUT
    try:
        sha = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except Exception:
        return "unknown"


def package_versions() -> dict[str, str | None]:
    out = {}
    for name in RELEVANT_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def container_image() -> str:
    """The image this process runs in: the id our Docker/Podman launcher passed in, or Apptainer's
    image path; empty on the host."""
    for var in ("ACCELBENCH_IMAGE_ID", "APPTAINER_CONTAINER", "SINGULARITY_CONTAINER"):
        if os.environ.get(var):
            return os.environ[var]
    return ""


def software(torch=None) -> dict:
    """Python's and torch's versions (``torch``: the module to read, a fake in tests; None: the real one)."""
    if torch is None:
        import torch  # lazy: run-info and aggregate use this module on hosts that never import torch

    return {
        "python_version": platform.python_version(),
        "torch_version": getattr(torch, "__version__", None),
        "cuda_version": getattr(torch.version, "cuda", None) or "",
        "hip_version": getattr(torch.version, "hip", None) or "",
    }


def environment() -> dict:
    return {k: os.environ.get(k) for k in RELEVANT_ENV}


def read_run_info(path: str | Path) -> dict:
    """The run file written by ``accelbench run-info``: run id, config, config hash, commit."""
    with open(path) as fh:
        return json.load(fh)


def row_provenance(run_info: dict, stage: str) -> dict:
    """The columns every row ``stage`` writes carries (``registry.PROVENANCE``)."""
    sw = software()
    return {
        "run_id": run_info["run"],
        "host": socket.gethostname(),
        "accelbench_version": __version__,
        "git_commit": run_info.get("git_commit") or git_commit(),
        "torch_version": sw["torch_version"],
        "cuda_version": sw["cuda_version"],
        "hip_version": sw["hip_version"],
        "container_image": container_image() or run_info.get("container_image", ""),
        "config_hash": run_info["config_hash"],
        "method_version": registry.method_version(stage),
    }
