"""Containers without a container engine: the exact docker/podman argv for every runtime x backend,
quoting of hostile paths, uid/gid, environment, image records (with fake docker/podman executables),
the Containerfiles' pinned bases and build arguments, and which image every rule runs in under each runtime
(snakemake dry runs, and a real run through a stand-in `apptainer` that records how snakemake calls it).

The GPU flags are checked as argv only: **untested on hardware** (no GPU here).
tests/test_podman.py builds and runs the CPU image for real.
"""

from __future__ import annotations

import copy
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from accelbench import registry
from accelbench.run import containers as C
from accelbench.run.config import ConfigError, with_defaults
from tiny_config import PLACEMENT_TINY, TINY

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
BENCH_RULES = tuple(s.rule for s in registry.DEVICE_STAGES)


def config_with(**container) -> dict:
    c = with_defaults({"backends": ["cpu"]})
    c["container"].update(container)
    return c


# ---- the argv, exactly -----------------------------------------------------------------------------------

COMMON_ENV = [
    "--env",
    "ACCELBENCH_IMAGE=localhost/accelbench-{b}:latest",
    "--env",
    "ACCELBENCH_IMAGE_ID=abc123",
    "--env",
    "HOME=/tmp",
    "--env",
    "MKL_NUM_THREADS=4",
    "--env",
    "OMP_NUM_THREADS=4",
]
GPU = {
    ("docker", "cpu"): [],
    ("podman", "cpu"): [],
    ("docker", "cuda"): ["--gpus", "all", "--ipc=host"],
    ("podman", "cuda"): ["--device", "nvidia.com/gpu=all", "--ipc=host"],
    ("docker", "rocm"): [
        "--device",
        "/dev/kfd",
        "--device",
        "/dev/dri",
        "--group-add",
        "video",
        "--group-add",
        "109",
        "--security-opt",
        "seccomp=unconfined",
        "--ipc=host",
    ],
    ("podman", "rocm"): [
        "--device",
        "/dev/kfd",
        "--device",
        "/dev/dri",
        "--group-add",
        "video",
        "--group-add",
        "109",
        "--security-opt",
        "seccomp=unconfined",
        "--ipc=host",
    ],
}


@pytest.mark.parametrize("runtime,backend", sorted(GPU))
def test_run_argv_exact(runtime, backend):
    argv = C.run_argv(
        runtime,
        backend,
        "abc123",
        ["accelbench", "matmul", "--backend", backend],
        workdir="/work/bench",
        uid=1000,
        gid=100,
        threads=4,
        image_id="abc123",
        image_ref=f"localhost/accelbench-{backend}:latest",
        device_gids=(109, 109),
    )
    podman_only = ["--security-opt", "label=disable"] if runtime == "podman" else []
    env = [e.format(b=backend) for e in COMMON_ENV]
    expected = [
        runtime,
        "run",
        "--rm",
        "--init",
        "--uts=host",
        *podman_only,
        "--user",
        "1000:100",
        *GPU[(runtime, backend)],
        "-v",
        "/work/bench:/work/bench",
        "-w",
        "/work/bench",
        "--env",
        f"ACCELBENCH_CONTAINER_RUNTIME={runtime}",
        *env,
        "abc123",
        "accelbench",
        "matmul",
        "--backend",
        backend,
    ]
    assert argv == expected


def test_rootless_podman_keeps_the_host_uid_instead_of_user():
    argv = C.run_argv("podman", "cpu", "img", ["true"], workdir="/w", uid=1000, gid=1000, rootless=True)
    assert "--userns=keep-id" in argv and "--user" not in argv
    # rootless only changes podman; docker always gets --user
    argv = C.run_argv("docker", "cpu", "img", ["true"], workdir="/w", uid=1000, gid=1000, rootless=True)
    assert argv[argv.index("--user") + 1] == "1000:1000" and "--userns=keep-id" not in argv


@pytest.mark.parametrize("runtime", ["none", "apptainer"])
@pytest.mark.parametrize("backend", ["cpu", "cuda", "rocm"])
def test_no_prefix_on_the_host_and_under_apptainer(runtime, backend):
    assert C.launch_prefix(config_with(runtime=runtime), backend, "/w", run_dir="results/r", threads=2) == ""


