"""The attention stage (plug-in ``accelbench.stages.attention``): the FLOP convention against a hand count,
the float64 check catching a planted wrong result, refusals and OOM as point statuses with the sweep going
on, the kernel selection per device (fakes: untested on hardware), the stage on the CPU end to end, the
figures and the report section, and the plug-in declaration's consistency.
"""

from __future__ import annotations

import ast
import importlib
import json
import math
import types
from pathlib import Path

import pandas as pd
import pytest
import torch

from accelbench import backends, registry
from accelbench.measure.timing import summarize
from accelbench.stages import attention
from accelbench.stages.attention import measure as att
from accelbench.stages.attention import references as refs
from accelbench.stages.attention.measure import Point, attention_flops

ROOT = Path(__file__).resolve().parents[1]
PKG_DIR = ROOT / "src" / "accelbench" / "stages" / "attention"

PLUGIN = attention.PLUGIN
TABLE = PLUGIN.tables[0]
SETTINGS = {"rel_error_max": dict(PLUGIN.defaults["rel_error_max"]), "unstable_iqr_ratio": 0.1, "memory_fraction": 0.8}


def point(**kw) -> Point:
    base = {
        "kernel": "math",
        "dtype": "float32",
        "mode": "forward",
        "batch": 1,
        "heads": 2,
        "seq_len_q": 32,
        "seq_len_k": 32,
        "head_dim": 16,
        "causal": False,
    }
    return Point(**{**base, **kw})


# ---- the FLOP convention --------------------------------------------------------------------------------


def test_flops_against_a_hand_count_and_the_causal_halving():
    # b=2, h=3, s_q=5, s_k=7, d=11: per head S = Q K^T is 5x7 dot products of length 11 (2*5*7*11 flops),
    # O = P V is 5x11 dot products of length 7 (2*5*11*7): 4*5*7*11 = 1540 per head, 6 heads
    hand = 2 * 3 * (2 * 5 * 7 * 11 + 2 * 5 * 11 * 7)
    assert hand == 9240
    assert attention_flops(2, 3, 5, 7, 11, causal=False) == hand
    assert attention_flops(2, 3, 5, 7, 11, causal=True) == hand / 2
    assert attention_flops(2, 3, 5, 7, 11, causal=False, mode="forward_backward") == 3.5 * hand  # + 2.5x backward
    assert attention_flops(2, 3, 5, 7, 11, causal=True, mode="forward_backward") == 3.5 * hand / 2
    # flash-attn's benchmark flops(batch, seqlen, headdim, nheads, causal): 4 * b * s**2 * h * d // (2 if causal)
    assert attention_flops(4, 16, 1024, 1024, 128, True) == 4 * 4 * 1024**2 * 16 * 128 // 2
    with pytest.raises(ValueError, match="allowed: forward, forward_backward"):
        attention_flops(1, 1, 1, 1, 1, False, mode="backward")


