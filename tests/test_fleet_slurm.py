"""The fleet check through a real multi-node SLURM cluster on localhost (.ci/slurm-fleet-up.sh: one slurmctld, one
slurmd per node name, partition "fleet"): nodes n1..n4 declared, n1..n3 started, n4 never (unreachable).

- n3 is slowed on purpose: its slurmd (and so its job) is put in a CPU cgroup capped at 10% of one core.
  `accelbench fleet --submit --partition fleet` runs one job per node at once: n3 is slow with the metric named,
  n1 and n2 healthy, n4 failed (its SLURM state named, no job submitted), exit 1.
- Bad input (an unknown partition or node, an empty node list, a threshold out of range) is one line naming the
  key, exit 2, and no job reaches SLURM.

Needs root (apt-get install of slurm when missing, daemons, a cgroup). In CI it fails when SLURM cannot be set
up; ACCELBENCH_SKIP_SLURM_TESTS=1 skips it elsewhere (ignored when CI=true). The cluster is torn down after.
About 1 to 2 minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
BASE = Path(os.environ.get("ACCELBENCH_FLEET_SLURM_BASE", "/tmp/slurm-fleet"))
NODES, STARTED, SLOWED = ("n1", "n2", "n3", "n4"), ("n1", "n2", "n3"), "n3"
CAP = (1000, 10000)  # quota, period (us): 10% of one core, in 10 ms periods (every timed block sees the cap)


class CpuCap:
    """A CPU cgroup (v1 cpu controller or v2 cpu.max) holding one process: its children are capped too."""

    def __init__(self, name: str):
        v1 = Path("/sys/fs/cgroup/cpu")
        self.v2 = not v1.is_dir()
        self.root = Path("/sys/fs/cgroup") if self.v2 else v1
        self.dir = self.root / name

    def hold(self, pid: int, quota_us: int, period_us: int) -> None:
        self.dir.mkdir(exist_ok=True)
        if self.v2:
            ctl = self.root / "cgroup.subtree_control"
            if "cpu" not in ctl.read_text().split():
                ctl.write_text("+cpu")
            (self.dir / "cpu.max").write_text(f"{quota_us} {period_us}")
        else:
            (self.dir / "cpu.cfs_period_us").write_text(str(period_us))
            (self.dir / "cpu.cfs_quota_us").write_text(str(quota_us))
        (self.dir / "cgroup.procs").write_text(str(pid))

    def release(self) -> None:
        if not self.dir.is_dir():
            return
        for pid in (self.dir / "cgroup.procs").read_text().split():
            try:
                (self.root / "cgroup.procs").write_text(pid)
            except OSError:
                pass  # the process ended meanwhile
        self.dir.rmdir()


def _env() -> dict:
    return dict(
        os.environ,
        SLURM_CONF=str(BASE / "etc" / "slurm.conf"),
        BASE=str(BASE),
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        OMP_NUM_THREADS="1",
    )


@pytest.fixture(scope="module")
def fleet_cluster():
    if os.environ.get("ACCELBENCH_SKIP_SLURM_TESTS") == "1" and os.environ.get("CI") != "true":
        pytest.skip("ACCELBENCH_SKIP_SLURM_TESTS=1")  # never in CI: there a missing SLURM is a failure
    if os.geteuid() != 0:
        pytest.fail(
            "the fleet SLURM test needs root to install and start slurm "
            "(set ACCELBENCH_SKIP_SLURM_TESTS=1 to skip it on this machine)"
        )
    env = dict(_env(), NODES=" ".join(NODES), START=" ".join(STARTED))
    down = [str(REPO / ".ci" / "slurm-fleet-down.sh")]
    up = subprocess.run(
        ["timeout", "-k", "10", "900", "bash", str(REPO / ".ci" / "slurm-fleet-up.sh")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if up.returncode != 0:
        subprocess.run(["bash", *down], env=dict(env, PURGE="1"), capture_output=True, check=False)
        pytest.fail(f".ci/slurm-fleet-up.sh failed (rc={up.returncode}):\n{up.stdout[-2000:]}\n{up.stderr[-3000:]}")
    try:
        yield env
    finally:
        proc = subprocess.run(
            ["timeout", "-k", "10", "120", "bash", *down],
            env=dict(env, PURGE="1"),
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture
def slowed_node(fleet_cluster):
    """n3's slurmd in a capped CPU cgroup while the test runs: every job it starts is capped too."""
    cap = CpuCap(f"accelbench-fleet-{SLOWED}")
    pid = int((BASE / "run" / f"slurmd-{SLOWED}.pid").read_text())
    try:
        cap.hold(pid, *CAP)
        yield SLOWED
    finally:
        cap.release()


