"""What the first real MI300X, TPU, Mac and GPU-image runs would have hit (issue 17), with fakes.

Each block plants the device facts one defect depends on -- a gfx942 architecture, a fake torch_xla,
an older torch version, a rootless Podman, a Containerfile's environment -- and checks the backend
(or the stage asking it) does the right thing. These paths are **untested on hardware**: no MI300X,
TPU or Mac has run them; the fakes reproduce what the real APIs say (hipBLASLt's fp8 types per
architecture, torch_xla's set_mat_mul_precision, podman-run(1)'s keep-groups, pip's PEP 668 check).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import types
from pathlib import Path

import pytest
import torch

from accelbench import backends, registry
from accelbench.backends.peaks import UNKNOWN_DEVICE
from accelbench.backends.xla import XlaBackend
from accelbench.measure.failures import failure_status
from accelbench.run import containers as C
from accelbench.run.config import config_hash, with_defaults
from accelbench.stages import common
from accelbench.stages.amp import measure as amp
from accelbench.stages.matmul.measure import TorchMatmul, measure_point
from test_matmul import FakeKernels, settings

REPO = Path(__file__).resolve().parents[1]
MI300X = {"name": "AMD Instinct MI300X", "gcn_arch_name": "gfx942:sramecc+:xnack-", "multiprocessors": 304}
TINY_AMP = {
    "workloads": ["mlp"],
    "seeds": [0, 1],
    "steps": 6,
    "warmup_steps": 1,
    "batch_size": 16,
    "lr": 0.01,
    "data": {"n_train": 64, "n_test": 32, "n_features": 8, "n_classes": 3},
    "mlp": {"hidden": 16, "layers": 1},
}
TINY_WARMUP = {"n": 16, "max_iters": 20, "window": 3, "rel_tol": 0.5}


class TorchWith:
    """The real torch module with some attributes planted (``__version__``, ``mps``): CPU tensors, a
    different version string or device module."""

    def __init__(self, **planted):
        self.__dict__.update(planted)

    def __getattr__(self, name):
        return getattr(torch, name)


def fake_import(modules: dict):
    def import_module(name):
        if name not in modules:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return modules[name]

    return import_module


def fake_torch_xla(devices=("xla:0", "xla:1"), own=0, api="backends", precision="default"):
    """torch_xla with its matmul-precision switch where torch_xla >= 2.8 (``backends``) or 2.5-2.7
    (``_XLAC``) has it, or none (``api=None``); ``calls`` records syncs and precision changes in order."""
    calls: list = []
    state = {"precision": precision}

    def set_precision(value):
        calls.append(("set_mat_mul_precision", value))
        state["precision"] = value

    x = types.SimpleNamespace(
        __version__="2.8.0",
        devices=lambda: list(devices),
        device=lambda: devices[own],
        sync=lambda: calls.append("sync"),
        calls=calls,
        state=state,
    )
    get_precision = lambda: state["precision"]
    if api == "backends":
        x.backends = types.SimpleNamespace(set_mat_mul_precision=set_precision, get_mat_mul_precision=get_precision)
    elif api == "xlac":
        x._XLAC = types.SimpleNamespace(
            _xla_set_mat_mul_precision=set_precision, _xla_get_mat_mul_precision=get_precision
        )
    return x


def fake_xm(calls: list, peak_bytes=5e9):
    return types.SimpleNamespace(
        wait_device_ops=lambda: calls.append("wait_device_ops"),
        xla_device_hw=lambda d: "TPU",
        xla_device_kind=lambda d: "TPU v5 lite",
        get_memory_info=lambda d: {"bytes_used": 1e9, "peak_bytes_used": peak_bytes},
    )


def xla_backend(x) -> XlaBackend:
    return XlaBackend(torch=torch, xla=x, import_module=fake_import({"torch_xla.core.xla_model": fake_xm(x.calls)}))


def write_run(tmp_path, **config) -> str:
    cfg = with_defaults({"run": "t", **config})
    path = tmp_path / "run.json"
    path.write_text(
        json.dumps(
            {"run": "t", "config": cfg, "config_hash": config_hash(cfg), "git_commit": "abc", "accelbench_version": "0"}
        )
    )
    return str(path)


# --------------------------------------------------------------------------- 1. fp8 on MI300X (gfx942)


@pytest.mark.parametrize(
    "arch,expected",
    [
        ("gfx942:sramecc+:xnack-", "float8_e4m3fnuz"),
        ("gfx940", "float8_e4m3fnuz"),
        ("gfx941", "float8_e4m3fnuz"),
        ("gfx950", "float8_e4m3fn"),
        ("gfx1201", "float8_e4m3fn"),
    ],
)
def test_rocm_multiplies_the_fp8_encoding_of_its_architecture(arch, expected):
    """hipBLASLt takes only the fnuz fp8 types on gfx942 and only OCP e4m3fn on gfx950/gfx12."""
    rocm = backends.get("rocm", torch=torch)
    assert rocm.fp8_dtype({"gcn_arch_name": arch}) == expected
    assert rocm.dtype_support("float8_e4m3fn", {"gcn_arch_name": arch}) is None
    assert backends.get("cuda", torch=torch).fp8_dtype({"compute_capability": "9.0"}) == "float8_e4m3fn"


def test_rocm_fp8_is_unsupported_on_a_torch_without_the_fnuz_dtype():
    no_fnuz = types.SimpleNamespace(_scaled_mm=object(), float8_e4m3fn="e4m3fn", __version__="2.13.0")
    reason = backends.get("rocm", torch=no_fnuz).dtype_support("float8_e4m3fn", MI300X)
    assert "float8_e4m3fnuz" in reason and "gfx942" in reason


def test_gfx942_inputs_are_quantized_to_fnuz_and_the_row_records_it():
    """The real quantization on CPU tensors for a device that says gfx942: both inputs in
    float8_e4m3fnuz (B column-major, as _scaled_mm wants); the row keeps dtype float8_e4m3fn for
    matching and records torch_dtype float8_e4m3fnuz."""
    k = TorchMatmul("cpu", backends.get("rocm", torch=torch), measurer=None, info=dict(MI300X))
    assert k.torch_dtype("float8_e4m3fn") == "float8_e4m3fnuz" and k.torch_dtype("tf32") == "float32"
    ((a, b),) = k._pairs("float8_e4m3fn", 8, 1)
    assert a.dtype == b.dtype == torch.float8_e4m3fnuz
    assert b.stride() == (1, 8)  # column-major
    fake = FakeKernels()
    fake.torch_dtype = k.torch_dtype
    row = measure_point(fake, dtype="float8_e4m3fn", n=64, settings=settings(), peak=(2614.9, "MI300X"))
    assert row["status"] == "ok" and row["dtype"] == "float8_e4m3fn" and row["torch_dtype"] == "float8_e4m3fnuz"
    assert "torch_dtype" in registry.TABLES["matmul"].all_columns


@pytest.mark.parametrize(
    "message",
    [
        "CUDA error: HIPBLAS_STATUS_NOT_SUPPORTED when calling `hipblasLtMatmul( handle, computeDesc.descriptor(), ...)`",
        "CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasLtMatmul( ltHandle, ...)`",
    ],
)
def test_blas_not_supported_is_an_unsupported_point(message):
    exc = RuntimeError(message)
    assert failure_status(exc) == "unsupported"
    assert failure_status(exc, backends.get("rocm", torch=torch)) == "unsupported"
    k = FakeKernels(raise_at={("float8_e4m3fn", 64): exc})
    row = measure_point(k, dtype="float8_e4m3fn", n=64, settings=settings(), peak=(None, "x"))
    assert row["status"] == "unsupported" and "BLAS_STATUS_NOT_SUPPORTED" in row["status_detail"]


# --------------------------------------------------------------------------- 2. TPU float32 is float32


def test_xla_strict_float32_sets_torch_xla_precision_highest_once():
    x = fake_torch_xla()
    b = xla_backend(x)
    with b.float32_math(False) as tf32:
        assert tf32 is False and x.state["precision"] == "highest"
    with b.float32_math(True) as tf32:  # XLA has no TF32: strict again, already set, so not set twice
        assert tf32 is False
    assert [c for c in x.calls if c != "sync"] == [("set_mat_mul_precision", "highest")]
    assert x.state["precision"] == "highest"  # kept for the process: graphs keep the precision they got


def test_xla_precision_on_torch_xla_2_5_to_2_7_and_refusal_without_it():
    x = fake_torch_xla(api="xlac")
    b = xla_backend(x)
    b.prepare_process()
    assert x.state["precision"] == "highest" and b.dtype_support("float32") is None
    old = xla_backend(fake_torch_xla(api=None))
    old.prepare_process()  # nothing to set: no error here ...
    reason = old.dtype_support("float32")  # ... but float32 points say why they are not measured
    assert "torch_xla >= 2.5" in reason and "bf16" in reason
    assert old.dtype_support("bfloat16") is None


def test_stage_start_sets_xla_precision_before_anything_runs(tmp_path):
    """``common.start`` asks the backend to prepare the process before the warm-up traces its first graph."""
    x = fake_torch_xla()
    st = common.start("matmul", write_run(tmp_path, backends=["xla"]), "xla", 1, backend=xla_backend(x))
    assert st.devices == ["xla:0"]
    assert x.calls == [("set_mat_mul_precision", "highest")]  # first, and no graph cut (sync) yet
    absent = fake_torch_xla(devices=())
    st = common.start("matmul", write_run(tmp_path, backends=["xla"]), "xla", 1, backend=xla_backend(absent))
    assert st.devices == [] and absent.calls == []  # no device: nothing set


# --------------------------------------------------------------------------- 3. XLA AMP: index on the host


class HostOrder:
    """The batch order ``amp.batch_order`` made, watched: moved whole to the device, or indexed per step."""

    def __init__(self, order):
        self.order = order
        self.moved_whole: list = []
        self.indexed: list = []

    def to(self, device):
        self.moved_whole.append(device)
        return self.order.to(device)

    def __getitem__(self, step):
        self.indexed.append(step)
        return self.order[step]

    def __len__(self):
        return len(self.order)


def test_amp_picks_each_steps_batch_on_the_host(monkeypatch):
    """On XLA, ``device_order[step]`` bakes the step number into the traced graph (a compilation per step);
    the order must stay on the host, indexed there with the Python int, the row then moved."""
    watched = []

    def watched_order(*args, **kwargs):
        watched.append(HostOrder(amp.batch_order.__wrapped__(*args, **kwargs)))
        return watched[-1]

    watched_order.__wrapped__ = amp.batch_order
    monkeypatch.setattr(amp, "batch_order", watched_order)
    cfg = with_defaults({"amp": TINY_AMP})["amp"]
    data = amp.make_data("mlp", cfg, 0, torch)
    trial = amp.Trial("cpu", "cpu", "cpu", "mlp", "fp32", 0)
    row = amp.run_trial(
        trial, cfg, data, backends.get("cpu").amp_policy("auto"), backend=backends.get("cpu"), threads=1, steps_out=[]
    )
    assert row["status"] == "ok" and len(watched) == 1
    assert watched[0].moved_whole == []  # never the whole order on the device
    assert watched[0].indexed == list(range(cfg["steps"]))  # one host index per step, a Python int each
    assert all(isinstance(i, int) for i in watched[0].indexed)


# --------------------------------------------------------------------------- 4. several TPU chips


def test_xla_stage_measures_only_its_own_device(tmp_path):
    """``torch_xla.sync()`` runs only the default device's graph: a stage measures that device alone."""
    for own in (0, 1):
        x = fake_torch_xla(devices=("xla:0", "xla:1", "xla:2", "xla:3"), own=own)
        st = common.start("matmul", write_run(tmp_path, backends=["xla"]), "xla", 1, backend=xla_backend(x))
        assert st.devices == [f"xla:{own}"]
    entry = xla_backend(fake_torch_xla(devices=("xla:0", "xla:1"))).probe()
    assert [d["device"] for d in entry["devices"]] == ["xla:0", "xla:1"]  # detection still lists every chip
    assert [d["measured"] for d in entry["devices"]] == [True, False] and "one process per chip" in entry["note"]