def test_forward_flops_agree_with_torch_flop_counter():
    """torch.utils.flop_counter counts the math kernel's two batched products: the same 4·b·h·s_q·s_k·d."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    q = torch.randn(2, 3, 40, 8)
    k = v = torch.randn(2, 3, 24, 8)
    with sdpa_kernel([SDPBackend.MATH]), FlopCounterMode(display=False) as counter:
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert counter.get_total_flops() == attention_flops(2, 3, 40, 24, 8, causal=False)


# ---- the check catches a planted wrong result ---------------------------------------------------------------


def _cpu_attention(min_run_time_s: float = 0.005):
    from accelbench.measure.timing import Measurer

    b = backends.get("cpu")
    return att.TorchAttention(
        "cpu", b, measurer=Measurer(b.synced_timer("cpu"), min_run_time_s=min_run_time_s, threads=1)
    )


@pytest.mark.parametrize("mode", ["forward", "forward_backward"])
def test_check_catches_a_planted_wrong_result(mode):
    torch.set_num_threads(1)
    real = _cpu_attention()
    p = point(mode=mode, causal=True)
    honest = att.measure_point(real, p, settings=SETTINGS, peak=(None, "none", True))
    assert honest["status"] in ("ok", "unstable") and honest["rel_error"] < 1e-5

    planted = _cpu_attention()
    sdpa = planted._sdpa
    # the kernel under test (not the float64 reference) returns 1% too much
    planted._sdpa = lambda q, k, v, **kw: sdpa(q, k, v, **kw) * (1.01 if q.dtype != torch.float64 else 1.0)
    row = att.measure_point(planted, p, settings=SETTINGS, peak=(None, "none", True))
    assert row["status"] == "wrong_result", row
    assert row["rel_error"] == pytest.approx(0.01, rel=0.05)
    assert "rel_error" in row["status_detail"] and "> 0.0001" in row["status_detail"]


def test_check_sees_a_wrong_causal_mask():
    """A kernel that ignores the mask is wrong only against a reference that writes the mask out."""
    torch.set_num_threads(1)
    planted = _cpu_attention()
    sdpa = planted._sdpa
    planted._sdpa = lambda q, k, v, **kw: (
        sdpa(q, k, v, **{**kw, "is_causal": False}) if q.dtype != torch.float64 else sdpa(q, k, v, **kw)
    )
    row = att.measure_point(planted, point(causal=True), settings=SETTINGS, peak=(None, "none", True))
    assert row["status"] == "wrong_result" and row["rel_error"] > 0.1


# ---- failures are points' statuses; the sweep goes on -------------------------------------------------------


class FakeAttention:
    """A device side whose points fail as planted: ``fail[(kernel, seq)]`` is raised at the first call."""

    def __init__(self, fail=None, call_s=1e-3):
        self.fail = fail or {}
        self.call_s = call_s
        self.backend = backends.get("cpu")
        self.freed = 0

    def check(self, p):
        exc = self.fail.get((p.kernel, p.seq_len_q))
        if exc is not None:
            raise exc
        return 1e-7, []

    def probe(self, p):
        return self.call_s

    def time(self, p, warmup):
        return summarize([self.call_s * (1 + 0.001 * i) for i in range(8)], calls_per_block=3)

    def memory(self, p):
        return 3e6, 1e6, "allocator"

    def free(self, collect=False):
        self.freed += 1


class MemoryCheckpoint:
    def __init__(self):
        self.rows = {}

    def key(self, row):
        return tuple(str(row[k]) for k in att.CHECKPOINT_KEY)

    def add(self, row):
        self.rows[self.key(row)] = row


def _sweep(fake, points, unavailable=None, free=None, checkpoint=None):
    return att.sweep(
        ["dev0"],
        points,
        SETTINGS,
        att_for=lambda d: fake,
        device_row=lambda d: {"device": d, "device_name": "Fake", "config_hash": "h"},
        peak_for=lambda d, dt: (100.0, "table", True),
        unavailable=unavailable or {},
        checkpoint=checkpoint or MemoryCheckpoint(),
        config_hash="h",
        free_for=lambda d: free,
        log=lambda s: None,
    )


def test_a_kernel_refusing_a_point_is_unsupported_with_one_line_and_the_rest_goes_on():
    refusal = RuntimeError(
        "No viable backend for scaled_dot_product_attention was found.\n"
        "This is likely due to turning off both the math kernel and the fused kernels."
    )
    refusal.torch_reasons = ["Flash attention requires the head dimension to be at most 256, got 512."]
    fake = FakeAttention(fail={("flash", 64): refusal})
    pts = [point(kernel="flash", seq_len_q=s, seq_len_k=s) for s in (32, 64, 128)]
    rows = _sweep(fake, pts)
    assert [r["status"] for r in rows] == ["ok", "unsupported", "ok"]
    detail = rows[1]["status_detail"]
    assert "\n" not in detail and detail.startswith("RuntimeError: No viable backend")
    assert "likely due" not in detail  # the first line only, then torch's reason
    assert "head dimension to be at most 256" in detail
    assert math.isnan(rows[1]["tflops"]) and rows[2]["tflops"] == pytest.approx(pts[2].flops / 1e-3 / 1e12, rel=0.01)
    assert fake.freed == 3  # memory given back after every point, the failed one included


def test_unavailable_kernel_and_not_implemented_dtype_are_unsupported():
    fake = FakeAttention(
        fail={("math", 32): NotImplementedError("\"mul_cpu_reduced_float\" not implemented for 'Float8_e4m3fn'")}
    )
    rows = _sweep(
        fake,
        [point(kernel="cudnn"), point(kernel="math"), point(kernel="math", seq_len_q=64)],
        unavailable={"cudnn": "cuDNN is not available"},
    )
    assert [r["status"] for r in rows] == ["unsupported", "unsupported", "ok"]
    assert rows[0]["status_detail"] == "cuDNN is not available"
    assert rows[1]["status_detail"].startswith("NotImplementedError:")


def test_out_of_memory_is_oom_and_the_rest_goes_on():
    oom = RuntimeError("CUDA out of memory. Tried to allocate 8.00 GiB (GPU 0; 79.1 GiB total capacity)")
    fake = FakeAttention(fail={("math", 64): oom, ("math", 128): MemoryError()})
    rows = _sweep(fake, [point(seq_len_q=s, seq_len_k=s) for s in (32, 64, 128, 256)])
    assert [r["status"] for r in rows] == ["ok", "oom", "oom", "ok"]
    assert "out of memory" in rows[1]["status_detail"]


def test_a_point_predicted_past_free_memory_is_oom_without_running():
    fake = FakeAttention()
    big = point(seq_len_q=65536, seq_len_k=65536, heads=16)
    rows = _sweep(fake, [point(), big], free=2**30)
    assert [r["status"] for r in rows] == ["ok", "oom"]
    assert rows[1]["status_detail"].startswith("not run: predicted")
    assert (
        att.predicted_bytes(point(kernel="math", seq_len_q=4096, seq_len_k=4096))
        > 16 * att.predicted_bytes(point(kernel="flash", seq_len_q=1024, seq_len_k=1024)) / 16
    )  # quadratic for math


def test_any_other_exception_is_error_and_above_a_bound_peak_is_invalid():
    fake = FakeAttention(fail={("math", 32): ValueError("something else")})
    rows = _sweep(fake, [point(), point(seq_len_q=64, seq_len_k=64)])
    assert rows[0]["status"] == "error" and rows[0]["status_detail"] == "ValueError: something else"
    fast = FakeAttention(call_s=1e-12)
    assert _sweep(fast, [point()])[0]["status"] == "invalid"
    row = att.measure_point(fast, point(), settings=SETTINGS, peak=(100.0, "nominal", False))
    assert row["status"] == "ok" and "nominal peak" in row["status_detail"]


def test_checkpointed_points_are_not_measured_again():
    cp = MemoryCheckpoint()
    first = _sweep(FakeAttention(), [point(), point(seq_len_q=64, seq_len_k=64)], checkpoint=cp)
    again = FakeAttention(fail={("math", 32): AssertionError("measured again")})
    rows = _sweep(
        again, [point(), point(seq_len_q=64, seq_len_k=64), point(seq_len_q=128, seq_len_k=128)], checkpoint=cp
    )
    assert rows[:2] == first and rows[2]["status"] == "ok" and again.freed == 1


# ---- kernel selection per device (fake torch modules: untested on hardware) --------------------------------


def fake_torch(members=("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION"), flash=True, cudnn=True):
    sdpb = types.SimpleNamespace(**{m: m for m in members})
    return types.SimpleNamespace(
        nn=types.SimpleNamespace(attention=types.SimpleNamespace(SDPBackend=sdpb)),
        backends=types.SimpleNamespace(
            cuda=types.SimpleNamespace(is_flash_attention_available=lambda: flash),
            cudnn=types.SimpleNamespace(is_available=lambda: cudnn),
        ),
    )


def test_kernel_selection_cpu_has_flash_and_math_only():
    assert att.device_kernels(fake_torch(), "cpu", attention.KERNELS) == [("flash", None), ("math", None)]
    assert att.device_kernels(torch, "cpu", ["math", "efficient"]) == [("math", None)]


def test_kernel_selection_cuda_asks_torch_untested_on_hardware():
    assert att.device_kernels(fake_torch(), "cuda", attention.KERNELS) == [
        ("flash", None),
        ("efficient", None),
        ("cudnn", None),
        ("math", None),
    ]
    got = dict(att.device_kernels(fake_torch(flash=False, cudnn=False), "cuda", attention.KERNELS))
    assert got["flash"] == "flash attention is not compiled into this torch build"
    assert got["cudnn"] == "cuDNN is not available" and got["efficient"] is None
    old = dict(
        att.device_kernels(
            fake_torch(members=("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION")), "cuda", ["cudnn", "math"]
        )
    )
    assert old == {"cudnn": "this torch has no torch.nn.attention.SDPBackend.CUDNN_ATTENTION", "math": None}


def test_kernel_selection_rocm_has_no_cudnn_and_others_try_all_untested_on_hardware():
    assert [k for k, _ in att.device_kernels(fake_torch(), "rocm", attention.KERNELS)] == ["flash", "efficient", "math"]
    assert [k for k, _ in att.device_kernels(fake_torch(), "xpu", ["math", "flash"])] == ["flash", "math"]


def test_plan_points_and_dtypes():
    cfg = att.sweep_config(PLUGIN.defaults, "cpu")
    assert cfg["kernels"] == ["flash", "math"] and cfg["dtypes"] == ["bfloat16", "float32"] and not cfg["fp8"]
    assert att.plan_dtypes({"dtypes": ["bfloat16"], "fp8": True}, torch) == ["bfloat16", "float8_e4m3fn"]
    assert att.plan_dtypes({"dtypes": ["bfloat16"], "fp8": True}, types.SimpleNamespace()) == ["bfloat16"]
    pts = att.plan_points(cfg, ["flash", "math"], ["bfloat16", "float32"])
    assert len(pts) == 2 * 2 * len(cfg["modes"]) * len(cfg["head_dims"]) * len(cfg["causal"]) * len(cfg["seq_lens"])
    gpu = att.sweep_config({**PLUGIN.defaults, **PLUGIN.gpu_check}, "cuda")
    gpu_points = [p for p in att.plan_points(gpu, ["flash"], ["bfloat16"]) if not p.causal]
    assert [p.seq_len_q for p in gpu_points] == [1024, 2048, 4096, 8192, 16384]
    assert {p.batch * p.seq_len_q for p in gpu_points} == {16384}  # FA3's 16k tokens per batch
    assert att.batch_for({"batch": 3, "tokens": None}, 4096) == 3 and att.batch_for({"tokens": 1000}, 4096) == 1


def test_failure_classification_of_torch_messages():
    status, detail = att.failure(RuntimeError("FlashAttention only supports Ampere GPUs or newer.\nmore"))
    assert status == "unsupported" and detail == "RuntimeError: FlashAttention only supports Ampere GPUs or newer."
    assert att.failure(RuntimeError("CUDA out of memory. Tried to allocate"))[0] == "oom"
    assert att.failure(
        RuntimeError("No available kernel. Aborting execution."), reasons=["Flash attention requires head_dim <= 256"]
    ) == (
        "unsupported",
        "RuntimeError: No available kernel. Aborting execution. | torch: Flash attention requires head_dim <= 256",
    )
    assert att.torch_reasons(
        [
            "Memory efficient kernel not used because: (Triggered internally at x.cpp:1.)",
            "Flash attention requires q,k,v to have the same last dimension\n and more",
        ]
    ) == ["Memory efficient kernel not used because:", "Flash attention requires q,k,v to have the same last dimension"]


def test_fp8_on_the_cpu_is_unsupported_with_torch_reason():
    torch.set_num_threads(1)
    row = att.measure_point(
        _cpu_attention(), point(kernel="math", dtype="float8_e4m3fn"), settings=SETTINGS, peak=(None, "none", True)
    )
    assert row["status"] == "unsupported" and row["status_detail"].count("\n") == 0
    assert "Float8_e4m3fn" in row["status_detail"] or "viable" in row["status_detail"]


# ---- the stage on the CPU, end to end -------------------------------------------------------------------

TINY = {
    "kernels": ["flash", "math"],
    "dtypes": ["bfloat16", "float32"],
    "fp8": False,
    "modes": ["forward", "forward_backward"],
    "batch": 1,
    "heads": 2,
    "seq_lens": [32, 64],
    "head_dims": [16],
    "causal": [False, True],
    "min_run_time_s": 0.002,
}


def write_run(tmp_path, section: dict) -> str:
    from accelbench.run.config import config_hash, with_defaults

    full = with_defaults(
        {
            "run": "t",
            "warmup": {"n": 64, "max_iters": 30, "window": 3, "rel_tol": 0.5},
            "attention": {**section, "host": {}},
        }
    )
    path = tmp_path / "run.json"
    path.write_text(
        json.dumps(
            {
                "run": "t",
                "config": full,
                "config_hash": config_hash(full),
                "git_commit": "abc",
                "accelbench_version": "0",
            }
        )
    )
    return str(path)


def run_cli(*argv) -> int:
    from accelbench.cli import main

    return main(["attention", *argv])


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """The stage's CLI on the CPU at a tiny size (16 points x 2 modes)."""
    tmp = tmp_path_factory.mktemp("attention")
    run = write_run(tmp, TINY)
    assert run_cli("--run-file", run, "--backend", "cpu", "--threads", "1", "--out-dir", str(tmp)) == 0
    return tmp


