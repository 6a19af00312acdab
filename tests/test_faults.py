"""Faults: nothing completed is lost, nothing fails silently.

- a file is written whole or not at all (``io.atomic_write_*``), even under SIGKILL;
- a sweep killed halfway keeps every completed point, and the rerun measures only the missing ones
  (``io.Checkpoint``; the ``accelbench matmul`` command, and the pipeline under snakemake);
- an exception at one point or on one device is that point's status, and the sweep goes on;
- a truncated or corrupted CSV under results/ stops the aggregation with a message naming the file;
  only ``--allow-incomplete`` goes on, and then the report says so.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml

from accelbench import cli as accelbench_cli
from accelbench.run import io as abio
from test_provenance import MINI, mini_run, pipeline_env
from workflow_runner import snakemake_argv

REPO = Path(__file__).resolve().parents[1]
KEY = ("device", "dtype", "n")


def _env() -> dict:
    return dict(pipeline_env(), PYTHONUNBUFFERED="1")


def accelbench(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "accelbench.cli", *args], capture_output=True, text=True, timeout=timeout, env=_env()
    )


def complete_lines(path: Path) -> list[dict]:
    """The checkpoint's rows as a reader sees them: complete (newline-terminated) JSON lines only."""
    if not path.exists():
        return []
    data = path.read_bytes()
    return [json.loads(line) for line in data[: data.rfind(b"\n") + 1].decode().splitlines() if line.strip()]


# ---- atomic writes ------------------------------------------------------------------------------


def test_atomic_write_replaces_whole_file(tmp_path):
    target = tmp_path / "sub" / "f.json"
    abio.atomic_write_json(target, {"a": 1})
    abio.atomic_write_json(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 2}
    assert sorted(p.name for p in target.parent.iterdir()) == ["f.json"]  # no temp file left


