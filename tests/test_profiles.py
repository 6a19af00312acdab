"""The execution profiles (profiles/local, profiles/slurm) without a cluster.

- every key of every profile is an option of the installed snakemake / SLURM plugin;
- a dry run (`snakemake -n --profile ...`, which needs no sbatch) of the real workflow shows what each
  job asks for: GPU stages gpu=1 (and gpu_model when configured), CPU stages no GPU, every benchmark
  bench=1, runtime and mem_mb everywhere;
- those resources, fed to the installed plugin's own sbatch-line builder, give --gpus only where due
  (gpu=0 adds nothing);
- the local profile's bench=1 really keeps two benchmark jobs apart (a real snakemake run of a toy
  workflow whose jobs would meet if they overlapped).

tests/test_slurm.py submits for real.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from accelbench import backends, registry
from tiny_config import TINY

REPO = Path(__file__).resolve().parents[1]
PROFILES = REPO / "profiles"
BENCH_RULES = {s.rule for s in registry.DEVICE_STAGES}
ALL_RULES = {s.rule for s in registry.STAGES.values() if s.kind != "tool"}


def load_profile(name: str) -> dict:
    return yaml.safe_load((PROFILES / name / "config.yaml").read_text())


def snakemake(workdir: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _value(text: str):
    try:
        return int(text)
    except ValueError:
        return text


def dry_run_jobs(out: str) -> list[dict]:
    """Jobs of a dry run's listing: [{'rule', 'backend', 'threads', 'resources': {...}}]."""
    jobs = []
    for block in re.split(r"\n(?=\[[^\n]*\]\n(?:local)?rule )", out):
        m = re.search(r"^(local)?rule (\w+):\n(.*?)(?:\n\S|\Z)", block, re.S | re.M)
        if not m or m.group(2) == "all":
            continue
        body = m.group(3)
        wc = re.search(r"^\s+wildcards: backend=(\w+)$", body, re.M)
        th = re.search(r"^\s+threads: (\d+)$", body, re.M)
        res = re.search(r"^\s+resources: (.*)$", body, re.M)
        resources = dict(kv.split("=", 1) for kv in res.group(1).split(", ")) if res else {}
        jobs.append(
            {
                "rule": m.group(2),
                "backend": wc.group(1) if wc else None,
                "threads": int(th.group(1)) if th else 1,
                "resources": {k: _value(v) for k, v in resources.items()},
            }
        )
    return jobs


