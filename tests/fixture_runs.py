"""Synthetic but realistic result folders, written exactly as the README's output contract says.

Two runs:

* ``laptop-cpu``: a 2-core Zen 3 laptop, CPU only (bf16/fp16 matmul 50-300x slower than fp32, the
  largest low-precision points skipped for the time budget, fp8 unsupported); one named shape
  (``qkv``); the shape search off (its file holds only the header); memory bandwidth and launch floor.
* ``gpu-node-h100``: a node with one NVIDIA H100 and its host CPU; flagged points: an ``unstable``
  fp32 point, an ``invalid`` fp16 point (above 100% of peak), an ``oom``, a ``wrong_result`` fp8
  point and CPU points ``skipped_budget``; three transformer shapes (``qkv``, ``mlp_up``,
  ``mlp_down``); a bf16 shape search whose best (2048 x 2048 x 13312, mamf-finder's H100 shape) beats
  the best square point; HBM bandwidth and launch floor.

Telemetry on both: the laptop without RAPL access or throttle counters (power, energy and throttling
null, devices.json says why); the H100 with every NVML sensor, its first point on a ramping clock
(``clock_ramp``), its two largest fp16 points thermally throttled (``hw_thermal``), one AMP trial held by
the power cap, and a 30 s soak that settles 9% below its boost clock.

Numbers come from simple closed forms (efficiency rising with n) so tests can recompute what the
report must show from the CSVs themselves. ``corrupt`` damages a file the ways real copies break.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from accelbench import registry
from accelbench.measure import samples as sample_table
from accelbench.run.config import config_hash, load
from accelbench.run.io import atomic_write_parquet

REPO = Path(__file__).resolve().parents[1]

H100 = "NVIDIA H100 80GB HBM3"
EPYC = "AMD EPYC 7V13 64-Core Processor"
LAPTOP_CPU = "AMD Ryzen 7 5800U with Radeon Graphics"

# dense peak TFLOP/s (H100 SXM datasheet, no sparsity)
H100_PEAK = {"float32": 66.9, "tf32": 494.7, "bfloat16": 989.4, "float16": 989.4, "float8_e4m3fn": 1978.9}


def make_config(
    run: str, backends: list[str], sizes: list[int], dtypes: list[str], seeds=(0, 1, 2), shapes=(), search_dtypes=()
) -> dict:
    config = load(REPO / "config.yaml")
    config["run"] = run
    config["backends"] = backends
    config["matmul"]["sizes"] = sizes
    config["matmul"]["dtypes"] = dtypes
    config["matmul"]["shapes"] = [dict(zip(("name", "m", "n", "k"), s)) for s in shapes]
    if search_dtypes:
        config["matmul"]["search"].update(enabled=True, dtypes=list(search_dtypes), budget_s=300.0)
    config["amp"]["seeds"] = list(seeds)
    config["amp"]["steps"] = 40
    return config


def provenance(run_id: str, host: str, cfg_hash: str, cuda_version: str = "", image: str = "") -> dict:
    return {
        "run_id": run_id,
        "host": host,
        "accelbench_version": "0.1.0",
        "git_commit": "6930832abcdef0123456789",
        "torch_version": "2.13.0+cu126" if cuda_version else "2.13.0+cpu",
        "cuda_version": cuda_version,
        "hip_version": "",
        "container_image": image,
        "config_hash": cfg_hash,
    }


def _cpu_info(model: str, cores: int) -> dict:
    # as accelbench detect writes it: "model" is /proc/cpuinfo's model number, "model_name" the name
    return {
        "model": "1",
        "model_name": model,
        "name": model,
        "arch": "x86_64",
        "cores_physical": cores,
        "cores_logical": cores * 2,
        "flags": ["avx", "avx2", "fma", "f16c"],
        "vendor": "AuthenticAMD",
    }


def devices_json(
    run_id: str,
    host: str,
    cfg_hash: str,
    cpu_model: str,
    cores: int,
    gpus: list[dict],
    cuda_version: str = "",
    image: str = "",
    cpu_telemetry: dict | None = None,
) -> dict:
    backends = {
        "cpu": {
            "present": True,
            "reason": "",
            "devices": [
                {
                    "device": "cpu",
                    "name": cpu_model,
                    "peak_threads": cores,
                    "peaks": {
                        "float32": {"tflops": cores * 0.128, "source": f"cpu: {cores} cores x 4.0 GHz x 32 FLOP/cycle"}
                    },
                    **({"telemetry": cpu_telemetry} if cpu_telemetry else {}),
                }
            ],
        },
        "cuda": (
            {
                "present": True,
                "devices": gpus,
                "reason": "",
                "driver_version": "560.35.03",
                "runtime_version": cuda_version,
            }
            if gpus
            else {"present": False, "devices": [], "reason": "torch.cuda.is_available() is False (CPU build of torch)"}
        ),
        "rocm": {"present": False, "devices": [], "reason": "not a ROCm build of torch (torch.version.hip is None)"},
        "mps": {"present": False, "devices": [], "reason": "torch.backends.mps.is_available() is False (not macOS)"},
        "xla": {"present": False, "devices": [], "reason": "torch_xla is not installed"},
    }
    return {
        "run_id": run_id,
        "host": host,
        "timestamp_utc": "2025-06-01T12:00:00Z",
        "accelbench_version": "0.1.0",
        "git_commit": "6930832abcdef0123456789",
        "config_hash": cfg_hash,
        "python_version": "3.11.7",
        "torch_version": "2.13.0+cu126" if cuda_version else "2.13.0+cpu",
        "cuda_version": cuda_version,
        "hip_version": "",
        "container_image": image,
        "env": {"OMP_NUM_THREADS": None, "CUDA_VISIBLE_DEVICES": "0" if gpus else None},
        "packages": {"torch": "2.13.0", "numpy": "2.4.6", "pandas": "3.1.1", "snakemake": "9.27.1"},
        "cpu": _cpu_info(cpu_model, cores),
        "backends": backends,
    }


def matmul_rows(
    prov: dict,
    backend: str,
    device: str,
    device_name: str,
    sizes,
    dtypes,
    best: dict,
    peak: dict,
    threads: int,
    overrides: dict,
    rel_error_max: dict,
    budget_n: dict,
) -> list[dict]:
    """One row per (dtype, n). ``best[dtype]`` is the TFLOP/s the device approaches at large n;
    ``overrides[(dtype, n)]`` forces a status; ``budget_n[dtype]``: sizes above are skipped_budget."""
    rows = []
    for dtype in dtypes:
        for n in sizes:
            flops = 2.0 * n**3
            status = overrides.get((dtype, n), "ok")
            if dtype not in best:
                status = "unsupported"
            elif n > budget_n.get(dtype, 1 << 30):
                status = "skipped_budget"
            row = {
                **prov,
                "backend": backend,
                "device": device,
                "device_name": device_name,
                "dtype": dtype,
                "shape_name": "",
                "m": n,
                "n": n,
                "k": n,
                "flops": flops,
                "threads": threads,
                "allow_tf32": dtype == "tf32",
                "peak_tflops": peak.get(dtype, float("nan")),
                "peak_source": "datasheet" if dtype in peak else "",
                "rel_error_max": rel_error_max.get(dtype, float("nan")),
                "status": status,
                "flags": "",
                "status_detail": "",
            }
            if status in ("ok", "unstable", "invalid", "wrong_result"):
                eff = 1.0 - math.exp(-n / (1200.0 if backend == "cuda" else 300.0))
                tflops = best[dtype] * eff
                if status == "invalid":
                    tflops = 1.31 * peak[dtype]
                median_s = flops / (tflops * 1e12)
                tflops = flops / median_s / 1e12
                iqr_ratio = 0.23 if status == "unstable" else 0.012
                rel_error = 0.41 if status == "wrong_result" else rel_error_max.get(dtype, 1e-4) / 20
                row.update(
                    median_s=median_s,
                    iqr_s=median_s * iqr_ratio,
                    ci95_low_s=median_s * (1 - iqr_ratio / 3),
                    ci95_high_s=median_s * (1 + iqr_ratio / 3),
                    repeats=int(max(5, min(400, 0.3 / median_s))),
                    # small products get many blocks (batch means), large ones the 6 that give a descriptive one
                    ci_method="batch_means" if n <= 1024 else "descriptive",
                    lag1_autocorr=0.31,
                    tflops=tflops,
                    pct_of_peak=100.0 * tflops / peak[dtype] if dtype in peak else float("nan"),
                    rel_error=rel_error,
                )
                row["flags"] = {"ok": "", "unstable": "unstable", "invalid": "invalid", "wrong_result": "wrong_result"}[
                    status
                ]
                row["status_detail"] = {
                    "ok": "",
                    "unstable": f"IQR/median {iqr_ratio:.2f} > 0.10",
                    "invalid": f"{row['pct_of_peak']:.0f}% of peak: missing synchronization or wrong peak",
                    "wrong_result": f"rel_error {rel_error:.2g} > {rel_error_max.get(dtype)}",
                }[status]
            else:
                row.update(
                    median_s=np.nan,
                    iqr_s=np.nan,
                    ci95_low_s=np.nan,
                    ci95_high_s=np.nan,
                    ci_method="",
                    lag1_autocorr=np.nan,
                    repeats=0,
                    tflops=np.nan,
                    pct_of_peak=np.nan,
                    rel_error=np.nan,
                    flags=status,
                    status_detail={
                        "skipped_budget": "predicted 41.2 s > point_budget_s 3.0",
                        "oom": "CUDA out of memory. Tried to allocate 8.00 GiB",
                        "unsupported": f"{dtype} matmul not supported on {backend}",
                        "error": "RuntimeError: cuBLAS error",
                    }.get(status, ""),
                )
            rows.append(row)
    return rows


def shape_rows(
    prov: dict,
    backend: str,
    device: str,
    device_name: str,
    shapes,
    dtypes,
    efficiency: dict,
    best: dict,
    peak: dict,
    threads: int,
    rel_error_max: dict,
) -> list[dict]:
    """One row per (dtype, named shape): ``efficiency[name]`` of the dtype's ``best`` TFLOP/s."""
    rows = []
    for dtype in dtypes:
        for name, m, n, k in shapes:
            flops = 2.0 * m * n * k
            row = {
                **prov,
                "backend": backend,
                "device": device,
                "device_name": device_name,
                "dtype": dtype,
                "shape_name": name,
                "m": m,
                "n": n,
                "k": k,
                "flops": flops,
                "threads": threads,
                "allow_tf32": False,
                "peak_tflops": peak.get(dtype, float("nan")),
                "peak_source": "datasheet" if dtype in peak else "",
                "rel_error_max": rel_error_max.get(dtype, float("nan")),
                "flags": "",
                "status_detail": "",
            }
            if dtype not in best:
                row.update(
                    status="unsupported",
                    flags="unsupported",
                    repeats=0,
                    status_detail=f"{dtype} matmul not supported on {backend}",
                )
                rows.append(row)
                continue
            tflops = best[dtype] * efficiency[name]
            median_s = flops / (tflops * 1e12)
            row.update(
                median_s=median_s,
                iqr_s=0.01 * median_s,
                ci95_low_s=0.995 * median_s,
                ci95_high_s=1.006 * median_s,
                ci_method="batch_means",
                lag1_autocorr=0.28,
                repeats=60,
                tflops=tflops,
                rel_error=1e-6,
                status="ok",
                pct_of_peak=100.0 * tflops / peak[dtype] if dtype in peak else float("nan"),
            )
            rows.append(row)
    return rows