def test_cpu_end_to_end_table_has_every_documented_column(cpu_run):
    df = pd.read_csv(cpu_run / "attention_cpu.csv")
    assert list(df.columns) == [*TABLE.columns, *TABLE.extra]
    assert len(df) == 2 * 2 * 2 * 2 * 2  # kernels x dtypes x modes x causal x seq lens
    assert set(df["status"]) <= {"ok", "unstable"}, df[["kernel", "dtype", "status", "status_detail"]]
    assert (df["run_id"] == "t").all() and (df["method_version"] == PLUGIN.method_version).all()
    assert (df["backend"] == "cpu").all() and (df["device_warmup_s"] > 0).all()
    hand = df.apply(
        lambda r: attention_flops(r.batch, r.heads, r.seq_len_q, r.seq_len_k, r.head_dim, r.causal, r["mode"]), axis=1
    )
    assert (df["flops"] == hand).all()
    assert (df["tflops"] - df["flops"] / df["median_s"] / 1e12).abs().max() < 1e-9
    ci = df[df["ci95_low_s"].notna()]  # an interval wherever 6 blocks fitted in the time bound (nearly always)
    assert len(ci) >= len(df) // 2
    assert (ci["ci95_low_s"] <= ci["median_s"]).all() and (ci["median_s"] <= ci["ci95_high_s"]).all()
    assert set(df["ci_method"]) <= {"batch_means", "descriptive"}  # every point was measured
    assert (df.loc[df["blocks"] < 50, "ci_method"] == "descriptive").all()
    assert (df.loc[df["blocks"] >= 50, "ci_method"] == "batch_means").all()
    assert (df["rel_error"] < df["rel_error_max"]).all()
    assert (df["mem_kind"].isin(["rss", "rss_process_peak"])).all() and (df["peak_mem_bytes"] > 0).all()
    assert set(df["sdpa_backend"]) == {"FLASH_ATTENTION", "MATH"}
    assert not df[list(TABLE.identity[1:])].duplicated().any()


