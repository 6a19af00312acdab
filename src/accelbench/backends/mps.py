"""Apple GPUs through Metal Performance Shaders (``mps``): one device, fp16 AMP with GradScaler,
Metal driver memory, no fp8 and no fast float64. **Untested on hardware** (no Mac here): the logic is
unit-tested with a fake ``torch``.
"""

from __future__ import annotations

import importlib
import platform
import subprocess
from collections.abc import Callable

from ._system import Runner, run_text
from .base import AmpPolicy, Backend, BackendUnavailable, torch_version_tuple

# torch.amp.GradScaler("mps") unscales on MPS from this release on (pytorch/pytorch#142397, fixed by #150255).
MPS_SCALER_MIN_TORCH = (2, 8)
# torch.autocast("mps") exists from this release on (torch 2.5 release notes: "Add autocast support for MPS";
# before it, autocast raises "User specified an unsupported autocast device_type 'mps'").
MPS_AUTOCAST_MIN_TORCH = (2, 5)

__all__ = ["MPS_AUTOCAST_MIN_TORCH", "MPS_SCALER_MIN_TORCH", "MpsBackend", "torch_version_tuple"]


class MpsBackend(Backend):
    name = "mps"
    device_type = "mps"
    title = "Apple MPS"
    amp_default_dtype = "float16"  # Apple GPUs: fp16 autocast
    collective = "gloo"  # no Metal collective library: several processes talk over the host
    default_cache_bytes = 96 * 1024**2  # largest Apple system-level cache
    install_hint = "macOS 12.3+ on Apple silicon or an AMD GPU"

    def telemetry_missing_reason(self) -> str:
        return (
            "Apple MPS: no telemetry reader (macOS exposes GPU power and clocks only through `powermetrics`, as root)"
        )

    def __init__(
        self,
        torch=None,
        xla=None,
        import_module: Callable = importlib.import_module,
        *,
        system: str | None = None,
        mac_ver: Callable[[], tuple] = platform.mac_ver,
        run: Runner = subprocess.run,
    ):
        super().__init__(torch, xla, import_module)
        self.system = system or platform.system()
        self.mac_ver = mac_ver
        self.run = run

    def scaling_support(self) -> str | None:
        """One MPS device per Mac, and gloo reduces CPU tensors only: DDP has nothing to scale over."""
        return "mps: one device per machine and no collective library for MPS tensors (gloo reduces CPU tensors)"

    def devices(self) -> list[str]:
        mps = getattr(self.torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise BackendUnavailable("backend 'mps': torch.backends.mps.is_available() is False")
        return ["mps"]

    def probe(self) -> dict:
        """The ``mps`` entry: present with the chip's name, or why absent."""
        mps = getattr(self.torch.backends, "mps", None)
        built = bool(mps is not None and mps.is_built())
        darwin = self.system == "Darwin"
        entry: dict = {
            "present": False,
            "devices": [],
            "is_built": built,
            "is_available": False,
            "macos_version": (self.mac_ver()[0] or None) if darwin else None,
        }
        try:
            devices = self.devices()
        except BackendUnavailable:
            if not darwin:
                entry["reason"] = f"MPS exists only on macOS (this is {self.system})"
            elif not built:
                entry["reason"] = "this torch build has no MPS support (torch.backends.mps.is_built() is False)"
            else:
                entry["reason"] = (
                    "torch.backends.mps.is_available() is False: macOS older than 12.3 or no Metal-capable GPU"
                )
            return entry
        entry.update(present=True, is_available=True)
        entry["devices"] = [{**self.device_info(d), "macos_version": entry["macos_version"]} for d in devices]
        return entry

    def device_info(self, device: str = "mps") -> dict:
        chip = run_text(["sysctl", "-n", "machdep.cpu.brand_string"], run=self.run) if self.system == "Darwin" else None
        return {"device": device, "name": (chip or "").strip() or "Apple GPU (MPS)"}

    def synchronize(self, device: str) -> None:
        self.torch.mps.synchronize()

    def amp_support(self, policy: AmpPolicy) -> str | None:
        have = torch_version_tuple(getattr(self.torch, "__version__", "0.0"))
        if have < MPS_AUTOCAST_MIN_TORCH:
            need = ".".join(map(str, MPS_AUTOCAST_MIN_TORCH))
            return f"torch.autocast('mps') needs torch >= {need}; this is {self.torch.__version__}: a newer torch"
        if policy.use_scaler and have < MPS_SCALER_MIN_TORCH:
            need = ".".join(map(str, MPS_SCALER_MIN_TORCH))
            return (
                f"torch.amp.GradScaler on MPS needs torch >= {need} (pytorch/pytorch#142397); this is "
                f"{self.torch.__version__}: use amp.dtype bfloat16 or a newer torch"
            )
        return None

    def reset_peak_memory(self, device: str) -> bool:
        """Metal has no peak counter; emptying the cache first makes the driver's figure this trial's."""
        self.torch.mps.empty_cache()
        return False

    def peak_memory(self, device: str, per_trial: bool = True) -> tuple[float, str]:
        """``torch.mps.driver_allocated_memory()`` at the end of the trial (``mps_driver``)."""
        return float(self.torch.mps.driver_allocated_memory()), "mps_driver"

    def free_bytes(self, device: str) -> int:
        try:
            return int(self.torch.mps.recommended_max_memory() - self.torch.mps.driver_allocated_memory())
        except Exception:
            return super().free_bytes(device)

    def memory_capacity(self, device: str) -> int | None:
        try:
            return int(self.torch.mps.recommended_max_memory())
        except Exception:
            return None

    def empty_cache(self, device: str) -> None:
        self.torch.mps.empty_cache()

    def table_peak(self, info: dict, dtype: str, threads: int | None):
        return None, "Apple GPU peaks are not tabulated: set matmul.peak_tflops.mps in the config"

    def pinned_memory_support(self) -> str | None:
        return "mps: unified memory, no pinned host buffers to copy from"