def search_rows(
    prov: dict,
    backend: str,
    device: str,
    device_name: str,
    dtype: str,
    best_shape,
    best_tflops: float,
    peak: float,
    threads: int,
    budget_s: float = 300.0,
    evaluations: int = 40,
) -> list[dict]:
    """A finished search: coarse and refine evaluations below the best, then three confirmations; the best
    confirmed one is ``best_shape`` at ``best_tflops``."""
    rng = np.random.default_rng(len(device) + evaluations)
    bm, bn, bk = best_shape
    rows = []

    def row(i, phase, m, n, k, tflops, best=False):
        flops = 2.0 * m * n * k
        median_s = flops / (tflops * 1e12)
        lo, hi = 0.996 * median_s, 1.005 * median_s
        return {
            **prov,
            "backend": backend,
            "device": device,
            "device_name": device_name,
            "dtype": dtype,
            "m": m,
            "n": n,
            "k": k,
            "flops": flops,
            "phase": phase,
            "evaluation": i,
            "threads": threads,
            "median_s": median_s,
            "iqr_s": 0.012 * median_s,
            "ci95_low_s": lo,
            "ci95_high_s": hi,
            "ci_method": "batch_means" if phase == "confirm" else "descriptive",
            "lag1_autocorr": 0.3,
            "repeats": 40 if phase != "confirm" else 120,
            "tflops": tflops,
            "tflops_ci95_low": flops / hi / 1e12,
            "tflops_ci95_high": flops / lo / 1e12,
            "peak_tflops": peak,
            "pct_of_peak": 100 * tflops / peak,
            "rel_error": 2e-3,
            "status": "ok",
            "best": best,
            "status_detail": "",
            "method": "coarse grid + multi-start compass search + confirmation",
            "grid_points": 26 * 26 * 31,
            "evaluated_shapes": evaluations,
            "search_s": 0.93 * budget_s,
            "budget_s": budget_s,
            "stop_reason": "converged",
            "min_run_time_s": 0.3 if phase == "confirm" else 0.05,
        }

    for i in range(evaluations):
        m, n, k = (int(x) for x in rng.choice([1024, 2048, 3072, 4096, 6144, 8192], size=3))
        rows.append(row(i, "coarse" if i < 27 else "refine", m, n, k, best_tflops * (0.55 + 0.4 * rng.random())))
    rows[-1] = row(evaluations - 1, "refine", bm, bn, bk, best_tflops * 1.004)
    rows.append(row(evaluations, "confirm", bm, bn, bk, best_tflops, best=True))
    rows.append(row(evaluations + 1, "confirm", 4096, 4096, 8192, best_tflops * 0.97))
    rows.append(row(evaluations + 2, "confirm", 2048, 4096, 13312, best_tflops * 0.96))
    return rows


def membw_rows(
    prov: dict,
    backend: str,
    device: str,
    device_name: str,
    launch_s: float,
    cache_gbps: float,
    memory_gbps: float,
    cache_bytes: int,
    peak_gbps: float | None,
    threads: int,
) -> list[dict]:
    """The launch floor, then copy and triad from 64 KiB to 4x the cache: cache bandwidth falling to memory's."""
    base = {
        **prov,
        "backend": backend,
        "device": device,
        "device_name": device_name,
        "threads": threads,
        "peak_gbps": peak_gbps if peak_gbps else float("nan"),
        "peak_source": "datasheet" if peak_gbps else "cpu: measured only",
        "cache_bytes": cache_bytes,
    }
    rows = [
        {
            **base,
            "kernel": "launch",
            "size_bytes": 4,
            "bytes_moved": float("nan"),
            "median_s": launch_s,
            "iqr_s": 0.02 * launch_s,
            "ci95_low_s": 0.99 * launch_s,
            "ci95_high_s": 1.01 * launch_s,
            "ci_method": "batch_means",
            "lag1_autocorr": 0.35,
            "repeats": 20000,
            "gbps": float("nan"),
            "status": "ok",
        }
    ]
    sizes = [64 * 1024 * 4**i for i in range(12) if 64 * 1024 * 4**i < 4 * cache_bytes] + [4 * cache_bytes]
    for size in sizes:
        for kernel, arrays, slower in (("copy", 2, 0.92), ("triad", 3, 1.0)):
            rate = slower * (memory_gbps + (cache_gbps - memory_gbps) / (1 + (size / cache_bytes) ** 3))
            moved = arrays * size
            median_s = moved / rate / 1e9
            rows.append(
                {
                    **base,
                    "kernel": kernel,
                    "size_bytes": size,
                    "bytes_moved": moved,
                    "median_s": median_s,
                    "iqr_s": 0.02 * median_s,
                    "ci95_low_s": 0.99 * median_s,
                    "ci95_high_s": 1.012 * median_s,
                    "ci_method": "batch_means" if size < cache_bytes else "descriptive",
                    "lag1_autocorr": 0.27,
                    "repeats": 60,
                    "gbps": rate,
                    "gbps_ci95_low": moved / (1.012 * median_s) / 1e9,
                    "gbps_ci95_high": moved / (0.99 * median_s) / 1e9,
                    "pct_of_peak": 100 * rate / peak_gbps if peak_gbps else float("nan"),
                    "status": "ok",
                }
            )
    return rows


