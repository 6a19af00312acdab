"""The AMP stage's training workloads (accelbench.stages.amp.workloads): gpt and resnet, their FLOP counts
(FlopCounterMode against the analytic formulas), the Markov corpus's entropy floor and that the tiny gpt learns
toward it, the compiled modes (compile_error, no C++ compiler), batch_size max (a fake OOM), MFU and the bad
inputs. The CUDA paths (tf32 peak, bf16 MFU on a GPU) are untested on hardware."""

from __future__ import annotations

import copy
import math

import numpy as np
import pandas as pd
import pytest
import torch

from accelbench import backends
from accelbench.run.config import ConfigError, check, with_defaults
from accelbench.stages.amp import measure as amp
from accelbench.stages.amp import workloads as W
from accelbench.stages.amp.stats import summarize_trials
from accelbench.stages.amp.workloads import gpt, resnet

CPU = backends.get("cpu")


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def amp_cfg(**sections) -> dict:
    """The defaults-filled amp section with ``sections`` merged in (dicts into dicts)."""
    raw = {}
    for k, v in sections.items():
        raw[k] = copy.deepcopy(v)
    return with_defaults({"amp": raw})["amp"]


# ------------------------------------------------------------------ FLOP counts


@pytest.mark.parametrize(
    "workload,preset", [("gpt", "gpt2-124m"), ("resnet", "resnet50"), ("gpt", "gpt2-350m"), ("gpt", "llama-1b")]
)
def test_flop_counter_agrees_with_the_analytic_formula_within_3_percent(workload, preset):
    cfg = amp_cfg(**{workload: {"preset": preset}})
    counted = W.model_flops(workload, cfg, 2, torch)  # on the meta device: no memory, no compute
    analytic = W.analytic_flops(workload, cfg, 2)
    assert counted > 0 and analytic > 0
    assert abs(counted / analytic - 1) < 0.03, (counted, analytic)


def test_analytic_counts_match_the_published_sizes():
    """gpt2-124m has 124M parameters without its position table (nanoGPT: "number of parameters: 123.69M"),
    ResNet-50 4.09 GMACs per 224² image (torchvision's table: 4.09 GFLOPS, counted as multiply-adds); the formulas
    agree with the built models' parameter counts."""
    s = gpt.resolve({"preset": "gpt2-124m"})
    with torch.device("meta"):
        model = gpt.build_gpt(s, torch)
    n = sum(p.numel() for p in model.parameters()) - model.wpe.weight.numel()
    assert n == gpt.matmul_params(s) == 123_689_472
    assert gpt.analytic_flops_per_token(s) == 6 * n + 12 * 12 * 768 * 1024
    s = gpt.resolve({"preset": "llama-1b"})
    with torch.device("meta"):
        model = gpt.build_gpt(s, torch)
    assert sum(p.numel() for p in model.parameters()) == gpt.matmul_params(s)
    assert 1.0e9 < gpt.matmul_params(s) < 1.3e9
    r = resnet.resolve({"preset": "resnet50"})
    assert resnet.forward_macs(r) == pytest.approx(4.09e9, rel=0.005)
    with torch.device("meta"):
        model = resnet.build_resnet(r, torch)
    assert sum(p.numel() for p in model.parameters()) == 25_557_032  # torchvision's resnet50: 25,557,032


def test_flops_scale_with_batch_and_sizes_override_the_preset():
    cfg = amp_cfg(gpt={"preset": "tiny"})
    one, two = W.model_flops("gpt", cfg, 1, torch), W.model_flops("gpt", cfg, 2, torch)
    assert two == pytest.approx(2 * one)
    bigger = amp_cfg(gpt={"preset": "tiny", "n_layers": 4})
    assert W.sizes("gpt", bigger)["n_layers"] == 4 and W.sizes("gpt", bigger)["d_model"] == 32
    assert W.analytic_flops("gpt", bigger, 1) > W.analytic_flops("gpt", cfg, 1)


# ------------------------------------------------------------------ the corpus and its floor


