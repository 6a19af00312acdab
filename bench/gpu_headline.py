"""The GPU check's headline, first: bf16 and fp8 matmul TFLOP/s at n=8192 on the first accelerator.

Each point is measured exactly as the matmul stage measures it (``stages.matmul.measure_point`` on
``TorchMatmul``: the device warmed by the warm-up rule, untimed calls, inputs rotated out of the
last-level cache, synchronized ``torch.utils.benchmark`` blocks, the product checked against float64,
% of the datasheet peak), without Snakemake, so the number exists within seconds of the machine
starting, even if the pipeline after it runs out of time. Prints one ``KEY`` line per point (the GPU
check copies those into its summary) and writes the rows as JSON with ``--out``.

fp8 (``torch._scaled_mm``) is measured twice, without and with ``use_fast_accum`` (the row's
``fp8_fast_accum`` and the KEY line say which): without is the full-precision accumulation the matmul
stage measures; with is Hopper's fast fp8 accumulation, the mode nearer the datasheet's fp8 peak
(1979 TFLOP/s dense on an H100/H200 SXM). Untested on hardware until a GPU run is recorded.

    python bench/gpu_headline.py                       # first accelerator, else the CPU (fp32, bf16, n=256)
    python bench/gpu_headline.py --which-device        # only print the device it would measure
    python bench/gpu_headline.py --device cuda:1 --dtypes bfloat16 --sizes 4096 8192
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch

from accelbench import backends, registry
from accelbench.backends import BackendUnavailable
from accelbench.measure.stability import warm_device
from accelbench.measure.timing import Measurer
from accelbench.run.config import with_defaults
from accelbench.stages.matmul import PLUGIN as MATMUL
from accelbench.stages.matmul.measure import Settings, TorchMatmul, measure_point, peak_safe

ACCELERATOR_SIZES, ACCELERATOR_DTYPES = [8192], ["bfloat16", "float8_e4m3fn"]
# a CPU stand-in of the check: bf16 is emulated on most CPUs (8192^3 would take minutes) and fp8 everywhere
CPU_SIZES, CPU_DTYPES = [256], ["float32", "bfloat16"]


def pick_device() -> str:
    """The first device of the first backend (in the registry's order) that has one; the CPU otherwise."""
    for name in backends.accelerator_names():
        try:
            devices = backends.get(name).devices()
        except BackendUnavailable:
            continue
        except Exception:  # a broken driver: try the next kind
            continue
        if devices:
            return devices[0]
    return "cpu"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="auto", help="auto (first accelerator, else cpu), cuda:0, ...")
    p.add_argument(
        "--dtypes", nargs="+", help=f"default {ACCELERATOR_DTYPES} on an accelerator, {CPU_DTYPES} on the CPU"
    )
    p.add_argument(
        "--sizes", type=int, nargs="+", help=f"default {ACCELERATOR_SIZES} on an accelerator, {CPU_SIZES} on the CPU"
    )
    p.add_argument("--min-run-time", type=float, default=0.3)
    p.add_argument("--point-budget-s", type=float, default=20.0)
    p.add_argument("--which-device", action="store_true", help="print the device that would be measured, exit")
    p.add_argument("--out", help="a folder: headline.json (the rows) is written there")
    args = p.parse_args()

    device = pick_device() if args.device == "auto" else args.device
    if args.which_device:
        print(device)
        return
    backend = backends.for_device(device)
    backend.prepare_process()
    on_cpu = not backend.is_accelerator
    sizes = args.sizes or (CPU_SIZES if on_cpu else ACCELERATOR_SIZES)
    dtypes = args.dtypes or (CPU_DTYPES if on_cpu else ACCELERATOR_DTYPES)
    threads = torch.get_num_threads()
    info = backend.device_info(device)
    defaults = with_defaults({})
    warm = warm_device(backend, device, defaults[registry.WARMUP.config_key])
    print(f"KEY device {device}: {info.get('name')} (torch {torch.__version__}; {warm.describe(device)})", flush=True)
    settings = Settings(
        min_run_time_s=args.min_run_time,
        point_budget_s=args.point_budget_s,
        unstable_iqr_ratio=0.1,
        rotate_inputs=True,
        rel_error_max=dict(defaults[MATMUL.config_key]["rel_error_max"]),
        seed=0,
        threads=threads,
    )
    measurer = Measurer(backend.synced_timer(device), min_run_time_s=args.min_run_time, threads=threads)
    rows = []
    for dtype in dtypes:
        peak = peak_safe(backend, info, dtype, threads, {})
        for fast_accum in (False, True) if dtype == "float8_e4m3fn" else (False,):
            kernels = TorchMatmul(device, backend, info=info, seed=0, measurer=measurer, fp8_fast_accum=fast_accum)
            accum = f" use_fast_accum={'on' if fast_accum else 'off'}" if dtype == "float8_e4m3fn" else ""
            previous = None
            for n in sorted(sizes):
                row = measure_point(kernels, dtype=dtype, n=n, settings=settings, peak=peak, previous=previous)
                rows.append({"device": device, "device_name": info.get("name"), **row})
                if math.isfinite(row["median_s"]):
                    previous = (n, row["median_s"])
                pct = (
                    f"{row['pct_of_peak']:.1f}% of {row['peak_tflops']:g}"
                    if math.isfinite(row["pct_of_peak"])
                    else "peak unknown"
                )
                detail = f": {row['status_detail']}" if row["status_detail"] else ""
                print(
                    f"KEY headline {device} {dtype} ({row['torch_dtype'] or '?'}){accum} n={n}: "
                    f"{row['tflops']:.4g} TFLOP/s, {pct}, rel_error {row['rel_error']:.2g}, {row['status']}{detail}",
                    flush=True,
                )
            kernels.free()
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "headline.json").write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