def warmup_rows(prov, backend, device, device_name, cold_s, warm_s, stable_at, threads, iters=30) -> list[dict]:
    rng = np.random.default_rng(len(device) + int(cold_s * 1000))
    rows = []
    for i in range(iters):
        decay = warm_s + (cold_s - warm_s) * math.exp(-1.1 * i)
        iter_s = cold_s if i == 0 else decay * (1 + 0.02 * rng.standard_normal())
        rows.append(
            {
                **prov,
                "backend": backend,
                "device": device,
                "device_name": device_name,
                "iter": i,
                "iter_s": abs(iter_s),
                "cold_s": cold_s,
                "warm_s": warm_s,
                "stable_at_iter": stable_at,
                "threads": threads,
                "status": "ok",
            }
        )
    return rows


def transfer_rows(prov, backend, device, device_name, sizes_mb, pinned_gbps, pageable_gbps) -> list[dict]:
    rows = []
    for direction in ("h2d", "d2h"):
        for memory, top in (("pageable", pageable_gbps), ("pinned", pinned_gbps)):
            for mb in sizes_mb:
                size = mb * 2**20
                gbps = top * (1 - math.exp(-mb / 6.0)) * (0.93 if direction == "d2h" else 1.0)
                median_s = size / (gbps * 1e9)
                rows.append(
                    {
                        **prov,
                        "backend": backend,
                        "device": device,
                        "device_name": device_name,
                        "direction": direction,
                        "memory": memory,
                        "size_bytes": size,
                        "median_s": median_s,
                        "iqr_s": 0.03 * median_s,
                        "repeats": 50,
                        "gbps": gbps,
                        "status": "ok",
                    }
                )
    return rows


TRAINING_FLOPS = {"gpt": 1.75e12 / 8, "resnet": 4.86e10 / 2}  # gpt2-124m per sequence, resnet50 per image


def training_cols(workload, mode, batch, step_s, device_name) -> dict:
    """The training columns of a gpt or resnet trial row (the presets a GPU would run), empty for the others."""
    if workload not in TRAINING_FLOPS:
        return {}
    gpu = "H100" in device_name
    preset = {"gpt": "gpt2-124m" if gpu else "tiny", "resnet": "resnet50" if gpu else "small"}[workload]
    flops = TRAINING_FLOPS[workload] * batch
    peak = (989.0 if mode != "fp32" else 67.0) if gpu else (2.6 if mode != "fp32" else 0.17)
    tflops = flops / step_s / 1e12
    return {
        "preset": preset,
        "batch_search": "fixed",
        "step_ci95_low_s": step_s * 0.98,
        "step_ci95_high_s": step_s * 1.02,
        "step_ci_method": "batch_means",
        "step_lag1_autocorr": 0.2,
        "tokens_per_s": batch * 1024 / step_s if workload == "gpt" else np.nan,
        "images_per_s": batch / step_s if workload == "resnet" else np.nan,
        "model_flops_per_step": flops,
        "analytic_flops_per_step": flops * 1.001,
        "model_tflops_per_s": tflops,
        "peak_dtype": {"fp32": "float32", "amp_bf16": "bfloat16", "amp_fp16": "float16"}[mode],
        "peak_tflops": peak,
        "peak_source": "fixture",
        "mfu_pct": 100 * tflops / peak,
        "compile_s": np.nan,
        "loss_floor_nats": 1.1 if workload == "gpt" else np.nan,
    }


def amp_rows(
    prov,
    backend,
    device,
    device_name,
    amp_mode,
    step_fp32,
    amp_factor,
    acc_fp32,
    acc_delta,
    seeds,
    steps,
    threads,
    mem_kind,
):
    """(steps, trials, summary) rows for fp32 vs one AMP mode, every default workload (gpt and resnet with their
    training columns: throughput, FLOPs, MFU against a peak, the loss floor)."""
    steps_rows, trials, summary = [], [], []
    batch = 128
    for w_i, workload in enumerate(("mlp", "transformer", "gpt", "resnet")):
        per_mode = {}
        for mode in ("fp32", amp_mode):
            for seed in seeds:
                rng = np.random.default_rng(seed * 10 + w_i)
                base = step_fp32 * (1 + 0.9 * w_i)
                step_s = base / (amp_factor if mode != "fp32" else 1.0)
                for step in range(steps):
                    loss = 2.08 * math.exp(-step / (14 + 6 * w_i)) + 0.25 + 0.03 * rng.standard_normal()
                    if mode != "fp32":
                        loss += 0.01
                    steps_rows.append(
                        {
                            **prov,
                            "backend": backend,
                            "device": device,
                            "device_name": device_name,
                            "workload": workload,
                            "mode": mode,
                            "seed": seed,
                            "step": step,
                            "loss": loss,
                            "step_s": step_s * (1 + 0.02 * rng.standard_normal()),
                            "scale": 65536.0 if mode == "amp_fp16" else np.nan,
                            "skipped": False,
                            "status": "ok",
                        }
                    )
                acc = acc_fp32 - w_i * 0.05 + (acc_delta if mode != "fp32" else 0.0) + 0.004 * (seed - 1)
                trials.append(
                    {
                        **prov,
                        "backend": backend,
                        "device": device,
                        "device_name": device_name,
                        "workload": workload,
                        "mode": mode,
                        "seed": seed,
                        "amp_dtype": {"amp_fp16": "float16", "amp_bf16": "bfloat16"}.get(mode, ""),
                        "step_median_s": step_s * (1 + 0.01 * seed),
                        "samples_per_s": batch / step_s,
                        "peak_mem_bytes": int(3.1e8 / (1.6 if mode != "fp32" else 1)),
                        "mem_kind": mem_kind,
                        "final_loss": 0.27,
                        "test_acc": acc,
                        "skipped_steps": 1 if mode == "amp_fp16" else 0,
                        "final_scale": 32768.0 if mode == "amp_fp16" else np.nan,
                        "threads": threads,
                        "status": "ok",
                        **training_cols(workload, mode, batch, step_s, device_name),
                    }
                )
                per_mode.setdefault(mode, []).append((step_s * (1 + 0.01 * seed), acc))
        fp32 = per_mode["fp32"]
        for mode in ("fp32", amp_mode):
            t = per_mode[mode]
            step_mean = float(np.mean([s for s, _ in t]))
            speedup = float(np.mean([s for s, _ in fp32])) / step_mean
            acc_mean = float(np.mean([a for _, a in t]))
            acc_diff = acc_mean - float(np.mean([a for _, a in fp32]))
            faster = speedup > 1.05 if mode != "fp32" else False
            parity = abs(acc_diff) <= 0.02
            verdict = (
                "baseline"
                if mode == "fp32"
                else f"{'faster' if faster else 'not faster'} ({speedup:.2f}x) with "
                f"{'accuracy parity' if parity else 'an accuracy loss'} ({acc_diff:+.3f})"
            )
            summary.append(
                {
                    **prov,
                    "backend": backend,
                    "device": device,
                    "device_name": device_name,
                    "workload": workload,
                    "mode": mode,
                    "baseline": "fp32",
                    "trials": len(t),
                    "step_s_mean": step_mean,
                    "speedup": speedup,
                    "speedup_ci95_low": speedup * 0.96,
                    "speedup_ci95_high": speedup * 1.04,
                    "speedup_ci_method": "descriptive",
                    "test_acc_mean": acc_mean,
                    "acc_diff": acc_diff,
                    "acc_diff_ci95_low": acc_diff - 0.011,
                    "acc_diff_ci95_high": acc_diff + 0.011,
                    "faster": faster,
                    "accuracy_parity": parity,
                    "verdict": verdict,
                    "note": "" if mode == "fp32" else f"{len(t)} seeds",
                }
            )
    return steps_rows, trials, summary


# the scaling fixture's workloads: (examples per rank, tokens per example (gpt) or 0, MFU % of one rank at world 1)
SCALING_WORKLOADS = {"mlp": (128, 0, None), "gpt": (16, 32, 2.5)}


