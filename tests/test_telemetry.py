"""The telemetry sampler and its readers (``accelbench.measure.telemetry``): a fake NVML module, a fake
amdsmi module and fake sysfs/procfs trees (RAPL wrap-around, missing and unreadable files) drive the
readers; the pure statistics of a window are checked on known readings; the sampler's thread on a fake
reader. NVML and amdsmi are **untested on hardware**: these tests pin down their logic only.

Nothing here depends on timing except the sampler tests, which only ask for lower bounds far below what
the thread does on an idle machine (a 0.4 s window at 50 Hz should take ~20 readings; at least 3 are
asked), and that the thread is gone after the window.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from accelbench import backends, registry
from accelbench.measure import telemetry as tm

# ------------------------------------------------------------------ a fake NVML (pynvml)


class NVMLError(Exception):
    pass


def fake_nvml(
    *,
    reasons: int = 0x1,
    energy_mj=None,
    power_mw: int = 312_500,
    old_api: bool = False,
    uuids=("GPU-aaaa", "GPU-bbbb"),
    sm_mhz=(1410, 1980),
):
    """A pynvml stand-in with two GPUs. ``energy_mj`` None: the energy counter is unsupported (pre-Volta)."""
    calls = []
    state = {"energy": 1_000_000 if energy_mj is None else energy_mj, "init": 0}

    def handle_by_uuid(uuid):
        calls.append(("uuid", uuid))
        if uuid not in uuids:
            raise NVMLError("Not Found")
        return uuids.index(uuid)

    def energy(h):
        if energy_mj is None:
            raise NVMLError("Not Supported")
        state["energy"] += 5_000  # 5 J per read
        return state["energy"]

    mod = SimpleNamespace(
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        NVML_TEMPERATURE_GPU=0,
        NVMLError=NVMLError,
        calls=calls,
        state=state,
        nvmlInit=lambda: state.__setitem__("init", state["init"] + 1),
        nvmlShutdown=lambda: state.__setitem__("init", state["init"] - 1),
        nvmlDeviceGetHandleByUUID=handle_by_uuid,
        nvmlDeviceGetHandleByIndex=lambda i: (calls.append(("index", i)), i)[1],
        nvmlDeviceGetClockInfo=lambda h, kind: sm_mhz[h] if kind == 1 else 2619,
        nvmlDeviceGetPowerUsage=lambda h: power_mw,
        nvmlDeviceGetTotalEnergyConsumption=energy,
        nvmlDeviceGetTemperature=lambda h, s: 71,
        nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=99, memory=40),
    )
    if old_api:
        mod.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: reasons
    else:
        mod.nvmlDeviceGetCurrentClocksEventReasons = lambda h: reasons
    return mod


def importer(**modules):
    def import_module(name):
        if name in modules:
            return modules[name]
        raise ModuleNotFoundError(f"No module named {name!r}")

    return import_module


def test_nvml_reader_reads_every_sensor_in_its_units():
    nvml = fake_nvml(reasons=0x1, energy_mj=2_000_000)
    r = tm.NvmlReader(1, "bbbb", import_module=importer(pynvml=nvml)).open()
    assert set(r.found) == set(tm.SENSORS) and r.missing == {}
    assert ("uuid", "GPU-bbbb") in nvml.calls  # torch's UUID, with NVML's prefix
    a, b = r.read(0.0), r.read(1.0)
    assert a.clock_mhz == 1980 and a.mem_clock_mhz == 2619 and a.power_w == pytest.approx(312.5)
    assert a.temp_c == 71 and a.util_pct == 99
    assert b.energy_j - a.energy_j == pytest.approx(5.0)  # mJ counter -> J
    assert a.throttle == ()  # gpu_idle is a clock event, not throttling
    r.close()
    assert nvml.state["init"] == 0


def test_planted_nvml_throttle_reason_makes_a_throttled_window():
    nvml = fake_nvml(reasons=0x40 | 0x4 | 0x1, energy_mj=0)  # hw thermal slowdown + sw power cap + idle
    t = tm.DeviceTelemetry(tm.NvmlReader(0, None, import_module=importer(pynvml=nvml)), 50)
    with t.window() as w:
        time.sleep(0.05)
    cols = w.columns()
    assert cols["throttled"] is True and cols["throttle_reasons"] == "hw_thermal;sw_power_cap"
    assert cols["telemetry_source"] == "nvml" and cols["energy_source"] == "counter" and cols["energy_j"] > 0
    assert ("index", 0) in nvml.calls  # no UUID known: by index
    rows = t.series("matmul")
    assert rows and all(r["throttle_reasons"] == "hw_thermal;sw_power_cap" for r in rows)


def test_nvml_missing_energy_counter_is_null_and_energy_comes_from_power():
    nvml = fake_nvml(energy_mj=None, power_mw=200_000)
    r = tm.NvmlReader(0, "not-a-known-uuid", import_module=importer(pynvml=nvml)).open()
    assert "energy" in r.missing and "Not Supported" in r.missing["energy"]
    assert ("index", 0) in nvml.calls  # the UUID was not found: by index
    readings = [r.read(t) for t in (0.0, 0.5, 1.0)]
    assert all(x.energy_j is None for x in readings)
    cols = tm.summarize(readings, "nvml")
    assert cols["energy_source"] == "power_integral" and cols["energy_j"] == pytest.approx(200.0)


def test_older_pynvml_throttle_api_and_missing_library():
    r = tm.NvmlReader(0, import_module=importer(pynvml=fake_nvml(reasons=0x20, old_api=True))).open()
    assert r.read(0).throttle == ("sw_thermal",)
    none = tm.NvmlReader(0, import_module=importer()).open()
    assert set(none.missing) == set(tm.SENSORS) and not none.any
    assert "accelbench[nvidia]" in none.missing["clock"] and "nvidia-ml-py" in none.missing["clock"]


def test_nvml_init_failure_is_every_sensor_missing():
    nvml = fake_nvml()
    nvml.nvmlInit = lambda: (_ for _ in ()).throw(NVMLError("Driver Not Loaded"))
    r = tm.NvmlReader(0, import_module=importer(pynvml=nvml)).open()
    assert not r.any and "Driver Not Loaded" in r.missing["power"]


def test_nvml_reasons_decode_only_throttling_bits():
    assert tm.nvml_reasons(0) == ()
    assert tm.nvml_reasons(0x1 | 0x2 | 0x10 | 0x100) == ()  # idle, app clocks, sync boost, display
    assert tm.nvml_reasons(0x8 | 0x80) == ("hw_slowdown", "hw_power_brake")


# ------------------------------------------------------------------ a fake amdsmi


def fake_amdsmi(
    *, hip_ids=(1, 0), temp=68_000, throttle=(1 << 36), energy_key="energy_accumulator", power="N/A", average=250
):
    """An amdsmi stand-in with two GPUs whose HIP ids are the reverse of their positions."""
    state = {"energy": 10_000, "init": False}

    def energy(h):
        state["energy"] += 1_000  # x 15.3 uJ
        return {energy_key: state["energy"], "counter_resolution": 15.3, "timestamp": 0}

    return SimpleNamespace(
        state=state,
        AmdSmiInitFlags=SimpleNamespace(INIT_AMD_GPUS=2),
        AmdSmiClkType=SimpleNamespace(GFX="gfx", MEM="mem"),
        AmdSmiTemperatureType=SimpleNamespace(HOTSPOT="hotspot", EDGE="edge"),
        AmdSmiTemperatureMetric=SimpleNamespace(CURRENT="current"),
        amdsmi_init=lambda flags: state.__setitem__("init", True),
        amdsmi_shut_down=lambda: state.__setitem__("init", False),
        amdsmi_get_processor_handles=lambda: ["h0", "h1"],
        amdsmi_get_gpu_enumeration_info=lambda h: {"hip_id": hip_ids[int(h[1])]},
        amdsmi_get_clock_info=lambda h, kind: {
            "clk": {"h0": 1700, "h1": 2100}[h] if kind == "gfx" else 1300,
            "min_clk": 500,
            "max_clk": 2100,
        },
        amdsmi_get_power_info=lambda h: {"current_socket_power": power, "average_socket_power": average},
        amdsmi_get_energy_count=energy,
        amdsmi_get_temp_metric=lambda h, kind, metric: temp if kind == "hotspot" else 55,
        amdsmi_get_gpu_activity=lambda h: {"gfx_activity": 100, "umc_activity": 30, "mm_activity": "N/A"},
        amdsmi_get_gpu_metrics_info=lambda h: {"indep_throttle_status": throttle, "throttle_status": False},
    )


def test_amdsmi_reader_finds_the_gpu_by_hip_id_and_converts_units():
    smi = fake_amdsmi()
    r = tm.AmdSmiReader(0, import_module=importer(amdsmi=smi)).open()  # HIP id 0 is the second handle
    assert set(r.found) == set(tm.SENSORS), r.missing
    a, b = r.read(0.0), r.read(1.0)
    assert a.clock_mhz == 2100 and a.mem_clock_mhz == 1300
    assert a.power_w == 250  # current_socket_power "N/A": the average
    assert a.temp_c == 68  # millidegrees read as degrees
    assert b.energy_j - a.energy_j == pytest.approx(1_000 * 15.3 / 1e6)
    assert a.throttle == ("thermal",)  # bit 36: SMU_THROTTLER_TEMP_HOTSPOT
    r.close()
    assert smi.state["init"] is False


def test_amdsmi_old_energy_key_bool_throttle_and_na_values():
    smi = fake_amdsmi(energy_key="power", throttle=True, temp=61)
    r = tm.AmdSmiReader(1, import_module=importer(amdsmi=smi)).open()
    reading = r.read(0.0)
    assert reading.clock_mhz == 1700 and reading.temp_c == 61 and reading.throttle == ("smu_throttle",)
    assert reading.energy_j is not None  # the key before amdsmi 6.2
    smi2 = fake_amdsmi(power="N/A", average="N/A", throttle="N/A")
    smi2.amdsmi_get_gpu_metrics_info = lambda h: {"indep_throttle_status": "N/A", "throttle_status": "N/A"}
    r2 = tm.AmdSmiReader(0, import_module=importer(amdsmi=smi2)).open()
    assert "power" in r2.missing and "throttle" in r2.missing  # "N/A" is a missing sensor, never 0
    assert tm.AmdSmiReader(0, import_module=importer()).open().missing["energy"].startswith("amdsmi is not importable")


def test_amd_throttle_groups():
    assert tm.amd_reasons(0) == ()
    assert tm.amd_reasons((1 << 0) | (1 << 17) | (1 << 57)) == ("power", "current", "other")
    assert tm.amd_reasons("N/A") is None and tm.amd_reasons(False) == ()
    assert tm.amd_celsius(72) == 72 and tm.amd_celsius(72_000) == 72 and tm.amd_celsius("N/A") is None


# ------------------------------------------------------------------ a fake sysfs / procfs tree

CPUINFO = "processor\t: 0\ncpu MHz\t\t: 2600.000\n\nprocessor\t: 1\ncpu MHz\t\t: 2400.000\n\n"


def write(path: Path, text) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(text))


def cpu_tree(tmp_path, *, cpufreq=True, rapl=True, throttle=True, cpus=(0, 1)) -> tuple[Path, Path]:
    sys_root, proc_root = tmp_path / "sys", tmp_path / "proc"
    write(proc_root / "cpuinfo", CPUINFO)
    cpu = sys_root / "devices" / "system" / "cpu"
    for c in cpus:
        write(cpu / f"cpu{c}" / "topology" / "core_id", c)
        if cpufreq:
            write(cpu / f"cpu{c}" / "cpufreq" / "scaling_cur_freq", 3_000_000 + 200_000 * c)  # kHz
        if throttle:
            write(cpu / f"cpu{c}" / "thermal_throttle" / "core_throttle_count", 5)
            write(cpu / f"cpu{c}" / "thermal_throttle" / "package_throttle_count", 2)
    if rapl:
        cap = sys_root / "class" / "powercap"
        for zone, energy in (
            ("intel-rapl:0", 1_000_000),
            ("intel-rapl:1", 2_000_000),
            ("intel-rapl:0:0", 7),
            ("intel-rapl-mmio:0", 9),
        ):
            write(cap / zone / "energy_uj", energy)
            write(cap / zone / "max_energy_range_uj", 262_143_328_850)
    return sys_root, proc_root


class Clock:
    """A fake monotonic clock that moves 0.1 s at every read."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.t += 0.1
        return self.t


