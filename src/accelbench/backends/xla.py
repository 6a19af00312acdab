"""XLA devices (TPUs, and GPUs through PJRT) via the optional ``torch_xla``.

XLA is lazy: operations are traced into a graph that runs only when the graph is cut
(``torch_xla.sync()``, ``xm.mark_step()`` on old releases). Timing therefore cuts after every timed
operation and waits for the device (``xm.wait_device_ops()``). TPUs multiply in bf16 on the MXU and
train AMP in bf16 without a GradScaler; collectives use torch_xla's PJRT backend (``xla``).
**Untested on hardware**: the logic is unit-tested with a fake ``torch_xla``.
"""

from __future__ import annotations

import math

from .base import Backend, BackendUnavailable


class XlaBackend(Backend):
    name = "xla"
    device_type = "xla"
    title = "XLA (TPU)"
    amp_default_dtype = "bfloat16"  # TPUs compute in bf16
    collective = "xla"
    default_cache_bytes = 128 * 1024 ** 2  # TPU v4 CMEM
    install_hint = "pip install 'accelbench[xla]' (torch_xla) on a TPU VM"

    def telemetry_missing_reason(self) -> str:
        return "XLA (TPU): no telemetry reader (TPU runtime metrics are not read yet)"

    # ---- modules
    def xla(self):
        """torch_xla, or BackendUnavailable saying why it does not import."""
        if self._xla is None:
            try:
                self._xla = self._import("torch_xla")
            except Exception as exc:  # ImportError, or a broken install raising anything at import
                raise BackendUnavailable(f"backend 'xla': torch_xla is not installed or does not import "
                                         f"({type(exc).__name__}: {exc}); pip install 'accelbench[xla]'") from None
        return self._xla

    def xm(self):
        return self._import("torch_xla.core.xla_model")

    # ---- devices
    def devices(self) -> list[str]:
        xla = self.xla()
        devices = xla.devices() if hasattr(xla, "devices") else []
        if not devices:
            raise BackendUnavailable("backend 'xla': torch_xla.devices() is empty")
        return [str(d) for d in devices]

    def probe(self) -> dict:
        """torch_xla's version and devices, or why absent (not installed is the common case, not an error)."""
        try:
            xla = self.xla()
        except BackendUnavailable as exc:
            return {"present": False, "devices": [], "torch_xla_version": None, "reason": str(exc)}
        entry: dict = {"present": False, "devices": [], "torch_xla_version": getattr(xla, "__version__", None)}
        try:
            devices = self.devices()
        except BackendUnavailable as exc:
            entry["reason"] = str(exc)
            return entry
        except Exception as exc:
            entry["reason"] = f"torch_xla.devices() failed: {type(exc).__name__}: {exc}"
            return entry
        entry["present"] = True
        entry["devices"] = [self.device_info(d) for d in devices]
        entry["device_kinds"] = sorted({d["device_kind"] for d in entry["devices"] if d.get("device_kind")})
        return entry

    def device_info(self, device: str) -> dict:
        """Its hardware type (TPU, CUDA, CPU) and vendor device kind ('TPU v4')."""
        out: dict = {"device": device, "device_hw": None, "device_kind": None}
        try:
            xm = self.xm()
            out["device_hw"] = xm.xla_device_hw(device)
            out["device_kind"] = xm.xla_device_kind(device)
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {exc}"
        out["name"] = out["device_kind"] or out["device_hw"] or "XLA device"
        return out

    # ---- waiting
    def graph_cut(self):
        xla = self.xla()
        return getattr(xla, "sync", None) or self.xm().mark_step

    def synchronizer(self, device: str):
        """Cut the lazy graph (``torch_xla.sync()``, or ``xm.mark_step()`` on old releases), then wait
        for the device to finish it (``xm.wait_device_ops()``)."""
        try:
            cut = self.graph_cut()
        except BackendUnavailable:
            raise BackendUnavailable("device 'xla': torch_xla is not installed") from None
        xm = self.xm()

        def _sync_xla() -> None:
            cut()
            xm.wait_device_ops()

        return _sync_xla

    def synchronize(self, device: str) -> None:
        self.synchronizer(device)()

    # ---- memory
    def reset_peak_memory(self, device: str) -> bool:
        return True

    def peak_memory(self, device: str, per_trial: bool = True) -> tuple[float, str]:
        """``peak_bytes_used`` of ``xm.get_memory_info`` where the runtime reports it (``allocator``)."""
        try:
            info = self.xm().get_memory_info(self.torch.device(device))
            if "peak_bytes_used" in info:
                return float(info["peak_bytes_used"]), "allocator"
        except Exception:
            pass
        return math.nan, "none"

    def pinned_memory_support(self) -> str | None:
        return "xla: host buffers are handed to the runtime, which does its own staging; no pinned copies"
