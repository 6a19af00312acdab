"""One node's check, inside its SLURM job (``accelbench fleet FOLDER --node``): run-info, detect and the fleet's
device stages (``registry.FLEET_STAGES``) on every backend of the config, into ``FOLDER/<node>/``, a run folder
like any other; ``fleet_node.json`` says how it went (``state`` ok or failed, and the error).

All the devices of a node are measured at the same time, as they run in training (sharing power and cooling):
a backend with several devices gets one process per device, started together, each seeing only its own device
(the backend's visibility variable, ``Backend.visible_devices_variable()``), each writing its own run folder
``<node>/<backend><index>/``. The CPU is one device: one process. (Several GPUs at once: untested on hardware.)
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from ... import backends, registry
from ...measure.failures import one_line
from ...run.io import atomic_write_json
from . import plan
from .plan import NODE_FILE


def node_name() -> str:
    """This node's name: ACCELBENCH_FLEET_NODE (Kubernetes: the pod's spec.nodeName), SLURM's, else the host's."""
    return (
        os.environ.get("ACCELBENCH_FLEET_NODE")
        or os.environ.get("SLURMD_NODENAME")
        or socket.gethostname().split(".")[0]
    )


def threads_granted(config: dict) -> int:
    """fleet.threads, else the CPUs this job may run on (SLURM's grant: the affinity mask, SLURM_CPUS_ON_NODE)."""
    if config["fleet"]["threads"]:
        return int(config["fleet"]["threads"])
    for var in ("SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return len(os.sched_getaffinity(0))


def _call(module: str, argv: list[str]) -> int:
    """An accelbench subcommand in this process (one torch import for the whole check)."""
    mod = importlib.import_module(module)
    parser = argparse.ArgumentParser(prog=f"accelbench {module}")
    mod.add_arguments(parser)
    return int(mod.cli(parser.parse_args(argv)) or 0)


def check_one(run_dir: Path, config: dict, run: str, threads: int, log=print) -> list[str]:
    """run-info, detect and every fleet stage of every backend into ``run_dir``; the errors (empty: none)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    run_file = str(run_dir / registry.RUN_FILE)
    cfg = plan.node_config(config, run)
    cfg["cpu_threads"] = threads
    _call(
        registry.STAGES["run-info"].module,
        [
            "--config-json",
            json.dumps(cfg),
            "--run",
            run,
            "--out",
            run_file,
            "--stages",
            ",".join(s.name for s in registry.FLEET_STAGES),
        ],
    )
    _call(registry.STAGES["detect"].module, ["--run-file", run_file, "--out", str(run_dir / registry.DEVICES_FILE)])
    errors = []
    for stage in registry.FLEET_STAGES:
        for backend in cfg["backends"]:
            if not stage.applies_to(backend):
                continue
            t0 = time.monotonic()
            try:
                rc = _call(
                    stage.module,
                    [
                        "--run-file",
                        run_file,
                        "--backend",
                        backend,
                        "--threads",
                        str(threads),
                        "--out-dir",
                        str(run_dir),
                    ],
                )
                if rc:
                    errors.append(f"{stage.name} {backend}: exit {rc}")
            except Exception as exc:  # one stage's failure is that stage's: the others still run
                errors.append(f"{stage.name} {backend}: {one_line(exc)}")
            log(f"fleet node check: {stage.name} {backend} {time.monotonic() - t0:.1f} s")
    return errors


def visible_variable(backend: str) -> str | None:
    try:
        return backends.get(backend).visible_devices_variable()
    except Exception:  # an absent backend (no torch build for it): one process, whose stages write absent rows
        return None


def device_count(backend: str) -> int:
    try:
        return len(backends.get(backend).devices())
    except Exception:  # as above: absent
        return 0


def run_node_check(folder: Path, config: dict, log=print) -> int:
    node = node_name()
    node_dir = folder / node
    node_dir.mkdir(parents=True, exist_ok=True)
    record = {
        "node": node,
        "state": "running",
        "error": "",
        "job_id": os.environ.get("SLURM_JOB_ID", ""),
        "run_id": plan.run_id(folder.name, node),
        "start_unix_s": time.time(),
        "pid": os.getpid(),
    }
    atomic_write_json(node_dir / NODE_FILE, record)
    threads = threads_granted(config)
    errors = []
    try:
        multi = [b for b in config["backends"] if visible_variable(b) and device_count(b) > 1]
        if multi:
            errors = check_devices_at_once(folder, node_dir, config, multi, threads, log)
        single = [b for b in config["backends"] if b not in multi]
        if single:
            errors += check_one(node_dir, dict(config, backends=single), record["run_id"], threads, log)
    except Exception as exc:  # the node's failure, with its error, in fleet_node.json
        errors.append(one_line(exc))
    record.update(state="failed" if errors else "ok", error="; ".join(errors), end_unix_s=time.time())
    atomic_write_json(node_dir / NODE_FILE, record)
    log(f"fleet node check on {node}: {record['state']}" + (f" ({record['error']})" if errors else ""))
    return 1 if errors else 0


def check_devices_at_once(folder: Path, node_dir: Path, config: dict, names: list[str], threads: int, log) -> list[str]:
    """One process per device of each backend in ``names``, all started together (untested on hardware)."""
    procs = []
    for backend in names:
        env_var = visible_variable(backend)
        for i in range(device_count(backend)):
            sub = node_dir / f"{backend}{i}"
            sub.mkdir(parents=True, exist_ok=True)
            env = dict(os.environ, **{env_var: str(i)})
            code = (
                "import json, sys; from pathlib import Path; from accelbench.stages.fleet import node; "
                "cfg = json.loads(sys.argv[1]); "
                "sys.exit(1 if node.check_one(Path(sys.argv[2]), cfg, sys.argv[3], int(sys.argv[4])) else 0)"
            )
            argv = [
                sys.executable,
                "-c",
                code,
                json.dumps(dict(config, backends=[backend])),
                str(sub),
                plan.run_id(folder.name, f"{node_dir.name}-{backend}{i}"),
                str(max(1, threads // 8)),
            ]
            with open(sub / "check.log", "w") as out:  # the child keeps its own copy of the descriptor
                procs.append((f"{backend}:{i}", subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)))
    errors = []
    for label, p in procs:
        if p.wait() != 0:
            errors.append(f"{label}: its check failed (see {label.replace(':', '')}/check.log)")
    return errors
