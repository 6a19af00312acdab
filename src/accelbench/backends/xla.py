"""XLA devices (TPUs, and GPUs through PJRT) via the optional ``torch_xla``.

XLA is lazy: operations are traced into a graph that runs only when the graph is cut
(``torch_xla.sync()``, ``xm.mark_step()`` on old releases). Timing therefore cuts after every timed
operation and waits for the device (``xm.wait_device_ops()``). TPUs multiply in bf16 on the MXU and
train AMP in bf16 without a GradScaler; collectives use torch_xla's PJRT backend (``xla``).

Three things differ from the eager backends, each decided here:

- **Strict float32.** ``torch.set_float32_matmul_precision`` does not reach XLA: at torch_xla's default
  matmul precision a float32 product is one bf16 pass (about 2e-3 relative error, against the 1e-4
  check), and the AMP "fp32" baseline would be bf16. ``prepare_process`` sets torch_xla's own switch to
  ``"highest"`` (``torch_xla.backends.set_mat_mul_precision``, torch_xla >= 2.8; the ``_XLAC`` binding it
  wraps on 2.5-2.7) once per stage process, before the first graph is traced: a compiled graph keeps the
  precision it was lowered with. It stays set for the whole process (bf16 inputs are not affected).
- **One device per process.** ``torch_xla.sync()`` / ``mark_step`` run only the *default* device's pending
  graph, so a stage measures the process's own device (``torch_xla.device()``) and nothing else; detection
  still lists every device, marking which one a process measures. Measuring several chips of a host takes
  one process per chip (PJRT: ``torchrun``/``xmp.spawn``, with ``PJRT_DEVICE=TPU``).
- **Process-wide memory peak.** ``xm.get_memory_info``'s ``peak_bytes_used`` cannot be reset, so a trial's
  peak is labelled ``allocator_process_peak`` (the largest since the process started), never per trial.

**Untested on hardware**: the logic is unit-tested with a fake ``torch_xla``.
"""

from __future__ import annotations

import math

from .base import Backend, BackendUnavailable

STRICT_PRECISION = "highest"  # torch_xla: six bf16 passes, about 22 bits of the float32 mantissa