def test_entropy_rate_is_exact_against_a_dense_eigenvector():
    gen = torch.Generator().manual_seed(3)
    succ, probs = gpt.markov_chain(12, 3, gen, torch)
    assert all(len(set(row.tolist())) == 3 for row in succ)  # distinct successors
    dense = np.zeros((12, 12))
    for i in range(12):
        dense[i, succ[i].numpy()] = probs[i].numpy()
    w, v = np.linalg.eig(dense.T)
    pi = np.real(v[:, np.argmin(abs(w - 1))])
    pi = pi / pi.sum()
    h = -(dense * np.log(np.where(dense > 0, dense, 1))).sum(1)
    assert gpt.entropy_rate(succ, probs, torch) == pytest.approx(float(pi @ h), abs=1e-9)
    assert gpt.entropy_rate(succ, probs, torch) < math.log(3)


def test_the_true_chain_scores_the_floor_on_the_generated_corpus():
    """The ideal model (the chain's own transition probabilities) reaches the floor on the sampled text: the
    floor is the corpus's, not a formula's."""
    cfg = amp_cfg(gpt={"preset": "tiny", "n_train": 2000, "n_test": 500})
    x_tr, y_tr, x_te, y_te = amp.make_data("gpt", cfg, 0, torch)
    floor = amp.loss_floor("gpt", cfg, 0, torch)
    gen = amp._generator(torch, "amp-data", 0, "gpt", amp._data_keys(cfg, "gpt"))
    succ, probs = gpt.markov_chain(32, 4, gen, torch)
    V = 32
    table = torch.zeros(V, V, dtype=torch.float64)
    table.scatter_(1, succ, probs)
    nll = -torch.log(table[x_te.flatten(), y_te.flatten()])
    assert torch.isfinite(nll).all()  # every transition in the text is one of the chain's
    assert float(nll.mean()) == pytest.approx(floor, abs=0.03)
    assert x_tr.shape == (2000, 32) and (x_tr[:, 1:] == y_tr[:, :-1]).all()


@pytest.mark.parametrize("mode", ["fp32", "amp_bf16"])
def test_tiny_gpt_loss_falls_toward_the_known_floor(mode):
    cfg = amp_cfg(gpt={"preset": "tiny", "steps": 60, "warmup_steps": 3, "batch_size": 16, "lr": 0.01})
    wl = amp.workload_config(cfg, "gpt")
    data = amp.make_data("gpt", cfg, 0, torch)
    floor = amp.loss_floor("gpt", cfg, 0, torch)
    row = amp.run_trial(
        amp.Trial("cpu", "cpu", "t", "gpt", mode, 0),
        wl,
        data,
        CPU.amp_policy("auto"),
        backend=CPU,
        threads=1,
        steps_out=[],
    )
    assert row["status"] == "ok", row
    assert row["first_loss"] == pytest.approx(math.log(32), abs=0.3)  # starts near uniform over the vocabulary
    gap0, gap = row["first_loss"] - floor, row["test_loss"] - floor
    assert gap < 0.2 * gap0, (row["first_loss"], row["test_loss"], floor)  # within 20% of the way left
    assert row["test_loss"] > floor - 0.05  # and never meaningfully below the floor
    assert row["tokens_per_s"] == pytest.approx(16 * 32 / row["step_median_s"])
    assert row["step_ci95_low_s"] <= row["step_median_s"] <= row["step_ci95_high_s"]
    # 57 timed steps: a batch-means interval over the steps in time order
    assert row["step_ci_method"] == "batch_means" and math.isfinite(row["step_lag1_autocorr"])
    assert row["model_flops_per_step"] == pytest.approx(W.model_flops("gpt", wl, 16, torch))
    # at d_model 32 the biases and norms in N (no matmul) are 3% of it: the 3% agreement is for the real sizes
    assert abs(row["analytic_flops_per_step"] / row["model_flops_per_step"] - 1) < 0.05
    assert row["model_tflops_per_s"] == pytest.approx(row["model_flops_per_step"] / row["step_median_s"] / 1e12)