@pytest.mark.parametrize("runtime", ["docker", "podman"])
def test_launch_prefix_exact(runtime):
    prefix = C.launch_prefix(config_with(runtime=runtime), "cuda", "/w", run_dir="results/r1", threads=3)
    assert prefix == ("accelbench container exec --record results/r1/images/cuda.json --workdir /w --threads 3 --")


def test_device_node_groups_come_from_the_device_nodes(tmp_path):
    (tmp_path / "dri").mkdir()
    root = os.geteuid() == 0  # only root may give files other groups; others' files carry their own group
    for name, gid in (("kfd", 4242), ("dri/renderD128", 4243), ("dri/renderD129", 4243), ("dri/card0", 4244)):
        (tmp_path / name).touch()
        if root:
            os.chown(tmp_path / name, -1, gid)
    assert C.device_node_gids(tmp_path) == ((4242, 4243) if root else (os.getgid(),))
    assert C.device_node_gids(tmp_path / "absent") == ()


def test_mounts_results_folder_linked_elsewhere(tmp_path):
    work, elsewhere = tmp_path / "work", tmp_path / "big-disk" / "results"
    elsewhere.mkdir(parents=True)
    work.mkdir()
    (work / "results").symlink_to(elsewhere)
    assert C.extra_mounts(str(work)) == (str(elsewhere),)
    argv = C.run_argv(
        "docker", "cpu", "img", ["true"], workdir=str(work), uid=0, gid=0, mounts=C.extra_mounts(str(work))
    )
    assert argv[argv.index("-w") - 3 : argv.index("-w")] == [f"{work}:{work}", "-v", f"{elsewhere}:{elsewhere}"]
    (work / "results").unlink()
    (work / "results").mkdir()
    assert C.extra_mounts(str(work)) == ()


# ---- quoting: hostile paths and values never reach a shell unquoted -----------------------------------

HOSTILE = "we ird 'q' \"d\" $(touch PWNED) ; `touch PWNED2` & |x| *"


def shell_words(cmd: str, cwd: Path) -> list[str]:
    """The words a POSIX shell makes of ``cmd`` (each printed NUL-terminated), run in ``cwd``."""
    out = subprocess.run(["bash", "-c", "printf '%s\\0' " + cmd], cwd=cwd, capture_output=True, check=True)
    return out.stdout.decode().split("\0")[:-1]


def test_hostile_workdir_is_one_word_for_the_shell(tmp_path):
    work = tmp_path / HOSTILE
    work.mkdir()
    prefix = C.launch_prefix(config_with(runtime="podman"), "cpu", str(work), run_dir="results/r", threads=2)
    words = shell_words(prefix, tmp_path)
    assert words == [
        "accelbench",
        "container",
        "exec",
        "--record",
        "results/r/images/cpu.json",
        "--workdir",
        str(work),
        "--threads",
        "2",
        "--",
    ]
    assert not list(tmp_path.rglob("PWNED*"))


