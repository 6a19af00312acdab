"""What every backend must say about itself, and the defaults most of them share.

A *backend* is a kind of device PyTorch drives (the CPU, NVIDIA CUDA, AMD ROCm, Apple MPS, XLA/TPU,
Intel XPU). Everything that differs between kinds lives in one subclass of ``Backend`` per kind, in
the spirit of mamf-finder's ``CudaLikeArch``/``NVIDIAArch``: how to list the devices, how to wait for
them, which dtypes they multiply, which low-precision dtype AMP uses and whether it needs a
GradScaler, how memory is counted, what the datasheet peak is, which collective library and which
telemetry source they have. The stages ask a backend object and never compare kind strings.

Each backend takes the ``torch`` module (and ``torch_xla`` where it matters) as constructor
arguments, so the CUDA, ROCm, MPS, XLA and XPU paths - which cannot run on a CPU-only machine - are
unit-tested with fake modules. Those paths are **untested on hardware**.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import timeit
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from ..measure import telemetry as telemetry_readers
from . import bandwidth, peaks

# The matmul dtypes a sweep may ask for (the schema's ``dtype`` enum says the same).
DTYPES = peaks.DTYPES
FP8 = "float8_e4m3fn"


class BackendUnavailable(RuntimeError):
    """The backend was requested but this machine (or this torch build) does not have it."""


@dataclass(frozen=True)
class AmpPolicy:
    """How AMP runs on one backend: autocast's device_type and dtype, and whether a GradScaler is needed."""

    device_type: str
    dtype: str  # "float16" or "bfloat16"
    use_scaler: bool

    def scaler(self, torch):
        """``torch.amp.GradScaler(device_type)`` when fp16 needs loss scaling, else None."""
        if not self.use_scaler:
            return None
        return torch.amp.GradScaler(self.device_type)


AMP_DTYPES = ("bfloat16", "float16")


def torch_version_tuple(version) -> tuple[int, int]:
    """'2.7.1+cpu' -> (2, 7); unparsable -> (0, 0)."""
    try:
        major, minor = str(version).split("+")[0].split(".")[:2]
        return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)
    except ValueError:
        return 0, 0


FP32_PRECISION_MIN_TORCH = (2, 9)  # the fp32_precision API replaces allow_tf32 from here (torch's CUDA notes)


def fp32_precision_api(torch) -> bool:
    """Whether ``torch`` sets float32 math through ``fp32_precision`` (>= 2.9, and the attributes there)."""
    b = getattr(torch, "backends", None)
    if torch_version_tuple(getattr(torch, "__version__", "0.0")) < FP32_PRECISION_MIN_TORCH or b is None:
        return False
    try:
        return hasattr(b.cuda.matmul, "fp32_precision") and hasattr(b.cudnn.conv, "fp32_precision")
    except AttributeError:
        return False