def scaling_rows(
    prov,
    backend,
    device,
    device_name,
    worlds,
    *,
    step_1,
    efficiency,
    process_group,
    threads,
    amp_mode,
    dp=None,
    collective_worlds=(),
    busbw_top=1.0,
    copy_reason="",
    workloads=("mlp",),
) -> dict:
    """The scaling stage's four tables for one backend: DDP trials (2 seeds, fp32 and ``amp_mode``, each of
    ``workloads``: ``SCALING_WORKLOADS``) whose efficiency at world size N is ``efficiency(N)``, their summary (step
    interval over the seeds), collectives whose busbw rises to ``busbw_top`` GB/s, and one ``unsupported``
    peer-copy row (``copy_reason``)."""
    from accelbench.stages.scaling.stats import (
        algbw_gbps,
        busbw_factor,
        efficiency_ci,
        loss_tolerance,
        message_sizes,
        seed_median_ci,
    )

    common = {**prov, "backend": backend, "device": device, "device_name": device_name}
    trials, summary, collectives = [], [], []
    for workload, mode in [(w, m) for w in workloads for m in ("fp32", amp_mode)]:
        per_rank, tokens, mfu_1 = SCALING_WORKLOADS[workload]
        single = {}
        for n in worlds:
            gb = per_rank * n
            devices = ",".join(f"node:{device if backend == 'cpu' else f'cuda:{i}'}" for i in range(n))
            sps, steps = {}, []

            def rates(samples_per_s, step, n=n, tokens=tokens, mfu_1=mfu_1):
                """The throughput columns of a row: per rank, tokens (gpt), one rank's MFU (falls with the step)."""
                out = {"samples_per_s_per_rank": samples_per_s / n}
                out.update(
                    {
                        "tokens_per_s": samples_per_s * tokens if tokens else None,
                        "tokens_per_s_per_rank": samples_per_s * tokens / n if tokens else None,
                        "mfu_pct": mfu_1 * step_1 / step if mfu_1 else None,
                    }
                )
                return out

            for seed in (0, 1):
                step = step_1 / efficiency(n) * (1 + 0.02 * seed)
                sps[seed] = gb / step
                steps.append(step)
                trials.append(
                    {
                        **common,
                        "method": "ddp",
                        "workload": workload,
                        "mode": mode,
                        "world_size": n,
                        "seed": seed,
                        "devices": devices,
                        "process_group": process_group,
                        "threads_per_rank": threads,
                        "global_batch": gb,
                        "samples_per_s": gb / step,
                        "step_median_s": step,
                        "step_ci95_low_s": step * 0.97,
                        "step_ci95_high_s": step * 1.04,
                        "final_loss": 0.31,
                        "test_acc": 0.9,
                        "loss_max_rel_diff": 2e-7 * n,
                        "loss_tolerance": loss_tolerance(mode),
                        "loss_matches_single": True,
                        "status": "ok",
                        "per_rank_batch": per_rank,
                        **rates(gb / step, step),
                    }
                )
            if n == 1:
                single = sps
            eff, low, high = efficiency_ci([single[0], single[1]], [sps[0], sps[1]], n)
            step, step_low, step_high = seed_median_ci(steps)
            summary.append(
                {
                    **common,
                    "method": "ddp",
                    "workload": workload,
                    "mode": mode,
                    "world_size": n,
                    "devices": devices,
                    "process_group": process_group,
                    "threads_per_rank": threads,
                    "trials": 2,
                    "samples_per_s": gb / step,
                    "step_median_s": step,
                    "step_ci95_low_s": step_low,
                    "step_ci95_high_s": step_high,
                    "scaling_efficiency": eff,
                    "efficiency_ci95_low": low,
                    "efficiency_ci95_high": high,
                    "loss_matches_single": True,
                    "status": "ok",
                    "global_batch": gb,
                    "interval_over": "seeds",
                    **rates(gb / step, step),
                }
            )
            if n >= 2 and dp:
                summary.append(
                    {
                        **common,
                        "method": "dp",
                        "workload": workload,
                        "mode": mode,
                        "world_size": n,
                        "devices": "",
                        "process_group": "",
                        "threads_per_rank": threads,
                        "trials": 0,
                        "status": "unsupported",
                        "status_detail": dp,
                    }
                )
    for collective in ("all_reduce", "all_gather", "reduce_scatter", "broadcast"):
        for n in collective_worlds:
            for size in message_sizes(1024, 64 * 2**20, 4):
                busbw = busbw_top * size / (size + 2**20)
                factor = busbw_factor(collective, n)
                algbw = busbw / factor
                t = size / (algbw * 1e9)
                assert abs(algbw_gbps(size, t) - algbw) < 1e-9 * algbw
                collectives.append(
                    {
                        **common,
                        "collective": collective,
                        "world_size": n,
                        "devices": "",
                        "process_group": process_group,
                        "size_bytes": size,
                        "dtype": "float32",
                        "median_s": t,
                        "ci95_low_s": t * 0.98,
                        "ci95_high_s": t * 1.03,
                        "algbw_gbps": algbw,
                        "busbw_gbps": busbw,
                        "busbw_factor": factor,
                        "repeats": 60,
                        "status": "ok",
                    }
                )
    copies = [{**common, "src": device, "dst": "", "peer": "", "status": "unsupported", "status_detail": copy_reason}]
    return {"scaling_trials": trials, "scaling": summary, "collectives": collectives, "peer_copy": copies}


def attention_rows(
    prov: dict,
    backend: str,
    device: str,
    device_name: str,
    config: dict,
    kernels,
    dtypes,
    tflops: dict,
    peak: dict,
    mem_per_score: dict,
    threads: int,
) -> list[dict]:
    """The attention stage's rows for the config's sweep (its own plan), each point at ``tflops[kernel][dtype]``
    (shorter sequences reach less: x s/(s+512)), memory ``mem_per_score[kernel]`` bytes per score element (math
    materializes the scores, flash does not), relative errors well inside the thresholds."""
    from accelbench.stages.attention import measure as attention

    cfg = attention.sweep_config(config["attention"], backend)
    rows = []
    for p in attention.plan_points(cfg, list(kernels), list(dtypes)):
        r = attention.empty_row(
            p,
            threads,
            cfg["rel_error_max"][p.dtype] if "rel_error_max" in cfg else config["attention"]["rel_error_max"][p.dtype],
        )
        achieved = tflops[p.kernel][p.dtype] * p.seq_len_q / (p.seq_len_q + 512)
        median = p.flops / (achieved * 1e12)
        work = mem_per_score[p.kernel] * p.scores + 4 * p.batch * p.heads * p.seq_len_q * p.head_dim
        r.update(
            prov,
            backend=backend,
            device=device,
            device_name=device_name,
            median_s=median,
            iqr_s=0.02 * median,
            ci95_low_s=0.99 * median,
            ci95_high_s=1.01 * median,
            ci_method="descriptive",
            lag1_autocorr=0.3,
            repeats=120,
            blocks=12,
            tflops=achieved,
            peak_tflops=peak[p.dtype],
            peak_source="fixture",
            pct_of_peak=100 * achieved / peak[p.dtype],
            peak_mem_bytes=work * 1.5,
            work_mem_bytes=work,
            mem_kind="rss" if backend == "cpu" else "allocator",
            rel_error=1e-3 if p.dtype != "float32" else 1e-6,
            method_version=registry.method_version("attention"),
            device_warmup_s=0.5,
            device_warmup_calls=20,
            device_warmup_status="stable",
        )
        rows.append(r)
    return rows


CPU_SDPA = {
    "tflops": {"flash": {"bfloat16": 0.05, "float32": 0.09}, "math": {"bfloat16": 0.02, "float32": 0.04}},
    "mem_per_score": {"flash": 0.0, "math": 8.0},
}
GPU_SDPA = {
    "tflops": {"flash": {"bfloat16": 560.0}, "cudnn": {"bfloat16": 610.0}},
    "mem_per_score": {"flash": 0.0, "cudnn": 0.0},
}


def write_scaling(d: Path, backend: str, tables: dict) -> None:
    for table, rows in tables.items():
        _csv(d / registry.TABLES[table].filename(backend), rows, table, keep_extra=True)


def scaling_disabled(prov, backend, device, device_name) -> dict:
    """What the scaling stage writes with scaling.enabled false (the default)."""
    row = {
        **prov,
        "backend": backend,
        "device": device,
        "device_name": device_name,
        "status": "disabled",
        "status_detail": "scaling.enabled is false",
    }
    return {t: [row] for t in registry.STAGES["scaling"].tables}


def _csv(path: Path, rows: list[dict], kind: str, keep_extra: bool = False) -> None:
    table = registry.TABLES[kind]
    # documented columns, plus the telemetry windows' times (extras the telemetry strip marks points with); with
    # keep_extra every extra column (the scaling tables' throughput, MFU and interval_over)
    extra = [c for c in table.extra if keep_extra or c in ("telemetry_start_unix_s", "telemetry_end_unix_s")]
    df = pd.DataFrame(rows).reindex(columns=list(table.columns) + extra)
    path.write_text(df.to_csv(index=False))


