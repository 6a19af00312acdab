"""AMP vs FP32 trials (accelbench.stages.amp) and their verdict (accelbench.stages.amp.stats).

Real CPU trials on tiny models (fp32 and bf16 autocast), the per-backend dispatch with a fake torch
(CUDA/ROCm/MPS/XLA: untested on hardware), planted NaN/exception trials, and the statistics on
planted numbers."""

from __future__ import annotations

import copy
import json
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from accelbench import backends, registry
from accelbench.backends import BackendUnavailable
from accelbench.backends.cpu import precision_note
from accelbench.run.config import ConfigError, config_hash, with_defaults
from accelbench.run.io import Checkpoint
from accelbench.stages import common
from accelbench.stages.amp import measure as amp
from accelbench.stages.amp.config_check import check_amp_config
from accelbench.stages.amp.stats import (
    faster_verdict,
    paired_diff_ci,
    parity_verdict,
    speedup_ci,
    summarize_trials,
)

TINY_AMP = {
    "workloads": ["mlp", "transformer"],
    "seeds": [0, 1],
    "steps": 30,
    "warmup_steps": 3,
    "batch_size": 32,
    "lr": 0.01,
    "data": {"n_train": 256, "n_test": 128, "n_features": 16, "n_classes": 4},
    "mlp": {"hidden": 32, "layers": 2},
    "transformer": {"d_model": 16, "n_heads": 2, "ff": 32, "seq_len": 4, "layers": 1},
}
NO_BF16_FLAGS = ["sse2", "avx", "avx2", "fma", "f16c"]
# a warm-up that takes milliseconds: every amp stage warms its device before the first trial
TINY_WARMUP = {"n": 16, "max_iters": 20, "window": 3, "rel_tol": 0.5}
CPU = backends.get("cpu")
CK_KEY = ("config_hash", "device", "workload", "mode", "seed")


def amp_policy(backend: str, requested: str = "auto"):
    return backends.get(backend).amp_policy(requested)


def cpu_note(flags) -> str:
    """What the CPU backend says about bf16 AMP on a CPU with these flags (the summary's note)."""
    return CPU.amp_note({"flags": flags}, "bfloat16")


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def run_info_for(amp_cfg: dict, **top) -> dict:
    top.setdefault("warmup", TINY_WARMUP)
    config = with_defaults({"run": "t", "backends": ["cpu"], "amp": copy.deepcopy(amp_cfg), **top})
    return {"run": "t", "config": config, "config_hash": config_hash(config), "git_commit": "test"}


def stage_for(tmp_path, run_info: dict, name: str = "run.json") -> common.StageStart:
    """The amp stage started on the CPU from a run.json holding ``run_info``."""
    path = tmp_path / name
    path.write_text(json.dumps(run_info))
    return common.start("amp", str(path), "cpu", 1)


def tiny_cfg(**changes) -> dict:
    return with_defaults({"amp": {**copy.deepcopy(TINY_AMP), **changes}})["amp"]


# ------------------------------------------------------------------ real CPU trials


@pytest.mark.parametrize("workload", ["mlp", "transformer"])
def test_fp32_and_bf16_trials_both_learn_from_identical_starts(workload):
    cfg = tiny_cfg()
    data = amp.make_data(workload, cfg, 0, torch)
    policy = amp_policy("cpu", "auto")
    results = {}
    for mode in ("fp32", "amp_bf16"):
        steps: list = []
        trial = amp.Trial("cpu", "cpu", "test cpu", workload, mode, seed=0)
        row = amp.run_trial(trial, cfg, data, policy, backend=CPU, threads=1, steps_out=steps)
        results[mode] = (row, steps)
        assert row["status"] == "ok", row
        assert len(steps) == cfg["steps"] and [s["step"] for s in steps] == list(range(cfg["steps"]))
        losses = [s["loss"] for s in steps]
        assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:3]), (mode, losses)
        assert row["test_acc"] > row["majority_acc"] + 0.1, (mode, row["test_acc"], row["majority_acc"])
        assert sum(s["warmup"] for s in steps) == cfg["warmup_steps"]
        assert row["step_median_s"] == pytest.approx(np.median([s["step_s"] for s in steps[cfg["warmup_steps"] :]]))
        assert row["samples_per_s"] == pytest.approx(cfg["batch_size"] / row["step_median_s"])
        assert row["mem_kind"] in ("rss", "rss_process_peak") and row["peak_mem_bytes"] > 0
        assert row["skipped_steps"] == 0 and math.isnan(row["final_scale"])  # bf16: no GradScaler
    assert results["fp32"][0]["amp_dtype"] == "float32" and results["amp_bf16"][0]["amp_dtype"] == "bfloat16"
    # same initial weights and batches: the first losses differ only by bf16 rounding
    assert results["fp32"][1][0]["loss"] == pytest.approx(results["amp_bf16"][1][0]["loss"], abs=0.05)
    # ... while the fp32 and bf16 runs are not the same computation
    assert [s["loss"] for s in results["fp32"][1]] != [s["loss"] for s in results["amp_bf16"][1]]


