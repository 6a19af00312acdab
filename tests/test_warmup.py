"""Warm-up: the stability rule on scripted times, then the real loop and CLI on the CPU."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from accelbench import backends, registry
from accelbench.measure.stability import run_until_stable, stable_window, synced_call, warm_device
from accelbench.run.config import config_hash, with_defaults
from accelbench.stages.warmup import measure as warmup

CPU = backends.get("cpu")


def scripted(times):
    it = iter(times)
    return lambda: next(it)


@pytest.mark.parametrize(
    "times,window,tol,expected",
    [
        ([1.0, 1.0, 1.0], 3, 0.05, True),
        ([1.0, 1.0], 3, 0.05, False),  # not enough calls yet
        ([9.0, 1.0, 1.04, 0.96], 3, 0.05, True),  # only the last window counts
        ([1.0, 1.0, 1.1], 3, 0.05, False),
        ([1.0, 1.0, 1.1], 3, 0.11, True),
        ([0.0, 0.0, 0.0], 3, 0.05, False),  # zero time: nothing was measured
    ],
)
def test_stable_window(times, window, tol, expected):
    assert stable_window(times, window, tol) is expected


def test_cold_then_warm():
    r = run_until_stable(scripted([5.0, 3.0, 2.0, 1.0, 1.02, 0.99, 7.0]), window=3, rel_tol=0.05, max_iters=100)
    assert r["status"] == "ok"
    assert r["times_s"] == [5.0, 3.0, 2.0, 1.0, 1.02, 0.99]  # stops as soon as stable
    assert r["cold_s"] == 5.0 and r["warm_s"] == 1.0 and r["stable_at_iter"] == 3


def test_never_stable_stops_at_max_iters():
    r = run_until_stable(scripted([1.0, 2.0] * 50), window=4, rel_tol=0.05, max_iters=10)
    assert r["status"] == "unstable" and r["stable_at_iter"] == -1 and len(r["times_s"]) == 10
    assert r["warm_s"] == 1.5


def test_device_rows_one_per_call_and_error_row():
    cfg = {"n": 8, "window": 2, "rel_tol": 0.1, "max_iters": 20}
    rows = warmup.device_rows(CPU, "cpu", cfg, threads=3, make_call=lambda b, d, n, s: scripted([4.0, 2.0, 1.0, 1.0]))
    assert [r["iter"] for r in rows] == [0, 1, 2, 3]
    assert [r["iter_s"] for r in rows] == [4.0, 2.0, 1.0, 1.0]
    assert {r["cold_s"] for r in rows} == {4.0} and {r["stable_at_iter"] for r in rows} == {2}
    assert {r["threads"] for r in rows} == {3} and {r["n"] for r in rows} == {8}

    def broken(b, d, n, s):
        raise RuntimeError("no device")

    rows = warmup.device_rows(backends.get("cuda"), "cuda:0", cfg, threads=1, make_call=broken)
    assert len(rows) == 1 and rows[0]["status"] == "error" and "no device" in rows[0]["status_detail"]


def test_real_call_on_cpu_times_a_product():
    call = synced_call(CPU, "cpu", 32)
    assert all(call() > 0 for _ in range(3))


def write_run(tmp_path, warm_cfg) -> str:
    cfg = with_defaults({"run": "w", "warmup": warm_cfg})
    path = tmp_path / "run.json"
    path.write_text(
        json.dumps(
            {"run": "w", "config": cfg, "config_hash": config_hash(cfg), "git_commit": "abc", "accelbench_version": "0"}
        )
    )
    return str(path)


def test_cli_on_cpu(tmp_path):
    from accelbench.cli import main

    run = write_run(tmp_path, {"n": 64, "max_iters": 40, "window": 3, "rel_tol": 0.5})
    out = tmp_path / "warmup_cpu.csv"
    assert main(["warmup", "--run-file", run, "--backend", "cpu", "--threads", "1", "--out-dir", str(tmp_path)]) == 0
    df = pd.read_csv(out)
    assert list(df.columns[: len(list(registry.TABLES["warmup"].columns))]) == list(registry.TABLES["warmup"].columns)
    assert 3 <= len(df) <= 40 and list(df["iter"]) == list(range(len(df)))
    assert (df["iter_s"] > 0).all() and (df["cold_s"] == df.loc[0, "iter_s"]).all()
    assert (df["threads"] == 1).all() and (df["device"] == "cpu").all() and (df["n"] == 64).all()
    assert set(df["status"]) <= {"ok", "unstable"}
    assert (df["method_version"] == registry.STAGES["warmup"].method_version).all()
    if df.loc[0, "status"] == "ok":
        s = int(df.loc[0, "stable_at_iter"])
        assert s == len(df) - 3
        assert df.loc[0, "warm_s"] == pytest.approx(df["iter_s"].iloc[s:].median())


def test_cli_absent_backend(tmp_path):
    from accelbench.cli import main

    run = write_run(tmp_path, {"n": 64})
    out = tmp_path / registry.TABLES["warmup"].filename("xla")
    assert main(["warmup", "--run-file", run, "--backend", "xla", "--threads", "1", "--out-dir", str(tmp_path)]) == 0
    df = pd.read_csv(out)
    assert len(df) == 1 and df.loc[0, "status"] == "absent" and "xla" in df.loc[0, "status_detail"]
    assert df.loc[0, "method_version"] == registry.STAGES["warmup"].method_version


# ---- the measuring stages warm their devices with the same rule (measure.stability.warm_device)


@pytest.mark.parametrize("k,window", [(0, 2), (1, 3), (4, 3), (7, 5)])
def test_warm_device_uses_the_warmup_stage_rule(k, window):
    """k cold calls, then a steady time: the first stable window is calls k .. k + window - 1 (0-based), so
    run_until_stable stops after k + window calls with stable_at_iter == k; warm_device makes exactly those
    calls, and the warmup stage's per-call rows are the same calls."""
    cold = [10.0 * (k - i) + 5.0 for i in range(k)]  # each far from the steady 1.0 and from each other
    times = cold + [1.0] * (window + 10)
    cfg = {"n": 8, "window": window, "rel_tol": 0.05, "max_iters": 100}

    def make_call(backend, device, n, seed):
        assert (backend, device, n) == (CPU, "cpu", 8)
        return scripted(times)

    w = warm_device(CPU, "cpu", cfg, make_call=make_call)
    r = run_until_stable(scripted(times), window=window, rel_tol=0.05, max_iters=100)
    rows = warmup.device_rows(CPU, "cpu", cfg, threads=1, make_call=make_call)
    assert r["stable_at_iter"] == k and len(r["times_s"]) == k + window
    assert w.status == "ok" and w.calls == k + window == len(rows)
    assert w.warm_s == r["warm_s"] == rows[0]["warm_s"] == 1.0
    assert {row["stable_at_iter"] for row in rows} == {w.calls - window}
    assert w.seconds > 0
    assert list(w.columns()) == list(registry.DEVICE_WARMUP)
    assert w.columns() == {
        "device_warmup_s": w.seconds,
        "device_warmup_calls": k + window,
        "device_warmup_status": "ok",
    }


