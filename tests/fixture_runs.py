"""Synthetic but realistic result folders, written exactly as the README's output contract says.

Two runs:

* ``laptop-cpu``: a 2-core Zen 3 laptop, CPU only (bf16/fp16 matmul 50-300x slower than fp32, the
  largest low-precision points skipped for the time budget, fp8 unsupported).
* ``gpu-node-h100``: a node with one NVIDIA H100 and its host CPU; flagged points: an ``unstable``
  fp32 point, an ``invalid`` fp16 point (above 100% of peak), an ``oom``, a ``wrong_result`` fp8
  point and CPU points ``skipped_budget``.

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


def make_config(run: str, backends: list[str], sizes: list[int], dtypes: list[str], seeds=(0, 1, 2)) -> dict:
    config = load(REPO / "config.yaml")
    config["run"] = run
    config["backends"] = backends
    config["matmul"]["sizes"] = sizes
    config["matmul"]["dtypes"] = dtypes
    config["amp"]["seeds"] = list(seeds)
    config["amp"]["steps"] = 40
    return config


def provenance(run_id: str, host: str, cfg_hash: str, cuda_version: str = "", image: str = "") -> dict:
    return {
        "run_id": run_id, "host": host, "accelbench_version": "0.1.0", "git_commit": "6930832abcdef0123456789",
        "torch_version": "2.13.0+cu126" if cuda_version else "2.13.0+cpu", "cuda_version": cuda_version,
        "hip_version": "", "container_image": image, "config_hash": cfg_hash,
    }


def _cpu_info(model: str, cores: int) -> dict:
    # as accelbench detect writes it: "model" is /proc/cpuinfo's model number, "model_name" the name
    return {"model": "1", "model_name": model, "name": model, "arch": "x86_64", "cores_physical": cores,
            "cores_logical": cores * 2, "flags": ["avx", "avx2", "fma", "f16c"], "vendor": "AuthenticAMD"}


def devices_json(run_id: str, host: str, cfg_hash: str, cpu_model: str, cores: int, gpus: list[dict],
                 cuda_version: str = "", image: str = "") -> dict:
    backends = {
        "cpu": {"present": True, "reason": "", "devices": [{
            "device": "cpu", "name": cpu_model, "peak_threads": cores,
            "peaks": {"float32": {"tflops": cores * 0.128, "source": f"cpu: {cores} cores x 4.0 GHz x 32 FLOP/cycle"}}}]},
        "cuda": ({"present": True, "devices": gpus, "reason": "", "driver_version": "560.35.03",
                  "runtime_version": cuda_version} if gpus else
                 {"present": False, "devices": [], "reason": "torch.cuda.is_available() is False (CPU build of torch)"}),
        "rocm": {"present": False, "devices": [], "reason": "not a ROCm build of torch (torch.version.hip is None)"},
        "mps": {"present": False, "devices": [], "reason": "torch.backends.mps.is_available() is False (not macOS)"},
        "xla": {"present": False, "devices": [], "reason": "torch_xla is not installed"},
    }
    return {
        "run_id": run_id, "host": host, "timestamp_utc": "2025-06-01T12:00:00Z", "accelbench_version": "0.1.0",
        "git_commit": "6930832abcdef0123456789", "config_hash": cfg_hash, "python_version": "3.11.7",
        "torch_version": "2.13.0+cu126" if cuda_version else "2.13.0+cpu", "cuda_version": cuda_version,
        "hip_version": "", "container_image": image,
        "env": {"OMP_NUM_THREADS": None, "CUDA_VISIBLE_DEVICES": "0" if gpus else None},
        "packages": {"torch": "2.13.0", "numpy": "2.4.6", "pandas": "3.1.1", "snakemake": "9.27.1"},
        "cpu": _cpu_info(cpu_model, cores), "backends": backends,
    }


def matmul_rows(prov: dict, backend: str, device: str, device_name: str, sizes, dtypes, best: dict,
                peak: dict, threads: int, overrides: dict, rel_error_max: dict, budget_n: dict) -> list[dict]:
    """One row per (dtype, n). ``best[dtype]`` is the TFLOP/s the device approaches at large n;
    ``overrides[(dtype, n)]`` forces a status; ``budget_n[dtype]``: sizes above are skipped_budget."""
    rows = []
    for dtype in dtypes:
        for n in sizes:
            flops = 2.0 * n ** 3
            status = overrides.get((dtype, n), "ok")
            if dtype not in best:
                status = "unsupported"
            elif n > budget_n.get(dtype, 1 << 30):
                status = "skipped_budget"
            row = {**prov, "backend": backend, "device": device, "device_name": device_name, "dtype": dtype,
                   "n": n, "flops": flops, "threads": threads, "allow_tf32": dtype == "tf32",
                   "peak_tflops": peak.get(dtype, float("nan")),
                   "peak_source": "datasheet" if dtype in peak else "",
                   "rel_error_max": rel_error_max.get(dtype, float("nan")), "status": status, "flags": "",
                   "status_detail": ""}
            if status in ("ok", "unstable", "invalid", "wrong_result"):
                eff = 1.0 - math.exp(-n / (1200.0 if backend == "cuda" else 300.0))
                tflops = best[dtype] * eff
                if status == "invalid":
                    tflops = 1.31 * peak[dtype]
                median_s = flops / (tflops * 1e12)
                tflops = flops / median_s / 1e12
                iqr_ratio = 0.23 if status == "unstable" else 0.012
                rel_error = 0.41 if status == "wrong_result" else rel_error_max.get(dtype, 1e-4) / 20
                row.update(median_s=median_s, iqr_s=median_s * iqr_ratio, ci95_low_s=median_s * (1 - iqr_ratio / 3),
                           ci95_high_s=median_s * (1 + iqr_ratio / 3), repeats=int(max(5, min(400, 0.3 / median_s))),
                           tflops=tflops, pct_of_peak=100.0 * tflops / peak[dtype] if dtype in peak else float("nan"),
                           rel_error=rel_error)
                row["flags"] = {"ok": "", "unstable": "unstable", "invalid": "invalid",
                                "wrong_result": "wrong_result"}[status]
                row["status_detail"] = {
                    "ok": "", "unstable": f"IQR/median {iqr_ratio:.2f} > 0.10",
                    "invalid": f"{row['pct_of_peak']:.0f}% of peak: missing synchronization or wrong peak",
                    "wrong_result": f"rel_error {rel_error:.2g} > {rel_error_max.get(dtype)}"}[status]
            else:
                row.update(median_s=np.nan, iqr_s=np.nan, ci95_low_s=np.nan, ci95_high_s=np.nan, repeats=0,
                           tflops=np.nan, pct_of_peak=np.nan, rel_error=np.nan, flags=status,
                           status_detail={"skipped_budget": "predicted 41.2 s > point_budget_s 3.0",
                                          "oom": "CUDA out of memory. Tried to allocate 8.00 GiB",
                                          "unsupported": f"{dtype} matmul not supported on {backend}",
                                          "error": "RuntimeError: cuBLAS error"}.get(status, ""))
            rows.append(row)
    return rows


def warmup_rows(prov, backend, device, device_name, cold_s, warm_s, stable_at, threads, iters=30) -> list[dict]:
    rng = np.random.default_rng(len(device) + int(cold_s * 1000))
    rows = []
    for i in range(iters):
        decay = warm_s + (cold_s - warm_s) * math.exp(-1.1 * i)
        iter_s = cold_s if i == 0 else decay * (1 + 0.02 * rng.standard_normal())
        rows.append({**prov, "backend": backend, "device": device, "device_name": device_name, "iter": i,
                     "iter_s": abs(iter_s), "cold_s": cold_s, "warm_s": warm_s, "stable_at_iter": stable_at,
                     "threads": threads, "status": "ok"})
    return rows


def transfer_rows(prov, backend, device, device_name, sizes_mb, pinned_gbps, pageable_gbps) -> list[dict]:
    rows = []
    for direction in ("h2d", "d2h"):
        for memory, top in (("pageable", pageable_gbps), ("pinned", pinned_gbps)):
            for mb in sizes_mb:
                size = mb * 2 ** 20
                gbps = top * (1 - math.exp(-mb / 6.0)) * (0.93 if direction == "d2h" else 1.0)
                median_s = size / (gbps * 1e9)
                rows.append({**prov, "backend": backend, "device": device, "device_name": device_name,
                             "direction": direction, "memory": memory, "size_bytes": size, "median_s": median_s,
                             "iqr_s": 0.03 * median_s, "repeats": 50, "gbps": gbps, "status": "ok"})
    return rows


def amp_rows(prov, backend, device, device_name, amp_mode, step_fp32, amp_factor, acc_fp32, acc_delta,
             seeds, steps, threads, mem_kind):
    """(steps, trials, summary) rows for fp32 vs one AMP mode, both workloads."""
    steps_rows, trials, summary = [], [], []
    batch = 128
    for w_i, workload in enumerate(("mlp", "transformer")):
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
                    steps_rows.append({**prov, "backend": backend, "device": device, "device_name": device_name,
                                       "workload": workload, "mode": mode, "seed": seed, "step": step,
                                       "loss": loss, "step_s": step_s * (1 + 0.02 * rng.standard_normal()),
                                       "scale": 65536.0 if mode == "amp_fp16" else np.nan, "skipped": False,
                                       "status": "ok"})
                acc = acc_fp32 - w_i * 0.05 + (acc_delta if mode != "fp32" else 0.0) + 0.004 * (seed - 1)
                trials.append({**prov, "backend": backend, "device": device, "device_name": device_name,
                               "workload": workload, "mode": mode, "seed": seed,
                               "amp_dtype": {"amp_fp16": "float16", "amp_bf16": "bfloat16"}.get(mode, ""),
                               "step_median_s": step_s * (1 + 0.01 * seed), "samples_per_s": batch / step_s,
                               "peak_mem_bytes": int(3.1e8 / (1.6 if mode != "fp32" else 1)), "mem_kind": mem_kind,
                               "final_loss": 0.27, "test_acc": acc, "skipped_steps": 1 if mode == "amp_fp16" else 0,
                               "final_scale": 32768.0 if mode == "amp_fp16" else np.nan, "threads": threads,
                               "status": "ok"})
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
            verdict = ("baseline" if mode == "fp32" else
                       f"{'faster' if faster else 'not faster'} ({speedup:.2f}x) with "
                       f"{'accuracy parity' if parity else 'an accuracy loss'} ({acc_diff:+.3f})")
            summary.append({**prov, "backend": backend, "device": device, "device_name": device_name,
                            "workload": workload, "mode": mode, "baseline": "fp32", "trials": len(t),
                            "step_s_mean": step_mean, "speedup": speedup, "speedup_ci95_low": speedup * 0.96,
                            "speedup_ci95_high": speedup * 1.04, "test_acc_mean": acc_mean, "acc_diff": acc_diff,
                            "acc_diff_ci95_low": acc_diff - 0.011, "acc_diff_ci95_high": acc_diff + 0.011,
                            "faster": faster, "accuracy_parity": parity, "verdict": verdict,
                            "note": "" if mode == "fp32" else f"{len(t)} seeds"})
    return steps_rows, trials, summary


def _csv(path: Path, rows: list[dict], kind: str) -> None:
    df = pd.DataFrame(rows).reindex(columns=list(registry.TABLES[kind].columns))
    path.write_text(df.to_csv(index=False))


def write_cpu_run(results: Path, run_id: str = "laptop-cpu", host: str = "laptop") -> Path:
    sizes, dtypes = [256, 512, 1024, 2048], ["float32", "bfloat16", "float16", "float8_e4m3fn"]
    config = make_config(run_id, ["cpu"], sizes, dtypes)
    h = config_hash(config)
    d = Path(results) / run_id
    d.mkdir(parents=True, exist_ok=True)
    (d / "run.json").write_text(json.dumps({"run": run_id, "config": config, "config_hash": h,
                                            "git_commit": "6930832abcdef0123456789", "accelbench_version": "0.1.0"}))
    (d / "devices.json").write_text(json.dumps(devices_json(run_id, host, h, LAPTOP_CPU, 2, [])))
    prov = provenance(run_id, host, h)
    rel = config["matmul"]["rel_error_max"]
    rows = matmul_rows(prov, "cpu", "cpu", LAPTOP_CPU, sizes, dtypes,
                       best={"float32": 0.21, "bfloat16": 0.0021, "float16": 0.0009},
                       peak={"float32": 0.256}, threads=2, overrides={}, rel_error_max=rel,
                       budget_n={"bfloat16": 1024, "float16": 1024})
    _csv(d / "matmul_cpu.csv", rows, "matmul")
    _csv(d / "warmup_cpu.csv", warmup_rows(prov, "cpu", "cpu", LAPTOP_CPU, 0.0241, 0.00261, 6, 2), "warmup")
    st, tr, su = amp_rows(prov, "cpu", "cpu", LAPTOP_CPU, "amp_bf16", 0.0121, 0.42, 0.91, -0.004, [0, 1, 2], 40, 2,
                          "rss")
    _csv(d / "amp_cpu_steps.csv", st, "amp_steps")
    _csv(d / "amp_cpu_trials.csv", tr, "amp_trials")
    _csv(d / "amp_cpu_summary.csv", su, "amp_summary")
    write_samples(d)
    return d


def write_cuda_run(results: Path, run_id: str = "gpu-node-h100", host: str = "gpu-node-01") -> Path:
    sizes = [256, 512, 1024, 2048, 4096, 8192, 16384]
    dtypes = ["float32", "bfloat16", "float16", "float8_e4m3fn"]
    config = make_config(run_id, ["cpu", "cuda"], sizes, dtypes)
    config["container"]["runtime"] = "apptainer"
    h = config_hash(config)
    image = "/shared/images/accelbench-cuda.sif"
    d = Path(results) / run_id
    d.mkdir(parents=True, exist_ok=True)
    (d / "run.json").write_text(json.dumps({"run": run_id, "config": config, "config_hash": h,
                                            "git_commit": "6930832abcdef0123456789", "accelbench_version": "0.1.0"}))
    gpu = {"device": "cuda:0", "name": H100, "total_memory_bytes": 85045231616, "capability": "9.0",
           "multiprocessor_count": 132,
           "peaks": {d: {"tflops": t, "source": "datasheet: NVIDIA H100 SXM5, dense"} for d, t in H100_PEAK.items()}}
    (d / "devices.json").write_text(json.dumps(devices_json(run_id, host, h, EPYC, 16, [gpu], "12.6", image)))
    prov = provenance(run_id, host, h, "12.6", image)
    rel = config["matmul"]["rel_error_max"]
    cpu = matmul_rows(prov, "cpu", "cpu", EPYC, sizes, dtypes,
                      best={"float32": 1.6, "bfloat16": 0.017, "float16": 0.0061},
                      peak={"float32": 2.05}, threads=16, overrides={}, rel_error_max=rel,
                      budget_n={"float32": 4096, "bfloat16": 1024, "float16": 512})
    cuda = matmul_rows(prov, "cuda", "cuda:0", H100, sizes, ["float32", "tf32", *dtypes[1:]],
                       best={"float32": 51.0, "tf32": 378.0, "bfloat16": 712.0, "float16": 735.0,
                             "float8_e4m3fn": 1310.0},
                       peak=H100_PEAK, threads=1, rel_error_max=rel, budget_n={},
                       overrides={("float32", 256): "unstable", ("float16", 256): "invalid",
                                  ("float32", 16384): "oom", ("float8_e4m3fn", 256): "wrong_result"})
    _csv(d / "matmul_cpu.csv", cpu, "matmul")
    _csv(d / "matmul_cuda.csv", cuda, "matmul")
    _csv(d / "warmup_cpu.csv", warmup_rows(prov, "cpu", "cpu", EPYC, 0.0112, 0.00071, 5, 16), "warmup")
    _csv(d / "warmup_cuda.csv", warmup_rows(prov, "cuda", "cuda:0", H100, 0.842, 0.000118, 9, 1), "warmup")
    _csv(d / "transfer_cuda.csv", transfer_rows(prov, "cuda", "cuda:0", H100, [1, 16, 128], 52.1, 11.8), "transfer")
    for backend, device, name, mode, step, factor, mem in (
            ("cpu", "cpu", EPYC, "amp_bf16", 0.0031, 0.61, "rss"),
            ("cuda", "cuda:0", H100, "amp_fp16", 0.00094, 2.4, "allocator")):
        st, tr, su = amp_rows(prov, backend, device, name, mode, step, factor, 0.93, -0.002, [0, 1, 2], 40,
                              16 if backend == "cpu" else 1, mem)
        _csv(d / f"amp_{backend}_steps.csv", st, "amp_steps")
        _csv(d / f"amp_{backend}_trials.csv", tr, "amp_trials")
        _csv(d / f"amp_{backend}_summary.csv", su, "amp_summary")
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
        path.write_text(df.drop(columns=[df.columns[-4]]).to_csv(index=False))
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
    the same laptop with 1 thread (``write_slower_cpu_run``), compared by ``accelbench compare`` and reported with
    its "Compared with" section.
    """
    from accelbench.cli import main

    if name in _BUILT:
        return _BUILT[name]
    root = Path(base) / name
    results = root / "results"
    results.mkdir(parents=True)
    which = {"two_runs": ("cpu", "cuda"), "cpu_only": ("cpu",), "incomplete": ("cpu", "cuda"), "empty": (),
             "compared": ("cpu",)}[name]
    write_fixture_results(results, which)
    comparison = []
    if name == "compared":
        write_slower_cpu_run(results)
        assert main(["compare", "--results", str(results), "laptop-cpu", "laptop-cpu-1t"]) == 1
        comparison = ["--comparison", str(results / "compare" / "laptop-cpu__laptop-cpu-1t.csv")]
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
    assert main(["report", "--aggregate-dir", str(agg), "--plots-dir", str(plots), "--out", str(report),
                 *comparison]) == 0
    _BUILT[name] = {"results": results, "aggregate": agg, "plots": plots, "report": report}
    return _BUILT[name]


