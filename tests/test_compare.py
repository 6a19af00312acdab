"""``accelbench compare`` on fixture runs (tests/fixture_runs.py, with their raw samples): groups of runs with
planted effects (more runs of a fixture's config, ``write_replicates``: each run's medians times a factor),
1 run a side (inconclusive without a measured spread, decided with one from the history store), matching by
identity, unmatched points per side, provenance named next to the verdicts, AMP changes with intervals, the CSVs,
the printed table (regressions first), the exit codes 0/1/2, bad input as one line with nothing written (missing
or corrupt runs, empty groups, groups that mix device models or configs), published references, and the report's
"Compared with" section."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from accelbench import registry
from accelbench.cli import main
from accelbench.reporting import compare as C
from accelbench.run.io import atomic_write_parquet, read_parquet
from fixture_runs import write_cpu_run, write_cuda_run, write_replicates, write_samples, write_slower_cpu_run

JITTER = [1.02, 0.98]  # two more runs of a config: their medians 2% above and below the first run's
BASE = "laptop-cpu,laptop-cpu-r1,laptop-cpu-r2"
CAND = "laptop-cpu-1t,laptop-cpu-1t-r1,laptop-cpu-1t-r2"
GROUPS_CSV = "laptop-cpu+2__laptop-cpu-1t+2.csv"


@pytest.fixture
def results(tmp_path):
    r = tmp_path / "results"
    for run, seed in (
        (write_cpu_run(r), 0),  # laptop-cpu: 2 threads
        (write_slower_cpu_run(r), 1),  # laptop-cpu-1t: 1 thread, float32 n >= 1024 1.9x the time
        (write_cpu_run(r, run_id="laptop-cpu-again"), 0),
    ):  # the same numbers and samples again
        write_samples(run, seed=seed, blocks_column=True)  # with the blocks column, as the stages write it
    return r


@pytest.fixture
def groups(results):
    """Three runs a side: laptop-cpu (+ -r1, -r2) and laptop-cpu-1t (+ -r1, -r2), medians times 1, 1.02, 0.98."""
    write_replicates(results / "laptop-cpu", results, JITTER)
    write_replicates(results / "laptop-cpu-1t", results, JITTER[::-1])
    return results


def compare(results, *args, capsys=None):
    rc = main(["compare", "--results", str(results), *args])
    out = capsys.readouterr() if capsys else None
    return rc, out


def test_planted_slowdown_in_groups_of_3_is_slower_with_threads_named_and_exit_1(groups, capsys):
    rc, out = compare(groups, "--baseline", BASE, "--candidate", CAND, capsys=capsys)
    assert rc == 1
    df = pd.read_csv(groups / "compare" / GROUPS_CSV)
    assert list(df.columns[: len(registry.COMPARE_COLUMNS)]) == list(registry.COMPARE_COLUMNS)
    assert df["baseline_run"].iloc[0] == BASE and df["candidate_run"].iloc[0] == CAND
    slower = df[df["verdict"] == "slower"]
    assert sorted(zip(slower["dtype"], slower["n"])) == [("float32", 1024), ("float32", 2048)]
    assert (slower["time_ratio_ci95_low"] > 1).all()  # the interval of the time ratio excludes 1
    assert slower["time_ratio"].tolist() == pytest.approx([1.9, 1.9])  # the planted 1.9x (geometric means)
    assert slower["speed_change_pct"].round().tolist() == [-47, -47]
    assert (slower["provenance_diff"] == "threads 2\u21921").all()
    assert df.index[df["verdict"] == "slower"].tolist() == [0, 1]  # regressions first
    both = df[(df["match"] == "both") & df["speed_change_pct"].notna()]
    assert (both["baseline_runs"] == 3).all() and (both["candidate_runs"] == 3).all()
    assert (both["spread_source"] == "groups").all() and (both["method"] == "welch_t_log_run_medians").all()
    # the runs' spread: log(1.02), 0, log(0.98) on each side, pooled
    spread = np.std(np.log([1.0, 1.02, 0.98]), ddof=1)
    assert both["spread_log_sd"].to_numpy() == pytest.approx(np.full(len(both), spread))
    assert (both["t_df"] > 3.9).all() and (slower["p_value"] < 0.001).all() and (slower["tost_p"] > 0.5).all()
    others = both[both["verdict"] != "slower"]
    assert (others["verdict"] == "same").all() and len(others) > 10 and (others["tost_p"] < 0.05).all()
    lines = out.out.splitlines()
    assert "(baseline, 3 runs)" in lines[0] and "Welch" in lines[0]
    assert lines[1].split()[0] == "slower" and "threads 2\u21921" in lines[1]
    assert lines[-1].startswith("laptop-cpu-1t+2 against laptop-cpu+2 (3 vs 3 runs): 2 of")
    assert "slower \u221247% [" in lines[-1]
    assert "wrote" in out.err


def test_one_run_a_side_is_inconclusive_without_history(results, capsys):
    rc, out = compare(results, "laptop-cpu", "laptop-cpu-1t", capsys=capsys)
    assert rc == 0  # nothing is shown slower: nothing can be, from one run a side
    df = pd.read_csv(results / "compare" / "laptop-cpu__laptop-cpu-1t.csv")
    measured = df[(df["match"] == "both") & df["speed_change_pct"].notna()]
    assert len(measured) > 10 and (measured["verdict"] == "inconclusive").all()
    assert (measured["reason"] == "1 run per side").all() and (measured["spread_source"] == "none").all()
    assert measured["time_ratio_ci95_low"].isna().all() and measured["p_value"].isna().all()
    planted = measured[(measured["dtype"] == "float32") & (measured["n"] >= 1024)]
    assert planted["time_ratio"].tolist() == pytest.approx([1.9, 1.9])  # the estimate is still shown
    assert "for want of a between-run spread: 1 run per side" in out.out.splitlines()[-1]


def test_one_run_a_side_uses_the_spread_measured_in_history(results, capsys):
    """Four more runs of the baseline's config in the history store: their spread (about 1.3%) decides."""
    more = write_replicates(results / "laptop-cpu", results, [1.01, 0.99, 1.0, 1.02], prefix="night")
    assert main(["history", "add", *map(str, more), "--store", str(results / registry.HISTORY_FILE)]) == 0
    capsys.readouterr()
    rc, out = compare(results, "laptop-cpu", "laptop-cpu-1t", capsys=capsys)
    assert rc == 1
    df = pd.read_csv(results / "compare" / "laptop-cpu__laptop-cpu-1t.csv")
    measured = df[(df["match"] == "both") & df["speed_change_pct"].notna()]
    assert (measured["spread_source"] == "history").all() and (measured["t_df"] == 3).all()
    assert measured["spread_log_sd"].to_numpy() == pytest.approx(
        np.full(len(measured), np.std(np.log([1.01, 0.99, 1.0, 1.02]), ddof=1))
    )
    slower = measured[measured["verdict"] == "slower"]
    assert sorted(zip(slower["dtype"], slower["n"])) == [("float32", 1024), ("float32", 2048)]
    assert (measured.loc[measured["verdict"] != "slower", "verdict"] == "same").all()
    assert measured["reason"].str.contains("from history history.duckdb: 4 runs on laptop").all()
    assert "from history" in out.out.splitlines()[1]  # the borrowed spread is named next to the verdict
    rc, _ = compare(
        results,
        "laptop-cpu",
        "laptop-cpu-1t",
        "--history",
        "none",
        "--out-dir",
        str(results / "elsewhere"),
        capsys=capsys,
    )
    assert rc == 0


