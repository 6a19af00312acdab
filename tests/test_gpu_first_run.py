"""The defects found by reading the GPU paths against the real APIs before the first GPU run (issue 25),
each pinned by a test with fakes (no GPU here: every path below is **untested on hardware**):

- the staged peer copy waits for its host-to-device copy before the next device-to-host copy reuses the
  pinned buffer;
- NVML clock-event bits are nvml.h's only; power is NVML_FI_DEV_POWER_INSTANT where the driver has it
  (else the 1 s average), each window says which (``power_source``) and which sensors its length is too
  short for (``telemetry_too_short_for``);
- amdsmi finds the GPU by HIP id, else by PCI bus id (which device_info now records), and never by
  position where HIP_VISIBLE_DEVICES or a CPX partition make positions wrong;
- a HOTSPOT-less amdsmi still gives the edge temperature;
- float32 math through torch's fp32_precision API where torch has it (>= 2.9);
- autocast on MPS needs torch >= 2.5; XPU's engine_device_args takes ``rootless``;
- warm-up watches the clock ramp where telemetry reads it;
- fp8 ``_scaled_mm`` with and without ``use_fast_accum``, said in a column.
"""

from __future__ import annotations

import types
from types import SimpleNamespace

import pytest

from accelbench import backends, registry
from accelbench.measure import stability
from accelbench.measure import telemetry as tm
from accelbench.stages.scaling import peer_copy


def importer(**modules):
    def import_module(name):
        if name in modules:
            return modules[name]
        raise ModuleNotFoundError(f"No module named {name!r}")

    return import_module


# ------------------------------------------------------------------ peer_copy: the staged copy's race


class _Engine:
    """Records what a copy engine would do: an async H2D still reading ``host`` when the next D2H writes it."""

    def __init__(self):
        self.pending_h2d = False
        self.races = 0
        self.copies = 0


class _Tensor:
    def __init__(self, engine, role, n):
        self.engine, self.role, self.n = engine, role, n

    def numel(self):
        return self.n

    def pin_memory(self):
        return self

    def copy_(self, other, non_blocking=False):
        e = self.engine
        if self.role == "host":  # D2H into the pinned buffer
            if e.pending_h2d:
                e.races += 1
        elif self.role == "dst" and other.role == "host" and non_blocking:
            e.pending_h2d = True
        e.copies += 1
        return self


def _fake_copy_backend(engine):
    def tensor(role):
        return lambda n, dtype=None, device=None: _Tensor(engine, role, n)

    torch = SimpleNamespace(uint8="uint8", ones=tensor("src"), zeros=tensor("dst"), empty=tensor("host"))

    def synchronizer(device):
        def sync():
            if device == "cuda:1":  # the destination's stream: its H2D has finished
                engine.pending_h2d = False

        return sync

    return SimpleNamespace(torch=torch, pinned_memory_support=lambda: None, synchronizer=synchronizer)


def test_staged_copy_waits_for_the_h2d_before_the_next_d2h_into_the_pinned_buffer():
    engine = _Engine()
    copies = peer_copy.TorchPeerCopies(_fake_copy_backend(engine), "cuda:0", "cuda:1", 64)
    stmt, g = copies.statement("off"), copies.globals_("off")
    for _ in range(5):  # what timeit's inner loop does: the statement back to back
        exec(stmt, dict(g))
    assert engine.copies == 10 and engine.races == 0
    assert copies.statement("on") == "dst.copy_(src)"


# ------------------------------------------------------------------ NVML: clock-event bits, instant power

# nvml.h (CUDA 12.x/13.x, ``nvmlClocksEventReason*``; the same in nvidia-ml-py's pynvml.py): every bit there is.
NVML_H_CLOCK_EVENT_BITS = {0x1, 0x2, 0x4, 0x8, 0x10, 0x20, 0x40, 0x80, 0x100}


