"""Device detection: the real CPU here (``accelbench.backends.cpu``), and the CUDA / ROCm / MPS / XLA
backends' probes with fake torch and torch_xla modules (those paths are untested on hardware), parsing
of /proc, sysfs and lscpu from fixture trees, ``accelbench.stages.detect`` and the ``accelbench detect``
CLI writing valid JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from accelbench import backends
from accelbench.backends import cpu as cpu_detect
from accelbench.backends import cuda as cuda_backend
from accelbench.backends.cuda import CudaBackend, RocmBackend
from accelbench.backends.mps import MpsBackend
from accelbench.backends.xla import XlaBackend
from accelbench.cli import main
from accelbench.stages.detect import detect

X86_CPUINFO = """\
processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
physical id\t: 0
core id\t\t: 0
cpu MHz\t\t: 2000.000
flags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8 avx512_vnni

processor\t: 1
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
physical id\t: 0
core id\t\t: 0
cpu MHz\t\t: 2100.000
flags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8 avx512_vnni

"""

ARM_CPUINFO = """\
processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm sve bf16 i8mm
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x1
CPU part\t: 0xd40
CPU revision\t: 1
"""

ARM_LSCPU = """\
Architecture:                    aarch64
Vendor ID:                       ARM
Model name:                      Neoverse-V1
CPU max MHz:                     2600.0000
"""


def fake_run(outputs: dict[str, str], seen: list | None = None):
    """A subprocess.run stand-in: stdout by argv[0] (or the full argv joined), rc 1 when unknown."""

    def run(argv, **kwargs):
        if seen is not None:
            seen.append((argv, kwargs))
        out = outputs.get(" ".join(argv), outputs.get(argv[0]))
        return subprocess.CompletedProcess(argv, 0 if out is not None else 1, stdout=out or "", stderr="")

    return run


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def fake_sysfs(root: Path, *, cpus: dict[int, tuple[int, int]], max_khz: int | None = None) -> Path:
    """sys/devices/system/cpu with topology (cpu -> (package, core)), caches and maybe cpufreq."""
    base = root / "devices" / "system" / "cpu"
    for cpu, (pkg, core) in cpus.items():
        write(base / f"cpu{cpu}" / "topology" / "physical_package_id", f"{pkg}\n")
        write(base / f"cpu{cpu}" / "topology" / "core_id", f"{core}\n")
    for i, (level, kind, size, shared) in enumerate(
        [
            (1, "Data", "48K", "0-1"),
            (1, "Instruction", "32K", "0-1"),
            (2, "Unified", "2048K", "0-1"),
            (3, "Unified", "107520K", "0-3"),
        ]
    ):
        d = base / "cpu0" / "cache" / f"index{i}"
        write(d / "level", f"{level}\n")
        write(d / "type", f"{kind}\n")
        write(d / "size", f"{size}\n")
        write(d / "shared_cpu_list", f"{shared}\n")
    if max_khz:
        write(base / "cpu0" / "cpufreq" / "cpuinfo_max_freq", f"{max_khz}\n")
    return base


# --------------------------------------------------------------------------- fake torch


class Props:
    def __init__(self, name, major, minor, sms, mem, arch=None):
        self.name, self.major, self.minor = name, major, minor
        self.multi_processor_count, self.total_memory = sms, mem
        self.L2_cache_size = 50 * 2**20
        self.uuid = f"GPU-{name[-4:]}"
        if arch:
            self.gcnArchName = arch


def fake_torch(*, cuda=None, hip=None, props=(), available=None, mps=None, cudnn=90100, raise_on_available=False):
    t = types.SimpleNamespace(__version__="2.13.0+fake")
    t.version = types.SimpleNamespace(cuda=cuda, hip=hip)
    available = bool(props) if available is None else available

    def is_available():
        if raise_on_available:
            raise RuntimeError("CUDA driver initialization failed")
        return available

    def get_props(i):
        p = props[i]
        if isinstance(p, Exception):
            raise p
        return p

    t.cuda = types.SimpleNamespace(
        is_available=is_available, device_count=lambda: len(props), get_device_properties=get_props
    )
    t.backends = types.SimpleNamespace(
        cudnn=types.SimpleNamespace(version=lambda: cudnn),
        cpu=types.SimpleNamespace(get_cpu_capability=lambda: "AVX512"),
    )
    if mps is not None:
        t.backends.mps = types.SimpleNamespace(is_available=lambda: mps, is_built=lambda: mps)
    t.get_num_threads = lambda: 4
    return t


H100 = Props("NVIDIA H100 80GB HBM3", 9, 0, 132, 85_000_000_000)
MI300X = Props("AMD Instinct MI300X", 9, 4, 304, 205_000_000_000, arch="gfx942:sramecc+:xnack-")


# --------------------------------------------------------------------------- parsing


def test_parse_proc_cpuinfo_blocks():
    blocks = cpu_detect.parse_proc_cpuinfo(X86_CPUINFO)
    assert len(blocks) == 2
    assert blocks[1]["model name"] == "Intel(R) Xeon(R) Platinum 8480+"
    assert "amx_bf16" in blocks[0]["flags"].split()


def test_parse_size_bytes():
    assert cpu_detect.parse_size_bytes("32768K") == 32 * 2**20
    assert cpu_detect.parse_size_bytes("1 MiB") == 2**20
    assert cpu_detect.parse_size_bytes("512 KB") == 512 * 1024
    assert cpu_detect.parse_size_bytes("") is None
    assert cpu_detect.parse_size_bytes("lots") is None


def test_topology_counts_smt_siblings_once(tmp_path):
    base = fake_sysfs(tmp_path, cpus={0: (0, 0), 1: (0, 0), 2: (0, 1), 3: (0, 1), 4: (1, 0), 5: (1, 0)})
    topo = cpu_detect.topology(base, [], affinity={0, 1, 2})
    assert topo["cores_logical"] == 6
    assert topo["cores_physical"] == 3
    assert topo["sockets"] == 2
    assert topo["cpus_affinity"] == 3
    assert topo["cores_physical_available"] == 2


def test_topology_falls_back_to_proc_cpuinfo(tmp_path):
    topo = cpu_detect.topology(tmp_path, cpu_detect.parse_proc_cpuinfo(X86_CPUINFO), affinity=None)
    assert topo["cores_logical"] == 2 and topo["cores_physical"] == 1 and topo["sockets"] == 1


def test_cache_sizes_from_sysfs(tmp_path):
    base = fake_sysfs(tmp_path, cpus={0: (0, 0)})
    caches = cpu_detect.cache_sizes(base)
    assert caches["l1d_bytes"] == 48 * 1024
    assert caches["l1i_bytes"] == 32 * 1024
    assert caches["l2_bytes"] == 2 * 2**20
    assert caches["l3_bytes"] == 105 * 2**20
    assert caches["l3_shared_cpus"] == "0-3"


def test_clock_source_priority(tmp_path):
    cpuinfo = cpu_detect.parse_proc_cpuinfo(X86_CPUINFO)
    base = fake_sysfs(tmp_path / "a", cpus={0: (0, 0)}, max_khz=3_800_000)
    mhz, source, is_max = cpu_detect.max_clock_mhz(base, cpuinfo, {"CPU max MHz": "3000.0000"})
    assert (mhz, is_max) == (3800.0, True) and "cpuinfo_max_freq" in source
    base = fake_sysfs(tmp_path / "b", cpus={0: (0, 0)})
    mhz, source, is_max = cpu_detect.max_clock_mhz(base, cpuinfo, {"CPU max MHz": "3000.0000"})
    assert (mhz, is_max) == (3000.0, True) and "lscpu" in source
    mhz, source, is_max = cpu_detect.max_clock_mhz(base, cpuinfo, {})
    assert (mhz, is_max) == (2100.0, False) and "/proc/cpuinfo" in source
    assert cpu_detect.max_clock_mhz(base, [], {}) == (None, "unknown", False)


def test_cgroup_quota(tmp_path):
    write(tmp_path / "v2" / "cpu.max", "200000 100000\n")
    assert cpu_detect.cgroup_cpu_quota(tmp_path / "v2") == 2.0
    write(tmp_path / "unl" / "cpu.max", "max 100000\n")
    assert cpu_detect.cgroup_cpu_quota(tmp_path / "unl") is None
    write(tmp_path / "v1" / "cpu" / "cpu.cfs_quota_us", "150000\n")
    write(tmp_path / "v1" / "cpu" / "cpu.cfs_period_us", "100000\n")
    assert cpu_detect.cgroup_cpu_quota(tmp_path / "v1") == 1.5
    assert cpu_detect.cgroup_cpu_quota(tmp_path / "none") is None


def test_linux_cpu_info_x86_fixture(tmp_path):
    write(tmp_path / "proc" / "cpuinfo", X86_CPUINFO)
    fake_sysfs(tmp_path / "sys", cpus={0: (0, 0), 1: (0, 0)}, max_khz=3_800_000)
    info = cpu_detect.linux_cpu_info(tmp_path / "proc", tmp_path / "sys", run=fake_run({}), affinity={0, 1})
    assert info["name"] == "Intel(R) Xeon(R) Platinum 8480+"
    assert {"avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile", "amx_int8", "avx512_vnni"} <= set(
        info["flags"]
    )
    assert "fpu" not in info["flags"]  # only matmul-relevant flags are kept
    assert info["max_mhz"] == 3800.0 and info["clock_is_max"]
    assert info["cores_physical"] == 1 and info["l2_bytes"] == 2 * 2**20
    value, source = backends.get("cpu").peak_tflops(info, "bfloat16", None, {})
    assert value == pytest.approx(1 * 3.8 * 1024 / 1000)
    assert "AMX" in source


def test_linux_cpu_info_arm_fixture(tmp_path):
    write(tmp_path / "proc" / "cpuinfo", ARM_CPUINFO)
    write(tmp_path / "proc" / "sys" / "abi" / "sve_default_vector_length", "32\n")
    fake_sysfs(tmp_path / "sys", cpus={0: (0, 0)})
    info = cpu_detect.linux_cpu_info(
        tmp_path / "proc", tmp_path / "sys", run=fake_run({"lscpu": ARM_LSCPU}), affinity={0}
    )
    assert info["name"] == "Neoverse-V1"
    assert {"asimd", "neon", "sve", "bf16", "asimdhp", "i8mm"} <= set(info["flags"])
    assert (info["cpu_implementer"], info["cpu_part"]) == ("0x41", "0xd40")
    assert info["sve_vector_bits"] == 256
    assert info["max_mhz"] == 2600.0 and "lscpu" in info["clock_source"]


def test_darwin_cpu_info_with_fake_sysctl():
    """macOS path: untested on hardware."""
    seen: list = []
    run = fake_run(
        {
            "sysctl -n machdep.cpu.brand_string": "Apple M2 Pro\n",
            "sysctl -n hw.physicalcpu": "10\n",
            "sysctl -n hw.logicalcpu": "10\n",
            "sysctl -n hw.packages": "1\n",
            "sysctl -n hw.optional.neon": "1\n",
            "sysctl -n hw.optional.arm.FEAT_BF16": "1\n",
            "sysctl -n hw.optional.arm.FEAT_FP16": "1\n",
        },
        seen,
    )
    info = cpu_detect.darwin_cpu_info(run=run)
    assert info["name"] == "Apple M2 Pro" and info["cores_physical"] == 10
    assert set(info["flags"]) == {"neon", "bf16", "asimdhp"}
    assert info["max_mhz"] is None  # Apple Silicon hides its clock: peak unknown
    assert all(kwargs.get("timeout") for _, kwargs in seen)


def test_cpu_info_on_this_machine():
    info = cpu_detect.cpu_info(torch)
    assert info["device"] == "cpu" and info["name"]
    assert set(info["flags"]) <= set(cpu_detect.MATMUL_FLAGS)
    assert info["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert info["torch_num_threads"] == torch.get_num_threads()
    assert info["cores_logical"] >= 1
    proc = Path("/proc/cpuinfo")
    if proc.exists():  # every matmul flag the kernel reports is carried over
        first = cpu_detect.parse_proc_cpuinfo(proc.read_text())[0]
        reported = set((first.get("flags") or first.get("Features") or "").split()) & set(cpu_detect.MATMUL_FLAGS)
        assert reported <= set(info["flags"])
        assert info["max_mhz"] and info["max_mhz"] > 0


# --------------------------------------------------------------------------- CUDA / ROCm (fakes)


def nvml(version="550.54.15"):
    """An ``import_module`` that finds only a fake pynvml reporting ``version``."""
    module = types.SimpleNamespace(
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlSystemGetDriverVersion=lambda: version
    )

    def import_module(name):
        if name != "pynvml":
            raise ModuleNotFoundError(f"No module named {name!r}")
        return module

    return import_module


@pytest.fixture
def no_driver(monkeypatch):
    """Driver versions unknown (no pynvml, nvidia-smi or DKMS amdgpu), also on a host that has them."""
    monkeypatch.setattr(cuda_backend, "nvidia_driver_version", lambda *a, **k: (None, "unavailable"))
    monkeypatch.setattr(cuda_backend, "amdgpu_driver_version", lambda *a, **k: None)


def test_probe_cuda_present_with_fake_torch():
    """CUDA path: untested on hardware."""
    t = fake_torch(cuda="12.4", props=[H100, Props("NVIDIA A100-SXM4-80GB", 8, 0, 108, 85_000_000_000)])
    entry = CudaBackend(torch=t, import_module=nvml("550.54.15")).probe()
    assert entry["present"] is True
    assert entry["runtime_version"] == "12.4" and entry["driver_version"] == "550.54.15"
    assert entry["driver_version_source"] == "pynvml"
    assert entry["cudnn_version"] == 90100
    d0, d1 = entry["devices"]
    assert (d0["device"], d0["name"], d0["compute_capability"], d0["multiprocessors"]) == (
        "cuda:0",
        "NVIDIA H100 80GB HBM3",
        "9.0",
        132,
    )
    assert d0["total_memory_bytes"] == 85_000_000_000 and d0["uuid"]
    assert d1["device"] == "cuda:1" and d1["compute_capability"] == "8.0"
    assert RocmBackend(torch=t).probe()["present"] is False


def test_probe_rocm_present_with_fake_torch(no_driver):
    """ROCm path: untested on hardware."""
    t = fake_torch(hip="6.2.41133", props=[MI300X], cudnn=3002000)
    entry = RocmBackend(torch=t).probe()
    assert entry["present"] is True and entry["hip_version"] == "6.2.41133"
    assert entry["miopen_version"] == 3002000 and "cudnn_version" not in entry
    assert entry["driver_version"] is None
    (dev,) = entry["devices"]
    assert dev["name"] == "AMD Instinct MI300X" and dev["gcn_arch_name"].startswith("gfx942")
    assert dev["multiprocessors"] == 304
    cuda = CudaBackend(torch=t).probe()
    assert cuda["present"] is False and "ROCm build" in cuda["reason"]


def test_amdgpu_driver_version_from_sysfs(tmp_path):
    write(tmp_path / "module" / "amdgpu" / "version", "6.8.5\n")
    assert cuda_backend.amdgpu_driver_version(tmp_path) == "6.8.5"
    assert cuda_backend.amdgpu_driver_version(tmp_path / "none") is None  # in-tree module: no version file


@pytest.mark.parametrize(
    "build, backend, phrase",
    [
        ({}, "cuda", "CPU-only"),
        ({}, "rocm", "no ROCm support"),
        ({"cuda": "12.4"}, "cuda", "sees no device"),
        ({"cuda": "12.4"}, "rocm", "CUDA build"),
        ({"hip": "6.2"}, "rocm", "sees no device"),
    ],
)
def test_gpu_absence_reasons(no_driver, build, backend, phrase):
    entry = backends.get(backend, torch=fake_torch(**build)).probe()
    assert entry["present"] is False and entry["devices"] == []
    assert phrase in entry["reason"]


def test_broken_driver_marks_backend_absent_not_crash(no_driver):
    t = fake_torch(cuda="12.4", props=[H100], raise_on_available=True)
    entry = CudaBackend(torch=t).probe()
    assert entry["present"] is False and "driver initialization failed" in entry["reason"]


def test_one_failing_device_does_not_hide_the_others(no_driver):
    t = fake_torch(cuda="12.4", props=[RuntimeError("device busy"), H100])
    entry = CudaBackend(torch=t).probe()
    assert "device busy" in entry["devices"][0]["error"]
    assert entry["devices"][1]["name"] == "NVIDIA H100 80GB HBM3"


def test_nvidia_driver_version_sources():
    assert cuda_backend.nvidia_driver_version(import_module=nvml(b"550.54.15")) == ("550.54.15", "pynvml")

    def no_nvml(name):
        raise ImportError(name)

    seen: list = []
    run = fake_run({"nvidia-smi": "550.54.15\n550.54.15\n"}, seen)
    assert cuda_backend.nvidia_driver_version(import_module=no_nvml, run=run) == ("550.54.15", "nvidia-smi")
    argv, kwargs = seen[0]
    assert argv == ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
    assert kwargs["timeout"] > 0
    version, source = cuda_backend.nvidia_driver_version(import_module=no_nvml, run=fake_run({}))
    assert version is None and "unavailable" in source


def test_nvidia_smi_hanging_is_survived():
    def hang(argv, **kwargs):
        raise subprocess.TimeoutExpired(argv, kwargs["timeout"])

    assert (
        cuda_backend.nvidia_driver_version(import_module=lambda n: (_ for _ in ()).throw(ImportError()), run=hang)[0]
        is None
    )


# --------------------------------------------------------------------------- MPS (fakes)


def test_probe_mps_present_on_fake_mac():
    """MPS path: untested on hardware."""
    entry = MpsBackend(
        torch=fake_torch(mps=True),
        system="Darwin",
        mac_ver=lambda: ("14.5", ("", "", ""), "arm64"),
        run=fake_run({"sysctl": "Apple M2 Pro\n"}),
    ).probe()
    assert entry["present"] and entry["is_built"] and entry["macos_version"] == "14.5"
    assert entry["devices"] == [{"device": "mps", "name": "Apple M2 Pro", "macos_version": "14.5"}]


@pytest.mark.parametrize(
    "system, mps, phrase",
    [
        ("Linux", None, "only on macOS"),
        ("Darwin", False, "no MPS support"),
    ],
)
def test_probe_mps_absent(system, mps, phrase):
    entry = MpsBackend(torch=fake_torch(mps=mps), system=system, mac_ver=lambda: ("11.0", ("", "", ""), "")).probe()
    assert entry["present"] is False and phrase in entry["reason"]


def test_probe_mps_built_but_unavailable():
    t = fake_torch()
    t.backends.mps = types.SimpleNamespace(is_available=lambda: False, is_built=lambda: True)
    entry = MpsBackend(torch=t, system="Darwin", mac_ver=lambda: ("12.0", ("", "", ""), "")).probe()
    assert entry["present"] is False and "12.3" in entry["reason"]


# --------------------------------------------------------------------------- XLA (fakes)


def fake_import(modules: dict):
    def import_module(name):
        if name not in modules:
            raise ModuleNotFoundError(f"No module named {name!r}")
        value = modules[name]
        if isinstance(value, Exception):
            raise value
        return value

    return import_module


def fake_torch_xla(device_list, kind="TPU v4"):
    xla = types.SimpleNamespace(__version__="2.6.0", devices=lambda: list(device_list))
    # an old release: the process's own device from xm.xla_device(), not torch_xla.device()
    xm = types.SimpleNamespace(
        xla_device_hw=lambda d: "TPU", xla_device_kind=lambda d: kind, xla_device=lambda: device_list[0]
    )
    return {"torch_xla": xla, "torch_xla.core.xla_model": xm}


def test_probe_xla_present_with_fake_torch_xla():
    """XLA path: untested on hardware."""
    entry = XlaBackend(torch=fake_torch(), import_module=fake_import(fake_torch_xla(["xla:0", "xla:1"]))).probe()
    assert entry["present"] and entry["torch_xla_version"] == "2.6.0"
    assert [d["device"] for d in entry["devices"]] == ["xla:0", "xla:1"]
    assert entry["devices"][0]["device_kind"] == "TPU v4" and entry["devices"][0]["device_hw"] == "TPU"
    assert entry["devices"][0]["name"] == "TPU v4"
    assert entry["device_kinds"] == ["TPU v4"]
    # every chip is listed; a stage process measures its own default device only (issue 17, defect 4)
    assert [d["measured"] for d in entry["devices"]] == [True, False] and entry["measured_devices"] == ["xla:0"]
    assert "one device per process" in entry["note"]


def test_probe_xla_absent_or_broken_never_raises():
    entry = XlaBackend(torch=fake_torch(), import_module=fake_import({})).probe()
    assert entry["present"] is False and "not installed" in entry["reason"]
    entry = XlaBackend(
        torch=fake_torch(), import_module=fake_import({"torch_xla": RuntimeError("libtpu mismatch")})
    ).probe()
    assert entry["present"] is False and "libtpu mismatch" in entry["reason"]
    entry = XlaBackend(torch=fake_torch(), import_module=fake_import(fake_torch_xla([]))).probe()
    assert entry["present"] is False and entry["torch_xla_version"] == "2.6.0" and "empty" in entry["reason"]


def test_probe_xla_on_this_machine():
    entry = XlaBackend().probe()
    try:
        import torch_xla  # noqa: F401
    except Exception:
        assert entry["present"] is False and entry["reason"]
    else:  # pragma: no cover - machine with torch_xla
        assert "devices" in entry


# --------------------------------------------------------------------------- device_info


def test_device_info_cpu_has_what_peaks_need():
    info = backends.for_device("cpu").device_info("cpu")
    assert info["name"] and info["device"] == "cpu"
    for key in ("flags", "max_mhz", "clock_source", "cores_physical", "torch_num_threads"):
        assert key in info


def test_device_info_gpu_with_fakes():
    """CUDA/ROCm: untested on hardware."""
    t = fake_torch(cuda="12.4", props=[H100])
    assert backends.for_device("cuda:0", torch=t).device_info("cuda:0")["name"] == H100.name
    t = fake_torch(hip="6.2", props=[MI300X])
    info = backends.for_device("cuda:0", torch=t).device_info("cuda:0")
    assert info["gcn_arch_name"].startswith("gfx942")
    assert backends.for_device("mps", torch=fake_torch(mps=False)).device_info("mps")["name"]


def test_device_info_xla_without_torch_xla():
    info = backends.get("xla", import_module=fake_import({})).device_info("xla:0")
    assert info["name"] == "XLA device" and "torch_xla" in info["error"]


def test_device_info_unknown_device():
    with pytest.raises(ValueError, match="allowed"):
        backends.for_device("npu:0")


# --------------------------------------------------------------------------- detect + CLI


RUN_INFO = {
    "run": "t",
    "config": {"backends": ["cpu", "cuda"], "cpu_threads": 1, "matmul": {"peak_tflops": {"cpu": {"float16": 0.5}}}},
    "config_hash": "abc123",
    "git_commit": "deadbeef",
    "accelbench_version": "0.1.0",
}


def test_detect_on_this_machine_reports_every_backend():
    report = detect(RUN_INFO)
    assert set(report["backends"]) == set(backends.NAMES)
    assert report["backends"]["cpu"]["present"] is True
    for name, entry in report["backends"].items():
        assert isinstance(entry["present"], bool)
        if not entry["present"]:
            assert entry["reason"], name
            assert entry["devices"] == []
    gpu_here = torch.cuda.is_available()
    assert report["backends"]["cuda"]["present"] == (gpu_here and torch.version.hip is None)
    assert report["backends"]["rocm"]["present"] == (gpu_here and torch.version.hip is not None)
    assert report["backends"]["mps"]["present"] == torch.backends.mps.is_available()
    xpu_here = hasattr(torch, "xpu") and torch.xpu.is_available()
    assert report["backends"]["xpu"]["present"] == xpu_here
    assert (report["run_id"], report["config_hash"], report["git_commit"]) == ("t", "abc123", "deadbeef")
    assert report["torch_version"] == torch.__version__
    assert report["timestamp_utc"].endswith("+00:00")
    assert "CUDA_VISIBLE_DEVICES" in report["env"] and report["packages"]["torch"]
    assert report["requested_absent"] == ([] if report["backends"]["cuda"]["present"] else ["cuda"])
    (cpu_dev,) = report["backends"]["cpu"]["devices"]
    assert cpu_dev["name"] == report["cpu"]["name"]
    assert cpu_dev["peaks"]["float16"] == {"tflops": 0.5, "source": "config matmul.peak_tflops.cpu.float16 = 0.5"}
    assert set(cpu_dev["peaks"]) == {"float32", "tf32", "bfloat16", "float16", "float8_e4m3fn"}
    json.dumps(report)  # serialisable as is


def test_detect_survives_a_broken_probe_and_fills_gpu_peaks():
    def broken():
        raise RuntimeError("probe exploded")

    fake_cuda = CudaBackend(torch=fake_torch(cuda="12.4", props=[H100]), import_module=nvml("550")).probe()
    report = detect(RUN_INFO, probes={"rocm": broken, "cuda": lambda: fake_cuda})
    assert report["backends"]["rocm"] == {
        "present": False,
        "devices": [],
        "reason": "probe failed: RuntimeError: probe exploded",
    }
    peaks = report["backends"]["cuda"]["devices"][0]["peaks"]
    assert peaks["bfloat16"]["tflops"] == pytest.approx(989.4)
    assert report["requested_absent"] == []


def test_detect_with_a_fake_cuda_torch_probes_through_the_backends(no_driver):
    """``torch=`` reaches every backend's own probe: the fake CUDA build's GPU is found, the others
    (ROCm on a CUDA build, MPS off macOS, XPU without torch.xpu) are absent with their reasons."""
    report = detect(RUN_INFO, torch=fake_torch(cuda="12.4", props=[H100]))
    cuda = report["backends"]["cuda"]
    assert cuda["present"] is True and [d["device"] for d in cuda["devices"]] == ["cuda:0"]
    assert cuda["devices"][0]["peaks"]["float8_e4m3fn"]["tflops"] == pytest.approx(1978.9)
    assert "CUDA build" in report["backends"]["rocm"]["reason"]
    assert "no torch.xpu" in report["backends"]["xpu"]["reason"]
    assert report["backends"]["mps"]["present"] is False
    assert (report["torch_version"], report["cuda_version"], report["hip_version"]) == ("2.13.0+fake", "12.4", "")
    assert report["requested_absent"] == []


def test_cli_writes_valid_json(tmp_path):
    run_file = tmp_path / "run.json"
    assert main(["run-info", "--config-json", "{}", "--run", "t", "--out", str(run_file)]) == 0
    out = tmp_path / "sub" / "devices.json"
    out.parent.mkdir()
    out.write_text("stale")
    assert main(["detect", "--run-file", str(run_file), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["run_id"] == "t" and set(report["backends"]) == set(backends.NAMES)
    assert report["config_hash"] == json.loads(run_file.read_text())["config_hash"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["devices.json"]  # atomic: no temp file left


def test_cli_entry_point_subprocess(tmp_path):
    run_file = tmp_path / "run.json"
    main(["run-info", "--config-json", '{"backends": ["cpu", "xla"]}', "--run", "sub", "--out", str(run_file)])
    out = tmp_path / "devices.json"
    proc = subprocess.run(
        [sys.executable, "-m", "accelbench", "detect", "--run-file", str(run_file), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "cpu: present" in proc.stdout
    report = json.loads(out.read_text())
    assert report["requested_backends"] == ["cpu", "xla"]
    assert ("xla" in report["requested_absent"]) == (not report["backends"]["xla"]["present"])
