"""What every benchmark stage (warmup, matmul, transfer) does before it measures: read the run,
build the provenance every row carries, apply the thread count, find the backend's devices.

A backend with no device here is not an error: the stage writes one ``absent`` row and exits 0,
so a config listing ``cuda`` still gives a complete report on a CPU-only machine.
"""

from __future__ import annotations

from dataclasses import dataclass


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception as one short line (type and message) for a row's ``status_detail``."""
    text = " ".join(str(exc).split()) or repr(exc)
    text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def device_info_safe(device: str) -> dict:
    """``devices.device_info`` (name, CPU flags, ...), or just the device string when it fails."""
    try:
        from .devices import device_info

        info = dict(device_info(device) or {})
    except Exception as exc:  # detection problems must not stop a measurement
        info = {"detail": one_line(exc)}
    info.setdefault("name", device)
    return info


def set_threads(threads: int) -> int:
    """Apply ``--threads`` (0: torch's default) and return the thread count torch will use."""
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


@dataclass
class StageStart:
    run_info: dict
    config: dict
    prov: dict            # provenance columns of every row
    devices: list[str]    # empty when the backend is absent
    absent_reason: str    # why, when it is

    def device_row(self, backend: str, device: str, info: dict | None = None) -> dict:
        """The columns that say which device a row measured."""
        name = (info or device_info_safe(device))["name"]
        return {**self.prov, "backend": backend, "device": device, "device_name": name}


def start(run_file: str, backend: str, threads: int | None = None) -> StageStart:
    """Read the run, check ``--threads``, and list the backend's devices (or why there are none)."""
    from .backend import BackendUnavailable, device_strings
    from .config import ConfigError
    from .provenance import read_run_info, row_provenance

    if threads is not None and threads < 0:
        raise ConfigError(f"--threads: {threads} is out of range; allowed: >= 0 (0: torch's default)")
    run_info = read_run_info(run_file)
    try:
        devices, reason = device_strings(backend), ""
    except BackendUnavailable as exc:
        devices, reason = [], str(exc)
    return StageStart(run_info, run_info["config"], row_provenance(run_info), devices, reason)