def test_nvml_throttle_bits_are_those_of_nvml_h():
    assert set(tm.NVML_THROTTLE_BITS) | set(tm.NVML_OTHER_BITS) <= NVML_H_CLOCK_EVENT_BITS
    assert tm.nvml_reasons(0x200 | 0x400) == ()  # not reasons nvml.h defines
    assert tm.nvml_reasons(0x4 | 0x8 | 0x20 | 0x40 | 0x80) == (
        "sw_power_cap",
        "hw_slowdown",
        "sw_thermal",
        "hw_thermal",
        "hw_power_brake",
    )


def fake_nvml(*, instant_mw=None, average_mw=700_000, energy=True):
    """pynvml with one GPU. ``instant_mw`` None: the field NVML_FI_DEV_POWER_INSTANT is not supported."""
    state = {"energy": 0}

    def field_values(handle, ids):
        out = []
        for fid in ids:
            ok = fid == 186 and instant_mw is not None
            out.append(
                SimpleNamespace(
                    fieldId=fid,
                    nvmlReturn=0 if ok else 3,
                    valueType=1,
                    value=SimpleNamespace(uiVal=instant_mw or 0, dVal=0.0, ullVal=0, sllVal=0, ulVal=0, siVal=0),
                )
            )
        return out

    def total_energy(h):
        if not energy:
            raise RuntimeError("Not Supported")
        state["energy"] += 1000
        return state["energy"]

    return SimpleNamespace(
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        NVML_TEMPERATURE_GPU=0,
        NVML_SUCCESS=0,
        NVML_FI_DEV_POWER_INSTANT=186,
        NVML_FI_DEV_POWER_AVERAGE=185,
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetHandleByUUID=lambda u: 0,
        nvmlDeviceGetClockInfo=lambda h, kind: 1980 if kind == 1 else 2619,
        nvmlDeviceGetPowerUsage=lambda h: average_mw,
        nvmlDeviceGetFieldValues=field_values,
        nvmlDeviceGetTotalEnergyConsumption=total_energy,
        nvmlDeviceGetTemperature=lambda h, s: 60,
        nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=100),
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0,
    )


def test_nvml_power_is_the_instant_field_where_the_driver_has_it():
    r = tm.NvmlReader(0, import_module=importer(pynvml=fake_nvml(instant_mw=650_000))).open()
    assert r.read(0.0).power_w == pytest.approx(650.0)
    assert r.power_source == "instant" and "NVML_FI_DEV_POWER_INSTANT" in r.found["power"]
    fallback = tm.NvmlReader(0, import_module=importer(pynvml=fake_nvml(instant_mw=None))).open()
    assert fallback.read(0.0).power_w == pytest.approx(700.0)
    assert fallback.power_source == "average_1s"


def test_window_says_its_power_source_and_what_it_is_too_short_for():
    readings = [tm.Reading(t=t, clock_mhz=1980, power_w=650, energy_j=100 + t * 650) for t in (0.0, 0.1, 0.2)]
    short = tm.summarize(readings, "nvml", power_source="instant", min_window_s=tm.NVML_MIN_WINDOW_S["instant"])
    assert short["power_source"] == "instant" and short["telemetry_too_short_for"] == "energy"
    averaged = tm.summarize(
        readings, "nvml", power_source="average_1s", min_window_s=tm.NVML_MIN_WINDOW_S["average_1s"]
    )
    assert averaged["telemetry_too_short_for"] == "energy;power"
    long = [tm.Reading(t=t, clock_mhz=1980, power_w=650, energy_j=100 + t * 650) for t in (0.0, 1.0, 2.0)]
    assert (
        tm.summarize(long, "nvml", power_source="average_1s", min_window_s=tm.NVML_MIN_WINDOW_S["average_1s"])[
            "telemetry_too_short_for"
        ]
        == ""
    )
    # the columns reach every table that carries a window
    assert {"power_source", "telemetry_too_short_for"} <= set(tm.WINDOW_EXTRA) <= set(registry.TABLES["matmul"].extra)
    # through the sampler: the reader's source and limits
    t = tm.DeviceTelemetry(tm.NvmlReader(0, import_module=importer(pynvml=fake_nvml(instant_mw=650_000))), 50)
    with t.window() as w:
        pass
    cols = w.columns()
    assert cols["power_source"] == "instant" and "energy" in cols["telemetry_too_short_for"]