# --------------------------------------------------------------------------- 5. XLA memory peak


def test_xla_peak_memory_is_labelled_process_wide():
    b = xla_backend(fake_torch_xla())
    assert b.reset_peak_memory("xla:0") is False  # torch_xla cannot reset peak_bytes_used
    assert b.peak_memory("xla:0", per_trial=False) == (5e9, "allocator_process_peak")
    assert "`allocator_process_peak`" in (REPO / "docs" / "results.md").read_text()  # the column's meaning


# --------------------------------------------------------------------------- 6. the CUDA image's pip


def containerfile_env(backend: str) -> tuple[dict, int, int]:
    """(ENV variables, index of the first ENV instruction setting them, index of the first pip-install RUN)
    of ``containers/<backend>/Containerfile``, instructions joined across line continuations."""
    text = (REPO / "containers" / backend / "Containerfile").read_text()
    instructions, current = [], ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") and not current:
            continue
        current += line.rstrip("\\").strip() + " "
        if not line.rstrip().endswith("\\"):
            instructions.append(current.strip())
            current = ""
    env, env_at, pip_at = {}, None, None
    for i, ins in enumerate(instructions):
        if ins.startswith("ENV "):
            for word in shlex.split(ins[4:]):
                key, _, value = word.partition("=")
                env[key] = value
                env_at = i if env_at is None and key.startswith("PIP_BREAK") else env_at
        if ins.startswith("RUN ") and "pip install" in ins and pip_at is None:
            pip_at = i
    return env, env_at, pip_at


