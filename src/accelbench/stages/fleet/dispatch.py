"""``accelbench fleet FOLDER --submit``: one SLURM job per node, all submitted at once, each pinned to its node
(``sbatch --nodelist=<node> --exclusive``), each running ``accelbench fleet FOLDER --node`` there.

Why one job per node, submitted by us through sbatch (docs/fleet.md, "Dispatch"): each node's job starts, fails
or times out on its own, so one down node costs its own verdict and not the fleet's; one allocation with srun
would not start at all until every node is free (and would end on the first node that fails), and a job array
cannot pin each task to its own node. The Snakemake SLURM executor would submit the same jobs, but it waits
without end for a job that stays pending on a down node and needs sacct (an accounting database) for the status
of finished ones; here a deadline (``fleet.timeout_s``) ends any job not done by then, and squeue alone is asked.

Nodes SLURM already reports unusable (down, drained, not responding) get no job: they are failed at once, naming
their state. Everything the submission needs is checked before the first sbatch (ConfigError: one line).
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

from ...run.config import ConfigError
from ...run.io import atomic_write_json, atomic_write_text
from . import plan
from .plan import NODE_FILE

FLEET_FILE = "fleet.json"
CONFIG_FILE = "fleet_config.json"
JOB_SCRIPT = "fleet_job.sh"
TERMINAL = (
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
    "REVOKED",
    "SPECIAL_EXIT",
)


def job_script(folder: Path, config_file: Path) -> str:
    """The node job: this Python, this accelbench, the node's check (every argument quoted)."""
    argv = [
        sys.executable,
        "-m",
        "accelbench",
        "fleet",
        str(folder.resolve()),
        "--node",
        "--configfile",
        str(config_file.resolve()),
    ]
    return "#!/bin/sh\n# written by accelbench fleet --submit\nexec " + " ".join(map(shlex.quote, argv)) + "\n"


def sbatch_argv(node: str, fleet: dict, folder: Path, script: Path) -> list[str]:
    out = folder.resolve() / node / "job.log"
    argv = [
        "sbatch",
        "--parsable",
        f"--job-name=accelbench-fleet-{folder.name}"[:120],
        f"--nodelist={node}",
        "--nodes=1",
        "--ntasks=1",
        "--exclusive",
        f"--time={fleet['runtime_min']}",
        f"--mem={fleet['mem_mb']}M",
        f"--output={out}",
        "--export=ALL",
    ]
    if fleet["partition"]:
        argv.append(f"--partition={fleet['partition']}")
    return [*argv, str(script.resolve())]


def write_record(folder: Path, node: str, **fields) -> None:
    (folder / node).mkdir(parents=True, exist_ok=True)
    path = folder / node / NODE_FILE
    old = {}
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except ValueError:
            old = {}
    atomic_write_json(path, {**old, "node": node, **fields})


def job_states(job_ids: list[str]) -> dict[str, tuple[str, str]]:
    """job id -> (state, reason) from squeue (finished jobs stay listed for MinJobAge seconds)."""
    if not job_ids:
        return {}
    proc = plan.run_slurm(["squeue", "-h", "--states=all", "-j", ",".join(job_ids), "-o", "%i|%T|%r"])
    out = {}
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            out[parts[0]] = (parts[1], parts[2])
    return out


def _log_tail(path: Path, n: int = 3) -> str:
    try:
        lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])[-400:]


def submit(folder: Path, config: dict, log=print, poll_s: float = 2.0) -> dict:
    """Submit every node's check, wait for all (or the deadline), write each node's fleet_node.json."""
    fleet = config["fleet"]
    if (folder / FLEET_FILE).exists():
        raise ConfigError(
            f"results: {str(folder)!r} already holds a fleet check ({FLEET_FILE}); allowed: a new "
            "folder (judge this one without --submit)"
        )
    nodes = plan.resolve_nodes(fleet)
    for n in nodes:  # every node's config, checked before the first job
        plan.node_config(config, plan.run_id(folder.name, n.name))
    folder.mkdir(parents=True, exist_ok=True)
    config_file, script = folder / CONFIG_FILE, folder / JOB_SCRIPT
    atomic_write_json(config_file, config)
    atomic_write_text(script, job_script(folder, config_file))
    script.chmod(0o755)
    jobs: dict[str, str] = {}
    request = {
        "nodes": [n.name for n in nodes],
        "partition": fleet["partition"],
        "states": {n.name: n.state for n in nodes},
        "submitted_unix_s": time.time(),
        "jobs": jobs,
    }
    for n in nodes:
        rid = plan.run_id(folder.name, n.name)
        why = n.unreachable
        if why:
            write_record(folder, n.name, state="failed", error=f"{why}; no job submitted", run_id=rid)
            log(f"fleet: {n.name}: {why}; no job submitted")
            continue
        write_record(folder, n.name, state="submitted", error="", run_id=rid)
        proc = plan.run_slurm(sbatch_argv(n.name, fleet, folder, script))
        if proc.returncode != 0:
            msg = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            write_record(folder, n.name, state="failed", error=f"sbatch refused the job: {msg}")
            log(f"fleet: {n.name}: sbatch refused the job: {msg}")
            continue
        jobs[n.name] = proc.stdout.strip().split(";")[0]
        write_record(folder, n.name, job_id=jobs[n.name])
        log(f"fleet: {n.name}: job {jobs[n.name]}")
    atomic_write_json(folder / FLEET_FILE, request)
    deadline = time.monotonic() + fleet["timeout_s"]
    waiting = dict(jobs)
    while waiting:
        states = job_states(list(waiting.values()))
        for node, jid in list(waiting.items()):
            state, reason = states.get(jid, ("GONE", ""))
            if state in TERMINAL or state == "GONE":
                finish(folder, node, jid, state, log)
                del waiting[node]
        if not waiting:
            break
        if time.monotonic() > deadline:
            for node, jid in waiting.items():
                state, reason = states.get(jid, ("?", ""))
                plan.run_slurm(["scancel", jid])
                write_record(
                    folder,
                    node,
                    state="failed",
                    error=f"job {jid} not done within fleet.timeout_s ({fleet['timeout_s']} s): {state}"
                    + (f" ({reason})" if reason and reason != "None" else "")
                    + "; cancelled",
                )
                log(f"fleet: {node}: job {jid} {state} past the deadline; cancelled")
            break
        time.sleep(poll_s)
    request["finished_unix_s"] = time.time()
    atomic_write_json(folder / FLEET_FILE, request)
    return request


def finish(folder: Path, node: str, jid: str, state: str, log) -> None:
    """A node's job ended: its own record says how, unless it ended before writing one (killed, node lost)."""
    path = folder / node / NODE_FILE
    rec = json.loads(path.read_text()) if path.exists() else {}
    if rec.get("state") in ("ok", "failed") and rec.get("job_id") == jid and state in ("COMPLETED", "FAILED", "GONE"):
        log(f"fleet: {node}: job {jid} {state}: {rec['state']}")
        return
    tail = _log_tail(folder / node / "job.log")
    write_record(
        folder, node, state="failed", error=f"job {jid} ended {state} without a result" + (f": {tail}" if tail else "")
    )
    log(f"fleet: {node}: job {jid} ended {state} without a result")