def test_cpu_end_to_end_samples_and_checkpoint(cpu_run):
    df = pd.read_csv(cpu_run / "attention_cpu.csv")
    samples = pd.read_parquet(cpu_run / "attention_cpu_samples.parquet")
    assert set(samples["table"]) == {"attention"} and (samples["sample_s"] > 0).all()
    keys = set(df.apply(lambda r: att.point_key(r.to_dict()), axis=1))
    assert set(samples["point"]) == keys and len(keys) == len(df)
    per = samples.groupby("point").size()
    blocks = df.assign(point=df.apply(lambda r: att.point_key(r.to_dict()), axis=1)).set_index("point")["blocks"]
    assert (per == blocks.loc[per.index]).all()  # one sample per timed block of the row
    lines = (cpu_run / "checkpoints" / "attention_cpu.jsonl").read_text().splitlines()
    assert len(lines) == len(df)


def test_cpu_absent_backend_writes_one_row(tmp_path):
    run = write_run(tmp_path, TINY)
    assert run_cli("--run-file", run, "--backend", "cuda", "--threads", "1", "--out-dir", str(tmp_path)) == 0
    df = pd.read_csv(tmp_path / "attention_cuda.csv")
    assert len(df) == 1 and df.loc[0, "status"] == "absent"
    assert len(pd.read_parquet(tmp_path / "attention_cuda_samples.parquet")) == 0