def dry_run(tmp: Path, profile: str, **config) -> list[dict]:
    cfg = copy.deepcopy(TINY)
    cfg.update(config)
    (tmp / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = snakemake(
        tmp,
        "-n",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(tmp),
        "--configfile",
        str(tmp / "config.yaml"),
        "--profile",
        str(PROFILES / profile),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = dry_run_jobs(proc.stdout + proc.stderr)
    expected = ALL_RULES if set(cfg["backends"]) - {"cpu"} else ALL_RULES - {"transfer"}
    assert {j["rule"] for j in jobs} == expected, sorted({j["rule"] for j in jobs})
    return jobs


# ---- profile files ---------------------------------------------------------------------------------


def snakemake_options() -> set[str]:
    from snakemake.cli import get_argument_parser

    return {opt for action in get_argument_parser()._actions for opt in action.option_strings}


# executor plugins whose options the example profiles use but which are not installed here
OTHER_PLUGIN_PREFIXES = ("lsf-", "htcondor-", "cluster-generic-")


@pytest.mark.parametrize("name", sorted(p.parent.name for p in PROFILES.glob("*/config.yaml")))
def test_profile_keys_are_real_options(name):
    """A misspelt key would make snakemake refuse the profile, or (plugin keys) be ignored.
    Keys of executor plugins not installed here (the example profiles) are left out."""
    profile = load_profile(name)
    assert isinstance(profile, dict) and profile
    unknown = [k for k in profile if f"--{k}" not in snakemake_options() and not k.startswith(OTHER_PLUGIN_PREFIXES)]
    assert not unknown, f"profiles/{name}: not snakemake options: {unknown}"


def test_slurm_profile_uses_the_installed_plugin_options():
    import snakemake_executor_plugin_slurm as plugin

    settings = {"slurm-" + f.name.replace("_", "-") for f in dataclasses.fields(plugin.ExecutorSettings)}
    profile = load_profile("slurm")
    assert profile["executor"] == "slurm"
    slurm_keys = {k for k in profile if k.startswith("slurm-")}
    assert slurm_keys <= settings, slurm_keys - settings
    # works without an accounting database (sacct) and is what the plugin accepts
    assert profile["slurm-status-command"] == "squeue"
    assert profile["slurm-init-seconds-before-status-checks"] > 0
    for rule in profile.get("set-resources", {}):
        assert rule in ALL_RULES, f"set-resources names no rule of the workflow: {rule}"
    assert "gpu" not in profile.get("default-resources", {}), "a default GPU would reach CPU stages"


def test_kubernetes_profile_uses_the_installed_plugin_options():
    import snakemake_executor_plugin_kubernetes as plugin

    settings = {"kubernetes-" + f.name.replace("_", "-") for f in dataclasses.fields(plugin.ExecutorSettings)}
    profile = load_profile("kubernetes")
    assert profile["executor"] == "kubernetes"
    keys = {k for k in profile if k.startswith("kubernetes-")}
    assert keys and keys <= settings, keys - settings
    assert "gpu" not in profile.get("default-resources", {}), "the plugin makes any job with a gpu resource a GPU pod"


@pytest.fixture(scope="module")
def kubernetes_jobs(tmp_path_factory):
    """The whole pipeline planned through the Kubernetes executor (a dry run: no cluster), CPU and CUDA."""
    return dry_run(tmp_path_factory.mktemp("dry-k8s"), "kubernetes", backends=["cpu", "cuda"])


def test_kubernetes_dry_run_asks_for_gpu_pods_only_for_gpu_jobs(kubernetes_jobs):
    """Through the storage provider (fs on a shared volume), every stage is planned; the plugin turns a job's
    gpu resource into a GPU request of gpu_manufacturer's kind, so exactly the CUDA benchmarks (and detect,
    which sees every device) carry one, CPU benchmarks none."""
    from accelbench import backends

    seen = set()
    for job in kubernetes_jobs:
        res = job["resources"]
        if job["rule"] == "detect":
            assert res.get("gpu") == 1, job
            continue
        if job["rule"] not in BENCH_RULES:
            assert "gpu" not in res and "gpu_manufacturer" not in res, job
            continue
        seen.add(job["backend"])
        if job["backend"] == "cuda":
            assert res.get("gpu") == 1 and res["gpu_manufacturer"] == backends.CLASSES["cuda"].gpu_manufacturer, job
        else:
            assert "gpu" not in res and "gpu_manufacturer" not in res, job
        assert int(res["mem_mb"]) > 0 and int(res["runtime"]) > 0, job
    assert seen == {"cpu", "cuda"}


def test_local_profile_keeps_benchmarks_apart():
    profile = load_profile("local")
    limits = dict(item.split("=") for item in profile["resources"])
    assert limits == {"bench": "1", "gpu": "1"}
    assert "executor" not in profile


# ---- what each job asks for (dry runs of the real workflow) -------------------------------------------


@pytest.fixture(scope="module")
def slurm_jobs(tmp_path_factory):
    return dry_run(
        tmp_path_factory.mktemp("dry-slurm"), "slurm", backends=["cpu", "cuda"], cluster={"gpu_model": "h100"}
    )


def test_slurm_gpu_stages_ask_for_one_gpu_of_the_model(slurm_jobs):
    gpu_jobs = [j for j in slurm_jobs if j["backend"] == "cuda"]
    assert {j["rule"] for j in gpu_jobs} == BENCH_RULES
    for job in gpu_jobs + [j for j in slurm_jobs if j["rule"] == "detect"]:
        assert job["resources"].get("gpu") == 1, job
        assert job["resources"].get("gpu_model") == "h100", job


def test_slurm_cpu_stages_ask_for_no_gpu(slurm_jobs):
    cpu_jobs = [j for j in slurm_jobs if j["backend"] != "cuda" and j["rule"] != "detect"]
    assert {j["rule"] for j in cpu_jobs} == ALL_RULES - {"detect", "transfer"}
    for job in cpu_jobs:
        # unset, not gpu=0: the Kubernetes plugin takes any gpu key as a GPU request
        assert "gpu" not in job["resources"] and "gpu_model" not in job["resources"], job


def test_slurm_every_job_has_runtime_and_memory(slurm_jobs):
    for job in slurm_jobs:
        assert job["resources"]["runtime"] > 0 and job["resources"]["mem_mb"] > 0, job


def test_slurm_cpu_benchmarks_get_the_node_to_themselves(slurm_jobs):
    for job in slurm_jobs:
        # every device stage that runs on the CPU measures the CPU: it gets the node to itself
        exclusive = (
            job["rule"] in {s.rule for s in registry.DEVICE_STAGES if s.applies_to("cpu")} and job["backend"] == "cpu"
        )
        assert (job["resources"].get("slurm_extra") == "--exclusive") == exclusive, job


def test_no_gpu_anywhere_for_a_cpu_only_config(tmp_path):
    jobs = dry_run(tmp_path, "slurm", backends=["cpu"], cluster={"gpu_model": "h100"})
    for job in jobs:
        assert "gpu" not in job["resources"] and "gpu_model" not in job["resources"], job


def test_no_gpu_model_unless_configured(tmp_path):
    jobs = dry_run(tmp_path, "slurm", backends=["cpu", "rocm"])
    assert any(j["resources"].get("gpu") == 1 for j in jobs)
    assert not any("gpu_model" in j["resources"] for j in jobs)


class _Resources(dict):
    """What the plugin reads job.resources as: a mapping with attribute access."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError as exc:
            raise AttributeError(key) from exc


def sbatch_line(job: dict) -> str:
    """The installed plugin's own sbatch command line for a job with these resources."""
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    fake = SimpleNamespace(resources=_Resources(job["resources"]), threads=job["threads"], name=job["rule"])
    params = {
        "run_uuid": "u",
        "slurm_logfile": "log",
        "comment_str": "c",
        "account": "",
        "partition": " -p p",
        "workdir": "/w",
    }
    return get_submit_command(fake, params) + set_gres_string(fake)


def test_plugin_turns_the_resources_into_the_right_sbatch_flags(slurm_jobs):
    for job in slurm_jobs:
        line = sbatch_line(job)
        if job["resources"].get("gpu"):
            assert re.search(r" --gpus=h100:1(\s|$)", line), line
            assert "--ntasks=" not in line
        else:
            assert "--gpus" not in line and "--gres" not in line, line  # gpu=0: nothing, not --gpus=0
            assert " --ntasks=1" in line
        assert f" -t {job['resources']['runtime']}" in line and f" --mem {job['resources']['mem_mb']}" in line


def test_plugin_adds_no_gpu_flag_for_gpu_zero():
    """Should a user set gpu=0 (e.g. --set-resources matmul:gpu=0), sbatch gets no --gpus=0."""
    line = sbatch_line({"rule": "matmul", "threads": 2, "resources": {"gpu": 0, "runtime": 5, "mem_mb": 100}})
    assert "--gpus" not in line and "--gres" not in line and " --ntasks=1" in line, line
    line = sbatch_line({"rule": "matmul", "threads": 1, "resources": {"gpu": 1, "runtime": 5, "mem_mb": 100}})
    assert line.endswith(" --gpus=1"), line


@pytest.fixture(scope="module")
def local_jobs(tmp_path_factory):
    return dry_run(tmp_path_factory.mktemp("dry-local"), "local", backends=["cpu", "cuda"])


def test_local_every_benchmark_holds_the_bench_token(local_jobs):
    for job in local_jobs:
        assert job["resources"].get("bench", 0) == (1 if job["rule"] in BENCH_RULES else 0), job
        assert job["resources"].get("gpu", 0) == (1 if job["backend"] == "cuda" or job["rule"] == "detect" else 0), job


def test_rules_give_every_scheduler_the_memory_and_runtime(local_jobs):
    """SGE and HTCondor need memory/time under their own resource names: the rules set them per job from the
    stage's declared resources (common.smk scheduler_resources), so the example profiles list no rule."""
    for job in local_jobs:
        res = job["resources"]
        assert int(res["htcondor_request_mem_mb"]) == res["mem_mb"], job
        assert int(res["allowed_execute_duration"]) == 60 * res["runtime"], job
        assert int(res["sge_mem_per_slot"]) == max(1, res["mem_mb"] // job["threads"]), job
    for name in ("htcondor", "lsf", "sge", "kubernetes"):
        assert not load_profile(name).get("set-resources"), name


@pytest.fixture(scope="module")
def gpu_backend_jobs(tmp_path_factory):
    return dry_run(tmp_path_factory.mktemp("dry-gpus"), "local", backends=["cpu", "cuda", "rocm", "xpu", "mps"])


def test_scheduler_flags_ask_for_gpus_exactly_where_the_backend_class_says(gpu_backend_jobs):
    """The LSF, SGE, HTCondor and Kubernetes flags of every job, from the backend classes: an XPU job asks for a
    GPU as a CUDA one does; the host and MPS (no scheduler GPU) ask for none."""
    needs_gpu = {name for name, cls in backends.CLASSES.items() if cls.needs_gpu_resource}
    assert {"cuda", "rocm", "xpu"} <= needs_gpu and not {"cpu", "mps"} & needs_gpu
    seen = set()
    for job in gpu_backend_jobs:
        res, backend = job["resources"], job["backend"]
        if job["rule"] == "detect":
            assert res["request_gpus"] == 1 and res["lsf_extra"] == "-gpu num=1" and res["sge_gpu"] == "-l gpu=1"
            continue
        if job["rule"] not in BENCH_RULES:
            assert "request_gpus" not in res and not res.get("sge_gpu") and "lsf_extra" not in res, job
            continue
        asks = backend in needs_gpu
        seen.add(backend)
        assert ("request_gpus" in res) == asks, job
        assert str(res.get("lsf_extra", "")).startswith("-gpu num=") == asks, job
        assert str(res.get("sge_gpu", "")).startswith("-l gpu=") == asks, job
        assert (
            res.get("gpu_manufacturer") == backends.CLASSES[backend].gpu_manufacturer
            if asks
            else "gpu_manufacturer" not in res
        ), job
        exclusive = not backends.is_accelerator(backend)  # a benchmark of the host gets the node to itself
        assert (res.get("slurm_extra") == "--exclusive") == exclusive, job
        assert (res.get("lsf_extra") == "-x") == exclusive, job
    assert seen == {"cpu", "cuda", "rocm", "xpu", "mps"}


TOY = r"""
rule all:
    input: expand("done_{i}.txt", i=range(3))

rule bench:
    output: "done_{i}.txt"
    threads: 1
    resources: bench=1
    shell:
        # each job waits up to 3 s for another to start; two overlapping jobs meet
        "touch started_{wildcards.i}; "
        "for t in $(seq 30); do n=$(ls started_* | wc -l); "
        "if [ $n -gt $(ls done_* 2>/dev/null | wc -l | awk '{{print $1+1}}') ]; then echo met > {output}; exit 0; fi; "
        "sleep 0.1; done; echo alone > {output}"
"""


@pytest.mark.slow
@pytest.mark.parametrize("extra,overlap", [([], False), (["--resources", "bench=3"], True)])
def test_local_profile_runs_benchmarks_one_at_a_time(tmp_path, extra, overlap):
    """With the profile's bench=1 no two benchmark jobs run at once; with bench=3 (the control)
    they do, which shows the check can tell."""
    (tmp_path / "Snakefile").write_text(TOY)
    proc = snakemake(tmp_path, "--profile", str(PROFILES / "local"), "--cores", "3", *extra, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = {(tmp_path / f"done_{i}.txt").read_text().strip() for i in range(3)}
    if overlap:
        assert "met" in seen, seen
    else:
        assert seen == {"alone"}, seen
