"""The history store and ``accelbench history`` (issue 21, item 3): a run's medians round-trip through the store,
adding a run twice is a no-op, a kill -9 in the middle of a write and two writers at once leave a sound store, a
planted step is found at the right run, ``--check``'s exit codes and bad-input lines, ``measured_spread``."""

from __future__ import annotations

import importlib.util
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from accelbench import registry
from accelbench.cli import main
from accelbench.measure import samples as sample_table
from accelbench.reporting import history as H
from accelbench.reporting import history_store as HS
from fixture_runs import write_fixture_results

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("scale_report", REPO / "bench" / "scale_report.py")
scale_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scale_report)


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    results = tmp_path_factory.mktemp("history-source") / "results"
    write_fixture_results(results, ("cpu",))
    return results / "laptop-cpu"


def series_runs(source: Path, results: Path, factors, start: int = 0) -> list[Path]:
    """Copies of the source run, one per factor (every compared median times it), a day apart."""
    from datetime import datetime, timedelta, timezone

    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    return [
        scale_report.copy_run(source, results, f"night-{start + i:03d}", f, t0 + timedelta(days=start + i))
        for i, f in enumerate(factors)
    ]


def some_point(table_name: str | None = None):
    """A compared table that the fixture's CPU run has, and its median column."""
    name = table_name or next(n for n, t in registry.TABLES.items() if t.compare and not t.compare.last_of)
    return name, registry.TABLES[name].compare.median


# ---- the store ------------------------------------------------------------------------------------------------


def test_round_trip_keeps_each_points_run_median(source, tmp_path):
    store = tmp_path / "h.duckdb"
    run, points = H.run_record(source)
    assert H.add_run(store, source) is True
    back = HS.read_points(store)
    assert len(back) == len(points) > 0
    assert set(back["run_id"]) == {run["run_id"]} and set(back["tbl"]) == set(points["tbl"])
    table, median = some_point()
    csv = pd.read_csv(source / registry.TABLES[table].filename("cpu"))
    csv = csv[csv["device"].notna()]
    stored = back[back["tbl"] == table].set_index("point")["median_s"]
    for _, row in csv.iterrows():
        expect = row[median]
        got = stored.get(sample_table.point_key(table, row))
        if pd.notna(expect) and expect > 0:
            assert got == pytest.approx(expect, rel=1e-12)
    # the testbed: host, device model, config hash and versions, and its hash
    first = back.iloc[0]
    assert first["host"] == run["host"] and first["config_hash"] == run["config_hash"] and first["device_name"]
    assert first["testbed"] == HS.testbed_id(first)
    assert HS.read_runs(store)["run_id"].tolist() == [run["run_id"]]


def test_adding_a_run_twice_is_a_no_op(source, tmp_path, capsys):
    store = tmp_path / "h.duckdb"
    assert main(["history", "add", str(source), "--store", str(store)]) == 0
    n = len(HS.read_points(store))
    assert main(["history", "add", str(source), "--store", str(store), "--receipt", str(tmp_path / "r.json")]) == 0
    assert "already in the store" in capsys.readouterr().out
    assert len(HS.read_points(store)) == n and len(HS.read_runs(store)) == 1
    assert '"added": false' in (tmp_path / "r.json").read_text()


def test_add_refuses_a_damaged_run_before_writing(source, tmp_path, capsys):
    bad = scale_report.copy_run(source, tmp_path / "results", "broken")
    table, _ = some_point()
    path = bad / registry.TABLES[table].filename("cpu")
    path.write_text(path.read_text()[:-30])  # cut short: no final line end
    store = tmp_path / "h.duckdb"
    assert main(["history", "add", str(source), str(bad), "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "truncated" in err[0]
    assert not store.exists()  # every run checked first: nothing written
    assert main(["history", "add", str(tmp_path / "nowhere"), "--store", str(store)]) == 2
    assert "not a run folder" in capsys.readouterr().err and not store.exists()


KILL_SCRIPT = """
import sys, time
from pathlib import Path
from accelbench.reporting import history as H, history_store as HS
original = HS._insert_points
def slow(con, points):
    original(con, points)          # the rows are written inside the open transaction ...
    Path(sys.argv[3]).write_text("inside")
    time.sleep(float(sys.argv[4]))  # ... and the commit waits
HS._insert_points = slow
H.add_run(sys.argv[1], sys.argv[2])
print("done")
"""


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "writer.py"
    path.write_text(textwrap.dedent(KILL_SCRIPT))
    return path


def _env():
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))


