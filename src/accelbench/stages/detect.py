"""Stage ``detect``: what hardware and software this run measures, for every backend, present or not.

``accelbench detect --run-file results/<run>/run.json --out results/<run>/devices.json``

Every backend (``backends.NAMES``) gets an entry from its own ``probe()``; an absent one says why it is
absent (CPU-only torch wheel, no driver, torch_xla not installed, ...). Absence never fails detection:
a CPU-only machine is a valid machine. Alongside: the CPU's model, cores, ISA flags that decide matmul
speed, max clock and where it was read, caches; each device's theoretical peak per dtype with its source
(``Backend.peak_tflops``) and what its telemetry sampler finds (``Backend.telemetry_reader``: the source,
where each sensor is read, why each missing one is missing); versions, environment and the provenance
every row of the run carries.
"""

from __future__ import annotations

import platform
import socket
import sys
from collections.abc import Callable
from datetime import datetime, timezone

from .. import __version__, backends, registry
from ..backends import DTYPES
from ..measure import telemetry as tm
from ..run.io import atomic_write_json
from ..run.provenance import container_image, environment, package_versions, read_run_info, software


def device_peaks(backend, info: dict, threads: int | None, overrides: dict | None) -> dict:
    """{dtype: {"tflops": peak or None, "source": why}} for one device."""
    out = {}
    for dtype in DTYPES:
        value, source = backend.peak_tflops(info, dtype, threads, overrides or {})
        out[dtype] = {"tflops": value, "source": source}
    return out


def device_telemetry(backend, info: dict, hz: float) -> dict:
    """What the telemetry sampler finds on one device (``Backend.telemetry_reader``): its source, where each
    sensor is read and why each missing one is missing; {"source": "off"} when telemetry.hz is 0."""
    if not hz > 0:
        return {"source": "off", "hz": 0, "found": {}, "missing": {}, "note": "telemetry.hz is 0: the sampler is off"}
    try:
        return tm.describe(backend.telemetry_reader(info["device"], info), hz)
    except Exception as exc:  # a reader that cannot even be built: recorded, never fatal to detection
        return {
            "source": backend.telemetry or "none",
            "hz": hz,
            "found": {},
            "missing": {s: f"reader failed: {type(exc).__name__}: {exc}" for s in tm.SENSORS},
        }


def detect(run_info: dict, torch=None, *, probes: dict[str, Callable[[], dict]] | None = None) -> dict:
    """The devices.json document for this machine: provenance, the CPU, and every backend.

    ``torch`` replaces the real module and ``probes`` the per-backend probes ({backend: () -> entry}) in tests.
    """
    config = run_info.get("config") or {}
    overrides = (config.get(registry.PEAK_OVERRIDES.config_key) or {}).get("peak_tflops") or {}
    cpu_threads = config.get("cpu_threads") or None
    hz = float((config.get("telemetry") or {}).get("hz", tm.DEFAULT_HZ))
    objects = {name: backends.get(name, torch=torch) for name in backends.NAMES}
    torch = objects["cpu"].torch
    cpu = objects["cpu"].device_info("cpu")
    found: dict[str, dict] = {}
    for name, b in objects.items():
        try:
            entry = (probes or {}).get(name, b.probe)()
        except Exception as exc:  # a probe that breaks marks its backend absent, never the run
            entry = {"present": False, "devices": [], "reason": f"probe failed: {type(exc).__name__}: {exc}"}
        for dev in entry.get("devices", []):
            info = b.peak_info(dev)
            dev["peaks"] = device_peaks(b, info, cpu_threads, overrides)
            dev["telemetry"] = device_telemetry(b, {**info, **dev}, hz)
            if not b.is_accelerator:
                dev["peak_threads"] = cpu_threads or "all physical cores"
        found[name] = entry

    requested = list(config.get("backends") or [])
    return {
        "run_id": run_info.get("run"),
        "host": socket.gethostname(),
        "timestamp_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "accelbench_version": run_info.get("accelbench_version") or __version__,
        "git_commit": run_info.get("git_commit"),
        "config_hash": run_info.get("config_hash"),
        **software(torch),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "container_image": container_image(),
        "env": environment(),
        "packages": package_versions(),
        "cpu": cpu,
        "backends": found,
        "requested_backends": requested,
        "requested_absent": [b for b in requested if not found.get(b, {}).get("present")],
    }


def summary_lines(report: dict) -> list[str]:
    """One line per backend, for the log."""
    lines = []
    for name, entry in report["backends"].items():
        if entry.get("present"):
            names = ", ".join(f"{d['device']} ({d.get('name')})" for d in entry.get("devices", []))
            lines.append(f"{name}: present: {names}")
        else:
            lines.append(f"{name}: absent: {entry.get('reason')}")
    return lines


def add_arguments(p) -> None:
    p.add_argument("--run-file", required=True, help="results/<run>/run.json written by `accelbench run-info`")
    p.add_argument("--out", required=True, help="where to write devices.json")


def cli(args) -> int:
    run_info = read_run_info(args.run_file)
    report = detect(run_info)
    atomic_write_json(args.out, report)
    for line in summary_lines(report):
        print(f"accelbench detect: {line}")
    return 0
