"""accelbench ab: the order plan, each side's argv (a list, never a shell line), bad input refused before any run,
a failed repetition left out while the rest go on, the default R as the power calculation, and one real tiny
interleaved A/B (slow)."""

from __future__ import annotations

import copy
import io
import json
import os
import stat
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from accelbench import cli, registry
from accelbench.measure import power as P
from accelbench.run import ab
from accelbench.run.config import ConfigError
from tiny_config import AB_TINY
from workflow_runner import REPO

# ---------------------------------------------------------------------------------------------- the order


def test_alternate_order_is_a_b_a_b():
    assert ab.order_plan(3) == [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3), ("b", 3)]


def test_abba_order_cancels_a_linear_drift():
    plan = ab.order_plan(4, "abba")
    assert "".join(s for s, _ in plan) == "abbaabba"
    # a linear drift (slot index) falls on both sides alike: equal mean slot per side
    slots = {side: [i for i, (s, _) in enumerate(plan) if s == side] for side in "ab"}
    assert sum(slots["a"]) == sum(slots["b"])
    # while A B A B leaves B one slot later in every pair
    alt = ab.order_plan(4)
    assert sum(i for i, (s, _) in enumerate(alt) if s == "b") - sum(i for i, (s, _) in enumerate(alt) if s == "a") == 4


def test_random_order_is_seeded_and_keeps_every_pair_mixed():
    one, again, other = ab.order_plan(20, "random", 7), ab.order_plan(20, "random", 7), ab.order_plan(20, "random", 8)
    assert one == again and one != other
    assert "".join(s for s, _ in one) != "ab" * 20  # not merely alternating
    for i in range(0, 40, 2):  # each pair: one A and one B, of the same repetition
        (s1, r1), (s2, r2) = one[i], one[i + 1]
        assert {s1, s2} == {"a", "b"} and r1 == r2 == i // 2 + 1
    assert sorted(one) == sorted(ab.order_plan(20))  # every repetition of each side exactly once


@pytest.mark.parametrize("runs, order, key", [(0, "alternate", "--runs"), (2, "shuffle", "--order")])
def test_bad_order_arguments(runs, order, key):
    with pytest.raises(ConfigError, match=key):
        ab.order_plan(runs, order)


# ---------------------------------------------------------------------------------------------- the default R


def test_default_runs_is_the_power_calculation():
    """DEFAULT_RUNS is the fewest runs a side at which compare_groups finds a planted 10% slowdown 80% of the time at
    the measured spread: that R reaches it and one run fewer does not; ab's --runs default is it."""
    assert P.simulated_power(P.DEFAULT_RUNS, sims=2000) >= P.POWER
    assert P.simulated_power(P.DEFAULT_RUNS - 1, sims=2000) < P.POWER
    # and the simulation can fail: at a larger spread the same R falls short
    assert P.simulated_power(P.DEFAULT_RUNS, spread_log_sd=0.08, sims=1000) < P.POWER
    assert ab.DEFAULT_RUNS is P.DEFAULT_RUNS


def test_the_simulated_false_alarm_rate_of_one_direction_is_at_most_half_alpha():
    """With no slowdown, the share called slower is one tail of the two-sided test (at most alpha / 2 = 2.5%),
    less still with the min-effect floor; without the floor it would be about 2.5%."""
    aa = P.simulated_power(P.DEFAULT_RUNS, slowdown=0.0, sims=4000, seed=1)
    assert aa <= 0.025
    bare = P.simulated_power(P.DEFAULT_RUNS, slowdown=0.0, min_effect=0.0, sims=4000, seed=1)
    assert 0.015 < bare < 0.035


# ---------------------------------------------------------------------------------------------- the argv


