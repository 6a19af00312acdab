"""Telemetry in the stages: every matmul point and AMP trial measured inside a window of its device's sampler
(planted throttling and a planted clock ramp reach the rows), the sustained mode (``matmul.soak_s``) with a
fake device and clock, and the real CPU path through the matmul CLI (a tiny soak included).

The CPU tests ask only what holds on any Linux machine: the reader's source, at least the two edge
readings per window, and the clock where this machine exposes one (cpufreq or /proc/cpuinfo).
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from accelbench import backends, registry
from accelbench.measure import telemetry as tm
from accelbench.run.io import Checkpoint
from accelbench.stages.amp import measure as amp
from accelbench.stages.matmul.measure import point_telemetry, sweep
from accelbench.stages.matmul.soak import mark_settled, run_soak, soak_rows_for, soak_target
from test_amp import TINY_AMP, run_info_for, stage_for
from test_matmul import FakeKernels, run_cli, settings, small_llc, write_run  # noqa: F401 (small_llc: a fixture)

CPU_CLOCK = "clock" in tm.CpuSysfsReader().open().found  # whether this machine exposes a CPU clock at all


class PlantedTelemetry:
    """A device's telemetry whose every window holds the planted readings (a stand-in for the sampler)."""

    source = "fake"

    def __init__(self, readings):
        self.readings = readings
        self.windows = 0

    @contextlib.contextmanager
    def window(self):
        w = tm.Window(self.source, 1000.0, 0.03)
        self.windows += 1
        yield w
        w.readings = list(self.readings)


def ramp_and_throttle():
    """8 readings over 0.35 s: the clock climbing 1200 -> 1980 MHz, one hw_thermal reading, 14 J used."""
    clocks = [1200, 1500, 1800, 1950, 1980, 1980, 1980, 1980]
    return [
        tm.Reading(t=0.05 * i, clock_mhz=c, power_w=40.0, energy_j=2.0 * i, throttle=("hw_thermal",) if i == 5 else ())
        for i, c in enumerate(clocks)
    ]


def test_a_planted_throttle_and_clock_ramp_reach_the_point_rows(tmp_path):
    telemetry = PlantedTelemetry(ramp_and_throttle())
    k = FakeKernels(unsupported={"float16": "no fp16 here"})
    ck = Checkpoint(tmp_path / "ck.jsonl", ("device", "dtype", "n"))
    rows = sweep(
        ["cpu"],
        ["float32", "float16"],
        [64, 128],
        settings(),
        kernels_for=lambda d: k,
        device_row=lambda d: {"device": d, "config_hash": "h"},
        peak_for=lambda d, dt: (1e6, "x"),
        checkpoint=ck,
        config_hash="h",
        log=lambda s: None,
        telemetry_for=lambda d: telemetry,
    )
    assert telemetry.windows == 4  # one window per point
    f32 = [r for r in rows if r["dtype"] == "float32"]
    for r in f32:
        assert r["throttled"] is True and r["throttle_reasons"] == "hw_thermal"
        assert r["clock_ramp"] is True and r["status"] == "ok" and "clock_ramp" in r["flags"].split(";")
        assert "1650 -> 1980 MHz" in r["status_detail"]  # medians of the halves
        assert r["clock_mhz_median"] == 1965 and r["clock_mhz_min"] == 1200 and r["power_w_median"] == 40
        assert r["energy_j"] == pytest.approx(14.0) and r["energy_source"] == "counter"
        mean_power = 14.0 / 0.35
        assert r["gflop_per_j"] == pytest.approx(r["tflops"] * 1e3 / mean_power)
        assert r["telemetry_source"] == "fake" and r["telemetry_start_unix_s"] == 1000.0
    fp16 = [r for r in rows if r["dtype"] == "float16"]
    assert all(r["status"] == "unsupported" and r["clock_ramp"] is None and r["gflop_per_j"] is None for r in fp16)
    assert all(r["throttled"] is True for r in fp16)  # the window still says what the device was doing
    # the checkpoint keeps the telemetry: a resumed sweep reports it without measuring again
    again = sweep(
        ["cpu"],
        ["float32", "float16"],
        [64, 128],
        settings(),
        kernels_for=lambda d: k,
        device_row=lambda d: {"device": d, "config_hash": "h"},
        peak_for=lambda d, dt: (1e6, "x"),
        checkpoint=Checkpoint(tmp_path / "ck.jsonl", ("device", "dtype", "n")),
        config_hash="h",
        log=lambda s: None,
        telemetry_for=lambda d: telemetry,
    )
    assert telemetry.windows == 4 and [r["throttled"] for r in again] == [True] * 4