def test_fp16_gradscaler_scale_history_and_skipped_steps(monkeypatch):
    """A real fp16 trial with a real GradScaler (on the CPU, which has both): an inf gradient planted
    at step 2 makes the scaler skip that step and halve its scale; the trial still finishes."""
    cfg = tiny_cfg(steps=6, warmup_steps=1, workloads=["mlp"])
    policy = amp_policy("cpu", "float16")
    assert policy.use_scaler
    calls = {"n": 0}

    def planted(amp_cfg, torch_):
        model = amp.build_mlp(amp_cfg, torch_)

        def hook(grad):
            calls["n"] += 1
            return grad * float("inf") if calls["n"] == 3 else grad

        model[0].weight.register_hook(hook)
        return model

    steps: list = []
    monkeypatch.setitem(amp.WORKLOADS, "mlp", planted)
    row = amp.run_trial(
        amp.Trial("cpu", "cpu", "c", "mlp", "amp_fp16", 0),
        cfg,
        amp.make_data("mlp", cfg, 0, torch),
        policy,
        backend=CPU,
        threads=1,
        steps_out=steps,
    )
    assert row["status"] == "ok" and row["amp_dtype"] == "float16"
    assert [s["skipped"] for s in steps] == [False, False, True, False, False, False]
    scales = [s["scale"] for s in steps]
    assert scales[:3] == [65536.0] * 3 and scales[3:] == [32768.0] * 3  # scale used by each step
    assert row["skipped_steps"] == 1 and row["final_scale"] == 32768.0


def test_default_config_workloads_learn_well_above_chance():
    """The shipped defaults (config.yaml == schema defaults) give a task both models clearly learn."""
    import yaml

    from accelbench.run.provenance import CHECKOUT

    shipped = yaml.safe_load((CHECKOUT / "config.yaml").read_text())["amp"]
    cfg = with_defaults({})["amp"]
    assert shipped == cfg
    for workload in cfg["workloads"]:
        row = amp.run_trial(
            amp.Trial("cpu", "cpu", "c", workload, "fp32", 0),
            amp.workload_config(cfg, workload),
            amp.make_data(workload, cfg, 0, torch),
            amp_policy("cpu"),
            backend=CPU,
            threads=1,
            steps_out=[],
        )
        assert row["test_acc"] > row["majority_acc"] + 0.25, (workload, row["test_acc"], row["majority_acc"])
        assert row["final_loss"] < 0.8 * row["first_loss"]


def test_same_seed_is_reproducible_and_other_seed_differs():
    cfg = tiny_cfg(steps=4, warmup_steps=1)
    data = amp.make_data("mlp", cfg, 0, torch)
    policy = amp_policy("cpu", "auto")

    def losses(seed):
        steps: list = []
        amp.run_trial(
            amp.Trial("cpu", "cpu", "c", "mlp", "fp32", seed),
            cfg,
            data,
            policy,
            backend=CPU,
            threads=1,
            steps_out=steps,
        )
        return [s["loss"] for s in steps]

    assert losses(0) == losses(0)
    assert losses(0) != losses(1)


def test_data_is_deterministic_balanced_and_order_is_per_seed():
    cfg = tiny_cfg()
    a, b = amp.make_data("transformer", cfg, 0, torch), amp.make_data("transformer", cfg, 0, torch)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert a[0].shape == (256, 4, 16) and a[2].shape == (128, 4, 16)
    assert not torch.equal(a[0], amp.make_data("transformer", cfg, 1, torch)[0])  # config seed matters
    counts = torch.bincount(torch.cat([a[1], a[3]]), minlength=4)
    assert (counts > 0.1 * counts.sum()).all(), counts  # every class well represented
    order = amp.batch_order(256, 32, 20, seed=3, torch=torch)
    assert order.shape == (20, 32)
    assert torch.equal(order, amp.batch_order(256, 32, 20, seed=3, torch=torch))
    assert not torch.equal(order, amp.batch_order(256, 32, 20, seed=4, torch=torch))
    assert sorted(order[:8].flatten().tolist()) == list(range(256))  # the first epoch is a permutation


