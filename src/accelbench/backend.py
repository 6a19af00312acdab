"""Per-backend logic in one place: which devices a backend has, how to wait for them,
which low-precision dtype AMP uses there.

Everything that differs between CUDA, ROCm, MPS, XLA and the CPU is decided here, so the
stage modules (warmup, matmul, transfer, amp) stay backend-agnostic. The functions take the
``torch`` module as an argument where that helps tests substitute a fake one: the CUDA, ROCm,
MPS and XLA paths cannot run on a CPU-only machine, but their dispatch logic can be tested.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import resource
import timeit
from dataclasses import dataclass
from typing import Callable

BACKENDS = ("cpu", "cuda", "rocm", "mps", "xla")


class BackendUnavailable(RuntimeError):
    """The backend was requested but this machine (or this torch build) does not have it."""


def _torch():
    import torch

    return torch


def _xla():
    """torch_xla's module, or None when it is not installed."""
    try:
        return importlib.import_module("torch_xla")
    except Exception:  # ImportError, or a broken install raising anything at import
        return None


def is_rocm_build(torch=None) -> bool:
    """ROCm builds of PyTorch expose the GPU through the ``cuda`` device type; ``torch.version.hip`` tells them apart."""
    torch = torch or _torch()
    return getattr(torch.version, "hip", None) is not None


def device_strings(backend: str, torch=None, xla=None) -> list[str]:
    """Every visible device of ``backend`` as torch device strings, in index order.

    ``cuda`` and ``rocm`` are both ``cuda:i`` in PyTorch; each is only reported by the build it
    belongs to, so a ROCm machine never lists its GPUs as CUDA ones (and the reverse).
    Raises BackendUnavailable when the backend has no device here.
    """
    torch = torch or _torch()
    if backend == "cpu":
        return ["cpu"]
    if backend in ("cuda", "rocm"):
        want_rocm = backend == "rocm"
        if is_rocm_build(torch) != want_rocm or not torch.cuda.is_available():
            raise BackendUnavailable(f"backend {backend!r}: no {backend.upper()} device visible to this torch build")
        return [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if backend == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise BackendUnavailable("backend 'mps': torch.backends.mps.is_available() is False")
        return ["mps"]
    if backend == "xla":
        xla = xla if xla is not None else _xla()
        if xla is None:
            raise BackendUnavailable("backend 'xla': torch_xla is not installed (pip install 'accelbench[xla]')")
        devices = xla.devices() if hasattr(xla, "devices") else []
        if not devices:
            raise BackendUnavailable("backend 'xla': torch_xla.devices() is empty")
        return [str(d) for d in devices]
    raise ValueError(f"backend: unknown {backend!r}; allowed: {', '.join(BACKENDS)}")


def backend_of(device: str, torch=None) -> str:
    """The backend a torch device string belongs to (``cuda:1`` -> cuda or rocm by the build)."""
    kind = device.split(":")[0]
    if kind == "cuda":
        return "rocm" if is_rocm_build(torch) else "cuda"
    if kind in ("cpu", "mps", "xla"):
        return kind
    raise ValueError(f"device: unknown {device!r}")


@contextlib.contextmanager
def float32_math(backend: str, tf32: bool, torch=None):
    """float32 math for one measurement or trial; the previous settings are restored afterwards.

    - strict (``tf32=False``), on every backend: matmul precision "highest" (on the CPU a lower
      setting lets oneDNN compute float32 products in bf16) and TF32 off in cuBLAS and cuDNN;
    - ``tf32=True``: TF32 allowed in cuBLAS and cuDNN, on NVIDIA CUDA only. Elsewhere (ROCm builds
      expose the same flags) strict math is kept.

    Yields whether TF32 is in effect: what a row records as ``allow_tf32``. Only PyTorch's
    long-standing switches are used: mixing them with the newer ``fp32_precision`` API in one
    process makes torch raise.
    """
    torch = torch or _torch()
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    before = (torch.get_float32_matmul_precision(), matmul.allow_tf32, cudnn.allow_tf32)
    use_tf32 = bool(tf32) and backend == "cuda"
    try:
        if not use_tf32:
            torch.set_float32_matmul_precision("highest")
        matmul.allow_tf32 = cudnn.allow_tf32 = use_tf32
        yield use_tf32
    finally:  # the flags first: setting allow_tf32 also resets the precision ("medium" would become "high")
        matmul.allow_tf32, cudnn.allow_tf32 = before[1], before[2]
        torch.set_float32_matmul_precision(before[0])


def synchronizer(device: str, torch=None, xla=None) -> Callable[[], None]:
    """A function that returns only when all work queued on ``device`` has finished.

    - CPU: kernels run synchronously, nothing to wait for.
    - CUDA / ROCm: ``torch.cuda.synchronize(device)`` (HIP maps onto the same API).
    - MPS: ``torch.mps.synchronize()`` (one device).
    - XLA: the graph is lazy: ``torch_xla.sync()`` cuts and launches it, then
      ``torch_xla.core.xla_model.wait_device_ops()`` waits for it (``xm.mark_step`` on old releases).
    """
    torch = torch or _torch()
    kind = device.split(":")[0]
    if kind == "cpu":
        return lambda: None
    if kind == "cuda":
        return lambda: torch.cuda.synchronize(device)
    if kind == "mps":
        return torch.mps.synchronize
    if kind == "xla":
        xla = xla if xla is not None else _xla()
        if xla is None:
            raise BackendUnavailable("device 'xla': torch_xla is not installed")
        xm = importlib.import_module("torch_xla.core.xla_model")
        cut = getattr(xla, "sync", None) or xm.mark_step

        def _sync_xla() -> None:
            cut()
            xm.wait_device_ops()

        return _sync_xla
    raise ValueError(f"device: unknown {device!r}")


def synced_timer(device: str, torch=None, xla=None) -> Callable[[], float]:
    """A ``timer`` for ``torch.utils.benchmark.Timer``: waits for the device, then reads the clock.

    torch.utils.benchmark's own default syncs ``torch.accelerator`` (the *current* CUDA/MPS device
    only, and never XLA); passing this makes every device, ``cuda:3`` and XLA included, measured
    from the moment its queued work finished.
    """
    sync = synchronizer(device, torch=torch, xla=xla)
    if device.split(":")[0] == "cpu":
        return timeit.default_timer

    def _timer() -> float:
        sync()
        return timeit.default_timer()

    return _timer


@dataclass(frozen=True)
class AmpPolicy:
    """How AMP runs on one backend: autocast's device_type and dtype, and whether a GradScaler is needed."""

    device_type: str
    dtype: str  # "float16" or "bfloat16"
    use_scaler: bool

    def scaler(self, torch=None):
        """``torch.amp.GradScaler(device_type)`` when fp16 needs loss scaling, else None."""
        if not self.use_scaler:
            return None
        torch = torch or _torch()
        return torch.amp.GradScaler(self.device_type)


# The low-precision dtype each backend trains in when the config says "auto".
AMP_DEFAULT_DTYPE = {
    "cuda": "float16",  # tensor cores; the classic AMP recipe with GradScaler
    "rocm": "float16",  # matrix cores; same recipe through the cuda device type
    "mps": "float16",   # Apple GPUs: fp16 autocast
    "cpu": "bfloat16",  # CPU autocast supports bf16 (native on AVX512-BF16/AMX)
    "xla": "bfloat16",  # TPUs compute in bf16
}


def amp_policy(backend: str, requested: str = "auto") -> AmpPolicy:
    """The AMP mode for ``backend``: autocast device type, low-precision dtype, GradScaler or not.

    fp16 has a narrow exponent range, so small gradients underflow: it needs loss scaling
    (``torch.amp.GradScaler``), wherever it runs. bf16 keeps fp32's exponent range and does not.
    """
    if backend not in AMP_DEFAULT_DTYPE:
        raise ValueError(f"backend: unknown {backend!r}; allowed: {', '.join(BACKENDS)}")
    dtype = AMP_DEFAULT_DTYPE[backend] if requested == "auto" else requested
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"amp.dtype: unknown {requested!r}; allowed: auto, bfloat16, float16")
    device_type = {"rocm": "cuda"}.get(backend, backend)
    return AmpPolicy(device_type=device_type, dtype=dtype, use_scaler=(dtype == "float16"))