def test_hostile_workdir_survives_the_argv_cli(tmp_path, capsys):
    work = tmp_path / HOSTILE
    work.mkdir()
    from accelbench.cli import main

    assert (
        main(
            [
                "container",
                "argv",
                "--runtime",
                "docker",
                "--backend",
                "cpu",
                "--image",
                "img:1",
                "--workdir",
                str(work),
                "--threads",
                "1",
                "--",
                "accelbench",
                "detect",
                "--out",
                "a b.json",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out.strip()
    words = shell_words(printed, tmp_path)
    assert words[words.index("-w") + 1] == str(work)
    assert words[words.index("-v") + 1] == f"{work}:{work}"
    assert words[-4:] == ["accelbench", "detect", "--out", "a b.json"]
    assert not list(tmp_path.rglob("PWNED*"))


@pytest.mark.parametrize("path", ["/a:b", "/a,b", "/a\nb", "relative/dir"])
def test_unmountable_workdir_is_refused_in_one_line(path):
    with pytest.raises(ConfigError) as err:
        C.run_argv("docker", "cpu", "img", ["true"], workdir=path, uid=0, gid=0)
    assert "\n" not in str(err.value) and "workdir" in str(err.value)


@pytest.mark.parametrize("image", ["img; rm -rf /", "-v", "--privileged", "a b", "$(id)", "img`x`", ""])
def test_hostile_image_is_refused(image):
    with pytest.raises(ConfigError, match="image"):
        C.run_argv("podman", "cpu", image, ["true"], workdir="/w", uid=0, gid=0)
    with pytest.raises(ConfigError):
        C.build_argv("podman", "cpu", image, context="/repo")


@pytest.mark.parametrize("args", [{"BASE_IMAGE": "x; rm -rf /"}, {"BAD-NAME": "x"}, {"A": "has space"}, {"A": "$(id)"}])
def test_hostile_build_args_are_refused(args):
    with pytest.raises(ConfigError, match="build_args"):
        C.build_argv("docker", "cpu", "img:1", context="/repo", build_args=args)


def test_env_values_are_single_words_and_bad_names_refused():
    argv = C.run_argv(
        "docker", "cpu", "img", ["true"], workdir="/w", uid=0, gid=0, env={"CUDA_VISIBLE_DEVICES": "0, 1 ;x"}
    )
    assert "CUDA_VISIBLE_DEVICES=0, 1 ;x" in argv
    with pytest.raises(ConfigError, match="variable name"):
        C.run_argv("docker", "cpu", "img", ["true"], workdir="/w", uid=0, gid=0, env={"A B": "1"})
    with pytest.raises(ConfigError):
        C.run_argv("docker", "cpu", "img", ["true"], workdir="/w", uid=-1, gid=0)
    with pytest.raises(ConfigError, match="threads"):
        C.run_argv("docker", "cpu", "img", ["true"], workdir="/w", uid=0, gid=0, threads=0)


def test_only_relevant_host_variables_pass():
    environ = {
        "CUDA_VISIBLE_DEVICES": "2,3",
        "SLURM_JOB_ID": "77",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t",
        "HOME": "/root",
        "OMP_NUM_THREADS": "64",
        "HIP_VISIBLE_DEVICES": "",
    }
    assert C.host_env(environ) == {"CUDA_VISIBLE_DEVICES": "2,3", "SLURM_JOB_ID": "77"}


def test_record_argv_uses_this_users_ids(monkeypatch):
    monkeypatch.setattr(os, "getuid", lambda: 4321)
    monkeypatch.setattr(os, "getgid", lambda: 99)
    rec = {"runtime": "docker", "backend": "cpu", "image": "localhost/accelbench-cpu:latest", "id": "sha256:ff"}
    argv = C.record_argv(rec, ["true"], "/w", 2, environ={})
    assert argv[argv.index("--user") + 1] == "4321:99"
    assert argv[-2:] == ["sha256:ff", "true"]  # runs the recorded id, not the (movable) tag
    assert "ACCELBENCH_IMAGE_ID=sha256:ff" in argv and "ACCELBENCH_IMAGE=localhost/accelbench-cpu:latest" in argv
    monkeypatch.setattr(os, "geteuid", lambda: 4321)
    argv = C.record_argv({**rec, "runtime": "podman"}, ["true"], "/w", 2, environ={})
    assert "--userns=keep-id" in argv and "--user" not in argv


# ---- config checks ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("runtime", ["docker", "podman", "apptainer"])
@pytest.mark.parametrize("backend", ["mps", "xla"])
def test_backend_without_image_is_refused_with_a_container_runtime(runtime, backend):
    c = config_with(runtime=runtime)
    c["backends"] = ["cpu", backend]
    with pytest.raises(ConfigError) as err:
        C.check_config(c)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("backends:") and "cpu, cuda, rocm" in msg


def test_backend_without_image_is_fine_on_the_host():
    c = config_with(runtime="none")
    c["backends"] = ["cpu", "mps", "xla"]
    C.check_config(c)


def test_schema_refuses_hostile_container_settings():
    from accelbench.run.config import check

    for bad in (
        {"images": {"cpu": "x;rm"}},
        {"build_args": {"cpu": {"A": "x y"}}},
        {"build_args": {"mps": {}}},
        {"build": "yes"},
        {"runtime": "singularity"},
    ):
        with pytest.raises(ConfigError) as err:
            check({"container": bad})
        assert str(err.value).startswith("container."), str(err.value)
    check(
        {
            "container": {
                "runtime": "apptainer",
                "images": {"cpu": "/shared/images/accelbench-cpu.sif"},
                "build_args": {"cpu": {"TORCH_INDEX_URL": "https://download.pytorch.org/whl/cpu"}},
            }
        }
    )


# ---- apptainer: the image each rule declares -----------------------------------------------------------


@pytest.mark.parametrize(
    "image,uri",
    [
        ("localhost/accelbench-cpu:latest", "docker://localhost/accelbench-cpu:latest"),
        (
            "ghcr.io/org/accelbench-cuda:0.1@sha256:" + "a" * 64,
            "docker://ghcr.io/org/accelbench-cuda:0.1@sha256:" + "a" * 64,
        ),
        ("docker://rocm/pytorch:latest", "docker://rocm/pytorch:latest"),
        ("oras://ghcr.io/org/x:1", "oras://ghcr.io/org/x:1"),
        ("/shared/images/accelbench-cpu.sif", "/shared/images/accelbench-cpu.sif"),
        ("images/accelbench-cpu.sif", "images/accelbench-cpu.sif"),
        ("./x.sif", "./x.sif"),
    ],
)
def test_apptainer_uri(image, uri):
    assert C.apptainer_uri(image) == uri


@pytest.mark.parametrize("runtime", ["none", "docker", "podman"])
def test_no_apptainer_image_unless_apptainer(runtime):
    assert C.apptainer_image(config_with(runtime=runtime), "cuda") is None


def test_apptainer_image_per_backend():
    c = config_with(
        runtime="apptainer", images={"cpu": "/i/cpu.sif", "cuda": "reg.io/acc-cuda:1", "rocm": "/i/rocm.sif"}
    )
    assert [C.apptainer_image(c, b) for b in ("cpu", "cuda", "rocm")] == [
        "/i/cpu.sif",
        "docker://reg.io/acc-cuda:1",
        "/i/rocm.sif",
    ]


# ---- image records: fake docker/podman executables ------------------------------------------------------

FAKE_ENGINE = r"""#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_ENGINE_LOG"], "a") as fh:
    fh.write(json.dumps([os.path.basename(sys.argv[0])] + args) + "\n")
state = os.environ["FAKE_ENGINE_STATE"]
if args[0] == "build":
    with open(args[args.index("--iidfile") + 1], "w") as fh:
        fh.write("0123abcd" * 8)
    open(os.path.join(state, "present"), "w").close()
elif args[:2] == ["image", "inspect"]:
    if not os.path.exists(os.path.join(state, "present")):
        print("Error: no such image", file=sys.stderr); sys.exit(125)
    print(json.dumps([{"Id": "0123abcd" * 8, "Digest": "sha256:" + "d" * 64, "RepoDigests": [],
                       "Created": "2026-01-01T00:00:00Z", "Labels": {"org.opencontainers.image.version": "0.1.0"}}]))
elif args[0] == "pull":
    open(os.path.join(state, "present"), "w").close()
"""


@pytest.fixture
def fake_engine(tmp_path, monkeypatch):
    bindir, state = tmp_path / "fakebin", tmp_path / "state"
    bindir.mkdir()
    state.mkdir()
    for name in ("docker", "podman"):
        p = bindir / name
        p.write_text(FAKE_ENGINE)
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "engine.log"
    monkeypatch.setenv("FAKE_ENGINE_LOG", str(log))
    monkeypatch.setenv("FAKE_ENGINE_STATE", str(state))
    monkeypatch.setenv("PATH", f"{bindir}:{BIN}:{os.environ['PATH']}")

    def calls():
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return calls


def write_run_file(path: Path, container: dict) -> Path:
    config = with_defaults({"backends": ["cpu"], "container": container})
    path.write_text(json.dumps({"run": "r", "config": config, "config_hash": "h", "git_commit": "c0ffee+dirty"}))
    return path


@pytest.mark.parametrize("runtime", ["docker", "podman"])
def test_build_records_the_built_image(tmp_path, fake_engine, runtime):
    run = write_run_file(
        tmp_path / "run.json",
        {
            "runtime": runtime,
            "images": {"cpu": "localhost/ab-cpu:t"},
            "build_args": {"cpu": {"TORCH_VERSION": "2.13.0+cpu"}},
        },
    )
    out = tmp_path / "images" / "cpu.json"
    proc = subprocess.run(
        [
            str(BIN / "accelbench"),
            "container",
            "build",
            "--run-file",
            str(run),
            "--backend",
            "cpu",
            "--context",
            str(REPO),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(out.read_text())
    assert rec["id"] == "0123abcd" * 8 and rec["image"] == "localhost/ab-cpu:t" and rec["built"] is True
    assert rec["runtime"] == runtime and rec["backend"] == "cpu" and rec["digest"] == "sha256:" + "d" * 64
    assert rec["build_args"]["TORCH_VERSION"] == "2.13.0+cpu" and rec["build_args"]["VCS_REF"] == "c0ffee"
    build = fake_engine()[0]
    iid = build[build.index("--iidfile") + 1]
    # a checkout cloned from a public remote labels the image with it (a local path is no source URL)
    source = C.default_build_args(REPO).get("SOURCE_URL")
    assert build == [
        runtime,
        "build",
        "--network=host",
        "-f",
        str(REPO / "containers/cpu/Containerfile"),
        "-t",
        "localhost/ab-cpu:t",
        "--build-arg",
        "ACCELBENCH_VERSION=0.1.0",
        "--build-arg",
        "VCS_REF=c0ffee",
        *(["--build-arg", f"SOURCE_URL={source}"] if source else []),
        "--build-arg",
        "TORCH_VERSION=2.13.0+cpu",
        "--iidfile",
        iid,
        str(REPO),
    ]
    assert fake_engine()[1] == [runtime, "image", "inspect", "0123abcd" * 8]


def test_build_false_takes_the_image_and_pulls_it_if_missing(tmp_path, fake_engine):
    run = write_run_file(
        tmp_path / "run.json", {"runtime": "podman", "build": False, "images": {"cpu": "ghcr.io/org/accelbench-cpu:1"}}
    )
    proc = subprocess.run(
        [str(BIN / "accelbench"), "container", "build", "--run-file", str(run), "--backend", "cpu"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["built"] is False
    assert [c[:2] for c in fake_engine()] == [
        ["podman", "image"],
        ["podman", "pull"],
        ["podman", "image"],
        ["podman", "image"],
    ]
    assert not any(c[1] == "build" for c in fake_engine())


def test_exec_runs_the_recorded_image_with_env(tmp_path, fake_engine, monkeypatch):
    rec = tmp_path / "cpu.json"
    rec.write_text(
        json.dumps({"runtime": "podman", "backend": "cpu", "image": "localhost/ab-cpu:t", "id": "feed" * 16})
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "nope")
    proc = subprocess.run(
        [
            str(BIN / "accelbench"),
            "container",
            "exec",
            "--record",
            str(rec),
            "--workdir",
            str(tmp_path),
            "--threads",
            "3",
            "--",
            "accelbench",
            "detect",
            "--out",
            "x y.json",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    (call,) = fake_engine()
    assert call[:2] == ["podman", "run"]
    env = {call[i + 1].split("=", 1)[0]: call[i + 1].split("=", 1)[1] for i, a in enumerate(call) if a == "--env"}
    assert env["ACCELBENCH_IMAGE_ID"] == "feed" * 16 and env["ACCELBENCH_IMAGE"] == "localhost/ab-cpu:t"
    assert env["OMP_NUM_THREADS"] == "3" and env["CUDA_VISIBLE_DEVICES"] == "1"
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert call[-5:] == ["feed" * 16, "accelbench", "detect", "--out", "x y.json"]


def test_exec_without_record_fails_in_one_line(tmp_path):
    proc = subprocess.run(
        [str(BIN / "accelbench"), "container", "exec", "--record", str(tmp_path / "none.json"), "--", "true"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "does not exist" in proc.stderr


# ---- Containerfiles ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "backend,base",
    [
        ("cpu", "docker.io/library/python:3.11."),
        ("cuda", "docker.io/pytorch/pytorch:"),
        ("cuda", "-cudnn9-runtime@sha256:"),
        ("rocm", "docker.io/rocm/pytorch:rocm"),
    ],
)
def test_containerfiles_use_pinned_official_bases(backend, base):
    text = (REPO / "containers" / backend / "Containerfile").read_text()
    default = next(line for line in text.splitlines() if line.startswith("ARG BASE_IMAGE="))
    assert base in default and "@sha256:" in default and ":latest" not in default
    assert "FROM ${BASE_IMAGE}" in text


@pytest.mark.parametrize("backend", ["cpu", "cuda", "rocm"])
def test_containerfiles_install_accelbench_with_overridable_sources_and_labels(backend):
    text = (REPO / "containers" / backend / "Containerfile").read_text()
    for needed in (
        "ARG PIP_INDEX_URL=",
        "--mount=type=bind,source=containers/wheels,target=/wheels",
        "pip install --find-links /wheels --no-deps /opt/accelbench",
        "ACCELBENCH_IN_CONTAINER=1",
        'org.opencontainers.image.source="${SOURCE_URL}"',
        'org.opencontainers.image.version="${ACCELBENCH_VERSION}"',
        'org.opencontainers.image.revision="${VCS_REF}"',
    ):
        assert needed in text, needed
    if backend == "cpu":
        assert "ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in text
    else:  # the image's own GPU build of torch is pinned, never replaced
        assert "torch==' + torch.__version__" in text and "-c /opt/accelbench/constraints.txt" in text


def test_ignore_files_agree_and_keep_the_context_small():
    def rules(name):
        return [line for line in (REPO / name).read_text().splitlines() if line and not line.startswith("#")]

    assert rules(".containerignore") == rules(".dockerignore")
    assert rules(".containerignore")[0] == "*"
    assert {"!pyproject.toml", "!README.md", "!src", "!containers/wheels"} <= set(rules(".containerignore"))
    assert (REPO / "containers" / "wheels" / ".gitignore").read_text().strip().endswith("*.whl")


# ---- the workflow: which rule runs where, per runtime ----------------------------------------------------


def snakemake(work: Path, config: dict, *args: str, env: dict | None = None, timeout: int = 300):
    from workflow_runner import run_snakemake

    return run_snakemake(work, *args, config=config, env=env, timeout=timeout)


def dry_run_commands(out: str) -> dict[str, list[str]]:
    """rule -> its shell commands, from `snakemake -n -p` output."""
    cmds: dict[str, list[str]] = {}
    rule = None
    for line in out.splitlines():
        if line.startswith(("rule ", "localrule ")):
            rule = line.split()[1].rstrip(":")
        elif line.startswith("Shell command:") and rule and rule != "all":
            cmds.setdefault(rule, []).append(line.removeprefix("Shell command:").strip())
    return cmds


def tiny(**container) -> dict:
    c = copy.deepcopy(TINY)
    c["backends"] = ["cpu"]
    c["container"] = container
    return c


def test_runtime_none_runs_everything_on_the_host(tmp_path):
    proc = snakemake(tmp_path, tiny(runtime="none"), "-n", "-p", "--cores", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    cmds = dry_run_commands(proc.stdout)
    assert "container_image" not in cmds
    assert all(c.startswith("accelbench ") for cs in cmds.values() for c in cs), cmds
    assert "Singularity containers: ignored" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("runtime", ["docker", "podman"])
def test_engine_runtime_builds_the_image_first_and_runs_the_stages_in_it(tmp_path, runtime):
    config = tiny(runtime=runtime)
    config["backends"] = ["cpu", "cuda"]
    proc = snakemake(tmp_path, config, "-n", "-p", "--cores", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    cmds = dry_run_commands(proc.stdout)
    assert sorted(cmds["container_image"]) == sorted(
        f"accelbench container build --run-file results/tiny/run.json --backend {b} --context {REPO}"
        f" --out results/tiny/images/{b}.json > results/tiny/logs/image_{b}.log 2>&1"
        for b in ("cpu", "cuda")
    )
    # detect runs in the GPU backend's image (where the GPU stages run); every benchmark in its backend's
    for cmd in cmds["detect"]:
        assert cmd.startswith(
            f"accelbench container exec --record results/tiny/images/cuda.json --workdir {tmp_path}"
            " --threads 1 -- accelbench detect "
        )
    for rule in BENCH_RULES:
        for cmd in cmds[rule]:
            backend = cmd.split("--backend ")[1].split()[0]
            assert cmd.startswith(f"accelbench container exec --record results/tiny/images/{backend}.json"), cmd
    for rule in ("run_info", "aggregate", "plots", "report"):
        assert all(c.startswith("accelbench ") and "container exec" not in c for c in cmds[rule])


FAKE_APPTAINER = r"""#!/usr/bin/env python3
# Stands in for apptainer: records how snakemake calls it, then runs the command on the host with the
# variable Apptainer sets in a container (APPTAINER_CONTAINER = the image).
import json, os, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("apptainer version 1.3.6"); sys.exit(0)
while args and args[0] in ("--quiet", "--silent"):
    args = args[1:]
log = open(os.environ["FAKE_APPTAINER_LOG"], "a")
if args[0] == "pull":  # pull --name NAME URL, in snakemake's image folder
    log.write(json.dumps({"pull": args[3], "name": args[2]}) + "\n")
    open(args[2], "w").close(); sys.exit(0)
assert args[0] == "exec", args
args, flags = args[1:], []
while args[0].startswith("-"):
    takes_value = args[0] in ("--home", "--bind", "-B", "--pwd", "--env", "--workdir")
    flags.append(args[:2] if takes_value else args[:1]); args = args[2:] if takes_value else args[1:]
image, command = args[0], args[1:]
log.write(json.dumps({"image": image, "flags": flags, "command": command}) + "\n"); log.close()
os.execvpe(command[0], command, dict(os.environ, APPTAINER_CONTAINER=image))
"""


@pytest.fixture
def fake_apptainer(tmp_path):
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    p = bindir / "apptainer"
    p.write_text(FAKE_APPTAINER)
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "apptainer.log"
    env = {"PATH": f"{bindir}:{BIN}:{os.environ['PATH']}", "FAKE_APPTAINER_LOG": str(log)}

    def calls():
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return env, calls


def test_apptainer_needs_the_apptainer_deployment(tmp_path):
    proc = snakemake(tmp_path, tiny(runtime="apptainer"), "-n", "--cores", "1")
    assert proc.returncode != 0
    assert "container.runtime: apptainer needs `snakemake --sdm apptainer`" in proc.stdout + proc.stderr


def test_apptainer_dag_equals_the_host_dag(tmp_path, fake_apptainer):
    env, _ = fake_apptainer
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    host = snakemake(tmp_path / "a", tiny(runtime="none"), "-n", "-p", "--cores", "2")
    app = snakemake(
        tmp_path / "b",
        tiny(runtime="apptainer", images={"cpu": "reg.example/acc-cpu:1"}),
        "-n",
        "-p",
        "--cores",
        "2",
        "--sdm",
        "apptainer",
        env=env,
    )
    assert host.returncode == 0 and app.returncode == 0, app.stderr[-3000:]
    host_cmds, app_cmds = dry_run_commands(host.stdout), dry_run_commands(app.stdout)
    assert host_cmds.keys() == app_cmds.keys()
    strip = lambda cmds: {
        r: [
            c.replace('"runtime": "none"', "")
            .replace('"runtime": "apptainer"', "")
            .replace('"cpu": "localhost/accelbench-cpu:latest"', "")
            .replace('"cpu": "reg.example/acc-cpu:1"', "")
            for c in cs
        ]
        for r, cs in cmds.items()
    }
    assert strip(host_cmds) == strip(app_cmds)
    assert "Singularity image docker://reg.example/acc-cpu:1 will be pulled." in app.stdout + app.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "profile,flag", [("apptainer-cpu", None), ("apptainer-cuda", "--nv"), ("apptainer-rocm", "--rocm")]
)
def test_apptainer_profiles_pass_their_device_flag(tmp_path, fake_apptainer, profile, flag):
    """A real snakemake run with --sdm apptainer (via the profile) through the stand-in apptainer, up to the
    warm-up: detect and warmup are exec'd in the backend's image with the profile's device flag."""
    env, calls = fake_apptainer
    sif = tmp_path / "images" / "accelbench-cpu.sif"
    sif.parent.mkdir()
    sif.write_bytes(b"")
    work = tmp_path / "work"
    work.mkdir()
    config = tiny(runtime="apptainer", images={"cpu": str(sif)})
    proc = snakemake(
        work,
        config,
        "--profile",
        str(REPO / "profiles" / profile),
        "--cores",
        "2",
        "results/tiny/warmup_cpu.csv",
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    execs = [c for c in calls() if "image" in c]
    ran = sorted(re.search(r"\baccelbench (\S+)", c["command"][-1]).group(1) for c in execs)  # bash -c '...'
    assert ran == ["detect", "warmup"]
    for c in execs:
        assert c["image"] == str(sif)
        flags = [f[0] for f in c["flags"]]
        assert (flag in flags) if flag else ("--nv" not in flags and "--rocm" not in flags)


@pytest.mark.slow
def test_apptainer_runs_every_device_stage_of_every_backend_in_its_image(tmp_path, fake_apptainer):
    """The whole pipeline with --sdm apptainer and backends cpu + cuda (absent here: its stages still run, in
    the CUDA image, and write absent rows): every device stage (registry.DEVICE_STAGES) of each backend, and
    detect, is exec'd in that backend's image; the bookkeeping rules run on the host; every row of every
    per-run file, and devices.json, records the image it was written in."""
    env, calls = fake_apptainer
    images = {b: str(tmp_path / "images" / f"accelbench-{b}.sif") for b in ("cpu", "cuda")}
    (tmp_path / "images").mkdir()
    for path in images.values():
        Path(path).write_bytes(b"")
    work = tmp_path / "work"
    work.mkdir()
    # where each stage runs is checked, not what it measures: the smallest sweeps
    config = {**copy.deepcopy(PLACEMENT_TINY), "backends": ["cpu", "cuda"]}
    config["container"] = {"runtime": "apptainer", "images": images}
    proc = snakemake(
        work, config, "--profile", str(REPO / "profiles" / "apptainer-cuda"), "--cores", "2", env=env, timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ran = {}
    for c in calls():
        if "image" in c:
            m = re.search(r"\baccelbench (\S+)", c["command"][-1])
            backend = re.search(r"--backend (\w+)", c["command"][-1])
            ran[(m.group(1), backend.group(1) if backend else None)] = c["image"]
    expected = {
        (s.name, b): images[b] for b in ("cpu", "cuda") for s in registry.DEVICE_STAGES if registry.stage_files(s, b)
    }
    expected[("detect", None)] = images["cuda"]  # detect runs where the GPU stages run
    assert ran == expected
    run = work / "results" / "tiny"
    for backend in ("cpu", "cuda"):
        for name in registry.run_files([backend]):
            rows = pd.read_csv(run / name)
            assert len(rows) > 0 and (rows["container_image"] == images[backend]).all(), (name, rows["container_image"])
    assert registry.TABLES["amp_trials"].filename("cpu") in registry.run_files(["cpu"])
    devices = json.loads((run / "devices.json").read_text())
    assert devices["container_image"] == images["cuda"]
    assert (work / "results" / "report.html").stat().st_size > 0  # made on the host


@pytest.mark.parametrize(
    "url,kept",
    [
        ("https://github.com/org/accelbench.git", True),
        ("git@github.com:org/accelbench.git", True),
        ("ssh://git@host/org/accelbench", True),
        ("/work/main", False),
        ("../accelbench", False),
    ],
)
def test_source_label_only_from_a_real_remote(tmp_path, url, kept):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "remote", "add", "origin", url], check=True)
    assert ("SOURCE_URL" in C.default_build_args(tmp_path, commit="c")) is kept