def add_absent_backend(run_dir: Path, backend: str = "cuda") -> None:
    """Make ``run_dir``'s run ask for ``backend`` on a machine without it: the stages then write one
    ``absent`` row per file (device empty), as accelbench's matmul/warmup/transfer/amp do."""
    run_dir = Path(run_dir)
    info = json.loads((run_dir / "run.json").read_text())
    info["config"]["backends"] = [*info["config"]["backends"], backend]
    (run_dir / "run.json").write_text(json.dumps(info))
    prov = pd.read_csv(run_dir / "matmul_cpu.csv").iloc[0][list(registry.PROVENANCE)].to_dict()
    row = {**prov, "backend": backend, "device": "", "device_name": "", "status": "absent",
           "status_detail": f"backend {backend!r}: no {backend.upper()} device visible to this torch build"}
    for name, kind in ((f"warmup_{backend}.csv", "warmup"), (f"matmul_{backend}.csv", "matmul"),
                       (f"transfer_{backend}.csv", "transfer"), (f"amp_{backend}_steps.csv", "amp_steps"),
                       (f"amp_{backend}_trials.csv", "amp_trials"), (f"amp_{backend}_summary.csv", "amp_summary")):
        _csv(run_dir / name, [row], kind)
    for spec in registry.SAMPLES.values():  # as the stages write them for a backend without a device: empty
        atomic_write_parquet(run_dir / spec.filename(backend), sample_table.empty())


# ---- raw timing samples and a second CPU run to compare with (accelbench compare) -------------------------------

def write_samples(run_dir: Path, seed: int = 0, blocks: int = 12, amp_warmup_steps: int = 5,
                  blocks_column: bool = False) -> None:
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
            if stage in ("matmul", "transfer"):
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
                df = sample_table.from_series_rows("warmup", rows, index="iter", value="iter_s",
                                                   steady=sample_table.warmup_steady(rows, 5))
            else:
                df = sample_table.from_series_rows("amp_trials", rows, index="step", value="step_s",
                                                   steady=lambda r: int(r["step"]) >= amp_warmup_steps)
            atomic_write_parquet(run_dir / spec.filename(backend), df)


def write_slower_cpu_run(results: Path, run_id: str = "laptop-cpu-1t", slowdown: float = 1.9,
                         from_n: int = 1024) -> Path:
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
        if name.startswith("matmul_"):
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
