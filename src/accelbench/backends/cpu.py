"""The host CPU as a backend: what it is (ISA flags, cores, clock, caches: what decides its matmul
speed), how fast it can be (``peaks.cpu_peak``), and how its memory is counted.

Detection reads /proc/cpuinfo, sysfs and ``lscpu`` on Linux, ``sysctl`` on macOS; every reader takes
its root folder or command runner as an argument, so fixture trees of other CPUs (Sapphire Rapids
with AMX, Neoverse V1 with SVE, an Apple M-series Mac) are tested here.
"""

from __future__ import annotations

import os
import platform
import re
import resource
import shutil
import subprocess
import timeit
from pathlib import Path

import psutil

from ..measure import telemetry as telemetry_readers
from . import peaks
from ._system import Runner, read_file, run_text
from .base import Backend, proc_status_bytes

# ISA flags (as /proc/cpuinfo spells them) that decide how fast a CPU multiplies matrices.
X86_MATMUL_FLAGS = (
    "sse2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "amx_fp16",
)
ARM_MATMUL_FLAGS = ("asimd", "neon", "fphp", "asimdhp", "asimddp", "sve", "sve2", "svebf16", "bf16", "i8mm", "sme")
MATMUL_FLAGS = X86_MATMUL_FLAGS + ARM_MATMUL_FLAGS


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


_SIZE_UNITS = {
    "": 1,
    "B": 1,
    "K": 1024,
    "KB": 1024,
    "KIB": 1024,
    "M": 1024**2,
    "MB": 1024**2,
    "MIB": 1024**2,
    "G": 1024**3,
    "GB": 1024**3,
    "GIB": 1024**3,
}


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
        level = (read_file(index / "level") or "").strip()
        kind = (read_file(index / "type") or "").strip()
        size = parse_size_bytes((read_file(index / "size") or "").strip())
        if not level or size is None:
            continue
        name = f"l{level}" + {"Data": "d", "Instruction": "i"}.get(kind, "")
        out[f"{name}_bytes"] = size
        shared = (read_file(index / "shared_cpu_list") or "").strip()
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
        pkg = read_file(cpu_dir / "topology" / "physical_package_id")
        core = read_file(cpu_dir / "topology" / "core_id")
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
    text = read_file(cgroup_root / "cpu.max")
    if text:
        quota, _, period = text.strip().partition(" ")
        if quota != "max" and period:
            return int(quota) / int(period)
        return None
    q = read_file(cgroup_root / "cpu" / "cpu.cfs_quota_us")
    p = read_file(cgroup_root / "cpu" / "cpu.cfs_period_us")
    if q and p and int(q) > 0:
        return int(q) / int(p)
    return None


def max_clock_mhz(
    sys_cpu: Path, cpuinfo: list[dict[str, str]], lscpu: dict[str, str]
) -> tuple[float | None, str, bool]:
    """(MHz, where it was read, whether it is the max boost clock).

    Order: cpufreq ``cpuinfo_max_freq`` (kHz; the max boost clock), lscpu ``CPU max MHz``
    (the same, read by lscpu), /proc/cpuinfo ``cpu MHz`` (the current clock: in VMs usually
    the nominal clock, so turbo can exceed it).
    """
    khz = read_file(sys_cpu / "cpu0" / "cpufreq" / "cpuinfo_max_freq")
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


def linux_cpu_info(
    proc_root: Path = Path("/proc"),
    sys_root: Path = Path("/sys"),
    run: Runner = subprocess.run,
    affinity: set[int] | None = None,
) -> dict:
    """The CPU as Linux describes it (/proc/cpuinfo, sysfs, lscpu), without torch."""
    cpuinfo = parse_proc_cpuinfo(read_file(proc_root / "cpuinfo") or "")
    lscpu = parse_lscpu(run_text(["lscpu"], run=run) or "")
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
    sve = read_file(proc_root / "sys" / "abi" / "sve_default_vector_length")
    if sve and sve.strip().isdigit():
        info["sve_vector_bits"] = int(sve) * 8
    info["model_name"] = info["name"]
    return info


# sysctl name -> flag name as Linux spells it
DARWIN_FLAG_SYSCTLS = {
    "hw.optional.avx2_0": "avx2",
    "hw.optional.fma": "fma",
    "hw.optional.avx1_0": "avx",
    "hw.optional.avx512f": "avx512f",
    "hw.optional.neon": "neon",
    "hw.optional.arm.FEAT_BF16": "bf16",
    "hw.optional.arm.FEAT_FP16": "asimdhp",
    "hw.optional.arm.FEAT_DotProd": "asimddp",
    "hw.optional.arm.FEAT_I8MM": "i8mm",
    "hw.optional.arm.FEAT_SME": "sme",
}