def test_small_resnet_learns_and_counts_images():
    cfg = amp_cfg(resnet={"preset": "small", "steps": 20, "warmup_steps": 3, "batch_size": 16})
    wl = amp.workload_config(cfg, "resnet")
    data = amp.make_data("resnet", cfg, 0, torch)
    assert data[0].dtype == torch.uint8 and data[0].shape[1:] == (3, 32, 32)
    row = amp.run_trial(
        amp.Trial("cpu", "cpu", "t", "resnet", "fp32", 0),
        wl,
        data,
        CPU.amp_policy("auto"),
        backend=CPU,
        threads=1,
        steps_out=[],
    )
    assert row["status"] == "ok" and row["final_loss"] < 0.8 * row["first_loss"]
    assert row["test_acc"] > row["majority_acc"] + 0.1
    assert row["images_per_s"] == pytest.approx(16 / row["step_median_s"]) and math.isnan(row["tokens_per_s"])


def test_channels_last_resnet_trains_the_same_model():
    cfg = amp_cfg(resnet={"preset": "small", "channels_last": True, "steps": 3, "warmup_steps": 1})
    model = W.build("resnet", cfg, torch)
    assert model.stem[0].weight.is_contiguous(memory_format=torch.channels_last)
    out = model(torch.zeros(2, 3, 32, 32, dtype=torch.uint8))
    assert out.shape == (2, 8)


# ------------------------------------------------------------------ MFU


def test_training_columns_give_mfu_against_the_precisions_peak(monkeypatch):
    seen = []

    def fake_peak(self, info, dtype, threads=None, overrides=None):
        seen.append(dtype)
        return {"float32": 2.0, "bfloat16": 8.0}[dtype], f"fake {dtype}"

    monkeypatch.setattr(backends.CpuBackend, "peak_tflops", fake_peak)
    policy = CPU.amp_policy("auto")
    cfg = amp_cfg()
    for mode, peak in (("fp32", 2.0), ("amp_bf16", 8.0), ("amp_bf16_compiled", 8.0)):
        cols = amp.training_columns({"mode": mode, "model_tflops_per_s": 0.5}, CPU, {}, policy, 1, 1.2, cfg, "gpt")
        assert cols["peak_tflops"] == peak and cols["mfu_pct"] == pytest.approx(100 * 0.5 / peak)
        assert cols["preset"] == "tiny" and cols["loss_floor_nats"] == 1.2
    assert seen == ["float32", "bfloat16", "bfloat16"]
    assert amp.peak_dtype("tf32_compiled", policy) == "tf32"  # CUDA's TF32 peak (untested on hardware)
    no_peak = amp.training_columns(
        {"mode": "fp32", "model_tflops_per_s": math.nan}, CPU, {}, policy, 1, math.nan, cfg, "mlp"
    )
    assert math.isnan(no_peak["mfu_pct"]) and no_peak["preset"] == ""


# ------------------------------------------------------------------ compile


def test_compiled_modes_follow_the_eager_ones():
    assert amp.compiles({"compile": True}, "mlp") and not amp.compiles({"compile": False}, "gpt")
    assert amp.compiles({"compile": ["gpt"]}, "gpt") and not amp.compiles({"compile": ["gpt"]}, "resnet")
    policy = CPU.amp_policy("auto")
    assert amp.modes_for(CPU, policy, {}, compiled=True) == ["fp32", "amp_bf16", "fp32_compiled", "amp_bf16_compiled"]
    assert amp.eager_mode("amp_bf16_compiled") == "amp_bf16" and amp.is_compiled("fp32_compiled")


def test_a_compile_failure_is_that_trials_compile_error(monkeypatch):
    def failing_backend(gm, example_inputs):
        raise RuntimeError("planted inductor failure")

    monkeypatch.setattr(amp, "compile_model", lambda model, torch_: torch_.compile(model, backend=failing_backend))
    cfg = amp_cfg(gpt={"steps": 3, "warmup_steps": 1})
    wl = amp.workload_config(cfg, "gpt")
    data = amp.make_data("gpt", cfg, 0, torch)
    steps: list = []
    row = amp.run_trial_safely(
        amp.Trial("cpu", "cpu", "t", "gpt", "fp32_compiled", 0),
        wl,
        data,
        CPU.amp_policy("auto"),
        backend=CPU,
        threads=1,
        steps_out=steps,
    )
    assert row["status"] == "compile_error" and "planted inductor failure" in row["status_detail"]
    assert "\n" not in row["status_detail"]
    eager = amp.run_trial_safely(
        amp.Trial("cpu", "cpu", "t", "gpt", "fp32", 0),
        wl,
        data,
        CPU.amp_policy("auto"),
        backend=CPU,
        threads=1,
        steps_out=[],
    )
    assert eager["status"] == "ok"  # the others go on