def fake_python(folder: Path) -> Path:
    """An 'environment': a python (this interpreter behind a script) with an accelbench next to it."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True)
    py = bin_dir / "python"
    py.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "accelbench").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m accelbench "$@"\n')
    for f in (py, bin_dir / "accelbench"):
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    return py


def args_for(workdir: Path, *extra: str):
    argv = ["ab", "--workdir", str(workdir), *extra]
    return cli.build_parser("ab").parse_args(argv)


def write(path: Path, cfg: dict) -> Path:
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_each_side_gets_its_own_argv_config_and_interpreter(tmp_path):
    a = write(tmp_path / "a.yaml", {"backends": ["cpu"], "cpu_threads": 2})
    b = write(tmp_path / "b.yaml", {"backends": ["cpu"], "cpu_threads": 1})
    py_b = fake_python(tmp_path / "venv-b")
    plan = ab.build_plan(
        args_for(
            tmp_path,
            "--baseline-config",
            str(a),
            "--candidate-config",
            str(b),
            "--candidate-python",
            str(py_b),
            "--runs",
            "2",
            "--name",
            "x",
            "--cores",
            "2",
        )
    )
    steps = plan.steps()
    assert [s["run_id"] for s in steps] == ["x-a-01", "x-b-01", "x-a-02", "x-b-02"]
    for s in steps:
        argv = s["argv"]
        assert isinstance(argv, list) and all(isinstance(x, str) for x in argv)
        python = str(py_b) if s["side"] == "b" else str(Path(sys.executable).absolute())
        assert argv[:3] == [python, "-m", "snakemake"]
        assert argv[argv.index("-s") + 1] == str(REPO / "Snakefile")
        assert argv[argv.index("--directory") + 1] == str(tmp_path)
        assert (
            argv[argv.index("--configfile") + 1]
            == s["config"]
            == str(tmp_path / "results" / "ab" / "x" / f"{s['run_id']}.yaml")
        )
        assert "--replace-workflow-config" in argv and argv[argv.index("--cores") + 1] == "2"
        assert argv[-1] == f"results/{s['run_id']}/{registry.HISTORY_RECEIPT}"
    assert plan.sides["a"].raw["cpu_threads"] == 2 and plan.sides["b"].raw["cpu_threads"] == 1
    # the jobs' accelbench is the side's environment's: its folder first on PATH
    assert ab.run_env(str(py_b), {"PATH": "/usr/bin"})["PATH"] == f"{py_b.parent}{os.pathsep}/usr/bin"


def test_the_side_file_is_merged_over_the_workdir_config_as_snakemake_does(tmp_path):
    write(
        tmp_path / "config.yaml", {"backends": ["cpu"], "matmul": {"sizes": [64], "dtypes": ["float32"]}, "run": "base"}
    )
    a = write(tmp_path / "a.yaml", {"matmul": {"sizes": [128]}})
    plan = ab.build_plan(args_for(tmp_path, "--baseline-config", str(a), "--runs", "1"))
    assert plan.sides["a"].raw["matmul"] == {"sizes": [128], "dtypes": ["float32"]}
    assert plan.sides["b"].raw == plan.sides["a"].raw  # the candidate defaults to the baseline's config
    assert "run" not in plan.sides["a"].raw  # each repetition sets its own


def test_two_images_set_every_backends_image_and_take_it_as_is(tmp_path):
    a = write(tmp_path / "a.yaml", {"backends": ["cpu"], "container": {"runtime": "apptainer"}})
    plan = ab.build_plan(
        args_for(
            tmp_path,
            "--baseline-config",
            str(a),
            "--baseline-image",
            "docker://x/torch:2.5",
            "--candidate-image",
            "/images/torch-2.6.sif",
            "--runs",
            "1",
        )
    )
    assert plan.sides["a"].raw["container"] == {
        "runtime": "apptainer",
        "images": {"cpu": "docker://x/torch:2.5"},
        "build": False,
    }
    assert plan.sides["b"].raw["container"]["images"] == {"cpu": "/images/torch-2.6.sif"}
    argv = plan.steps()[0]["argv"]
    assert argv[argv.index("--sdm") + 1] == "apptainer"  # snakemake runs the rules in the image


def test_execute_runs_argv_lists_leaves_a_failed_run_out_and_compares_the_rest(tmp_path, monkeypatch):
    a = write(tmp_path / "a.yaml", {"backends": ["cpu"]})
    plan = ab.build_plan(args_for(tmp_path, "--baseline-config", str(a), "--runs", "2", "--name", "f"))
    calls, compared = [], []

    class Done:
        def __init__(self, rc):
            self.returncode = rc

    def fake_run(argv, **kw):
        assert isinstance(argv, list) and not kw.get("shell")
        calls.append(argv)
        assert Path(argv[argv.index("--configfile") + 1]).is_file()  # written before its run starts
        return Done(1 if argv[-1].startswith("results/f-b-01/") else 0)

    monkeypatch.setattr(ab.subprocess, "run", fake_run)
    monkeypatch.setattr(cli, "main", lambda argv: compared.append(argv) or 1)
    rc = ab.execute(plan, min_effect=0.1, out=io.StringIO())
    assert rc == 1 and len(calls) == 4
    argv = compared[0]
    assert argv[0] == "compare" and argv[argv.index("--baseline") + 1] == "f-a-01,f-a-02"
    assert argv[argv.index("--candidate") + 1] == "f-b-02" and argv[argv.index("--min-effect") + 1] == "0.1"
    record = json.loads((tmp_path / "results" / "ab" / "f" / ab.PLAN_FILE).read_text())
    assert record["order"] == ["f-a-01", "f-b-01", "f-a-02", "f-b-02"]
    assert [r["ok"] for r in record["runs"]] == [True, False, True, True]
    assert record["compare"]["returncode"] == 1
    cfg = yaml.safe_load((tmp_path / "results" / "ab" / "f" / "f-b-02.yaml").read_text())
    assert cfg["run"] == "f-b-02" and cfg["backends"] == ["cpu"]


def test_no_finished_run_on_a_side_is_unusable(tmp_path, monkeypatch):
    a = write(tmp_path / "a.yaml", {"backends": ["cpu"]})
    plan = ab.build_plan(args_for(tmp_path, "--baseline-config", str(a), "--runs", "1", "--name", "g"))
    monkeypatch.setattr(ab.subprocess, "run", lambda argv, **kw: type("D", (), {"returncode": 3})())
    monkeypatch.setattr(cli, "main", lambda argv: pytest.fail("compared without runs"))
    assert ab.execute(plan, out=io.StringIO()) == 2


# ---------------------------------------------------------------------------------------------- bad input


def bad_cases(tmp: Path) -> list[tuple[list[str], str]]:
    good = write(tmp / "good.yaml", {"backends": ["cpu"]})
    write(tmp / "badvalue.yaml", {"matmul": {"sizes": [0]}})
    (tmp / "notyaml.yaml").write_text("matmul: [1, 2\n")
    (tmp / "list.yaml").write_text("- 1\n")
    (tmp / "results" / "taken-a-01").mkdir(parents=True)
    lone = tmp / "lone" / "python"
    lone.parent.mkdir()
    lone.write_text("#!/bin/sh\n")
    lone.chmod(0o755)
    broken = fake_python(tmp / "broken")
    broken.write_text("#!/bin/sh\nexit 1\n")
    g = ["--baseline-config", str(good)]
    return [
        (["--baseline-config", str(tmp / "missing.yaml")], "--baseline-config"),
        ([*g, "--candidate-config", str(tmp / "notyaml.yaml")], "--candidate-config"),
        ([*g, "--candidate-config", str(tmp / "list.yaml")], "--candidate-config"),
        ([*g, "--candidate-config", str(tmp / "badvalue.yaml")], "matmul.sizes"),
        ([*g, "--runs", "0"], "--runs"),
        ([*g, "--order", "shuffled"], "--order"),
        ([*g, "--name", "has space"], "--name"),
        ([*g, "--name", "taken", "--runs", "1"], "--name"),
        ([*g, "--min-effect", "1.5"], "--min-effect"),
        ([*g, "--cores", "0"], "--cores"),
        ([*g, "--baseline-image", "x/y:1"], "--baseline-image"),
        ([*g, "--candidate-python", str(tmp / "nope" / "python")], "--candidate-python"),
        ([*g, "--candidate-python", str(lone)], "--candidate-python"),
        ([*g, "--baseline-python", str(broken)], "--baseline-python"),
        ([*g, "--snakefile", str(tmp / "Snakefile")], "--snakefile"),
    ]


def test_bad_input_is_one_line_naming_the_key_exit_2_and_nothing_run(tmp_path, monkeypatch, capsys):
    cases = bad_cases(tmp_path)
    monkeypatch.setattr(ab, "execute", lambda *a, **k: pytest.fail("a run started on bad input"))
    for extra, key in cases:
        rc = cli.main(["ab", "--workdir", str(tmp_path), *extra])
        err = capsys.readouterr().err.strip()
        assert rc == 2, (extra, err)
        assert len(err.splitlines()) == 1 and err.startswith("accelbench ab: ") and key in err, (extra, err)
    assert not (tmp_path / "results" / "ab").exists()


def test_an_image_config_error_names_the_image_key(tmp_path, capsys):
    cfg = write(tmp_path / "c.yaml", {"backends": ["cpu"], "container": {"runtime": "docker"}})
    rc = cli.main(["ab", "--workdir", str(tmp_path), "--baseline-config", str(cfg), "--baseline-image", "bad image"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "--baseline-image" in err and "container.images.cpu" in err


def test_dry_run_prints_the_plan_and_runs_nothing(tmp_path, capsys):
    cfg = write(tmp_path / "c.yaml", {"backends": ["cpu"]})
    rc = cli.main(["ab", "--workdir", str(tmp_path), "--baseline-config", str(cfg), "--runs", "1", "--dry-run"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert rc == 0 and [ln.split()[0] for ln in lines] == ["ab-a-01", "ab-b-01"]
    assert json.loads(lines[0].split(": ", 1)[1])[1:3] == ["-m", "snakemake"]
    assert not (tmp_path / "results").exists()


# ---------------------------------------------------------------------------------------------- for real


@pytest.mark.slow
def test_a_tiny_interleaved_ab_makes_four_runs_and_a_verdict(tmp_path, capsys):
    """Two runs a side of the tiny config, A B A B, each a real snakemake run; then the group compare."""
    cfg = write(tmp_path / "tiny.yaml", copy.deepcopy(AB_TINY))
    rc = cli.main(
        ["ab", "--workdir", str(tmp_path), "--baseline-config", str(cfg), "--runs", "2", "--name", "t", "--cores", "2"]
    )
    out = capsys.readouterr().out
    assert rc in (0, 1), out
    results = tmp_path / "results"
    ids = ["t-a-01", "t-b-01", "t-a-02", "t-b-02"]
    for rid in ids:
        info = json.loads((results / rid / registry.RUN_FILE).read_text())
        assert info["run"] == rid
        assert (results / rid / registry.DEVICES_FILE).is_file() and (
            results / rid / registry.HISTORY_RECEIPT
        ).is_file()
    record = json.loads((results / "ab" / "t" / ab.PLAN_FILE).read_text())
    assert record["order"] == ids and all(r["ok"] for r in record["runs"])
    finished = [(results / rid / registry.HISTORY_RECEIPT).stat().st_mtime for rid in ids]
    assert finished == sorted(finished)  # measured in the planned order, one after another
    csvs = [p for p in (results / "ab" / "t" / "compare").glob("*.csv") if "verdict" in pd.read_csv(p, nrows=0).columns]
    assert csvs, "no compare CSV"
    points = pd.read_csv(csvs[0])
    assert len(points) and set(points["verdict"]) <= set(registry.COMPARE_VERDICTS)
    assert (points["baseline_runs"].max(), points["candidate_runs"].max()) == (2, 2)
    assert "2 baseline and 2 candidate runs" in out
