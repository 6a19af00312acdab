"""Intel GPUs through PyTorch's ``xpu`` device type (Data Center GPU Max, Arc), native in torch since 2.5.

The device API mirrors CUDA's (``torch.xpu.is_available``, ``device_count``, ``synchronize``,
``get_device_properties``, ``max_memory_allocated``); AMP trains in bf16 (Intel's recommended
precision on XMX engines) without a GradScaler; several ranks talk over XCCL (torch.distributed's
``xccl`` backend, torch >= 2.8). No TF32 or fp8 path is used. Added as the proof that a new device
kind is one class: **untested on hardware**, unit-tested with a fake ``torch.xpu``.
"""

from __future__ import annotations

from .base import Backend, BackendUnavailable


class XpuBackend(Backend):
    name = "xpu"
    device_type = "xpu"
    title = "Intel XPU"
    needs_gpu_resource = True
    amp_default_dtype = "bfloat16"
    collective = "xccl"
    telemetry = None  # xpu-smi / Level Zero Sysman readers are not written yet
    install_hint = "an XPU build of torch (pip install torch --index-url https://download.pytorch.org/whl/xpu)"

    def telemetry_missing_reason(self) -> str:
        return "Intel XPU: no telemetry reader (xpu-smi / Level Zero Sysman readers are not written yet)"

    def tf32_available(self, info: dict | None = None) -> str | None:
        return (
            "tf32: XMX engines run TF32, but PyTorch selects it on XPU through oneDNN's fp32 math mode, which "
            "accelbench does not switch; float32 stays strict"
        )

    def fp8_support(self, info: dict) -> str | None:
        return "fp8: no torch._scaled_mm kernel for XPU (Data Center GPU Max has no fp8 units)"

    def _xpu(self):
        xpu = getattr(self.torch, "xpu", None)
        if xpu is None:
            raise BackendUnavailable("backend 'xpu': this torch build has no torch.xpu (torch < 2.5)")
        return xpu

    def devices(self) -> list[str]:
        xpu = self._xpu()
        if not xpu.is_available():
            raise BackendUnavailable(
                "backend 'xpu': torch.xpu.is_available() is False: no Intel GPU, driver or XPU build of torch"
            )
        return [f"xpu:{i}" for i in range(xpu.device_count())]

    def device_info(self, device: str) -> dict:
        """``torch.xpu.get_device_properties``: name, execution units (``max_compute_units``), memory."""
        index = int(device.split(":")[1]) if ":" in device else 0
        out: dict = {"device": device, "index": index}
        try:
            p = self._xpu().get_device_properties(index)
        except Exception as exc:
            out.update(name=f"unknown ({device})", error=f"{type(exc).__name__}: {exc}")
            return out
        out["name"] = str(p.name)
        units = getattr(p, "max_compute_units", None)
        if units is not None:
            out["multiprocessors"] = int(units)  # execution units: what peaks scale a partition by
        total = getattr(p, "total_memory", None)
        if total is not None:
            out["total_memory_bytes"] = int(total)
        for key in ("driver_version", "gpu_subslice_count"):
            if getattr(p, key, None) is not None:
                out[key] = getattr(p, key)
        return out

    def synchronize(self, device: str) -> None:
        self._xpu().synchronize(device)

    def bind_rank(self, device: str) -> None:
        """``torch.xpu.set_device``: XCCL uses the current device of each rank."""
        self._xpu().set_device(int(device.split(":")[1]) if ":" in device else 0)

    def ddp_options(self, device: str) -> dict:
        index = int(device.split(":")[1]) if ":" in device else 0
        return {"device_ids": [index], "output_device": index}

    def device_scope(self, device: str):
        return self._xpu().device(device)

    def reset_peak_memory(self, device: str) -> bool:
        self._xpu().reset_peak_memory_stats(device)
        return True

    def peak_memory(self, device: str, per_trial: bool = True) -> tuple[float, str]:
        return float(self._xpu().max_memory_allocated(device)), "allocator"

    def free_bytes(self, device: str) -> int:
        try:
            self._xpu().empty_cache()
            return int(self._xpu().mem_get_info(device)[0])
        except Exception:
            return super().free_bytes(device)

    def memory_capacity(self, device: str) -> int | None:
        info = self.device_info(device)
        return info.get("total_memory_bytes")

    def empty_cache(self, device: str) -> None:
        self._xpu().empty_cache()

    def reference_device(self, device: str) -> str:
        return device  # Data Center GPU Max runs float64 natively

    def engine_device_args(self, runtime: str, device_gids: tuple[int, ...] = (), rootless: bool = False) -> list[str]:
        """Intel GPUs are render nodes: ``/dev/dri`` and the groups owning it. Rootless Podman cannot map
        host groups (as for ROCm, ``RocmBackend.engine_device_args``): ``--group-add keep-groups`` there."""
        out = ["--device", "/dev/dri"]
        groups = (
            ["keep-groups"]
            if runtime == "podman" and rootless
            else ["video", *[str(g) for g in dict.fromkeys(device_gids)]]
        )
        for g in groups:
            out += ["--group-add", g]
        return [*out, "--ipc=host"]

    def visible_devices_variable(self) -> str:
        return "ZE_AFFINITY_MASK"