def fleet(env, folder: Path, *args, limit_s: int = 400):
    return subprocess.run(
        ["timeout", "-k", "10", str(limit_s), sys.executable, "-m", "accelbench", "fleet", str(folder), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def jobs_known(env) -> int:
    out = subprocess.run(
        ["squeue", "-h", "--states=all", "-o", "%i"], capture_output=True, text=True, env=env, check=True
    ).stdout
    return len(out.split())


def test_slowed_node_is_slow_unreachable_node_failed_the_rest_healthy(fleet_cluster, slowed_node, tmp_path):
    env = fleet_cluster
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"fleet": {"mem_mb": 400, "runtime_min": 5, "timeout_s": 240, "threads": 1}}))
    proc = fleet(env, tmp_path / "fleet-t", "--submit", "--partition", "fleet", "--configfile", str(cfg))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    v = pd.read_csv(tmp_path / "fleet-t" / "fleet.csv", keep_default_na=False).set_index("node")
    assert set(v.index) == set(NODES), out
    assert v.loc["n4", "verdict"] == "failed" and "in SLURM" in v.loc["n4", "detail"], out
    assert "no job submitted" in v.loc["n4", "detail"]
    assert v.loc[SLOWED, "verdict"] == "slow", out
    assert v.loc[SLOWED, "slow_metrics"] and "% worse than the fleet median" in v.loc[SLOWED, "detail"], out
    for n in set(STARTED) - {SLOWED}:
        assert v.loc[n, "verdict"] == "healthy", out
        assert v.loc[n, "job_id"], out  # each node ran its own SLURM job
    # each started node's run is its own, from its own SLURM node (not the host: every node shares it)
    runs = sorted((tmp_path / "fleet-t").glob("n*/run.json"))
    assert [p.parent.name for p in runs] == list(STARTED)
    points = pd.read_csv(tmp_path / "fleet-t" / "fleet_points.csv")
    assert set(points.loc[points["level"] == "node", "node"]) == set(STARTED)
    lines = proc.stdout.splitlines()
    assert lines[1].startswith("n4") and lines[2].startswith(SLOWED)  # flagged first