def darwin_cpu_info(run: Runner = subprocess.run) -> dict:
    """The CPU as macOS describes it (``sysctl``). Untested on hardware.

    Apple Silicon does not expose its clock, so the CPU peak is unknown there (and torch's
    matmul goes through Accelerate, which uses Apple's matrix coprocessor, beyond any NEON peak).
    """

    def sysctl(name: str) -> str | None:
        text = run_text(["sysctl", "-n", name], run=run)
        return text.strip() if text else None

    def as_int(name: str) -> int | None:
        v = sysctl(name)
        return int(v) if v and v.isdigit() else None

    flags = sorted(flag for key, flag in DARWIN_FLAG_SYSCTLS.items() if sysctl(key) == "1")
    hz = as_int("hw.cpufrequency_max")  # Intel Macs only
    name = sysctl("machdep.cpu.brand_string") or platform.processor() or "unknown CPU"
    return {
        "name": name,
        "model_name": name,
        "arch": platform.machine(),
        "vendor": sysctl("machdep.cpu.vendor"),
        "family": None,
        "model": None,
        "flags": flags,
        "flags_source": "sysctl hw.optional.*",
        "max_mhz": hz / 1e6 if hz else None,
        "clock_source": "sysctl hw.cpufrequency_max" if hz else "unknown (Apple Silicon does not expose its clock)",
        "clock_is_max": bool(hz),
        "cores_logical": as_int("hw.logicalcpu"),
        "cores_physical": as_int("hw.physicalcpu"),
        "sockets": as_int("hw.packages"),
        "l2_bytes": as_int("hw.l2cachesize"),
        "l3_bytes": as_int("hw.l3cachesize"),
        "cgroup_cpu_quota": None,
    }


def cpu_info(
    torch=None,
    *,
    system: str | None = None,
    proc_root: Path = Path("/proc"),
    sys_root: Path = Path("/sys"),
    run: Runner = subprocess.run,
) -> dict:
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
        info = {
            "name": name,
            "model_name": name,
            "arch": platform.machine(),
            "flags": [],
            "flags_source": "unknown",
            "max_mhz": None,
            "clock_source": "unknown",
            "clock_is_max": False,
            "cores_logical": os.cpu_count(),
            "cores_physical": None,
            "sockets": None,
        }
    info["device"] = "cpu"
    if torch is not None:
        info.update(_torch_cpu_details(torch))
    return info