@pytest.mark.parametrize("fail_at", ["write", "fsync", "replace"])
def test_crash_mid_write_leaves_old_file(tmp_path, monkeypatch, fail_at):
    target = tmp_path / "f.csv"
    abio.atomic_write_csv(target, [{"x": 1, "y": "old"}], columns=["x", "y"])
    old = target.read_bytes()

    def boom(*a, **k):
        raise OSError(f"simulated crash at {fail_at}")

    if fail_at == "write":
        real_fdopen = os.fdopen

        class Half:
            def __init__(self, fh):
                self.fh = fh

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.fh.close()

            def write(self, text):
                self.fh.write(text[: len(text) // 2])
                self.fh.flush()
                boom()

        monkeypatch.setattr(abio.os, "fdopen", lambda fd, mode: Half(real_fdopen(fd, mode)))
    else:
        monkeypatch.setattr(abio.os, fail_at, boom)
    with pytest.raises(OSError, match="simulated crash"):
        abio.atomic_write_csv(target, [{"x": i, "y": "new" * 100} for i in range(1000)], columns=["x", "y"])
    assert target.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.csv"]


_WRITER = """
import sys
from accelbench.run.io import atomic_write_text
path, size = sys.argv[1], int(sys.argv[2])
i = 0
while True:
    atomic_write_text(path, "AB"[i % 2] * size + "\\n")
    if i == 0:
        print("first write done", flush=True)
    i += 1
"""


def test_sigkill_during_writes_never_leaves_half_a_file(tmp_path):
    """A writer rewriting a 4 MB file in a loop is killed at 8 moments: the file is always whole."""
    target = tmp_path / "big.txt"
    size = 4 * 1024 * 1024
    target.write_text("A" * size + "\n")
    for delay in (0.0, 0.003, 0.007, 0.012, 0.02, 0.03, 0.05, 0.08):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(target), str(size)], env=_env(), stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout.readline().strip() == "first write done"  # killed while it is writing, not starting
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        text = target.read_text()
        assert len(text) == size + 1 and text.strip() in ("A" * size, "B" * size), (delay, len(text))


def test_atomic_write_csv_keeps_column_order_even_without_rows(tmp_path):
    abio.atomic_write_csv(tmp_path / "e.csv", [], columns=["b", "a"])
    assert (tmp_path / "e.csv").read_text().strip() == "b,a"
    abio.atomic_write_csv(tmp_path / "r.csv", [{"a": 1, "b": 2, "extra": 3}], columns=["b", "a"])
    assert pd.read_csv(tmp_path / "r.csv").to_dict("records") == [{"b": 2, "a": 1}]


# ---- checkpoints ----------------------------------------------------------------------------------


def test_checkpoint_partial_last_line_is_ignored_and_cut(tmp_path):
    path = tmp_path / "c.jsonl"
    ck = abio.Checkpoint(path, KEY)
    ck.add({"device": "cpu", "dtype": "float32", "n": 64, "median_s": 1.0})
    with open(path, "a") as fh:  # a kill in the middle of the next add
        fh.write('{"device": "cpu", "dtype": "float32", "n": 128, "med')
    again = abio.Checkpoint(path, KEY)
    assert list(again.rows) == [("cpu", "float32", "64")]
    assert ("cpu", "float32", 128) not in again and ("cpu", "float32", 64) in again
    again.add({"device": "cpu", "dtype": "float32", "n": 128, "median_s": 2.0})
    third = abio.Checkpoint(path, KEY)  # the new point is on a line of its own, not glued to the fragment
    assert {k: r["median_s"] for k, r in third.rows.items()} == {
        ("cpu", "float32", "64"): 1.0,
        ("cpu", "float32", "128"): 2.0,
    }
    assert path.read_text().count("\n") == 2


def test_checkpoint_damaged_lines_and_foreign_rows_are_skipped(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(
        '{"device": "cpu", "dtype": "float32", "n": 64, "v": 1}\n'
        "\x00\x00garbage\n"
        '["not", "a", "row"]\n'
        '{"device": "cpu", "n": 64}\n'
        '{"device": "cpu", "dtype": "float32", "n": 64, "v": 2}\n'
    )
    ck = abio.Checkpoint(path, KEY)
    assert list(ck.rows) == [("cpu", "float32", "64")] and list(ck.rows.values())[0]["v"] == 2  # the later line wins


def test_checkpoint_add_is_on_disk_at_once(tmp_path):
    path = tmp_path / "c.jsonl"
    ck = abio.Checkpoint(path, KEY)
    for n in (1, 2, 3):
        ck.add({"device": "cpu", "dtype": "float16", "n": n})
        assert len(complete_lines(path)) == n  # another process reading now sees every point added


# ---- a killed matmul sweep resumes ---------------------------------------------------------------

SWEEP_SIZES = [32, 48, 64, 80, 96, 112, 128, 144, 160, 176]


def write_run_file(folder: Path, config: dict, run: str = "faults") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "run.json"
    assert (
        accelbench_cli.main(
            ["run-info", "--config-json", json.dumps(config), "--run", run, "--git-commit", "test", "--out", str(out)]
        )
        == 0
    )
    return out


def sweep_config(sizes=SWEEP_SIZES, min_run_time_s=0.1) -> dict:
    return {
        "backends": ["cpu"],
        "cpu_threads": 1,
        "matmul": {
            "sizes": sizes,
            "dtypes": ["float32"],
            "min_run_time_s": min_run_time_s,
            "point_budget_s": 60.0,
            "fp8": False,
            "tf32": False,
            "rotate_inputs": False,
        },
    }


def matmul_argv(run_file: Path, ck: Path, out: Path) -> list[str]:
    """The stage writes registry.TABLES['matmul'].filename('cpu') (= out's name) into --out-dir."""
    assert out.name == "matmul_cpu.csv"
    return [
        "matmul",
        "--run-file",
        str(run_file),
        "--backend",
        "cpu",
        "--threads",
        "1",
        "--checkpoint",
        str(ck),
        "--out-dir",
        str(out.parent),
    ]


def kill_when(path: Path, proc: subprocess.Popen, at_least: int, at_most: int, timeout: float = 300) -> None:
    """SIGKILL ``proc`` (and its process group) once ``path`` holds between at_least and at_most points."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = len(complete_lines(path))
        if done >= at_least:
            assert done <= at_most, f"{done} points already done: could not kill halfway"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return
        assert proc.poll() is None, f"finished before {at_least} points were checkpointed (rc {proc.returncode})"
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    raise AssertionError(f"no checkpointed point within {timeout} s")


def assert_resumed(before: list[dict], ck: Path, csv: Path, expected_keys: set) -> pd.DataFrame:
    """Every point once in the checkpoint, every point in the CSV, the points done before the kill unchanged."""
    after = complete_lines(ck)
    counts = Counter(tuple(str(r[k]) for k in KEY) for r in after)
    assert set(counts) == expected_keys, set(counts) ^ expected_keys
    assert all(c == 1 for c in counts.values()), [k for k, c in counts.items() if c > 1]  # nothing measured twice
    assert ck.read_bytes().endswith(b"\n")
    df = pd.read_csv(csv)
    assert len(df) == len(expected_keys)
    assert set(map(tuple, df[list(KEY)].astype(str).values)) == expected_keys
    rows = {tuple(str(r[k]) for k in KEY): r for r in df.to_dict("records")}
    for old in before:
        new = rows[tuple(str(old[k]) for k in KEY)]
        for col in ("median_s", "iqr_s", "ci95_low_s", "ci95_high_s", "tflops", "rel_error"):
            assert math.isclose(float(new[col]), float(old[col]), rel_tol=1e-12), (col, old, new)
        for col in ("repeats", "status", "status_detail"):
            assert str(new[col]) == str(old[col]) or (pd.isna(new[col]) and not old[col]), (col, old[col], new[col])
    return df


def test_killed_matmul_sweep_resumes_without_losing_or_remeasuring(tmp_path):
    run_file = write_run_file(tmp_path / "results" / "faults", sweep_config())
    ck = tmp_path / "results" / "faults" / "checkpoints" / "matmul_cpu.jsonl"
    out = tmp_path / "results" / "faults" / "matmul_cpu.csv"
    argv = [sys.executable, "-m", "accelbench", *matmul_argv(run_file, ck, out)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env(), start_new_session=True)
    kill_when(ck, proc, at_least=2, at_most=len(SWEEP_SIZES) - 3)
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists()  # the CSV is written at the end, whole: a killed sweep leaves none
    before = complete_lines(ck)
    assert 2 <= len(before) < len(SWEEP_SIZES)
    with open(ck, "ab") as fh:  # and as if the kill had landed in the middle of writing the next point
        fh.write(b'{"run_id": "faults", "device": "cpu", "dtype": "float32", "n": 99')

    rerun = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=_env())
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert rerun.stdout.count("from checkpoint") == len(before), rerun.stdout
    expected = {("cpu", "float32", str(n)) for n in SWEEP_SIZES}
    assert_resumed(before, ck, out, expected)

    # a third run measures nothing, and gives the same file
    third = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=_env())
    assert third.returncode == 0 and third.stdout.count("from checkpoint") == len(SWEEP_SIZES)
    assert len(complete_lines(ck)) == len(SWEEP_SIZES)


def test_checkpoint_of_another_config_is_not_reused(tmp_path):
    """A rerun after the config changed (same run id, so the same checkpoint file) measures again."""
    folder = tmp_path / "results" / "faults"
    ck, out = folder / "checkpoints" / "matmul_cpu.jsonl", folder / "matmul_cpu.csv"
    run_file = write_run_file(folder, sweep_config([32, 48], 0.02))
    assert accelbench_cli.main(matmul_argv(run_file, ck, out)) == 0
    run_file = write_run_file(folder, {**sweep_config([32, 48], 0.02), "seed": 7})
    proc = accelbench(*matmul_argv(run_file, ck, out))
    assert proc.returncode == 0 and "from checkpoint" not in proc.stdout, proc.stdout
    new_hash = json.loads(run_file.read_text())["config_hash"]
    assert set(pd.read_csv(out)["config_hash"]) == {new_hash}


@pytest.mark.slow
def test_pipeline_killed_during_matmul_resumes(tmp_path):
    """SIGKILL the whole snakemake process group while matmul runs; the rerun (after the lock that a
    killed snakemake leaves is released) redoes the incomplete job, and the checkpoint, which lives
    outside the job's outputs, keeps the points done before the kill."""
    work = tmp_path / "work"
    work.mkdir()
    config = {
        **MINI,
        "run": "killed",
        "matmul": {**MINI["matmul"], "sizes": SWEEP_SIZES, "dtypes": ["float32"], "min_run_time_s": 0.1},
    }
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    target = "results/killed/matmul_cpu.csv"
    base = snakemake_argv(work, "--configfile", str(work / "config.yaml"), "--cores", "1")
    proc = subprocess.Popen(
        base + [target], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(), start_new_session=True
    )
    ck = work / "results" / "killed" / "checkpoints" / "matmul_cpu.jsonl"
    kill_when(ck, proc, at_least=2, at_most=len(SWEEP_SIZES) - 3, timeout=600)
    before = complete_lines(ck)
    assert not (work / target).exists()

    rerun = subprocess.run(base + [target], capture_output=True, text=True, timeout=900, env=_env())
    if rerun.returncode != 0:
        # snakemake's own guard after a kill: it names the fix (--unlock) in its message
        assert "--unlock" in rerun.stderr, rerun.stderr[-3000:]
        unlock = subprocess.run(base + ["--unlock"], capture_output=True, text=True, timeout=300, env=_env())
        assert unlock.returncode == 0, unlock.stderr[-2000:]
        rerun = subprocess.run(
            base + ["--rerun-incomplete", target], capture_output=True, text=True, timeout=900, env=_env()
        )
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    log = (work / "results" / "killed" / "logs" / "matmul_cpu.log").read_text()
    assert log.count("from checkpoint") == len(before), log
    assert_resumed(before, ck, work / target, {("cpu", "float32", str(n)) for n in SWEEP_SIZES})


# ---- an exception at one point or on one device ---------------------------------------------------


def test_exception_at_one_point_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    from accelbench.stages.matmul import measure as matmul

    real_check = matmul.TorchMatmul.check

    def flaky(self, dtype, n):
        if n == 48:
            raise RuntimeError("injected fault at n=48")
        return real_check(self, dtype, n)

    monkeypatch.setattr(matmul.TorchMatmul, "check", flaky)
    folder = tmp_path / "results" / "faults"
    run_file = write_run_file(folder, sweep_config([32, 48, 64], 0.02))
    ck, out = folder / "checkpoints" / "matmul_cpu.jsonl", folder / "matmul_cpu.csv"
    assert accelbench_cli.main(matmul_argv(run_file, ck, out)) == 0
    df = pd.read_csv(out).set_index("n")
    assert df.loc[48, "status"] == "error"
    assert "RuntimeError: injected fault at n=48" in df.loc[48, "status_detail"]
    for n in (32, 64):
        assert df.loc[n, "status"] in ("ok", "unstable") and df.loc[n, "median_s"] > 0, df.loc[n]
    assert len(complete_lines(ck)) == 3


def test_exception_on_one_device_is_recorded_and_the_others_go_on(tmp_path, monkeypatch):
    """A second device whose setup fails (a lost GPU, a driver error): its points record the error,
    the first device is measured in full."""
    from accelbench.backends.cpu import CpuBackend
    from accelbench.stages.matmul import measure as matmul

    monkeypatch.setattr(CpuBackend, "devices", lambda self: ["cpu", "cpu:1"])
    real_init = matmul.TorchMatmul.__init__

    def init(self, device, *a, **k):
        if device == "cpu:1":
            raise RuntimeError("injected: device cpu:1 fell off the bus")
        real_init(self, device, *a, **k)

    monkeypatch.setattr(matmul.TorchMatmul, "__init__", init)
    folder = tmp_path / "results" / "faults"
    run_file = write_run_file(folder, sweep_config([32, 64], 0.02))
    ck, out = folder / "checkpoints" / "matmul_cpu.jsonl", folder / "matmul_cpu.csv"
    assert accelbench_cli.main(matmul_argv(run_file, ck, out)) == 0
    df = pd.read_csv(out)
    good, bad = df[df["device"] == "cpu"], df[df["device"] == "cpu:1"]
    assert len(good) == 2 and set(good["status"]) <= {"ok", "unstable"} and (good["median_s"] > 0).all()
    assert len(bad) == 2 and set(bad["status"]) == {"error"}
    assert bad["status_detail"].str.contains("fell off the bus").all()


# ---- a damaged CSV under results/ -----------------------------------------------------------------


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":  # cut in the middle of a line, as a copy interrupted halfway
        path.write_bytes(data[: len(data) * 2 // 3])
    elif how == "cut_at_line":  # cut at a line end: rows missing
        lines = data.splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:-1]))
    elif how == "binary":
        path.write_bytes(data[:200] + b"\x00\x00\xff\xfe" * 50 + data[400:])
    elif how == "empty":
        path.write_bytes(b"")
    else:
        raise AssertionError(how)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    return mini_run(tmp_path_factory, "first")


def copy_and_damage(finished_run: Path, tmp_path: Path, name: str, how: str) -> tuple[Path, Path]:
    results = tmp_path / "results"
    shutil.copytree(finished_run / "results" / "mini", results / "mini")
    bad = results / "mini" / name
    damage(bad, how)
    return results, bad


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,how",
    [
        ("matmul_cpu.csv", "truncated"),
        ("matmul_cpu.csv", "cut_at_line"),
        ("amp_cpu_trials.csv", "truncated"),
        ("warmup_cpu.csv", "binary"),
        ("amp_cpu_summary.csv", "empty"),
    ],
)
def test_aggregate_names_damaged_file_and_refuses(finished_run, tmp_path, name, how):
    results, bad = copy_and_damage(finished_run, tmp_path, name, how)
    out_dir = results / "aggregate"
    proc = accelbench("aggregate", "--results", str(results), "--out-dir", str(out_dir))
    assert proc.returncode != 0, proc.stderr
    assert str(bad) in proc.stderr or f"mini/{name}" in proc.stderr, proc.stderr
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert manifest["complete"] is False
    assert any(name in p["file"] for p in manifest["problems"]), manifest["problems"]


