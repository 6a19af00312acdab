"""``accelbench compare`` on fixture runs (tests/fixture_runs.py, with their raw samples): matching by identity,
unmatched points per side, provenance named next to the verdicts, AMP changes with intervals, the CSVs, the
printed table (regressions first), the exit codes 0/1/2, bad input as one line with nothing written, published
references, and the report's "Compared with" section."""

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
from fixture_runs import write_cpu_run, write_cuda_run, write_samples, write_slower_cpu_run


@pytest.fixture
def results(tmp_path):
    r = tmp_path / "results"
    for run, seed in ((write_cpu_run(r), 0),  # laptop-cpu: 2 threads
                      (write_slower_cpu_run(r), 1),  # laptop-cpu-1t: 1 thread, float32 n >= 1024 1.9x the time
                      (write_cpu_run(r, run_id="laptop-cpu-again"), 0)):  # the same numbers and samples again
        write_samples(run, seed=seed, blocks_column=True)  # with the blocks column, as the stages write it
    return r


def compare(results, *args, capsys=None):
    rc = main(["compare", "--results", str(results), *args])
    out = capsys.readouterr() if capsys else None
    return rc, out


def test_planted_slowdown_is_slower_with_threads_named_and_exit_1(results, capsys):
    rc, out = compare(results, "laptop-cpu", "laptop-cpu-1t", capsys=capsys)
    assert rc == 1
    df = pd.read_csv(results / "compare" / "laptop-cpu__laptop-cpu-1t.csv")
    assert list(df.columns[: len(registry.COMPARE_COLUMNS)]) == list(registry.COMPARE_COLUMNS)
    slower = df[df["verdict"] == "slower"]
    assert sorted(zip(slower["dtype"], slower["n"])) == [("float32", 1024), ("float32", 2048)]
    assert (slower["time_ratio_ci95_low"] > 1).all()  # the interval of the time ratio excludes 1
    assert ((slower["time_ratio"] - 1.9).abs() < 0.02 * 1.9).all()  # the planted 1.9x, from independent samples
    assert slower["speed_change_pct"].round().tolist() == [-47, -47]
    assert (slower["provenance_diff"] == "threads 2\u21921").all()
    assert df.index[df["verdict"] == "slower"].tolist() == [0, 1]  # regressions first
    lines = out.out.splitlines()
    assert lines[1].split()[0] == "slower" and "threads 2\u21921" in lines[1]
    assert "slower \u221247% [" in out.out.splitlines()[-1] and "2 of" in lines[-1]
    others = df[(df["match"] == "both") & df["speed_change_pct"].notna() & (df["verdict"] != "slower")]
    assert (others["verdict"] == "same").all() and len(others) > 10
    assert "wrote" in out.err


def test_identical_runs_are_the_same_and_exit_0(results, capsys):
    rc, out = compare(results, "laptop-cpu", "laptop-cpu-again", capsys=capsys)
    assert rc == 0
    df = pd.read_csv(results / "compare" / "laptop-cpu__laptop-cpu-again.csv")
    measured = df[df["speed_change_pct"].notna()]
    assert (measured["verdict"] == "same").all() and (measured["time_ratio"] == 1.0).all()
    assert not (df["verdict"] == "slower").any()
    prov = pd.read_csv(results / "compare" / "laptop-cpu__laptop-cpu-again_provenance.csv")
    assert prov.empty  # nothing but the run id differs
    assert "0 of" in out.out.splitlines()[-1]


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
    assert rc == 1
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
    assert {("matmul cpu", "method_version"), ("matmul cpu", "threads"), ("config", "matmul.rotate_inputs"),
            ("config", "cpu_threads")} <= set(zip(prov["scope"], prov["field"]))
    assert C.verdict_text(mm.iloc[0]).startswith("slower \u221247% [")


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
    a = cmp.amp.set_index("workload")
    assert sorted(a.index) == workloads and len(workloads) >= 2 and (a["seeds"] == 3).all()
    for w in a.index:
        assert a.at[w, "speedup_ratio_ci95_low"] < 2.0 < a.at[w, "speedup_ratio_ci95_high"]
        assert a.at[w, "speedup_ratio"] == pytest.approx(2.0, rel=0.02)
        assert a.at[w, "acc_diff_change"] == pytest.approx(-0.05, abs=1e-9)
        assert a.at[w, "acc_diff_change_ci95_low"] < -0.05 < a.at[w, "acc_diff_change_ci95_high"] < 0
        assert a.at[w, "baseline_speedup"] == pytest.approx(0.42)  # each run's own speedup, from its summary
    text = C.format_table(cmp)
    assert "AMP cpu mlp amp_bf16: speedup 0.42\u00d7" in text


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