def cpu_llc_bytes(sysfs: str | Path = "/sys/devices/system/cpu/cpu0/cache") -> int | None:
    """Size of the CPU's highest-level data/unified cache from sysfs (Linux), or None."""
    best_level, best = -1, None
    for index in sorted(Path(sysfs).glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = parse_size_bytes((index / "size").read_text().strip())
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or size is None:
            continue
        if level > best_level:
            best_level, best = level, size
    return best


# cpuinfo flags that mean the CPU computes in the low-precision dtype natively
# (x86: AVX512-BF16/AMX; aarch64: the BF16 and half-precision arithmetic extensions)
NATIVE_LOW_PRECISION_FLAGS = {
    "bfloat16": ("avx512_bf16", "amx_bf16", "bf16", "svebf16"),
    "float16": ("avx512_fp16", "amx_fp16", "fphp", "asimdhp"),
}


def native_low_precision(flags, dtype: str) -> bool | None:
    """Whether the CPU flags include native instructions for ``dtype``; None when the flags are unknown."""
    if flags is None:
        return None
    if isinstance(flags, str):
        flags = flags.split()
    flags = {str(f).lower() for f in flags}
    return any(f in flags for f in NATIVE_LOW_PRECISION_FLAGS.get(dtype, ()))


def precision_note(flags, dtype: str) -> str:
    """Why AMP on a CPU without native low-precision units is expected to be slower ('' when native)."""
    short = "bf16" if dtype == "bfloat16" else "fp16"
    native = native_low_precision(flags, dtype)
    flags_wanted = NATIVE_LOW_PRECISION_FLAGS.get(dtype, ())
    if not flags_wanted:
        return ""
    wanted = ", ".join(flags_wanted[:-1]) + " or " + flags_wanted[-1]
    if native is None:
        return (
            f"CPU flags unknown: cannot tell whether this CPU computes {short} natively ({wanted}); "
            f"without them AMP is expected to be slower than FP32."
        )
    if native:
        return ""
    return (
        f"This CPU has no native {short} units (no {wanted} in its flags), so AMP is expected to be "
        f"slower here: {short} is only a storage format on it, every autocast matmul converts its inputs "
        f"and outputs between {short} and fp32 and computes on the same fp32 FMA units (or a slower "
        f"emulated {short} path), so it pays conversions on top of FP32's work and gains no compute throughput."
    )


class CpuBackend(Backend):
    """The host CPU: always present, one device (``cpu``), synchronous kernels.

    Stages use every core the scheduler grants (``cpu_threads``); AMP trains in bf16 (CPU autocast's
    dtype, native on AVX512-BF16/AMX); memory is the process's resident set; the peak is cores x clock
    x FLOP/cycle for the ISA (``peaks.cpu_peak``), an upper bound only when the clock is the maximum
    boost clock. Several CPU processes (DDP ranks) talk over gloo.
    """

    name = "cpu"
    device_type = "cpu"
    title = "CPU"
    is_accelerator = False
    has_image = True
    amp_default_dtype = "bfloat16"
    collective = "gloo"
    telemetry = "cpu_sysfs"
    host_threads = None  # CPU stages measure with every core they are granted

    def devices(self) -> list[str]:
        return ["cpu"]

    def probe(self) -> dict:
        info = self.device_info("cpu")
        return {"present": True, "devices": [{"device": "cpu", "name": info["name"]}]}

    def device_info(self, device: str = "cpu") -> dict:
        """The whole CPU description (flags, clock, cores, caches), detected once per backend object."""
        if getattr(self, "_info", None) is None:
            self._info = cpu_info(self.torch)
        return dict(self._info)

    def peak_info(self, entry: dict) -> dict:
        return {**self.device_info("cpu"), **entry}

    def synchronize(self, device: str) -> None:
        """CPU kernels run synchronously: nothing to wait for."""

    def synced_timer(self, device: str):
        return timeit.default_timer  # the plain clock: no device to wait for

    def table_bandwidth(self, info: dict) -> tuple[float | None, str]:
        """A CPU's memory bandwidth depends on the DIMMs and the channels populated, which the OS does not
        report reliably: measured only (membw), unless the config says."""
        return None, (
            "cpu: measured only: the DIMM configuration (channels, speed) is not known here; "
            "set membw.peak_gbps.cpu to compare with a known figure"
        )

    def fp8_support(self, info: dict) -> str | None:
        return None  # torch ships a CPU kernel for _scaled_mm; a build without it fails the probe -> unsupported

    def compile_support(self) -> str:
        """Inductor builds C++ kernels for the CPU: it needs a C++ compiler (``CXX``, else g++, clang++ or c++)."""
        candidates = [os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "clang++", "c++"]
        if any(shutil.which(c) for c in candidates):
            return ""
        return (
            f"torch.compile (inductor) on the CPU needs a C++ compiler; none of {', '.join(candidates)} is on "
            "the PATH (install g++ or set CXX)"
        )

    def amp_note(self, info: dict, dtype: str) -> str:
        return precision_note(info.get("flags"), dtype)

    def reset_peak_memory(self, device: str) -> bool:
        """Linux resets the process's peak resident set size (VmHWM) when 5 is written to
        /proc/self/clear_refs; where that is not possible the peak covers the whole process."""
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
            return proc_status_bytes("VmHWM") is not None
        except OSError:
            return False

    def peak_memory(self, device: str, per_trial: bool = True) -> tuple[float, str]:
        """Peak resident set size of the whole process: ``rss`` (per trial, reset before it) or
        ``rss_process_peak`` (since the process started, where the reset is not possible)."""
        hwm = proc_status_bytes("VmHWM") if per_trial else None
        if hwm is not None:
            return float(hwm), "rss"
        maxrss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return float(maxrss_kb * 1024), "rss_process_peak"

    def free_bytes(self, device: str) -> int:
        try:
            return int(psutil.virtual_memory().available)
        except Exception:
            return super().free_bytes(device)

    def memory_capacity(self, device: str) -> int | None:
        try:
            return int(psutil.virtual_memory().total)
        except Exception:
            return None

    def cache_bytes(self, device: str, info: dict | None = None) -> int:
        return cpu_llc_bytes() or self.default_cache_bytes

    def reference_device(self, device: str) -> str:
        return "cpu"

    def table_peak(self, info: dict, dtype: str, threads: int | None):
        return peaks.cpu_peak(info, dtype, threads)

    def peak_is_bound(self, info: dict, overridden: bool) -> bool:
        """A CPU peak from a clock that is not the maximum boost clock (a VM's nominal clock) is not a
        bound: turbo may exceed it. A configured override is taken as one."""
        return overridden or info.get("clock_is_max") is not False

    def pinned_memory_support(self) -> str | None:
        return "cpu: no host<->device copy (the host is the device)"

    # ---- several ranks: gloo processes that split the granted cores
    def max_world_size(self, devices: list[str], threads: int) -> int:
        """One rank per granted core: every rank keeps at least one thread."""
        return max(1, int(threads))

    def threads_per_rank(self, threads: int, max_world_size: int) -> int:
        """The granted cores split evenly over the largest world, so every world size gives each rank the
        same share of the CPU (the CPU analogue of one GPU per rank): world size 1 is one such share."""
        return max(1, int(threads) // max(1, int(max_world_size)))

    def rank_device(self, local_rank: int, devices: list[str]) -> str:
        return "cpu"

    def peer_copy_support(self, n_devices: int) -> str | None:
        return "cpu: one device (the host); no device-to-device copy"

    def telemetry_reader(self, device: str, info: dict | None = None) -> telemetry_readers.Reader:
        """cpufreq (else /proc/cpuinfo) clocks of the cores this process runs on, RAPL package energy and
        power, psutil temperature and utilization, thermal_throttle counters."""
        return telemetry_readers.CpuSysfsReader()