# ---- telemetry: what the devices were doing (measure.telemetry's columns, series and soak) -------------------

T0 = 1748779200.0  # 2025-06-01T12:00:00Z, the runs' start
MISSING_RAPL = (
    "RAPL /sys/class/powercap/intel-rapl:0/energy_uj is readable by root only (the kernel's mitigation "
    "of CVE-2020-8694): run as root or make it readable (chmod o+r)"
)
SENSORS = ("clock", "mem_clock", "power", "energy", "temperature", "utilization", "throttle")


def telemetry_entry(source: str, missing: dict) -> dict:
    """A device's ``telemetry`` entry in devices.json, as detect writes it."""
    return {
        "hz": 20.0,
        "source": source,
        "found": {s: f"{source} {s}" for s in SENSORS if s not in missing},
        "missing": missing,
    }


def add_telemetry(
    rows: list[dict],
    *,
    kind: str,
    t0: float,
    source: str,
    clock: float,
    power: float | None,
    temp: float,
    throttle_known: bool = True,
    throttled: dict | None = None,
    ramp: set = frozenset(),
    hz: float = 2.0,
) -> tuple[list[dict], float]:
    """Give every row of one device a telemetry window, one after another from ``t0`` (as the sampler would):
    the window's columns on the row and its readings as series rows. ``throttled[i]`` plants throttling
    reasons on row i (its clock 15% lower), ``ramp`` rows whose clock climbs 12% over the window.
    Returns (series rows, the time after the last window)."""
    throttled = throttled or {}
    series, t, energy = [], t0, 0.0
    for i, r in enumerate(rows):
        measured = r.get("status") in ("ok", "unstable", "invalid", "wrong_result")
        duration = 1.2 if measured else 0.05
        reasons = throttled.get(i, [])
        level = clock * (0.85 if reasons else 1.0)
        n = max(2, int(duration * hz) + 1)
        clocks = [level * (0.88 + 0.12 * k / (n - 1)) if i in ramp else level for k in range(n)]
        for k in range(n):
            ts = t + duration * k / (n - 1)
            if k:
                energy += (power or 0.0) * duration / (n - 1)
            series.append(
                {
                    "stage": "amp" if kind == "amp_trials" else "matmul",
                    "time_unix_s": ts,
                    "t_s": ts - t0,
                    "clock_mhz": clocks[k],
                    "mem_clock_mhz": 2619.0 if source == "nvml" else None,
                    "power_w": power,
                    "temp_c": temp + 6.0 * k / (n - 1),
                    "util_pct": 97.0,
                    "energy_j": energy if power is not None else None,
                    "throttle_reasons": ";".join(reasons) if throttle_known else None,
                    "telemetry_source": source,
                    "status": "ok",
                }
            )
        e = power * duration if power is not None else None
        r.update(
            clock_mhz_median=float(np.median(clocks)),
            clock_mhz_min=min(clocks),
            power_w_median=power,
            temp_c_max=temp + 6.0,
            energy_j=e,
            throttled=bool(reasons) if throttle_known else None,
            throttle_reasons=";".join(reasons) if throttle_known else None,
            telemetry_source=source,
            telemetry_start_unix_s=t,
            telemetry_end_unix_s=t + duration,
        )
        if kind == "matmul":
            r["gflop_per_j"] = r["tflops"] * 1e3 / power if measured and power else None
            r["clock_ramp"] = (i in ramp) if measured else None
            if i in ramp:
                r["flags"] = ";".join(f for f in (r.get("flags", ""), "clock_ramp") if f)
        elif kind == "amp_trials":
            r["samples_per_j"] = r["samples_per_s"] / power if power else None
        t += duration + 0.3
    return series, t


def series_rows(prov: dict, backend: str, device: str, device_name: str, readings: list[dict]) -> list[dict]:
    return [{**prov, "backend": backend, "device": device, "device_name": device_name, **r} for r in readings]


def soak_rows(
    prov: dict,
    backend: str,
    device: str,
    device_name: str,
    dtype: str,
    n: int,
    boost_tflops: float,
    boost_clock: float,
    sustained: float,
    t0: float,
    intervals: int = 30,
) -> list[dict]:
    """A soak that starts at its boost clock and settles ``sustained`` (a fraction) lower after 6 intervals."""
    rows = []
    for i in range(intervals):
        f = 1.0 if i < 3 else (sustained if i >= 6 else 1.0 - (1.0 - sustained) * (i - 2) / 4)
        tflops, clock = boost_tflops * f, boost_clock * f
        rows.append(
            {
                **prov,
                "backend": backend,
                "device": device,
                "device_name": device_name,
                "dtype": dtype,
                "n": n,
                "interval": i,
                "t_s": float(i + 1),
                "interval_s": 1.0,
                "calls": int(tflops * 1e12 / (2 * n**3)),
                "tflops": tflops,
                "clock_mhz_median": clock,
                "clock_mhz_min": clock * 0.99,
                "power_w_median": 690.0,
                "temp_c_max": 62.0 + i * 0.8,
                "energy_j": 690.0,
                "gflop_per_j": tflops * 1e3 / 690.0,
                "throttled": i >= 4,
                "throttle_reasons": "sw_power_cap" if i >= 4 else "",
                "telemetry_source": "nvml",
                "clock_settled": i >= 6,
                "status": "ok",
                "telemetry_start_unix_s": t0 + i,
                "telemetry_end_unix_s": t0 + i + 1.0,
            }
        )
    return rows


def off_soak(prov: dict, backend: str, device: str, device_name: str) -> list[dict]:
    return [{**prov, "backend": backend, "device": device, "device_name": device_name, "status": "off"}]


CPU_SHAPES = (("qkv", 256, 768, 256),)
GPU_SHAPES = (("qkv", 8192, 12288, 4096), ("mlp_up", 8192, 16384, 4096), ("mlp_down", 8192, 4096, 16384))


def write_cpu_run(results: Path, run_id: str = "laptop-cpu", host: str = "laptop") -> Path:
    sizes, dtypes = [256, 512, 1024, 2048], ["float32", "bfloat16", "float16", "float8_e4m3fn"]
    config = make_config(run_id, ["cpu"], sizes, dtypes, shapes=CPU_SHAPES)
    h = config_hash(config)
    d = Path(results) / run_id
    d.mkdir(parents=True, exist_ok=True)
    (d / "run.json").write_text(
        json.dumps(
            {
                "run": run_id,
                "config": config,
                "config_hash": h,
                "git_commit": "6930832abcdef0123456789",
                "accelbench_version": "0.1.0",
            }
        )
    )
    # a laptop without RAPL access and without thermal_throttle counters: no power, energy or throttle reading
    no_throttle = "no thermal_throttle counters under /sys/devices/system/cpu/cpu*/ (Intel therm_throt only)"
    cpu_tel = telemetry_entry(
        "cpu_sysfs",
        {
            "mem_clock": "the CPU's memory clock is not exposed to software",
            "power": MISSING_RAPL,
            "energy": MISSING_RAPL,
            "throttle": no_throttle,
        },
    )
    (d / "devices.json").write_text(json.dumps(devices_json(run_id, host, h, LAPTOP_CPU, 2, [], cpu_telemetry=cpu_tel)))
    prov = provenance(run_id, host, h)
    rel = config["matmul"]["rel_error_max"]
    rows = matmul_rows(
        prov,
        "cpu",
        "cpu",
        LAPTOP_CPU,
        sizes,
        dtypes,
        best={"float32": 0.21, "bfloat16": 0.0021, "float16": 0.0009},
        peak={"float32": 0.256},
        threads=2,
        overrides={},
        rel_error_max=rel,
        budget_n={"bfloat16": 1024, "float16": 1024},
    )
    rows += shape_rows(
        prov,
        "cpu",
        "cpu",
        LAPTOP_CPU,
        CPU_SHAPES,
        dtypes,
        {"qkv": 0.62},
        {"float32": 0.21, "bfloat16": 0.0021, "float16": 0.0009},
        {"float32": 0.256},
        2,
        rel,
    )
    series, t = add_telemetry(
        rows, kind="matmul", t0=T0, source="cpu_sysfs", clock=2890.0, power=None, temp=58.0, throttle_known=False
    )
    _csv(d / "matmul_cpu.csv", rows, "matmul")
    _csv(d / "matmul_soak_cpu.csv", off_soak(prov, "cpu", "cpu", LAPTOP_CPU), "matmul_soak")
    _csv(d / "telemetry_matmul_cpu.csv", series_rows(prov, "cpu", "cpu", LAPTOP_CPU, series), "telemetry_matmul")
    _csv(d / "matmul_search_cpu.csv", [], "matmul_search")  # the search is off: header only
    _csv(
        d / "membw_cpu.csv",
        membw_rows(prov, "cpu", "cpu", LAPTOP_CPU, 1.9e-6, 180.0, 38.0, 16 * 2**20, None, 2),
        "membw",
    )
    _csv(d / "warmup_cpu.csv", warmup_rows(prov, "cpu", "cpu", LAPTOP_CPU, 0.0241, 0.00261, 6, 2), "warmup")
    st, tr, su = amp_rows(
        prov, "cpu", "cpu", LAPTOP_CPU, "amp_bf16", 0.0121, 0.42, 0.91, -0.004, [0, 1, 2], 40, 2, "rss"
    )
    series, _ = add_telemetry(
        tr, kind="amp_trials", t0=t + 5, source="cpu_sysfs", clock=2850.0, power=None, temp=60.0, throttle_known=False
    )
    _csv(d / "amp_cpu_steps.csv", st, "amp_steps")
    _csv(d / "amp_cpu_trials.csv", tr, "amp_trials")
    _csv(d / "amp_cpu_summary.csv", su, "amp_summary")
    write_scaling(d, "cpu", scaling_disabled(prov, "cpu", "cpu", LAPTOP_CPU))
    _csv(d / "telemetry_amp_cpu.csv", series_rows(prov, "cpu", "cpu", LAPTOP_CPU, series), "telemetry_amp")
    _csv(
        d / "attention_cpu.csv",
        attention_rows(
            prov,
            "cpu",
            "cpu",
            LAPTOP_CPU,
            config,
            ["flash", "math"],
            ["bfloat16", "float32"],
            CPU_SDPA["tflops"],
            {"bfloat16": 1.2, "float32": 0.6},
            CPU_SDPA["mem_per_score"],
            2,
        ),
        "attention",
    )
    write_samples(d)
    return d