def test_no_cpp_compiler_makes_the_cpu_compiled_modes_unsupported(monkeypatch, tmp_path):
    from accelbench.backends import cpu as cpu_backend

    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(cpu_backend.shutil, "which", lambda name: None)
    why = amp.compile_support(CPU)
    assert "C++ compiler" in why and "g++" in why
    # the stage records the compiled modes unsupported with that reason and trains the eager ones
    import json

    from accelbench.run.config import config_hash
    from accelbench.stages import common

    config = with_defaults(
        {
            "run": "t",
            "backends": ["cpu"],
            "warmup": {"n": 16, "max_iters": 20, "window": 3, "rel_tol": 0.5},
            "amp": {"workloads": ["gpt"], "seeds": [0], "compile": True, "gpt": {"steps": 3, "warmup_steps": 1}},
        }
    )
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"run": "t", "config": config, "config_hash": config_hash(config), "git_commit": "t"}))
    st = common.start("amp", str(run), "cpu", 1)
    _, trials, _ = amp.run_backend(st, log=lambda *a: None)
    by_mode = {t["mode"]: t for t in trials}
    assert (
        by_mode["fp32_compiled"]["status"] == "unsupported"
        and "C++ compiler" in by_mode["fp32_compiled"]["status_detail"]
    )
    assert by_mode["fp32"]["status"] == "ok" and by_mode["amp_bf16"]["status"] == "ok"
    monkeypatch.setattr(cpu_backend.shutil, "which", lambda name: "/usr/bin/g++" if name == "g++" else None)
    assert amp.compile_support(CPU) == ""


def test_summary_compares_a_compiled_mode_with_its_eager_mode():
    rows = []
    for seed in (0, 1, 2):
        for mode, step in (("fp32", 0.10), ("amp_bf16", 0.08), ("fp32_compiled", 0.05), ("amp_bf16_compiled", 0.04)):
            rows.append(
                {
                    "backend": "cpu",
                    "device": "cpu",
                    "device_name": "c",
                    "workload": "gpt",
                    "mode": mode,
                    "seed": seed,
                    "amp_dtype": "bfloat16" if "amp" in mode else "float32",
                    "step_median_s": step * (1 + 0.01 * seed),
                    "test_acc": 0.5,
                    "majority_acc": 0.1,
                    "skipped_steps": 0,
                    "status": "ok",
                }
            )
    s = summarize_trials(pd.DataFrame(rows), 0.02).set_index("mode")
    assert s.loc["fp32_compiled", "baseline"] == "fp32" and s.loc["amp_bf16_compiled", "baseline"] == "amp_bf16"
    assert s.loc["amp_bf16", "baseline"] == "fp32"
    assert s.loc["fp32_compiled", "speedup"] == pytest.approx(2.0, rel=1e-6)
    assert s.loc["amp_bf16_compiled", "speedup"] == pytest.approx(2.0, rel=1e-6)
    assert s.loc["fp32_compiled", "verdict"].startswith("FP32 compiled is 2.00x FP32 (faster")


@pytest.mark.slow
def test_torch_compile_trains_the_tiny_gpt_on_the_cpu():
    """Real inductor with the C++ compiler here: the compiled trial finishes, reports its compile time apart,
    and learns as the eager one does."""
    if amp.compile_support(CPU):
        pytest.skip("no C++ compiler on this machine")
    cfg = amp_cfg(compile=True, gpt={"steps": 12, "warmup_steps": 2})
    wl = amp.workload_config(cfg, "gpt")
    data = amp.make_data("gpt", cfg, 0, torch)
    row = amp.run_trial(
        amp.Trial("cpu", "cpu", "t", "gpt", "fp32_compiled", 0),
        wl,
        data,
        CPU.amp_policy("auto"),
        backend=CPU,
        threads=1,
        steps_out=[],
    )
    assert row["status"] == "ok" and row["compile_s"] > 10 * row["step_median_s"]
    assert row["final_loss"] < row["first_loss"]


# ------------------------------------------------------------------ batch_size: max


