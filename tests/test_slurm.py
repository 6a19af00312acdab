"""The pipeline through a real SLURM: a single-node cluster on localhost (.ci/slurm-up.sh: slurmctld,
slurmd, munge, no accounting database, one fake GPU as a gres on /dev/null), the tiny config with
backends [cpu, cuda], submitted with profiles/slurm.

What is checked: every job of the DAG was an sbatch job that completed; the CUDA stages asked SLURM
for a GPU (sbatch --gpus=..., TresPerJob in scontrol) and were given one (CUDA_VISIBLE_DEVICES=0 inside
the job), the CPU stages asked for none; the documented per-backend partition expression and
cluster.gpu_model reach sbatch; the report was made. The node has no real GPU: the cuda stages run
on torch's CPU build and record status=absent rows, so this proves the submission, not CUDA timings.

Needs root (it installs slurm with apt-get when missing and starts daemons). In CI it fails when
SLURM cannot be set up; ACCELBENCH_SKIP_SLURM_TESTS=1 skips it on machines where that is expected
(ignored when CI=true). The cluster is torn down afterwards (.ci/slurm-down.sh: only the daemons the
setup started) unless it was already running before the tests. 4 to 7 minutes on 2 cores.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from accelbench import registry
from tiny_config import PLACEMENT_TINY, TINY

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
BASE = Path(os.environ.get("ACCELBENCH_SLURM_BASE", "/tmp/slurm-local"))
GPU_RULES = {s.rule for s in registry.DEVICE_STAGES}  # warmup, matmul, matmul_search, membw, transfer, amp, scaling
# the device stages the slurm profile sends alone to a node for the CPU (--exclusive)
CPU_EXCLUSIVE = {s.rule for s in registry.DEVICE_STAGES if s.applies_to("cpu")}  # a CPU benchmark holds its node
GPU_PARTITION_EXPR = "'gpu' if wildcards.backend in ('cuda', 'rocm') else 'debug'"
SUBMITTED = re.compile(r"Job (\d+) has been submitted with SLURM jobid (\d+) \(log: (\S+)\)")
SBATCH = re.compile(r"^sbatch call: (sbatch .*)$", re.M)


def _tail(text: str, n: int = 4000) -> str:
    return text[-n:]


def _daemons_alive() -> bool:
    """Whether daemons recorded by an earlier .ci/slurm-up.sh are still running."""
    started = BASE / "run" / "started.pids"
    if not started.exists():
        return False
    alive = []
    for line in started.read_text().splitlines():
        name, _, pidfile = line.partition(" ")
        if name in ("slurmctld", "slurmd"):
            try:
                pid = int(Path(pidfile).read_text().strip())
                if Path(f"/proc/{pid}/comm").read_text().strip() == name:  # alive, and still that daemon
                    alive.append(name)
            except (OSError, ValueError):
                pass
    return {"slurmctld", "slurmd"} <= set(alive)


@pytest.fixture(scope="module")
def slurm_cluster():
    """Stand the cluster up with the repository's own script; tear down what this fixture started."""
    if os.environ.get("ACCELBENCH_SKIP_SLURM_TESTS") == "1" and os.environ.get("CI") != "true":
        pytest.skip("ACCELBENCH_SKIP_SLURM_TESTS=1")  # never in CI: there a missing SLURM is a failure
    if os.geteuid() != 0:
        pytest.fail(
            "the SLURM test needs root to install and start slurm "
            "(set ACCELBENCH_SKIP_SLURM_TESTS=1 to skip it on this machine)"
        )
    was_running = _daemons_alive()
    env = dict(os.environ, BASE=str(BASE), WITH_GPU="1")

    def down():
        # stops only the daemons .ci/slurm-up.sh recorded as started (and cancels their jobs)
        return subprocess.run(
            ["timeout", "-k", "10", "120", "bash", str(REPO / ".ci" / "slurm-down.sh")],
            capture_output=True,
            text=True,
            env=dict(env, PURGE="1"),
        )

    up = subprocess.run(
        ["timeout", "-k", "10", "900", "bash", str(REPO / ".ci" / "slurm-up.sh")],
        capture_output=True,
        text=True,
        env=env,
    )
    if up.returncode != 0:
        if not was_running:
            down()
        pytest.fail(f".ci/slurm-up.sh failed (rc={up.returncode}):\n{_tail(up.stdout, 2000)}\n{_tail(up.stderr)}")
    yield BASE
    if not was_running:
        proc = down()
        assert proc.returncode == 0, proc.stdout + proc.stderr


