"""What every device stage (registry.DEVICE_STAGES) does before it measures: read the run, build
the provenance every row carries, apply the thread count, find the backend's devices, let the backend set
its process-wide state (``Backend.prepare_process``), and warm each device in this process before
measuring it.

A backend with no device here is not an error: the stage writes one ``absent`` row per table and
exits 0, so a config listing ``cuda`` still gives a complete report on a CPU-only machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .. import backends, registry
from ..backends import Backend, BackendUnavailable
from ..measure import telemetry as tm
from ..measure.failures import one_line
from ..measure.stability import DeviceWarmup, warm_device
from ..run.config import ConfigError
from ..run.io import atomic_write_parquet
from ..run.provenance import read_run_info, row_provenance


def set_threads(threads: int) -> int:
    """Apply ``--threads`` (0: torch's default) and return the thread count torch will use."""
    if threads > 0:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def device_info_safe(backend: Backend, device: str) -> dict:
    """``backend.device_info(device)`` (name, CPU flags, SMs ...), or just the device string when it fails."""
    try:
        info = dict(backend.device_info(device) or {})
    except Exception as exc:  # detection problems must not stop a measurement
        info = {"detail": one_line(exc)}
    info.setdefault("name", device)
    return info


def add_device_stage_arguments(p) -> None:
    """The arguments every device stage takes (the rules pass the same ones to each)."""
    p.add_argument("--run-file", required=True, help="results/<run>/run.json")
    p.add_argument("--backend", required=True, choices=backends.NAMES)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--out-dir", required=True, help="the run folder: the stage writes its registry files there")
    p.add_argument("--checkpoint", default=None, help="JSON lines of finished points; a rerun resumes from it")


@dataclass
class StageStart:
    stage: str
    backend: Backend
    run_info: dict
    config: dict
    prov: dict  # provenance columns of every row
    devices: list[str]  # empty when the backend is absent
    absent_reason: str  # why, when it is
    threads: int = 1
    infos: dict = field(default_factory=dict)
    warmups: dict = field(default_factory=dict)
    telemetries: dict = field(default_factory=dict)

    def info(self, device: str) -> dict:
        if device not in self.infos:
            self.infos[device] = device_info_safe(self.backend, device)
        return self.infos[device]

    def warm(self, device: str, log=print) -> DeviceWarmup:
        """Warm ``device`` in this process (the warm-up stage's stability rule) before measuring it, once."""
        if device not in self.warmups:
            w = warm_device(
                self.backend, device, self.config[registry.WARMUP.config_key], seed=self.config.get("seed", 0)
            )
            self.warmups[device] = w
            log(f"{self.stage} {w.describe(device)}")
        return self.warmups[device]

    def device_row(self, device: str) -> dict:
        """The columns that say which device a row measured and how it was warmed (warms it first)."""
        return {
            **self.prov,
            "backend": self.backend.name,
            "device": device,
            "device_name": self.info(device)["name"],
            **self.warm(device).columns(),
        }

    # ---- telemetry (measure.telemetry): what each device was doing while it was measured
    def telemetry(self, device: str) -> tm.DeviceTelemetry:
        """The sampler of ``device`` for this stage (the backend's reader at ``telemetry.hz``), made once."""
        if device not in self.telemetries:
            cfg = self.config.get("telemetry") or {}
            hz = float(cfg.get("hz", tm.DEFAULT_HZ))
            reader = self.backend.telemetry_reader(device, self.info(device)) if hz > 0 else None
            self.telemetries[device] = tm.DeviceTelemetry(
                reader, hz, rel_tol=float(cfg.get("settle_rel_tol", tm.DEFAULT_SETTLE_REL_TOL))
            )
        return self.telemetries[device]

    def telemetry_rows(self) -> list[dict]:
        """Every device's readings as rows of ``telemetry_<stage>`` (provenance and device columns first);
        the readers are closed. One ``absent`` row when the backend has no device here."""
        if not self.devices:
            return [{**self.absent_row(), "stage": self.stage}]
        rows = []
        for device in self.devices:
            t = self.telemetry(device)
            base = {
                **self.prov,
                "backend": self.backend.name,
                "device": device,
                "device_name": self.info(device)["name"],
            }
            rows += [{**base, **r} for r in t.series(self.stage)]
            t.close()
        return rows

    def absent_row(self) -> dict:
        return {
            **self.prov,
            "backend": self.backend.name,
            "device": "",
            "device_name": "",
            "status": "absent",
            "status_detail": self.absent_reason,
        }

    def out_path(self, out_dir: str, table: str) -> str:
        return f"{out_dir}/{registry.TABLES[table].filename(self.backend.name)}"

    def write_samples(self, out_dir: str, samples) -> str:
        """Write this stage's raw timing samples (``measure.samples``) to its registry file; return the path."""
        path = f"{out_dir}/{registry.SAMPLES[self.stage].filename(self.backend.name)}"
        atomic_write_parquet(path, samples)
        return path

    def checkpoint_path(self, out_dir: str, given: str | None = None) -> str:
        return given or f"{out_dir}/{registry.checkpoint_file(self.stage, self.backend.name)}"


def start(
    stage: str, run_file: str, backend_name: str, threads: int | None = None, *, backend: Backend | None = None
) -> StageStart:
    """Read the run, check ``--threads``, apply it, and list the backend's devices (or why there are none)."""
    if threads is not None and threads < 0:
        raise ConfigError(f"--threads: {threads} is out of range; allowed: >= 0 (0: torch's default)")
    run_info = read_run_info(run_file)
    backend = backend or backends.get(backend_name)
    if not registry.STAGES[stage].applies_to(backend.name):
        devices, reason = [], f"{stage}: measured on accelerators only; {backend.name} is the host"
    else:
        try:
            devices, reason = backend.devices(), ""
        except BackendUnavailable as exc:
            devices, reason = [], str(exc)
    used = set_threads(threads or 0) if devices else (threads or 0)
    if devices:
        backend.prepare_process()  # before the first warm-up: XLA compiles graphs with the precision set then
    return StageStart(
        stage, backend, run_info, run_info["config"], row_provenance(run_info, stage), devices, reason, threads=used
    )
