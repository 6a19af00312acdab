"""The whole DAG, for real: `snakemake` on a tiny config in a temporary directory, then the outputs
checked — files exist, documented columns, plausible values. The scaling stage is switched on here (gloo
world sizes 1 and 2 on the 2 cores, so the run uses cpu_threads: 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from accelbench import backends, registry
from accelbench.measure import blocks
from accelbench.run import launch
from tiny_config import SCALING_ON, TINY
from workflow_runner import run_snakemake

PLOTS = list(registry.FIGURES)


def snakemake(workdir: Path, *args: str, timeout: int = 900):
    return run_snakemake(workdir, "--configfile", str(workdir / "config.yaml"), *args, timeout=timeout)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("pipeline")
    (work / "config.yaml").write_text(
        yaml.safe_dump({**TINY, "matmul": {**TINY["matmul"], "fp8": True}, "cpu_threads": 2, "scaling": SCALING_ON})
    )
    proc = snakemake(work, "--cores", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return work


@pytest.mark.slow
def test_every_stage_output_exists(tiny_run):
    run = tiny_run / "results" / "tiny"
    for name in ["run.json", "devices.json", *registry.run_files(["cpu"]), *registry.sample_files(["cpu"])]:
        assert (run / name).stat().st_size > 0, name
    for table in registry.TABLES:
        assert (tiny_run / "results" / "aggregate" / f"{table}.csv").exists(), table
    for p in PLOTS:
        for ext in ("png", "svg"):
            assert (tiny_run / "results" / "plots" / f"{p}.{ext}").stat().st_size > 1000, (p, ext)
    html = (tiny_run / "results" / "report.html").read_text()
    assert "<html" in html.lower() and "data:image/png;base64," in html


@pytest.mark.slow
def test_the_finished_run_is_in_the_history_store(tiny_run):
    """The history rule added the run (its receipt in the run folder), and the report's History section reads it."""
    from accelbench.reporting import history_store

    receipt = json.loads((tiny_run / "results" / "tiny" / registry.HISTORY_RECEIPT).read_text())
    assert receipt["runs"][0]["run_id"] == "tiny" and receipt["runs"][0]["points"] > 0
    points = history_store.read_points(tiny_run / "results" / registry.HISTORY_FILE)
    assert set(points["run_id"]) == {"tiny"} and len(points) == receipt["runs"][0]["points"]
    hist = pd.read_csv(tiny_run / "results" / "aggregate" / f"{registry.HISTORY_TABLE}.csv")
    assert set(hist["run_id"]) == {"tiny"}
    assert '<section id="history">' in (tiny_run / "results" / "report.html").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("name,kind", [(name, registry.table_of(name)) for name in registry.run_files(["cpu"])])
def test_documented_columns(tiny_run, name, kind):
    df = pd.read_csv(tiny_run / "results" / "tiny" / name)
    missing = [c for c in list(registry.TABLES[kind].columns) if c not in df.columns]
    assert not missing, f"{name} lacks documented columns {missing}"
    assert len(df) > 0
    assert (df["run_id"] == "tiny").all()


@pytest.mark.slow
def test_matmul_values_plausible(tiny_run):
    df = pd.read_csv(tiny_run / "results" / "tiny" / "matmul_cpu.csv")
    square = df[df["shape_name"].isna()]
    assert set(square["n"]) == {64, 128} and (square["m"] == square["n"]).all() and (square["k"] == square["n"]).all()
    shapes = df[df["shape_name"].notna()]
    assert set(shapes["shape_name"]) == {"qkv"} and set(zip(shapes["m"], shapes["n"], shapes["k"])) == {(64, 96, 32)}
    assert {"float32", "bfloat16", "float8_e4m3fn"} <= set(df["dtype"])  # fp8 on here (torch 2.13 has it on the CPU)
    assert set(df["status"]) <= set(registry.TABLES["matmul"].statuses)
    fp32 = df[df["dtype"] == "float32"]
    assert (fp32["tflops"] > 0).all(), fp32[["n", "tflops", "status"]]
    # tflops is 2mnk / median_s, in units of 1e12 FLOP/s
    expected = 2 * fp32["m"].astype(float) * fp32["n"] * fp32["k"] / fp32["median_s"] / 1e12
    assert ((fp32["tflops"] - expected).abs() <= 1e-6 * expected).all()
    # an interval exists from ORDER_MIN timed blocks on (a loaded machine may time fewer in min_run_time_s)
    timed = fp32["blocks"] >= blocks.ORDER_MIN
    with_ci = fp32[timed]
    assert (with_ci["ci95_low_s"] <= with_ci["median_s"]).all() and (
        with_ci["median_s"] <= with_ci["ci95_high_s"]
    ).all()
    assert fp32[~timed][["ci95_low_s", "ci95_high_s"]].isna().all().all()
    assert (fp32["rel_error"] < fp32["rel_error_max"]).all()
    assert (df["threads"] == 2).all()