@pytest.mark.parametrize("fits_up_to,limit", [(37, 512), (1, 64), (64, 64), (100, 64), (0, 64)])
def test_find_max_batch_bisects_to_the_largest_that_fits(fits_up_to, limit):
    tried = []

    def fits(b):
        tried.append(b)
        return b <= fits_up_to

    assert amp.find_max_batch(fits, limit) == min(fits_up_to, limit)
    assert len(tried) <= 2 * math.ceil(math.log2(limit)) + 2


def test_batch_size_max_finds_the_batch_under_a_fake_oom(monkeypatch):
    """A model that raises torch's OutOfMemoryError above 37 sequences: the search records 37, the trials train
    it, a fixed batch is left alone."""
    real = amp.WORKLOADS["gpt"]

    def oom_above_37(cfg, torch_):
        model = real(cfg, torch_)
        forward = model.forward

        def guarded(idx):
            if idx.shape[0] > 37:
                raise torch_.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (fake)")
            return forward(idx)

        model.forward = guarded
        return model

    monkeypatch.setattr(amp, "WORKLOADS", {**amp.WORKLOADS, "gpt": oom_above_37})
    cfg = amp_cfg(gpt={"batch_size": "max", "steps": 3, "warmup_steps": 1})
    wl = amp.workload_config(cfg, "gpt")
    data = amp.make_data("gpt", cfg, 0, torch)
    logs = []
    batch, how = amp.choose_batch(wl, "gpt", "fp32", data, CPU.amp_policy("auto"), CPU, "cpu", log=logs.append)
    assert (batch, how) == (37, "max") and "37" in logs[0]
    fixed = amp.choose_batch({**wl, "batch_size": 8}, "gpt", "fp32", data, CPU.amp_policy("auto"), CPU, "cpu")
    assert fixed == (8, "fixed")


def test_batch_search_that_fails_otherwise_raises(monkeypatch):
    def broken(cfg, torch_):
        raise ValueError("not an OOM")

    monkeypatch.setattr(amp, "WORKLOADS", {**amp.WORKLOADS, "gpt": broken})
    cfg = amp_cfg(gpt={"batch_size": "max"})
    data = amp.make_data("gpt", cfg, 0, torch)
    with pytest.raises(ValueError, match="not an OOM"):
        amp.choose_batch(amp.workload_config(cfg, "gpt"), "gpt", "fp32", data, CPU.amp_policy("auto"), CPU, "cpu")


# ------------------------------------------------------------------ bad input, before any job


@pytest.mark.parametrize(
    "section,expect",
    [
        ({"gpt": {"preset": "gpt-5"}}, "amp.gpt.preset: 'gpt-5' is not allowed; allowed: tiny, gpt2-124m"),
        ({"gpt": {"preset": "gpt2-124m", "d_model": 770}}, "amp.gpt.n_heads: 12 does not divide amp.gpt.d_model (770)"),
        (
            {"gpt": {"batch_size": "lots"}},
            "amp.gpt.batch_size: 'lots' is not allowed; allowed: a positive integer, max",
        ),
        ({"resnet": {"batch_size": "16"}}, "amp.resnet.batch_size: '16' is not allowed; allowed: a positive integer"),
        ({"resnet": {"preset": "resnet18"}}, "amp.resnet.preset: 'resnet18' is not allowed; allowed: small, resnet50"),
        ({"gpt": {"batch_size": 4096}}, "amp.gpt.batch_size: 4096 is larger than amp.gpt.n_train (512)"),
        ({"gpt": {"preset": "llama-1b", "n_heads": 2048}}, "amp.gpt.d_model: head size 2048/2048 = 1 is odd"),
        ({"compile": "yes"}, "amp.compile: 'yes' is not allowed; allowed: true, false, or a list of workloads"),
        ({"compile": ["gpt"], "gpt": {"warmup_steps": 0}}, "amp.gpt.warmup_steps: 0 with amp.compile on"),
    ],
)
def test_bad_workload_input_is_one_line_naming_the_key(section, expect):
    config = {"run": "t", "amp": {"workloads": ["gpt", "resnet"], **section}}
    with pytest.raises(ConfigError) as err:
        check(config)
    assert str(err.value).startswith(expect), str(err.value)
    assert "\n" not in str(err.value)