def test_identical_groups_are_the_same_and_exit_0(groups, capsys):
    write_replicates(groups / "laptop-cpu-again", groups, JITTER)
    rc, out = compare(
        groups,
        "--baseline",
        BASE,
        "--candidate",
        "laptop-cpu-again,laptop-cpu-again-r1,laptop-cpu-again-r2",
        capsys=capsys,
    )
    assert rc == 0
    df = pd.read_csv(groups / "compare" / "laptop-cpu+2__laptop-cpu-again+2.csv")
    measured = df[df["speed_change_pct"].notna()]
    assert (measured["verdict"] == "same").all() and measured["time_ratio"].tolist() == pytest.approx(
        [1.0] * len(measured)
    )
    assert not (df["verdict"] == "slower").any()
    prov = pd.read_csv(groups / "compare" / "laptop-cpu+2__laptop-cpu-again+2_provenance.csv")
    assert prov.empty  # nothing but the run id differs
    assert "0 of" in out.out.splitlines()[-1]


@pytest.mark.parametrize(
    "factors,effect,verdict",
    [
        ([1.0, 1.03, 0.97, 1.01, 0.99], 1.12, "slower"),  # 12% slower, 5 runs a side, a 2% spread
        ([1.0, 1.03, 0.97, 1.01, 0.99], 1 / 1.12, "faster"),
        ([1.0, 1.12, 0.9, 1.06, 0.95], 1.06, "inconclusive"),  # 6% within a 8% spread: neither shown nor ruled out
    ],
)
def test_planted_effects_in_groups_of_5(results, capsys, factors, effect, verdict):
    base = write_replicates(results / "laptop-cpu", results, factors, prefix="a")
    cand = write_replicates(results / "laptop-cpu", results, [f * effect for f in factors[::-1]], prefix="b")
    rc, _ = compare(
        results,
        "--baseline",
        ",".join(p.name for p in base),
        "--candidate",
        ",".join(map(str, cand)),
        "--no-plot",
        capsys=capsys,
    )  # ids and folders alike
    assert rc == (1 if verdict == "slower" else 0)
    df = pd.read_csv(results / "compare" / "a-r1+4__b-r1+4.csv")
    measured = df[(df["match"] == "both") & df["speed_change_pct"].notna()]
    assert len(measured) > 10 and (measured["verdict"] == verdict).all(), measured["verdict"].value_counts()
    assert measured["time_ratio"].to_numpy() == pytest.approx(np.full(len(measured), effect))
    if verdict == "inconclusive":
        assert measured["reason"].str.startswith("interval crosses \u00b15%").all()