def test_figures_and_section_from_the_cpu_run(cpu_run):
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import seaborn as sns
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    df = pd.read_csv(cpu_run / "attention_cpu.csv")
    tables = {"attention": df}
    for fig in PLUGIN.figures:
        drawn = fig.draw.load()(plt, sns, tables, pd.DataFrame())
        assert len(drawn.axes) == 2  # one panel per mode, not the "nothing measured" message
        plt.close(drawn)
    empty = PLUGIN.figures[0].draw.load()(plt, sns, {"attention": pd.DataFrame()}, pd.DataFrame())
    assert "No attention point" in empty.axes[0].texts[0].get_text()
    plt.close(empty)
    figures = {f.name: {"name": f.name, "uri": "data:,", "text": "t", "html": "h"} for f in PLUGIN.figures}
    section = PLUGIN.sections[0]
    ctx = section.context.load()(tables, pd.DataFrame(), {"figures": figures})
    dev = ctx["attention"]["devices"][0]
    assert {(b["kernel"], b["dtype"]) for b in dev["best"]} == {
        ("flash", "BF16"),
        ("flash", "FP32"),
        ("math", "BF16"),
        ("math", "FP32"),
    }
    assert all(c["match"] == "differs" and c["ours"] is None for c in dev["references"])  # a CPU is no A100
    env = Environment(loader=FileSystemLoader(str(PKG_DIR)), undefined=StrictUndefined, autoescape=True)
    html = env.get_template(section.template).render(**ctx)
    assert html.count("<tr") >= len(df) and "arXiv:2407.08608" in html and "not comparable" in html
    assert 'href="http' not in html and 'src="http' not in html  # the report is self-contained