@pytest.mark.parametrize("args,needle", [
    (["a", "b", "c"], "3 runs given"),
    (["laptop-cpu"], "one run given"),
    (["laptop-cpu", "laptop-cpu-1t", "--min-effect", "1.5"], "--min-effect: 1.5 is out of range"),
    (["laptop-cpu", "laptop-cpu-1t", "--min-effect", "-0.1"], "--min-effect"),
])
def test_bad_arguments(results, capsys, args, needle):
    rc, out = compare(results, *args, capsys=capsys)
    assert_bad_input(rc, out, results, needle)


def test_exit_zero_for_the_workflow_and_the_outputs_it_declares(results, tmp_path, capsys):
    out_dir = tmp_path / "elsewhere"
    rc, _ = compare(results, "laptop-cpu", "laptop-cpu-1t", "--exit-zero", "--out-dir", str(out_dir), capsys=capsys)
    assert rc == 0
    names = registry.compare_files("laptop-cpu", "laptop-cpu-1t")
    for path in names.values():
        assert (out_dir / Path(path).name).stat().st_size > 100, path
    assert (out_dir / "laptop-cpu__laptop-cpu-1t.png").read_bytes()[:4] == b"\x89PNG"


def test_run_folders_work_as_well_as_ids(results, capsys):
    rc, _ = compare(results, str(results / "laptop-cpu"), str(results / "laptop-cpu-1t"), capsys=capsys)
    assert rc == 1


# ---- published references --------------------------------------------------------------------------------

def test_against_references_for_one_run(results, capsys):
    write_cuda_run(results)
    rc, out = compare(results, "gpu-node-h100", "--against", "references", capsys=capsys)
    assert rc == 0
    lines = out.out.splitlines()
    bf16 = next(l for l in lines if "BF16" in l)
    assert bf16.startswith("references: cuda:0 NVIDIA H100 80GB HBM3: 712 TFLOP/s BF16 = 90% of the best published "
                           "(mamf-finder NVIDIA H100 SXM, 794.5 TFLOP/s, searched shape 2048x2048x13312; here square "
                           "n=16384)")
    assert "statistic: mean of iterations there, median of timed blocks here" in bf16
    assert not (results / "compare").exists()  # a reference check writes nothing
    rc, out = compare(results, "laptop-cpu", "--against", "references", capsys=capsys)
    assert rc == 0 and "no published figure" in out.out


# ---- the report's section ---------------------------------------------------------------------------------

def test_report_section_from_the_written_comparison(results, tmp_path, capsys):
    from accelbench.reporting import html

    compare(results, "laptop-cpu", "laptop-cpu-1t", capsys=capsys)
    agg = tmp_path / "agg"
    assert main(["aggregate", "--results", str(results), "--out-dir", str(agg)]) == 0
    ctx = html.build_context(agg, tmp_path / "no-plots", comparison=results / "compare" / "laptop-cpu__laptop-cpu-1t.csv")
    cm = ctx["comparison"]
    assert cm["baseline"] == "laptop-cpu" and cm["candidate"] == "laptop-cpu-1t"
    assert cm["headline"].startswith("laptop-cpu-1t against laptop-cpu: 2 of ")
    assert "threads 2\u21921" in cm["headline"]
    assert [p["verdict"] for p in cm["points"][:2]] == ["slower", "slower"]
    assert cm["figure"]["uri"].startswith("data:image/png;base64,")
    assert {(p["scope"], p["field"]) for p in cm["provenance"]} >= {("matmul cpu", "threads")}
    assert [a["workload"] for a in cm["amp"]] == ["mlp", "transformer", "gpt", "resnet"]  # the fixture's plan order
    page = html.render(ctx)
    assert page.index('id="summary"') < page.index('id="compare"') < page.index('id="environment"')
    assert "<h2>Compared with laptop-cpu</h2>" in page
    assert html.build_context(agg, tmp_path / "no-plots")["comparison"] is None