def test_point_telemetry_on_a_steady_window_and_without_one():
    steady = [tm.Reading(t=0.05 * i, clock_mhz=1980.0, throttle=()) for i in range(8)]
    cols = tm.summarize(steady, "nvml")
    row = {"median_s": 0.01, "tflops": 500.0, "flags": "", "status_detail": ""}
    out = point_telemetry(cols, row)
    assert out["clock_ramp"] is False and "flags" not in out and out["throttled"] is False
    assert out["gflop_per_j"] is None  # no power, no energy: unknown, not 0
    off = point_telemetry(tm.off_columns("off"), row)
    assert off["clock_ramp"] is None and off["telemetry_source"] == "off"
    assert "clock_settled" not in out and "clock_halves_mhz" not in out  # not columns


def test_sweep_without_telemetry_is_off(tmp_path):
    rows = sweep(
        ["cpu"],
        ["float32"],
        [64],
        settings(),
        kernels_for=lambda d: FakeKernels(),
        device_row=lambda d: {"device": d},
        peak_for=lambda d, dt: (None, "x"),
        checkpoint=Checkpoint(tmp_path / "ck.jsonl", ("device", "dtype", "n")),
        config_hash="h",
        log=lambda s: None,
    )
    assert rows[0]["telemetry_source"] == "off" and rows[0]["clock_mhz_median"] is None


# ------------------------------------------------------------------ AMP trials


def test_amp_trials_carry_their_window_and_a_planted_throttle(monkeypatch, tmp_path):
    def fake_trial(trial, amp_cfg, data, policy, *, backend, threads, steps_out):
        return {
            "backend": trial.backend,
            "device": trial.device,
            "device_name": trial.device_name,
            "workload": trial.workload,
            "mode": trial.mode,
            "seed": trial.seed,
            "status": "ok",
            "samples_per_s": 1000.0,
        }

    monkeypatch.setattr(amp, "run_trial_safely", fake_trial)
    st = stage_for(tmp_path, run_info_for(TINY_AMP | {"workloads": ["mlp"], "seeds": [0]}))
    readings = [
        tm.Reading(t=0.1 * i, clock_mhz=3000.0, power_w=50.0, throttle=("sw_power_cap",) if i else ()) for i in range(5)
    ]
    st.telemetries["cpu"] = PlantedTelemetry(readings)
    _, trials, _ = amp.run_backend(st, log=lambda s: None)
    assert len(trials) == 2
    for t in trials:
        assert t["throttled"] is True and t["throttle_reasons"] == "sw_power_cap" and t["clock_mhz_median"] == 3000
        assert t["energy_source"] == "power_integral" and t["energy_j"] == pytest.approx(20.0)  # 50 W x 0.4 s
        assert t["samples_per_j"] == pytest.approx(1000.0 / 50.0)
    assert amp.trial_telemetry(tm.off_columns("off"), {"status": "ok", "samples_per_s": 5.0})["samples_per_j"] is None


def test_amp_stage_samples_the_real_cpu(monkeypatch, tmp_path):
    def fake_trial(trial, amp_cfg, data, policy, *, backend, threads, steps_out):
        import time

        time.sleep(0.15)
        return {
            "backend": trial.backend,
            "device": trial.device,
            "device_name": trial.device_name,
            "workload": trial.workload,
            "mode": trial.mode,
            "seed": trial.seed,
            "status": "ok",
        }

    monkeypatch.setattr(amp, "run_trial_safely", fake_trial)
    st = stage_for(tmp_path, run_info_for(TINY_AMP | {"workloads": ["mlp"], "seeds": [0]}))
    _, trials, _ = amp.run_backend(st, log=lambda s: None)
    assert all(t["telemetry_source"] == backends.CpuBackend.telemetry and t["telemetry_samples"] >= 2 for t in trials)
    if CPU_CLOCK:
        assert all(t["clock_mhz_median"] > 0 for t in trials)
    series = st.telemetry_rows()
    assert len(series) >= 4 and {r["stage"] for r in series} == {"amp"} and series[0]["run_id"] == "t"


# ------------------------------------------------------------------ the sustained mode