# ------------------------------------------------------------------ per-backend dispatch (fake torch)


class FakeTorch(SimpleNamespace):
    """Records what amp.py asks of torch: autocast arguments, GradScaler device types, TF32 flags."""

    def __init__(self, hip=None):
        calls = []
        super().__init__(
            calls=calls,
            float16="f16",
            bfloat16="bf16",
            version=SimpleNamespace(hip=hip, cuda="12.4"),
            autocast=lambda device_type, dtype: calls.append(("autocast", device_type, dtype)) or "ctx",
            amp=SimpleNamespace(GradScaler=lambda device_type: calls.append(("GradScaler", device_type)) or "scaler"),
            backends=SimpleNamespace(
                cuda=SimpleNamespace(matmul=SimpleNamespace(allow_tf32=False)), cudnn=SimpleNamespace(allow_tf32=True)
            ),
            cuda=SimpleNamespace(
                max_memory_allocated=lambda d: calls.append(("max_mem", d)) or 123,
                reset_peak_memory_stats=lambda d: calls.append(("reset_peak", d)),
            ),
            mps=SimpleNamespace(driver_allocated_memory=lambda: 456),
            precision="high",
        )

    def get_float32_matmul_precision(self):
        return self.precision

    def set_float32_matmul_precision(self, value):
        self.precision = value


@pytest.mark.parametrize(
    "backend,requested,modes,autocast,scaler",
    [
        ("cuda", "auto", ["fp32", "tf32", "amp_fp16"], ("cuda", "f16"), "cuda"),
        ("cuda", "bfloat16", ["fp32", "tf32", "amp_bf16"], ("cuda", "bf16"), None),
        ("rocm", "auto", ["fp32", "amp_fp16"], ("cuda", "f16"), "cuda"),
        ("rocm", "bfloat16", ["fp32", "amp_bf16"], ("cuda", "bf16"), None),
        ("mps", "auto", ["fp32", "amp_fp16"], ("mps", "f16"), "mps"),
        ("cpu", "auto", ["fp32", "amp_bf16"], ("cpu", "bf16"), None),
        ("cpu", "float16", ["fp32", "amp_fp16"], ("cpu", "f16"), "cpu"),
        ("xla", "auto", ["fp32", "amp_bf16"], ("xla", "bf16"), None),
    ],
)
def test_modes_autocast_and_scaler_per_backend(backend, requested, modes, autocast, scaler):
    """untested on hardware for cuda/rocm/mps/xla: checks what amp.py asks torch for."""
    fake = FakeTorch(hip="6.2" if backend == "rocm" else None)
    b = backends.get(backend, torch=fake)
    policy = b.amp_policy(requested)
    assert amp.modes_for(b, policy) == modes
    amp_mode = modes[-1]
    assert amp.autocast_context(amp_mode, policy, fake) == "ctx"
    assert ("autocast", *autocast) in fake.calls
    got = amp.grad_scaler(amp_mode, policy, fake)
    if scaler is None:
        assert got is None and not [c for c in fake.calls if c[0] == "GradScaler"]
    else:
        assert got == "scaler" and ("GradScaler", scaler) in fake.calls
    fake.calls.clear()
    for baseline in modes[:-1]:  # fp32 and tf32 never autocast, never scale
        assert amp.grad_scaler(baseline, policy, fake) is None
        with amp.autocast_context(baseline, policy, fake):
            pass
    assert fake.calls == []


@pytest.mark.filterwarnings("ignore:torch.cuda.amp.GradScaler is enabled, but CUDA is not available")
def test_real_gradscaler_is_built_for_cuda_device_type_on_fp16():
    """GradScaler('cuda') is what the CUDA/ROCm policy builds (constructed here; disabled without a GPU)."""
    scaler = amp.grad_scaler("amp_fp16", amp_policy("rocm", "auto"), torch)
    assert isinstance(scaler, torch.amp.GradScaler) and scaler._device == "cuda"