# ---- the published figures beside a matching device only ---------------------------------------------------


def _gpu_points():
    return [
        {
            "kernel": "flash",
            "dtype": "bfloat16",
            "mode": "forward",
            "batch": 1,
            "heads": 16,
            "seq_len_q": 16384,
            "seq_len_k": 16384,
            "head_dim": 128,
            "causal": False,
            "tflops": 555.0,
        },
        {
            "kernel": "cudnn",
            "dtype": "bfloat16",
            "mode": "forward",
            "batch": 1,
            "heads": 16,
            "seq_len_q": 8192,
            "seq_len_k": 8192,
            "head_dim": 128,
            "causal": True,
            "tflops": 600.0,
        },
        {
            "kernel": "math",
            "dtype": "bfloat16",
            "mode": "forward_backward",
            "batch": 1,
            "heads": 16,
            "seq_len_q": 1024,
            "seq_len_k": 1024,
            "head_dim": 128,
            "causal": False,
            "tflops": 900.0,
        },
    ]


def test_references_match_devices_and_say_what_differs():
    fa2, fa3, fa3_fp8 = refs.REFERENCES
    assert fa2["tflops"] == 230 and fa3["tflops"] == 740 and fa3_fp8["tflops"] == 1200
    assert all("arXiv:" in r["source"] and r["url"].startswith("https://arxiv.org/abs/") for r in refs.REFERENCES)
    assert round(100 * fa2["tflops"] / fa2["peak_tflops"]) == 74
    assert round(100 * fa3["tflops"] / fa3["peak_tflops"]) == 75
    h100 = refs.compare(fa3, "NVIDIA H100 80GB HBM3", _gpu_points())
    assert h100["match"] == "same" and h100["ours"] == 600.0  # the best forward point, not the fwd+bwd one
    assert not fa3_fp8["pct_published"] and fa3["pct_published"]
    assert h100["ratio"] == pytest.approx(600 / 740)
    assert any("dtype BF16" in d for d in h100["differences"]) and any("8192 tokens" in d for d in h100["differences"])
    h200 = refs.compare(fa3, "NVIDIA H200", _gpu_points())
    assert h200["match"] == "comparable" and h200["ratio"] == pytest.approx(600 / 740)
    assert "GH100" in h200["differences"][0]
    a100 = refs.compare(fa3, "NVIDIA A100-SXM4-80GB", _gpu_points())
    assert a100["match"] == "differs" and a100["ours"] is None and "H100 80GB SXM5" in a100["differences"][0]
    assert refs.compare(fa2, "NVIDIA A100-SXM4-80GB", _gpu_points())["match"] == "same"
    fp8 = refs.compare(fa3_fp8, "NVIDIA H100 80GB HBM3", _gpu_points())
    assert fp8["ours"] is None and "no trusted forward point in FP8" in fp8["differences"][-1]


# ---- the declaration -------------------------------------------------------------------------------------


def test_declaration_is_consistent():
    cols = set(TABLE.columns) | set(TABLE.extra)
    assert PLUGIN.name == "attention" and PLUGIN.kind == "device" and PLUGIN.config_key == "attention"
    assert set(TABLE.identity) <= cols and set(TABLE.numeric) <= cols and set(TABLE.describe) <= cols
    assert {c for c in TABLE.columns if c not in registry.PROVENANCE + registry.DEVICE + registry.DEVICE_WARMUP} | set(
        TABLE.extra
    ) <= set(TABLE.describe)  # every measured column documented with its unit and meaning
    assert TABLE.compare.median == "median_s" and set(TABLE.compare.ci) <= cols
    assert "absent" in TABLE.statuses and set(att.STATUS_PRECEDENCE) <= set(TABLE.statuses)
    assert "{backend}" in TABLE.file and "{backend}" in TABLE.samples and TABLE.since == PLUGIN.config_key
    names = {t.name for t in PLUGIN.tables}
    for fig in PLUGIN.figures:
        assert set(fig.tables) <= names and (ROOT / "workflow" / "report" / f"{fig.name}.rst").is_file()
        assert callable(fig.draw.load())
    for sec in PLUGIN.sections:
        assert callable(sec.context.load()) and (PKG_DIR / sec.template).is_file()
    entry = importlib.import_module(PLUGIN.entry)
    assert callable(entry.add_arguments) and callable(entry.cli)