# ------------------------------------------------------------------ amdsmi: which GPU, and HOTSPOT


def fake_amdsmi(*, hip_ids=None, bdfs=("0000:c1:00.0", "0000:03:00.0"), partition="SPX", hotspot=True):
    """Two GPUs; ``hip_ids`` None: the enumeration info has no hip_id (amdsmi before ROCm 6.4)."""

    def enumeration(h):
        if hip_ids is None:
            raise KeyError("hip_id")
        return {"hip_id": hip_ids[int(h[1])]}

    kinds = SimpleNamespace(EDGE="edge", **({"HOTSPOT": "hotspot"} if hotspot else {}))
    return SimpleNamespace(
        AmdSmiInitFlags=SimpleNamespace(INIT_AMD_GPUS=2),
        AmdSmiClkType=SimpleNamespace(GFX="gfx", MEM="mem"),
        AmdSmiTemperatureType=kinds,
        AmdSmiTemperatureMetric=SimpleNamespace(CURRENT="current"),
        amdsmi_init=lambda flags: None,
        amdsmi_shut_down=lambda: None,
        amdsmi_get_processor_handles=lambda: ["h0", "h1"],
        amdsmi_get_gpu_enumeration_info=enumeration,
        amdsmi_get_gpu_device_bdf=lambda h: bdfs[int(h[1])],
        amdsmi_get_gpu_compute_partition=lambda h: partition,
        amdsmi_get_clock_info=lambda h, kind: {"clk": {"h0": 1700, "h1": 2100}[h]},
        amdsmi_get_power_info=lambda h: {"current_socket_power": 500},
        amdsmi_get_energy_count=lambda h: {"energy_accumulator": 1, "counter_resolution": 15.3},
        amdsmi_get_temp_metric=lambda h, kind, metric: {"hotspot": 80, "edge": 55}[kind],
        amdsmi_get_gpu_activity=lambda h: {"gfx_activity": 100},
        amdsmi_get_gpu_metrics_info=lambda h: {"indep_throttle_status": 0},
    )


def test_rocm_device_info_records_the_pci_bus_id():
    props = SimpleNamespace(
        name="AMD Instinct MI300X",
        major=9,
        minor=4,
        multi_processor_count=304,
        total_memory=192 * 2**30,
        gcnArchName="gfx942:sramecc+:xnack-",
        pci_domain_id=0,
        pci_bus_id=0x03,
        pci_device_id=0,
    )
    fake_torch = SimpleNamespace(
        __version__="2.11.0",
        version=SimpleNamespace(hip="7.0", cuda=None),
        cuda=SimpleNamespace(get_device_properties=lambda i: props),
    )
    info = backends.get("rocm", torch=fake_torch).device_info("cuda:0")
    assert info["pci_bus_id"] == "0000:03:00.0"


def test_amdsmi_without_hip_id_matches_by_pci_bus_id():
    r = tm.AmdSmiReader(0, "0000:03:00.0", import_module=importer(amdsmi=fake_amdsmi()), environ={}).open()
    assert r.read(0.0).clock_mhz == 2100 and "PCI 0000:03:00.0" in r.found["clock"]


@pytest.mark.parametrize(
    "environ,partition,why",
    [
        ({"HIP_VISIBLE_DEVICES": "1"}, "SPX", "HIP_VISIBLE_DEVICES"),
        ({"ROCR_VISIBLE_DEVICES": "1"}, "SPX", "ROCR_VISIBLE_DEVICES"),
        ({}, "CPX", "CPX"),
    ],
)
def test_amdsmi_never_matches_by_position_where_positions_differ(environ, partition, why, monkeypatch):
    for name in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    smi = fake_amdsmi(partition=partition)
    r = tm.AmdSmiReader(0, None, import_module=importer(amdsmi=smi)).open()
    assert not r.any  # null readings, never another GPU's
    assert why in r.missing["clock"] and "position" in r.missing["clock"]


def test_amdsmi_by_position_only_when_nothing_reorders():
    r = tm.AmdSmiReader(1, None, import_module=importer(amdsmi=fake_amdsmi()), environ={}).open()
    assert r.read(0.0).clock_mhz == 2100 and "position 1" in r.found["clock"]