def test_tf32_flags_set_per_mode_on_nvidia_cuda_only_and_restored():
    fake = FakeTorch()
    cuda = backends.for_device("cuda:0", torch=fake)
    assert cuda.name == "cuda"
    with cuda.float32_math(False) as allowed:
        assert (
            allowed is False
            and fake.backends.cuda.matmul.allow_tf32 is False
            and fake.backends.cudnn.allow_tf32 is False
        )
        assert fake.precision == "highest"
    assert fake.backends.cudnn.allow_tf32 is True and fake.precision == "high"  # restored
    with backends.for_device("cuda:1", torch=fake).float32_math(True) as allowed:
        assert (
            allowed is True and fake.backends.cuda.matmul.allow_tf32 is True and fake.backends.cudnn.allow_tf32 is True
        )
    assert fake.backends.cuda.matmul.allow_tf32 is False
    rocm = FakeTorch(hip="6.2")
    rocm_backend = backends.for_device("cuda:0", torch=rocm)
    assert rocm_backend.name == "rocm"
    with rocm_backend.float32_math(True) as allowed:
        assert allowed is False and rocm.backends.cuda.matmul.allow_tf32 is False and rocm.precision == "highest"
    with backends.get("cpu", torch=fake).float32_math(True) as allowed:
        assert allowed is False and fake.backends.cuda.matmul.allow_tf32 is False and fake.precision == "highest"