def test_defaults_and_gpu_check_validate_against_the_schema():
    import jsonschema

    jsonschema.validate(PLUGIN.defaults, PLUGIN.schema)
    jsonschema.validate({**PLUGIN.defaults, **PLUGIN.gpu_check}, PLUGIN.schema)
    assert set(PLUGIN.schema["properties"]) == set(PLUGIN.defaults)
    with pytest.raises(jsonschema.ValidationError, match="'tensor' is not one of"):
        jsonschema.validate({"kernels": ["tensor"]}, PLUGIN.schema)
    check = PLUGIN.gpu_check
    assert check["dtypes"] == ["bfloat16"] and check["head_dims"] == [128]
    assert set(check["kernels"]) == {"flash", "cudnn"}
    assert min(check["seq_lens"]) == 1024 and max(check["seq_lens"]) == 16384 and check["causal"] == [False, True]


def test_declaration_module_imports_only_the_standard_library_and_the_spec():
    tree = ast.parse((PKG_DIR / "__init__.py").read_text())
    imported = {
        n.module if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in (n.names if isinstance(n, ast.Import) else [n])
    }
    assert imported <= {"__future__", "accelbench.plugin", "accelbench.columns"}, imported


# ---- real kernels on the CPU: a refusal, and the memory the math kernel's score matrix takes --------------------


def test_a_real_refusal_on_the_cpu_is_unsupported_in_one_line():
    """torch's CPU has no memory-efficient kernel: forcing it raises "No viable backend" (plus warnings)."""
    torch.set_num_threads(1)
    row = att.measure_point(_cpu_attention(), point(kernel="efficient"), settings=SETTINGS, peak=(None, "none", True))
    assert row["status"] == "unsupported", row
    assert row["status_detail"].startswith("RuntimeError: No viable backend") and "\n" not in row["status_detail"]


def test_cpu_memory_shows_the_math_kernels_score_matrix():
    """One call's resident pages beyond its inputs: math materializes b·h·s² scores (16 MiB in float32 here),
    the fused CPU flash kernel works in tiles."""
    torch.set_num_threads(1)
    a = _cpu_attention()
    got = {}
    for kernel in ("math", "flash"):
        p = point(kernel=kernel, heads=4, seq_len_q=1024, seq_len_k=1024, head_dim=64)
        a.probe(p)
        got[kernel] = a.memory(p)
        a.free()
    scores = 4 * 1024 * 1024 * 4
    (math_peak, math_work, kind), (_, flash_work, _) = got["math"], got["flash"]
    assert kind == "rss" and math_peak > math_work > 0
    assert math_work >= scores / 2 and math_work > 2 * flash_work, got


def test_memory_counter_before_the_call_per_kind_untested_on_hardware():
    """What ``work_mem_bytes`` subtracts: the device allocator's memory_allocated (CUDA/ROCm: torch.cuda, by the
    device string), the resident size on the CPU, nothing where no counter exists."""
    side = att.TorchAttention.__new__(att.TorchAttention)
    asked = []
    side.torch = types.SimpleNamespace(cuda=types.SimpleNamespace(memory_allocated=lambda d: asked.append(d) or 123))
    side.device = "cuda:1"
    assert side._in_use("allocator") == 123.0 and asked == ["cuda:1"]
    side.device = "mps"
    assert side._in_use("allocator") is None  # the fake has no torch.mps: null, not a crash
    assert side._in_use("rss") > 0 and side._in_use("") is None


def test_the_default_config_file_holds_the_stages_defaults():
    """config.yaml is the documented default config: its attention section is the declaration's defaults."""
    import yaml

    section = yaml.safe_load((ROOT / "config.yaml").read_text())["attention"]
    assert section == PLUGIN.defaults