@pytest.mark.slow
def test_search_and_bandwidth_values_plausible(tiny_run):
    run = tiny_run / "results" / "tiny"
    search = pd.read_csv(run / "matmul_search_cpu.csv")
    assert (search["grid_points"] == 8).all() and "coarse" in set(search["phase"])
    # a search that converged confirmed its finalists; one the budget stopped says so (the budget's enforcement
    # is tested against a fake clock in tests/test_shape_search.py: wall time is no assertion here)
    stop = set(search["stop_reason"])
    assert "confirm" in set(search["phase"]) or stop == {"budget"}, stop
    best = search[search["best"]]
    assert len(best) == 1 and best["tflops"].iloc[0] > 0
    assert best["tflops_ci95_low"].iloc[0] <= best["tflops"].iloc[0] <= best["tflops_ci95_high"].iloc[0]
    assert (search["budget_s"] == TINY["matmul"]["search"]["budget_s"]).all() and (search["search_s"] > 0).all()
    bw = pd.read_csv(run / "membw_cpu.csv")
    triad = bw[(bw["kernel"] == "triad") & bw["status"].isin(["ok", "unstable"])]
    assert len(triad) and (triad["gbps"] > 0).all() and (triad["gbps_ci95_low"] <= triad["gbps"]).all()
    assert bw[bw["kernel"] == "launch"]["median_s"].iloc[0] > 0
    html = (tiny_run / "results" / "report.html").read_text()
    assert 'id="search-table"' in html and 'id="membw-table"' in html and 'id="roofline-table"' in html


@pytest.mark.slow
def test_devices_json_reports_every_backend(tiny_run):
    devices = json.loads((tiny_run / "results" / "tiny" / "devices.json").read_text())
    assert set(devices["backends"]) == set(backends.NAMES) == {"cpu", "cuda", "rocm", "mps", "xla", "xpu"}
    assert devices["backends"]["cpu"]["present"] is True
    import torch

    assert devices["torch_version"] == torch.__version__


@pytest.mark.slow
def test_amp_summary_has_verdict(tiny_run):
    summary = pd.read_csv(tiny_run / "results" / "tiny" / "amp_cpu_summary.csv")
    amp = summary[summary["mode"].str.startswith("amp")]
    assert len(amp) == 2  # one per workload
    assert amp["verdict"].str.len().gt(10).all()
    assert amp["speedup"].gt(0).all()


