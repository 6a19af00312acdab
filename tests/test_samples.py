"""The raw timing samples every device stage keeps (``measure.samples``, ``registry.SAMPLES``): one long Parquet
table per stage and backend, each sample tied to its results row by the row's identity, kept across a resumed
sweep, never a CSV column; and the stages really write them (matmul, warm-up, transfer, AMP on the CPU)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from accelbench import backends, registry
from accelbench.measure import samples as S
from accelbench.measure.timing import summarize
from accelbench.run.io import Checkpoint, atomic_write_parquet, read_parquet
from accelbench.stages.matmul.measure import measure_point, sweep
from test_matmul import FakeKernels, settings
from test_transfer import HostAsAccelerator


def run_info_file(tmp_path, cfg: dict) -> str:
    from accelbench.cli import main

    path = str(tmp_path / "run.json")
    assert main(["run-info", "--config-json", json.dumps(cfg), "--run", "t", "--out", path]) == 0
    return path


@pytest.fixture
def small_llc(monkeypatch):
    monkeypatch.setattr(backends.CpuBackend, "cache_bytes", lambda self, device, info=None: 1024**2)


# ---- identity ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a,b",
    [
        (512, "512"),
        (512, 512.0),
        (True, "True"),
        (False, "false"),
        ("float32", "float32"),
        (np.int64(7), "7"),
        (None, float("nan")),
        (16_000_000, "16000000.0"),
    ],
)
def test_canonical_spelling_is_the_same_from_python_and_from_a_csv(a, b):
    assert S.canonical(a) == S.canonical(b)


def test_point_key_survives_a_csv_round_trip(tmp_path):
    rows = [
        {"device": "cpu", "device_name": "X", "dtype": "float32", "n": 512, "allow_tf32": False},
        {"device": "cpu", "device_name": "X", "dtype": "tf32", "n": 1024, "allow_tf32": True},
        {"device": "", "device_name": "", "dtype": "", "n": None, "allow_tf32": None},
    ]  # an absent row
    pd.DataFrame(rows).to_csv(tmp_path / "m.csv", index=False)
    back = pd.read_csv(tmp_path / "m.csv").to_dict("records")
    assert [S.point_key("matmul", r) for r in rows[:2]] == [S.point_key("matmul", r) for r in back[:2]]
    assert S.point_key("matmul", rows[0]) == "dtype=float32|n=512|allow_tf32=false"


def test_identity_comes_from_the_registry_so_a_new_dimension_is_one_entry(monkeypatch):
    monkeypatch.setitem(registry.POINT_IDENTITY, "matmul", ("device_name", "dtype", "m", "n", "k", "allow_tf32"))
    row = {"dtype": "bfloat16", "m": 4096, "n": 8192, "k": 1024, "allow_tf32": False}
    assert S.point_key("matmul", row) == "dtype=bfloat16|m=4096|n=8192|k=1024|allow_tf32=false"


# ---- building the table -------------------------------------------------------------------------------


def test_block_rows_give_one_sample_per_block_and_calls_per_block():
    stats = summarize([1e-3, 1.1e-3, 0.9e-3, 1e-3, 1.05e-3, 0.95e-3], calls_per_block=5)
    row = {
        "run_id": "r",
        "method_version": 1,
        "backend": "cpu",
        "device": "cpu",
        "dtype": "float32",
        "n": 64,
        "allow_tf32": False,
        "blocks": stats.blocks,
        "repeats": stats.repeats,
        S.SAMPLES_KEY: list(stats.samples_s),
    }
    skipped = {**row, S.SAMPLES_KEY: None, "blocks": 0, "n": 128}
    df = S.from_block_rows("matmul", [row, skipped])
    assert list(df.columns) == list(registry.SAMPLE_COLUMNS)
    assert len(df) == 6 and (df["calls"] == 5).all() and df["steady"].all()
    assert df["sample_s"].tolist() == list(stats.samples_s) and df["sample"].tolist() == list(range(6))
    assert set(df["point"]) == {"dtype=float32|n=64|allow_tf32=false"}
    assert S.check(df) is None


def test_warmup_calls_are_steady_from_the_stable_call_or_the_last_window():
    stable = [
        {"device": "cpu", "n": 64, "iter": i, "iter_s": 1e-3 * (5 if i == 0 else 1), "stable_at_iter": 3}
        for i in range(8)
    ]
    never = [{"device": "cpu:1", "n": 64, "iter": i, "iter_s": 1e-3, "stable_at_iter": -1} for i in range(8)]
    rows = stable + never
    df = S.from_series_rows("warmup", rows, index="iter", value="iter_s", steady=S.warmup_steady(rows, 3))
    assert df[df["device"] == "cpu"]["steady"].tolist() == [False] * 3 + [True] * 5
    assert df[df["device"] == "cpu:1"]["steady"].tolist() == [False] * 5 + [True] * 3


def test_amp_steps_become_samples_per_trial_with_warmup_steps_not_steady():
    steps = [
        {
            "device": "cpu",
            "device_name": "X",
            "workload": "mlp",
            "mode": m,
            "seed": 0,
            "step": s,
            "step_s": 0.01,
            "warmup": s < 2,
        }
        for m in ("fp32", "amp_bf16")
        for s in range(5)
    ]
    df = S.from_series_rows("amp_trials", steps, index="step", value="step_s", steady=lambda r: not r["warmup"])
    assert set(df["point"]) == {"workload=mlp|mode=fp32|seed=0", "workload=mlp|mode=amp_bf16|seed=0"}
    assert df.groupby("point")["steady"].sum().tolist() == [3, 3]


def test_check_names_what_is_wrong():
    df = S.empty()
    assert S.check(df) is None
    assert "missing column" in S.check(df.drop(columns=["sample_s"]))
    bad = pd.concat([df, pd.DataFrame([{**dict.fromkeys(df.columns, "x"), "sample_s": -1.0}])], ignore_index=True)
    assert "not positive" in S.check(bad)


def test_parquet_round_trip_and_a_truncated_file_is_an_error(tmp_path):
    stats = summarize([1e-3] * 6, calls_per_block=2)
    row = {
        "run_id": "r",
        "backend": "cpu",
        "device": "cpu",
        "dtype": "float32",
        "n": 64,
        "allow_tf32": False,
        "blocks": 6,
        "repeats": 12,
        S.SAMPLES_KEY: list(stats.samples_s),
    }
    df = S.from_block_rows("matmul", [row])
    path = tmp_path / "s.parquet"
    atomic_write_parquet(path, df)
    pd.testing.assert_frame_equal(read_parquet(path), df)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.parquet"]  # atomic: no temp file left
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises((pa.ArrowInvalid, OSError)):
        read_parquet(path)


# ---- the matmul sweep keeps them, across a resume ---------------------------------------------------------


def test_measure_point_keeps_its_blocks_but_not_as_a_csv_column():
    row = measure_point(FakeKernels(), dtype="float32", n=64, settings=settings(), peak=(1e6, "x"))
    assert row["status"] == "ok" and len(row[S.SAMPLES_KEY]) == row["blocks"] == 10
    assert S.SAMPLES_KEY not in registry.TABLES["matmul"].all_columns
    failed = measure_point(
        FakeKernels(unsupported={"float16": "no"}), dtype="float16", n=64, settings=settings(), peak=(None, "x")
    )
    assert S.SAMPLES_KEY not in failed


def test_resumed_points_keep_their_samples(tmp_path):
    path = tmp_path / "ck.jsonl"
    kwargs = dict(
        kernels_for=lambda d: FakeKernels(),
        device_row=lambda d: {"device": d, "config_hash": "h"},
        peak_for=lambda d, dt: (1e6, "x"),
        config_hash="h",
        log=lambda s: None,
    )
    first = sweep(
        ["cpu"],
        ["float32"],
        [64, 128],
        settings(point_budget_s=100.0),
        checkpoint=Checkpoint(path, ("device", "dtype", "n")),
        **kwargs,
    )
    untouched = FakeKernels()
    again = sweep(
        ["cpu"],
        ["float32"],
        [64, 128],
        settings(point_budget_s=100.0),
        checkpoint=Checkpoint(path, ("device", "dtype", "n")),
        **{**kwargs, "kernels_for": lambda d: untouched},
    )
    assert untouched.log == []  # nothing measured again
    pd.testing.assert_frame_equal(S.from_block_rows("matmul", first), S.from_block_rows("matmul", again))
    assert len(S.from_block_rows("matmul", again)) == 20


# ---- the stages write them ---------------------------------------------------------------------------------


def test_matmul_stage_writes_one_sample_per_block_matching_each_row(tmp_path, small_llc):
    from accelbench.cli import main

    cfg = {
        "run": "t",
        "warmup": {"n": 16, "max_iters": 30, "window": 3, "rel_tol": 0.5},
        "matmul": {
            "sizes": [32, 64],
            "dtypes": ["float32"],
            "min_run_time_s": 0.01,
            "fp8": False,
            "tf32": False,
            "unstable_iqr_ratio": 10.0,
        },
    }
    run = run_info_file(tmp_path, cfg)
    assert main(["matmul", "--run-file", run, "--backend", "cpu", "--threads", "1", "--out-dir", str(tmp_path)]) == 0
    rows = pd.read_csv(tmp_path / "matmul_cpu.csv")
    assert S.SAMPLES_KEY not in rows.columns
    samples = read_parquet(tmp_path / registry.SAMPLES["matmul"].filename("cpu"))
    assert S.check(samples) is None and (samples["run_id"] == "t").all()
    assert (samples["method_version"] == registry.STAGES["matmul"].method_version).all()
    for _, r in rows[rows["status"] == "ok"].iterrows():
        mine = samples[samples["point"] == S.point_key("matmul", r)]
        assert len(mine) == r["blocks"] and (mine["calls"] == r["repeats"] // r["blocks"]).all()
        assert np.median(mine["sample_s"]) == pytest.approx(r["median_s"], rel=1e-9)
    assert len(samples) == rows.loc[rows["status"] == "ok", "blocks"].sum() > 0


def test_warmup_stage_writes_every_call(tmp_path):
    from accelbench.cli import main

    run = run_info_file(tmp_path, {"run": "t", "warmup": {"n": 16, "max_iters": 20, "window": 3, "rel_tol": 0.9}})
    assert main(["warmup", "--run-file", run, "--backend", "cpu", "--threads", "1", "--out-dir", str(tmp_path)]) == 0
    rows = pd.read_csv(tmp_path / "warmup_cpu.csv")
    samples = read_parquet(tmp_path / registry.SAMPLES["warmup"].filename("cpu"))
    assert samples["sample_s"].tolist() == pytest.approx(rows["iter_s"].tolist())
    stable = int(rows["stable_at_iter"].iloc[0])
    start = stable if stable >= 0 else len(rows) - 3
    assert samples["steady"].tolist() == [i >= start for i in rows["iter"]]
    assert np.median(samples.loc[samples["steady"], "sample_s"]) == pytest.approx(rows["warm_s"].iloc[0])


def test_transfer_stage_writes_its_blocks(tmp_path, monkeypatch):
    from accelbench.cli import main

    monkeypatch.setitem(backends.CLASSES, "cuda", HostAsAccelerator)
    cfg = {
        "run": "t",
        "warmup": {"n": 16, "max_iters": 30, "window": 3, "rel_tol": 0.5},
        "transfer": {"sizes_mb": [0.01], "min_run_time_s": 0.002, "unstable_iqr_ratio": 10.0},
    }
    run = run_info_file(tmp_path, cfg)
    assert main(["transfer", "--run-file", run, "--backend", "cuda", "--threads", "1", "--out-dir", str(tmp_path)]) == 0
    rows = pd.read_csv(tmp_path / "transfer_cuda.csv")
    samples = read_parquet(tmp_path / registry.SAMPLES["transfer"].filename("cuda"))
    ok = rows[rows["status"] == "ok"]
    assert len(ok) >= 2 and len(samples) == ok["blocks"].sum()
    assert set(samples["point"]) == {S.point_key("transfer", r) for _, r in ok.iterrows()}


def test_amp_stage_writes_every_step(tmp_path):
    from accelbench.cli import main

    cfg = {
        "run": "t",
        "warmup": {"n": 16, "max_iters": 30, "window": 3, "rel_tol": 0.5},
        "amp": {
            "workloads": ["mlp"],
            "seeds": [0],
            "steps": 6,
            "warmup_steps": 2,
            "batch_size": 16,
            "data": {"n_train": 64, "n_test": 32, "n_features": 8, "n_classes": 2},
            "mlp": {"hidden": 8, "layers": 1},
        },
    }
    run = run_info_file(tmp_path, cfg)
    assert main(["amp", "--run-file", run, "--backend", "cpu", "--threads", "1", "--out-dir", str(tmp_path)]) == 0
    steps = pd.read_csv(tmp_path / "amp_cpu_steps.csv")
    trials = pd.read_csv(tmp_path / "amp_cpu_trials.csv")
    samples = read_parquet(tmp_path / registry.SAMPLES["amp"].filename("cpu"))
    assert len(samples) == len(steps) == 6 * len(trials)
    assert (samples["table"] == "amp_trials").all()
    for _, t in trials.iterrows():
        mine = samples[samples["point"] == S.point_key("amp_trials", t)]
        assert mine["steady"].tolist() == [False, False, True, True, True, True]
        assert np.median(mine.loc[mine["steady"], "sample_s"]) == pytest.approx(t["step_median_s"])


@pytest.mark.parametrize("stage", ["warmup", "matmul", "transfer", "amp"])
def test_absent_backend_writes_an_empty_sample_file(tmp_path, stage):
    from accelbench.cli import main

    run = run_info_file(tmp_path, {"run": "t"})
    assert main([stage, "--run-file", run, "--backend", "cuda", "--threads", "1", "--out-dir", str(tmp_path)]) == 0
    df = read_parquet(tmp_path / registry.SAMPLES[stage].filename("cuda"))
    assert df.empty and list(df.columns) == list(registry.SAMPLE_COLUMNS)


def test_every_device_stage_declares_its_sample_file():
    """Every stage whose points are timed blocks or steps keeps its samples (warmup, matmul, membw, transfer, amp);
    the search (its own screening, the best re-measured as a matmul-like row) and scaling (rank processes) do not."""
    assert {"warmup", "matmul", "membw", "transfer", "amp"} <= set(registry.SAMPLES)
    assert not {"matmul-search", "scaling"} & set(registry.SAMPLES)
    for stage in registry.DEVICE_STAGES:
        outputs = registry.stage_outputs(stage)
        tables = [registry.TABLES[t].file for t in stage.tables]
        if stage.name in registry.SAMPLES:
            assert outputs[-1] == registry.SAMPLES[stage.name].file and outputs[:-1] == tables
        else:
            assert outputs == tables
    cpu = registry.sample_files(["cpu"])  # in stage order; transfer: accelerators only
    assert cpu == [
        registry.SAMPLES[s.name].filename("cpu")
        for s in registry.DEVICE_STAGES
        if s.name in registry.SAMPLES and s.applies_to("cpu")
    ]
    assert {
        "warmup_cpu_samples.parquet",
        "matmul_cpu_samples.parquet",
        "membw_cpu_samples.parquet",
        "amp_cpu_samples.parquet",
    } <= set(cpu) and "transfer_cpu_samples.parquet" not in cpu
    assert "transfer_cuda_samples.parquet" in registry.sample_files(["cuda"])