@pytest.mark.slow
def test_allow_incomplete_goes_on_and_the_report_says_so(finished_run, tmp_path):
    name = "matmul_cpu.csv"
    results, bad = copy_and_damage(finished_run, tmp_path, name, "truncated")
    out_dir = results / "aggregate"
    proc = accelbench("aggregate", "--results", str(results), "--out-dir", str(out_dir), "--allow-incomplete")
    assert proc.returncode == 0, proc.stderr
    assert name in proc.stderr and "allow-incomplete" in proc.stderr, proc.stderr
    assert json.loads((out_dir / "manifest.json").read_text())["complete"] is False
    plots = finished_run / "results" / "plots"  # every figure present: the warning can only be the data's
    html = tmp_path / "report.html"
    proc = accelbench("report", "--aggregate-dir", str(out_dir), "--plots-dir", str(plots), "--out", str(html))
    assert proc.returncode == 0, proc.stderr
    page = html.read_text()
    assert 'id="incomplete"' in page, "no incomplete-data banner"
    banner = page[page.index('id="incomplete"') :]
    banner = banner[: banner.index("</div>")]
    assert f"mini/{name}" in banner and "allow-incomplete" in banner, banner

    # the same data undamaged: no banner (so the banner above is about the damage)
    good = tmp_path / "good"
    shutil.copytree(finished_run / "results" / "mini", good / "mini")
    assert accelbench("aggregate", "--results", str(good), "--out-dir", str(good / "aggregate")).returncode == 0
    assert (
        accelbench(
            "report",
            "--aggregate-dir",
            str(good / "aggregate"),
            "--plots-dir",
            str(plots),
            "--out",
            str(tmp_path / "good.html"),
        ).returncode
        == 0
    )
    assert 'id="incomplete"' not in (tmp_path / "good.html").read_text()


