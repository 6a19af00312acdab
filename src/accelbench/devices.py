"""Stage ``detect``: what hardware and software this run measures, for every backend, present or not.

``accelbench detect --run-file results/<run>/run.json --out results/<run>/devices.json``

Every backend (cpu, cuda, rocm, mps, xla) gets an entry; an absent one says why it is absent
(CPU-only torch wheel, no driver, torch_xla not installed, ...). Absence never fails detection:
a CPU-only machine is a valid machine. Alongside: the CPU's model, cores, ISA flags that decide
matmul speed, max clock and where it was read, caches; each GPU's name, compute capability,
SMs/CUs, memory; driver/runtime versions; the theoretical peak per device and dtype
(``peaks.peak_tflops``) with its source; and the provenance every row of the run carries.

Probing is split into small functions that take the ``torch`` module (and file roots, command
runners) as arguments, so the CUDA, ROCm, MPS and XLA paths, which cannot run on a CPU-only
machine, are unit-tested with fakes. Those paths are **untested on hardware**.
"""

from __future__ import annotations

import importlib
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from . import __version__
from .backend import BACKENDS, BackendUnavailable, device_strings, is_rocm_build
from .io import atomic_write_json
from .peaks import DTYPES, peak_tflops
from .provenance import container_image, environment, package_versions, read_run_info

# ISA flags (as /proc/cpuinfo spells them) that decide how fast a CPU multiplies matrices.
X86_MATMUL_FLAGS = (
    "sse2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
    "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
)
ARM_MATMUL_FLAGS = ("asimd", "neon", "fphp", "asimdhp", "asimddp", "sve", "sve2", "svebf16", "bf16", "i8mm", "sme")
MATMUL_FLAGS = X86_MATMUL_FLAGS + ARM_MATMUL_FLAGS

Runner = Callable[..., "subprocess.CompletedProcess"]


def _torch():
    import torch

    return torch


def _run_text(argv: list[str], run: Runner = subprocess.run, timeout: float = 10.0) -> str | None:
    """stdout of ``argv``, or None when it is missing, fails or hangs (argv list: nothing is shell-parsed)."""
    if shutil.which(argv[0]) is None and run is subprocess.run:
        return None
    try:
        proc = run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    if getattr(proc, "returncode", 1) != 0:
        return None
    return proc.stdout


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


# ---------------------------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------------------------

def parse_proc_cpuinfo(text: str) -> list[dict[str, str]]:
    """/proc/cpuinfo as one dict per logical CPU (blank-line separated ``key : value`` blocks)."""
    blocks, current = [], {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        if ":" in line:
            key, _, value = line.partition(":")
            current[key.strip()] = value.strip()
    if current:
        blocks.append(current)
    return blocks


def parse_lscpu(text: str) -> dict[str, str]:
    """``lscpu`` output as ``{field: value}``."""
    out = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


_SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1024**2, "MB": 1024**2, "MIB": 1024**2,
               "G": 1024**3, "GB": 1024**3, "GIB": 1024**3}


def parse_size_bytes(text: str | None) -> int | None:
    """'32768K', '1 MiB', '512 KB' -> bytes (binary units, as sysfs and lscpu mean them)."""
    if not text:
        return None
    m = re.match(r"^\s*([\d.]+)\s*([A-Za-z]*)", text)
    if not m or m.group(2).upper() not in _SIZE_UNITS:
        return None
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).upper()])


def cache_sizes(sys_cpu: Path) -> dict:
    """cpu0's caches from sysfs: bytes per level and which CPUs share each (L2 is per core on
    most CPUs, L3 per socket or per CCX)."""
    out: dict = {}
    for index in sorted(sys_cpu.glob("cpu0/cache/index*")):
        level = (_read(index / "level") or "").strip()
        kind = (_read(index / "type") or "").strip()
        size = parse_size_bytes((_read(index / "size") or "").strip())
        if not level or size is None:
            continue
        name = f"l{level}" + {"Data": "d", "Instruction": "i"}.get(kind, "")
        out[f"{name}_bytes"] = size
        shared = (_read(index / "shared_cpu_list") or "").strip()
        if shared:
            out[f"{name}_shared_cpus"] = shared
    return out


def _cpu_list_count(text: str) -> int:
    n = 0
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            n += int(b) - int(a) + 1
        elif part:
            n += 1
    return n