def write_cuda_run(results: Path, run_id: str = "gpu-node-h100", host: str = "gpu-node-01") -> Path:
    sizes = [256, 512, 1024, 2048, 4096, 8192, 16384]
    dtypes = ["float32", "bfloat16", "float16", "float8_e4m3fn"]
    config = make_config(run_id, ["cpu", "cuda"], sizes, dtypes, shapes=GPU_SHAPES, search_dtypes=["bfloat16"])
    config["container"]["runtime"] = "apptainer"
    config["scaling"]["enabled"] = True
    h = config_hash(config)
    image = "/shared/images/accelbench-cuda.sif"
    d = Path(results) / run_id
    d.mkdir(parents=True, exist_ok=True)
    (d / "run.json").write_text(
        json.dumps(
            {
                "run": run_id,
                "config": config,
                "config_hash": h,
                "git_commit": "6930832abcdef0123456789",
                "accelbench_version": "0.1.0",
            }
        )
    )
    gpu = {
        "device": "cuda:0",
        "name": H100,
        "total_memory_bytes": 85045231616,
        "capability": "9.0",
        "multiprocessor_count": 132,
        "peaks": {d: {"tflops": t, "source": "datasheet: NVIDIA H100 SXM5, dense"} for d, t in H100_PEAK.items()},
    }
    gpu["telemetry"] = telemetry_entry("nvml", {})
    cpu_tel = telemetry_entry("cpu_sysfs", {"mem_clock": "the CPU's memory clock is not exposed to software"})
    (d / "devices.json").write_text(
        json.dumps(devices_json(run_id, host, h, EPYC, 16, [gpu], "12.6", image, cpu_telemetry=cpu_tel))
    )
    prov = provenance(run_id, host, h, "12.6", image)
    rel = config["matmul"]["rel_error_max"]
    cpu = matmul_rows(
        prov,
        "cpu",
        "cpu",
        EPYC,
        sizes,
        dtypes,
        best={"float32": 1.6, "bfloat16": 0.017, "float16": 0.0061},
        peak={"float32": 2.05},
        threads=16,
        overrides={},
        rel_error_max=rel,
        budget_n={"float32": 4096, "bfloat16": 1024, "float16": 512},
    )
    cuda = matmul_rows(
        prov,
        "cuda",
        "cuda:0",
        H100,
        sizes,
        ["float32", "tf32", *dtypes[1:]],
        best={"float32": 51.0, "tf32": 378.0, "bfloat16": 712.0, "float16": 735.0, "float8_e4m3fn": 1310.0},
        peak=H100_PEAK,
        threads=1,
        rel_error_max=rel,
        budget_n={},
        overrides={
            ("float32", 256): "unstable",
            ("float16", 256): "invalid",
            ("float32", 16384): "oom",
            ("float8_e4m3fn", 256): "wrong_result",
        },
    )
    cpu += shape_rows(
        prov,
        "cpu",
        "cpu",
        EPYC,
        GPU_SHAPES,
        dtypes,
        {"qkv": 0.9, "mlp_up": 0.92, "mlp_down": 0.88},
        {"float32": 1.6, "bfloat16": 0.017, "float16": 0.0061},
        {"float32": 2.05},
        16,
        rel,
    )
    cuda += shape_rows(
        prov,
        "cuda",
        "cuda:0",
        H100,
        GPU_SHAPES,
        ["float32", "tf32", *dtypes[1:]],
        {"qkv": 1.02, "mlp_up": 1.05, "mlp_down": 0.97},
        {"float32": 51.0, "tf32": 378.0, "bfloat16": 712.0, "float16": 735.0, "float8_e4m3fn": 1310.0},
        H100_PEAK,
        1,
        rel,
    )
    # the H100: the first point measured on a ramping clock, the two largest fp16 points thermally throttled
    big_fp16 = [i for i, r in enumerate(cuda) if r["dtype"] == "float16" and r["n"] >= 8192 and not r.get("shape_name")]
    cuda_series, t_cuda = add_telemetry(
        cuda,
        kind="matmul",
        t0=T0,
        source="nvml",
        clock=1980.0,
        power=640.0,
        temp=55.0,
        throttled={i: ["hw_thermal"] for i in big_fp16},
        ramp={0},
    )
    cpu_series, t_cpu = add_telemetry(
        cpu, kind="matmul", t0=T0, source="cpu_sysfs", clock=3520.0, power=245.0, temp=61.0
    )
    _csv(d / "matmul_cpu.csv", cpu, "matmul")
    _csv(d / "matmul_cuda.csv", cuda, "matmul")
    _csv(d / "matmul_soak_cpu.csv", off_soak(prov, "cpu", "cpu", EPYC), "matmul_soak")
    _csv(
        d / "matmul_soak_cuda.csv",
        soak_rows(prov, "cuda", "cuda:0", H100, "float8_e4m3fn", 16384, 1290.0, 1980.0, 0.91, t_cuda),
        "matmul_soak",
    )
    _csv(
        d / "matmul_search_cpu.csv",
        search_rows(prov, "cpu", "cpu", EPYC, "bfloat16", (1024, 2048, 1024), 0.018, 2.05, 16, evaluations=12),
        "matmul_search",
    )
    _csv(
        d / "matmul_search_cuda.csv",
        search_rows(prov, "cuda", "cuda:0", H100, "bfloat16", (2048, 2048, 13312), 794.5, H100_PEAK["bfloat16"], 1),
        "matmul_search",
    )
    _csv(
        d / "membw_cpu.csv", membw_rows(prov, "cpu", "cpu", EPYC, 1.2e-6, 900.0, 160.0, 256 * 2**20, None, 16), "membw"
    )
    _csv(
        d / "membw_cuda.csv",
        membw_rows(prov, "cuda", "cuda:0", H100, 9.5e-6, 7000.0, 2950.0, 50 * 2**20, 3350.0, 1),
        "membw",
    )
    _csv(d / "warmup_cpu.csv", warmup_rows(prov, "cpu", "cpu", EPYC, 0.0112, 0.00071, 5, 16), "warmup")
    _csv(d / "warmup_cuda.csv", warmup_rows(prov, "cuda", "cuda:0", H100, 0.842, 0.000118, 9, 1), "warmup")
    _csv(d / "transfer_cuda.csv", transfer_rows(prov, "cuda", "cuda:0", H100, [1, 16, 128], 52.1, 11.8), "transfer")
    for backend, device, name, mode, step, factor, mem in (
        ("cpu", "cpu", EPYC, "amp_bf16", 0.0031, 0.61, "rss"),
        ("cuda", "cuda:0", H100, "amp_fp16", 0.00094, 2.4, "allocator"),
    ):
        st, tr, su = amp_rows(
            prov,
            backend,
            device,
            name,
            mode,
            step,
            factor,
            0.93,
            -0.002,
            [0, 1, 2],
            40,
            16 if backend == "cpu" else 1,
            mem,
        )
        if backend == "cuda":  # one AMP trial held back by the power cap
            amp_series, _ = add_telemetry(
                tr,
                kind="amp_trials",
                t0=t_cuda + 60,
                source="nvml",
                clock=1950.0,
                power=600.0,
                temp=60.0,
                throttled={len(tr) - 1: ["sw_power_cap"]},
            )
            _csv(
                d / "telemetry_matmul_cuda.csv",
                series_rows(prov, "cuda", "cuda:0", H100, cuda_series),
                "telemetry_matmul",
            )
        else:
            amp_series, _ = add_telemetry(
                tr, kind="amp_trials", t0=t_cpu + 30, source="cpu_sysfs", clock=3400.0, power=230.0, temp=63.0
            )
            _csv(d / "telemetry_matmul_cpu.csv", series_rows(prov, "cpu", "cpu", EPYC, cpu_series), "telemetry_matmul")
        _csv(d / f"telemetry_amp_{backend}.csv", series_rows(prov, backend, device, name, amp_series), "telemetry_amp")
        _csv(d / f"amp_{backend}_steps.csv", st, "amp_steps")
        _csv(d / f"amp_{backend}_trials.csv", tr, "amp_trials")
        _csv(d / f"amp_{backend}_summary.csv", su, "amp_summary")
    # scaling: gloo ranks on the 16 cores (worlds 1..16, efficiency falling), one H100 (world 1 only)
    write_scaling(
        d,
        "cpu",
        scaling_rows(
            prov,
            "cpu",
            "cpu",
            EPYC,
            [1, 2, 4, 8, 16],
            step_1=0.012,
            efficiency=lambda n: 1.0 / (1 + 0.04 * (n - 1)),
            process_group="gloo",
            threads=1,
            amp_mode="amp_bf16",
            collective_worlds=(2, 4, 8, 16),
            busbw_top=3.2,
            workloads=("mlp", "gpt"),
            dp="nn.DataParallel splits one process's batch over CUDA/ROCm GPUs (torch.cuda only); not on cpu",
            copy_reason="cpu: one device (the host); no device-to-device copy",
        ),
    )
    write_scaling(
        d,
        "cuda",
        scaling_rows(
            prov,
            "cuda",
            "cuda:0",
            H100,
            [1],
            step_1=0.0009,
            efficiency=lambda n: 1.0,
            process_group="nccl",
            threads=1,
            amp_mode="amp_fp16",
            copy_reason="device-to-device copies need at least 2 GPUs; 1 visible",
        ),
    )
    _csv(
        d / "attention_cpu.csv",
        attention_rows(
            prov,
            "cpu",
            "cpu",
            EPYC,
            config,
            ["flash", "math"],
            ["bfloat16", "float32"],
            CPU_SDPA["tflops"],
            {"bfloat16": 5.0, "float32": 2.5},
            CPU_SDPA["mem_per_score"],
            16,
        ),
        "attention",
    )
    _csv(
        d / "attention_cuda.csv",
        attention_rows(
            prov,
            "cuda",
            "cuda:0",
            H100,
            config,
            ["flash", "cudnn"],
            ["bfloat16"],
            GPU_SDPA["tflops"],
            {"bfloat16": 989.4},
            GPU_SDPA["mem_per_score"],
            1,
        ),
        "attention",
    )
    write_samples(d, seed=2)
    return d


