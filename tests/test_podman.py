"""The CPU image for real, with Podman, on this machine (no registry needed).

One snakemake run of a tiny config with ``container.runtime: podman`` in a temporary copy of the
repository: the rule ``container_image`` builds ``containers/cpu/Containerfile`` on the locally made
Debian base (``.ci/setup-podman.sh``; build arguments swap the base image and take torch from the local
wheel), every benchmark stage runs inside that image, and the host aggregates and reports. Checked: the
recorded image id is the built image's id, every row and devices.json carry it, devices.json shows the
image's Python and torch (not the host's), the OCI labels, and that result files belong to the caller.

Needs podman and the base image: ``bash .ci/setup-podman.sh`` (CI runs it). Without podman this FAILS;
set ACCELBENCH_SKIP_CONTAINER_TESTS=1 to skip it on a machine that cannot have podman.
About 6-9 minutes on 2 cores (the image build is most of it).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

import accelbench
from accelbench import registry
from tiny_config import PLACEMENT_TINY
from workflow_runner import snakemake_argv

pytestmark = [pytest.mark.container, pytest.mark.slow]

if os.environ.get("ACCELBENCH_SKIP_CONTAINER_TESTS") == "1":
    pytest.skip("ACCELBENCH_SKIP_CONTAINER_TESTS=1", allow_module_level=True)

REPO = Path(__file__).resolve().parents[1]
STATE = Path(os.environ.get("ACCELBENCH_PODMAN_STATE", "/var/tmp/accelbench-podman"))
BASE = os.environ.get("ACCELBENCH_CI_BASE_IMAGE", "localhost/accelbench-ci-base:bookworm")
TAG = "localhost/accelbench-cpu:ci-test"
TORCH_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
RUN = "podman-ci"


def podman(env: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, env=env, check=check, timeout=600)


@pytest.fixture(scope="module")
def podman_env() -> dict:
    if shutil.which("podman") is None:
        pytest.fail(
            "podman is not installed: run `bash .ci/setup-podman.sh` as root "
            "(or set ACCELBENCH_SKIP_CONTAINER_TESTS=1 where podman cannot be had)"
        )
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    if "CONTAINERS_CONF" not in env and (STATE / "containers.conf").exists():
        env["CONTAINERS_CONF"] = str(STATE / "containers.conf")
    if podman(env, "image", "exists", BASE, check=False).returncode != 0:
        pytest.fail(f"base image {BASE} is missing: run `bash .ci/setup-podman.sh`")
    return env


def copy_repo(dest: Path) -> Path:
    """The repository's files (tracked and untracked, not ignored) - what a fresh clone plus edits holds."""
    listed = (
        subprocess.run(
            ["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "-z"], capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def build_args() -> dict:
    """CI's sources: the locally made base; torch from the local wheel when there is one."""
    args = {"BASE_IMAGE": BASE}
    index = os.environ.get("PIP_INDEX_URL")
    if index:
        args["PIP_INDEX_URL"] = index
    if TORCH_WHEEL.exists():
        args.update(TORCH_VERSION="2.13.0+cpu", TORCH_INDEX_URL=index or "https://pypi.org/simple")
    return args


@pytest.fixture(scope="module")
def podman_run(podman_env, tmp_path_factory):
    repo = copy_repo(tmp_path_factory.mktemp("repo"))
    if TORCH_WHEEL.exists():  # into the build context (bind-mounted by the build, never copied into the image)
        try:
            os.link(TORCH_WHEEL, repo / "containers" / "wheels" / TORCH_WHEEL.name)
        except OSError:
            shutil.copy2(TORCH_WHEEL, repo / "containers" / "wheels" / TORCH_WHEEL.name)
    work = tmp_path_factory.mktemp("work")
    config = copy.deepcopy(PLACEMENT_TINY)  # where each stage runs is checked, not what it measures
    config["run"] = RUN
    config["container"] = {
        "runtime": "podman",
        "images": {"cpu": TAG},
        "build": True,
        "build_args": {"cpu": build_args()},
    }
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        snakemake_argv(work, "--configfile", str(work / "config.yaml"), "--cores", "2", repo=repo),
        capture_output=True,
        text=True,
        env=podman_env,
        timeout=2400,
    )
    logs = work / "results" / RUN / "logs"
    detail = (
        "".join(f"\n--- {p.name}\n{p.read_text()[-2500:]}" for p in sorted(logs.glob("*.log"))) if logs.exists() else ""
    )
    assert proc.returncode == 0, proc.stderr[-4000:] + detail
    return work, podman_env


@pytest.fixture(scope="module")
def record(podman_run):
    work, _ = podman_run
    return json.loads((work / "results" / RUN / "images" / "cpu.json").read_text())


def test_record_names_the_built_image(podman_run, record):
    _, env = podman_run
    built_id = podman(env, "image", "inspect", "--format", "{{.Id}}", TAG).stdout.strip()
    assert record["id"] == built_id and record["image"] == TAG
    assert record["runtime"] == "podman" and record["built"] is True
    assert record["build_args"]["BASE_IMAGE"] == BASE
    labels = json.loads(podman(env, "image", "inspect", TAG).stdout)[0]["Labels"]
    assert labels["org.opencontainers.image.version"] == accelbench.__version__
    assert labels["org.opencontainers.image.revision"] == record["build_args"]["VCS_REF"]
    assert labels["org.opencontainers.image.base.name"] == BASE


def test_detect_ran_inside_the_image(podman_run, record):
    work, env = podman_run
    devices = json.loads((work / "results" / RUN / "devices.json").read_text())
    inside = json.loads(
        podman(
            env,
            "run",
            "--rm",
            record["id"],
            "python",
            "-c",
            "import json, os, platform, sys, torch; print(json.dumps([os.path.dirname("
            "sys.executable), platform.python_version(), torch.__version__]))",
        ).stdout
    )
    ran = [os.path.dirname(devices["python_executable"]), devices["python_version"], devices["torch_version"]]
    assert ran == inside  # the image's interpreter (/opt/venv/bin), Python and torch
    assert devices["python_executable"].startswith("/opt/venv/") and devices["python_executable"] != sys.executable
    assert devices["container_image"] == record["id"]
    assert devices["env"]["ACCELBENCH_IN_CONTAINER"] == "1"
    assert devices["env"]["ACCELBENCH_CONTAINER_RUNTIME"] == "podman"
    assert devices["env"]["OMP_NUM_THREADS"] == "1"  # the detect job's threads, passed in
    assert devices["host"] == socket.gethostname()  # --uts=host: rows name the machine, not the container


@pytest.mark.parametrize("name", registry.run_files(["cpu"]))
def test_every_row_carries_the_image_id(podman_run, record, name):
    """Every device stage (registry.DEVICE_STAGES: warmup, matmul, amp here; transfer is accelerators-only)
    ran in the image."""
    work, _ = podman_run
    rows = pd.read_csv(work / "results" / RUN / name)
    assert len(rows) > 0
    assert (rows["container_image"] == record["id"]).all(), rows["container_image"].unique()
    assert (rows["host"] == socket.gethostname()).all()


def test_host_aggregates_the_container_rows(podman_run, record):
    work, _ = podman_run
    matmul = pd.read_csv(work / "results" / "aggregate" / "matmul.csv")
    assert (matmul.loc[matmul["run_id"] == RUN, "container_image"] == record["id"]).all()
    assert (work / "results" / "report.html").stat().st_size > 0


def test_result_files_belong_to_the_caller(podman_run):
    work, _ = podman_run
    files = [p for p in (work / "results" / RUN).rglob("*") if p.is_file()]
    assert files and all(p.stat().st_uid == os.getuid() and p.stat().st_gid == os.getgid() for p in files)
