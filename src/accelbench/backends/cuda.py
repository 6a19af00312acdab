"""GPUs driven through PyTorch's ``cuda`` device type: NVIDIA (CUDA) and AMD (ROCm/HIP).

A ROCm build of PyTorch exposes AMD GPUs as ``cuda:i`` too; ``torch.version.hip`` tells the builds
apart, so each backend lists only the GPUs of the build it belongs to (a ROCm machine never reports
its GPUs as CUDA ones). What the two share - the device API, synchronization, the caching allocator,
NCCL/RCCL - is ``CudaLikeBackend``; what differs (TF32, fp8 architectures, caches, drivers, container
device flags, telemetry) is in ``CudaBackend`` and ``RocmBackend``.

Every path here is **untested on hardware**: unit tests drive it with a fake ``torch`` module.
"""

from __future__ import annotations

import importlib
import subprocess
from collections.abc import Callable
from pathlib import Path

from ..measure import telemetry as telemetry_readers
from ._system import Runner, read_file, run_text
from .base import FP8, Backend, BackendUnavailable, torch_version_tuple

# The fp8 point checks its product against float64 on sampled rows (``index_select`` on the fp8 inputs):
# CUDA and ROCm kernels of index_select for the float8 dtypes exist from torch 2.6 on (the 2.4/2.5 builds
# raise '"index_select_cuda" not implemented for 'Float8_e4m3fn'', pytorch/pytorch#128370 and #133605).
FP8_MIN_TORCH = (2, 6)
# gfx94x (MI300X/MI325X, CDNA3) multiply only the "fnuz" fp8 encodings (no negative zero, NaN = 0x80, bias 8):
# hipBLASLt's data-type page says "hipblaslt_f8_fnuz and hipblaslt_bf8_fnuz ... are only supported on the gfx942
# platform", the OCP e4m3fn/e5m2 on gfx950 and gfx12 (https://rocm.docs.amd.com/projects/hipBLASLt/en/latest/
# reference/data-type-support.html, read 2026-12-01), and PyTorch's _scaled_mm_is_fnuz()
# (aten/src/ATen/native/cuda/ScaledBlas.cpp) is true on gfx942 (gfx940/gfx941/gfx942 in older releases).
FNUZ_ARCHS = ("gfx940", "gfx941", "gfx942")


def nvidia_driver_version(
    import_module: Callable = importlib.import_module, run: Runner = subprocess.run
) -> tuple[str | None, str]:
    """(driver version, how it was read): pynvml when importable, else ``nvidia-smi`` (10 s timeout)."""
    try:
        nvml = import_module("pynvml")
        nvml.nvmlInit()
        try:
            version = nvml.nvmlSystemGetDriverVersion()
        finally:
            nvml.nvmlShutdown()
        if isinstance(version, bytes):
            version = version.decode()
        return str(version), "pynvml"
    except Exception:
        pass
    text = run_text(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], run=run)
    if text and text.strip():
        return text.strip().splitlines()[0].strip(), "nvidia-smi"
    return None, "unavailable (no pynvml, no nvidia-smi)"


def amdgpu_driver_version(sys_root: Path = Path("/sys")) -> str | None:
    """The amdgpu kernel module's version (DKMS installs); None for the in-tree module."""
    text = read_file(sys_root / "module" / "amdgpu" / "version")
    return text.strip() if text else None


def device_index(device: str) -> int:
    return int(device.split(":")[1]) if ":" in device else 0