def test_a_run_with_an_unstable_point_is_left_out_of_that_point(groups, capsys):
    path = groups / "laptop-cpu-r1" / "matmul_cpu.csv"
    mm = pd.read_csv(path)
    mm.loc[(mm["dtype"] == "float32") & (mm["n"] == 512) & mm["shape_name"].isna(), "status"] = "unstable"
    path.write_text(mm.to_csv(index=False))
    compare(groups, "--baseline", BASE, "--candidate", CAND, "--no-plot", capsys=capsys)
    df = pd.read_csv(groups / "compare" / GROUPS_CSV)
    row = df[(df["dtype"] == "float32") & (df["n"] == 512) & df["time_ratio"].notna()].iloc[0]
    assert row["baseline_runs"] == 2 and row["candidate_runs"] == 3 and row["baseline_status"] == "ok/unstable"
    assert "baseline: 1 of 3 runs left out (1 unstable)" in row["reason"]


def test_runs_by_label(groups, capsys):
    for run in CAND.split(","):
        info = json.loads((groups / run / "run.json").read_text())
        (groups / run / "run.json").write_text(json.dumps({**info, "label": "one-thread"}))
    rc, _ = compare(groups, "--baseline", BASE, "--candidate", "one-thread", "--no-plot", capsys=capsys)
    assert rc == 1
    df = pd.read_csv(groups / "compare" / GROUPS_CSV)
    assert df["candidate_run"].iloc[0] == CAND


def test_unmatched_points_are_listed_per_side(results, capsys):
    cand = results / "laptop-cpu-1t"
    mm = pd.read_csv(cand / "matmul_cpu.csv")
    mm = mm[(mm["n"] != 256) | mm["shape_name"].notna()]  # the candidate lacks n=256 ...
    extra = mm[(mm["n"] == 512) & mm["shape_name"].isna()].assign(m=4096, n=4096, k=4096)  # ... and has n=4096
    mm = pd.concat([mm, extra])
    (cand / "matmul_cpu.csv").write_text(mm.to_csv(index=False))
    info = json.loads((cand / "run.json").read_text())
    info["config"]["matmul"]["sizes"] = [512, 1024, 2048, 4096]
    (cand / "run.json").write_text(json.dumps(info))
    write_samples(cand, seed=1)
    rc, out = compare(results, "laptop-cpu", "laptop-cpu-1t", capsys=capsys)
    assert rc == 0
    df = pd.read_csv(results / "compare" / "laptop-cpu__laptop-cpu-1t.csv")
    only_b, only_c = df[df["match"] == "baseline_only"], df[df["match"] == "candidate_only"]
    assert set(only_b["n"]) == {256} and len(only_b) == 4  # float32, bfloat16, float16, fp8 at n=256
    assert set(only_c["n"]) == {4096}
    assert (only_b["verdict"].isna()).all() and (only_b["reason"] == "only in the baseline").all()
    assert "only in laptop-cpu (4): matmul cpu float32 n=256" in out.out
    assert "only in laptop-cpu-1t (4)" in out.out