def test_peak_memory_per_backend():
    fake = FakeTorch()
    cuda = backends.get("cuda", torch=fake)
    assert cuda.reset_peak_memory("cuda:1") is True and ("reset_peak", "cuda:1") in fake.calls
    assert cuda.peak_memory("cuda:1") == (123.0, "allocator") and ("max_mem", "cuda:1") in fake.calls
    assert backends.get("mps", torch=fake).peak_memory("mps") == (456.0, "mps_driver")
    per_trial = CPU.reset_peak_memory("cpu")
    big = torch.ones(64 * 1024 * 1024 // 4)  # 64 MiB resident
    peak, kind = CPU.peak_memory("cpu", per_trial=per_trial)
    del big
    assert kind == ("rss" if per_trial else "rss_process_peak") and peak > 64 * 1024 * 1024


# ------------------------------------------------------------------ failures stay in their trial


def _nan_under_autocast(amp_cfg, torch_):
    """The real MLP, whose loss turns NaN from the 3rd bf16 step on (as an fp16 overflow would)."""
    model = amp.build_mlp(amp_cfg, torch_)
    calls = {"n": 0}
    forward = model.forward

    def planted(x):
        out = forward(x)
        if torch_.is_autocast_enabled("cpu"):
            calls["n"] += 1
            if calls["n"] >= 3:
                return out * float("nan")
        return out

    model.forward = planted
    return model


def _broken_transformer(amp_cfg, torch_):
    raise RuntimeError("planted failure\nsecond line")


def test_planted_nan_and_exception_end_only_their_trials(monkeypatch, tmp_path):
    monkeypatch.setitem(amp.WORKLOADS, "mlp", _nan_under_autocast)
    cfg = copy.deepcopy(TINY_AMP) | {"steps": 8, "warmup_steps": 1}
    st = stage_for(tmp_path, run_info_for(cfg))
    steps, trials, notes = amp.run_backend(st, log=lambda s: None)
    assert st.devices == ["cpu"] and set(notes) == {"cpu"}
    assert {t["status"] for t in trials} <= set(amp.STATUSES)
    by = {(t["workload"], t["mode"], t["seed"]): t for t in trials}
    assert len(by) == 8  # 2 workloads x 2 modes x 2 seeds, none lost
    for seed in (0, 1):
        assert by[("mlp", "amp_bf16", seed)]["status"] == "nan"
        assert by[("mlp", "fp32", seed)]["status"] == "ok"
        assert by[("transformer", "fp32", seed)]["status"] == "ok"
        assert by[("transformer", "amp_bf16", seed)]["status"] == "ok"
        nan_steps = [s for s in steps if (s["workload"], s["mode"], s["seed"]) == ("mlp", "amp_bf16", seed)]
        assert [s["status"] for s in nan_steps] == ["ok", "ok", "nan"]  # stopped at the NaN, kept what ran
        assert math.isnan(nan_steps[-1]["loss"]) and by[("mlp", "amp_bf16", seed)]["steps"] == 3

    # an exception in one trial: status error with its first line, the others go on
    monkeypatch.setitem(amp.WORKLOADS, "transformer", _broken_transformer)
    steps, trials, _ = amp.run_backend(st, log=lambda s: None)
    tr = [t for t in trials if t["workload"] == "transformer"]
    assert len(tr) == 4 and {t["status"] for t in tr} == {"error"}
    assert tr[0]["status_detail"] == "RuntimeError: planted failure"
    assert {t["status"] for t in trials if t["workload"] == "mlp" and t["mode"] == "fp32"} == {"ok"}

    summary = summarize_trials(pd.DataFrame(trials), 0.02, {"cpu": cpu_note(NO_BF16_FLAGS)})
    rows = {r.workload: r for r in summary.itertuples()}
    assert rows["mlp"].status == "no_pairs" and rows["mlp"].trials == 0 and math.isnan(rows["mlp"].speedup)
    assert "2 of 2 AMP (bf16) trials did not finish (seed 0: nan; seed 1: nan)" in rows["mlp"].note
    assert rows["transformer"].status == "no_pairs"


def test_checkpoint_resumes_without_rerunning(monkeypatch, tmp_path):
    cfg = copy.deepcopy(TINY_AMP) | {"steps": 4, "warmup_steps": 1, "workloads": ["mlp"], "seeds": [0]}
    info = run_info_for(cfg)
    ck_path = tmp_path / "amp.jsonl"
    ck = Checkpoint(ck_path, CK_KEY)
    steps1, trials1, _ = amp.run_backend(stage_for(tmp_path, info), checkpoint=ck, log=lambda s: None)
    assert len(trials1) == 2 and len(ck_path.read_text().splitlines()) == 2

    monkeypatch.setitem(amp.WORKLOADS, "mlp", _broken_transformer)  # would fail if anything reran
    ck2 = Checkpoint(ck_path, CK_KEY)
    rerun = stage_for(tmp_path, info, "rerun.json")  # a new process: its own warm-up
    steps2, trials2, _ = amp.run_backend(rerun, checkpoint=ck2, log=lambda s: None)
    warm = list(registry.DEVICE_WARMUP)
    for rows in (trials1, trials2, steps1, steps2):
        assert all(r["device_warmup_status"] in ("ok", "unstable") and r["device_warmup_s"] > 0 for r in rows)
    pd.testing.assert_frame_equal(
        pd.DataFrame(trials2).drop(columns=warm), pd.DataFrame(trials1).drop(columns=warm)
    )  # NaN == NaN here
    pd.testing.assert_frame_equal(pd.DataFrame(steps2).drop(columns=warm), pd.DataFrame(steps1).drop(columns=warm))
    # another config (other hash) does not reuse them
    other = stage_for(tmp_path, run_info_for(cfg | {"lr": 0.02}), "other.json")
    _, trials3, _ = amp.run_backend(other, checkpoint=ck2, log=lambda s: None)
    assert {t["status"] for t in trials3} == {"error"}


# ------------------------------------------------------------------ statistics on planted numbers


def _trials(base_s, mode_s, base_acc, mode_acc, mode="amp_bf16", device="cpu", backend="cpu", workload="mlp"):
    rows = []
    for seed, (bs, ms, ba, ma) in enumerate(zip(base_s, mode_s, base_acc, mode_acc)):
        common = {
            "backend": backend,
            "device": device,
            "device_name": "Test CPU",
            "workload": workload,
            "seed": seed,
            "majority_acc": 0.2,
            "skipped_steps": 0,
            "status": "ok",
        }
        rows.append({**common, "mode": "fp32", "amp_dtype": "float32", "step_median_s": bs, "test_acc": ba})
        rows.append(
            {
                **common,
                "mode": mode,
                "amp_dtype": "bfloat16" if mode == "amp_bf16" else "float16",
                "step_median_s": ms,
                "test_acc": ma,
            }
        )
    return pd.DataFrame(rows)


def test_speedup_ci_is_t_interval_on_paired_log_ratios():
    base, mode = [0.010, 0.012, 0.011, 0.013], [0.020, 0.021, 0.025, 0.024]
    logs = np.log(np.array(base) / np.array(mode))
    lo, hi = stats.t.interval(0.95, len(logs) - 1, loc=logs.mean(), scale=stats.sem(logs))
    point, low, high = speedup_ci(base, mode)
    assert point == pytest.approx(math.exp(logs.mean()))
    assert (low, high) == (pytest.approx(math.exp(lo)), pytest.approx(math.exp(hi)))
    diff, dlo, dhi = paired_diff_ci([0.61, 0.60, 0.63], [0.60, 0.60, 0.61])
    d = np.array([0.01, 0.0, 0.02])
    assert diff == pytest.approx(0.01)
    assert (dlo, dhi) == pytest.approx(stats.t.interval(0.95, 2, loc=d.mean(), scale=stats.sem(d)))
    one = speedup_ci([0.01], [0.02])
    assert one[0] == pytest.approx(0.5) and math.isnan(one[1]) and math.isnan(one[2])


@pytest.mark.parametrize(
    "low,high,expected",
    [(1.1, 1.3, "yes"), (0.4, 0.45, "no"), (0.9, 1.2, "inconclusive"), (math.nan, math.nan, "inconclusive")],
)
def test_faster_verdict(low, high, expected):
    assert faster_verdict(low, high) == expected


@pytest.mark.parametrize(
    "low,high,expected",
    [
        (-0.01, 0.015, "yes"),
        (0.03, 0.05, "no"),
        (-0.09, -0.03, "no"),
        (-0.03, 0.01, "inconclusive"),
        (math.nan, math.nan, "inconclusive"),
    ],
)
def test_parity_verdict(low, high, expected):
    assert parity_verdict(low, high, 0.02) == expected


def test_summary_slower_with_parity_and_cpu_note():
    df = _trials([0.010, 0.011, 0.012], [0.021, 0.022, 0.025], [0.60, 0.62, 0.61], [0.601, 0.618, 0.611])
    row = summarize_trials(df, 0.02, {"cpu": cpu_note(NO_BF16_FLAGS)}).iloc[0]
    assert row["mode"] == "amp_bf16" and row["baseline"] == "fp32" and row["trials"] == 3 and row["status"] == "ok"
    assert row["speedup"] == pytest.approx(speedup_ci([0.010, 0.011, 0.012], [0.021, 0.022, 0.025])[0])
    assert row["speedup_ci95_high"] < 1 and row["faster"] == "no"
    assert row["acc_diff"] == pytest.approx(0.0, abs=1e-3) and row["accuracy_parity"] == "yes"
    assert row["verdict"].startswith(f"AMP (bf16) is {row['speedup']:.2f}x FP32 (slower, 95% CI")
    assert " on cpu (Test CPU); accuracy parity within 0.02: yes" in row["verdict"]
    assert "FP32 baseline: 11 ms/step, held-out accuracy 0.610" in row["verdict"]
    assert "no native bf16 units" in row["note"] and "expected to be slower" in row["note"]
    assert row["step_s_mean"] == pytest.approx(np.mean([0.021, 0.022, 0.025]))
    assert row["test_acc_mean"] == pytest.approx(np.mean([0.601, 0.618, 0.611]))


def test_summary_faster_no_parity_and_tf32():
    base_s, base_acc = [0.020, 0.022, 0.021], [0.60, 0.62, 0.61]
    df = _trials(
        base_s, [0.010, 0.0105, 0.0101], base_acc, [0.50, 0.51, 0.52], mode="amp_fp16", device="cuda:0", backend="cuda"
    )
    tf32_trials = _trials(
        base_s, [0.019, 0.0215, 0.02], base_acc, base_acc, mode="tf32", device="cuda:0", backend="cuda"
    )
    # on CUDA the stage trains fp32, tf32 and AMP per seed (modes_for)
    assert amp.modes_for(backends.get("cuda"), backends.get("cuda").amp_policy("auto")) == ["fp32", "tf32", "amp_fp16"]
    with_tf32 = pd.concat([df, tf32_trials[tf32_trials["mode"] == "tf32"]], ignore_index=True)
    cuda_note = backends.get("cuda").amp_note({"name": "Fake GPU"}, "float16")
    assert cuda_note == ""
    summary = summarize_trials(with_tf32, 0.02, {"cuda:0": cuda_note})
    assert list(summary["mode"]) == ["amp_fp16", "tf32"]
    row = summary.iloc[0]
    assert row["faster"] == "yes" and row["speedup_ci95_low"] > 1
    assert row["speedup_ci_method"] == "descriptive"  # seed pairs of one process: not run-to-run
    assert row["accuracy_parity"] == "no" and row["acc_diff"] == pytest.approx(-0.1)
    assert row["verdict"].startswith("AMP (fp16) is 2.0") and "(faster" in row["verdict"]
    # where TF32 was measured as its own mode, the verdict says the baseline had it off
    assert "on cuda:0 (Test CPU)" in row["verdict"] and "FP32 baseline (TF32 off)" in row["verdict"]
    assert "native" not in row["note"]  # the CPU note is for CPUs only
    plain = summarize_trials(df, 0.02, {"cuda:0": cuda_note}).iloc[0]
    assert "FP32 baseline: " in plain["verdict"] and "TF32 off" not in plain["verdict"]
    tf32 = _trials([0.02, 0.021], [0.019, 0.0215], [0.6, 0.6], [0.6, 0.6], mode="tf32", device="cuda:0", backend="cuda")
    row = summarize_trials(tf32, 0.02).iloc[0]
    assert row["mode"] == "tf32" and row["faster"] == "inconclusive" and "no clear difference" in row["verdict"]
    assert row["verdict"].startswith("TF32 is")


def test_summary_notes_gradscaler_skips():
    df = _trials([0.02, 0.021], [0.01, 0.011], [0.6, 0.6], [0.6, 0.6], mode="amp_fp16", device="cuda:0", backend="cuda")
    df.loc[df["mode"] == "amp_fp16", "skipped_steps"] = [3, 1]
    assert "GradScaler skipped 4 steps over 2 trials" in summarize_trials(df, 0.02).iloc[0]["note"]


def test_summary_one_seed_has_no_ci_and_says_so():
    row = summarize_trials(_trials([0.01], [0.02], [0.6], [0.6]), 0.02, {"cpu": cpu_note(NO_BF16_FLAGS)}).iloc[0]
    assert row["trials"] == 1 and math.isnan(row["speedup_ci95_low"]) and math.isnan(row["acc_diff_ci95_high"])
    assert row["speedup_ci_method"] == ""  # no interval, nothing to label
    assert row["faster"] == "inconclusive" and row["accuracy_parity"] == "inconclusive"
    assert "no CI: one seed" in row["verdict"] and "Only one seed pair" in row["note"]


@pytest.mark.parametrize(
    "flags,expect",
    [
        (NO_BF16_FLAGS, "no native bf16 units"),
        ("fpu sse2 avx2 fma", "no native bf16 units"),
        (NO_BF16_FLAGS + ["avx512_bf16"], None),
        (NO_BF16_FLAGS + ["amx_bf16", "amx_tile"], None),
        (None, "CPU flags unknown"),
    ],
)
def test_cpu_bf16_note_depends_on_flags(flags, expect):
    """CpuBackend.amp_note (the CPU's flags -> a sentence) reaches the summary's note."""
    trials = _trials([0.01, 0.011], [0.02, 0.021], [0.6, 0.6], [0.6, 0.6])
    note = summarize_trials(trials, 0.02, {"cpu": cpu_note(flags)}).iloc[0]["note"]
    if expect:
        assert expect in note
    else:
        assert "native" not in note and "slower" not in note
    assert (precision_note(flags, "bfloat16") == "") == (expect is None)
    assert CPU.amp_note({"flags": flags}, "bfloat16") == precision_note(flags, "bfloat16")


def test_cpu_fp16_note_names_fp16_units():
    assert "no native fp16 units" in CPU.amp_note({"flags": NO_BF16_FLAGS}, "float16")
    assert CPU.amp_note({"flags": NO_BF16_FLAGS + ["avx512_fp16"]}, "float16") == ""


def test_barely_learned_baseline_is_flagged():
    row = summarize_trials(_trials([0.01, 0.011], [0.02, 0.021], [0.22, 0.23], [0.22, 0.23]), 0.02).iloc[0]
    assert "barely learned" in row["note"]


@pytest.mark.parametrize("flags,native", [(["avx2", "amx_bf16"], True), (["avx2"], False)])
def test_device_name_and_note_come_from_the_backends_device_info(monkeypatch, tmp_path, flags, native):
    """run_backend asks the backend (live, once per device) for the device's name and flags: the trials'
    device_name and the device's AMP note come from there."""
    asked = []

    def device_info(self, device="cpu"):
        asked.append(device)
        return {"device": device, "name": "Live CPU", "flags": flags}

    def fake_trial(trial, amp_cfg, data, policy, *, backend, threads, steps_out):
        assert backend is st.backend and threads == 1
        return {
            "backend": trial.backend,
            "device": trial.device,
            "device_name": trial.device_name,
            "workload": trial.workload,
            "mode": trial.mode,
            "seed": trial.seed,
            "status": "ok",
        }

    monkeypatch.setattr(backends.CpuBackend, "device_info", device_info)
    monkeypatch.setattr(amp, "run_trial_safely", fake_trial)
    st = stage_for(tmp_path, run_info_for(TINY_AMP | {"workloads": ["mlp"], "seeds": [0]}))
    _, trials, notes = amp.run_backend(st, log=lambda s: None)
    assert asked == ["cpu"]
    assert [t["mode"] for t in trials] == ["fp32", "amp_bf16"] and {t["device_name"] for t in trials} == {"Live CPU"}
    assert (notes["cpu"] == "") is native
    assert notes["cpu"] == CPU.amp_note({"flags": flags}, "bfloat16")


# ------------------------------------------------------------------ the CLI

AMP_TABLES = {"steps": "amp_steps", "trials": "amp_trials", "summary": "amp_summary"}


def _cli(tmp_path, run_info, backend="cpu", run_file=None):
    from accelbench.cli import main

    if run_file is None:
        run_file = tmp_path / "run.json"
        run_file.write_text(json.dumps(run_info))
    out = {k: tmp_path / registry.TABLES[t].filename(backend) for k, t in AMP_TABLES.items()}
    rc = main(["amp", "--run-file", str(run_file), "--backend", backend, "--threads", "1", "--out-dir", str(tmp_path)])
    return rc, {k: pd.read_csv(v) if v.exists() else None for k, v in out.items()}


def test_cli_writes_documented_columns(tmp_path, monkeypatch):
    cfg = copy.deepcopy(TINY_AMP) | {"steps": 5, "warmup_steps": 1, "workloads": ["mlp"]}
    monkeypatch.setattr(
        backends.CpuBackend,
        "device_info",
        lambda self, device="cpu": {"device": "cpu", "name": "Test CPU", "flags": NO_BF16_FLAGS},
    )
    rc, out = _cli(tmp_path, run_info_for(cfg))
    assert rc == 0
    for kind, df in (("amp_steps", out["steps"]), ("amp_trials", out["trials"]), ("amp_summary", out["summary"])):
        assert [c for c in list(registry.TABLES[kind].columns) if c not in df.columns] == [], kind
        assert (df["run_id"] == "t").all() and (df["device_name"] == "Test CPU").all()
    assert len(out["steps"]) == 2 * 2 * 5 and len(out["trials"]) == 4 and len(out["summary"]) == 1
    assert set(out["trials"]["mode"]) == {"fp32", "amp_bf16"} and set(out["trials"]["status"]) == {"ok"}
    s = out["summary"].iloc[0]
    assert s["trials"] == 2 and "no native bf16 units" in s["note"] and s["verdict"].startswith("AMP (bf16) is")


def test_cli_absent_backend_writes_absent_rows(tmp_path, monkeypatch):
    def no_device(self):
        raise BackendUnavailable("backend 'cuda': no CUDA device visible to this torch build")

    monkeypatch.setattr(backends.CudaBackend, "devices", no_device)  # absent even on a machine with a GPU
    rc, out = _cli(tmp_path, run_info_for(TINY_AMP), backend="cuda")
    assert rc == 0
    for df in out.values():
        assert list(df["status"]) == ["absent"] and (df["backend"] == "cuda").all()
        assert (df["method_version"] == registry.STAGES["amp"].method_version).all()
    assert "no CUDA device" in out["summary"].loc[0, "verdict"]


def test_bad_cross_key_config_is_one_line_before_work(tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"^amp\.warmup_steps: 30 must be below amp\.steps \(30\)"):
        check_amp_config(tiny_cfg(warmup_steps=30))
    with pytest.raises(ConfigError, match=r"^amp\.transformer\.n_heads: 3 does not divide"):
        check_amp_config(tiny_cfg(transformer={"d_model": 16, "n_heads": 3}))
    rc, out = _cli(tmp_path, run_info_for(TINY_AMP | {"batch_size": 1000}))
    assert rc == 2 and out["trials"] is None
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["accelbench amp: amp.batch_size: 1000 is larger than amp.data.n_train (256); allowed: 1 .. 256"]


def test_cli_warms_the_device_first_and_records_it_and_the_method_version(tmp_path, capsys):
    from accelbench.cli import main

    cfg = {
        "run": "t",
        "warmup": TINY_WARMUP,
        "amp": {
            "workloads": ["mlp"],
            "seeds": [0],
            "steps": 3,
            "warmup_steps": 1,
            "batch_size": 16,
            "data": {"n_train": 32, "n_test": 16, "n_features": 4, "n_classes": 2},
            "mlp": {"hidden": 8, "layers": 1},
        },
    }
    run_file = tmp_path / "run.json"
    assert main(["run-info", "--config-json", json.dumps(cfg), "--run", "t", "--out", str(run_file)]) == 0
    capsys.readouterr()
    rc, out = _cli(tmp_path, None, run_file=run_file)
    assert rc == 0
    printed = capsys.readouterr().out
    assert "warm-up" in printed and printed.index("warm-up") < printed.index("amp cpu mlp")  # before any trial
    for kind in ("steps", "trials"):
        df = out[kind]
        assert len(df) == {"steps": 2 * 3, "trials": 2}[kind]
        assert (df["device_warmup_s"] > 0).all() and df["device_warmup_s"].nunique() == 1
        assert df["device_warmup_status"].isin(["ok", "unstable"]).all() and (df["device_warmup_calls"] >= 3).all()
    for df in out.values():
        assert len(df) >= 1 and (df["method_version"] == registry.STAGES["amp"].method_version).all()
