"""The GPU check's NVML readings: what the device's sensors say idle and under a bf16 matmul load.

Opens the backend's telemetry reader (``Backend.telemetry_reader``: NVML on NVIDIA, amdsmi on AMD, sysfs on
the CPU stand-in) on the first accelerator, as every stage does, and prints ``KEY`` lines for summary.txt:

- where each sensor is read and why the others are missing, and the power source (NVML:
  ``NVML_FI_DEV_POWER_INSTANT`` where the driver answers it, else the 1 s average);
- one idle reading (clock, power, temperature);
- one telemetry window over ``--load-s`` seconds of back-to-back products (bf16 ``--n``^3 on a GPU, float32
  256^3 on the CPU) sampled at ``--hz``: median and minimum clock, median power, maximum temperature, energy
  from the counter, throttle reasons, whether the clock settled, what the window is too short for;
- the energy counter's update period: the median time between readings whose energy differs (resolution
  1 / --hz; Hopper's counter steps every 20-100 ms), what ``telemetry_too_short_for`` assumes.

**Untested on hardware** until a GPU run is recorded in docs/measurements.md.

    python bench/gpu_nvml.py [--device cuda:0] [--load-s 3] [--hz 50] [--n 4096]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accelbench import backends
from accelbench.measure import telemetry as tm
from gpu_headline import pick_device


def fmt(x, unit="", spec=".4g") -> str:
    return "null" if x is None else f"{format(x, spec)}{unit}"


def counter_step_s(readings: list[tm.Reading]) -> float | None:
    """Median seconds between readings whose energy differs from the previous change's."""
    changes, last = [], None
    for r in readings:
        if r.energy_j is None:
            continue
        if last is None or r.energy_j != last[1]:
            if last is not None:
                changes.append(r.t - last[0])
            last = (r.t, r.energy_j)
    return statistics.median(changes[1:] or changes) if changes else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="auto")
    p.add_argument("--load-s", type=float, default=3.0)
    p.add_argument("--hz", type=float, default=50.0)
    p.add_argument("--n", type=int, default=4096)
    args = p.parse_args()
    device = pick_device() if args.device == "auto" else args.device
    backend = backends.for_device(device)
    on_cpu = not backend.is_accelerator
    reader = backend.telemetry_reader(device).open()
    found = ", ".join(f"{k} ({v})" for k, v in reader.found.items()) or "none"
    print(f"KEY nvml {device}: source {reader.source}, power source {reader.power_source or 'n/a'}; found: {found}")
    if reader.missing:
        print(f"KEY nvml {device}: missing: " + "; ".join(f"{k}: {v}" for k, v in reader.missing.items()))
    idle = reader.read(time.perf_counter())
    print(
        f"KEY nvml {device} idle: clock {fmt(idle.clock_mhz, ' MHz')}, power {fmt(idle.power_w, ' W')}, "
        f"temp {fmt(idle.temp_c, ' C')}"
    )
    reader.close()
    n, dtype = (256, torch.float32) if on_cpu else (args.n, torch.bfloat16)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    sync = backend.synchronizer(device)
    telemetry = tm.DeviceTelemetry(backend.telemetry_reader(device), args.hz)
    calls = 0
    with telemetry.window() as window:
        end = time.perf_counter() + args.load_s
        while time.perf_counter() < end:
            for _ in range(8):
                torch.mm(a, b)
            sync()
            calls += 8
    cols = window.columns()
    seconds = window.duration_s or args.load_s
    tflops = 2 * n**3 * calls / seconds / 1e12
    print(
        f"KEY nvml {device} under {str(dtype).split('.')[-1]} {n}^3 for {seconds:.3g} s ({tflops:.4g} TFLOP/s, "
        f"{cols['telemetry_samples']} readings): clock median {fmt(cols['clock_mhz_median'], ' MHz')} "
        f"(min {fmt(cols['clock_mhz_min'], ' MHz')}, settled {cols['clock_settled']}), power median "
        f"{fmt(cols['power_w_median'], ' W')} ({cols['power_source'] or 'n/a'}), temp max "
        f"{fmt(cols['temp_c_max'], ' C')}, energy {fmt(cols['energy_j'], ' J')} ({cols['energy_source'] or 'n/a'}), "
        f"throttle {cols['throttle_reasons'] if cols['throttled'] is not None else 'unknown'} "
        f"(throttled {cols['throttled']}), too short for: {cols['telemetry_too_short_for'] or 'nothing'}"
    )
    step = counter_step_s(window.readings)
    print(
        f"KEY nvml {device}: energy counter steps every {fmt(None if step is None else step * 1e3, ' ms', '.3g')} "
        f"(median; resolution {1e3 / args.hz:.3g} ms at {args.hz:g} Hz)"
    )
    telemetry.close()


if __name__ == "__main__":
    main()
