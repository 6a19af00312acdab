"""A clock that cannot vary (issue 21, item 5): the fixed /proc/cpuinfo "cpu MHz" under a hypervisor, or a
fallback reading that never changes, gives ``clock_source=nominal`` and ``clock_ramp`` null (not False); a
clock that can vary keeps its verdict; the report says so."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from accelbench.measure import telemetry as tm
from accelbench.stages.matmul.measure import point_telemetry
from accelbench.stages.matmul.soak import mark_settled

VM_CPUINFO = (
    "processor\t: 0\ncpu MHz\t\t: 2596.096\nflags\t\t: fpu sse2 avx2 hypervisor\n\n"
    "processor\t: 1\ncpu MHz\t\t: 2596.096\nflags\t\t: fpu sse2 avx2 hypervisor\n\n"
)
METAL_CPUINFO = VM_CPUINFO.replace(" hypervisor", "")


def reader(tmp_path: Path, cpuinfo: str, cpufreq_khz: int | None = None) -> tm.CpuSysfsReader:
    sys_root, proc_root = tmp_path / "sys", tmp_path / "proc"
    (proc_root).mkdir(parents=True, exist_ok=True)
    (proc_root / "cpuinfo").write_text(cpuinfo)
    for c in (0, 1):
        (sys_root / "devices/system/cpu" / f"cpu{c}").mkdir(parents=True, exist_ok=True)
        if cpufreq_khz:
            (sys_root / "devices/system/cpu" / f"cpu{c}" / "cpufreq").mkdir(exist_ok=True)
            (sys_root / "devices/system/cpu" / f"cpu{c}" / "cpufreq" / "scaling_cur_freq").write_text(str(cpufreq_khz))
    psutil = SimpleNamespace(sensors_temperatures=dict, cpu_percent=lambda percpu=False: [50.0, 50.0])
    return tm.CpuSysfsReader(sys_root=sys_root, proc_root=proc_root, cpus=[0, 1], psutil_module=psutil).open()


def window(r: tm.Reader, clocks) -> dict:
    w = tm.Window(
        r.source, 0.0, tm.DEFAULT_SETTLE_REL_TOL, clock_nominal=r.clock_nominal, clock_fallback=r.clock_fallback
    )
    w.readings = [tm.Reading(t=0.1 * i, clock_mhz=c) for i, c in enumerate(clocks)]
    return w.columns()


MEASURED_ROW = {"median_s": 0.01, "tflops": 1.0}


def test_the_fixed_cpuinfo_clock_of_a_vm_is_nominal_and_clock_ramp_null(tmp_path):
    r = reader(tmp_path, VM_CPUINFO)
    assert r.clock_fallback and "hypervisor" in r.clock_nominal
    cols = window(r, [2596.096] * 8)
    assert cols["clock_source"] == "nominal" and cols["clock_settled"] is None
    row = point_telemetry(cols, MEASURED_ROW)
    assert row["clock_ramp"] is None and row["clock_source"] == "nominal"  # null, not False
    assert "clock_ramp" not in (row.get("flags") or "")


def test_a_fallback_reading_that_never_changes_is_nominal_and_one_that_moves_is_measured(tmp_path):
    r = reader(tmp_path, METAL_CPUINFO)
    assert r.clock_fallback and r.clock_nominal is None
    assert window(r, [2596.096] * 8)["clock_source"] == "nominal"
    cols = window(r, [2596.0, 2601.3, 2598.2, 2600.1, 2597.7, 2599.0])
    assert cols["clock_source"] == "measured" and cols["clock_settled"] is True
    assert point_telemetry(cols, MEASURED_ROW)["clock_ramp"] is False
    ramp = window(r, [1200.0, 1300.0, 2500.0, 2600.0, 2600.0, 2600.0])
    assert point_telemetry(ramp, MEASURED_ROW)["clock_ramp"] is True
    assert window(r, [2596.096] * 3)["clock_source"] == "measured"  # too few readings to call it fixed


def test_a_real_frequency_driver_that_holds_still_stays_measured(tmp_path):
    r = reader(tmp_path, VM_CPUINFO.replace(" hypervisor", ""), cpufreq_khz=3_000_000)
    assert "cpufreq" in r.found["clock"] and not r.clock_fallback and r.clock_nominal is None
    cols = window(r, [3000.0] * 8)  # a held clock under load is settled, not nominal
    assert cols["clock_source"] == "measured" and point_telemetry(cols, MEASURED_ROW)["clock_ramp"] is False
    assert window(r, [None, None])["clock_source"] is None  # no clock reading: unknown


def test_a_soak_on_a_nominal_clock_never_says_settled():
    rows = [{"clock_mhz_median": 2596.096, "clock_source": "nominal"} for _ in range(5)]
    mark_settled(rows, 0.03)
    assert [r["clock_settled"] for r in rows] == [None] * 5
    rows = [{"clock_mhz_median": c, "clock_source": "measured"} for c in (1500.0, 2600.0, 2600.0, 2600.0)]
    mark_settled(rows, 0.03)
    assert [r["clock_settled"] for r in rows] == [False, True, True, True]


def test_the_report_says_the_clock_is_nominal(fixtures, tmp_path):
    from accelbench.reporting import html

    built = fixtures("cpu_only")
    agg = tmp_path / "aggregate"
    shutil.copytree(built["aggregate"], agg)
    matmul = pd.read_csv(agg / "matmul.csv")
    matmul["clock_source"] = "nominal"
    matmul["clock_ramp"] = None
    matmul.to_csv(agg / "matmul.csv", index=False)
    ctx = html.build_context(agg, built["plots"])
    texts = [w["text"] for w in ctx["telemetry"]["warnings"]]
    assert any(t.startswith("clock nominal") and "clock_ramp empty" in t for t in texts), texts
    page = html.render(ctx)
    assert "clock nominal: the clock reading cannot vary here" in page
    plain = html.build_context(built["aggregate"], built["plots"])
    assert not any(w["text"].startswith("clock nominal") for w in plain["telemetry"]["warnings"])