def test_method_version_and_config_differences_are_named(results):
    cand = results / "laptop-cpu-1t"
    for name in ("matmul_cpu.csv",):
        df = pd.read_csv(cand / name)
        df["method_version"] = 2
        (cand / name).write_text(df.to_csv(index=False))
    info = json.loads((cand / "run.json").read_text())
    info["config"]["matmul"]["rotate_inputs"] = False
    info["config"]["matmul"]["sizes"] = info["config"]["matmul"]["sizes"]  # not a timing key: never named
    (cand / "run.json").write_text(json.dumps(info))
    base_run, cand_run = (C.load_run(results / r) for r in ("laptop-cpu", "laptop-cpu-1t"))
    cmp = C.compare_runs(base_run, cand_run)
    mm = cmp.points[(cmp.points["table"] == "matmul") & (cmp.points["match"] == "both")]
    assert mm["provenance_diff"].str.startswith("method_version 0\u21922; threads 2\u21921").all()  # 0: files before it
    assert mm["provenance_diff"].str.contains("matmul.rotate_inputs true\u2192false").all()
    amp = cmp.points[cmp.points["table"] == "amp_trials"]
    assert not amp["provenance_diff"].str.contains("method_version|rotate_inputs").any()
    prov = cmp.provenance
    assert {
        ("matmul cpu", "method_version"),
        ("matmul cpu", "threads"),
        ("config", "matmul.rotate_inputs"),
        ("config", "cpu_threads"),
    } <= set(zip(prov["scope"], prov["field"]))
    assert C.verdict_text(mm.iloc[0]).startswith("inconclusive \u221247%; method_version 0\u21922")
    assert C.verdict_text(mm.iloc[0]).endswith("; 1 run per side")


def test_amp_speedup_and_accuracy_changes_have_intervals(results):
    cand = results / "laptop-cpu-1t"
    tr = pd.read_csv(cand / "amp_cpu_trials.csv")
    amp = tr["mode"] == "amp_bf16"
    workloads = sorted(tr["workload"].unique())
    per_workload = tr.loc[amp, "workload"].nunique()  # 3 seeds each
    tr.loc[amp, "step_median_s"] = tr.loc[amp, "step_median_s"] / 2.0 * np.array([1.0, 1.02, 0.98] * per_workload)
    tr.loc[amp, "test_acc"] = tr.loc[amp, "test_acc"] - 0.05 + np.array([0.0, 0.004, -0.004] * per_workload)
    (cand / "amp_cpu_trials.csv").write_text(tr.to_csv(index=False))
    cmp = C.compare_runs(C.load_run(results / "laptop-cpu"), C.load_run(cand))
    a = cmp.extras["amp"].set_index("workload")
    assert sorted(a.index) == workloads and len(workloads) >= 2 and (a["seeds"] == 3).all()
    for w in a.index:
        assert a.at[w, "speedup_ratio_ci95_low"] < 2.0 < a.at[w, "speedup_ratio_ci95_high"]
        assert a.at[w, "speedup_ratio"] == pytest.approx(2.0, rel=0.02)
        assert a.at[w, "acc_diff_change"] == pytest.approx(-0.05, abs=1e-9)
        assert a.at[w, "acc_diff_change_ci95_low"] < -0.05 < a.at[w, "acc_diff_change_ci95_high"] < 0
        assert a.at[w, "baseline_speedup"] == pytest.approx(0.42)  # each run's own speedup, from its summary
    text = C.format_table(cmp)
    assert "AMP cpu mlp amp_bf16: speedup 0.42\u00d7" in text


