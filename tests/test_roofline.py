"""The roofline: intensities, roofs and verdicts on synthetic points whose answers are worked out by hand, and
the AMP workloads' GEMM estimate against PyTorch's own flop counter on the real models."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from accelbench.reporting import roofline as R
from accelbench.run.config import with_defaults
from accelbench.stages.amp import roofline as AR
from accelbench.stages.amp.measure import build_mlp, build_transformer
from accelbench.stages.membw.roofline import device_roofs as membw_roofs


def test_bytes_and_intensity_of_one_product():
    # 4096^3 in bf16: 2*4096^3 flops over 3 matrices of 4096^2 x 2 bytes = 4096/3 FLOP/byte
    assert R.gemm_bytes(4096, 4096, 4096, "bfloat16") == 3 * 4096**2 * 2
    assert R.intensity(2 * 4096**3, R.gemm_bytes(4096, 4096, 4096, "bfloat16")) == pytest.approx(4096 / 3)
    # fp8 operands, bf16 result; float32 4 bytes each; a skinny product has low intensity
    assert R.gemm_bytes(16, 32, 64, "float8_e4m3fn") == (16 * 64 + 64 * 32) * 1 + 16 * 32 * 2
    assert R.intensity(2 * 8 * 8192 * 8192, R.gemm_bytes(8, 8192, 8192, "float32")) < 4


def test_attainable_and_ridge():
    # H100-like: 3350 GB/s, 989 TFLOP/s -> ridge 295 FLOP/byte
    assert R.ridge(3350.0, 989.4) == pytest.approx(989.4e3 / 3350)
    assert R.attainable_tflops(10.0, 3350.0, 989.4) == pytest.approx(33.5)
    assert R.attainable_tflops(1000.0, 3350.0, 989.4) == 989.4
    assert R.attainable_tflops(10.0, 3350.0, math.nan) == pytest.approx(33.5)  # no peak: the memory roof alone
    assert math.isnan(R.ridge(math.nan, 989.4))


@pytest.mark.parametrize(
    "time_s,intensity,bw,peak,launch,launches,verdict",
    [
        (15e-6, 1365.0, 3350.0, 989.4, 10e-6, 1, "launch_bound"),  # within 2x of a 10 us floor
        (25e-6, 1365.0, 3350.0, 989.4, 10e-6, 1, "compute_bound"),  # beyond 2x, right of the ridge
        (1e-3, 50.0, 3350.0, 989.4, 10e-6, 1, "memory_bound"),  # left of the ridge (295)
        (1e-3, 400.0, 3350.0, 989.4, 10e-6, 1, "compute_bound"),
        (1e-3, 400.0, 3350.0, 989.4, 10e-6, 60, "launch_bound"),  # 60 kernels x 10 us x 2 > 1 ms
        (1e-3, 400.0, math.nan, 989.4, math.nan, 1, "unknown"),  # no bandwidth measured
        (1e-3, 5.0, 20.0, 0.15, 2e-6, 1, "memory_bound"),  # a CPU: ridge 150 GFLOP/s / 20 GB/s = 7.5
        (1e-3, 10.0, 20.0, 0.15, 2e-6, 1, "compute_bound"),
    ],
)
def test_classify(time_s, intensity, bw, peak, launch, launches, verdict):
    assert R.classify(time_s, intensity, bw, peak, launch, launches) == verdict


# ---- AMP workloads: the GEMM estimate against PyTorch's flop counter ---------------------------------------


@pytest.mark.parametrize("workload,build", [("mlp", build_mlp), ("transformer", build_transformer)])
def test_step_gemms_count_the_flops_pytorch_counts(workload, build):
    """Forward and backward of one training step on the real model: FlopCounterMode counts every mm, addmm and
    (attention forced to the math kernel, which it can count) bmm; the estimate from the config must equal it."""
    amp = with_defaults({})["amp"]
    torch.manual_seed(0)
    model = build(amp, torch)
    model.train()
    d = amp["data"]
    x = (
        torch.randn(amp["batch_size"], d["n_features"])
        if workload == "mlp"
        else torch.randn(amp["batch_size"], amp["transformer"]["seq_len"], d["n_features"])
    )
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(x).sum().backward()
    flops, nbytes, launches = AR.step_flops_bytes(workload, amp, "float32")
    assert flops == counter.get_total_flops()
    assert launches == len(AR.step_gemms(workload, amp)) and launches > 5
    assert nbytes == pytest.approx(sum(g.bytes("float32") for g in AR.step_gemms(workload, amp)))
    assert AR.step_flops_bytes(workload, amp, "bfloat16")[1] == pytest.approx(nbytes / 2)


def test_first_layer_has_no_input_gradient():
    amp = with_defaults({})["amp"]
    names = [g.name for g in AR.step_gemms("mlp", amp)]
    assert "linear0.grad_x" not in names and "linear0.grad_w" in names and "linear1.grad_x" in names


# ---- points from tables ----------------------------------------------------------------------------------


def tables():
    """One GPU-like device: a 10 us launch floor, 3000 GB/s measured past a 50 MiB cache, bf16 peak 1000."""
    base = {"run_id": "r", "backend": "cuda", "device": "cuda:0", "device_name": "G"}
    mm = []
    for n, median_s in ((256, 12e-6), (8192, 1.3e-3)):
        mm.append(
            {
                **base,
                "dtype": "bfloat16",
                "shape_name": None,
                "m": n,
                "n": n,
                "k": n,
                "median_s": median_s,
                "tflops": 2 * n**3 / median_s / 1e12,
                "peak_tflops": 1000.0,
                "status": "ok",
            }
        )
    mm.append(
        {
            **base,
            "dtype": "bfloat16",
            "shape_name": "decode",
            "m": 8,
            "n": 8192,
            "k": 8192,
            "median_s": 50e-6,
            "tflops": 2 * 8 * 8192**2 / 50e-6 / 1e12,
            "peak_tflops": 1000.0,
            "status": "ok",
        }
    )
    mm.append(
        {
            **base,
            "dtype": "bfloat16",
            "shape_name": None,
            "m": 4096,
            "n": 4096,
            "k": 4096,
            "median_s": 1e-4,
            "tflops": 1374.0,
            "peak_tflops": 1000.0,
            "status": "invalid",
        }
    )  # never placed
    bw = [
        {
            **base,
            "kernel": "launch",
            "size_bytes": 4,
            "median_s": 10e-6,
            "gbps": math.nan,
            "peak_gbps": 3350.0,
            "cache_bytes": 50 * 2**20,
            "status": "ok",
        }
    ]
    for size, gbps in ((2**20, 6000.0), (200 * 2**20, 3000.0)):
        for kernel in ("copy", "triad"):
            bw.append(
                {
                    **base,
                    "kernel": kernel,
                    "size_bytes": size,
                    "median_s": 1e-3,
                    "gbps": gbps * (0.9 if kernel == "copy" else 1),
                    "peak_gbps": 3350.0,
                    "cache_bytes": 50 * 2**20,
                    "status": "ok",
                }
            )
    search = [
        {
            **base,
            "dtype": "bfloat16",
            "m": 2048,
            "n": 2048,
            "k": 13312,
            "median_s": 2 * 2048**2 * 13312 / 800e12,
            "tflops": 800.0,
            "peak_tflops": 1000.0,
            "status": "ok",
            "best": True,
        }
    ]
    amp_cfg = with_defaults({})["amp"]
    trials = [
        {**base, "workload": "mlp", "mode": "amp_bf16", "seed": s, "step_median_s": 1e-3, "status": "ok"}
        for s in (0, 1)
    ]
    runs = [{"run_id": "r", "config_json": json.dumps({"amp": amp_cfg})}]
    return {
        "matmul": pd.DataFrame(mm),
        "membw": pd.DataFrame(bw),
        "matmul_search": pd.DataFrame(search),
        "amp_trials": pd.DataFrame(trials),
        "runs": pd.DataFrame(runs),
    }


def test_device_roofs_take_triad_at_the_largest_size_and_the_launch_floor():
    roofs = membw_roofs(tables()["membw"]).iloc[0]
    assert roofs["bandwidth_gbps"] == 3000.0 and roofs["beyond_cache"] and roofs["launch_s"] == 10e-6
    assert "triad" in roofs["bandwidth_source"] and roofs["peak_gbps"] == 3350.0


def test_roofline_points_and_verdicts():
    pts = R.roofline_points(tables()).set_index("point")
    assert len(pts) == 5  # 2 square + 1 shape + the search's best + 1 AMP mode (the invalid point is left out)
    assert pts.loc["n=256", "verdict"] == "launch_bound"  # 12 us against a 10 us floor
    assert pts.loc["n=8192", "verdict"] == "compute_bound"
    assert pts.loc["n=8192", "intensity"] == pytest.approx(8192 / 3)
    assert pts.loc["decode", "verdict"] == "memory_bound"  # m=8: about 8 FLOP/byte, ridge 333
    assert pts.loc["decode", "attainable_tflops"] == pytest.approx(pts.loc["decode", "intensity"] * 3000 / 1e3)
    searched = pts.loc["searched 2048x2048x13312"]
    assert searched["kind"] == "search" and searched["tflops"] == pytest.approx(800.0)
    assert searched["pct_of_roof"] == pytest.approx(80.0) and searched["verdict"] == "compute_bound"
    amp = pts.loc["mlp amp_bf16"]
    flops, nbytes, launches = AR.step_flops_bytes("mlp", with_defaults({})["amp"], "bfloat16")
    assert amp["kind"] == "amp" and amp["flops"] == flops and amp["launches"] == launches
    assert amp["tflops"] == pytest.approx(flops / 1e-3 / 1e12)
    # 1 ms for about 11 GEMMs: beyond 2 x 11 x 10 us = 0.22 ms, so not launch-bound; intensity decides
    assert amp["verdict"] == ("memory_bound" if amp["intensity"] < 1000e3 / 3000 else "compute_bound")


def test_without_measured_bandwidth_the_datasheet_peak_is_the_roof_and_said_so():
    t = tables()
    t["membw"] = t["membw"][t["membw"]["kernel"] == "launch"]
    pts = R.roofline_points(t)
    assert (pts["bandwidth_gbps"] == 3350.0).all()
    assert pts["bandwidth_source"].str.contains("datasheet").all()


def test_without_a_peak_the_best_measured_point_is_the_compute_roof():
    t = tables()
    t["matmul"]["peak_tflops"] = math.nan
    t["matmul_search"]["peak_tflops"] = math.nan
    pts = R.roofline_points(t)
    best = 2 * 8192**3 / 1.3e-3 / 1e12  # the fastest trustworthy point (not the invalid one)
    assert pts[pts["dtype"] == "bfloat16"]["compute_roof_tflops"].tolist() == pytest.approx([best] * 5)
    assert pts["roof_source"].str.startswith("best measured").all()


def test_empty_tables_give_no_points():
    assert R.roofline_points({}).empty and R.device_roofs({}).empty and membw_roofs(pd.DataFrame()).empty


def test_attention_calls_are_placed_by_their_flops_over_their_least_traffic():
    """The attention table's declaration places its trustworthy rows: intensity = flops / min_bytes, the compute
    roof of the row's dtype, the verdict from the same ridge; a refused point (unsupported) is left out."""
    t = tables()
    base = {
        "run_id": "r",
        "backend": "cuda",
        "device": "cuda:0",
        "device_name": "G",
        "kernel": "flash",
        "dtype": "bfloat16",
        "mode": "forward",
        "seq_len_q": 4096,
        "head_dim": 128,
        "causal": False,
    }
    flops, nbytes = 4 * 2 * 16 * 4096 * 4096 * 128, 4 * 2 * 16 * 4096 * 128 * 2  # b=2, h=16: q, k, v, o
    t["attention"] = pd.DataFrame(
        [
            {**base, "flops": flops, "min_bytes": nbytes, "median_s": flops / 500e12, "status": "ok"},
            {
                **base,
                "kernel": "cudnn",
                "flops": flops,
                "min_bytes": nbytes,
                "median_s": math.nan,
                "status": "unsupported",
            },
        ]
    )
    pts = R.roofline_points(t)
    att = pts[pts["kind"] == "attention"]
    assert len(att) == 1
    a = att.iloc[0]
    assert a["point"] == "flash forward s=4096 d=128" and a["intensity"] == pytest.approx(flops / nbytes)
    assert a["tflops"] == pytest.approx(500.0) and a["compute_roof_tflops"] == 1000.0
    assert a["verdict"] == "compute_bound"  # s / 2 = 2048 FLOP/byte, right of the ridge 1000e3 / 3000
    assert "attention" in R.markers()
