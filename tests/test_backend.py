"""Per-backend logic of ``accelbench.backends`` with fake torch / torch_xla modules.

CUDA, ROCm, MPS, XLA and XPU are untested on hardware here: these tests check the dispatch logic
(which devices are listed, which build owns a GPU, which synchronize function is called and when,
which AMP mode each backend gets), not the hardware behaviour.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import yaml

from accelbench import backends
from accelbench.backends import AmpPolicy, BackendUnavailable, base

SCHEMA = Path(__file__).resolve().parents[1] / "src" / "accelbench" / "data" / "config.schema.yaml"
MAX_1550 = "Intel(R) Data Center GPU Max 1550"


class XpuProps:
    """What ``torch.xpu.get_device_properties`` returns (the fields the XPU backend reads)."""

    def __init__(self, name=MAX_1550, units=1024, mem=128 * 2**30, driver="1.3.29735"):
        self.name, self.max_compute_units, self.total_memory, self.driver_version = name, units, mem, driver


def fake_torch(
    *,
    cuda: str | None = None,
    hip: str | None = None,
    gpus: int = 0,
    available: bool | None = None,
    mps: bool | None = None,
    xpu: int | None = None,
    xpu_available: bool | None = None,
    xpu_props=None,
    calls: list | None = None,
):
    """A stand-in for the torch module: ``torch.version``, ``torch.cuda``, ``torch.backends.mps``,
    ``torch.mps``, ``torch.amp`` and (with ``xpu=N``) ``torch.xpu``; every synchronize, GradScaler
    and memory-counter call is appended to ``calls``."""
    calls = calls if calls is not None else []
    available = (gpus > 0) if available is None else available
    t = types.SimpleNamespace()
    t.calls = calls
    t.version = types.SimpleNamespace(cuda=cuda, hip=hip)
    t.cuda = types.SimpleNamespace(
        is_available=lambda: available,
        device_count=lambda: gpus,
        synchronize=lambda device=None: calls.append(("cuda.synchronize", device)),
    )
    t.backends = types.SimpleNamespace()
    if mps is not None:
        t.backends.mps = types.SimpleNamespace(is_available=lambda: mps, is_built=lambda: mps)
    t.mps = types.SimpleNamespace(synchronize=lambda: calls.append(("mps.synchronize", None)))
    t.amp = types.SimpleNamespace(GradScaler=lambda device_type: calls.append(("GradScaler", device_type)) or "scaler")
    if xpu is not None:
        xpu_on = (xpu > 0) if xpu_available is None else xpu_available
        props = list(xpu_props) if xpu_props is not None else [XpuProps() for _ in range(xpu)]

        def get_props(i):
            p = props[i]
            if isinstance(p, Exception):
                raise p
            return p

        t.xpu = types.SimpleNamespace(
            is_available=lambda: xpu_on,
            device_count=lambda: xpu,
            synchronize=lambda device=None: calls.append(("xpu.synchronize", device)),
            get_device_properties=get_props,
            reset_peak_memory_stats=lambda device=None: calls.append(("xpu.reset_peak_memory_stats", device)),
            max_memory_allocated=lambda device=None: calls.append(("xpu.max_memory_allocated", device)) or 3 * 2**30,
        )
    return t


def fake_xla(devices=("xla:0", "xla:1"), with_sync=True, calls=None, own=0):
    calls = calls if calls is not None else []
    x = types.ModuleType("torch_xla")
    x.devices = lambda: list(devices)
    x.device = lambda: list(devices)[own]  # the process's default device (torch_xla.device())
    if with_sync:
        x.sync = lambda: calls.append("sync")
    x.calls = calls
    return x


def no_torch_xla(name):
    """An ``import_module`` for a machine without torch_xla."""
    raise ModuleNotFoundError(f"No module named {name!r}")


@pytest.fixture
def fake_xm(monkeypatch):
    """torch_xla.core.xla_model in sys.modules, recording mark_step / wait_device_ops."""
    calls: list = []
    xm = types.ModuleType("torch_xla.core.xla_model")
    xm.mark_step = lambda: calls.append("mark_step")
    xm.wait_device_ops = lambda: calls.append("wait_device_ops")
    for name in ("torch_xla", "torch_xla.core"):
        monkeypatch.setitem(sys.modules, name, sys.modules.get(name) or types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "torch_xla.core.xla_model", xm)
    xm.calls = calls
    return xm


# --------------------------------------------------------------------------- the registry


def test_names_are_the_schema_backend_enum():
    schema = yaml.safe_load(SCHEMA.read_text())
    assert list(backends.NAMES) == schema["definitions"]["backend"]["enum"]
    assert tuple(backends.CLASSES) == backends.NAMES


@pytest.mark.parametrize("name", list(backends.NAMES))
def test_every_backend_class_says_what_it_is(name):
    cls = backends.CLASSES[name]
    assert cls.name == name
    for attr in ("name", "device_type", "title", "collective"):
        value = getattr(cls, attr, None)
        assert isinstance(value, str) and value.strip(), (name, attr)
    assert isinstance(backends.get(name, torch=fake_torch()), cls)


def test_only_the_cpu_is_not_an_accelerator():
    assert not backends.is_accelerator("cpu")
    assert not backends.is_accelerator("npu")  # no such backend
    assert set(backends.accelerator_names()) == set(backends.NAMES) - {"cpu"}
    assert all(backends.is_accelerator(n) for n in backends.accelerator_names())


# --------------------------------------------------------------------------- device selection


def test_cpu_is_always_one_device():
    assert backends.get("cpu", torch=fake_torch()).devices() == ["cpu"]


def test_cuda_lists_every_visible_device():
    torch = fake_torch(cuda="12.4", gpus=3)
    assert backends.get("cuda", torch=torch).devices() == ["cuda:0", "cuda:1", "cuda:2"]


def test_rocm_build_owns_its_gpus_and_cuda_does_not():
    rocm = fake_torch(hip="6.2.41133", gpus=2)
    assert backends.get("rocm", torch=rocm).is_this_build()
    assert backends.get("rocm", torch=rocm).devices() == ["cuda:0", "cuda:1"]
    with pytest.raises(BackendUnavailable, match="CUDA"):
        backends.get("cuda", torch=rocm).devices()


def test_cuda_build_is_not_rocm():
    cuda = fake_torch(cuda="12.4", gpus=1)
    assert not backends.get("rocm", torch=cuda).is_this_build()
    assert backends.get("cuda", torch=cuda).is_this_build()
    with pytest.raises(BackendUnavailable, match="ROCM"):
        backends.get("rocm", torch=cuda).devices()


@pytest.mark.parametrize("name", ["cuda", "rocm"])
def test_gpu_backends_unavailable_without_devices(name):
    torch = fake_torch(cuda="12.4" if name == "cuda" else None, hip="6.2" if name == "rocm" else None, gpus=0)
    with pytest.raises(BackendUnavailable):
        backends.get(name, torch=torch).devices()


def test_cpu_only_build_has_no_gpu_backend():
    torch = fake_torch()
    for name in ("cuda", "rocm", "xpu"):
        with pytest.raises(BackendUnavailable):
            backends.get(name, torch=torch).devices()


def test_mps_selection():
    assert backends.get("mps", torch=fake_torch(mps=True)).devices() == ["mps"]
    with pytest.raises(BackendUnavailable, match="mps"):
        backends.get("mps", torch=fake_torch(mps=False)).devices()
    with pytest.raises(BackendUnavailable):  # a torch without torch.backends.mps at all
        backends.get("mps", torch=fake_torch(mps=None)).devices()


def test_xla_selection():
    # one device per process: torch_xla.sync() runs only the default device's graph (issue 17, defect 4)
    assert backends.get("xla", torch=fake_torch(), xla=fake_xla()).devices() == ["xla:0"]
    assert backends.get("xla", torch=fake_torch(), xla=fake_xla(own=1)).devices() == ["xla:1"]
    with pytest.raises(BackendUnavailable, match="empty"):
        backends.get("xla", torch=fake_torch(), xla=fake_xla(devices=())).devices()
    with pytest.raises(BackendUnavailable, match="not installed"):
        backends.get("xla", torch=fake_torch(), import_module=no_torch_xla).devices()


def test_xla_absent_on_this_machine_is_reported_not_raised_as_import_error():
    try:
        import torch_xla  # noqa: F401
    except Exception:
        with pytest.raises(BackendUnavailable, match="not installed"):
            backends.get("xla").devices()
        entry = backends.get("xla").probe()
        assert entry["present"] is False and "not installed" in entry["reason"]
    else:  # pragma: no cover - a machine with torch_xla
        assert backends.get("xla").xla() is not None


def test_unknown_backend_names_the_allowed_ones():
    with pytest.raises(ValueError, match="allowed: cpu, cuda, rocm, mps, xla, xpu"):
        backends.get("tpu", torch=fake_torch())


@pytest.mark.parametrize(
    "device, build, expected",
    [
        ("cpu", {}, "cpu"),
        ("mps", {}, "mps"),
        ("xla:0", {}, "xla"),
        ("xpu:0", {}, "xpu"),
        ("xpu:1", {"xpu": 2}, "xpu"),
        ("cuda:0", {"cuda": "12.4"}, "cuda"),
        ("cuda:1", {"hip": "6.2"}, "rocm"),
        ("cuda", {"hip": "6.2"}, "rocm"),
    ],
)
def test_for_device(device, build, expected):
    assert backends.for_device(device, torch=fake_torch(**build)).name == expected


def test_for_device_unknown_device_names_the_allowed_kinds():
    with pytest.raises(ValueError, match="device: unknown 'npu:0'; allowed:.*xpu"):
        backends.for_device("npu:0", torch=fake_torch())


# --------------------------------------------------------------------------- synchronization


def test_cpu_sync_is_a_no_op_that_touches_no_device():
    calls: list = []
    sync = backends.get("cpu", torch=fake_torch(calls=calls)).synchronizer("cpu")
    assert sync() is None
    assert calls == []


@pytest.mark.parametrize("device", ["cuda:0", "cuda:3"])
def test_cuda_and_rocm_sync_the_named_device(device):
    calls: list = []
    for build in ({"cuda": "12.4"}, {"hip": "6.2"}):
        calls.clear()
        torch = fake_torch(calls=calls, gpus=4, **build)
        backends.for_device(device, torch=torch).synchronizer(device)()
        assert calls == [("cuda.synchronize", device)]


def test_mps_sync_calls_torch_mps_synchronize():
    calls: list = []
    backends.get("mps", torch=fake_torch(calls=calls, mps=True)).synchronizer("mps")()
    assert calls == [("mps.synchronize", None)]


def test_xla_sync_cuts_the_graph_then_waits(fake_xm):
    xla = fake_xla()
    backends.get("xla", torch=fake_torch(), xla=xla).synchronizer("xla:0")()
    assert xla.calls == ["sync"]
    assert fake_xm.calls == ["wait_device_ops"]


def test_xla_sync_falls_back_to_mark_step_on_old_releases(fake_xm):
    xla = fake_xla(with_sync=False)
    backends.get("xla", torch=fake_torch(), xla=xla).synchronizer("xla:0")()
    assert fake_xm.calls == ["mark_step", "wait_device_ops"]


def test_xla_graph_cut_is_only_for_xla(fake_xm):
    xla = fake_xla()
    cut = backends.get("xla", torch=fake_torch(), xla=xla).graph_cut()
    cut()
    assert xla.calls == ["sync"]
    for name in ("cpu", "cuda", "rocm", "mps", "xpu"):
        assert backends.get(name, torch=fake_torch()).graph_cut() is None, name


def test_xla_sync_without_torch_xla():
    with pytest.raises(BackendUnavailable, match="torch_xla is not installed"):
        backends.get("xla", torch=fake_torch(), import_module=no_torch_xla).synchronizer("xla:0")


def test_synced_timer_syncs_before_reading_the_clock(monkeypatch):
    events: list = []
    torch = fake_torch(cuda="12.4", gpus=1, calls=events)
    clock = iter(range(100))
    monkeypatch.setattr(base.timeit, "default_timer", lambda: events.append("clock") or float(next(clock)))
    timer = backends.get("cuda", torch=torch).synced_timer("cuda:0")
    assert timer() == 0.0
    assert timer() == 1.0
    assert events == [("cuda.synchronize", "cuda:0"), "clock", ("cuda.synchronize", "cuda:0"), "clock"]


def test_synced_timer_on_cpu_reads_the_clock_only(monkeypatch):
    events: list = []
    monkeypatch.setattr(base.timeit, "default_timer", lambda: events.append("clock") or 5.0)
    timer = backends.get("cpu", torch=fake_torch(calls=events)).synced_timer("cpu")
    assert timer() == 5.0
    assert events == ["clock"]


def test_torch_utils_benchmark_uses_the_synced_timer():
    """The timer really is what torch.utils.benchmark reads: every reading syncs the device first."""
    from torch.utils.benchmark import Timer

    calls: list = []
    fake = fake_torch(cuda="12.4", gpus=1, calls=calls)
    Timer(stmt="pass", timer=backends.get("cuda", torch=fake).synced_timer("cuda:0")).timeit(5)
    assert len(calls) >= 2
    assert set(calls) == {("cuda.synchronize", "cuda:0")}


# --------------------------------------------------------------------------- AMP


@pytest.mark.parametrize(
    "name, device_type, dtype, scaler",
    [
        ("cuda", "cuda", "float16", True),
        ("rocm", "cuda", "float16", True),
        ("mps", "mps", "float16", True),
        ("cpu", "cpu", "bfloat16", False),
        ("xla", "xla", "bfloat16", False),
        ("xpu", "xpu", "bfloat16", False),
    ],
)
def test_amp_policy_auto(name, device_type, dtype, scaler):
    assert backends.get(name).amp_policy() == AmpPolicy(device_type=device_type, dtype=dtype, use_scaler=scaler)
    assert backends.get(name).amp_policy("auto") == backends.get(name).amp_policy()


def test_amp_policy_requested_dtype_decides_the_scaler():
    assert backends.get("cuda").amp_policy("bfloat16") == AmpPolicy("cuda", "bfloat16", False)
    assert backends.get("cpu").amp_policy("float16") == AmpPolicy("cpu", "float16", True)
    assert backends.get("xpu").amp_policy("float16") == AmpPolicy("xpu", "float16", True)


def test_amp_policy_bad_input():
    with pytest.raises(ValueError, match="allowed: auto, bfloat16, float16"):
        backends.get("cuda").amp_policy("float8")
    with pytest.raises(ValueError, match="allowed: cpu, cuda"):
        backends.get("tpu").amp_policy()


def test_every_backend_has_an_amp_policy():
    for name in backends.NAMES:
        policy = backends.get(name).amp_policy()
        assert policy.dtype in ("float16", "bfloat16"), name
        assert policy.device_type == backends.CLASSES[name].device_type, name


def test_scaler_only_for_fp16():
    calls: list = []
    fake = fake_torch(calls=calls)
    assert backends.get("cpu").amp_policy().scaler(fake) is None
    assert backends.get("rocm").amp_policy().scaler(fake) == "scaler"
    assert calls == [("GradScaler", "cuda")]


def test_scaler_with_real_torch_on_cpu():
    import torch

    scaler = backends.get("cpu").amp_policy("float16").scaler(torch)
    assert isinstance(scaler, torch.amp.GradScaler)


@pytest.mark.parametrize("user_precision", ["highest", "high", "medium"])
@pytest.mark.parametrize(
    "backend_name,tf32",
    [("cuda", True), ("cuda", False), ("rocm", True), ("cpu", False), ("xpu", True), ("mps", True), ("xla", True)],
)
def test_float32_math_restores_what_the_user_had(user_precision, backend_name, tf32):
    """With real torch flags (no GPU needed): inside, strict or TF32 as asked; after, exactly the user's
    setting again -- "medium" included, which restoring allow_tf32 last would turn into "high"."""
    import torch

    from accelbench.backends.base import fp32_precision_api

    saved = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
    torch.set_float32_matmul_precision(user_precision)
    try:
        with backends.get(backend_name, torch=torch).float32_math(tf32) as in_effect:
            assert in_effect is (tf32 and backend_name == "cuda")
            if fp32_precision_api(torch):  # torch >= 2.9: the new API only (a legacy read here would raise)
                want = "tf32" if in_effect else "ieee"
                assert torch.backends.cuda.matmul.fp32_precision == want
                assert torch.backends.cudnn.conv.fp32_precision == want
                if not in_effect:
                    assert torch.backends.mkldnn.matmul.fp32_precision == "ieee"
            else:
                assert torch.backends.cuda.matmul.allow_tf32 is in_effect
                assert torch.backends.cudnn.allow_tf32 is in_effect
                if not in_effect:
                    assert torch.get_float32_matmul_precision() == "highest"
        assert torch.get_float32_matmul_precision() == user_precision
    finally:
        torch.set_float32_matmul_precision(saved[0])
        torch.backends.cudnn.allow_tf32 = saved[1]


# --------------------------------------------------------------------------- XPU (Intel GPUs, fakes)


def test_xpu_lists_every_visible_device():
    """XPU path: untested on hardware."""
    assert backends.get("xpu", torch=fake_torch(xpu=3)).devices() == ["xpu:0", "xpu:1", "xpu:2"]


def test_xpu_unavailable_without_torch_xpu_or_device():
    with pytest.raises(BackendUnavailable, match="no torch.xpu"):
        backends.get("xpu", torch=fake_torch()).devices()
    with pytest.raises(BackendUnavailable, match="is_available"):
        backends.get("xpu", torch=fake_torch(xpu=2, xpu_available=False)).devices()


def test_xpu_probe_present_and_absent():
    entry = backends.get("xpu", torch=fake_torch(xpu=2)).probe()
    assert entry["present"] is True
    assert [d["device"] for d in entry["devices"]] == ["xpu:0", "xpu:1"]
    assert entry["devices"][0]["name"] == MAX_1550
    absent = backends.get("xpu", torch=fake_torch(xpu=1, xpu_available=False)).probe()
    assert absent["present"] is False and absent["devices"] == [] and "is_available" in absent["reason"]
    assert backends.get("xpu", torch=fake_torch()).probe()["present"] is False


def test_xpu_sync_calls_torch_xpu_synchronize_with_the_device():
    calls: list = []
    xpu = backends.get("xpu", torch=fake_torch(xpu=2, calls=calls))
    xpu.synchronize("xpu:1")
    assert calls == [("xpu.synchronize", "xpu:1")]
    calls.clear()
    xpu.synchronizer("xpu:0")()
    assert calls == [("xpu.synchronize", "xpu:0")]


def test_xpu_synced_timer_syncs_before_reading_the_clock(monkeypatch):
    events: list = []
    monkeypatch.setattr(base.timeit, "default_timer", lambda: events.append("clock") or 7.0)
    timer = backends.get("xpu", torch=fake_torch(xpu=1, calls=events)).synced_timer("xpu:0")
    assert timer() == 7.0
    assert events == [("xpu.synchronize", "xpu:0"), "clock"]


def test_xpu_amp_is_bf16_without_scaler():
    calls: list = []
    policy = backends.get("xpu").amp_policy()
    assert policy == AmpPolicy(device_type="xpu", dtype="bfloat16", use_scaler=False)
    assert policy.scaler(fake_torch(calls=calls)) is None
    assert calls == []


def test_xpu_device_info_maps_compute_units_to_multiprocessors():
    torch = fake_torch(xpu=2, xpu_props=[XpuProps(units=1024), XpuProps(units=512, mem=64 * 2**30)])
    info = backends.get("xpu", torch=torch).device_info("xpu:1")
    assert info["device"] == "xpu:1" and info["index"] == 1
    assert info["name"] == MAX_1550
    assert info["multiprocessors"] == 512
    assert info["total_memory_bytes"] == 64 * 2**30
    assert info["driver_version"] == "1.3.29735"
    assert backends.for_device("xpu:0", torch=torch).device_info("xpu:0")["multiprocessors"] == 1024


def test_xpu_one_failing_device_does_not_hide_the_others():
    torch = fake_torch(xpu=2, xpu_props=[RuntimeError("device lost"), XpuProps()])
    entry = backends.get("xpu", torch=torch).probe()
    assert entry["present"] is True
    assert "device lost" in entry["devices"][0]["error"] and entry["devices"][0]["name"] == "unknown (xpu:0)"
    assert entry["devices"][1]["name"] == MAX_1550


def test_xpu_peak_of_a_max_1550_and_of_one_stack():
    xpu = backends.get("xpu")
    value, source = xpu.peak_tflops({"name": MAX_1550}, "bfloat16")
    assert value == pytest.approx(838.9)
    assert "Max 1550" in source
    value, source = xpu.peak_tflops({"name": MAX_1550, "multiprocessors": 512}, "bfloat16")
    assert value == pytest.approx(838.9 / 2)
    assert "512/1024" in source
    assert xpu.peak_is_bound({"name": MAX_1550}, overridden=False)
    # what probe reports is what the peak is computed from
    torch = fake_torch(xpu=1, xpu_props=[XpuProps(units=512)])
    (dev,) = backends.get("xpu", torch=torch).probe()["devices"]
    assert xpu.peak_tflops(xpu.peak_info(dev), "float16")[0] == pytest.approx(838.9 / 2)


def test_xpu_precision_support():
    xpu = backends.get("xpu", torch=fake_torch(xpu=1))
    assert xpu.dtype_support("bfloat16") is None and xpu.dtype_support("float32") is None
    assert xpu.dtype_support("tf32") is not None  # no TF32 switch is used on Intel GPUs
    assert xpu.fp8_support({"name": MAX_1550}) is not None


def test_xpu_peak_memory_reads_torch_xpu_counters():
    calls: list = []
    xpu = backends.get("xpu", torch=fake_torch(xpu=2, calls=calls))
    assert xpu.reset_peak_memory("xpu:1") is True  # a per-trial counter
    assert xpu.peak_memory("xpu:1") == (float(3 * 2**30), "allocator")
    assert calls == [("xpu.reset_peak_memory_stats", "xpu:1"), ("xpu.max_memory_allocated", "xpu:1")]


def test_xpu_registry_attributes():
    cls = backends.CLASSES["xpu"]
    assert (cls.device_type, cls.collective) == ("xpu", "xccl")
    assert cls.is_accelerator and cls.needs_gpu_resource
    assert backends.get("xpu").engine_device_args("podman", (109,)) == [
        "--device",
        "/dev/dri",
        "--group-add",
        "video",
        "--group-add",
        "109",
        "--ipc=host",
    ]