def make_profile(tmp: Path) -> Path:
    """profiles/slurm as shipped, plus what a one-node test cluster needs: short waits, kept logs,
    small memory requests (the node's RealMemory is 3/4 of this machine's), GPU stages in the
    "gpu" partition with the expression the profile documents."""
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    profile.update(
        {
            "latency-wait": 5,
            "retries": 0,
            "jobs": 4,
            "slurm-init-seconds-before-status-checks": 2,
            "slurm-keep-successful-logs": True,
            "verbose": True,  # logs every sbatch command line
        }
    )
    set_res = profile.setdefault("set-resources", {}) or {}
    profile["set-resources"] = set_res
    for rule in [st.rule for st in registry.STAGES.values() if st.kind != "tool"]:
        set_res.setdefault(rule, {})["mem_mb"] = 1000
    for rule in GPU_RULES:
        set_res[rule]["slurm_partition"] = GPU_PARTITION_EXPR
    pdir = tmp / "profile"
    pdir.mkdir(parents=True, exist_ok=True)
    (pdir / "config.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    return pdir


def run_snakemake(work: Path, profile: Path, *args: str, limit_s: int = 1500) -> subprocess.CompletedProcess:
    """snakemake in `work` through the SLURM profile, from the venv (jobs inherit this PATH:
    sbatch --export=ALL), bounded by timeout -k: the plugin can wait forever on a lost job."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", OMP_NUM_THREADS="1")
    cmd = [
        "timeout",
        "-k",
        "30",
        str(limit_s),
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(work),
        "--configfile",
        str(work / "config.yaml"),
        "--profile",
        str(profile),
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=limit_s + 120)


def scontrol_jobs(job_ids) -> dict[str, dict]:
    """`scontrol show job -o` for each id, as {id: {Key: value}} (finished jobs stay listed: MinJobAge=3600)."""
    jobs = {}
    for jid in job_ids:
        out = subprocess.run(["scontrol", "show", "job", "-o", str(jid)], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, f"scontrol show job {jid}: {out.stderr}"
        fields = dict(m.groups() for m in re.finditer(r"(\w+(?:/\w+)?)=(\S*)", out.stdout))
        jobs[str(jid)] = fields
    return jobs


def expected_job_count(stdout_stderr: str) -> int:
    """The total of snakemake's 'Job stats' table, minus the target rule `all` (it runs no job)."""
    m = re.search(r"Job stats:\n(.*?)\ntotal\s+(\d+)", stdout_stderr, re.S)
    assert m, "no 'Job stats' table in snakemake's output"
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", m.group(1), re.M))
    return int(m.group(2)) - int(counts.get("all", 0))


def parse_run(out: str) -> tuple[dict[str, str], dict[str, str]]:
    """(slurm job id -> 'rule' or 'rule:backend', slurm job id -> sbatch command line) from the
    verbose log: each submission names its SLURM log, which the sbatch call names with %j."""
    calls = {re.search(r"--output (\S+)", c).group(1): c for c in SBATCH.findall(out)}
    who, lines = {}, {}
    for _, slurm_id, log in SUBMITTED.findall(out):
        call = calls[str(Path(log).with_name("%j.log"))]
        comment = re.search(r"--comment (\S+)", call).group(1)
        m = re.fullmatch(r"rule_(\w+?)(?:_wildcards_(\w+))?", comment)
        who[slurm_id] = m.group(1) + (f":{m.group(2)}" if m.group(2) else "")
        lines[slurm_id] = call.split(" --wrap=")[0]
    assert len(who) == len(calls), (sorted(who.values()), sorted(calls))
    return who, lines


def find_key(obj, key):
    """Every value stored under `key` anywhere in a JSON document."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == key:
                yield v
            yield from find_key(v, key)
    elif isinstance(obj, list):
        for v in obj:
            yield from find_key(v, key)


@pytest.fixture(scope="module")
def slurm_run(slurm_cluster, tmp_path_factory):
    """The whole tiny pipeline, every job through sbatch."""
    work = tmp_path_factory.mktemp("slurm-run")
    config = copy.deepcopy(PLACEMENT_TINY)  # the submission is checked, not what the stages measure
    config.update(run="slurm", backends=["cpu", "cuda"])
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    profile = make_profile(work)
    proc = run_snakemake(work, profile)
    out = proc.stdout + proc.stderr
    (work / "snakemake.log").write_text(out)
    assert proc.returncode == 0, (
        f"snakemake through SLURM failed (rc={proc.returncode}; 124/137 = timed out)\n" + _tail(out, 6000)
    )
    who, lines = parse_run(out)
    return {"work": work, "out": out, "who": who, "sbatch": lines, "jobs": scontrol_jobs(who)}


def test_every_job_went_through_sbatch_and_completed(slurm_run):
    who, jobs, work = slurm_run["who"], slurm_run["jobs"], slurm_run["work"]
    device_jobs = [f"{s.rule}:{b}" for s in registry.DEVICE_STAGES for b in ("cpu", "cuda") if s.applies_to(b)]
    run_wide = ["run_info", "detect", "history", "aggregate", "plots", "report"]  # one job each per run
    assert len(who) == expected_job_count(slurm_run["out"]) == len(run_wide) + len(device_jobs), sorted(who.values())
    assert sorted(who.values()) == sorted([*run_wide, *device_jobs])
    names = {j["JobName"] for j in jobs.values()}
    assert len(names) == 1 and names.pop().startswith("accelbench_"), "one run, the profile's job name prefix"
    for jid, job in jobs.items():
        assert job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", (who[jid], job["JobState"], job["ExitCode"])
        rule, _, backend = who[jid].partition(":")
        log = work / ".snakemake" / "slurm_logs" / f"rule_{rule}" / backend / f"{jid}.log"
        assert log.exists(), f"no SLURM log {log}"


def test_gpu_stages_ask_for_a_gpu_cpu_stages_do_not(slurm_run):
    who, lines, jobs = slurm_run["who"], slurm_run["sbatch"], slurm_run["jobs"]
    for jid, name in who.items():
        rule, _, backend = name.partition(":")
        wants_gpu = backend == "cuda" or rule == "detect"  # detect runs where the GPU stages run
        line, tres = lines[jid], jobs[jid].get("TresPerJob", "")
        if wants_gpu:
            assert " --gpus=1" in line, (name, line)
            assert "gpu:1" in tres, (name, tres)
        else:
            assert "--gpus" not in line and "--gres" not in line, (name, line)
            assert "gpu" not in tres, (name, tres)
            assert " --ntasks=1" in line, (name, line)


def test_partition_expression_and_cpu_exclusivity(slurm_run):
    """The profile's documented set-resources expressions, evaluated per backend by snakemake."""
    who, lines, jobs = slurm_run["who"], slurm_run["sbatch"], slurm_run["jobs"]
    for jid, name in who.items():
        rule, _, backend = name.partition(":")
        expect = "gpu" if (rule in GPU_RULES and backend == "cuda") else "debug"
        assert jobs[jid]["Partition"] == expect, (name, jobs[jid]["Partition"])
        exclusive = rule in CPU_EXCLUSIVE and backend == "cpu"
        assert ("--exclusive" in lines[jid]) == exclusive, (name, lines[jid])


def test_jobs_ran_inside_their_allocation(slurm_run):
    """detect ran as a SLURM job holding the (fake) GPU: its environment, recorded in devices.json."""
    work, who = slurm_run["work"], slurm_run["who"]
    devices = json.loads((work / "results" / "slurm" / "devices.json").read_text())
    detect_id = next(j for j, n in who.items() if n == "detect")
    assert detect_id in set(find_key(devices, "SLURM_JOB_ID")), "devices.json was not written by the detect job"
    assert "0" in set(find_key(devices, "CUDA_VISIBLE_DEVICES")), "no GPU was bound to the detect job"


def test_report_was_made(slurm_run):
    work = slurm_run["work"]
    html = (work / "results" / "report.html").read_text()
    assert "<html" in html.lower() and "data:image/png;base64," in html
    cpu = pd.read_csv(work / "results" / "slurm" / "matmul_cpu.csv")
    assert (cpu["status"] != "absent").all() and len(cpu) > 0
    cuda = pd.read_csv(work / "results" / "slurm" / "matmul_cuda.csv")
    assert len(cuda) > 0 and set(cuda["status"]) == {"absent"}, "no GPU here: the cuda rows must say absent"


def test_gpu_model_reaches_sbatch(slurm_cluster, tmp_path):
    """config cluster.gpu_model -> --gpus=<model>:1 on GPU jobs; SLURM schedules it on the typed gres
    (the fake GPU is of type "fake"). detect stands for the GPU stages here (tests/test_profiles.py
    shows they get the same gpu_model); the run stops after it."""
    work = tmp_path
    config = copy.deepcopy(TINY)
    config.update(run="slurmgpu", backends=["cuda"], cluster={"gpu_model": "fake"})
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    profile = make_profile(work)
    proc = run_snakemake(work, profile, "results/slurmgpu/devices.json", limit_s=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, _tail(out, 6000)
    who, lines = parse_run(out)
    assert sorted(who.values()) == ["detect", "run_info"]
    jobs = scontrol_jobs(who)
    for jid, name in who.items():
        if name == "run_info":
            assert "--gpus" not in lines[jid]
            continue
        assert " --gpus=fake:1" in lines[jid], (name, lines[jid])
        assert "gpu:fake:1" in jobs[jid].get("TresPerJob", ""), (name, jobs[jid].get("TresPerJob"))
        assert jobs[jid]["JobState"] == "COMPLETED", (name, jobs[jid]["JobState"])