def test_compare_extras_write_the_files_compare_files_names_and_read_back(results, tmp_path):
    """Each stage's own comparison (registry.COMPARE_EXTRAS) goes to the file registry.compare_files names for its
    key (the AMP one still <stem>_amp.csv, as files written before the plug-in hook), and reads back as written;
    a missing one reads as empty."""
    assert {"amp"} <= {x.key for x in registry.COMPARE_EXTRAS}
    cmp = C.compare_runs(C.load_run(results / "laptop-cpu"), C.load_run(results / "laptop-cpu-1t"))
    paths = C.write(cmp, tmp_path, plot=False)
    names = registry.compare_files(cmp.baseline, cmp.candidate)
    assert names["amp"] == "compare/laptop-cpu__laptop-cpu-1t_amp.csv"
    back = C.read_comparison(paths["points"])
    for x in registry.COMPARE_EXTRAS:
        assert paths[x.key] == tmp_path / Path(names[x.key]).name and paths[x.key].is_file(), x.key
        built = cmp.extras[x.key]
        assert len(built) >= 1, x.key  # the fixture runs have something for each extra to compare
        pd.testing.assert_frame_equal(back.extras[x.key], built, check_dtype=False)
        assert x.lines.load()(back.extras[x.key]) == x.lines.load()(built)
        assert set(x.lines.load()(built)) <= set(C.format_table(back).splitlines())
    paths["amp"].unlink()
    assert C.read_comparison(paths["points"]).extras["amp"].empty


# ---- bad input: exit 2, one line naming the run or file, nothing written --------------------------------------


def assert_bad_input(rc, out, results, *needles):
    assert rc == 2
    err = [l for l in out.err.splitlines() if l.strip()]
    assert len(err) == 1 and err[0].startswith("accelbench compare: "), out.err
    for needle in needles:
        assert needle in err[0], err[0]
    assert not (results / "compare").exists()


def test_missing_baseline(results, capsys):
    rc, out = compare(results, "no-such-run", "laptop-cpu", capsys=capsys)
    assert_bad_input(rc, out, results, "no-such-run: no such run")


@pytest.mark.parametrize("damage", ["truncate", "garbage", "drop_samples", "drop_column"])
def test_baseline_with_a_corrupt_sample_file(results, capsys, damage):
    path = results / "laptop-cpu" / "matmul_cpu_samples.parquet"
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(b"PAR1" + bytes(range(256)) * 3)
    elif damage == "drop_samples":  # a readable file that lost rows: the CSV says more blocks were timed
        df = read_parquet(path)
        atomic_write_parquet(path, df.iloc[: len(df) - 5])
    else:
        atomic_write_parquet(path, read_parquet(path).drop(columns=["sample_s"]))
    rc, out = compare(results, "laptop-cpu", "laptop-cpu-1t", capsys=capsys)
    assert_bad_input(rc, out, results, str(path))


def test_baseline_with_a_missing_sample_file(results, capsys):
    path = results / "laptop-cpu" / "warmup_cpu_samples.parquet"
    path.unlink()
    rc, out = compare(results, "laptop-cpu", "laptop-cpu-1t", capsys=capsys)
    assert_bad_input(rc, out, results, str(path), "missing sample file")


def test_baseline_with_a_truncated_csv(results, capsys):
    from fixture_runs import corrupt

    path = results / "laptop-cpu" / "matmul_cpu.csv"
    corrupt(path, "truncate")
    rc, out = compare(results, "laptop-cpu", "laptop-cpu-1t", capsys=capsys)
    assert_bad_input(rc, out, results, str(path), "truncated")


def test_baseline_with_no_matching_points(results, capsys):
    write_cuda_run(results)  # another machine: an EPYC host and an H100, none of the laptop's devices
    rc, out = compare(results, "gpu-node-h100", "laptop-cpu", capsys=capsys)
    assert_bad_input(rc, out, results, "no point of run gpu-node-h100 matches", "device model")