def write_fixture_results(results: Path, which=("cpu", "cuda")) -> Path:
    results = Path(results)
    if "cpu" in which:
        write_cpu_run(results)
    if "cuda" in which:
        write_cuda_run(results)
    return results


def corrupt(path: Path, how: str) -> None:
    """Damage a result file: truncate (cut inside the last line), cut_rows (drop the last rows at a line
    boundary), ragged (a short line in the middle), empty, drop_column, garbage (binary noise)."""
    path = Path(path)
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    if how == "truncate":
        path.write_text(text[: len(text) - len(lines[-1]) // 2 - 1])
    elif how == "cut_rows":
        path.write_text("".join(lines[:-3]))
    elif how == "ragged":
        mid = len(lines) // 2
        lines[mid] = ",".join(lines[mid].split(",")[:5]) + "\n"
        path.write_text("".join(lines))
    elif how == "empty":
        path.write_text("")
    elif how == "drop_column":
        df = pd.read_csv(path)
        documented = [c for c in df.columns if c not in registry.ADDED_COLUMNS]  # an added one may be missing
        path.write_text(df.drop(columns=[documented[-4]]).to_csv(index=False))
    elif how == "garbage":
        path.write_bytes(text.encode()[:200] + bytes(range(256)) * 4)
    else:
        raise ValueError(how)


# ---- built once per test session: results -> aggregate -> plots -> report, through the CLI ----------------------
_BUILT: dict[str, dict] = {}


def build(base: Path, name: str) -> dict:
    """Paths of a fixture pushed through ``accelbench aggregate/plots/report`` (cached per session).

    ``two_runs``: the CPU and the CUDA run; ``cpu_only``: the CPU run alone; ``incomplete``: both runs with
    the CUDA matmul file truncated, aggregated with --allow-incomplete (its report reuses two_runs' figures);
    ``empty``: a results folder without runs, aggregated with --allow-incomplete; ``compared``: the CPU run and
    the same laptop with 1 thread (``write_slower_cpu_run``), each with two more runs of its config outside
    results/ (``write_replicates``, medians times 1.02 and 0.98), compared as groups of 3 by ``accelbench compare``
    and reported with its "Compared with" section; ``history``: the CPU run and twelve nightly copies of it, the last five 20%
    slower (a change point at night-007), each added to the history store as the pipeline does, aggregated with
    the default focus (the latest five runs in full, the rest as history).
    """
    from accelbench.cli import main

    if name in _BUILT:
        return _BUILT[name]
    root = Path(base) / name
    results = root / "results"
    results.mkdir(parents=True)
    which = {
        "two_runs": ("cpu", "cuda"),
        "cpu_only": ("cpu",),
        "incomplete": ("cpu", "cuda"),
        "empty": (),
        "compared": ("cpu",),
        "history": ("cpu",),
    }[name]
    write_fixture_results(results, which)
    if name == "history":
        write_nightly_copies(
            results / "laptop-cpu", results, [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.2, 1.21, 1.19, 1.2, 1.22]
        )
    comparison = []
    if name == "compared":  # 3 runs a side: the two under results/ and two more of each outside (not reported)
        write_slower_cpu_run(results)
        more = root / "replicates"
        base = [results / "laptop-cpu", *write_replicates(results / "laptop-cpu", more, [1.02, 0.98])]
        cand = [results / "laptop-cpu-1t", *write_replicates(results / "laptop-cpu-1t", more, [0.98, 1.02])]
        assert (
            main(
                [
                    "compare",
                    "--results",
                    str(results),
                    "--baseline",
                    ",".join(map(str, base)),
                    "--candidate",
                    ",".join(map(str, cand)),
                ]
            )
            == 1
        )
        comparison = ["--comparison", str(results / "compare" / "laptop-cpu+2__laptop-cpu-1t+2.csv")]
    runs = sorted(str(d) for d in results.iterdir() if (d / registry.RUN_FILE).is_file())
    if runs:  # each finished run adds itself to the history store (the pipeline's history rule)
        assert main(["history", "add", *runs, "--store", str(results / registry.HISTORY_FILE)]) == 0
    if name == "incomplete":
        corrupt(results / "gpu-node-h100" / "matmul_cuda.csv", "truncate")
    agg, plots, report = results / "aggregate", results / "plots", results / "report.html"
    flags = ["--allow-incomplete"] if name in ("incomplete", "empty") else []
    rc = main(["aggregate", "--results", str(results), "--out-dir", str(agg), *flags])
    assert rc == 0, f"aggregate of fixture {name} failed"
    if name == "incomplete":
        plots = build(base, "two_runs")["plots"]
    else:
        assert main(["plots", "--aggregate-dir", str(agg), "--out-dir", str(plots)]) == 0
    assert (
        main(["report", "--aggregate-dir", str(agg), "--plots-dir", str(plots), "--out", str(report), *comparison]) == 0
    )
    _BUILT[name] = {"results": results, "aggregate": agg, "plots": plots, "report": report}
    return _BUILT[name]


def _scale_report():
    import importlib.util

    spec = importlib.util.spec_from_file_location("scale_report", REPO / "bench" / "scale_report.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def write_replicates(source: Path, dest: Path, factors, prefix: str | None = None) -> list[Path]:
    """Further runs of ``source``'s config (``<prefix>-r1``...; prefix: the source's folder name) under ``dest``:
    every compared median times its factor, one factor per run (run-to-run variation, or a planted change),
    through bench/scale_report.py's ``copy_run``."""
    bench = _scale_report()
    prefix = prefix or Path(source).name
    Path(dest).mkdir(parents=True, exist_ok=True)
    return [bench.copy_run(Path(source), Path(dest), f"{prefix}-r{i}", f) for i, f in enumerate(factors, start=1)]


def write_nightly_copies(source: Path, results: Path, factors) -> list[Path]:
    """Copies of a run a day apart (``night-000``...), every compared median times its factor
    (bench/scale_report.py's ``copy_run``)."""
    from datetime import datetime, timedelta, timezone

    bench = _scale_report()
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    return [bench.copy_run(source, results, f"night-{i:03d}", f, t0 + timedelta(days=i)) for i, f in enumerate(factors)]


def add_absent_backend(run_dir: Path, backend: str = "cuda") -> None:
    """Make ``run_dir``'s run ask for ``backend`` on a machine without it: the stages then write one
    ``absent`` row per file (device empty), as accelbench's matmul/warmup/transfer/amp do."""
    run_dir = Path(run_dir)
    info = json.loads((run_dir / "run.json").read_text())
    info["config"]["backends"] = [*info["config"]["backends"], backend]
    (run_dir / "run.json").write_text(json.dumps(info))
    prov = pd.read_csv(run_dir / "matmul_cpu.csv").iloc[0][list(registry.PROVENANCE)].to_dict()
    row = {
        **prov,
        "backend": backend,
        "device": "",
        "device_name": "",
        "status": "absent",
        "status_detail": f"backend {backend!r}: no {backend.upper()} device visible to this torch build",
    }
    for name in registry.run_files([backend]):
        _csv(run_dir / name, [row], registry.table_of(name))
    for spec in registry.SAMPLES.values():  # as the stages write them for a backend without a device: empty
        atomic_write_parquet(run_dir / spec.filename(backend), sample_table.empty())


def make_pre_telemetry(run_dir: Path) -> None:
    """Turn ``run_dir`` into a run written before telemetry existed: no ``telemetry`` config key, no
    soak or telemetry files, no telemetry columns, no telemetry entry in devices.json."""
    run_dir = Path(run_dir)
    info = json.loads((run_dir / "run.json").read_text())
    info["config"].pop("telemetry", None)
    info["config"].pop("attention", None)  # the attention stage came later still
    for key in ("soak_s", "soak_interval_s"):
        info["config"]["matmul"].pop(key, None)
    (run_dir / "run.json").write_text(json.dumps(info))
    devices = json.loads((run_dir / "devices.json").read_text())
    for entry in devices["backends"].values():
        for dev in entry.get("devices", []):
            dev.pop("telemetry", None)
    (run_dir / "devices.json").write_text(json.dumps(devices))
    new = set(registry.TELEMETRY + registry.THROTTLE + registry.TELEMETRY_EXTRA) | {
        "gflop_per_j",
        "samples_per_j",
        "clock_ramp",
    }
    for path in run_dir.glob("*.csv"):
        if registry.table_of(path.name) in ("matmul_soak", "telemetry_matmul", "telemetry_amp", "attention"):
            path.unlink()
            continue
        df = pd.read_csv(path)
        path.write_text(df.drop(columns=[c for c in df.columns if c in new]).to_csv(index=False))


# ---- raw timing samples and a second CPU run to compare with (accelbench compare) -------------------------------


def write_samples(
    run_dir: Path, seed: int = 0, blocks: int = 12, amp_warmup_steps: int = 5, blocks_column: bool = False
) -> None:
    """The raw-sample files of a fixture run, consistent with its CSVs: per measured matmul/transfer point
    ``blocks`` per-call times log-normally spread around its median (spread from its IQR), every warm-up call,
    every AMP step (the first ``amp_warmup_steps`` not steady). Written by the stages' own writer. With
    ``blocks_column`` the matmul/transfer CSVs get the ``blocks`` column the stages write too (compare checks the
    sample count against it)."""
    from accelbench.measure import samples as sample_table
    from accelbench.run.io import atomic_write_parquet

    run_dir = Path(run_dir)
    rng = np.random.default_rng(seed)
    config = json.loads((run_dir / "run.json").read_text())["config"]
    for backend in config["backends"]:
        for stage, spec in registry.SAMPLES.items():
            table = spec.table if spec.table != "amp_trials" else "amp_steps"
            csv_path = run_dir / registry.TABLES[table].filename(backend)
            rows = pd.read_csv(csv_path).to_dict("records") if csv_path.exists() else []
            if stage in ("matmul", "transfer", "attention"):  # one sample per timed block
                for r in rows:
                    measured = r.get("median_s") == r.get("median_s") and r.get("median_s", 0) > 0
                    r["blocks"] = blocks if measured else 0  # as the stages write it: one sample per block
                    if measured:
                        sigma = max(1e-4, float(r["iqr_s"]) / float(r["median_s"]) / 1.349)
                        r[sample_table.SAMPLES_KEY] = list(float(r["median_s"]) * np.exp(rng.normal(0, sigma, blocks)))
                df = sample_table.from_block_rows(spec.table, rows)
                if rows and blocks_column:
                    csv_df = pd.read_csv(csv_path)
                    csv_df["blocks"] = [r["blocks"] for r in rows]
                    csv_path.write_text(csv_df.to_csv(index=False))
            elif stage == "warmup":
                df = sample_table.from_series_rows(
                    "warmup", rows, index="iter", value="iter_s", steady=sample_table.warmup_steady(rows, 5)
                )
            else:
                df = sample_table.from_series_rows(
                    "amp_trials",
                    rows,
                    index="step",
                    value="step_s",
                    steady=lambda r: int(r["step"]) >= amp_warmup_steps,
                )
            atomic_write_parquet(run_dir / spec.filename(backend), df)


def write_slower_cpu_run(
    results: Path, run_id: str = "laptop-cpu-1t", slowdown: float = 1.9, from_n: int = 1024
) -> Path:
    """``laptop-cpu`` again, measured with 1 thread instead of 2 (``cpu_threads`` 2 -> 1): its float32 points at
    n >= ``from_n`` take ``slowdown`` times as long; everything else as the original."""
    d = write_cpu_run(results, run_id=run_id, host="laptop")
    info = json.loads((d / "run.json").read_text())
    info["config"]["cpu_threads"] = 1
    info["config_hash"] = config_hash(info["config"])
    (d / "run.json").write_text(json.dumps(info))
    for name in [p.name for p in d.glob("*.csv")]:
        df = pd.read_csv(d / name)
        df["config_hash"] = info["config_hash"]
        if "threads" in df.columns:
            df["threads"] = 1
        if registry.table_of(name) == "matmul":
            slow = (df["dtype"] == "float32") & (df["n"] >= from_n) & df["median_s"].notna()
            for col in ("median_s", "iqr_s", "ci95_low_s", "ci95_high_s"):
                df.loc[slow, col] = df.loc[slow, col] * slowdown
            df.loc[slow, "tflops"] = df.loc[slow, "flops"] / df.loc[slow, "median_s"] / 1e12
            df.loc[slow, "pct_of_peak"] = 100 * df.loc[slow, "tflops"] / df.loc[slow, "peak_tflops"]
        (d / name).write_text(df.to_csv(index=False))
    devices = json.loads((d / "devices.json").read_text())
    devices["config_hash"] = info["config_hash"]
    (d / "devices.json").write_text(json.dumps(devices))
    write_samples(d, seed=1)
    return d