def proc_status_bytes(field: str, path: str = "/proc/self/status") -> int | None:
    """A ``kB`` field of /proc/self/status (VmHWM, VmRSS) in bytes, or None where there is none."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class Backend:
    """One kind of device. Subclasses set the class attributes and override what differs."""

    name: ClassVar[str]  # config/CLI name: cpu, cuda, rocm, mps, xla, xpu
    device_type: ClassVar[str]  # torch device type of its devices (rocm's GPUs are "cuda")
    title: ClassVar[str]  # for people: "NVIDIA CUDA"
    is_accelerator: ClassVar[bool] = True  # a device beside the host: host<->device copies, compared with the CPU
    needs_gpu_resource: ClassVar[bool] = False  # a scheduler must grant it a GPU (SLURM --gpus, gpu=1)
    gpu_manufacturer: ClassVar[str | None] = None  # the GPU's maker as the Kubernetes executor names it
    has_image: ClassVar[bool] = False  # containers/<name>/Containerfile exists
    amp_default_dtype: ClassVar[str] = "float16"
    collective: ClassVar[str | None] = None  # torch.distributed backend for several ranks
    telemetry: ClassVar[str | None] = None  # where clocks, power and temperature are read
    default_cache_bytes: ClassVar[int] = 64 * 1024**2  # last-level cache when the device does not say
    host_threads: ClassVar[int | None] = 1  # threads a stage of this backend needs (None: the CPU cores granted)
    install_hint: ClassVar[str] = ""

    def __init__(self, torch=None, xla=None, import_module: Callable = importlib.import_module):
        self._torch = torch
        self._xla = xla
        self._import = import_module

    def __repr__(self) -> str:
        return f"<backend {self.name}>"

    # ---- modules ----------------------------------------------------------------------------------
    @property
    def torch(self):
        if self._torch is None:
            import torch  # deliberately lazy: the registry of names must import without torch

            self._torch = torch
        return self._torch

    # ---- devices ----------------------------------------------------------------------------------
    def devices(self) -> list[str]:
        """The devices a stage measures in this process, as torch device strings in index order
        (every visible one, except where one process can drive only one: XLA); BackendUnavailable when none."""
        raise NotImplementedError

    def prepare_process(self) -> None:
        """Process-wide settings this backend needs before a stage traces or runs anything on its devices
        (XLA: strict float32 matmul precision, which must be set before the first graph is compiled).
        ``stages.common.start`` calls it once, when the backend has devices."""

    def owns(self, device: str) -> bool:
        """Whether ``device`` (a torch device string) is one of this backend's kind."""
        return device.split(":")[0] == self.device_type

    def probe(self) -> dict:
        """This backend's entry in devices.json: ``present``, ``devices`` (dicts with at least
        ``device`` and ``name``), and ``reason`` when absent. Never raises for an absent backend."""
        try:
            devices = self.devices()
        except BackendUnavailable as exc:
            return {"present": False, "devices": [], "reason": str(exc)}
        return {"present": True, "devices": [self.device_info(d) for d in devices]}

    def device_info(self, device: str) -> dict:
        """What the stages need about one device: always ``device`` and ``name``; more where known
        (what ``peaks`` reads: SMs/CUs, architecture, CPU flags and clock)."""
        return {"device": device, "name": device}

    def peak_info(self, entry: dict) -> dict:
        """What the peak of a device listed by ``probe`` is computed from (the entry itself, by default)."""
        return entry

    # ---- waiting for the device -------------------------------------------------------------------
    def synchronize(self, device: str) -> None:
        """Return only when all work queued on ``device`` has finished."""

    def synchronizer(self, device: str) -> Callable[[], None]:
        return lambda: self.synchronize(device)

    def synced_timer(self, device: str) -> Callable[[], float]:
        """A ``timer`` for ``torch.utils.benchmark.Timer``: waits for the device, then reads the clock.

        torch.utils.benchmark's own default syncs ``torch.accelerator`` (the *current* device only,
        and never XLA); passing this makes every device measured from the moment its work finished."""
        sync = self.synchronizer(device)

        def _timer() -> float:
            sync()
            return timeit.default_timer()

        return _timer

    def graph_cut(self) -> Callable[[], None] | None:
        """For lazy backends (XLA): a call that cuts the traced graph after each timed op, so a block
        of calls executes every one of them. None for eager backends."""
        return None

    def device_scope(self, device: str):
        """A context in which ``device`` is the current device of its kind (CUDA's ``torch.cuda.device``)."""
        return contextlib.nullcontext()

    # ---- precision --------------------------------------------------------------------------------
    def tf32_available(self, info: dict | None = None) -> str | None:
        """None when float32 matmuls may run as TF32 here; else why not (one line)."""
        return f"tf32 is an NVIDIA tensor-core mode (torch.backends.cuda.matmul.allow_tf32); not on {self.name}"

    @contextlib.contextmanager
    def float32_math(self, tf32: bool):
        """float32 math for one measurement or trial; the previous settings are restored afterwards.

        - strict (``tf32=False``), on every backend: IEEE float32 in cuBLAS, cuDNN convolutions and oneDNN
          (on the CPU a lower setting lets oneDNN compute float32 products in bf16);
        - ``tf32=True``: TF32 allowed in cuBLAS and cuDNN, where ``tf32_available`` says so. Elsewhere
          (ROCm builds expose the same flags) strict math is kept.

        Yields whether TF32 is in effect: what a row records as ``allow_tf32``.

        Which switches: from torch 2.9 the ``fp32_precision`` API (``torch.backends.cuda.matmul``,
        ``torch.backends.cudnn.conv`` and ``torch.backends.mkldnn.matmul``: ``"ieee"`` / ``"tf32"``;
        https://docs.pytorch.org/docs/2.9/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices),
        as torch deprecates ``allow_tf32`` and ``set_float32_matmul_precision`` after 2.9 and raises when a
        process mixes the two (a user who set the new API would make the legacy reads raise). Before 2.9 the
        long-standing switches. Only one of the two is touched in a process.
        """
        if fp32_precision_api(self.torch):
            with self._float32_math_fp32_precision(tf32) as used:
                yield used
            return
        torch = self.torch
        matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
        before = (torch.get_float32_matmul_precision(), matmul.allow_tf32, cudnn.allow_tf32)
        use_tf32 = bool(tf32) and self.tf32_available() is None
        try:
            if not use_tf32:
                torch.set_float32_matmul_precision("highest")
                self.strict_float32()
            matmul.allow_tf32 = cudnn.allow_tf32 = use_tf32
            yield use_tf32
        finally:  # the flags first: setting allow_tf32 also resets the precision ("medium" would become "high")
            matmul.allow_tf32, cudnn.allow_tf32 = before[1], before[2]
            torch.set_float32_matmul_precision(before[0])

    @contextlib.contextmanager
    def _float32_math_fp32_precision(self, tf32: bool):
        """``float32_math`` through torch >= 2.9's ``fp32_precision`` settings, each restored afterwards."""
        b = self.torch.backends
        nodes = [b.cuda.matmul, b.cudnn.conv]
        rnn = getattr(b.cudnn, "rnn", None)  # with conv: torch raises on a legacy read when the two differ
        try:  # torch.backends.mkldnn.matmul (CPU oneDNN), where this torch has it
            mkldnn = b.mkldnn.matmul
        except AttributeError:
            mkldnn = None
        nodes += [n for n in (rnn, mkldnn) if n is not None and hasattr(n, "fp32_precision")]
        before = [n.fp32_precision for n in nodes]
        use_tf32 = bool(tf32) and self.tf32_available() is None
        try:
            if use_tf32:
                for n in nodes[:3] if rnn is not None else nodes[:2]:
                    n.fp32_precision = "tf32"
            else:
                for n in nodes:
                    n.fp32_precision = "ieee"
                self.strict_float32()
            yield use_tf32
        finally:
            for n, value in reversed(list(zip(nodes, before))):
                n.fp32_precision = value

    def strict_float32(self) -> None:
        """Anything beyond torch's matmul precision a backend needs for IEEE float32 products
        (``torch.set_float32_matmul_precision`` governs CUDA and the CPU only; XLA has its own switch)."""

    def fp8_support(self, info: dict) -> str | None:
        """None when fp8 products (``torch._scaled_mm``) run on this device; else why not."""
        return f"torch._scaled_mm has no {self.name} kernel"

    def fp8_dtype(self, info: dict) -> str:
        """The torch fp8 dtype this device multiplies (``float8_e4m3fn`` on most; the configured dtype
        ``float8_e4m3fn`` names the 8-bit e4m3 *kind*, this the exact torch dtype a row records as ``torch_dtype``)."""
        return FP8

    def dtype_support(self, dtype: str, info: dict | None = None) -> str | None:
        """None when ``dtype`` can be measured on the device ``info`` describes; else the reason (one line)."""
        info = info or {}
        if dtype not in DTYPES:
            return f"dtype {dtype!r} unknown; allowed: {', '.join(DTYPES)}"
        if dtype == "tf32":
            return self.tf32_available(info)
        if dtype == FP8:
            if not hasattr(self.torch, "_scaled_mm"):
                return "this torch has no torch._scaled_mm"
            return self.fp8_support(info)
        return None

    def amp_policy(self, requested: str = "auto") -> AmpPolicy:
        """The AMP mode here: autocast device type, low-precision dtype, GradScaler or not.

        fp16 has a narrow exponent range, so small gradients underflow: it needs loss scaling
        (``torch.amp.GradScaler``), wherever it runs. bf16 keeps fp32's exponent range and does not.
        """
        dtype = self.amp_default_dtype if requested == "auto" else requested
        if dtype not in AMP_DTYPES:
            raise ValueError(f"amp.dtype: unknown {requested!r}; allowed: auto, {', '.join(AMP_DTYPES)}")
        return AmpPolicy(device_type=self.device_type, dtype=dtype, use_scaler=(dtype == "float16"))

    def amp_support(self, policy: AmpPolicy) -> str | None:
        """None when this torch can train with ``policy`` here; else why not (version floors)."""
        return None

    def amp_note(self, info: dict, dtype: str) -> str:
        """A sentence for the AMP summary when this device computes ``dtype`` slowly (emulated); else ""."""
        return ""

    def compile_support(self) -> str:
        """Why ``torch.compile`` (inductor) cannot run on this backend's devices here, or "" when it can."""
        return ""

    # ---- memory -----------------------------------------------------------------------------------
    def reset_peak_memory(self, device: str) -> bool:
        """Start a fresh peak for ``device``; True when the peak that follows is per trial."""
        return False

    def peak_memory(self, device: str, per_trial: bool = True) -> tuple[float, str]:
        """(bytes, mem_kind) after a trial; (NaN, "none") where nothing is counted."""
        return math.nan, "none"

    def free_bytes(self, device: str) -> int:
        """Memory free for new tensors on ``device`` (bounds the inputs a sweep allocates)."""
        return 4 * 1024**3

    def memory_capacity(self, device: str) -> int | None:
        """Total memory of ``device`` in bytes, where known."""
        return None

    def empty_cache(self, device: str) -> None:
        """Give cached blocks back to the device (after an OOM, before a trial)."""

    def cache_bytes(self, device: str, info: dict | None = None) -> int:
        """The last-level cache a rotation of inputs must overflow to keep operands cache-cold."""
        return self.default_cache_bytes

    def reference_device(self, device: str) -> str:
        """Where float64 reference products are computed (devices without fast float64: the CPU)."""
        return "cpu"

    def is_oom(self, exc: BaseException) -> bool:
        """Whether ``exc`` means the device ran out of memory."""
        oom_type = getattr(self.torch, "OutOfMemoryError", None)
        if (oom_type is not None and isinstance(exc, oom_type)) or isinstance(exc, MemoryError):
            return True
        msg = str(exc).lower()
        return "out of memory" in msg or "can't allocate memory" in msg or "failed to allocate" in msg

    # ---- peaks ------------------------------------------------------------------------------------
    def peak_tflops(
        self, info: dict, dtype: str, threads: int | None = None, overrides: dict | None = None
    ) -> tuple[float | None, str]:
        """Theoretical peak TFLOP/s of the device ``info`` describes for ``dtype``, and its source.

        ``overrides`` is the config's ``matmul.peak_tflops`` ({backend: {dtype: TFLOP/s}}) and wins.
        """
        override = ((overrides or {}).get(self.name) or {}).get(dtype)
        if override is not None:
            return float(override), f"config matmul.peak_tflops.{self.name}.{dtype} = {override}"
        if dtype not in DTYPES:
            return None, f"dtype: unknown {dtype!r}; allowed: {', '.join(DTYPES)}"
        return self.table_peak(info, dtype, threads)

    def table_peak(self, info: dict, dtype: str, threads: int | None) -> tuple[float | None, str]:
        return peaks.gpu_peak(info, dtype)

    def peak_is_bound(self, info: dict, overridden: bool) -> bool:
        """Whether the peak is a true upper bound (above it a point is ``invalid``)."""
        return True

    # ---- telemetry ----------------------------------------------------------------------------------
    def telemetry_reader(self, device: str, info: dict | None = None) -> telemetry_readers.Reader:
        """The reader of ``device``'s clock, power, temperature, energy and throttling while it is measured
        (``measure.telemetry``; its ``source`` is this backend's ``telemetry``). Where there is none, a
        ``NullReader`` saying why, so every value is null and the report can say why."""
        return telemetry_readers.NullReader(self.telemetry_missing_reason())

    def telemetry_missing_reason(self) -> str:
        """Why this kind of device has no telemetry reader (one line)."""
        return f"{self.title}: no telemetry reader for this kind of device yet"

    def peak_gbps(self, info: dict, overrides: dict | None = None) -> tuple[float | None, str]:
        """Peak bandwidth of the device's own memory in GB/s, and its source (``membw``, the roofline).

        ``overrides`` is the config's ``membw.peak_gbps`` ({backend: GB/s}) and wins."""
        override = (overrides or {}).get(self.name)
        if override is not None:
            return float(override), f"config membw.peak_gbps.{self.name} = {override}"
        return self.table_bandwidth(info)

    def table_bandwidth(self, info: dict) -> tuple[float | None, str]:
        return bandwidth.device_peak_gbps(info)

    # ---- host <-> device copies -------------------------------------------------------------------
    def pinned_memory_support(self) -> str | None:
        """None when host memory can be pinned for copies to this device; else why not."""
        return None

    # ---- several devices: DDP ranks, DataParallel, device-to-device copies (stages/scaling.py) -------
    def scaling_support(self) -> str | None:
        """None when DistributedDataParallel can train on this backend's devices; else why not (one line)."""
        return None if self.collective else f"{self.name}: no torch.distributed backend for its devices"

    def max_world_size(self, devices: list[str], threads: int) -> int:
        """The most ranks one node runs: one per device (the CPU overrides: one per granted core)."""
        return len(devices)

    def threads_per_rank(self, threads: int, max_world_size: int) -> int:
        """Host threads each rank uses: ``host_threads`` (one to feed its device) on accelerators."""
        return self.host_threads or 1

    def rank_device(self, local_rank: int, devices: list[str]) -> str:
        """The device the rank ``local_rank`` of a node trains on: its own device."""
        return devices[local_rank]

    def bind_rank(self, device: str) -> None:
        """Make ``device`` this rank process's current device before its process group starts."""

    def process_group_options(self, device: str) -> dict:
        """Keyword arguments of ``torch.distributed.init_process_group`` for a rank on ``device``
        (``timeout`` is added by the caller)."""
        return {"backend": self.collective}

    def ddp_options(self, device: str) -> dict:
        """Keyword arguments of ``DistributedDataParallel`` for a model on ``device``."""
        return {}

    def data_parallel_support(self, n_devices: int) -> str | None:
        """None when ``nn.DataParallel`` can split a batch over ``n_devices`` devices of this process."""
        return f"nn.DataParallel splits one process's batch over CUDA/ROCm GPUs (torch.cuda only); not on {self.name}"

    def data_parallel(self, model, devices: list[str]):
        """``model`` wrapped in ``nn.DataParallel`` over ``devices`` (the first one gathers the outputs)."""
        raise NotImplementedError(self.data_parallel_support(len(devices)))

    def peer_copy_support(self, n_devices: int) -> str | None:
        """None when copies between two devices of this backend can be measured; else why not."""
        return (
            f"device-to-device copies need at least 2 devices of one kind with peer access; {self.name} "
            f"has {n_devices} and no peer-copy path here"
        )

    def can_access_peer(self, src: str, dst: str) -> bool:
        """Whether ``src`` and ``dst`` can copy directly (peer-to-peer), without staging through the host."""
        return False

    # ---- containers -------------------------------------------------------------------------------
    def engine_device_args(self, runtime: str, device_gids: tuple[int, ...] = (), rootless: bool = False) -> list[str]:
        """``docker|podman run`` arguments that give a container this backend's devices. ``device_gids``: the
        host groups owning the device nodes; ``rootless``: Podman runs without root (``--userns=keep-id``)."""
        return []

    def visible_devices_variable(self) -> str | None:
        """The environment variable that hides devices of this kind from a process."""
        return None

    def visible_devices(self) -> str | None:
        var = self.visible_devices_variable()
        return os.environ.get(var) if var else None