def test_any_device_model_matches_across_machines_and_names_the_model(results, capsys):
    write_cuda_run(results)
    rc, out = compare(results, "gpu-node-h100", "laptop-cpu", "--any-device-model", capsys=capsys)
    assert rc in (0, 1)
    df = pd.read_csv(results / "compare" / "gpu-node-h100__laptop-cpu.csv")
    both = df[df["match"] == "both"]
    assert set(both["backend"]) == {"cpu"} and (df.loc[df["backend"] == "cuda", "match"] == "baseline_only").all()
    assert both["provenance_diff"].str.contains("device AMD EPYC 7V13 64-Core Processor\u2192AMD Ryzen").all()


def test_a_group_that_mixes_configs(groups, capsys):
    rc, out = compare(groups, "--baseline", "laptop-cpu,laptop-cpu-1t", "--candidate", "laptop-cpu-r1", capsys=capsys)
    assert_bad_input(
        rc,
        out,
        groups,
        "--baseline: runs laptop-cpu and laptop-cpu-1t mix configs (cpu_threads 0 vs 1)",
        "--allow-mixed",
    )
    rc, _ = compare(
        groups,
        "--baseline",
        "laptop-cpu,laptop-cpu-1t,laptop-cpu-r2",
        "--candidate",
        "laptop-cpu-r1,laptop-cpu-1t-r1",
        "--allow-mixed",
        "--no-plot",
        capsys=capsys,
    )
    assert rc == 0 and (groups / "compare" / "laptop-cpu+2__laptop-cpu-r1+1.csv").is_file()


def test_a_group_that_mixes_device_models(groups, capsys):
    path = groups / "laptop-cpu-r2" / "matmul_cpu.csv"
    mm = pd.read_csv(path)
    mm["device_name"] = "Another CPU"
    path.write_text(mm.to_csv(index=False))
    rc, out = compare(groups, "--baseline", BASE, "--candidate", CAND, capsys=capsys)
    assert_bad_input(
        rc,
        out,
        groups,
        "--baseline: runs laptop-cpu and laptop-cpu-r2 mix device models on cpu cpu",
        "Another CPU",
        "--allow-mixed",
    )


def test_a_corrupt_run_in_a_group(groups, capsys):
    path = groups / "laptop-cpu-1t-r2" / "matmul_cpu_samples.parquet"
    path.write_bytes(path.read_bytes()[:100])
    rc, out = compare(groups, "--baseline", BASE, "--candidate", CAND, capsys=capsys)
    assert_bad_input(rc, out, groups, str(path), "corrupt or truncated")


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--baseline", "", "--candidate", "laptop-cpu-1t"], "--baseline: empty group"),
        (["--baseline", " , ", "--candidate", "laptop-cpu-1t"], "--baseline: empty group"),
        (["--baseline", "laptop-cpu"], "--candidate: empty group"),
        (["--baseline", "laptop-cpu,,laptop-cpu-r1", "--candidate", "laptop-cpu-1t"], "has an empty entry"),
        (["--baseline", "laptop-cpu,no-such-run", "--candidate", "laptop-cpu-1t"], "no-such-run: no such run"),
        (["--baseline", "laptop-cpu,laptop-cpu", "--candidate", "laptop-cpu-1t"], "laptop-cpu is given twice"),
        (["--baseline", "laptop-cpu,laptop-cpu-r1", "--candidate", "laptop-cpu-r1"], "laptop-cpu-r1 is in both groups"),
        (["laptop-cpu", "--baseline", "laptop-cpu-r1", "--candidate", "laptop-cpu-1t"], "given with --baseline"),
    ],
)
def test_bad_groups(groups, capsys, args, needle):
    rc, out = compare(groups, *args, capsys=capsys)
    assert_bad_input(rc, out, groups, needle)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["a", "b", "c"], "3 runs given"),
        ([], "no run given"),
        (["laptop-cpu"], "one run given"),
        (["laptop-cpu", "laptop-cpu-1t", "--min-effect", "1.5"], "--min-effect: 1.5 is out of range"),
        (["laptop-cpu", "laptop-cpu-1t", "--min-effect", "-0.1"], "--min-effect"),
    ],
)
def test_bad_arguments(results, capsys, args, needle):
    rc, out = compare(results, *args, capsys=capsys)
    assert_bad_input(rc, out, results, needle)


