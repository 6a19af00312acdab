"""Per-backend logic of ``accelbench.backend`` with fake torch / torch_xla modules.

CUDA, ROCm, MPS and XLA are untested on hardware here: these tests check the dispatch logic
(which devices are listed, which build owns a GPU, which synchronize function is called and when,
which AMP mode each backend gets), not the hardware behaviour.
"""

from __future__ import annotations

import sys
import types

import pytest

from accelbench import backend
from accelbench.backend import (BACKENDS, AmpPolicy, BackendUnavailable, amp_policy, backend_of, device_strings,
                                is_rocm_build, synced_timer, synchronizer)


def fake_torch(*, cuda: str | None = None, hip: str | None = None, gpus: int = 0, available: bool | None = None,
               mps: bool | None = None, calls: list | None = None):
    """A stand-in for the torch module: ``torch.version``, ``torch.cuda``, ``torch.backends.mps``,
    ``torch.mps``, ``torch.amp``; every synchronize/GradScaler call is appended to ``calls``."""
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
    return t


def fake_xla(devices=("xla:0", "xla:1"), with_sync=True, calls=None):
    calls = calls if calls is not None else []
    x = types.ModuleType("torch_xla")
    x.devices = lambda: list(devices)
    if with_sync:
        x.sync = lambda: calls.append("sync")
    x.calls = calls
    return x


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


# --------------------------------------------------------------------------- device selection


def test_cpu_is_always_one_device():
    assert device_strings("cpu", torch=fake_torch()) == ["cpu"]


def test_cuda_lists_every_visible_device():
    torch = fake_torch(cuda="12.4", gpus=3)
    assert device_strings("cuda", torch=torch) == ["cuda:0", "cuda:1", "cuda:2"]


def test_rocm_build_owns_its_gpus_and_cuda_does_not():
    rocm = fake_torch(hip="6.2.41133", gpus=2)
    assert is_rocm_build(rocm)
    assert device_strings("rocm", torch=rocm) == ["cuda:0", "cuda:1"]
    with pytest.raises(BackendUnavailable, match="CUDA"):
        device_strings("cuda", torch=rocm)


def test_cuda_build_is_not_rocm():
    cuda = fake_torch(cuda="12.4", gpus=1)
    assert not is_rocm_build(cuda)
    with pytest.raises(BackendUnavailable, match="ROCM"):
        device_strings("rocm", torch=cuda)


@pytest.mark.parametrize("name", ["cuda", "rocm"])
def test_gpu_backends_unavailable_without_devices(name):
    torch = fake_torch(cuda="12.4" if name == "cuda" else None, hip="6.2" if name == "rocm" else None, gpus=0)
    with pytest.raises(BackendUnavailable):
        device_strings(name, torch=torch)


def test_cpu_only_build_has_no_gpu_backend():
    torch = fake_torch()
    for name in ("cuda", "rocm"):
        with pytest.raises(BackendUnavailable):
            device_strings(name, torch=torch)


def test_mps_selection():
    assert device_strings("mps", torch=fake_torch(mps=True)) == ["mps"]
    with pytest.raises(BackendUnavailable, match="mps"):
        device_strings("mps", torch=fake_torch(mps=False))
    with pytest.raises(BackendUnavailable):  # a torch without torch.backends.mps at all
        device_strings("mps", torch=fake_torch(mps=None))


def test_xla_selection(monkeypatch):
    assert device_strings("xla", torch=fake_torch(), xla=fake_xla()) == ["xla:0", "xla:1"]
    with pytest.raises(BackendUnavailable, match="empty"):
        device_strings("xla", torch=fake_torch(), xla=fake_xla(devices=()))
    monkeypatch.setattr(backend, "_xla", lambda: None)
    with pytest.raises(BackendUnavailable, match="not installed"):
        device_strings("xla", torch=fake_torch())


def test_xla_absent_on_this_machine_is_reported_not_raised_as_import_error():
    try:
        import torch_xla  # noqa: F401
    except Exception:
        assert backend._xla() is None
        with pytest.raises(BackendUnavailable):
            device_strings("xla")
    else:  # pragma: no cover - a machine with torch_xla
        assert backend._xla() is not None


def test_unknown_backend_names_the_allowed_ones():
    with pytest.raises(ValueError, match="allowed: cpu, cuda, rocm, mps, xla"):
        device_strings("tpu", torch=fake_torch())


@pytest.mark.parametrize("device, build, expected", [
    ("cpu", {}, "cpu"), ("mps", {}, "mps"), ("xla:0", {}, "xla"),
    ("cuda:0", {"cuda": "12.4"}, "cuda"), ("cuda:1", {"hip": "6.2"}, "rocm"), ("cuda", {"hip": "6.2"}, "rocm"),
])
def test_backend_of(monkeypatch, device, build, expected):
    monkeypatch.setattr(backend, "_torch", lambda: fake_torch(**build))
    assert backend_of(device) == expected


def test_backend_of_unknown_device():
    with pytest.raises(ValueError, match="device"):
        backend_of("npu:0")


# --------------------------------------------------------------------------- synchronization


def test_cpu_sync_is_a_no_op_that_touches_no_device():
    calls: list = []
    sync = synchronizer("cpu", torch=fake_torch(calls=calls))
    assert sync() is None
    assert calls == []


@pytest.mark.parametrize("device", ["cuda:0", "cuda:3"])
def test_cuda_and_rocm_sync_the_named_device(device):
    calls: list = []
    for build in ({"cuda": "12.4"}, {"hip": "6.2"}):
        calls.clear()
        synchronizer(device, torch=fake_torch(calls=calls, gpus=4, **build))()
        assert calls == [("cuda.synchronize", device)]