@pytest.mark.slow
def test_rerun_is_a_no_op(tiny_run):
    proc = snakemake(tiny_run, "--cores", "2", "--dry-run")
    assert proc.returncode == 0
    assert "Nothing to be done" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_snakemakes_own_report(tiny_run):
    """`snakemake --report` bundles the outputs marked with report() and their captions."""
    out = tiny_run / "results" / "snakemake-report.html"
    proc = snakemake(tiny_run, "--report", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = out.read_text(errors="replace")
    assert "matmul_tflops" in html and "devices.json" in html


# ---- scaling (switched on for this run) --------------------------------------------------------------------


@pytest.mark.slow
def test_scaling_world_sizes_1_and_2_ran_as_separate_processes(tiny_run):
    """gloo world sizes 1 and 2: one and two rank processes (their pid files), none of them left running,
    every DDP trial of both worlds ok, the two ranks of world 2 on two processes of this host."""
    run = tiny_run / "results" / "tiny"
    work = run / registry.work_dir("scaling", "cpu")
    pids = {n: launch.read_pid_files(work / f"ws{n}") for n in (1, 2)}
    assert len(pids[1]) == 1 and len(pids[2]) == 2 and len(set(pids[1]) | set(pids[2])) == 3, pids
    assert not any(launch.pid_alive(p) for p in pids[1] + pids[2])
    trials = pd.read_csv(run / "scaling_cpu_trials.csv")
    ddp = trials[trials["method"] == "ddp"]
    assert sorted(set(ddp["world_size"])) == [1, 2] and (ddp["status"] == "ok").all(), ddp
    assert len(ddp) == 2 * 2 * 2  # worlds x seeds x (fp32, amp_bf16)
    assert (ddp["process_group"] == "gloo").all() and (ddp["threads_per_rank"] == 1).all()
    assert set(ddp[ddp["world_size"] == 2]["devices"].str.count(",")) == {1}  # two ranks
    assert (ddp["global_batch"] == ddp["world_size"] * TINY["amp"]["batch_size"]).all()
    log = (run / registry.log_file("scaling", "cpu")).read_text()
    assert "left running: none" in log and "port free again: True" in log


@pytest.mark.slow
def test_scaling_efficiency_and_loss_equivalence(tiny_run):
    summary = pd.read_csv(tiny_run / "results" / "tiny" / "scaling_cpu.csv")
    ddp = summary[summary["method"] == "ddp"].set_index(["world_size", "mode"])
    for mode in ("fp32", "amp_bf16"):
        two = ddp.loc[(2, mode)]
        assert two["status"] == "ok" and two["trials"] == 2
        assert (
            two["scaling_efficiency"] > 0
            and two["efficiency_ci95_low"] <= two["scaling_efficiency"] <= two["efficiency_ci95_high"]
        )
        assert two["step_ci95_low_s"] <= two["step_median_s"] <= two["step_ci95_high_s"]
        assert ddp.loc[(1, mode)]["scaling_efficiency"] == pytest.approx(1.0)
    trials = pd.read_csv(tiny_run / "results" / "tiny" / "scaling_cpu_trials.csv")
    ddp_trials = trials[trials["method"] == "ddp"]
    assert ddp_trials["loss_matches_single"].astype(str).eq("True").all(), ddp_trials[
        ["world_size", "mode", "seed", "loss_max_rel_diff", "loss_tolerance"]
    ]
    assert (ddp_trials["loss_max_rel_diff"] <= ddp_trials["loss_tolerance"]).all()
    dp = trials[trials["method"] == "dp"]
    assert set(dp["status"]) == {"unsupported"}  # nn.DataParallel needs CUDA/ROCm GPUs


@pytest.mark.slow
def test_scaling_collectives_have_bus_bandwidth(tiny_run):
    df = pd.read_csv(tiny_run / "results" / "tiny" / "collectives_cpu.csv")
    assert set(df["world_size"]) == {2} and set(df["collective"]) == {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "broadcast",
    }
    assert (df["status"] == "ok").all(), df[["collective", "size_bytes", "status"]]
    assert (df["busbw_gbps"] > 0).all() and (df["algbw_gbps"] > 0).all()
    assert df["busbw_gbps"].to_numpy() == pytest.approx((df["algbw_gbps"] * df["busbw_factor"]).to_numpy())
    assert df["algbw_gbps"].to_numpy() == pytest.approx((df["size_bytes"] / df["median_s"] / 1e9).to_numpy())
    html = (tiny_run / "results" / "report.html").read_text()
    assert 'id="scaling-table"' in html and 'data-world="2"' in html and "scaling-off" not in html


@pytest.mark.slow
def test_telemetry_behind_every_point_and_why_sensors_are_missing(tiny_run):
    """On this machine: the CPU's clock columns are filled (cpufreq or /proc/cpuinfo), energy is null where
    RAPL cannot be read and the report says why, devices.json records what the sampler found."""
    import html as html_lib

    run = tiny_run / "results" / "tiny"
    devices = json.loads((run / "devices.json").read_text())
    found = devices["backends"]["cpu"]["devices"][0]["telemetry"]
    assert found["source"] == "cpu_sysfs" and found["hz"] == 20
    mm = pd.read_csv(run / "matmul_cpu.csv")
    trials = pd.read_csv(run / "amp_cpu_trials.csv")
    for df in (mm, trials):
        assert (df["telemetry_source"] == "cpu_sysfs").all()
        if "clock" in found["found"]:
            assert (df["clock_mhz_median"] > 0).all() and (df["clock_mhz_min"] > 0).all()
        assert df["energy_j"].isna().all() == ("energy" in found["missing"])
    assert (mm["telemetry_samples"] >= 2).all()
    report = html_lib.unescape((tiny_run / "results" / "report.html").read_text())
    for sensor, why in found["missing"].items():
        if sensor != "mem_clock":  # never exposed on a CPU: not listed
            assert why in report, sensor
    if "energy" in found["missing"]:
        assert mm["gflop_per_j"].isna().all() and trials["samples_per_j"].isna().all()
    for stage in ("matmul", "amp"):
        series = pd.read_csv(run / f"telemetry_{stage}_cpu.csv")
        assert (series["status"] == "ok").all() and len(series) >= 2 and (series["stage"] == stage).all()
    soak = pd.read_csv(run / "matmul_soak_cpu.csv")
    assert list(soak["status"]) == ["off"]  # matmul.soak_s is 0 by default