def test_amdsmi_without_hotspot_still_reads_the_edge_temperature():
    smi = fake_amdsmi(hip_ids=(0, 1), hotspot=False)
    r = tm.AmdSmiReader(0, import_module=importer(amdsmi=smi), environ={}).open()
    assert r.read(0.0).temp_c == 55
    assert (
        tm.AmdSmiReader(0, import_module=importer(amdsmi=fake_amdsmi(hip_ids=(0, 1))), environ={})
        .open()
        .read(0.0)
        .temp_c
        == 80
    )


# ------------------------------------------------------------------ float32 math: the fp32_precision API


def test_float32_math_uses_fp32_precision_where_torch_has_it():
    """torch >= 2.9: a user who set the new API (as torch asks) must not make the legacy reads raise."""
    import torch

    if not hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        pytest.fail(f"torch {torch.__version__} here has no fp32_precision API: this test needs >= 2.9")
    b = torch.backends
    nodes = (b.cuda.matmul, b.cudnn.conv, b.mkldnn.matmul)
    saved = [n.fp32_precision for n in nodes]
    try:
        b.cuda.matmul.fp32_precision = "tf32"  # the user's setting, in the new API
        b.cudnn.conv.fp32_precision = "tf32"
        cuda = backends.get("cuda", torch=torch)
        with cuda.float32_math(False) as tf32:
            assert tf32 is False
            assert b.cuda.matmul.fp32_precision == "ieee" and b.cudnn.conv.fp32_precision == "ieee"
            assert b.mkldnn.matmul.fp32_precision == "ieee"
        assert b.cuda.matmul.fp32_precision == "tf32" and b.cudnn.conv.fp32_precision == "tf32"
        with cuda.float32_math(True) as tf32:
            assert tf32 is True and b.cuda.matmul.fp32_precision == "tf32"
        with backends.get("rocm", torch=torch).float32_math(True) as tf32:  # ROCm: strict
            assert tf32 is False and b.cuda.matmul.fp32_precision == "ieee"
        assert b.cuda.matmul.fp32_precision == "tf32"
    finally:
        for n, v in reversed(list(zip(nodes, saved))):
            n.fp32_precision = v


class _LegacyFlags:
    def __init__(self, log):
        object.__setattr__(self, "log", log)
        object.__setattr__(self, "allow_tf32", False)

    def __setattr__(self, name, value):
        self.log.append(name)
        object.__setattr__(self, name, value)


def test_float32_math_keeps_the_legacy_flags_before_torch_2_9():
    log: list = []
    state = {"precision": "high"}
    fake = SimpleNamespace(
        __version__="2.8.0",
        get_float32_matmul_precision=lambda: state["precision"],
        set_float32_matmul_precision=lambda p: (log.append(("precision", p)), state.__setitem__("precision", p)),
        backends=SimpleNamespace(cuda=SimpleNamespace(matmul=_LegacyFlags(log)), cudnn=_LegacyFlags(log)),
    )
    with backends.get("cuda", torch=fake).float32_math(True) as tf32:
        assert tf32 is True and fake.backends.cuda.matmul.allow_tf32 is True
    assert fake.backends.cuda.matmul.allow_tf32 is False and state["precision"] == "high"
    assert "fp32_precision" not in log


# ------------------------------------------------------------------ MPS autocast, XPU containers


def test_mps_autocast_needs_torch_2_5():
    policy = backends.base.AmpPolicy("mps", "bfloat16", use_scaler=False)
    old = backends.get("mps", torch=SimpleNamespace(__version__="2.4.1"))
    reason = old.amp_support(policy)
    assert reason and "2.5" in reason and "autocast" in reason
    assert backends.get("mps", torch=SimpleNamespace(__version__="2.5.0")).amp_support(policy) is None