def fake_psutil(temps=None):
    return SimpleNamespace(
        sensors_temperatures=lambda: temps or {}, cpu_percent=lambda percpu=False: [90.0, 70.0, 10.0]
    )


def test_cpu_reader_from_cpufreq_rapl_and_thermal_throttle(tmp_path):
    sys_root, proc_root = cpu_tree(tmp_path)
    temps = {
        "coretemp": [SimpleNamespace(label="Package id 0", current=64.0), SimpleNamespace(label="Core 0", current=61.0)]
    }
    now = [100.0]  # a clock that moves only when told (or when the reader waits out its first power interval)
    r = tm.CpuSysfsReader(
        sys_root=sys_root,
        proc_root=proc_root,
        cpus=[0, 1],
        psutil_module=fake_psutil(temps),
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + s),
    ).open()
    assert {"clock", "power", "energy", "temperature", "utilization", "throttle"} <= set(r.found), r.missing
    assert "cpufreq" in r.found["clock"] and "intel-rapl:0, intel-rapl:1" in r.found["energy"]  # packages only
    a = r.read(0.0)
    assert a.clock_mhz == pytest.approx(3100.0)  # mean of 3000 and 3200 MHz
    assert a.temp_c == 64.0 and a.util_pct == pytest.approx(80.0) and a.throttle == ()
    cap = sys_root / "class" / "powercap"
    write(cap / "intel-rapl:0" / "energy_uj", 1_500_000)  # +0.5 J
    write(cap / "intel-rapl:1" / "energy_uj", 2_250_000)  # +0.25 J
    write(sys_root / "devices/system/cpu/cpu1/thermal_throttle/core_throttle_count", 6)  # the kernel throttled
    now[0] += 0.5
    b = r.read(1.0)
    assert b.energy_j - a.energy_j == pytest.approx(0.75)
    assert b.power_w == pytest.approx(0.75 / 0.5)  # the counter's rate since the previous power reading
    assert b.throttle == ("thermal_core",)
    assert r.read(2.0).throttle == ()  # the counter did not move again