def test_a_bad_size_of_a_workload_not_run_is_not_checked_but_a_preset_is_valid_everywhere():
    check({"run": "t", "amp": {"workloads": ["mlp"], "gpt": {"d_model": 65}}})  # gpt does not run
    check({"run": "t", "amp": {"workloads": ["gpt"], "gpt": {"preset": "gpt2-350m", "batch_size": "max"}}})


# ------------------------------------------------------------------ the report's training section and references


def test_a_published_figure_is_compared_only_where_device_model_and_precision_match():
    from accelbench.stages.amp import references

    a100 = {
        "device_name": "NVIDIA A100-SXM4-80GB",
        "workload": "resnet",
        "preset": "resnet50",
        "mode": "amp_fp16",
        "images_per_s": 1235.0,
        "world": 1,
    }
    rows = {r["label"]: r for r in references.compare([a100])}
    amp_ref = rows["DeepLearningExamples ResNet-50 v1.5, AMP"]
    assert amp_ref["differs"] == "" and amp_ref["ratio"] == pytest.approx(1235.0 / 2470.0)
    tf32_ref = rows["DeepLearningExamples ResNet-50 v1.5, TF32"]
    assert tf32_ref["ratio"] is None and "precision: here float16, the figure's tf32" in tf32_ref["differs"]
    h200 = {**a100, "device_name": "NVIDIA H200", "preset": "small", "mode": "amp_bf16_compiled"}
    (row,) = [r for r in references.compare([h200]) if r["label"].endswith("AMP")]
    for phrase in ("device: here NVIDIA H200", "model: here resnet preset small", "compile: here torch.compile"):
        assert phrase in row["differs"]
    gpt_point = {
        "device_name": "NVIDIA H100 80GB HBM3",
        "workload": "gpt",
        "preset": "gpt2-124m",
        "mode": "amp_bf16",
        "tokens_per_s": 4e5,
        "world": 1,
    }
    titan = [r for r in references.compare([gpt_point]) if r["label"].startswith("torchtitan")]
    assert len(titan) == 2 and all(
        "model: here gpt preset gpt2-124m, the figure's Llama 3.1 8B" in r["differs"]
        and "GPUs: here 1, the figure's 8" in r["differs"]
        for r in titan
    )
    assert references.compare([]) == []  # no trial of a workload: no line for its figures
    for ref in references.REFERENCES:  # every figure says where it is from
        assert ref["url"].startswith("https://github.com/") and "commit" in ref["source"] and ref["setting"]


def test_training_section_context_from_trials_and_summary():
    from accelbench.stages.amp import training_report

    trials = pd.DataFrame(
        [
            {
                "run_id": "r",
                "device": "cpu",
                "device_name": "c",
                "workload": w,
                "mode": m,
                "seed": s,
                "status": "ok",
                "preset": "tiny",
                "batch_size": 16,
                "batch_search": "fixed",
                "tokens_per_s": 1000.0 * (1 + s),
                "images_per_s": math.nan,
                "mfu_pct": 5.0,
                "model_tflops_per_s": 0.01,
                "peak_tflops": 0.2,
                "peak_dtype": "float32",
                "model_flops_per_step": 1e8,
                "analytic_flops_per_step": 1.02e8,
                "peak_mem_bytes": 2**21,
                "compile_s": math.nan,
                "test_loss": 1.4,
                "test_acc": 0.5,
                "loss_floor_nats": 1.1,
            }
            for w in ("gpt", "mlp")
            for m in ("fp32",)
            for s in (0, 1)
        ]
    )
    series = pd.DataFrame(
        [{"run_id": "r", "device": "cpu", "device_label": "cpu", "label": "r cpu", "color": "#123456"}]
    )
    ctx = training_report.context({"amp_trials": trials, "amp_summary": pd.DataFrame()}, series, {})["training"]
    (row,) = ctx["rows"]  # gpt only: mlp is not a training workload of this section
    assert row["label"] == "r cpu" and row["rate"] == "1,500 tokens/s"  # the mean over the two seeds
    assert row["agree"] == "-2.0%" and row["floor"] == "1.10" and row["mem"] == "2.00 MiB"
    assert ctx["speedups"] == []