class SoakKernels:
    """A device whose product takes ``call_s`` on a fake clock; it slows down after ``slow_after`` calls."""

    def __init__(self, clock, call_s=0.01, slow_after=None, fail_after=None):
        self.clock, self.call_s, self.slow_after, self.fail_after = clock, call_s, slow_after, fail_after
        self.calls = 0
        self.freed = 0

    @contextlib.contextmanager
    def mode(self, dtype):
        yield

    def soak_step(self, dtype, n):
        def step():
            self.calls += 1
            if self.fail_after is not None and self.calls > self.fail_after:
                raise RuntimeError("CUDA out of memory. Tried to allocate 1 GiB")
            slow = self.slow_after is not None and self.calls > self.slow_after
            self.clock.t += self.call_s * (1.25 if slow else 1.0)

        return step

    def free(self):
        self.freed += 1


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class IntervalTelemetry:
    """A telemetry whose successive windows read the planted clocks, one per window."""

    source = "fake"

    def __init__(self, clocks):
        self.clocks = list(clocks)
        self.i = 0

    @contextlib.contextmanager
    def window(self):
        w = tm.Window(self.source, 0.0, 0.03)
        c = self.clocks[min(self.i, len(self.clocks) - 1)]
        self.i += 1
        yield w
        w.readings = [tm.Reading(t=0.0, clock_mhz=c, power_w=100.0), tm.Reading(t=1.0, clock_mhz=c, power_w=100.0)]


def test_soak_records_intervals_and_where_the_clock_settled():
    clock = FakeClock()
    k = SoakKernels(clock, call_s=0.01, slow_after=250)  # 100 calls per 1 s interval, then 80
    telemetry = IntervalTelemetry([2100, 2000, 1900, 1900, 1905, 1898])
    rows = run_soak(
        k, telemetry, dtype="bfloat16", n=1024, seconds=6.0, interval_s=1.0, clock=clock, log=lambda s: None
    )
    assert [r["interval"] for r in rows] == list(range(6)) and all(r["status"] == "ok" for r in rows)
    assert rows[0]["calls"] == 100 and rows[-1]["calls"] == 80
    flops = 2 * 1024**3
    assert rows[0]["tflops"] == pytest.approx(100 * flops / 1.0 / 1e12, rel=0.02)
    assert rows[-1]["tflops"] == pytest.approx(80 * flops / 1.0 / 1e12, rel=0.02)
    assert [r["clock_settled"] for r in rows] == [False, False, True, True, True, True]
    assert rows[0]["gflop_per_j"] == pytest.approx(rows[0]["tflops"] * 1e3 / 100.0)
    assert rows[-1]["t_s"] == pytest.approx(6.0, abs=0.02)


def test_soak_failure_is_its_last_row():
    clock = FakeClock()
    k = SoakKernels(clock, call_s=0.1, fail_after=25)
    rows = run_soak(
        k,
        IntervalTelemetry([1900]),
        dtype="float16",
        n=256,
        seconds=10.0,
        interval_s=1.0,
        clock=clock,
        log=lambda s: None,
    )
    assert [r["status"] for r in rows] == ["ok", "ok", "oom"] and "out of memory" in rows[-1]["status_detail"]
    assert k.freed == 1


def test_soak_target_is_the_largest_measured_point():
    rows = [
        {"device": "cuda:0", "dtype": "float32", "n": 8192, "tflops": 50.0, "status": "ok"},
        {"device": "cuda:0", "dtype": "bfloat16", "n": 8192, "tflops": 700.0, "status": "ok"},
        {"device": "cuda:0", "dtype": "float16", "n": 16384, "tflops": float("nan"), "status": "oom"},
        {"device": "cuda:0", "dtype": "float16", "n": 8192, "tflops": 900.0, "status": "invalid"},
        {"device": "cuda:1", "dtype": "float32", "n": 16384, "tflops": 40.0, "status": "unstable"},
    ]
    assert soak_target(rows, "cuda:0") == ("bfloat16", 8192)
    assert soak_target(rows, "cuda:1") == ("float32", 16384)
    assert soak_target(rows, "cuda:2") is None


def test_mark_settled_without_a_clock_is_unknown():
    rows = [{"clock_mhz_median": None}, {"clock_mhz_median": None}]
    mark_settled(rows, 0.03)
    assert [r["clock_settled"] for r in rows] == [None, None]


class StubStage:
    def __init__(self, devices, soak_s):
        self.devices = devices
        self.prov = {"run_id": "r"}
        self.backend = backends.get("cpu")
        self.config = {"telemetry": {"settle_rel_tol": 0.03}}
        self.soak_s = soak_s

    def info(self, device):
        return {"name": "Fake CPU"}

    def telemetry(self, device):
        return IntervalTelemetry([1900])