@pytest.mark.parametrize("backend", ["cuda", "rocm"])
def test_gpu_images_may_pip_install_into_an_externally_managed_python(backend):
    """pytorch/pytorch >= 2.10 and rocm/pytorch (Ubuntu 24.04) run the system Python 3.12, which refuses
    ``pip install`` (PEP 668) unless told: the images set PIP_BREAK_SYSTEM_PACKAGES before their first
    pip install (the image's own torch stays pinned by the constraints file)."""
    env, env_at, pip_at = containerfile_env(backend)
    assert env.get("PIP_BREAK_SYSTEM_PACKAGES") == "1"
    assert env_at is not None and pip_at is not None and env_at < pip_at


def externally_managed_python() -> str | None:
    """A system python3 with pip that refuses installs (PEP 668), as Debian/Ubuntu ship it; None if none here."""
    for py in ("/usr/bin/python3", shutil.which("python3")):
        if not py or not os.path.exists(py):
            continue
        probe = subprocess.run(
            [
                py,
                "-c",
                "import os, sysconfig, pip; print(os.path.exists(os.path.join("
                "sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')))",
            ],
            capture_output=True,
            text=True,
        )
        if probe.stdout.strip() == "True":
            return py
    return None


def test_the_images_pip_settings_get_past_a_real_pep668_refusal():
    """This machine's Debian python3 refuses pip exactly as Ubuntu 24.04's does; with the CUDA image's ENV
    the refusal is gone (pip goes on to look for the package, offline here)."""
    py = externally_managed_python()
    if py is None:  # pragma: no cover - every CI machine of this project has Debian's python3
        pytest.skip("no externally-managed python3 with pip here")
    argv = [py, "-m", "pip", "install", "--dry-run", "--no-index", "--no-deps", "accelbench-no-such-package"]
    base = {k: v for k, v in os.environ.items() if not k.startswith("PIP_BREAK")}
    refused = subprocess.run(argv, capture_output=True, text=True, env=base)
    assert "externally-managed-environment" in refused.stdout + refused.stderr  # the test can fail
    env, _, _ = containerfile_env("cuda")
    pip_env = {k: v for k, v in env.items() if k.startswith("PIP_")}
    allowed = subprocess.run(argv, capture_output=True, text=True, env={**base, **pip_env})
    assert "externally-managed-environment" not in allowed.stdout + allowed.stderr
    assert "accelbench-no-such-package" in allowed.stdout + allowed.stderr