def test_xpu_engine_device_args_take_rootless():
    xpu = backends.get("xpu", torch=SimpleNamespace(__version__="2.11.0"))
    rootless = xpu.engine_device_args("podman", (44, 992), rootless=True)
    assert rootless[rootless.index("--group-add") + 1] == "keep-groups" and "992" not in rootless
    rootful = xpu.engine_device_args("docker", (992,), rootless=False)
    assert "video" in rootful and "992" in rootful


# ------------------------------------------------------------------ warm-up: the clock ramp


def test_warm_up_waits_for_the_clock_to_ramp_where_telemetry_reads_it():
    """Step times flat from the second call (a small product the idle clock already runs fast) while the
    SM clock still ramps 345 -> 1980 MHz: warm by times alone at call 4, warm by clock only once it settles."""
    clocks = iter([345, 600, 900, 1300, 1700, 1950, 1980, 1980, 1980, 1980, 1980, 1980] + [1980] * 40)
    times = iter([0.5] + [0.01] * 60)
    cfg = {"n": 8, "window": 3, "rel_tol": 0.05, "max_iters": 40}
    by_time = stability.run_until_stable(lambda: next(iter([0.5] + [0.01] * 60)), window=3, rel_tol=0.05, max_iters=40)
    assert by_time["stable_at_iter"] <= 1
    result = stability.warm_up(
        None, "cuda:0", cfg, make_call=lambda *a: lambda: next(times), clock_mhz=lambda: next(clocks)
    )
    assert result["status"] == "ok"
    assert result["stable_at_iter"] >= 5  # not before the clock reached its plateau
    assert result["clock_mhz"][-1] == 1980


def test_warm_device_reads_the_clock_from_the_backend_telemetry_reader():
    class Reader(tm.Reader):
        source = "fake"

        def __init__(self):
            super().__init__()
            self.values = iter([345, 900, 1700, 1980] + [1980] * 50)

        def sensors(self):
            return {"clock": (lambda: next(self.values), "fake SM clock")}, {}

    backend = SimpleNamespace(is_accelerator=True, telemetry_reader=lambda device: Reader())
    warm = stability.warm_device(
        backend, "cuda:0", {"n": 8, "window": 3, "rel_tol": 0.05, "max_iters": 30}, make_call=lambda *a: lambda: 0.01
    )
    assert warm.status == "ok" and warm.calls >= 5 and warm.clock_mhz == 1980


# ------------------------------------------------------------------ fp8: use_fast_accum both ways


def test_fp8_scaled_mm_is_timed_with_and_without_fast_accum_and_says_which():
    from accelbench.stages.matmul.measure import TorchMatmul

    calls = []

    def scaled_mm(a, b, sa, sb, out_dtype=None, use_fast_accum=False):
        calls.append(use_fast_accum)
        return "D"

    fake = types.SimpleNamespace(ones=lambda *a, **k: 1.0, float32="f32", bfloat16="bf16", _scaled_mm=scaled_mm)
    backend = SimpleNamespace(torch=fake, graph_cut=lambda: None)
    for fast in (False, True):
        k = TorchMatmul("cuda:0", backend, measurer=None, info={}, fp8_fast_accum=fast)
        stmt, g = k._op("float8_e4m3fn", 16)
        exec(stmt.replace("A_", "1").replace("B_", "2"), g)
        assert calls[-1] is fast
    assert "fp8_fast_accum" in registry.TABLES["matmul"].extra


def test_matmul_rows_say_whether_fp8_used_fast_accum():
    from accelbench.stages.matmul.measure import Settings, measure_point

    class Kernels:
        def __init__(self, fast):
            self.fp8_fast_accum = fast

        def support(self, dtype):
            return "not here"

    settings = Settings(
        min_run_time_s=0.1,
        point_budget_s=1.0,
        unstable_iqr_ratio=0.1,
        rotate_inputs=True,
        rel_error_max={},
        seed=0,
        threads=1,
    )
    for fast in (False, True):
        row = measure_point(Kernels(fast), dtype="float8_e4m3fn", n=64, settings=settings, peak=(None, ""))
        assert row["fp8_fast_accum"] is fast
    assert (
        measure_point(Kernels(True), dtype="bfloat16", n=64, settings=settings, peak=(None, ""))["fp8_fast_accum"]
        is None
    )