@pytest.mark.slow
def test_pipeline_stops_on_a_damaged_csv_and_makes_no_report(finished_run, tmp_path):
    """Under snakemake: a CSV of a finished run damaged afterwards makes the history job (the first reader) fail with its
    log naming the file; plots and report are not rebuilt from it."""
    work = tmp_path / "work"
    shutil.copytree(finished_run, work, symlinks=True)
    report = work / "results" / "report.html"
    report.unlink()  # so that any report present afterwards was made from the damaged data
    time.sleep(1.1)
    bad = work / "results" / "mini" / "matmul_cpu.csv"
    damage(bad, "truncated")
    proc = subprocess.run(
        snakemake_argv(
            work,
            "--configfile",
            str(work / "config.yaml"),
            "--cores",
            "1",
            "--show-failed-logs",
            # only file times decide what reruns (not the checkout's commit,
            # which may have moved since the finished run was made)
            "--rerun-triggers",
            "mtime",
        ),
        capture_output=True,
        text=True,
        timeout=900,
        env=_env(),
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    # the history rule reads the run's CSVs first (aggregate waits for it): its job fails, naming the file
    assert "Error in rule history" in out, out[-3000:]
    assert "Error in rule aggregate" not in out and "rule aggregate:" not in out, out[-3000:]
    assert "results/mini/matmul_cpu.csv" in out, out[-4000:]  # shown with --show-failed-logs
    assert "results/mini/matmul_cpu.csv" in (work / "results" / "mini" / "logs" / "history.log").read_text()
    assert not report.exists()
    assert "rule matmul:" not in out  # the damaged file is reported, not silently re-measured