# --------------------------------------------------------------------------- 7. ROCm under rootless Podman


def group_adds(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "--group-add"]


def test_rocm_under_rootless_podman_keeps_the_users_groups(monkeypatch):
    """With --userns=keep-id the host's video/render groups do not map into the container: /dev/kfd stays
    closed. ``keep-groups`` (crun) passes the user's own group access in, and allows no other --group-add."""
    argv = C.run_argv(
        "podman", "rocm", "img", ["true"], workdir="/w", uid=1000, gid=1000, rootless=True, device_gids=(109, 44)
    )
    assert group_adds(argv) == ["keep-groups"] and "--userns=keep-id" in argv
    assert argv[argv.index("--device") + 1] == "/dev/kfd" and "seccomp=unconfined" in argv
    for runtime, rootless in (("podman", False), ("docker", True), ("docker", False)):
        argv = C.run_argv(
            runtime, "rocm", "img", ["true"], workdir="/w", uid=0, gid=0, rootless=rootless, device_gids=(109,)
        )
        assert group_adds(argv) == ["video", "109"], runtime
    # what the rules run: rootless decided from the effective uid
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    rec = {"runtime": "podman", "backend": "rocm", "image": "localhost/accelbench-rocm:latest", "id": "abc"}
    assert group_adds(C.record_argv(rec, ["true"], "/w", 2, environ={})) == ["keep-groups"]
    assert "keep-groups" in (REPO / "docs" / "containers.md").read_text()


