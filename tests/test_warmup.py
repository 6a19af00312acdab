"""Warm-up: the stability rule on scripted times, then the real loop and CLI on the CPU."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from accelbench import columns, warmup
from accelbench.config import config_hash, with_defaults
from accelbench.warmup import run_until_stable, stable_window


def scripted(times):
    it = iter(times)
    return lambda: next(it)


@pytest.mark.parametrize("times,window,tol,expected", [
    ([1.0, 1.0, 1.0], 3, 0.05, True),
    ([1.0, 1.0], 3, 0.05, False),             # not enough calls yet
    ([9.0, 1.0, 1.04, 0.96], 3, 0.05, True),  # only the last window counts
    ([1.0, 1.0, 1.1], 3, 0.05, False),
    ([1.0, 1.0, 1.1], 3, 0.11, True),
    ([0.0, 0.0, 0.0], 3, 0.05, False),        # zero time: nothing was measured
])
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
    rows = warmup.device_rows("cpu", cfg, threads=3, make_call=lambda d, n, s: scripted([4.0, 2.0, 1.0, 1.0]))
    assert [r["iter"] for r in rows] == [0, 1, 2, 3]
    assert [r["iter_s"] for r in rows] == [4.0, 2.0, 1.0, 1.0]
    assert {r["cold_s"] for r in rows} == {4.0} and {r["stable_at_iter"] for r in rows} == {2}
    assert {r["threads"] for r in rows} == {3} and {r["n"] for r in rows} == {8}

    def broken(d, n, s):
        raise RuntimeError("no device")

    rows = warmup.device_rows("cuda:0", cfg, threads=1, make_call=broken)
    assert len(rows) == 1 and rows[0]["status"] == "error" and "no device" in rows[0]["status_detail"]


def test_real_call_on_cpu_times_a_product():
    call = warmup.synced_call("cpu", 32)
    assert all(call() > 0 for _ in range(3))


def write_run(tmp_path, warm_cfg) -> str:
    cfg = with_defaults({"run": "w", "warmup": warm_cfg})
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"run": "w", "config": cfg, "config_hash": config_hash(cfg), "git_commit": "abc",
                                "accelbench_version": "0"}))
    return str(path)


def test_cli_on_cpu(tmp_path):
    from accelbench.cli import main

    run = write_run(tmp_path, {"n": 64, "max_iters": 40, "window": 3, "rel_tol": 0.5})
    out = tmp_path / "warmup_cpu.csv"
    assert main(["warmup", "--run-file", run, "--backend", "cpu", "--threads", "1", "--out", str(out)]) == 0
    df = pd.read_csv(out)
    assert list(df.columns[: len(columns.WARMUP)]) == columns.WARMUP
    assert 3 <= len(df) <= 40 and list(df["iter"]) == list(range(len(df)))
    assert (df["iter_s"] > 0).all() and (df["cold_s"] == df.loc[0, "iter_s"]).all()
    assert (df["threads"] == 1).all() and (df["device"] == "cpu").all() and (df["n"] == 64).all()
    assert set(df["status"]) <= {"ok", "unstable"}
    if df.loc[0, "status"] == "ok":
        s = int(df.loc[0, "stable_at_iter"])
        assert s == len(df) - 3
        assert df.loc[0, "warm_s"] == pytest.approx(df["iter_s"].iloc[s:].median())


def test_cli_absent_backend(tmp_path):
    from accelbench.cli import main

    run = write_run(tmp_path, {"n": 64})
    out = tmp_path / "w.csv"
    assert main(["warmup", "--run-file", run, "--backend", "xla", "--threads", "1", "--out", str(out)]) == 0
    df = pd.read_csv(out)
    assert len(df) == 1 and df.loc[0, "status"] == "absent" and "xla" in df.loc[0, "status_detail"]