def topology(sys_cpu: Path, cpuinfo: list[dict[str, str]], affinity: set[int] | None) -> dict:
    """Logical CPUs, physical cores, sockets (sysfs topology, else /proc/cpuinfo's physical id and core id)
    of the machine, and physical cores among the CPUs this process may run on."""
    cores: dict[int, tuple[str, str]] = {}
    for cpu_dir in sys_cpu.glob("cpu[0-9]*"):
        pkg = _read(cpu_dir / "topology" / "physical_package_id")
        core = _read(cpu_dir / "topology" / "core_id")
        if pkg is not None and core is not None:
            cores[int(cpu_dir.name[3:])] = (pkg.strip(), core.strip())
    if not cores:
        for block in cpuinfo:
            if "processor" in block and "core id" in block:
                cores[int(block["processor"])] = (block.get("physical id", "0"), block["core id"])
    out: dict = {"cores_logical": os.cpu_count(), "cores_physical": None, "sockets": None}
    if cores:
        out["cores_logical"] = len(cores)
        out["cores_physical"] = len(set(cores.values()))
        out["sockets"] = len({pkg for pkg, _ in cores.values()})
    if affinity is not None:
        out["cpus_affinity"] = len(affinity)
        if cores:
            out["cores_physical_available"] = len({cores[c] for c in affinity if c in cores}) or None
    return out


def cgroup_cpu_quota(cgroup_root: Path) -> float | None:
    """CPUs' worth of time the cgroup allows (cgroup v2 ``cpu.max``, v1 ``cfs_quota_us``); None if unlimited."""
    text = _read(cgroup_root / "cpu.max")
    if text:
        quota, _, period = text.strip().partition(" ")
        if quota != "max" and period:
            return int(quota) / int(period)
        return None
    q = _read(cgroup_root / "cpu" / "cpu.cfs_quota_us")
    p = _read(cgroup_root / "cpu" / "cpu.cfs_period_us")
    if q and p and int(q) > 0:
        return int(q) / int(p)
    return None


def max_clock_mhz(sys_cpu: Path, cpuinfo: list[dict[str, str]], lscpu: dict[str, str]) -> tuple[float | None, str, bool]:
    """(MHz, where it was read, whether it is the max boost clock).

    Order: cpufreq ``cpuinfo_max_freq`` (kHz; the max boost clock), lscpu ``CPU max MHz``
    (the same, read by lscpu), /proc/cpuinfo ``cpu MHz`` (the current clock: in VMs usually
    the nominal clock, so turbo can exceed it).
    """
    khz = _read(sys_cpu / "cpu0" / "cpufreq" / "cpuinfo_max_freq")
    if khz and khz.strip().isdigit() and int(khz) > 0:
        return int(khz) / 1000.0, str(sys_cpu / "cpu0" / "cpufreq" / "cpuinfo_max_freq"), True
    for key in ("CPU max MHz", "CPU(s) scaling MHz max"):
        try:
            mhz = float(lscpu.get(key, "").replace(",", "."))
        except ValueError:
            continue
        if mhz > 0:
            return mhz, f"lscpu '{key}'", True
    mhz_values = []
    for block in cpuinfo:
        try:
            mhz_values.append(float(block["cpu MHz"]))
        except (KeyError, ValueError):
            pass
    if mhz_values:
        return max(mhz_values), "/proc/cpuinfo 'cpu MHz' (current clock)", False
    return None, "unknown", False


