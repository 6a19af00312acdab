"""Starting one world of ranks with PyTorch's elastic launcher, and making sure none outlives it.

``launch`` runs ``python -m torch.distributed.run`` (torchrun) as a child in a session of its own, on a
port picked free for this world (``free_port``: two runs on one host never share a rendezvous), and
waits at most ``timeout_s``:

- the launcher exits 0: ``ok``;
- it exits otherwise (a rank raised, or was killed, and the launcher stopped the others): ``error``, with
  the root cause from its log;
- the time is up (a rank hangs, e.g. in a collective its peer never joins): ``timeout``.

Whatever happened, and also when this process is itself told to stop (SIGTERM from a scheduler or
snakemake, Ctrl-C), every process of the world is then ended by pid: the launcher's children (seen
while it ran: torchrun starts each rank in a session of its own, so a process-group kill would miss
them) and the pids the ranks wrote themselves (``rank<r>.pid``), then the launcher. ``leftover`` lists
any that still run afterwards (expected empty), and ``port_free`` says whether the rendezvous port
can be bound again (``SO_REUSEADDR``: only a socket still *listening* on it fails that).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

HOST = "127.0.0.1"
PID_FILE = "rank{rank}.pid"


def free_port(host: str = HOST) -> int:
    """A TCP port nothing listens on right now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_is_free(port: int, host: str = HOST) -> bool:
    """Whether ``port`` can be bound again: nothing listens on it (connections left in TIME_WAIT do
    not count, as with every server that sets ``SO_REUSEADDR``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, int(port)))
        except OSError:
            return False
    return True


def torchrun_argv(
    nproc: int, port: int, module: str, args: list[str], *, python: str = sys.executable, host: str = HOST
) -> list[str]:
    """``python -m torch.distributed.run`` for ``nproc`` ranks on this node, static rendezvous on
    ``host:port``, no restarts (a failed rank ends the world: it is a measurement, not a job to
    keep alive), running ``python -m module args`` in every rank."""
    return [
        python,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "1",
        "--nproc-per-node",
        str(int(nproc)),
        "--master-addr",
        host,
        "--master-port",
        str(int(port)),
        "--max-restarts",
        "0",
        "--monitor-interval",
        "0.2",
        "-m",
        module,
        *args,
    ]


# What each node's srun task runs: find the allocation's first node and its address (the c10d rendezvous host),
# then this node's torch.distributed.run; every value arrives as a positional argument, none inside the script.
SRUN_TASK = (
    'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1); '
    'addr=$(scontrol show node "$head" -o | sed -n "s/.* NodeAddr=\\([^ ]*\\).*/\\1/p"); '
    "py=$1; nn=$2; np=$3; port=$4; id=$5; mod=$6; shift 6; "
    'exec "$py" -m torch.distributed.run --nnodes "$nn" --nproc-per-node "$np" --rdzv-backend c10d '
    '--rdzv-endpoint "${addr:-$head}:$port" --rdzv-id "$id" --max-restarts 0 --monitor-interval 0.2 -m "$mod" "$@"'
)


def srun_torchrun_argv(
    nnodes: int,
    nproc: int,
    port: int,
    module: str,
    args: list[str],
    *,
    rdzv_id: str,
    time_min: int,
    python: str = sys.executable,
) -> list[str]:
    """A world across ``nnodes`` SLURM nodes: ``srun`` starts one task per node (a new allocation, or a step of the
    one this runs in), each running ``torch.distributed.run`` with ``nproc`` ranks and c10d rendezvous at the
    allocation's first node; ``--kill-on-bad-exit``: a failed node's launcher ends every node's."""
    return [
        "srun",
        f"--nodes={int(nnodes)}",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        "--export=ALL",
        f"--time={int(time_min)}",
        f"--job-name={rdzv_id}"[:100],
        "bash",
        "-c",
        SRUN_TASK,
        "accelbench-world",
        python,
        str(int(nnodes)),
        str(int(nproc)),
        str(int(port)),
        rdzv_id,
        module,
        *args,
    ]


def end_slurm_job(name: str, timeout_s: float = 60.0, poll_s: float = 0.5) -> str:
    """After a multi-node world: kill whatever of the SLURM job ``name`` still runs on any node (a node's launcher
    that srun's exit left behind: the steps' processes are not this host's children) and wait until SLURM says
    none of it runs. '' when it is gone, else what is left."""
    if shutil.which("scancel") is None:
        return "scancel not on PATH"
    subprocess.run(["scancel", "--signal=KILL", "--full", f"--name={name}"], capture_output=True, check=False)
    subprocess.run(["scancel", f"--name={name}"], capture_output=True, check=False)
    deadline = time.monotonic() + timeout_s
    left = ""
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["squeue", "-h", f"--name={name}", "--states=PENDING,RUNNING,COMPLETING,SUSPENDED", "-o", "%i %T %N"],
            capture_output=True,
            text=True,
            check=False,
        )
        left = out.stdout.strip()
        if out.returncode == 0 and not left:
            return ""
        time.sleep(poll_s)
    return left or "squeue failed"