class XlaBackend(Backend):
    name = "xla"
    device_type = "xla"
    title = "XLA (TPU)"
    amp_default_dtype = "bfloat16"  # TPUs compute in bf16
    collective = "xla"
    default_cache_bytes = 128 * 1024**2  # TPU v4 CMEM
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
                raise BackendUnavailable(
                    f"backend 'xla': torch_xla is not installed or does not import "
                    f"({type(exc).__name__}: {exc}); pip install 'accelbench[xla]'"
                ) from None
        return self._xla

    def xm(self):
        return self._import("torch_xla.core.xla_model")

    # ---- devices
    def visible_devices(self) -> list[str]:
        """Every device the runtime lists (``torch_xla.devices()``): what detection reports."""
        xla = self.xla()
        devices = xla.devices() if hasattr(xla, "devices") else []
        if not devices:
            raise BackendUnavailable("backend 'xla': torch_xla.devices() is empty")
        return [str(d) for d in devices]

    def own_device(self) -> str:
        """This process's default device (``torch_xla.device()``, ``xm.xla_device()`` on old releases)."""
        xla = self.xla()
        get = getattr(xla, "device", None) or self.xm().xla_device
        return str(get())

    def devices(self) -> list[str]:
        """The one device this process measures: its default device. ``torch_xla.sync()`` executes only
        the default device's graph, so timing another device from here would time nothing."""
        self.visible_devices()  # BackendUnavailable when there is none
        return [self.own_device()]

    def probe(self) -> dict:
        """torch_xla's version and every device (``measured``: whether a stage process measures it), or
        why absent (not installed is the common case, not an error)."""
        try:
            xla = self.xla()
        except BackendUnavailable as exc:
            return {"present": False, "devices": [], "torch_xla_version": None, "reason": str(exc)}
        entry: dict = {"present": False, "devices": [], "torch_xla_version": getattr(xla, "__version__", None)}
        try:
            visible = self.visible_devices()
            measured = self.devices()
        except BackendUnavailable as exc:
            entry["reason"] = str(exc)
            return entry
        except Exception as exc:
            entry["reason"] = f"torch_xla.devices() failed: {type(exc).__name__}: {exc}"
            return entry
        entry["present"] = True
        entry["devices"] = [{**self.device_info(d), "measured": d in measured} for d in visible]
        entry["device_kinds"] = sorted({d["device_kind"] for d in entry["devices"] if d.get("device_kind")})
        entry["measured_devices"] = measured
        if len(visible) > len(measured):
            entry["note"] = (
                f"one device per process: a stage measures {', '.join(measured)} only "
                "(torch_xla.sync() runs the default device's graph); run one process per chip "
                "to measure the others"
            )
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

    # ---- precision
    def _precision_api(self):
        """(get, set) of torch_xla's matmul precision for 32-bit inputs, or None on a torch_xla without it
        (and where torch_xla does not import: no XLA device, nothing to set)."""
        try:
            xla = self.xla()
        except BackendUnavailable:
            return None
        api = getattr(xla, "backends", None)
        if api is None or not hasattr(api, "set_mat_mul_precision"):
            try:
                api = self._import("torch_xla.backends")  # torch_xla >= 2.8
            except Exception:
                api = None
        if api is not None and hasattr(api, "set_mat_mul_precision"):
            return getattr(api, "get_mat_mul_precision", None), api.set_mat_mul_precision
        xlac = getattr(xla, "_XLAC", None)  # torch_xla 2.5-2.7: the binding torch_xla.backends wraps
        if xlac is not None and hasattr(xlac, "_xla_set_mat_mul_precision"):
            return getattr(xlac, "_xla_get_mat_mul_precision", None), xlac._xla_set_mat_mul_precision
        return None

    def strict_float32(self) -> None:
        """torch_xla's matmul precision "highest", unless it already is (setting it again warns). A torch_xla
        without the switch (< 2.5) is left as it is: ``dtype_support`` then refuses float32 points."""
        api = self._precision_api()
        if api is None:
            return
        get, set_ = api
        if get is None or get() != STRICT_PRECISION:
            set_(STRICT_PRECISION)

    def prepare_process(self) -> None:
        """Strict float32 for the whole process, before any graph is traced (see the module docstring)."""
        self.strict_float32()

    def dtype_support(self, dtype: str, info: dict | None = None) -> str | None:
        reason = super().dtype_support(dtype, info)
        if reason is None and dtype == "float32" and self._precision_api() is None:
            return (
                "float32 on XLA needs torch_xla >= 2.5 (set_mat_mul_precision('highest')); at the default "
                "precision a float32 product is one bf16 pass"
            )
        return reason

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
        """Nothing to reset: the runtime's ``peak_bytes_used`` counts from the start of the process."""
        return False

    def peak_memory(self, device: str, per_trial: bool = True) -> tuple[float, str]:
        """``peak_bytes_used`` of ``xm.get_memory_info`` where the runtime reports it, labelled
        ``allocator_process_peak``: the largest allocation since the process started, so every trial after
        the first reads at least the largest one before it."""
        try:
            info = self.xm().get_memory_info(self.torch.device(device))
            if "peak_bytes_used" in info:
                return float(info["peak_bytes_used"]), "allocator_process_peak"
        except Exception:
            pass
        return math.nan, "none"

    def pinned_memory_support(self) -> str | None:
        return "xla: host buffers are handed to the runtime, which does its own staging; no pinned copies"

    # ---- several ranks: torch_xla's PJRT process group
    def rank_device(self, local_rank: int, devices: list[str]) -> str:
        """Under PJRT a rank process may address only its own chip: then that is its one device."""
        return devices[local_rank] if local_rank < len(devices) else devices[0]

    def bind_rank(self, device: str) -> None:
        """Importing ``torch_xla.distributed.xla_backend`` registers the ``xla`` process-group backend."""
        self._import("torch_xla.distributed.xla_backend")

    def process_group_options(self, device: str) -> dict:
        return {"backend": "xla", "init_method": "xla://"}

    def ddp_options(self, device: str) -> dict:
        """torch_xla's DDP guidance: gradients as bucket views, no buffer broadcast per forward."""
        return {"gradient_as_bucket_view": True, "broadcast_buffers": False}