@pytest.mark.slow  # subprocesses
def test_kill_9_in_the_middle_of_a_write_leaves_the_store_sound(source, tmp_path):
    store = tmp_path / "h.duckdb"
    first, second = series_runs(source, tmp_path / "results", [1.0, 1.0])
    H.add_run(store, first)
    flag = tmp_path / "inside"
    proc = subprocess.Popen(
        [sys.executable, str(_script(tmp_path)), str(store), str(second), str(flag), "60"],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not flag.exists():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the writer never reached its transaction"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    # reopened: the first run whole, nothing of the killed write
    assert HS.read_runs(store)["run_id"].tolist() == ["night-000"]
    assert set(HS.read_points(store)["run_id"]) == {"night-000"}
    assert H.add_run(store, second) is True  # and the lock is free again
    assert sorted(HS.read_runs(store)["run_id"]) == ["night-000", "night-001"]


@pytest.mark.slow  # subprocesses
def test_two_runs_finishing_at_once_both_land(source, tmp_path):
    store = tmp_path / "h.duckdb"
    a, b = series_runs(source, tmp_path / "results", [1.0, 1.1])
    script = _script(tmp_path)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(store), str(run), str(tmp_path / f"in-{run.name}"), "1.5"],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for run in (a, b)
    ]
    seen = set()
    while any(p.poll() is None for p in procs):  # a reader meanwhile (aggregate, the report) waits, never fails
        if any((tmp_path / f"in-{run.name}").exists() for run in (a, b)):  # a writer is inside its transaction
            seen |= set(HS.read_runs(store)["run_id"])
        time.sleep(0.1)
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and b"done" in out, err.decode()
    runs = HS.read_runs(store)
    assert sorted(runs["run_id"]) == ["night-000", "night-001"]
    points = HS.read_points(store)
    assert points.groupby("run_id").size().nunique() == 1  # each run whole


# ---- change points ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n, at, sd, step", [(20, 12, 0.02, 1.15), (30, 9, 0.01, 0.85), (400, 370, 0.02, 1.2), (1000, 600, 0.02, 1.12)]
)
def test_a_planted_step_is_found_at_its_run(n, at, sd, step):
    rng = np.random.default_rng(n)
    y = rng.normal(0, sd, n)
    y[at:] += math.log(step)
    assert HS.change_points(y) == [at]


def test_no_change_point_in_noise_and_a_small_step_is_merged_away():
    rng = np.random.default_rng(7)
    found = sum(bool(HS.change_points(rng.normal(0, 0.02, 30))) for _ in range(100))
    assert found <= 10, found  # false change points in pure noise (sd 2%): at most 1 series in 10
    y = rng.normal(0, 0.003, 30)
    y[15:] += math.log(1.03)  # real, but under min_effect (5%)
    assert HS.change_points(y) == [] and HS.change_points(y, min_effect=0.01) == [15]


# ---- the command: --check and its bad input ----------------------------------------------------------------------


def _noisy(n: int, seed: int, sd: float = 0.01) -> list[float]:
    return list(np.exp(np.random.default_rng(seed).normal(0, sd, n)))


def test_check_finds_the_planted_slowdown_at_the_right_run(source, tmp_path, capsys):
    results = tmp_path / "results"
    factors = _noisy(8, 1) + [1.15 * f for f in _noisy(6, 2)]
    runs = series_runs(source, results, factors)
    store = results / registry.HISTORY_FILE
    assert main(["history", "add", *map(str, runs), "--store", str(store)]) == 0
    capsys.readouterr()
    assert main(["history", "--store", str(store), "--check"]) == 1
    out = capsys.readouterr().out
    assert "slower" in out and "since run night-008" in out and "<- change point +" in out
    # --recent: the change point is 6 runs back; counted within the last 6, not within the last 5
    assert main(["history", "--store", str(store), "--check", "--recent", "6"]) == 1
    assert main(["history", "--store", str(store), "--check", "--recent", "5"]) == 0
    assert main(["history", "--store", str(store), "--check", "--recent", "-1"]) == 2
    # filtered to one table, and a min_effect above the step: no verdict of slower
    table, _ = some_point()
    assert main(["history", "--store", str(store), "--check", "--table", table, "--min-effect", "0.3"]) == 0
    # a speed-up is not a failure
    faster = tmp_path / "faster"
    runs = series_runs(source, faster, _noisy(8, 3) + [0.8 * f for f in _noisy(6, 4)])
    assert main(["history", "add", *map(str, runs), "--store", str(faster / "h.duckdb")]) == 0
    capsys.readouterr()
    assert main(["history", "--store", str(faster / "h.duckdb"), "--check"]) == 0
    assert " 0 slower" in capsys.readouterr().out