def test_rapl_counter_wrap_is_corrected(tmp_path):
    sys_root, proc_root = cpu_tree(tmp_path)
    cap = sys_root / "class" / "powercap"
    max_range = 262_143_328_850
    write(cap / "intel-rapl:0" / "energy_uj", max_range - 400_000)  # 0.4 J before the wrap
    r = tm.CpuSysfsReader(
        sys_root=sys_root,
        proc_root=proc_root,
        cpus=[0, 1],
        psutil_module=fake_psutil(),
        clock=Clock(),
        sleep=lambda s: None,
    ).open()
    a = r.read(0.0)
    write(cap / "intel-rapl:0" / "energy_uj", 600_000)  # wrapped: 0.4 J + 0.6 J
    b = r.read(1.0)
    assert b.energy_j - a.energy_j == pytest.approx(1.0)
    assert b.power_w > 0  # never a negative (or zero) power from a wrap


def test_energy_counter_without_range_gives_up_rather_than_lie():
    c = tm.EnergyCounter(max_range=None)
    assert c.update(100) == 0 and c.update(150) == 50
    assert c.update(20) is None and c.update(30) is None  # wrapped, range unknown: unknown from here on
    w = tm.EnergyCounter(max_range=1000)
    assert w.update(900) == 0 and w.update(100) == 200