# --------------------------------------------------------------------------- 8. peaks: CDNA4, arch + CUs


@pytest.mark.parametrize(
    "name,dtype,expected",
    [
        ("AMD Instinct MI355X", "bfloat16", 2516.6),
        ("AMD Instinct MI355X", "float8_e4m3fn", 5033.2),
        ("AMD Instinct MI355X", "float32", 157.3),
        ("AMD Instinct MI355X", "tf32", 157.3),  # no TF32 units: fp32 rate
        ("AMD Instinct MI350X", "float16", 2306.9),
        ("AMD Instinct MI350X", "float8_e4m3fn", 4613.7),
        ("AMD Instinct MI350X", "float32", 144.2),
    ],
)
def test_cdna4_peaks(name, dtype, expected):
    value, source = backends.get("rocm").peak_tflops({"name": name, "multiprocessors": 256}, dtype)
    assert value == pytest.approx(expected)
    assert "https://" in source and "2026-12-01" in source
    if dtype == "tf32":
        assert "no native tf32 unit" in source


def test_cdna4_figures_follow_clock_times_cus_times_flops_per_clock():
    """AMD's rounded 2.5/5.0 PFLOPS are 2400 MHz x 256 CUs x 4096 (FP16) / 8192 (FP8) FLOP/clk/CU; MI350X is
    the same silicon at 2200 MHz."""
    rocm = backends.get("rocm")
    for name, mhz in (("MI355X", 2400), ("MI350X", 2200)):
        info = {"name": f"AMD Instinct {name}", "multiprocessors": 256}
        assert rocm.peak_tflops(info, "bfloat16")[0] == pytest.approx(256 * 4096 * mhz * 1e6 / 1e12, abs=0.05)
        assert rocm.peak_tflops(info, "float8_e4m3fn")[0] == pytest.approx(256 * 8192 * mhz * 1e6 / 1e12, abs=0.05)
        assert rocm.peak_tflops(info, "float32")[0] == pytest.approx(256 * 256 * mhz * 1e6 / 1e12, abs=0.05)


@pytest.mark.parametrize(
    "arch,cus,dtype,expected,key",
    [
        ("gfx942:sramecc+:xnack-", 304, "bfloat16", 1307.4, "MI325X"),  # MI300X/MI325X: same compute
        ("gfx942", 38, "bfloat16", 1307.4 * 38 / 304, "MI325X"),  # a CPX partition: scaled by its CUs
        ("gfx950", 256, "float8_e4m3fn", 5033.2, "MI355X"),  # MI350X or MI355X: the faster one bounds both
        ("gfx90a", 110, "bfloat16", 191.5, "MI250X"),
        ("gfx90a", 104, "bfloat16", 181.05, "MI250"),
    ],
)
def test_amd_device_without_a_marketing_name_is_matched_by_arch_and_cus(arch, cus, dtype, expected, key):
    info = {"name": "AMD Radeon Graphics", "gcn_arch_name": arch, "multiprocessors": cus}
    value, source = backends.get("rocm").peak_tflops(info, dtype)
    assert value == pytest.approx(expected)
    assert f"architecture {arch.split(':')[0]}" in source and f"{cus} CUs" in source and f"to {key}" in source