def test_check_bad_input_is_one_line_exit_2_nothing_written(source, tmp_path, capsys):
    missing = tmp_path / "none.duckdb"
    assert main(["history", "--check", "--store", str(missing)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no history store" in err[0] and str(missing) in err[0]
    assert not missing.exists()
    empty = tmp_path / "empty.duckdb"
    with HS._writer(empty):
        pass  # the schema, no run
    assert main(["history", "--check", "--store", str(empty)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "empty history (no run)" in err[0]
    H.add_run(empty, source)
    assert main(["history", "--check", "--store", str(empty), "--match", "no-such-point"]) == 2
    assert "no point matches the filters" in capsys.readouterr().err
    assert main(["history", "--check", "--store", str(empty), "--table", "nope"]) == 2
    err = capsys.readouterr().err
    assert "--table: 'nope'" in err and "allowed:" in err
    assert main(["history", "--check", "--store", str(empty), "--min-effect", "5"]) == 2
    assert "--min-effect" in capsys.readouterr().err
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(b"not a database at all" * 100)
    assert main(["history", "--store", str(junk)]) == 2
    assert "not a readable history store" in capsys.readouterr().err
    # one run: a series too short to hold a change point is "same", and says so
    assert main(["history", "--check", "--store", str(empty)]) == 0
    assert "too short to hold a change point" in capsys.readouterr().out


# ---- measured_spread --------------------------------------------------------------------------------------------


def test_measured_spread_is_the_sd_of_log_run_medians_since_the_last_change_point(source, tmp_path):
    results = tmp_path / "results"
    before, after = _noisy(6, 11, 0.01), _noisy(5, 12, 0.02)
    runs = series_runs(source, results, before + [1.3 * f for f in after])
    store = results / registry.HISTORY_FILE
    HS.add_records(store, [H.run_record(r) for r in runs])
    table, _ = some_point()
    row = pd.read_csv(source / registry.TABLES[table].filename("cpu")).query("status == 'ok'").iloc[0]
    run, _ = H.run_record(source)
    testbed = {"host": run["host"], "config_hash": run["config_hash"], "device_name": row["device_name"]}
    point = {"table": table, "backend": "cpu", "device": row["device"], "point": sample_table.point_key(table, row)}
    sigma, n, where = H.measured_spread(store, testbed, point)
    assert n == 5 and "since a change point" in where and "night-006..night-010" in where
    assert sigma == pytest.approx(np.std(np.log(after), ddof=1), rel=1e-6)
    # leaving out runs (the ones being compared): 4 left; 2 left is too few
    assert H.measured_spread(store, testbed, point, exclude=["night-010"])[1] == 4
    assert H.measured_spread(store, testbed, point, exclude=["night-008", "night-009", "night-010"]) is None
    # another host, another point or no store: nothing measured
    assert H.measured_spread(store, {**testbed, "host": "elsewhere"}, point) is None
    assert H.measured_spread(store, testbed, {**point, "point": "dtype=none"}) is None
    assert H.measured_spread(tmp_path / "absent.duckdb", testbed, point) is None


# ---- aggregate reads the store ----------------------------------------------------------------------------------


def test_aggregate_keeps_the_latest_runs_in_focus_and_the_rest_as_history(source, tmp_path):
    results = tmp_path / "results"
    runs = series_runs(source, results, _noisy(7, 5) + [1.2 * f for f in _noisy(5, 6)])
    store = results / registry.HISTORY_FILE
    assert main(["history", "add", *map(str, runs), "--store", str(store)]) == 0
    assert main(["aggregate", "--results", str(results), "--focus", "3"]) == 0
    runs_csv = pd.read_csv(results / registry.AGGREGATE_DIR / "runs.csv")
    assert sorted(runs_csv["run_id"]) == ["night-009", "night-010", "night-011"]
    hist = pd.read_csv(results / registry.AGGREGATE_DIR / f"{registry.HISTORY_TABLE}.csv")
    assert hist["run_id"].nunique() == 12 and set(hist.loc[hist["in_focus"], "run_id"]) == set(runs_csv["run_id"])
    cps = hist[hist["change_point"]]
    assert set(cps["run_id"]) == {"night-007"} and (cps["step_pct"] > 15).all()
    assert main(["aggregate", "--results", str(results), "--runs", "night-002", "night-004"]) == 0
    assert sorted(pd.read_csv(results / registry.AGGREGATE_DIR / "runs.csv")["run_id"]) == ["night-002", "night-004"]
    assert main(["aggregate", "--results", str(results), "--focus", "-1"]) == 2