def test_exit_zero_for_the_workflow_and_the_outputs_it_declares(groups, tmp_path, capsys):
    out_dir = tmp_path / "elsewhere"
    rc, _ = compare(
        groups, "--baseline", BASE, "--candidate", CAND, "--exit-zero", "--out-dir", str(out_dir), capsys=capsys
    )
    assert rc == 0  # 1 without --exit-zero (the planted slowdown)
    names = registry.compare_files(C.group_name(BASE.split(",")), C.group_name(CAND.split(",")))
    for path in names.values():
        assert (out_dir / Path(path).name).stat().st_size > 100, path
    assert (out_dir / GROUPS_CSV.replace(".csv", ".png")).read_bytes()[:4] == b"\x89PNG"


def test_run_folders_work_as_well_as_ids(groups, capsys):
    folders = [",".join(str(groups / r) for r in side.split(",")) for side in (BASE, CAND)]
    rc, _ = compare(groups, "--baseline", folders[0], "--candidate", folders[1], capsys=capsys)
    assert rc == 1
    rc, _ = compare(groups, str(groups / "laptop-cpu"), str(groups / "laptop-cpu-1t"), capsys=capsys)
    assert rc == 0  # the positional form: one run a side


# ---- published references --------------------------------------------------------------------------------


def test_against_references_for_one_run(results, capsys):
    write_cuda_run(results)
    rc, out = compare(results, "gpu-node-h100", "--against", "references", capsys=capsys)
    assert rc == 0
    lines = out.out.splitlines()
    bf16 = next(l for l in lines if "BF16" in l)
    assert bf16.startswith(
        "references: cuda:0 NVIDIA H100 80GB HBM3: 712 TFLOP/s BF16 = 90% of the best published "
        "(mamf-finder NVIDIA H100 SXM, 794.5 TFLOP/s, searched shape 2048x2048x13312; here square "
        "n=16384)"
    )
    assert "statistic: mean of iterations there, median of timed blocks here" in bf16
    assert not (results / "compare").exists()  # a reference check writes nothing
    rc, out = compare(results, "laptop-cpu", "--against", "references", capsys=capsys)
    assert rc == 0 and "no published figure" in out.out


# ---- the report's section ---------------------------------------------------------------------------------


def test_report_section_from_the_written_comparison(groups, tmp_path, capsys):
    from accelbench.reporting import html

    results = groups
    compare(results, "--baseline", BASE, "--candidate", CAND, capsys=capsys)
    agg = tmp_path / "agg"
    assert main(["aggregate", "--results", str(results), "--out-dir", str(agg)]) == 0
    ctx = html.build_context(agg, tmp_path / "no-plots", comparison=results / "compare" / GROUPS_CSV)
    cm = ctx["comparison"]
    assert cm["baseline"] == "laptop-cpu+2" and cm["candidate"] == "laptop-cpu-1t+2"
    assert cm["headline"].startswith("laptop-cpu-1t+2 against laptop-cpu+2 (3 vs 3 runs): 2 of ")
    assert "threads 2\u21921" in cm["headline"]
    assert [p["verdict"] for p in cm["points"][:2]] == ["slower", "slower"]
    assert cm["figure"]["uri"].startswith("data:image/png;base64,")
    assert {(p["scope"], p["field"]) for p in cm["provenance"]} >= {("matmul cpu", "threads")}
    amp = next(x for x in cm["extras"] if x["key"] == "amp")  # the AMP stage's own comparison (its CompareExtra)
    assert amp["include"] == "accelbench.stages.amp/compare.html.j2"
    assert [a["workload"] for a in amp["rows"]] == ["mlp", "transformer", "gpt", "resnet"]  # the fixture's plan order
    page = html.render(ctx)
    assert page.index('id="summary"') < page.index('id="compare"') < page.index('id="environment"')
    assert "<h2>Compared with laptop-cpu+2</h2>" in page
    card = page[page.index('<div class="card" id="compare-amp">') : page.index("<details", page.index('id="compare"'))]
    assert card.count("<tr data-workload=") == 4 and page.index('id="compare-provenance"') < page.index(card)
    assert '<th class="num">laptop-cpu+2</th><th class="num">laptop-cpu-1t+2</th>' in card
    assert html.build_context(agg, tmp_path / "no-plots")["comparison"] is None