def _torch_cpu_details(torch) -> dict:
    out: dict = {}
    try:
        out["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except Exception as exc:  # older torch or a fake without it
        out["torch_cpu_capability"] = None
        out["torch_cpu_capability_error"] = f"{type(exc).__name__}: {exc}"
    try:
        out["torch_num_threads"] = int(torch.get_num_threads())
    except Exception:
        out["torch_num_threads"] = None
    try:
        show = torch.__config__.show()
        m = re.search(r"BLAS_INFO=(\w+)", show)
        out["torch_blas"] = m.group(1) if m else None
        out["torch_mkldnn"] = bool(torch.backends.mkldnn.is_available())
    except Exception:
        pass
    return out


def linux_cpu_info(proc_root: Path = Path("/proc"), sys_root: Path = Path("/sys"),
                   run: Runner = subprocess.run, affinity: set[int] | None = None) -> dict:
    """The CPU as Linux describes it (/proc/cpuinfo, sysfs, lscpu), without torch."""
    cpuinfo = parse_proc_cpuinfo(_read(proc_root / "cpuinfo") or "")
    lscpu = parse_lscpu(_run_text(["lscpu"], run=run) or "")
    sys_cpu = sys_root / "devices" / "system" / "cpu"
    first = cpuinfo[0] if cpuinfo else {}
    raw_flags = (first.get("flags") or first.get("Features") or lscpu.get("Flags") or "").split()
    flags = sorted({f for f in raw_flags if f in MATMUL_FLAGS})
    if "asimd" in flags and "neon" not in flags:
        flags = sorted(flags + ["neon"])  # aarch64 calls NEON "asimd"
    mhz, clock_source, clock_is_max = max_clock_mhz(sys_cpu, cpuinfo, lscpu)
    info = {
        "name": first.get("model name") or lscpu.get("Model name") or platform.processor() or "unknown CPU",
        "arch": platform.machine(),
        "vendor": first.get("vendor_id") or lscpu.get("Vendor ID"),
        "family": first.get("cpu family") or lscpu.get("CPU family"),
        "model": first.get("model") or lscpu.get("Model"),
        "flags": flags,
        "flags_source": f"{proc_root / 'cpuinfo'}" if cpuinfo else ("lscpu" if lscpu else "unknown"),
        "max_mhz": mhz,
        "clock_source": clock_source,
        "clock_is_max": clock_is_max,
        **topology(sys_cpu, cpuinfo, affinity),
        **cache_sizes(sys_cpu),
        "cgroup_cpu_quota": cgroup_cpu_quota(sys_root / "fs" / "cgroup"),
    }
    if "CPU implementer" in first:  # ARM: vendor/part codes name the core (0x41/0xd40 = Neoverse V1)
        info["cpu_implementer"] = first.get("CPU implementer")
        info["cpu_part"] = first.get("CPU part")
    sve = _read(proc_root / "sys" / "abi" / "sve_default_vector_length")
    if sve and sve.strip().isdigit():
        info["sve_vector_bits"] = int(sve) * 8
    info["model_name"] = info["name"]
    return info


# sysctl name -> flag name as Linux spells it
DARWIN_FLAG_SYSCTLS = {
    "hw.optional.avx2_0": "avx2", "hw.optional.fma": "fma", "hw.optional.avx1_0": "avx",
    "hw.optional.avx512f": "avx512f", "hw.optional.neon": "neon", "hw.optional.arm.FEAT_BF16": "bf16",
    "hw.optional.arm.FEAT_FP16": "asimdhp", "hw.optional.arm.FEAT_DotProd": "asimddp",
    "hw.optional.arm.FEAT_I8MM": "i8mm", "hw.optional.arm.FEAT_SME": "sme",
}


def darwin_cpu_info(run: Runner = subprocess.run) -> dict:
    """The CPU as macOS describes it (``sysctl``). Untested on hardware.

    Apple Silicon does not expose its clock, so the CPU peak is unknown there (and torch's
    matmul goes through Accelerate, which uses Apple's matrix coprocessor, beyond any NEON peak).
    """
    def sysctl(name: str) -> str | None:
        text = _run_text(["sysctl", "-n", name], run=run)
        return text.strip() if text else None

    def as_int(name: str) -> int | None:
        v = sysctl(name)
        return int(v) if v and v.isdigit() else None

    flags = sorted(flag for key, flag in DARWIN_FLAG_SYSCTLS.items() if sysctl(key) == "1")
    hz = as_int("hw.cpufrequency_max")  # Intel Macs only
    name = sysctl("machdep.cpu.brand_string") or platform.processor() or "unknown CPU"
    return {
        "name": name, "model_name": name, "arch": platform.machine(), "vendor": sysctl("machdep.cpu.vendor"),
        "family": None, "model": None, "flags": flags, "flags_source": "sysctl hw.optional.*",
        "max_mhz": hz / 1e6 if hz else None,
        "clock_source": "sysctl hw.cpufrequency_max" if hz else "unknown (Apple Silicon does not expose its clock)",
        "clock_is_max": bool(hz),
        "cores_logical": as_int("hw.logicalcpu"), "cores_physical": as_int("hw.physicalcpu"),
        "sockets": as_int("hw.packages"), "l2_bytes": as_int("hw.l2cachesize"), "l3_bytes": as_int("hw.l3cachesize"),
        "cgroup_cpu_quota": None,
    }


def cpu_info(torch=None, *, system: str | None = None, proc_root: Path = Path("/proc"),
             sys_root: Path = Path("/sys"), run: Runner = subprocess.run) -> dict:
    """Everything about the CPU that decides its matmul speed, plus torch's view of it."""
    system = system or platform.system()
    if system == "Linux":
        try:
            affinity = set(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            affinity = None
        info = linux_cpu_info(proc_root, sys_root, run=run, affinity=affinity)
    elif system == "Darwin":
        info = darwin_cpu_info(run=run)
    else:  # Windows and others: what the standard library knows
        name = platform.processor() or "unknown CPU"
        info = {"name": name, "model_name": name, "arch": platform.machine(), "flags": [],
                "flags_source": "unknown", "max_mhz": None, "clock_source": "unknown", "clock_is_max": False,
                "cores_logical": os.cpu_count(), "cores_physical": None, "sockets": None}
    info["device"] = "cpu"
    torch = torch if torch is not None else _torch()
    info.update(_torch_cpu_details(torch))
    return info


# ---------------------------------------------------------------------------------------------
# CUDA and ROCm
# ---------------------------------------------------------------------------------------------

def nvidia_driver_version(import_module: Callable = importlib.import_module,
                          run: Runner = subprocess.run) -> tuple[str | None, str]:
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
    text = _run_text(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], run=run)
    if text and text.strip():
        return text.strip().splitlines()[0].strip(), "nvidia-smi"
    return None, "unavailable (no pynvml, no nvidia-smi)"


def amdgpu_driver_version(sys_root: Path = Path("/sys")) -> str | None:
    """The amdgpu kernel module's version (DKMS installs); None for the in-tree module."""
    text = _read(sys_root / "module" / "amdgpu" / "version")
    return text.strip() if text else None


def gpu_device_info(torch, device: str, backend: str) -> dict:
    """One CUDA/ROCm device as ``torch.cuda.get_device_properties`` describes it. Untested on hardware."""
    index = int(device.split(":")[1]) if ":" in device else 0
    out: dict = {"device": device, "index": index}
    try:
        p = torch.cuda.get_device_properties(index)
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
    if backend == "rocm":
        out["gcn_arch_name"] = getattr(p, "gcnArchName", None)
    return out


def _gpu_absence_reason(torch, backend: str, exc: Exception) -> str:
    cuda_v = getattr(torch.version, "cuda", None)
    hip_v = getattr(torch.version, "hip", None)
    visible = os.environ.get("HIP_VISIBLE_DEVICES" if backend == "rocm" else "CUDA_VISIBLE_DEVICES")
    env_note = f" (visible-devices variable set to {visible!r})" if visible is not None else ""
    if backend == "cuda":
        if hip_v is not None:
            return f"this is a ROCm build of torch (torch.version.hip={hip_v}): its GPUs are listed under 'rocm'"
        if cuda_v is None:
            return "this torch build has no CUDA support (torch.version.cuda is None: a CPU-only wheel)"
        return (f"torch is built with CUDA {cuda_v} but sees no device: no NVIDIA GPU or driver visible"
                f"{env_note} ({exc})")
    if hip_v is None:
        if cuda_v is not None:
            return f"this is a CUDA build of torch (torch.version.cuda={cuda_v}), not a ROCm one"
        return "this torch build has no ROCm support (torch.version.hip is None)"
    return f"torch is built with HIP {hip_v} but sees no device: no AMD GPU or amdgpu driver visible{env_note} ({exc})"


def probe_gpu(torch, backend: str, *, driver: Callable[[], tuple[str | None, str]] | None = None,
              sys_root: Path = Path("/sys")) -> dict:
    """The ``cuda`` or ``rocm`` entry: every device, runtime/driver/cuDNN (MIOpen) versions, or why absent.

    Untested on hardware: covered by unit tests with a fake torch module.
    """
    entry: dict = {"present": False, "devices": []}
    if backend == "cuda":
        driver = driver or nvidia_driver_version
        entry["driver_version"], entry["driver_version_source"] = driver()
        entry["runtime_version"] = getattr(torch.version, "cuda", None)
    else:
        entry["driver_version"] = amdgpu_driver_version(sys_root)
        entry["driver_version_source"] = "/sys/module/amdgpu/version"
        entry["hip_version"] = getattr(torch.version, "hip", None)
    try:
        devices = device_strings(backend, torch=torch)
    except BackendUnavailable as exc:
        entry["reason"] = _gpu_absence_reason(torch, backend, exc)
        return entry
    except Exception as exc:  # a broken driver can make is_available() raise
        entry["reason"] = f"probing {backend} failed: {type(exc).__name__}: {exc}"
        return entry
    if not devices:
        entry["reason"] = "torch.cuda.device_count() is 0"
        return entry
    entry["present"] = True
    try:
        v = torch.backends.cudnn.version()
    except Exception:
        v = None
    entry["cudnn_version" if backend == "cuda" else "miopen_version"] = v
    entry["devices"] = [gpu_device_info(torch, d, backend) for d in devices]
    return entry


# ---------------------------------------------------------------------------------------------
# MPS and XLA
# ---------------------------------------------------------------------------------------------

def probe_mps(torch, *, system: str | None = None, mac_ver: Callable[[], tuple] = platform.mac_ver,
              run: Runner = subprocess.run) -> dict:
    """The ``mps`` entry (Apple GPUs through Metal). Untested on hardware."""
    system = system or platform.system()
    mps = getattr(torch.backends, "mps", None)
    built = bool(mps is not None and mps.is_built())
    entry: dict = {"present": False, "devices": [], "is_built": built, "is_available": False,
                   "macos_version": (mac_ver()[0] or None) if system == "Darwin" else None}
    try:
        devices = device_strings("mps", torch=torch)
    except BackendUnavailable:
        if system != "Darwin":
            entry["reason"] = f"MPS exists only on macOS (this is {system})"
        elif not built:
            entry["reason"] = "this torch build has no MPS support (torch.backends.mps.is_built() is False)"
        else:
            entry["reason"] = ("torch.backends.mps.is_available() is False: macOS older than 12.3 "
                               "or no Metal-capable GPU")
        return entry
    entry.update(present=True, is_available=True)
    chip = _run_text(["sysctl", "-n", "machdep.cpu.brand_string"], run=run) if system == "Darwin" else None
    entry["devices"] = [{"device": d, "name": (chip or "").strip() or "Apple GPU (MPS)",
                         "macos_version": entry["macos_version"]} for d in devices]
    return entry


def _import_xla(import_module: Callable = importlib.import_module):
    """(torch_xla, None) or (None, why it could not be imported)."""
    try:
        return import_module("torch_xla"), None
    except Exception as exc:  # ImportError, or a broken install raising anything at import
        return None, f"{type(exc).__name__}: {exc}"


def xla_device_info(xla, device: str, import_module: Callable = importlib.import_module) -> dict:
    """One XLA device: its hardware type (TPU, CUDA, CPU) and vendor device kind ('TPU v4').
    Untested on hardware."""
    out: dict = {"device": device, "device_hw": None, "device_kind": None}
    try:
        xm = import_module("torch_xla.core.xla_model")
        out["device_hw"] = xm.xla_device_hw(device)
        out["device_kind"] = xm.xla_device_kind(device)
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    out["name"] = out["device_kind"] or out["device_hw"] or "XLA device"
    return out


def probe_xla(torch=None, *, import_module: Callable = importlib.import_module) -> dict:
    """The ``xla`` entry: torch_xla's version and devices, or why absent (not installed is the
    common case and is not an error). Untested on hardware."""
    xla, error = _import_xla(import_module)
    if xla is None:
        return {"present": False, "devices": [], "torch_xla_version": None,
                "reason": f"torch_xla is not installed or does not import ({error}); pip install 'accelbench[xla]'"}
    entry: dict = {"present": False, "devices": [], "torch_xla_version": getattr(xla, "__version__", None)}
    try:
        devices = device_strings("xla", torch=torch, xla=xla)
    except BackendUnavailable as exc:
        entry["reason"] = str(exc)
        return entry
    except Exception as exc:
        entry["reason"] = f"torch_xla.devices() failed: {type(exc).__name__}: {exc}"
        return entry
    entry["present"] = True
    entry["devices"] = [xla_device_info(xla, d, import_module) for d in devices]
    entry["device_kinds"] = sorted({d["device_kind"] for d in entry["devices"] if d.get("device_kind")})
    return entry


# ---------------------------------------------------------------------------------------------
# One device, and the whole machine
# ---------------------------------------------------------------------------------------------

def device_info(device: str, torch=None) -> dict:
    """What the matmul/amp stages need about one device: always ``name``; for ``cpu`` the CPU dict
    (flags, max_mhz, cores_physical, ...); for ``cuda:i`` that GPU's properties; for ``mps``
    and ``xla:i`` their entries. Feed it to ``peaks.peak_tflops``."""
    torch = torch if torch is not None else _torch()
    kind = device.split(":")[0]
    if kind == "cpu":
        return cpu_info(torch)
    if kind == "cuda":
        return gpu_device_info(torch, device, "rocm" if is_rocm_build(torch) else "cuda")
    if kind == "mps":
        entry = probe_mps(torch)
        return entry["devices"][0] if entry["devices"] else {"device": "mps", "name": "Apple GPU (MPS)"}
    if kind == "xla":
        xla, error = _import_xla()
        if xla is None:
            return {"device": device, "name": "XLA device", "error": error}
        return xla_device_info(xla, device)
    raise ValueError(f"device: unknown {device!r}; allowed: cpu, cuda:N, mps, xla:N")


def device_peaks(backend: str, info: dict, threads: int | None, overrides: dict | None) -> dict:
    """{dtype: {"tflops": peak or None, "source": why}} for one device."""
    out = {}
    for dtype in DTYPES:
        value, source = peak_tflops(backend, info, dtype, threads, overrides or {})
        out[dtype] = {"tflops": value, "source": source}
    return out


def detect(run_info: dict, torch=None, *, probes: dict[str, Callable[[], dict]] | None = None) -> dict:
    """The devices.json document for this machine: provenance, the CPU, and every backend.

    ``probes`` replaces the per-backend probes ({backend: () -> entry}) in tests.
    """
    torch = torch if torch is not None else _torch()
    config = run_info.get("config") or {}
    matmul_cfg = config.get("matmul") or {}
    overrides = matmul_cfg.get("peak_tflops") or {}
    cpu_threads = config.get("cpu_threads") or None

    cpu = cpu_info(torch)
    default_probes: dict[str, Callable[[], dict]] = {
        "cpu": lambda: {"present": True, "devices": [{"device": "cpu", "name": cpu["name"]}]},
        "cuda": lambda: probe_gpu(torch, "cuda"),
        "rocm": lambda: probe_gpu(torch, "rocm"),
        "mps": lambda: probe_mps(torch),
        "xla": lambda: probe_xla(torch),
    }
    default_probes.update(probes or {})
    backends: dict[str, dict] = {}
    for name in BACKENDS:
        try:
            entry = default_probes[name]()
        except Exception as exc:  # a probe that breaks marks its backend absent, never the run
            entry = {"present": False, "devices": [], "reason": f"probe failed: {type(exc).__name__}: {exc}"}
        for dev in entry.get("devices", []):
            info = cpu if name == "cpu" else dev
            dev["peaks"] = device_peaks(name, info, cpu_threads if name == "cpu" else None, overrides)
            if name == "cpu":
                dev["peak_threads"] = cpu_threads or "all physical cores"
        backends[name] = entry

    requested = list(config.get("backends") or [])
    return {
        "run_id": run_info.get("run"),
        "host": socket.gethostname(),
        "timestamp_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "accelbench_version": run_info.get("accelbench_version") or __version__,
        "git_commit": run_info.get("git_commit"),
        "config_hash": run_info.get("config_hash"),
        "python_version": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "torch_version": getattr(torch, "__version__", None),
        "cuda_version": getattr(torch.version, "cuda", None) or "",
        "hip_version": getattr(torch.version, "hip", None) or "",
        "container_image": container_image(),
        "env": environment(),
        "packages": package_versions(),
        "cpu": cpu,
        "backends": backends,
        "requested_backends": requested,
        "requested_absent": [b for b in requested if not backends.get(b, {}).get("present")],
    }


def summary_lines(report: dict) -> list[str]:
    """One line per backend, for the log."""
    lines = []
    for name, entry in report["backends"].items():
        if entry.get("present"):
            names = ", ".join(f"{d['device']} ({d.get('name')})" for d in entry.get("devices", []))
            lines.append(f"{name}: present: {names}")
        else:
            lines.append(f"{name}: absent: {entry.get('reason')}")
    return lines


def add_arguments(p) -> None:
    p.add_argument("--run-file", required=True, help="results/<run>/run.json written by `accelbench run-info`")
    p.add_argument("--out", required=True, help="where to write devices.json")


def cli(args) -> int:
    run_info = read_run_info(args.run_file)
    report = detect(run_info)
    atomic_write_json(args.out, report)
    for line in summary_lines(report):
        print(f"accelbench detect: {line}")
    return 0