# ---- peak memory, per backend (AMP trials) ---------------------------------------------

def _proc_status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def reset_peak_memory(device: str, torch) -> bool:
    """Start a fresh peak for ``device``. True when the counter is per trial.

    CPU: Linux resets the process's peak resident set size (VmHWM) when 5 is written to
    /proc/self/clear_refs; where that is not possible the peak covers the whole process."""
    kind = device.split(":")[0]
    if kind == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return True
    if kind == "cpu":
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
            return _proc_status_bytes("VmHWM") is not None
        except OSError:
            return False
    return kind == "xla"


def peak_memory(device: str, torch, per_trial: bool = True) -> tuple[float, str]:
    """(bytes, mem_kind) after a trial.

    - CUDA/ROCm: ``torch.cuda.max_memory_allocated`` (tensors; the caching allocator's reserve excluded), ``allocator``;
    - MPS: ``torch.mps.driver_allocated_memory()`` at the end (Metal has no peak counter), ``mps_driver``;
    - XLA: ``peak_bytes_used`` of ``xm.get_memory_info`` where the runtime reports it, ``allocator``;
    - CPU: peak resident set size of the whole process, ``rss`` (per trial, reset before it) or
      ``rss_process_peak`` (since the process started, where the reset is not possible).
    """
    kind = device.split(":")[0]
    if kind == "cuda":
        return float(torch.cuda.max_memory_allocated(device)), "allocator"
    if kind == "mps":
        return float(torch.mps.driver_allocated_memory()), "mps_driver"
    if kind == "xla":
        try:
            import torch_xla.core.xla_model as xm

            info = xm.get_memory_info(torch.device(device))
            if "peak_bytes_used" in info:
                return float(info["peak_bytes_used"]), "allocator"
        except Exception:
            pass
        return math.nan, "none"
    hwm = _proc_status_bytes("VmHWM") if per_trial else None
    if hwm is not None:
        return float(hwm), "rss"
    maxrss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return float(maxrss_kb * 1024), "rss_process_peak"