def test_missing_files_fall_back_or_say_why(tmp_path):
    sys_root, proc_root = cpu_tree(tmp_path, cpufreq=False, rapl=False, throttle=False)
    r = tm.CpuSysfsReader(sys_root=sys_root, proc_root=proc_root, cpus=[0, 1], psutil_module=fake_psutil()).open()
    assert "/proc/cpuinfo" in r.found["clock"] or "cpuinfo" in r.found["clock"]
    assert r.read(0.0).clock_mhz == pytest.approx(2500.0)  # cpu MHz of processors 0 and 1
    assert "does not exist" in r.missing["energy"] and r.missing["power"] == r.missing["energy"]
    assert "no CPU temperature sensor" in r.missing["temperature"]
    assert "thermal_throttle" in r.missing["throttle"]
    cols = tm.summarize([r.read(t) for t in (0.0, 1.0)], r.source)
    assert cols["clock_mhz_median"] == pytest.approx(2500.0)
    for c in ("power_w_median", "energy_j", "temp_c_max", "throttled", "throttle_reasons"):
        assert cols[c] is None, c  # null, never 0
    write(proc_root / "cpuinfo", "processor\t: 0\n")
    none = tm.CpuSysfsReader(sys_root=sys_root, proc_root=proc_root, cpus=[0], psutil_module=fake_psutil()).open()
    assert "no cpufreq" in none.missing["clock"]