def test_warm_device_never_stable_and_failing():
    cfg = {"n": 8, "window": 4, "rel_tol": 0.05, "max_iters": 10}
    alternating = [1.0, 2.0] * 50
    w = warm_device(CPU, "cpu", cfg, make_call=lambda b, d, n, s: scripted(alternating))
    rows = warmup.device_rows(CPU, "cpu", cfg, threads=1, make_call=lambda b, d, n, s: scripted(alternating))
    assert w.status == "unstable" == rows[0]["status"] and w.calls == 10 == len(rows)
    assert w.warm_s == 1.5

    def broken(b, d, n, s):
        raise RuntimeError("no device here")

    w = warm_device(backends.get("cuda"), "cuda:0", cfg, make_call=broken)
    assert w.status == "error" and w.calls == 0 and "no device here" in w.detail
    assert "error" in w.describe("cuda:0") and "no device here" in w.describe("cuda:0")


def test_stage_start_warms_each_device_once_with_the_run_config(tmp_path, monkeypatch):
    from accelbench.stages import common

    warm_cfg = {"n": 16, "max_iters": 30, "window": 3, "rel_tol": 0.5}
    run = write_run(tmp_path, warm_cfg)
    seen = []
    real = common.warm_device

    def spy(backend, device, cfg, seed=0):
        seen.append((device, cfg))
        return real(backend, device, cfg, seed)

    monkeypatch.setattr(common, "warm_device", spy)
    st = common.start("matmul", run, "cpu", 1)
    logged = []
    first = st.warm("cpu", log=logged.append)
    assert st.warm("cpu", log=logged.append) is first  # once per device and process
    assert [d for d, _ in seen] == ["cpu"] and seen[0][1] == st.config["warmup"]
    assert seen[0][1]["n"] == 16 and seen[0][1]["window"] == 3
    assert first.status in ("ok", "unstable") and 3 <= first.calls <= 30 and first.seconds > 0
    assert len(logged) == 1 and "warm-up cpu" in logged[0]
    row = st.device_row("cpu")
    assert row["device_warmup_calls"] == first.calls and row["method_version"] == registry.method_version("matmul")