def test_soak_rows_off_skipped_and_run():
    st = StubStage(["cpu"], 0)
    (off,) = soak_rows_for(st, [], {"soak_s": 0}, kernels_for=lambda d: None, log=lambda s: None)
    assert off["status"] == "off" and "soak_s is 0" in off["status_detail"] and off["device"] == "cpu"
    (skipped,) = soak_rows_for(
        st, [{"device": "cpu", "status": "oom"}], {"soak_s": 2}, kernels_for=lambda d: None, log=lambda s: None
    )
    assert skipped["status"] == "skipped"
    asked = {}

    def fake_run(kernels, telemetry, **kw):
        asked.update(kw)
        return [{"interval": 0, "status": "ok"}]

    rows = soak_rows_for(
        st,
        [{"device": "cpu", "dtype": "float32", "n": 512, "tflops": 0.1, "status": "ok"}],
        {"soak_s": 3, "soak_interval_s": 0.5},
        kernels_for=lambda d: "k",
        run=fake_run,
        log=lambda s: None,
    )
    assert rows == [
        {"run_id": "r", "backend": "cpu", "device": "cpu", "device_name": "Fake CPU", "interval": 0, "status": "ok"}
    ]
    assert asked["dtype"] == "float32" and asked["n"] == 512 and asked["seconds"] == 3 and asked["interval_s"] == 0.5


# ------------------------------------------------------------------ the real CPU path, through the CLI


def test_cli_writes_telemetry_columns_series_and_a_soak(tmp_path, small_llc):  # noqa: F811 (the fixture)
    run = write_run(
        tmp_path,
        {
            "sizes": [64, 128],
            "dtypes": ["float32"],
            "min_run_time_s": 0.05,
            "fp8": False,
            "soak_s": 0.6,
            "soak_interval_s": 0.2,
        },
    )
    assert run_cli("--run-file", run, "--backend", "cpu", "--threads", "1", "--out-dir", str(tmp_path)) == 0
    df = pd.read_csv(tmp_path / "matmul_cpu.csv")
    assert (df["telemetry_source"] == "cpu_sysfs").all() and (df["telemetry_samples"] >= 2).all()
    if CPU_CLOCK:
        assert (df["clock_mhz_median"] > 0).all() and (df["clock_mhz_min"] <= df["clock_mhz_median"]).all()
    energy_missing = "energy" in tm.CpuSysfsReader().open().missing
    assert df["energy_j"].isna().all() == energy_missing and df["gflop_per_j"].isna().all() == energy_missing
    soak = pd.read_csv(tmp_path / "matmul_soak_cpu.csv")
    ok = soak[soak["status"] == "ok"]
    assert len(ok) >= 3 and (ok["tflops"] > 0).all() and (ok["n"] == 128).all() and (ok["dtype"] == "float32").all()
    assert list(ok["interval"]) == list(range(len(ok))) and (ok["interval_s"] >= 0.2).all()
    series = pd.read_csv(tmp_path / "telemetry_matmul_cpu.csv")
    assert (series["status"] == "ok").all() and len(series) >= 2 * len(df) + 2 * len(ok)
    assert series["time_unix_s"].is_monotonic_increasing and (series["stage"] == "matmul").all()
    # the windows of points and soak intervals lie on the series' time line
    lo, hi = series["time_unix_s"].min(), series["time_unix_s"].max()
    assert (df["telemetry_start_unix_s"] >= lo).all() and (ok["telemetry_end_unix_s"] <= hi + 1e-6).all()


def test_cli_absent_backend_writes_absent_soak_and_series(tmp_path):
    run = write_run(tmp_path, {"sizes": [64]})
    assert run_cli("--run-file", run, "--backend", "cuda", "--threads", "1", "--out-dir", str(tmp_path)) == 0
    for table in ("matmul_soak", "telemetry_matmul"):
        df = pd.read_csv(tmp_path / registry.TABLES[table].filename("cuda"))
        assert len(df) == 1 and df.loc[0, "status"] == "absent", table


def test_cli_telemetry_off(tmp_path, small_llc):  # noqa: F811 (the fixture)
    path = tmp_path / "run.json"
    info = json.loads(
        Path(
            write_run(tmp_path, {"sizes": [64], "dtypes": ["float32"], "min_run_time_s": 0.02, "fp8": False})
        ).read_text()
    )
    info["config"]["telemetry"]["hz"] = 0
    path.write_text(json.dumps(info))
    assert run_cli("--run-file", str(path), "--backend", "cpu", "--threads", "1", "--out-dir", str(tmp_path)) == 0
    df = pd.read_csv(tmp_path / "matmul_cpu.csv")
    assert (df["telemetry_source"] == "off").all() and df["clock_mhz_median"].isna().all()
    series = pd.read_csv(tmp_path / "telemetry_matmul_cpu.csv")
    assert list(series["status"]) == ["off"]
    assert math.isnan(series.loc[0, "time_unix_s"])
