"""What the device was doing while it was measured: clock, power, temperature, energy and throttling.

A TFLOP/s figure without the clock behind it cannot tell a boost reading from a sustained one, or a
throttling device from a slow one. So every matmul point and every AMP trial is measured inside a
*window* of this module's sampler: a background thread that reads the device's sensors every
``1 / telemetry.hz`` seconds (default 20 Hz) while the point runs, plus one synchronous reading at the
window's start and one at its end (so even a window shorter than a sampling period has two).

**Readers.** Which sensors a device has is the backend's business (``Backend.telemetry_reader``); the
readers are all here, each taking every file root and library module as an argument so tests drive
them with fakes:

- ``CpuSysfsReader`` (source ``cpu_sysfs``): per-core clock from cpufreq ``scaling_cur_freq``, else
  ``/proc/cpuinfo`` ``cpu MHz``, averaged over the cores this process may run on; package energy from
  RAPL (``/sys/class/powercap/*-rapl:N/energy_uj``, summed over packages, counter wrap corrected with
  ``max_energy_range_uj``) and power as its rate; temperature through ``psutil.sensors_temperatures``;
  utilization through ``psutil.cpu_percent``; throttling from the kernel's ``thermal_throttle``
  counters (Intel ``therm_throt``) going up.
- ``NvmlReader`` (source ``nvml``, NVIDIA, ``nvidia-ml-py``): SM and memory clocks, power, the
  total-energy counter (Volta and later), temperature, utilization and the clock-event (throttle)
  reasons. **Untested on hardware.**
- ``AmdSmiReader`` (source ``amdsmi``, AMD, ``amdsmi``): GFX and memory clocks, socket power, the
  energy accumulator, hotspot (else edge) temperature, GFX activity and the SMU throttle status.
  **Untested on hardware.**
- ``NullReader`` (source ``none``): a device kind without a reader; every sensor missing, with why.

Each reader is *opened* once per stage and device: every sensor is tried once, and one that fails is
left out for the rest of the stage with the reason (``Reader.missing``), so a missing sensor is a
null in the rows, never 0, and the report says why it is missing (devices.json records what
``detect`` found per device).

**Per window** (``summarize``): the median and minimum clock, the median power, the maximum
temperature, the energy (difference of the energy counter between the window's first and last
reading; where there is no counter, the trapezoid integral of the power readings), whether any
reading carried a throttling reason and which, and whether the clock had settled (``clock_settled``).
Efficiency per joule (``per_joule``) is a rate divided by the window's mean power (energy / duration).

**Overhead.** The thread is started at the start of a window and stopped at its end, so nothing runs
between points; ``bench/telemetry_overhead.py`` measures what it costs while a point runs.

ML.ENERGY's ``zeus`` was weighed and not used: it measures energy windows only (no clock, throttle or
temperature series), installs NVML, amdsmi, scikit-learn, pydantic, rich, tyro and httpx
unconditionally, and tracks RAPL wrap-around in a separate polling process per RAPL file; the clocks
and throttle reasons would still need readers of our own (docs/telemetry.md).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

import psutil

from ..columns import TELEMETRY_SERIES
from .failures import one_line

DEFAULT_HZ = 20.0
DEFAULT_SETTLE_REL_TOL = 0.03
SENSORS = ("clock", "mem_clock", "power", "energy", "temperature", "utilization", "throttle")
MIN_SETTLE_SAMPLES = 4  # fewer clock readings in a window than this: too few to tell whether it settled
MIN_POWER_INTERVAL_S = 0.01  # RAPL power from two energy reads closer than this is not computed (counter steps ~1 ms)

# The columns a window adds to a matmul point, a soak interval or an AMP trial (the rate per joule is the
# stage's: gflop_per_j, samples_per_j).
WINDOW_COLUMNS = (
    "clock_mhz_median",
    "clock_mhz_min",
    "power_w_median",
    "temp_c_max",
    "energy_j",
    "throttled",
    "throttle_reasons",
    "telemetry_source",
)
WINDOW_EXTRA = (
    "telemetry_samples",
    "mem_clock_mhz_median",
    "util_pct_median",
    "energy_source",
    "telemetry_start_unix_s",
    "telemetry_end_unix_s",
    "power_source",
    "telemetry_too_short_for",
    "clock_source",
)
# clock_source: "measured" (a clock that can vary), "nominal" (one that cannot: /proc/cpuinfo's fixed "cpu MHz"
# under a hypervisor, or a fallback reading that never changed over the window; clock_ramp is then unknown)
CLOCK_MEASURED, CLOCK_NOMINAL = "measured", "nominal"
SERIES_COLUMNS = TELEMETRY_SERIES  # one row per reading (the columns are declared once, in accelbench.columns)

# NVML clock-event reasons: nvml.h's ``nvmlClocksEventReason*`` defines (CUDA 12.x/13.x nvml.h, "Clocks
# Event Reasons"; the same nine bits, 0x1-0x100, in nvidia-ml-py's pynvml.py "Clock Event Reasons defines",
# checked 2026-12-02). nvml.h defines no other bit (0x200/0x400 are not reasons). The first group lowers the
# clock below what the load asks for: throttling. The second are clock events that are not (an idle GPU,
# clocks set by the user, sync boost, display).
NVML_THROTTLE_BITS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
}
NVML_OTHER_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks", 0x10: "sync_boost", 0x100: "display_clocks"}

# AMD SMU throttler bits (Linux drivers/gpu/drm/amd/pm/swsmu/inc/amdgpu_smu.h, SMU_THROTTLER_*_BIT, since
# v5.14, 2021): 16 bits per group in the 64-bit ``indep_throttle_status`` of gpu_metrics.
AMD_THROTTLE_GROUPS = ((0, "power"), (16, "current"), (32, "thermal"), (48, "other"))

# NVML power fields (nvml.h ``NVML_FI_DEV_POWER_AVERAGE`` 185, ``NVML_FI_DEV_POWER_INSTANT`` 186): on Ampere
# (except GA100) and later, nvmlDeviceGetPowerUsage is the 1 s average (nvml.h, nvmlDeviceGetPowerUsage); the
# instant field is what stas00/ml-engineering's mamf-finder reads. The total-energy counter steps every
# 20-100 ms (Hopper), so a window shorter than ten of its slowest steps has an energy (and FLOP/J) error
# above ~10 %; the 1 s average says little about a window shorter than the second it averages over.
NVML_FI_DEV_POWER_AVERAGE, NVML_FI_DEV_POWER_INSTANT = 185, 186
NVML_ENERGY_STEP_S = 0.1
NVML_MIN_WINDOW_S = {  # power source -> sensor -> the shortest window its reading is reliable for
    "instant": {"energy": 10 * NVML_ENERGY_STEP_S},
    "average_1s": {"energy": 10 * NVML_ENERGY_STEP_S, "power": 1.0},
}


def _finite(x) -> float | None:
    """``x`` as a float when it is a finite number (bools and "N/A" strings are not), else None."""
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


# ---------------------------------------------------------------------------------------------------------
# Readings and readers
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reading:
    """One read of every sensor a reader has; None where a sensor is missing or failed this time."""

    t: float  # the sampler's clock (seconds, monotonic)
    clock_mhz: float | None = None  # SM (NVIDIA), GFX (AMD), mean core clock (CPU)
    mem_clock_mhz: float | None = None
    power_w: float | None = None
    energy_j: float | None = None  # a cumulative counter, wraps corrected, from an arbitrary origin
    temp_c: float | None = None
    util_pct: float | None = None
    throttle: tuple[str, ...] | None = None  # throttling reasons seen at this read; () none; None unknown


class EnergyCounter:
    """A hardware energy counter made monotonic: each read adds the difference to the previous one,
    and a counter that went down wrapped around at ``max_range`` (RAPL's ``max_energy_range_uj``).
    Without a known range a decrease cannot be corrected: the total is then unknown (None) from there on.
    Correct as long as the counter is read at least once per wrap period (RAPL: minutes at full power)."""

    def __init__(self, max_range: float | None = None):
        self.max_range = max_range
        self.last: float | None = None
        self.total = 0.0
        self.broken = False

    def update(self, raw: float) -> float | None:
        raw = float(raw)
        if self.last is not None:
            delta = raw - self.last
            if delta < 0:
                if self.max_range:
                    delta += self.max_range
                else:
                    self.broken = True
            self.total += delta
        self.last = raw
        return None if self.broken else self.total


Getter = Callable[[], object]


class SourceUnavailable(RuntimeError):
    """The whole source cannot be read here (its library is not installed); the message says why."""


class Reader:
    """One device's sensors. ``open()`` tries each sensor once: one that answers is read at every
    ``read()``; one that fails is left out, and ``missing`` says why. ``close()`` lets go of the library."""

    source = "none"

    def __init__(self):
        self._getters: dict[str, Getter] = {}
        self.found: dict[str, str] = {}  # sensor -> where it is read from
        self.missing: dict[str, str] = {}  # sensor -> why it is not read
        self.opened = False
        self.power_source: str | None = None  # what the power sensor is (instant, average_1s, ...), once open
        self.min_window_s: dict[str, float] = {}  # sensor -> the shortest window its reading is reliable for
        # the clock cannot vary here (why), e.g. /proc/cpuinfo's fixed "cpu MHz" under a hypervisor
        self.clock_nominal: str | None = None
        # the clock is a fallback reading (no frequency driver): one that never changes over a window is nominal
        self.clock_fallback = False

    def sensors(self) -> tuple[dict[str, tuple[Getter, str]], dict[str, str]]:
        """(sensor -> (getter, where it is read)), (sensor -> why it cannot be read). Raise to say that
        the whole source is unavailable (the message goes to every sensor)."""
        raise NotImplementedError

    def open(self) -> Reader:
        if self.opened:
            return self
        self.opened = True
        try:
            getters, why = self.sensors()
        except SourceUnavailable as exc:
            self.missing = {s: str(exc) for s in SENSORS}
            return self
        except Exception as exc:  # the library will not start (no driver, no device): every sensor says why
            reason = one_line(exc, 200)
            self.missing = dict.fromkeys(SENSORS, reason)
            return self
        for name in SENSORS:
            if name not in getters:
                self.missing[name] = why.get(name, f"{self.source} does not read it")
                continue
            get, where = getters[name]
            try:
                value = get()
            except Exception as exc:  # this sensor is not there (unsupported, no permission): left out
                self.missing[name] = f"{where}: {one_line(exc, 160)}"
                continue
            if value is None:
                self.missing[name] = f"{where}: no value (unsupported on this device)"
                continue
            self._getters[name] = get
            self.found[name] = where
        return self

    @property
    def any(self) -> bool:
        """Whether at least one sensor is read."""
        return bool(self._getters)

    def read(self, t: float) -> Reading:
        values: dict[str, object] = {}
        for name, get in self._getters.items():
            try:
                values[name] = get()
            except Exception:  # a sensor that fails once gives a null for this read, never a 0
                values[name] = None
        throttle = values.get("throttle")
        return Reading(
            t=t,
            clock_mhz=_finite(values.get("clock")),
            mem_clock_mhz=_finite(values.get("mem_clock")),
            power_w=_finite(values.get("power")),
            energy_j=_finite(values.get("energy")),
            temp_c=_finite(values.get("temperature")),
            util_pct=_finite(values.get("utilization")),
            throttle=tuple(sorted(throttle)) if isinstance(throttle, (tuple, list, set, frozenset)) else None,
        )

    def read_one(self, sensor: str) -> float | None:
        """One sensor alone, now (the warm-up's clock: one NVML call, not every sensor's); None when it is
        missing or fails this time."""
        get = self._getters.get(sensor)
        if get is None:
            return None
        try:
            return _finite(get())
        except Exception:
            return None

    def close(self) -> None:
        """Let go of the sensor library (NVML, amdsmi); nothing for files."""

    def describe(self) -> dict:
        """What devices.json records: the source, where each sensor is read, why the others are missing."""
        self.open()
        return {"source": self.source, "found": dict(self.found), "missing": dict(self.missing)}


class NullReader(Reader):
    """A device kind without a telemetry reader: every sensor missing, with ``reason``."""

    source = "none"

    def __init__(self, reason: str):
        super().__init__()
        self.reason = reason

    def sensors(self):
        return {}, dict.fromkeys(SENSORS, self.reason)


# ---- CPU: sysfs, procfs, psutil ----------------------------------------------------------------------


def _read_text(path: Path) -> str | None:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


CPUINFO_MHZ = re.compile(r"^processor\s*:\s*(\d+)|^cpu MHz\s*:\s*([\d.]+)", re.MULTILINE)


def cpuinfo_mhz(text: str) -> dict[int, float]:
    """/proc/cpuinfo's ``cpu MHz`` per processor number."""
    out, current = {}, None
    for proc, mhz in CPUINFO_MHZ.findall(text):
        if proc:
            current = int(proc)
        elif current is not None:
            out[current] = float(mhz)
    return out


# psutil.sensors_temperatures() chips, best first: Intel package/core, AMD Tctl/Tdie, ARM SoC, ACPI zone
CPU_TEMP_CHIPS = ("coretemp", "k10temp", "zenpower", "cpu_thermal", "soc_thermal", "acpitz")


class RaplPackages:
    """The package energy of every CPU socket from the powercap sysfs (Intel RAPL, and AMD RAPL since
    Linux 5.8: both appear as ``intel-rapl:N``). Only package zones (``*-rapl:N``, not the core/uncore/dram
    sub-zones ``*-rapl:N:M``, nor the ``-mmio`` duplicates of the package), summed; each counter made
    monotonic across wraps with its ``max_energy_range_uj``."""

    ZONE = re.compile(r"^[a-z]+-rapl:\d+$")

    def __init__(
        self,
        powercap: Path,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.powercap = powercap
        self.clock = clock
        self.sleep = sleep
        self.files: list[Path] = []
        self.counters: list[EnergyCounter] = []
        self._power_last: tuple[float, float] | None = None
        self._power_value: float | None = None

    def find(self) -> str | None:
        """Find the package zones; None when usable, else why not (one line)."""
        if not self.powercap.is_dir():
            return (
                f"no RAPL: {self.powercap} does not exist (a VM or container without RAPL, or a kernel "
                "without the powercap driver)"
            )
        zones = sorted(p for p in self.powercap.iterdir() if self.ZONE.match(p.name) and "mmio" not in p.name)
        if not zones:
            return f"no RAPL package zone (*-rapl:N) under {self.powercap}"
        for zone in zones:
            energy = zone / "energy_uj"
            try:
                with open(energy) as fh:
                    int(fh.read().strip())
            except PermissionError:
                return (
                    f"RAPL {energy} is readable by root only (the kernel's mitigation of CVE-2020-8694): run "
                    f"as root or make it readable (chmod o+r)"
                )
            except (OSError, ValueError) as exc:
                return f"RAPL {energy} unreadable: {one_line(exc, 120)}"
            max_range = _finite((_read_text(zone / "max_energy_range_uj") or "").strip())
            self.files.append(energy)
            self.counters.append(EnergyCounter(max_range))
        self.energy()  # the first read sets each counter's origin
        self._power_last = (self.clock(), self.energy() or 0.0)
        return None

    def energy(self) -> float | None:
        """Joules since the first read, every package summed."""
        total = 0.0
        for path, counter in zip(self.files, self.counters):
            with open(path) as fh:
                value = counter.update(int(fh.read().strip()))
            if value is None:
                return None
            total += value
        return total / 1e6

    def power(self) -> float | None:
        """Watts: the rate of the energy counter since the previous power read at least
        ``MIN_POWER_INTERVAL_S`` before (closer reads repeat the last value: the counter steps ~1 ms, so
        a rate over microseconds would read 0 W). The very first read waits out that interval."""
        now, energy = self.clock(), self.energy()
        if energy is None or self._power_last is None:
            return None
        if self._power_value is None and now - self._power_last[0] < MIN_POWER_INTERVAL_S:
            self.sleep(MIN_POWER_INTERVAL_S - (now - self._power_last[0]))
            now, energy = self.clock(), self.energy()
            if energy is None:
                return None
        if now - self._power_last[0] >= MIN_POWER_INTERVAL_S:
            self._power_value = (energy - self._power_last[1]) / (now - self._power_last[0])
            self._power_last = (now, energy)
        return self._power_value


class CpuSysfsReader(Reader):
    """The host CPU's clock, package energy and power (RAPL), temperature, utilization and thermal
    throttling, from Linux sysfs and procfs and psutil. ``sys_root``, ``proc_root``, ``cpus`` and
    ``psutil_module`` are for tests (fixture trees and fakes)."""

    source = "cpu_sysfs"

    def __init__(
        self,
        *,
        sys_root: Path = Path("/sys"),
        proc_root: Path = Path("/proc"),
        cpus: Iterable[int] | None = None,
        psutil_module=psutil,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
    ):
        super().__init__()
        self.sys_root, self.proc_root = Path(sys_root), Path(proc_root)
        if cpus is None:
            try:
                cpus = os.sched_getaffinity(0)
            except (AttributeError, OSError):
                cpus = range(os.cpu_count() or 1)
        self.cpus = sorted(set(cpus))
        self.psutil = psutil_module
        self.clock = clock
        self.sleep = sleep
        self._throttle_last: dict[Path, int] = {}

    # -- clock
    def _clock_getter(self) -> tuple[tuple[Getter, str] | None, str]:
        cpu_dir = self.sys_root / "devices" / "system" / "cpu"
        files = [cpu_dir / f"cpu{c}" / "cpufreq" / "scaling_cur_freq" for c in self.cpus]
        files = [f for f in files if _read_text(f) is not None]
        if files:

            def from_cpufreq():
                khz = [int(_read_text(f)) for f in files]
                return sum(khz) / len(khz) / 1000.0

            return (from_cpufreq, f"cpufreq scaling_cur_freq, mean of {len(files)} core(s)"), ""
        cpuinfo = self.proc_root / "cpuinfo"
        mhz = cpuinfo_mhz(_read_text(cpuinfo) or "")
        mine = [c for c in self.cpus if c in mhz] or list(mhz)
        if mine:
            self.clock_fallback = True
            if re.search(r"^flags\s*:.*\bhypervisor\b", _read_text(cpuinfo) or "", re.MULTILINE):
                self.clock_nominal = (
                    f"{cpuinfo} 'cpu MHz' under a hypervisor (no cpufreq): the guest sees a fixed nominal clock"
                )

            def from_cpuinfo():
                values = cpuinfo_mhz(_read_text(cpuinfo) or "")
                got = [values[c] for c in mine if c in values]
                return sum(got) / len(got) if got else None

            return (from_cpuinfo, f"{cpuinfo} 'cpu MHz' (no cpufreq in sysfs), mean of {len(mine)} core(s)"), ""
        return None, f"no cpufreq scaling_cur_freq under {cpu_dir} and no 'cpu MHz' in {cpuinfo}"

    # -- temperature
    def _temperature_getter(self) -> tuple[tuple[Getter, str] | None, str]:
        read = getattr(self.psutil, "sensors_temperatures", None)
        if read is None:
            return None, "psutil has no sensors_temperatures on this platform"
        chips = read() or {}
        chip = next((c for c in CPU_TEMP_CHIPS if chips.get(c)), None)
        if chip is None:
            return None, (
                "no CPU temperature sensor (psutil.sensors_temperatures() found "
                + (", ".join(sorted(chips)) if chips else "none: usual in a VM")
                + ")"
            )

        def hottest():
            entries = (read() or {}).get(chip) or []
            values = [_finite(e.current) for e in entries]
            values = [v for v in values if v is not None]
            return max(values) if values else None

        return (hottest, f"psutil.sensors_temperatures()['{chip}'] (hottest)"), ""

    # -- throttling
    def _throttle_getter(self) -> tuple[tuple[Getter, str] | None, str]:
        cpu_dir = self.sys_root / "devices" / "system" / "cpu"
        counters = []
        for c in self.cpus:
            for kind in ("core", "package"):
                path = cpu_dir / f"cpu{c}" / "thermal_throttle" / f"{kind}_throttle_count"
                if _read_text(path) is not None:
                    counters.append((path, f"thermal_{kind}"))
        if not counters:
            return None, (
                f"no thermal_throttle counters under {cpu_dir}/cpu*/ (Intel therm_throt only; absent in VMs and on AMD)"
            )

        def reasons():
            seen = set()
            for path, reason in counters:
                count = int(_read_text(path) or 0)
                last = self._throttle_last.get(path)
                if last is not None and count > last:
                    seen.add(reason)
                self._throttle_last[path] = count
            return tuple(sorted(seen))

        return (reasons, f"{cpu_dir}/cpu*/thermal_throttle/*_throttle_count going up"), ""

    def sensors(self):
        getters: dict[str, tuple[Getter, str]] = {}
        why: dict[str, str] = {"mem_clock": "the CPU's memory clock is not exposed to software"}
        for name, make in (
            ("clock", self._clock_getter),
            ("temperature", self._temperature_getter),
            ("throttle", self._throttle_getter),
        ):
            got, reason = make()
            if got:
                getters[name] = got
            else:
                why[name] = reason
        rapl = RaplPackages(self.sys_root / "class" / "powercap", self.clock, self.sleep)
        reason = rapl.find()
        if reason is None:
            where = f"RAPL {', '.join(str(f.parent.name) for f in rapl.files)} energy_uj"
            getters["energy"] = (rapl.energy, where)
            getters["power"] = (rapl.power, f"{where} (rate between reads)")
        else:
            why["energy"] = why["power"] = reason
        percent = getattr(self.psutil, "cpu_percent", None)
        if percent is not None:
            cpus = self.cpus

            def utilization():
                per_cpu = percent(percpu=True)
                mine = [per_cpu[c] for c in cpus if c < len(per_cpu)]
                return sum(mine) / len(mine) if mine else None

            utilization()  # psutil's first call only sets its origin
            getters["utilization"] = (utilization, "psutil.cpu_percent(percpu=True)")
        else:
            why["utilization"] = "psutil has no cpu_percent"
        return getters, why


# ---- NVIDIA: NVML through nvidia-ml-py ----------------------------------------------------------------


def nvml_reasons(mask: int) -> tuple[str, ...]:
    """The throttling reasons in an NVML clock-event mask (the non-throttling events left out)."""
    return tuple(name for bit, name in NVML_THROTTLE_BITS.items() if int(mask) & bit)


_NVML_VALUE_FIELDS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal"}  # nvmlValueType_t


def nvml_field_value(fv) -> float | None:
    """The number in one ``nvmlFieldValue_t`` (``nvmlDeviceGetFieldValues``), by its ``valueType``; None
    when NVML returned an error for the field."""
    if int(getattr(fv, "nvmlReturn", 0)) != 0:
        return None
    return _finite(getattr(fv.value, _NVML_VALUE_FIELDS.get(int(getattr(fv, "valueType", 1)), "uiVal")))


class NvmlReader(Reader):
    """An NVIDIA GPU through NVML (``pynvml``, from the ``nvidia-ml-py`` package: ``accelbench[nvidia]``).
    The GPU is found by its UUID (as torch reports it) where known, else by ``index``, which differs from
    torch's index when CUDA_VISIBLE_DEVICES or CUDA_DEVICE_ORDER reorder devices. **Untested on hardware**."""

    source = "nvml"

    def __init__(self, index: int, uuid: str | None = None, import_module: Callable = importlib.import_module):
        super().__init__()
        self.index, self.uuid = int(index), uuid
        self._import = import_module
        self.nvml = None

    def sensors(self):
        try:
            nvml = self._import("pynvml")
        except ImportError as exc:
            raise SourceUnavailable(
                f"pynvml is not importable ({one_line(exc, 80)}): pip install 'accelbench[nvidia]' (nvidia-ml-py)"
            ) from None
        nvml.nvmlInit()
        self.nvml = nvml
        handle, how = None, f"index {self.index}"
        if self.uuid:
            uuid = self.uuid if str(self.uuid).startswith(("GPU-", "MIG-")) else f"GPU-{self.uuid}"
            with contextlib.suppress(Exception):  # an older driver or a MIG slice: by index instead
                handle, how = nvml.nvmlDeviceGetHandleByUUID(uuid), f"UUID {uuid}"
        if handle is None:
            handle = nvml.nvmlDeviceGetHandleByIndex(self.index)
        events = (
            getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        where = f"NVML ({how})"
        power = self._power_getter(nvml, handle, where)
        getters = {
            "clock": (lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM), f"{where} SM clock"),
            "mem_clock": (lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM), f"{where} memory clock"),
            "power": power,
            "energy": (
                lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000.0,
                f"{where} total energy consumption (Volta and later)",
            ),
            "temperature": (
                lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
                f"{where} GPU temperature",
            ),
            "utilization": (lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu, f"{where} GPU utilization"),
            "throttle": (lambda: nvml_reasons(events(handle)), f"{where} {events.__name__}"),
        }
        return getters, {}

    def _power_getter(self, nvml, handle, where: str) -> tuple[Getter, str]:
        """The instantaneous power field (``NVML_FI_DEV_POWER_INSTANT``, as mamf-finder reads it) where the
        driver answers it, else ``nvmlDeviceGetPowerUsage`` (a 1 s average on Ampere and later); sets
        ``power_source`` and the window limits (``NVML_MIN_WINDOW_S``) to match."""
        field_id = int(getattr(nvml, "NVML_FI_DEV_POWER_INSTANT", NVML_FI_DEV_POWER_INSTANT))
        get_fields = getattr(nvml, "nvmlDeviceGetFieldValues", None)

        def instant():
            value = nvml_field_value(get_fields(handle, [field_id])[0])
            return None if value is None else value / 1000.0

        why = "this pynvml has no nvmlDeviceGetFieldValues"
        if get_fields is not None:
            try:
                if instant() is not None:
                    self.power_source, self.min_window_s = "instant", dict(NVML_MIN_WINDOW_S["instant"])
                    return instant, f"{where} NVML_FI_DEV_POWER_INSTANT"
                why = "NVML_FI_DEV_POWER_INSTANT not supported by this driver/device"
            except Exception as exc:
                why = f"NVML_FI_DEV_POWER_INSTANT: {one_line(exc, 80)}"
        self.power_source, self.min_window_s = "average_1s", dict(NVML_MIN_WINDOW_S["average_1s"])
        return (lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0, f"{where} power usage (1 s average; {why})")

    def close(self) -> None:
        if self.nvml is not None:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()
            self.nvml = None


# ---- AMD: amdsmi ------------------------------------------------------------------------------------------


def amd_reasons(status) -> tuple[str, ...] | None:
    """Throttling reasons from gpu_metrics' ``indep_throttle_status``: a 64-bit mask (16 bits per group:
    power, current, thermal, other), or a bool where the bindings reduce it to one (amdsmi 7.0); None
    when the device does not report it ("N/A")."""
    if isinstance(status, bool):
        return ("smu_throttle",) if status else ()
    if isinstance(status, int):
        mask = status  # exactly: a float would drop the low bits of a 64-bit mask
    else:
        value = _finite(status)
        if value is None:
            return None
        mask = int(value)
    return tuple(name for shift, name in AMD_THROTTLE_GROUPS if (mask >> shift) & 0xFFFF)


def amd_celsius(value) -> float | None:
    """amdsmi's temperature in °C: some versions give millidegrees (no GPU runs at 1000 °C)."""
    v = _finite(value)
    if v is None:
        return None
    return v / 1000.0 if v >= 1000 else v


# Variables that make torch's device numbers differ from amdsmi's positions (ROCm's GPU isolation docs).
AMD_VISIBILITY_VARIABLES = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")


def pci_address(bdf) -> str:
    """A PCI address as ``dddd:bb:dd.f`` in lower case (a missing domain is 0000)."""
    text = str(bdf).strip().lower()
    return text if text.count(":") == 2 else f"0000:{text}"


class AmdSmiReader(Reader):
    """An AMD GPU through ``amdsmi`` (``accelbench[rocm]``). The processor is found by its HIP index
    (``amdsmi_get_gpu_enumeration_info``'s ``hip_id``: what torch calls ``cuda:N``; amdsmi of ROCm 6.4 and
    later), else by its PCI address (``device_info``'s ``pci_bus_id``, from torch's device properties),
    else by position, but only where nothing reorders the devices: under ``HIP_VISIBLE_DEVICES`` (and the
    other ``AMD_VISIBILITY_VARIABLES``) or with a GPU in a CPX/TPX/DPX compute partition, torch's index is
    not amdsmi's position, so there every sensor is missing with that reason (nulls, never another GPU's
    readings). **Untested on hardware**."""

    source = "amdsmi"

    def __init__(
        self,
        index: int,
        pci_bus_id: str | None = None,
        import_module: Callable = importlib.import_module,
        environ: dict | None = None,
    ):
        super().__init__()
        self.index, self.pci_bus_id = int(index), pci_bus_id
        self._import = import_module
        self.environ = environ
        self.smi = None

    def _handle(self, smi):
        handles = list(smi.amdsmi_get_processor_handles())
        for h in handles:
            with contextlib.suppress(Exception):
                if int(smi.amdsmi_get_gpu_enumeration_info(h)["hip_id"]) == self.index:
                    return h, f"HIP id {self.index}"
        if self.pci_bus_id:
            want = pci_address(self.pci_bus_id)
            for h in handles:
                with contextlib.suppress(Exception):
                    if pci_address(smi.amdsmi_get_gpu_device_bdf(h)) == want:
                        return h, f"PCI {want}"
        environ = os.environ if self.environ is None else self.environ
        reorder = [f"{v}={environ[v]}" for v in AMD_VISIBILITY_VARIABLES if environ.get(v)]
        partitions = set()
        for h in handles:
            with contextlib.suppress(Exception):
                partitions.add(str(smi.amdsmi_get_gpu_compute_partition(h)).upper())
        partitions -= {"SPX", "", "N/A", "NONE"}
        if reorder or partitions:
            why = "; ".join(reorder + [f"compute partition {p}" for p in sorted(partitions)])
            raise SourceUnavailable(
                f"amdsmi: no hip_id and no PCI address matched torch's device {self.index}, and "
                f"matching by position would read another GPU here ({why})"
            )
        if self.index >= len(handles):
            raise SourceUnavailable(
                f"amdsmi lists {len(handles)} GPU(s); torch's device {self.index} is not among them"
            )
        return handles[self.index], f"position {self.index}"

    def sensors(self):
        try:
            smi = self._import("amdsmi")
        except ImportError as exc:
            raise SourceUnavailable(
                f"amdsmi is not importable ({one_line(exc, 80)}): pip install 'accelbench[rocm]' "
                "(amdsmi, matching the ROCm version)"
            ) from None
        smi.amdsmi_init(smi.AmdSmiInitFlags.INIT_AMD_GPUS)
        self.smi = smi
        h, how = self._handle(smi)  # SourceUnavailable: every sensor missing with why
        where = f"amdsmi ({how})"

        def power():
            info = smi.amdsmi_get_power_info(h)
            return _finite(info.get("current_socket_power")) or _finite(info.get("average_socket_power"))

        def energy():
            info = smi.amdsmi_get_energy_count(h)
            raw = info["energy_accumulator"] if "energy_accumulator" in info else info["power"]  # "power" before 6.2
            value = _finite(raw)
            return None if value is None else value * float(info["counter_resolution"]) / 1e6

        def temperature():
            kinds = smi.AmdSmiTemperatureType
            for name in ("HOTSPOT", "EDGE"):  # an older amdsmi has no HOTSPOT: the edge sensor then
                with contextlib.suppress(Exception):
                    kind = getattr(kinds, name)
                    value = amd_celsius(smi.amdsmi_get_temp_metric(h, kind, smi.AmdSmiTemperatureMetric.CURRENT))
                    if value is not None:
                        return value
            return None

        def throttle():
            metrics = smi.amdsmi_get_gpu_metrics_info(h)
            reasons = amd_reasons(metrics.get("indep_throttle_status"))
            return reasons if reasons is not None else amd_reasons(metrics.get("throttle_status"))

        getters = {
            "clock": (
                lambda: _finite(smi.amdsmi_get_clock_info(h, smi.AmdSmiClkType.GFX)["clk"]),
                f"{where} GFX clock",
            ),
            "mem_clock": (
                lambda: _finite(smi.amdsmi_get_clock_info(h, smi.AmdSmiClkType.MEM)["clk"]),
                f"{where} memory clock",
            ),
            "power": (power, f"{where} socket power"),
            "energy": (energy, f"{where} energy accumulator (not in VM guests)"),
            "temperature": (temperature, f"{where} hotspot (else edge) temperature"),
            "utilization": (lambda: _finite(smi.amdsmi_get_gpu_activity(h)["gfx_activity"]), f"{where} GFX activity"),
            "throttle": (throttle, f"{where} gpu_metrics throttle status"),
        }
        # the energy accumulator is a 64-bit counter of the driver: monotonic in practice; a decrease
        # (driver reload) makes the total unknown rather than wrong
        counter = EnergyCounter()
        get_energy = getters["energy"][0]

        def monotonic_energy():
            value = get_energy()
            return None if value is None else counter.update(value)

        getters["energy"] = (monotonic_energy, getters["energy"][1])
        return getters, {}

    def close(self) -> None:
        if self.smi is not None:
            with contextlib.suppress(Exception):
                self.smi.amdsmi_shut_down()
            self.smi = None


# ---------------------------------------------------------------------------------------------------------
# Pure statistics of a window
# ---------------------------------------------------------------------------------------------------------


def clock_halves(clocks_mhz: Sequence[float | None]) -> tuple[float, float] | None:
    """The medians of the first and the second half of a window's clock readings in time order (the
    middle one of an odd count in neither); None from fewer than ``MIN_SETTLE_SAMPLES`` readings."""
    values = [v for v in clocks_mhz if v is not None]
    if len(values) < MIN_SETTLE_SAMPLES:
        return None
    half = len(values) // 2
    return float(median(values[:half])), float(median(values[-half:]))


def clock_settled(clocks_mhz: Sequence[float | None], rel_tol: float = DEFAULT_SETTLE_REL_TOL) -> bool | None:
    """Whether the clock had settled over a window: the medians of the first and the second half of its
    readings (``clock_halves``) lie within ``rel_tol`` of the second half's. None (cannot tell) from fewer
    than ``MIN_SETTLE_SAMPLES`` readings. A clock still ramping up from idle, or sagging as the device
    heats, fails it; steady noise around one level passes."""
    halves = clock_halves(clocks_mhz)
    if halves is None:
        return None
    first, second = halves
    return bool(second > 0 and abs(second - first) <= rel_tol * second)


def settled_from(values: Sequence[float | None], rel_tol: float = DEFAULT_SETTLE_REL_TOL) -> int | None:
    """For a series of per-interval clocks (a soak): the index from which the clock is *settled*, i.e. that
    interval and every later one lie within ``rel_tol`` of the sustained level (the median of the series'
    second half). None when the series has no clock. Intervals before it are the boost (or ramp) phase."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    level = median(known[len(known) // 2 :])
    index = len(values)
    for i in range(len(values) - 1, -1, -1):
        v = values[i]
        if v is not None and abs(v - level) > rel_tol * level:
            break
        index = i
    return index


def energy_of(readings: Sequence[Reading]) -> tuple[float | None, str]:
    """Joules over the readings: the energy counter's difference between the first and the last reading
    that has it, else the trapezoid integral of the power readings over time; (None, "") without either."""
    energies = [(r.t, r.energy_j) for r in readings if r.energy_j is not None]
    if len(energies) >= 2 and energies[-1][0] > energies[0][0]:
        return max(0.0, energies[-1][1] - energies[0][1]), "counter"
    powers = [(r.t, r.power_w) for r in readings if r.power_w is not None]
    if len(powers) >= 2 and powers[-1][0] > powers[0][0]:
        joules = sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(powers, powers[1:]))
        return joules, "power_integral"
    return None, ""


def per_joule(rate_per_s: float | None, energy_j: float | None, duration_s: float | None) -> float | None:
    """Work per joule at a measured rate: the rate divided by the window's mean power (energy / duration).
    None where any is unknown or not positive."""
    rate, energy, duration = _finite(rate_per_s), _finite(energy_j), _finite(duration_s)
    if rate is None or energy is None or duration is None or energy <= 0 or duration <= 0 or rate <= 0:
        return None
    return rate / (energy / duration)


def too_short_for(duration_s: float | None, min_window_s: dict[str, float] | None) -> str | None:
    """The sensors (``;``-joined, sorted) whose reading a window of ``duration_s`` is too short for, from
    the reader's limits; "" when none is; None when the window has no duration."""
    if duration_s is None:
        return None
    return ";".join(sorted(k for k, v in (min_window_s or {}).items() if duration_s < v))


def clock_source(clocks_mhz: Sequence[float | None], nominal: str | None = None, fallback: bool = False) -> str | None:
    """``nominal`` when the clock cannot vary: the reader says so (``Reader.clock_nominal``), or a fallback
    reading (``Reader.clock_fallback``) stayed exactly the same over at least ``MIN_SETTLE_SAMPLES`` readings;
    ``measured`` for any other clock; None without a clock reading."""
    values = [v for v in clocks_mhz if v is not None]
    if not values:
        return None
    if nominal or (fallback and len(values) >= MIN_SETTLE_SAMPLES and max(values) == min(values)):
        return CLOCK_NOMINAL
    return CLOCK_MEASURED


def summarize(
    readings: Sequence[Reading],
    source: str,
    wall_offset: float = 0.0,
    rel_tol: float = DEFAULT_SETTLE_REL_TOL,
    *,
    power_source: str | None = None,
    min_window_s: dict[str, float] | None = None,
    clock_nominal: str | None = None,
    clock_fallback: bool = False,
) -> dict:
    """The columns of one window (``WINDOW_COLUMNS`` + ``WINDOW_EXTRA`` + ``clock_settled``), from its
    readings in time order. A sensor without a reading gives None, never 0. ``power_source`` says what the
    power readings are (NVML: ``instant`` or ``average_1s``); ``telemetry_too_short_for`` lists the sensors
    whose reading the window is shorter than ``min_window_s`` allows (their values are kept, flagged). A nominal
    clock (``clock_source``) gives ``clock_settled`` None: a clock that cannot vary says nothing of settling."""

    def values(attr):
        return [getattr(r, attr) for r in readings if getattr(r, attr) is not None]

    clocks, powers, temps = values("clock_mhz"), values("power_w"), values("temp_c")
    mem, util = values("mem_clock_mhz"), values("util_pct")
    throttles = [r.throttle for r in readings if r.throttle is not None]
    energy, energy_source = energy_of(readings)
    reasons = sorted({x for t in throttles for x in t})
    start, end = (readings[0].t, readings[-1].t) if readings else (None, None)
    return {
        "clock_mhz_median": median(clocks) if clocks else None,
        "clock_mhz_min": min(clocks) if clocks else None,
        "power_w_median": median(powers) if powers else None,
        "temp_c_max": max(temps) if temps else None,
        "energy_j": energy,
        "throttled": bool(reasons) if throttles else None,
        "throttle_reasons": ";".join(reasons) if throttles else None,
        "telemetry_source": source,
        "telemetry_samples": len(readings),
        "mem_clock_mhz_median": median(mem) if mem else None,
        "util_pct_median": median(util) if util else None,
        "energy_source": energy_source or None,
        "telemetry_start_unix_s": None if start is None else start + wall_offset,
        "telemetry_end_unix_s": None if end is None else end + wall_offset,
        "power_source": power_source if powers else None,
        "telemetry_too_short_for": too_short_for(None if start is None else end - start, min_window_s),
        "clock_source": (kind := clock_source([r.clock_mhz for r in readings], clock_nominal, clock_fallback)),
        "clock_settled": None if kind == CLOCK_NOMINAL else clock_settled([r.clock_mhz for r in readings], rel_tol),
        "clock_halves_mhz": clock_halves([r.clock_mhz for r in readings]),
    }


def off_columns(source: str) -> dict:
    """A window's columns when nothing was sampled (telemetry off, or no sensor): every value null."""
    return {
        **dict.fromkeys((*WINDOW_COLUMNS, *WINDOW_EXTRA)),
        "telemetry_source": source,
        "telemetry_samples": 0,
        "clock_settled": None,
        "clock_halves_mhz": None,
    }


# ---------------------------------------------------------------------------------------------------------
# The sampler
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Window:
    """One sampled stretch (a point, a trial, a soak interval): its readings once it has ended."""

    source: str
    wall_offset: float
    rel_tol: float
    readings: list[Reading] = field(default_factory=list)
    sampled: bool = True
    power_source: str | None = None
    min_window_s: dict[str, float] = field(default_factory=dict)
    clock_nominal: str | None = None
    clock_fallback: bool = False

    @property
    def duration_s(self) -> float | None:
        return self.readings[-1].t - self.readings[0].t if len(self.readings) >= 2 else None

    def columns(self) -> dict:
        if not self.sampled or not self.readings:
            return off_columns(self.source)
        return summarize(
            self.readings,
            self.source,
            self.wall_offset,
            self.rel_tol,
            power_source=self.power_source,
            min_window_s=self.min_window_s,
            clock_nominal=self.clock_nominal,
            clock_fallback=self.clock_fallback,
        )


class Sampler:
    """Reads ``reader`` every ``1 / hz`` seconds on a daemon thread while a window is open.

    ``window()`` takes one reading, starts the thread (its first reading one period later), and on exit
    stops it and takes a last reading, so every window has at least two. Every reading is kept
    (``readings``: the device's time series for the stage). Reads are serialized by a lock (the thread
    and the window's edges never read the sensors at once). ``clock``/``wall`` are for tests.
    """

    def __init__(
        self,
        reader: Reader,
        hz: float = DEFAULT_HZ,
        *,
        rel_tol: float = DEFAULT_SETTLE_REL_TOL,
        clock: Callable[[], float] = time.perf_counter,
        wall: Callable[[], float] = time.time,
    ):
        if not hz > 0:
            raise ValueError(f"telemetry.hz: {hz!r} is out of range; allowed: > 0 (0 turns the sampler off)")
        self.reader = reader.open()
        self.period = 1.0 / hz
        self.rel_tol = rel_tol
        self.clock = clock
        self.wall_offset = wall() - clock()  # a reading's time on the wall clock: t + wall_offset
        self.readings: list[Reading] = []
        self.thread_cpu_s = 0.0  # CPU time the sampling thread used (its cost, immune to other load)
        self.window_s = 0.0  # wall time spent inside windows
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def source(self) -> str:
        return self.reader.source

    def sample(self) -> int:
        """Read the sensors now; the reading's index in ``readings``."""
        with self._lock:
            self.readings.append(self.reader.read(self.clock()))
            return len(self.readings) - 1

    def _run(self) -> None:
        # the measurement first: on Linux a thread has its own nice value, and at 19 the scheduler lets a
        # reading wait for a busy core rather than preempt a BLAS thread (every reading keeps its own time)
        with contextlib.suppress(AttributeError, OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        cpu0 = time.thread_time()
        next_t = self.clock() + self.period
        while not self._stop.wait(max(0.0, next_t - self.clock())):
            self.sample()
            next_t += self.period
            if next_t < self.clock():  # fell behind (a long read, a busy machine): no burst to catch up
                next_t = self.clock() + self.period
        self.thread_cpu_s += time.thread_time() - cpu0

    @contextlib.contextmanager
    def window(self):
        w = Window(
            self.source,
            self.wall_offset,
            self.rel_tol,
            power_source=self.reader.power_source,
            min_window_s=dict(self.reader.min_window_s),
            clock_nominal=self.reader.clock_nominal,
            clock_fallback=self.reader.clock_fallback,
        )
        opened = self.clock()
        first = self.sample()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="accelbench-telemetry", daemon=True)
        self._thread.start()
        try:
            yield w
        finally:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.sample()
            self.window_s += self.clock() - opened
            with self._lock:
                w.readings = self.readings[first:]


class DeviceTelemetry:
    """The telemetry of one device in one stage: a ``Sampler`` on the backend's reader, or nothing
    (``telemetry.hz`` 0: source ``off``; a reader with no sensor: its source, every value null).
    ``window()`` yields a ``Window`` whose ``columns()`` go on the row; ``series()`` is the time series."""

    def __init__(
        self,
        reader: Reader | None,
        hz: float,
        *,
        rel_tol: float = DEFAULT_SETTLE_REL_TOL,
        clock: Callable[[], float] = time.perf_counter,
        wall: Callable[[], float] = time.time,
    ):
        self.hz = hz
        self.reader = reader.open() if (reader is not None and hz > 0) else reader
        self.sampler = (
            Sampler(self.reader, hz, rel_tol=rel_tol, clock=clock, wall=wall)
            if self.reader is not None and hz > 0 and self.reader.any
            else None
        )
        self.rel_tol = rel_tol

    @property
    def source(self) -> str:
        if not self.hz > 0:
            return "off"
        return self.reader.source if self.reader is not None else "none"

    @contextlib.contextmanager
    def window(self):
        if self.sampler is None:
            yield Window(self.source, 0.0, self.rel_tol, sampled=False)
            return
        with self.sampler.window() as w:
            yield w

    def status(self) -> tuple[str, str]:
        """(status, why) of this device's series: ok, off (telemetry.hz 0) or no_sensors."""
        if not self.hz > 0:
            return "off", "telemetry.hz is 0: the sampler is off"
        if self.sampler is None:
            why = "; ".join(f"{k}: {v}" for k, v in (self.reader.missing if self.reader else {}).items())
            return "no_sensors", why or "no telemetry reader"
        return "ok", ""

    def series(self, stage: str) -> list[dict]:
        """The device's readings as rows (``SERIES_COLUMNS``): times on the wall clock and since the first
        reading, energy since the first reading; one row with the status when nothing was sampled."""
        status, why = self.status()
        if self.sampler is None or not self.sampler.readings:
            return [
                {
                    "stage": stage,
                    "telemetry_source": self.source,
                    "status": status if status != "ok" else "empty",
                    "status_detail": why or "no window was sampled",
                }
            ]
        readings = self.sampler.readings
        t0 = readings[0].t
        e0 = next((r.energy_j for r in readings if r.energy_j is not None), None)
        return [
            {
                "stage": stage,
                "time_unix_s": r.t + self.sampler.wall_offset,
                "t_s": r.t - t0,
                "clock_mhz": r.clock_mhz,
                "mem_clock_mhz": r.mem_clock_mhz,
                "power_w": r.power_w,
                "temp_c": r.temp_c,
                "util_pct": r.util_pct,
                "energy_j": None if r.energy_j is None or e0 is None else r.energy_j - e0,
                "throttle_reasons": None if r.throttle is None else ";".join(r.throttle),
                "telemetry_source": self.source,
                "status": "ok",
            }
            for r in readings
        ]

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()


def describe(reader: Reader, hz: float) -> dict:
    """What devices.json records for one device: the source and sampling rate, where each sensor is read
    and why each missing one is missing (the reader is opened and closed)."""
    try:
        out = reader.describe()
    finally:
        reader.close()
    return {"hz": hz, **out}