def test_a_name_in_the_table_wins_and_an_unknown_arch_stays_unknown():
    rocm = backends.get("rocm")
    named = rocm.peak_tflops(
        {"name": "AMD Instinct MI210", "gcn_arch_name": "gfx90a", "multiprocessors": 104}, "bfloat16"
    )
    assert named[0] == pytest.approx(181.0) and "architecture" not in named[1]
    assert rocm.peak_tflops({"name": "", "gcn_arch_name": "gfx1100", "multiprocessors": 96}, "bfloat16") == (
        None,
        UNKNOWN_DEVICE,
    )
    assert rocm.peak_tflops({"name": "NVIDIA X", "multiprocessors": 132}, "bfloat16") == (None, UNKNOWN_DEVICE)


# --------------------------------------------------------------------------- 9. version floors


@pytest.mark.parametrize("backend,info", [("cuda", {"compute_capability": "9.0"}), ("rocm", MI300X)])
def test_fp8_needs_torch_2_6_on_gpus(backend, info):
    """The fp8 check selects rows of the fp8 inputs (index_select): no CUDA/ROCm kernel before torch 2.6."""
    reason = backends.get(backend, torch=TorchWith(__version__="2.5.1+cu124")).dtype_support("float8_e4m3fn", info)
    assert reason and "torch >= 2.6" in reason and "2.5.1+cu124" in reason and "\n" not in reason
    assert backends.get(backend, torch=TorchWith(__version__="2.6.0")).dtype_support("float8_e4m3fn", info) is None
    # other dtypes are not held back
    assert backends.get(backend, torch=TorchWith(__version__="2.4.0")).dtype_support("bfloat16", info) is None


class FakeMps:
    """torch.mps: every call recorded in order."""

    def __init__(self):
        self.calls: list = []

    def synchronize(self):
        self.calls.append("synchronize")

    def empty_cache(self):
        self.calls.append("empty_cache")

    def driver_allocated_memory(self):
        return 7 * 2**20


def mps_stage(tmp_path, version: str, fake_mps: FakeMps) -> common.StageStart:
    """The amp stage on an MPS backend whose trials run on CPU tensors (``TorchWith``), as if on a Mac."""
    cfg = with_defaults({"run": "t", "backends": ["mps"], "amp": dict(TINY_AMP), "warmup": TINY_WARMUP})
    run_info = {"run": "t", "config": cfg, "config_hash": config_hash(cfg), "git_commit": "abc"}
    b = backends.get("mps", torch=TorchWith(__version__=version, mps=fake_mps))
    return common.StageStart("amp", b, run_info, cfg, {}, ["cpu"], "", threads=1)


def test_mps_gradscaler_floor_makes_fp16_trials_unsupported_and_each_trial_empties_the_cache(tmp_path):
    """torch.amp.GradScaler('mps') unscales only from torch 2.8 (pytorch/pytorch#142397, fixed by #150255):
    on 2.7 the fp16 AMP trials are ``unsupported`` with the reason, the fp32 ones run; every trial that runs
    starts with torch.mps.empty_cache(), so the driver's memory figure is that trial's."""
    fake = FakeMps()
    steps, trials, _ = amp.run_backend(mps_stage(tmp_path, "2.7.1", fake), log=lambda s: None)
    by_mode = {m: [t for t in trials if t["mode"] == m] for m in ("fp32", "amp_fp16")}
    assert [t["status"] for t in by_mode["amp_fp16"]] == ["unsupported", "unsupported"]
    assert "torch >= 2.8" in by_mode["amp_fp16"][0]["status_detail"] and by_mode["amp_fp16"][0]["steps"] == 0
    assert [t["status"] for t in by_mode["fp32"]] == ["ok", "ok"]
    assert {t["mem_kind"] for t in by_mode["fp32"]} == {"mps_driver"}
    assert "unsupported" in amp.STATUSES
    # one empty_cache per trial run, each before that trial's first synchronized step
    trial_starts = [i for i, c in enumerate(fake.calls) if c == "empty_cache"]
    assert len(trial_starts) == len(by_mode["fp32"]) == 2
    for start in trial_starts:
        assert fake.calls[start + 1] == "synchronize"
    ok = backends.get("mps", torch=TorchWith(__version__="2.8.0", mps=fake))
    assert ok.amp_support(ok.amp_policy("auto")) is None
    old = backends.get("mps", torch=TorchWith(__version__="2.7.1", mps=fake))
    assert old.amp_support(old.amp_policy("bfloat16")) is None  # bf16 needs no scaler
