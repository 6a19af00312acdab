"""The GPU check v2 (bench/gpu_check.sh and its helpers), without a GPU:

- its plan fits 360 s with every step >= 30% over its rehearsal times (bench/gpu_check_rehearsal.tsv), and
  --dry-run fails on a step without a rehearsal time or with too little headroom;
- a step that runs past its budget is ended by pid, its torchrun-like children in sessions of their own too,
  and the check goes on; summary.txt says "not run (why)" for a key number it has none of;
- the headline path needs neither jsonschema nor snakemake (both blocked);
- the carried wheels' tags are checked for CPython 3.12 manylinux x86_64;
- a guarded stage step whose stage is not in this build says so and exits 0.
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHECK = REPO / "bench" / "gpu_check.sh"
REHEARSAL = REPO / "bench" / "gpu_check_rehearsal.tsv"


def dry_run(**env) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(CHECK), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**os.environ, **env},
    )


def rehearsal() -> dict[str, tuple[float, float, float]]:
    """step -> (the stand-in's measured seconds, the budget scale it ran at, the H200 estimate)."""
    with open(REHEARSAL) as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    assert all(r["basis"].strip() for r in rows)  # every estimate says what it is made of
    return {r["step"]: (float(r["standin_s"]), float(r["standin_scale"]), float(r["h200_estimate_s"])) for r in rows}


def test_plan_fits_six_minutes_with_30_percent_headroom_over_the_rehearsal():
    out = dry_run()
    assert out.returncode == 0, out.stdout + out.stderr
    steps = re.findall(r"^\s+(\w+)\s+(\d+) s\s+H200 est\.", out.stdout, re.MULTILINE)
    budgets = {name: int(b) for name, b in steps}
    times = rehearsal()
    assert set(budgets) == set(times), set(budgets) ^ set(times)
    for name, budget in budgets.items():
        standin, scale, gpu = times[name]
        assert standin > 0 and gpu > 0 and 1 <= scale <= 4, name  # measured / estimated, never a placeholder 0
        assert budget >= 1.3 * gpu, (name, budget, gpu)
        assert budget * scale >= 1.3 * standin, (name, budget, scale, standin)
    total = re.search(r"total: (\d+) s of steps \+ (\d+) s reserved for packing = (\d+) s \(limit 360 s\)", out.stdout)
    assert total and int(total.group(1)) == sum(budgets.values()) and int(total.group(3)) <= 360
    names = list(budgets)
    assert names[:3] == ["device", "headline", "nvml"]  # key numbers first, before the wheels
    assert names.index("setup") < names.index("attention") < names.index("pipeline") < names.index("report")
    assert {"attention", "gpt2_eager", "gpt2_compiled", "history", "fleet"} <= set(names)


def test_dry_run_fails_on_a_step_without_rehearsal_or_with_too_little_headroom(tmp_path):
    rows = REHEARSAL.read_text().splitlines()
    missing = tmp_path / "missing.tsv"
    missing.write_text("\n".join(r for r in rows if not r.startswith("fleet\t")) + "\n")
    out = dry_run(GPU_CHECK_REHEARSAL=str(missing))
    assert out.returncode == 1 and "rehearsal: NONE" in out.stdout and "NOT within the limits" in out.stderr
    tight = tmp_path / "tight.tsv"
    for planted in (r"\g<1>450\t4\t10", r"\g<1>10\t4\t120"):  # the stand-in over budget x 4 / 1.3; the estimate
        tight.write_text("\n".join(re.sub(r"^(pipeline\t)[\d.]+\t[\d.]+\t[\d.]+", planted, r) for r in rows) + "\n")
        out = dry_run(GPU_CHECK_REHEARSAL=str(tight))
        assert out.returncode == 1 and "NOT within the limits" in out.stderr, planted
    assert dry_run(GPU_CHECK_LIMIT_S="120").returncode == 1


def source_and_run(script: str, tmp_path: Path, timeout: int = 60) -> subprocess.CompletedProcess:
    body = f"GPU_CHECK_SOURCE_ONLY=1 source {CHECK}\n{script}"
    return subprocess.run(
        ["bash", "-c", body],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def test_a_step_past_its_budget_is_ended_by_pid_with_the_ranks_in_their_own_sessions(tmp_path):
    """A step that starts a child in a session of its own (as torchrun's ranks are) and hangs: after its 2 s
    budget the step's group and the escaped child are both gone, by pid, and the runner says 124."""
    pids = tmp_path / "pids"
    script = f"""
hang() {{ setsid sleep 300 & echo $! >> {pids}; sleep 300 & echo $! >> {pids}; wait; }}
export -f hang
mkdir -p {tmp_path}/step
t0=$SECONDS
run_limited hang 2 {tmp_path}/step hang
echo "rc=$? took=$((SECONDS - t0))"
"""
    out = source_and_run(script, tmp_path)
    assert "rc=124" in out.stdout, out.stdout + out.stderr
    took = int(re.search(r"took=(\d+)", out.stdout).group(1))
    assert took < 20
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2
    time.sleep(0.5)
    assert not any(alive(p) for p in started), [p for p in started if alive(p)]
    ended = (tmp_path / "step" / "ended_pids").read_text()
    assert "(group)" in ended and str(started[0]) in ended  # the escaped one, by its pid


def test_a_step_that_finishes_leaves_no_stray_and_keeps_its_exit_status(tmp_path):
    script = f"""
quick() {{ setsid sleep 300 & echo "$!" > {tmp_path}/daemon; echo "KEY quick: done"; exit 3; }}
export -f quick
mkdir -p {tmp_path}/step
run_limited quick 20 {tmp_path}/step quick
echo "rc=$?"
"""
    out = source_and_run(script, tmp_path)
    assert "rc=3" in out.stdout, out.stdout + out.stderr
    time.sleep(0.5)
    assert not alive(int((tmp_path / "daemon").read_text()))
    assert "KEY quick: done" in (tmp_path / "step" / "output.txt").read_text()


def test_summary_starts_with_the_key_numbers_or_says_why_not(tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    steps = work / "steps"
    for name, text in {
        "headline": "KEY headline cuda:0 bfloat16 (bfloat16) n=8192: 812.3 TFLOP/s, 82.1% of 989.4\n",
        "attention": "KEY attention: not available in this build (no stage attention)\n",
        "gpt2_compiled": "KEY gpt2_compiled: not available in this build (no stage gpt2 or gpt2_mfu)\n",
        "nvml": "KEY nvml cuda:0 under bfloat16 4096^3 for 3 s: clock median 1980 MHz\n",
    }.items():
        (steps / name).mkdir(parents=True)
        (steps / name / "output.txt").write_text(text)
        (steps / name / "status").write_text("ok\n")
    (steps / "gpt2_eager").mkdir()
    (steps / "gpt2_eager" / "output.txt").write_text("Traceback ...\n")
    (steps / "gpt2_eager" / "status").write_text("FAILED (exit 1)\n")
    out.mkdir()
    for f in ("head.txt", "keys.txt", "steps.txt"):
        (work / f).write_text("")
    script = f"WORK={work} STEPS={steps} OUT={out}\nwrite_summary\n"
    got = source_and_run(script, tmp_path)
    assert got.returncode == 0, got.stderr
    text = (out / "summary.txt").read_text()
    assert "bf16 8192^3 TFLOP/s: headline cuda:0 bfloat16 (bfloat16) n=8192: 812.3 TFLOP/s" in text
    assert "attention TFLOP/s: not run (step attention: its stage is not available in this build)" in text
    assert "gpt2-124m MFU (eager): not run (step gpt2_eager: FAILED (exit 1), no such reading)" in text
    assert "gpt2-124m MFU (compiled): not run (step gpt2_compiled: its stage is not available in this build)" in text
    assert "MFU (eager): not run" in text and "telemetry" not in text
    assert "NVML readings: nvml cuda:0 under bfloat16" in text


BLOCKER = """
import sys, runpy
for m in ("jsonschema", "snakemake", "duckdb", "ruptures", "hypothesis"):
    sys.modules[m] = None  # what the device image lacks: importing any raises ImportError
script, *args = sys.argv[1:]
sys.argv = [script, *args]
if script == "-":
    import accelbench.run.config, accelbench.stages.matmul.measure, accelbench.measure.telemetry  # noqa: F401
    print("imported")
else:
    runpy.run_path(script, run_name="__main__")
"""


def test_the_headline_path_needs_neither_jsonschema_nor_snakemake(tmp_path):
    blocker = tmp_path / "block.py"
    blocker.write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    got = subprocess.run(
        [sys.executable, str(blocker), "-"], capture_output=True, text=True, timeout=120, cwd=REPO, env=env
    )
    assert got.returncode == 0 and "imported" in got.stdout, got.stderr[-2000:]
    got = subprocess.run(
        [
            sys.executable,
            str(blocker),
            "bench/gpu_headline.py",
            "--device",
            "cpu",
            "--dtypes",
            "float32",
            "--sizes",
            "64",
            "--min-run-time",
            "0.01",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
    )
    assert got.returncode == 0, got.stderr[-2000:]
    assert re.search(r"KEY headline cpu float32 \(float32\) n=64: [\d.e+-]+ TFLOP/s", got.stdout), got.stdout


def test_wheel_tags_are_checked_for_cpython_3_12_manylinux_x86_64():
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import gpu_wheels
    finally:
        sys.path.remove(str(REPO / "bench"))
    ok = [
        "rpds_py-2026.9.1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "snakemake-9.27.1-py3-none-any.whl",
        "greenlet-3.5.6-cp312-cp312-manylinux_2_28_x86_64.whl",
        "cryptography-44.0.0-cp39-abi3-manylinux_2_28_x86_64.whl",
    ]
    bad = [
        "rpds_py-2026.9.1-cp311-cp311-manylinux_2_17_x86_64.whl",
        "greenlet-3.5.6-cp312-cp312-win_amd64.whl",
        "pulp-3.3.2-cp312-cp312-manylinux_2_17_aarch64.whl",
        "x-1.0-cp312-cp312-musllinux_1_2_x86_64.whl",
    ]
    assert all(gpu_wheels.check_tags(w) is None for w in ok), [gpu_wheels.check_tags(w) for w in ok]
    assert all(gpu_wheels.check_tags(w) for w in bad)
    env = gpu_wheels.target_environment("3.12")
    from packaging.markers import Marker

    assert Marker('python_version < "3.12"').evaluate(env) is False
    assert Marker('python_version >= "3.12" and sys_platform == "linux"').evaluate(env) is True


@pytest.mark.parametrize("wheels", [REPO / ".gpu-wheels"])
def test_carried_wheels_where_present_are_all_cp312_manylinux(wheels):
    """Only where bench/gpu_wheels.py has run here (the folder is ignored by git): every wheel's tags."""
    found = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    if not found:
        pytest.skip("no .gpu-wheels here (made by bench/gpu_wheels.py; not in git)")
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import gpu_wheels
    finally:
        sys.path.remove(str(REPO / "bench"))
    assert [w.name for w in found if gpu_wheels.check_tags(w.name)] == []
    assert any(w.name.startswith("jsonschema-") for w in found) and any(w.name.startswith("snakemake-") for w in found)


def test_a_stage_step_whose_stage_is_not_in_this_build_says_so(tmp_path):
    got = subprocess.run(
        [
            sys.executable,
            "bench/gpu_stage.py",
            "gpt2_eager",
            "--stage",
            "no_such_stage,nor_this",
            "--results",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.strip() == (
        "KEY gpt2_eager: not available in this build (no stage no_such_stage or nor_this in accelbench.registry.STAGES)"
    )


def test_a_short_check_returns_its_files_within_the_device_tools_limits(tmp_path):
    """The whole script, two cheap steps of it (GPU_CHECK_ONLY): summary.txt with the key numbers first, the
    skipped steps said, steps.log, results.tar.gz, and the check of the returned files' limits."""
    out = tmp_path / "out"
    got = subprocess.run(
        ["bash", str(CHECK)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={
            **os.environ,
            "OUT": str(out),
            "PYTHON": sys.executable,
            "GPU_CHECK_ONLY": "device,fleet",
            # the stand-in on 2 loaded cores: the fleet step's two processes take 10 s or more
            "GPU_CHECK_BUDGET_SCALE": "3",
            "GPU_WHEELS": str(tmp_path / "no-wheels"),
            "TMPDIR": str(tmp_path),
        },
    )
    assert got.returncode == 0, got.stdout + got.stderr
    assert sorted(p.name for p in out.iterdir()) == ["results.tar.gz", "steps.log", "summary.txt"]
    text = (out / "summary.txt").read_text()
    assert text.splitlines()[1] == "key numbers:"
    assert "bf16 8192^3 TFLOP/s: not run (step headline has not run)" in text
    assert re.search(r"^device: python .* \| torch ", text, re.MULTILINE)
    # the one-node fleet check ran; no GPU here, so the fleet holds no headline value: its exit 2, said
    assert re.search(r"^fleet: exit 2, accelbench fleet: results: .* holds no headline value", text, re.MULTILINE), text
    assert re.search(r"^step pipeline\s+skipped \(not in GPU_CHECK_ONLY\)$", text, re.MULTILINE)
    assert re.search(r"^step device\s+ok in \d+ s \(budget 24 s\)$", text, re.MULTILINE)
    assert "limits: 3 files under $OUT" in text
    assert "=== device: ok" in (out / "steps.log").read_text()


def test_stage_argv_fills_only_its_placeholders():
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import gpu_stage
    finally:
        sys.path.remove(str(REPO / "bench"))
    values = {"results": "/r", "run_dir": "/r/x", "backend": "cuda", "pipeline_results": "/p"}
    assert gpu_stage.fill(["history", "--results", "{pipeline_results}", "--b={backend}"], values) == [
        "history",
        "--results",
        "/p",
        "--b=cuda",
    ]
    with pytest.raises(SystemExit, match="only"):
        gpu_stage.fill(["{config_value}"], values)


def test_a_stage_step_whose_stage_is_in_this_build_runs_it_as_the_pipeline_would(tmp_path):
    """With an existing device stage (warmup) standing in for a new one: run-info from the step's config (an
    unknown top-level key named and dropped), the stage's CLI, then one KEY line per table of the stage."""
    config = tmp_path / "stages.yaml"
    config.write_text(
        "probe:\n  config:\n    warmup: {n: 32, max_iters: 8, window: 3, rel_tol: 0.9}\n    not_a_key: {x: 1}\n"
    )
    got = subprocess.run(
        [
            sys.executable,
            "bench/gpu_stage.py",
            "probe",
            "--stage",
            "no_such_stage,warmup",
            "--config",
            str(config),
            "--results",
            str(tmp_path / "res"),
            "--backend",
            "cpu",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    assert got.returncode == 0, got.stdout[-2000:] + got.stderr[-2000:]
    assert "config keys ['not_a_key'] are not in the config schema: dropped" in got.stdout
    assert "KEY probe: warmup exit 0" in got.stdout
    assert re.search(r"^KEY warmup_cpu\.csv: \d+ rows \(", got.stdout, re.MULTILINE), got.stdout


def test_every_guarded_stage_step_finds_its_stage_and_a_valid_config():
    """Each `stage STEP CANDIDATES` step of the plan names a stage this build has, and the config it would run
    (the plug-in's own gpu_check section under its config key, bench/gpu_stages.yaml's keys over it) passes the
    config check: a step that would stop at run-info on the GPU machine fails here, on the CPU."""
    from accelbench import registry
    from accelbench.run.config import check

    sys.path.insert(0, str(REPO / "bench"))
    try:
        import gpu_stage
    finally:
        sys.path.remove(str(REPO / "bench"))
    steps = re.findall(r"^  step (\w+)\s+\d+\s+stage (\w+) (\S+)$", CHECK.read_text(), re.MULTILINE)
    assert {name for name, _, _ in steps} >= {"attention", "gpt2_eager", "gpt2_compiled", "history"}, steps
    for name, step, candidates in steps:
        stage = gpu_stage.find_stage(candidates.split(","))
        assert stage, f"step {name}: none of {candidates} is a stage of this build"
        cfg = gpu_stage.step_config(REPO / "bench" / "gpu_stages.yaml", step, stage)
        if registry.STAGES[stage].kind in ("device", "run"):
            check({"run": "gpu-check", "backends": ["cuda"], **cfg["config"]})
        else:
            assert cfg["argv"], f"step {name}: the tool stage {stage} needs an argv"
    gpt2 = {
        n: gpu_stage.step_config(REPO / "bench" / "gpu_stages.yaml", n, "amp")["config"]["amp"]
        for n in ("gpt2_eager", "gpt2_compiled")
    }
    assert all(c["workloads"] == ["gpt"] and c["gpt"]["preset"] == "gpt2-124m" for c in gpt2.values())
    assert gpt2["gpt2_eager"]["compile"] is False and gpt2["gpt2_compiled"]["compile"] == ["gpt"]
    attention = gpu_stage.step_config(REPO / "bench" / "gpu_stages.yaml", "attention", "attention")["config"]
    assert attention["attention"]["head_dims"] == [128] and max(attention["attention"]["seq_lens"]) == 16384