def test_unreadable_rapl_says_root_only(tmp_path, monkeypatch):
    sys_root, proc_root = cpu_tree(tmp_path)
    real_open = open

    def guarded(path, *a, **k):  # as a non-root user sees energy_uj since the CVE-2020-8694 fix
        if str(path).endswith("energy_uj"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr(tm, "open", guarded, raising=False)
    r = tm.CpuSysfsReader(sys_root=sys_root, proc_root=proc_root, cpus=[0, 1], psutil_module=fake_psutil()).open()
    assert "root only" in r.missing["energy"] and "CVE-2020-8694" in r.missing["energy"]
    assert "clock" in r.found


def test_cpuinfo_parser():
    assert tm.cpuinfo_mhz(CPUINFO) == {0: 2600.0, 1: 2400.0}
    assert tm.cpuinfo_mhz("") == {}


# ------------------------------------------------------------------ the statistics of a window


def readings(clocks, *, power=None, energy=None, throttle=None, dt=0.05):
    return [
        tm.Reading(
            t=i * dt,
            clock_mhz=c,
            power_w=None if power is None else power[i],
            energy_j=None if energy is None else energy[i],
            throttle=None if throttle is None else throttle[i],
        )
        for i, c in enumerate(clocks)
    ]


def test_clock_settled_tells_a_ramp_from_a_steady_clock():
    assert tm.clock_settled([1980.0] * 10) is True
    noisy = [1980, 1965, 1995, 1972, 1988, 1979, 1991, 1970]
    assert tm.clock_settled(noisy, 0.03) is True  # noise around one level
    ramp = [1200, 1400, 1600, 1800, 1950, 1980, 1980, 1980]
    assert tm.clock_settled(ramp, 0.03) is False and tm.clock_halves(ramp) == (1500.0, 1980.0)
    sag = [1980] * 5 + [1700] * 5  # thermal sag inside the point
    assert tm.clock_settled(sag, 0.03) is False
    assert tm.clock_settled(ramp, 0.5) is True  # the tolerance is the knob
    assert tm.clock_settled([1980, 1200, 1980]) is None  # too few readings to tell
    assert tm.clock_settled([None] * 8) is None


def test_settled_from_finds_where_the_sustained_level_starts():
    boost = [2100, 2100, 2050, 1990, 1920, 1900, 1905, 1898, 1902, 1900]
    assert tm.settled_from(boost, 0.03) == 4  # 1920 is within 3% of the sustained 1900; 1990 is not
    assert tm.settled_from([1900] * 6, 0.03) == 0
    assert tm.settled_from([None, None], 0.03) is None
    assert tm.settled_from([2100, 1500, 1900, 1900, 1900, 1900], 0.03) == 2


def test_energy_and_efficiency():
    counter = readings([1.0] * 3, energy=[10.0, 11.0, 13.0], power=[99.0] * 3)
    assert tm.energy_of(counter) == (3.0, "counter")  # the counter wins over the power readings
    integral = readings([1.0] * 3, power=[100.0, 100.0, 200.0], dt=1.0)
    assert tm.energy_of(integral) == (pytest.approx(250.0), "power_integral")
    assert tm.energy_of(readings([1.0] * 3)) == (None, "")
    assert tm.per_joule(1000.0, 50.0, 2.0) == pytest.approx(40.0)  # 1000 GFLOP/s at 25 W
    for bad in ((None, 1, 1), (1, None, 1), (1, 1, 0), (1, 0, 1), (float("nan"), 1, 1)):
        assert tm.per_joule(*bad) is None


def test_summarize_takes_medians_extremes_and_the_union_of_reasons():
    rs = readings(
        [1800, 1900, 1950, 1950, 1950],
        power=[300, 320, 340, 330, 335],
        throttle=[(), ("sw_power_cap",), (), ("hw_thermal",), ()],
    )
    cols = tm.summarize(rs, "nvml", wall_offset=1000.0)
    assert cols["clock_mhz_median"] == 1950 and cols["clock_mhz_min"] == 1800 and cols["power_w_median"] == 330
    assert cols["throttled"] is True and cols["throttle_reasons"] == "hw_thermal;sw_power_cap"
    assert cols["telemetry_start_unix_s"] == 1000.0 and cols["telemetry_end_unix_s"] == pytest.approx(1000.2)
    calm = tm.summarize(readings([1950] * 4, throttle=[()] * 4), "nvml")
    assert calm["throttled"] is False and calm["throttle_reasons"] == ""
    assert set(tm.WINDOW_COLUMNS) | set(tm.WINDOW_EXTRA) <= set(cols)


# ------------------------------------------------------------------ the sampler


class CountingReader(tm.Reader):
    source = "fake"

    def __init__(self, throttle=()):
        super().__init__()
        self.reads = 0
        self.throttle = throttle

    def sensors(self):
        def clock():
            self.reads += 1
            return 1500.0

        return {"clock": (clock, "fake clock"), "throttle": (lambda: self.throttle, "fake throttle")}, {}


def test_sampler_reads_on_a_thread_only_inside_windows():
    reader = CountingReader()
    t = tm.DeviceTelemetry(reader, 50)
    before = threading.active_count()
    with t.window() as w:
        assert any(th.name == "accelbench-telemetry" for th in threading.enumerate())
        time.sleep(0.4)
    assert not any(th.name == "accelbench-telemetry" for th in threading.enumerate())
    assert threading.active_count() == before
    assert len(w.readings) >= 3  # ~20 at 50 Hz; the edges alone give 2
    assert t.sampler.window_s >= 0.4 and 0 <= t.sampler.thread_cpu_s < t.sampler.window_s  # its own cost, measured
    idle = reader.reads
    time.sleep(0.1)
    assert reader.reads == idle  # nothing reads between windows
    with t.window() as short:
        pass
    assert len(short.readings) >= 2  # a window shorter than a period still has its two edges
    rows = t.series("amp")
    assert len(rows) == len(w.readings) + len(short.readings)  # every reading, once
    assert rows[0]["t_s"] == 0 and all(r["stage"] == "amp" and r["status"] == "ok" for r in rows)


@pytest.mark.skipif(
    not hasattr(os, "setpriority") or not hasattr(threading, "get_native_id"),
    reason="per-thread nice values are a Linux feature",
)
def test_sampler_thread_yields_to_the_measurement():
    """The sampling thread runs at nice 19 (Linux: per thread), the measuring thread keeps its own priority."""
    seen = {}

    class PriorityReader(CountingReader):
        def sensors(self):
            def clock():
                seen[threading.current_thread().name] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
                return 1500.0

            return {"clock": (clock, "fake clock")}, {}

    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    with tm.DeviceTelemetry(PriorityReader(), 100).window():
        time.sleep(0.1)
    assert seen["accelbench-telemetry"] == 19, seen
    assert seen[threading.current_thread().name] == own == os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_telemetry_off_and_no_sensors():
    off = tm.DeviceTelemetry(CountingReader(), 0)
    with off.window() as w:
        pass
    cols = w.columns()
    assert cols["telemetry_source"] == "off" and all(
        cols[c] is None for c in tm.WINDOW_COLUMNS if c != "telemetry_source"
    )
    assert off.series("matmul")[0]["status"] == "off"
    none = tm.DeviceTelemetry(tm.NullReader("no reader here"), 20)
    with none.window() as w2:
        pass
    assert w2.columns()["telemetry_source"] == "none"
    (row,) = none.series("matmul")
    assert row["status"] == "no_sensors" and "no reader here" in row["status_detail"]
    with pytest.raises(ValueError, match="telemetry.hz"):
        tm.Sampler(CountingReader(), 0)


def test_describe_is_what_devices_json_records():
    d = tm.describe(CountingReader(), 20)
    assert d["source"] == "fake" and d["hz"] == 20 and set(d["found"]) == {"clock", "throttle"}
    assert "power" in d["missing"]


# ------------------------------------------------------------------ the backends choose the reader


@pytest.mark.parametrize("name", backends.NAMES)
def test_every_backend_gives_a_reader_of_its_declared_source(name):
    b = backends.get(name, import_module=importer()) if name != "cpu" else backends.get(name)
    reader = b.telemetry_reader("cpu" if name == "cpu" else f"{b.device_type}:0", {"device": "x"})
    assert reader.source == (b.telemetry or "none")
    if b.telemetry is None:
        assert all(
            name.split()[0].lower() in why.lower() or b.title.lower() in why.lower()
            for why in reader.open().missing.values()
        )


def test_cuda_reader_uses_the_uuid_torch_reports():
    nvml = fake_nvml()
    b = backends.get("cuda", import_module=importer(pynvml=nvml))
    reader = b.telemetry_reader("cuda:1", {"device": "cuda:1", "uuid": "aaaa"}).open()
    assert ("uuid", "GPU-aaaa") in nvml.calls and reader.read(0).clock_mhz == 1410  # handle 0: by UUID, not index 1


def test_registry_columns_are_the_samplers():
    assert set(tm.WINDOW_COLUMNS) <= set(registry.TABLES["matmul"].columns)
    assert set(tm.WINDOW_COLUMNS) <= set(registry.TABLES["amp_trials"].columns)
    assert set(tm.WINDOW_EXTRA) <= set(registry.TABLES["matmul"].extra)
    assert tm.SERIES_COLUMNS == registry.TELEMETRY_SERIES
    for t in ("matmul_soak", "telemetry_matmul", "telemetry_amp"):
        assert registry.TABLES[t].since == "telemetry"


# ------------------------------------------------------------------ packaging


def test_the_gpu_images_install_their_telemetry_library():
    import tomllib

    repo = Path(__file__).resolve().parents[1]
    extras = tomllib.loads((repo / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(d.startswith("nvidia-ml-py") for d in extras["nvidia"])
    assert any(d.startswith("amdsmi") for d in extras["rocm"])
    cuda = (repo / "containers" / "cuda" / "Containerfile").read_text()
    assert "['optional-dependencies']['nvidia']" in cuda and "import pynvml" in cuda
    rocm = (repo / "containers" / "rocm" / "Containerfile").read_text()
    assert "['optional-dependencies']['rocm']" in rocm and "/opt/rocm/share/amd_smi" in rocm