@dataclass
class LaunchResult:
    status: str  # ok, error, timeout
    returncode: int | None  # the launcher's (None when it was killed at the timeout)
    seconds: float
    detail: str
    port: int
    pids: list[int] = field(default_factory=list)  # every rank/launcher process seen
    leftover: list[int] = field(default_factory=list)  # of those, still running after the cleanup
    port_free: bool = True


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie waiting to be reaped does not count)."""
    try:
        return _alive(psutil.Process(int(pid)))
    except psutil.Error:
        return False


def read_pid_files(pid_dir: Path) -> list[int]:
    out = []
    for path in sorted(Path(pid_dir).glob(PID_FILE.format(rank="*"))):
        with contextlib.suppress(OSError, ValueError):
            out.append(int(path.read_text().split()[0]))
    return out


def write_pid_file(pid_dir: Path, rank: int) -> Path:
    """Called by each rank first thing: its pid, for the launching process to find it by."""
    path = Path(pid_dir) / PID_FILE.format(rank=int(rank))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{os.getpid()}\n")
    os.replace(tmp, path)
    return path


_FIELD = re.compile(r"^\s*(exitcode|traceback|rank)\s*:\s*(.+)$")
_EXCEPTION = re.compile(r"^\s*(?:\[rank\d+\]:\s*)?((?:\w+\.)*\w+(?:Error|Exception)\b.*)$")


def failure_detail(log_text: str, returncode: int | None) -> str:
    """One line from torchrun's log saying why the world failed: the rank torchrun names as the root cause
    and its exit code (a signal shows as a negative code), then the first exception printed."""
    lines = log_text.splitlines()
    cause: dict = {}
    if any("Root Cause" in ln for ln in lines):
        start = max(i for i, ln in enumerate(lines) if "Root Cause" in ln)
        for ln in lines[start:]:
            m = _FIELD.match(ln)
            if m and m.group(1) not in cause:
                cause[m.group(1)] = " ".join(m.group(2).split())
    errors = [
        m.group(1).strip()
        for m in map(_EXCEPTION.match, lines)
        if m and "ChildFailedError" not in m.group(1) and ":" in m.group(1)
    ]
    parts = []
    if "exitcode" in cause:
        rank = f"rank {cause['rank'].split()[0]}" if "rank" in cause else "a rank"
        parts.append(f"{rank} failed: exitcode {cause['exitcode']}")
    if errors:
        parts.append(f"first error: {errors[0]}")
    return "; ".join(parts)[:300] if parts else f"torch.distributed.run exited with {returncode}"


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        return []


def launch(
    argv: list[str], *, env: dict, timeout_s: float, log_path: Path, pid_dir: Path, port: int, poll_s: float = 0.2
) -> LaunchResult:
    """Run ``argv`` (``torchrun_argv``) for at most ``timeout_s`` seconds; see the module doc."""
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    seen: dict[int, psutil.Process] = {}
    timed_out = False
    previous = _stop_on_sigterm()
    try:
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
            agent = None
            try:
                with contextlib.suppress(psutil.Error):  # it may have ended already
                    agent = psutil.Process(proc.pid)
                while True:
                    for child in _children(agent) if agent else []:
                        seen.setdefault(child.pid, child)
                    if proc.poll() is not None:
                        break
                    if time.monotonic() - start > timeout_s:
                        timed_out = True
                        break
                    time.sleep(poll_s)
            finally:  # normal end, timeout, or this process stopped: no rank may outlive the world
                leftover = _end_all(proc, agent, seen, pid_dir)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    seconds = time.monotonic() - start
    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    rc = None if timed_out else proc.returncode
    if timed_out:
        status, detail = "timeout", f"no result within scaling.timeout_s = {timeout_s:g} s: ranks ended by accelbench"
    elif rc == 0:
        status, detail = "ok", ""
    else:
        status, detail = "error", failure_detail(text, rc)
    pids = sorted(set(seen) | set(read_pid_files(pid_dir)) | {proc.pid})
    return LaunchResult(status, rc, seconds, detail, port, pids, leftover, port_is_free(port))


class Stopped(Exception):
    """This process was told to stop (SIGTERM) while a world ran."""


def _raise_stopped(signum, frame):
    raise Stopped(f"stopped by signal {signum} while ranks ran")


def _stop_on_sigterm():
    """Turn SIGTERM into ``Stopped`` while a world runs (so its ranks are ended first); the previous handler,
    or None where handlers cannot be set (not the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _raise_stopped)


def _end_all(proc: subprocess.Popen, agent, seen: dict, pid_dir: Path, grace_s: float = 10.0) -> list[int]:
    """SIGKILL every rank still running (seen as the launcher's children or by its pid file), then the
    launcher's whole session; reap; return the pids still running."""
    procs = dict(seen)
    for child in _children(agent) if agent else []:
        procs.setdefault(child.pid, child)
    for pid in read_pid_files(pid_dir):
        if pid not in procs:
            with contextlib.suppress(psutil.Error):
                procs[pid] = psutil.Process(pid)
    targets = [p for p in procs.values() if _alive(p)]
    for p in targets:
        with contextlib.suppress(psutil.Error):
            p.send_signal(signal.SIGKILL)
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    psutil.wait_procs(targets, timeout=grace_s)
    still = {p.pid for p in [*targets, *procs.values()] if _alive(p)}
    if proc.poll() is None:
        still.add(proc.pid)
    return sorted(still)