def test_mps_sync_calls_torch_mps_synchronize():
    calls: list = []
    synchronizer("mps", torch=fake_torch(calls=calls, mps=True))()
    assert calls == [("mps.synchronize", None)]


def test_xla_sync_cuts_the_graph_then_waits(fake_xm):
    xla = fake_xla()
    synchronizer("xla:0", torch=fake_torch(), xla=xla)()
    assert xla.calls == ["sync"]
    assert fake_xm.calls == ["wait_device_ops"]


def test_xla_sync_falls_back_to_mark_step_on_old_releases(fake_xm):
    xla = fake_xla(with_sync=False)
    synchronizer("xla:0", torch=fake_torch(), xla=xla)()
    assert fake_xm.calls == ["mark_step", "wait_device_ops"]


def test_xla_sync_without_torch_xla(monkeypatch):
    monkeypatch.setattr(backend, "_xla", lambda: None)
    with pytest.raises(BackendUnavailable):
        synchronizer("xla:0", torch=fake_torch())


def test_unknown_device_sync():
    with pytest.raises(ValueError):
        synchronizer("npu:0", torch=fake_torch())


def test_synced_timer_syncs_before_reading_the_clock(monkeypatch):
    events: list = []
    torch = fake_torch(cuda="12.4", gpus=1, calls=events)
    clock = iter(range(100))
    monkeypatch.setattr(backend.timeit, "default_timer", lambda: events.append("clock") or float(next(clock)))
    timer = synced_timer("cuda:0", torch=torch)
    assert timer() == 0.0
    assert timer() == 1.0
    assert events == [("cuda.synchronize", "cuda:0"), "clock", ("cuda.synchronize", "cuda:0"), "clock"]


def test_synced_timer_on_cpu_reads_the_clock_only(monkeypatch):
    events: list = []
    monkeypatch.setattr(backend.timeit, "default_timer", lambda: events.append("clock") or 5.0)
    timer = synced_timer("cpu", torch=fake_torch(calls=events))
    assert timer() == 5.0
    assert events == ["clock"]


def test_torch_utils_benchmark_uses_the_synced_timer():
    """The timer really is what torch.utils.benchmark reads: every reading syncs the device first."""
    from torch.utils.benchmark import Timer

    calls: list = []
    fake = fake_torch(cuda="12.4", gpus=1, calls=calls)
    Timer(stmt="pass", timer=synced_timer("cuda:0", torch=fake)).timeit(5)
    assert len(calls) >= 2
    assert set(calls) == {("cuda.synchronize", "cuda:0")}


# --------------------------------------------------------------------------- AMP


@pytest.mark.parametrize("name, device_type, dtype, scaler", [
    ("cuda", "cuda", "float16", True),
    ("rocm", "cuda", "float16", True),
    ("mps", "mps", "float16", True),
    ("cpu", "cpu", "bfloat16", False),
    ("xla", "xla", "bfloat16", False),
])
def test_amp_policy_auto(name, device_type, dtype, scaler):
    assert amp_policy(name) == AmpPolicy(device_type=device_type, dtype=dtype, use_scaler=scaler)


def test_amp_policy_requested_dtype_decides_the_scaler():
    assert amp_policy("cuda", "bfloat16") == AmpPolicy("cuda", "bfloat16", False)
    assert amp_policy("cpu", "float16") == AmpPolicy("cpu", "float16", True)


def test_amp_policy_bad_input():
    with pytest.raises(ValueError, match="allowed: auto, bfloat16, float16"):
        amp_policy("cuda", "float8")
    with pytest.raises(ValueError, match="allowed: cpu, cuda"):
        amp_policy("tpu")


def test_every_backend_has_an_amp_policy():
    for name in BACKENDS:
        assert amp_policy(name).dtype in ("float16", "bfloat16")


def test_scaler_only_for_fp16():
    calls: list = []
    fake = fake_torch(calls=calls)
    assert amp_policy("cpu").scaler(torch=fake) is None
    assert amp_policy("rocm").scaler(torch=fake) == "scaler"
    assert calls == [("GradScaler", "cuda")]


def test_scaler_with_real_torch_on_cpu():
    import torch

    scaler = amp_policy("cpu", "float16").scaler()
    assert isinstance(scaler, torch.amp.GradScaler)


@pytest.mark.parametrize("user_precision", ["highest", "high", "medium"])
@pytest.mark.parametrize("backend_name,tf32", [("cuda", True), ("cuda", False), ("rocm", True), ("cpu", False)])
def test_float32_math_restores_what_the_user_had(user_precision, backend_name, tf32):
    """With real torch flags (no GPU needed): inside, strict or TF32 as asked; after, exactly the user's
    setting again -- "medium" included, which restoring allow_tf32 last would turn into "high"."""
    import torch

    saved = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
    torch.set_float32_matmul_precision(user_precision)
    try:
        with backend.float32_math(backend_name, tf32, torch) as in_effect:
            assert in_effect is (tf32 and backend_name == "cuda")
            assert torch.backends.cuda.matmul.allow_tf32 is in_effect
            assert torch.backends.cudnn.allow_tf32 is in_effect
            if not in_effect:
                assert torch.get_float32_matmul_precision() == "highest"
        assert torch.get_float32_matmul_precision() == user_precision
    finally:
        torch.set_float32_matmul_precision(saved[0])
        torch.backends.cudnn.allow_tf32 = saved[1]