class CudaLikeBackend(Backend):
    """What NVIDIA and AMD GPUs share through ``torch.cuda``."""

    device_type = "cuda"
    needs_gpu_resource = True
    has_image = True
    amp_default_dtype = "float16"  # tensor/matrix cores; the classic AMP recipe with GradScaler
    collective = "nccl"  # RCCL on ROCm, under the same name in torch.distributed
    wants_rocm: bool = False

    def __init__(
        self,
        torch=None,
        xla=None,
        import_module: Callable = importlib.import_module,
        *,
        run: Runner = subprocess.run,
        sys_root: Path = Path("/sys"),
    ):
        super().__init__(torch, xla, import_module)
        self.run = run  # nvidia-smi and friends (tests pass a fake)
        self.sys_root = sys_root  # where /sys/module/amdgpu lives (tests pass a fixture tree)

    def is_this_build(self) -> bool:
        return (getattr(self.torch.version, "hip", None) is not None) == self.wants_rocm

    def devices(self) -> list[str]:
        torch = self.torch
        if not self.is_this_build() or not torch.cuda.is_available():
            raise BackendUnavailable(
                f"backend {self.name!r}: no {self.name.upper()} device visible to this torch build"
            )
        return [f"cuda:{i}" for i in range(torch.cuda.device_count())]

    def owns(self, device: str) -> bool:
        return super().owns(device) and self.is_this_build()

    # ---- detection
    def absence_reason(self, exc: Exception) -> str:
        raise NotImplementedError

    def driver_entry(self) -> dict:
        raise NotImplementedError

    def probe(self) -> dict:
        """Every device, runtime/driver/cuDNN (MIOpen) versions, or why absent."""
        entry: dict = {"present": False, "devices": [], **self.driver_entry()}
        try:
            devices = self.devices()
        except BackendUnavailable as exc:
            entry["reason"] = self.absence_reason(exc)
            return entry
        except Exception as exc:  # a broken driver can make is_available() raise
            entry["reason"] = f"probing {self.name} failed: {type(exc).__name__}: {exc}"
            return entry
        if not devices:
            entry["reason"] = "torch.cuda.device_count() is 0"
            return entry
        entry["present"] = True
        try:
            v = self.torch.backends.cudnn.version()
        except Exception:
            v = None
        entry[self.dnn_library_key] = v
        entry["devices"] = [self.device_info(d) for d in devices]
        return entry

    dnn_library_key = "cudnn_version"

    def device_info(self, device: str) -> dict:
        """One device as ``torch.cuda.get_device_properties`` describes it."""
        index = device_index(device)
        out: dict = {"device": device, "index": index}
        try:
            p = self.torch.cuda.get_device_properties(index)
        except Exception as exc:
            out.update(name=f"unknown ({device})", error=f"{type(exc).__name__}: {exc}")
            return out
        out.update(
            name=str(p.name),
            compute_capability=f"{p.major}.{p.minor}",
            multiprocessors=int(p.multi_processor_count),
            total_memory_bytes=int(p.total_memory),
        )
        l2 = getattr(p, "L2_cache_size", None)
        if l2 is not None:
            out["l2_cache_bytes"] = int(l2)
        uuid = getattr(p, "uuid", None)
        if uuid is not None:
            out["uuid"] = str(uuid)
        bus = getattr(p, "pci_bus_id", None)  # torch's device properties: domain, bus and device numbers
        if isinstance(bus, int):
            domain, dev = getattr(p, "pci_domain_id", 0), getattr(p, "pci_device_id", 0)
            out["pci_bus_id"] = f"{int(domain or 0):04x}:{bus:02x}:{int(dev or 0):02x}.0"  # how amdsmi writes a BDF
        out.update(self.extra_properties(p))
        return out

    def extra_properties(self, props) -> dict:
        return {}

    # ---- precision
    def dtype_support(self, dtype: str, info: dict | None = None) -> str | None:
        """As ``Backend.dtype_support``, and fp8 only on a torch that can check an fp8 product (>= 2.6)."""
        reason = super().dtype_support(dtype, info)
        if reason is None and dtype == FP8:
            version = getattr(self.torch, "__version__", None)
            if version is not None and torch_version_tuple(version) < FP8_MIN_TORCH:
                need = ".".join(map(str, FP8_MIN_TORCH))
                return (
                    f"fp8 matmul needs torch >= {need} here (index_select of float8 tensors on {self.name}, "
                    f"which checks the product, arrives in {need}); this is torch {version}"
                )
        return reason

    # ---- waiting
    def synchronize(self, device: str) -> None:
        """``torch.cuda.synchronize(device)``: that device, not only the current one (HIP maps onto it)."""
        self.torch.cuda.synchronize(device)

    def device_scope(self, device: str):
        return self.torch.cuda.device(device)

    # ---- memory
    def reset_peak_memory(self, device: str) -> bool:
        self.torch.cuda.reset_peak_memory_stats(device)
        return True

    def peak_memory(self, device: str, per_trial: bool = True) -> tuple[float, str]:
        """``torch.cuda.max_memory_allocated``: tensors only, the caching allocator's reserve excluded."""
        return float(self.torch.cuda.max_memory_allocated(device)), "allocator"

    def free_bytes(self, device: str) -> int:
        try:
            self.torch.cuda.empty_cache()  # blocks cached from earlier points count as used otherwise
            return int(self.torch.cuda.mem_get_info(device)[0])
        except Exception:
            return super().free_bytes(device)

    def memory_capacity(self, device: str) -> int | None:
        try:
            return int(self.torch.cuda.get_device_properties(device_index(device)).total_memory)
        except Exception:
            return None

    def empty_cache(self, device: str) -> None:
        self.torch.cuda.empty_cache()

    def cache_bytes(self, device: str, info: dict | None = None) -> int:
        info = info if info is not None else self.device_info(device)
        return int(info.get("l2_cache_bytes") or 0) or self.default_cache_bytes

    def reference_device(self, device: str) -> str:
        return device

    def visible_devices_variable(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    def visible_devices_note(self) -> str:
        """' (visible-devices variable set to '…')' when the variable hides GPUs, for an absence reason; else ''."""
        visible = self.visible_devices()
        return f" (visible-devices variable set to {visible!r})" if visible is not None else ""

    # ---- several GPUs: NCCL (RCCL) ranks, nn.DataParallel, peer copies
    def bind_rank(self, device: str) -> None:
        """``torch.cuda.set_device``: NCCL and DDP use the current device of each rank."""
        self.torch.cuda.set_device(device_index(device))

    def process_group_options(self, device: str) -> dict:
        """nccl, bound to the rank's GPU (``device_id`` lets NCCL set up its communicator eagerly)."""
        return {"backend": self.collective, "device_id": self.torch.device(device)}

    def ddp_options(self, device: str) -> dict:
        index = device_index(device)
        return {"device_ids": [index], "output_device": index}

    def data_parallel_support(self, n_devices: int) -> str | None:
        if n_devices < 2:
            return f"nn.DataParallel needs at least 2 GPUs; {n_devices} visible"
        return None

    def data_parallel(self, model, devices: list[str]):
        """``nn.DataParallel(model, device_ids, output_device=first)``: the tutorial's single-process
        multi-GPU training, which scatters each batch and replicates the model on every step."""
        ids = [device_index(d) for d in devices]
        return self.torch.nn.DataParallel(model, device_ids=ids, output_device=ids[0])

    def peer_copy_support(self, n_devices: int) -> str | None:
        if n_devices < 2:
            return f"device-to-device copies need at least 2 GPUs; {n_devices} visible"
        return None

    def can_access_peer(self, src: str, dst: str) -> bool:
        """``torch.cuda.can_device_access_peer``: PyTorch enables peer access by itself for such pairs."""
        return bool(self.torch.cuda.can_device_access_peer(device_index(src), device_index(dst)))


class CudaBackend(CudaLikeBackend):
    """NVIDIA GPUs: TF32 from Ampere (8.0), fp8 from Ada/Hopper (8.9), NVML telemetry, CDI or ``--gpus``."""

    name = "cuda"
    gpu_manufacturer = "nvidia"
    title = "NVIDIA CUDA"
    telemetry = "nvml"
    install_hint = "a CUDA build of torch and an NVIDIA driver"

    @staticmethod
    def capability(info: dict) -> tuple[int, int] | None:
        cc = info.get("compute_capability")
        try:
            major, minor = str(cc).split(".")
            return int(major), int(minor)
        except (ValueError, AttributeError):
            return None

    def driver_entry(self) -> dict:
        version, source = nvidia_driver_version(self._import, run=self.run)
        return {
            "driver_version": version,
            "driver_version_source": source,
            "runtime_version": getattr(self.torch.version, "cuda", None),
        }

    def absence_reason(self, exc: Exception) -> str:
        torch = self.torch
        cuda_v, hip_v = getattr(torch.version, "cuda", None), getattr(torch.version, "hip", None)
        if hip_v is not None:
            return f"this is a ROCm build of torch (torch.version.hip={hip_v}): its GPUs are listed under 'rocm'"
        if cuda_v is None:
            return "this torch build has no CUDA support (torch.version.cuda is None: a CPU-only wheel)"
        env_note = self.visible_devices_note()
        return (
            f"torch is built with CUDA {cuda_v} but sees no device: no NVIDIA GPU or driver visible{env_note} ({exc})"
        )

    def tf32_available(self, info: dict | None = None) -> str | None:
        cc = self.capability(info or {})
        if cc is not None and cc < (8, 0):
            return f"tf32 needs compute capability >= 8.0 (Ampere); this device has {cc[0]}.{cc[1]}"
        return None

    def fp8_support(self, info: dict) -> str | None:
        cc = self.capability(info)
        if cc is not None and cc < (8, 9):
            return f"fp8 matmul needs compute capability >= 8.9 (Ada/Hopper); this device has {cc[0]}.{cc[1]}"
        return None

    def telemetry_reader(self, device: str, info: dict | None = None) -> telemetry_readers.Reader:
        """NVML (nvidia-ml-py): the GPU found by the UUID torch reports, else by index. Untested on hardware."""
        info = info if info is not None else self.device_info(device)
        return telemetry_readers.NvmlReader(device_index(device), info.get("uuid"), import_module=self._import)

    def engine_device_args(self, runtime: str, device_gids: tuple[int, ...] = (), rootless: bool = False) -> list[str]:
        """Docker's ``--gpus all`` (NVIDIA Container Toolkit); Podman's CDI device ``nvidia.com/gpu=all``
        (``nvidia-ctk cdi generate``). The host's IPC namespace for PyTorch's shared-memory tensors."""
        dev = ["--gpus", "all"] if runtime == "docker" else ["--device", "nvidia.com/gpu=all"]
        return [*dev, "--ipc=host"]


class RocmBackend(CudaLikeBackend):
    """AMD Instinct/Radeon GPUs through a ROCm build of PyTorch: no TF32 units used, fp8 on MI300
    (gfx94x), MI350 (gfx95x) and RDNA4 (gfx12), Infinity Cache on MI300/MI350, amdsmi telemetry,
    ``/dev/kfd`` + ``/dev/dri`` in containers."""

    name = "rocm"
    gpu_manufacturer = "amd"
    title = "AMD ROCm"
    telemetry = "amdsmi"
    wants_rocm = True
    dnn_library_key = "miopen_version"
    install_hint = "a ROCm build of torch and the amdgpu driver"
    infinity_cache_bytes = 256 * 1024**2  # MI300/MI350: not in L2_cache_size

    @staticmethod
    def arch(info: dict) -> str | None:
        """'gfx942' from gcnArchName 'gfx942:sramecc+:xnack-'."""
        return str(info.get("gcn_arch_name") or "").split(":")[0] or None

    def extra_properties(self, props) -> dict:
        return {"gcn_arch_name": getattr(props, "gcnArchName", None)}

    def driver_entry(self) -> dict:
        return {
            "driver_version": amdgpu_driver_version(self.sys_root),
            "driver_version_source": str(self.sys_root / "module" / "amdgpu" / "version"),
            "hip_version": getattr(self.torch.version, "hip", None),
        }

    def absence_reason(self, exc: Exception) -> str:
        torch = self.torch
        cuda_v, hip_v = getattr(torch.version, "cuda", None), getattr(torch.version, "hip", None)
        if hip_v is None:
            if cuda_v is not None:
                return f"this is a CUDA build of torch (torch.version.cuda={cuda_v}), not a ROCm one"
            return "this torch build has no ROCm support (torch.version.hip is None)"
        env_note = self.visible_devices_note()
        return (
            f"torch is built with HIP {hip_v} but sees no device: no AMD GPU or amdgpu driver visible{env_note} ({exc})"
        )

    def tf32_available(self, info: dict | None = None) -> str | None:
        return (
            "tf32: PyTorch's allow_tf32 switch selects TF32 on NVIDIA tensor cores only; ROCm keeps strict "
            "float32 (hipBLASLt's xf32 is not selected by it)"
        )

    def fp8_support(self, info: dict) -> str | None:
        arch = self.arch(info)
        if arch is not None and not arch.startswith(("gfx94", "gfx95", "gfx12")):
            return f"fp8 matmul needs MI300 (gfx94x), MI350 (gfx95x) or RDNA4 (gfx12); this device is {arch}"
        wanted = self.fp8_dtype(info)
        if not hasattr(self.torch, wanted):
            return f"fp8 matmul on {arch or 'this device'} multiplies {wanted}, which this torch does not have"
        return None

    def fp8_dtype(self, info: dict) -> str:
        """``float8_e4m3fnuz`` on gfx94x (MI300X/MI325X, the only fp8 encoding their matrix cores take),
        the OCP ``float8_e4m3fn`` on gfx950 (MI350X/MI355X) and gfx12 (RDNA4)."""
        return "float8_e4m3fnuz" if self.arch(info) in FNUZ_ARCHS else FP8

    def cache_bytes(self, device: str, info: dict | None = None) -> int:
        info = info if info is not None else self.device_info(device)
        size = int(info.get("l2_cache_bytes") or 0)
        if (self.arch(info) or "").startswith(("gfx94", "gfx95")):
            size = max(size, self.infinity_cache_bytes)
        return size or self.default_cache_bytes

    def telemetry_reader(self, device: str, info: dict | None = None) -> telemetry_readers.Reader:
        """amdsmi: the GPU found by its HIP index (what torch calls cuda:N). Untested on hardware."""
        info = info if info is not None else self.device_info(device)
        return telemetry_readers.AmdSmiReader(device_index(device), info.get("pci_bus_id"), import_module=self._import)

    def engine_device_args(self, runtime: str, device_gids: tuple[int, ...] = (), rootless: bool = False) -> list[str]:
        """The kernel driver's ``/dev/kfd`` and the render nodes ``/dev/dri``, the groups that may open them,
        seccomp unconfined as AMD documents; the host's IPC namespace.

        Groups: Docker and rootful Podman get ``video`` plus the host groups that own those nodes
        (``device_gids``; ``render`` on recent distributions). Rootless Podman cannot map host groups into
        its user namespace (``--userns=keep-id``): a numeric ``--group-add`` there is an unmapped group and
        the nodes stay closed. It gets ``--group-add keep-groups`` instead, which tells the OCI runtime
        (crun) to keep the calling user's supplementary groups; Podman allows no other ``--group-add``
        beside it (podman-run(1))."""
        if runtime == "podman" and rootless:
            groups = ["keep-groups"]
        else:
            groups = ["video", *[str(g) for g in dict.fromkeys(device_gids)]]
        out = ["--device", "/dev/kfd", "--device", "/dev/dri"]
        for g in groups:
            out += ["--group-add", g]
        return [*out, "--security-opt", "seccomp=unconfined", "--ipc=host"]

    def visible_devices_variable(self) -> str:
        return "HIP_VISIBLE_DEVICES"
