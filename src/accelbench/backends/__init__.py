"""The backends: one class per kind of device, and the one list of their names.

``get(name)`` gives the object a stage asks everything device-specific: devices, synchronization,
dtype support, AMP policy, memory, peaks, copies, container flags, collective library and telemetry
source. Adding a device kind is adding one class here (and its name to the schema's enum).

=========  ===================  =====================================================================
name       class                devices
=========  ===================  =====================================================================
cpu        ``CpuBackend``       the host (``cpu``)
cuda       ``CudaBackend``      NVIDIA GPUs (``cuda:0`` ...) of a CUDA build of torch
rocm       ``RocmBackend``      AMD GPUs (``cuda:0`` ...) of a ROCm build of torch
mps        ``MpsBackend``       the Apple GPU (``mps``)
xla        ``XlaBackend``       TPUs and other PJRT devices (``xla:0`` ...) through torch_xla
xpu        ``XpuBackend``       Intel GPUs (``xpu:0`` ...)
=========  ===================  =====================================================================
"""

from __future__ import annotations

from .base import DTYPES, AmpPolicy, Backend, BackendUnavailable
from .cpu import CpuBackend
from .cuda import CudaBackend, RocmBackend
from .mps import MpsBackend
from .xla import XlaBackend
from .xpu import XpuBackend

CLASSES: dict[str, type[Backend]] = {
    cls.name: cls for cls in (CpuBackend, CudaBackend, RocmBackend, MpsBackend, XlaBackend, XpuBackend)
}
NAMES: tuple[str, ...] = tuple(CLASSES)

__all__ = [
    "DTYPES",
    "AmpPolicy",
    "Backend",
    "BackendUnavailable",
    "CLASSES",
    "NAMES",
    "get",
    "backend_class",
    "accelerator_names",
    "is_accelerator",
    "for_device",
]


def backend_class(name: str) -> type[Backend]:
    """The class of backend ``name``; ValueError naming the allowed ones."""
    try:
        return CLASSES[name]
    except (KeyError, TypeError):
        raise ValueError(f"backend: unknown {name!r}; allowed: {', '.join(NAMES)}") from None


def get(name: str, torch=None, xla=None, **kwargs) -> Backend:
    """A backend object; ``torch``/``xla`` replace the real modules (tests pass fakes)."""
    return backend_class(name)(torch=torch, xla=xla, **kwargs)


def is_accelerator(name: str) -> bool:
    """A device beside the host (False for the CPU and for names no backend has)."""
    cls = CLASSES.get(str(name))
    return bool(cls and cls.is_accelerator)


def accelerator_names() -> tuple[str, ...]:
    return tuple(n for n in NAMES if CLASSES[n].is_accelerator)


def for_device(device: str, torch=None, xla=None) -> Backend:
    """The backend a torch device string belongs to (``cuda:1`` -> cuda or rocm, by the build)."""
    kind = device.split(":")[0]
    for name in NAMES:
        b = get(name, torch=torch, xla=xla)
        if b.device_type == kind and b.owns(device):
            return b
    raise ValueError(f"device: unknown {device!r}; allowed: cpu, mps, cuda:N, xla:N, xpu:N")