@pytest.mark.parametrize(
    "args, key",
    [
        (["--partition", "nosuch"], "fleet.partition"),
        (["--nodes", "n1,n9"], "fleet.nodes"),
        ([], "fleet.nodes"),  # neither a partition nor nodes: an empty node list
        (["--partition", "fleet", "--k-mad", "-1"], "fleet.k_mad"),
    ],
)
def test_bad_input_is_one_line_before_any_job(fleet_cluster, tmp_path, args, key):
    before = jobs_known(fleet_cluster)
    proc = fleet(fleet_cluster, tmp_path / "fleet-bad", "--submit", *args, limit_s=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and key in proc.stderr, proc.stderr
    assert jobs_known(fleet_cluster) == before and not (tmp_path / "fleet-bad" / "fleet.json").exists()


# ---- multi-node scaling: srun + torch.distributed.run, c10d rendezvous, gloo ----------------------------------


def scaling_run(env, tmp: Path, timeout_s: int = 150, ranks_per_node: int = 1, steps: int | None = None) -> Path:
    """run.json of a tiny scaling config: world 1 on this host, and a world of 2 nodes x ranks_per_node through
    srun (``steps``: the training steps, where a test needs the world to be training for seconds)."""
    sys.path.insert(0, str(REPO / "tests"))
    from tiny_config import SCALING_ON, TINY

    amp = dict(TINY["amp"], steps=steps) if steps else TINY["amp"]
    cfg = dict(
        TINY,
        amp=amp,
        run="multinode",
        scaling=dict(
            SCALING_ON,
            world_sizes=[1],
            nodes=2,
            ranks_per_node=ranks_per_node,
            collectives=["all_reduce", "broadcast"],
            timeout_s=timeout_s,
            sizes={"min_bytes": 1024, "max_bytes": 32768, "factor": 32},
        ),
    )
    run = tmp / "run.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "accelbench",
            "run-info",
            "--config-json",
            json.dumps(cfg),
            "--run",
            "multinode",
            "--out",
            str(run),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return run


def scaling_argv(run: Path, tmp: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "accelbench",
        "scaling",
        "--run-file",
        str(run),
        "--backend",
        "cpu",
        "--threads",
        "1",
        "--out-dir",
        str(tmp),
    ]


@pytest.mark.parametrize("ranks_per_node", [1, 2])
def test_two_nodes_through_srun(fleet_cluster, tmp_path, ranks_per_node):
    """2 nodes x 1 rank: efficiency, loss check, collectives over the world; 2 x 2: the collectives also within
    each node and across the nodes (nccl-tests' split), each in a sub-group of 2."""
    env = fleet_cluster
    world = 2 * ranks_per_node
    run = scaling_run(env, tmp_path, ranks_per_node=ranks_per_node)
    proc = subprocess.run(
        ["timeout", "-k", "10", "400", *scaling_argv(run, tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    summary = pd.read_csv(tmp_path / "scaling_cpu.csv")
    two = summary[(summary["world_size"] == world) & (summary["method"] == "ddp")]
    assert len(two) >= 1 and (two["status"] == "ok").all(), out
    assert two["scaling_efficiency"].between(0.01, 2.0).all()  # throughput_2 / (2 x throughput_1): a number
    assert two["loss_matches_single"].astype(str).str.lower().eq("true").all()  # DDP over 2 nodes = one process
    coll = pd.read_csv(tmp_path / "collectives_cpu.csv")
    assert set(coll["collective"]) == {"all_reduce", "broadcast"} and (coll["status"] == "ok").all()
    assert (coll["busbw_gbps"] > 0).all()
    scopes = coll.groupby("scope")["world_size"].agg(set).to_dict()
    if ranks_per_node == 1:
        assert scopes == {"world": {2}}  # one rank per node: the world is the inter-node measurement
    else:
        assert scopes == {"world": {4}, "intra_node": {2}, "inter_node": {2}}, scopes
        assert len(coll[coll["scope"] == "intra_node"]) == len(coll[coll["scope"] == "world"])
    # the world was one SLURM allocation of two nodes (its job stays listed for MinJobAge)
    jobs = subprocess.run(
        ["squeue", "-h", "--states=all", "-o", "%j|%D|%T"], capture_output=True, text=True, env=env, check=True
    ).stdout.splitlines()
    mine = [j.split("|") for j in jobs if j.startswith("accelbench-scaling-")]
    assert mine and all(d == "2" for _, d, _ in mine), jobs


def test_a_killed_nodes_rank_ends_the_world_and_leaves_no_process(fleet_cluster, tmp_path):
    env = fleet_cluster
    # thousands of steps: the world is still training when its rank is killed (a tiny config finishes in < 1 s)
    run = scaling_run(env, tmp_path, timeout_s=120, steps=5000)
    with open(tmp_path / "stage.log", "w") as log:  # the stage holds its own copy of the file
        stage = subprocess.Popen(scaling_argv(run, tmp_path), env=env, stdout=log, stderr=subprocess.STDOUT)
    pid_file = tmp_path / "work" / "scaling_cpu" / "ws2" / "rank1.pid"
    deadline = time.monotonic() + 180
    while not pid_file.exists() and time.monotonic() < deadline and stage.poll() is None:
        time.sleep(0.2)
    assert pid_file.exists(), (tmp_path / "stage.log").read_text()
    time.sleep(1.0)  # the world is training
    victim = int(pid_file.read_text().split()[0])
    os.kill(victim, signal.SIGKILL)  # node 2's rank dies
    rank0 = int((pid_file.parent / "rank0.pid").read_text().split()[0])
    assert stage.wait(timeout=300) == 0, (tmp_path / "stage.log").read_text()
    summary = pd.read_csv(tmp_path / "scaling_cpu.csv")
    two = summary[(summary["world_size"] == 2) & (summary["method"] == "ddp")]
    assert len(two) and two["status"].isin(["error", "timeout"]).all(), summary.to_string()
    trials = pd.read_csv(tmp_path / "scaling_cpu_trials.csv")
    assert trials.loc[trials["world_size"] == 2, "status_detail"].astype(str).str.len().gt(0).all()
    one = summary[(summary["world_size"] == 1) & (summary["method"] == "ddp")]
    assert (one["status"] == "ok").all()  # the rest still reports
    for pid in (victim, rank0):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid
    left = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if "accelbench.stages.scaling.rank" in " ".join(p.info["cmdline"] or [])
    ]
    assert not left, left
