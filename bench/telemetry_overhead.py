"""What does the telemetry sampler cost the measurement beside which it runs? Side by side, in one run:

- off: the matmul stage's own measurement of a point (``TorchMatmul.time``: rotated cache-cold inputs,
  ``out=`` reuse, synced ``torch.utils.benchmark.Timer``, >= 6 blocks), nothing else running;
- on: the same measurement inside a telemetry window (``measure.telemetry.DeviceTelemetry.window``): the
  backend's reader (``Backend.telemetry_reader``) read every ``1 / --hz`` s on a background thread.

Interleaved rounds (the order alternates every round) with an idle gap before each measurement, so slow
phases of a shared machine hit both alike; each mode's figure is the median over rounds. Per size the
ratio on / off of GFLOP/s; the last line is its geometric mean over sizes (target >= 0.99). Above it, what
one reading costs (the reader alone, timed in a loop) and how many readings a window took.

    python bench/telemetry_overhead.py [--sizes 256 512 1024] [--threads 2] [--rounds 7] [--hz 20]
    python bench/telemetry_overhead.py --device cuda:0 --dtype bfloat16 --sizes 4096 8192   # on a GPU

On a GPU the reader is NVML (``pip install 'accelbench[nvidia]'``); untested on hardware until a GPU run
is recorded in the README.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

import torch

from accelbench import backends
from accelbench.measure import telemetry as tm
from accelbench.measure.timing import Measurer
from accelbench.stages.matmul import TorchMatmul, warmup_calls


def gflops(n: int, seconds: float) -> float:
    return 2 * n ** 3 / seconds / 1e9


def measure(kernels: TorchMatmul, n: int, dtype: str, telemetry: tm.DeviceTelemetry | None) -> tuple[float, int]:
    """(GFLOP/s of one point as the matmul stage measures it, readings taken during it)."""
    with kernels.mode(dtype):
        call_s = kernels.probe(dtype, n)
        if telemetry is None:
            stats, _ = kernels.time(dtype, n, warmup_calls(call_s))
            return gflops(n, stats.median_s), 0
        with telemetry.window() as window:
            stats, _ = kernels.time(dtype, n, warmup_calls(call_s))
        return gflops(n, stats.median_s), len(window.readings)


def read_cost_us(reader: tm.Reader, reads: int = 200) -> float:
    """Microseconds one reading of every sensor takes (the sampler thread's work per tick)."""
    start = time.perf_counter()
    for _ in range(reads):
        reader.read(0.0)
    return (time.perf_counter() - start) / reads * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024])
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--min-run-time", type=float, default=0.3)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--hz", type=float, default=tm.DEFAULT_HZ)
    p.add_argument("--gap-s", type=float, default=0.3, help="idle seconds before each measurement")
    p.add_argument("--device", default="cpu", help="cpu, cuda:0, ...")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    backend = backends.for_device(args.device)
    reader = backend.telemetry_reader(args.device).open()
    telemetry = tm.DeviceTelemetry(backend.telemetry_reader(args.device), args.hz)
    print(f"torch {torch.__version__} threads={args.threads} device={args.device} dtype={args.dtype} "
          f"hz={args.hz:g} source={reader.source}")
    print(f"sensors read: {', '.join(reader.found) or 'none'}; missing: {', '.join(reader.missing) or 'none'}")
    if not reader.any:
        print("no sensor on this device: the sampler never starts, so there is nothing to measure")
    cost = read_cost_us(reader) if reader.any else 0.0
    print(f"one reading: {cost:.1f} us (at {args.hz:g} Hz: {cost * args.hz / 1e4:.3f}% of one core)")
    measurer = Measurer(backend.synced_timer(args.device), min_run_time_s=args.min_run_time, threads=args.threads)
    kernels = TorchMatmul(args.device, backend, measurer=measurer, seed=0)
    print(f"{'n':>6} {'off GFLOP/s':>12} {'on GFLOP/s':>12} {'on/off':>7} {'readings':>9}"
          f"   (median of {args.rounds} interleaved rounds; range = (max - min) / median)")
    ratios = []
    for n in args.sizes:
        got = {"off": [], "on": []}
        readings = []
        for r in range(args.rounds):
            for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):  # alternate which goes first
                time.sleep(args.gap_s)
                value, k = measure(kernels, n, args.dtype, telemetry if mode == "on" else None)
                got[mode].append(value)
                if mode == "on":
                    readings.append(k)
        med = {m: statistics.median(v) for m, v in got.items()}
        ratios.append(med["on"] / med["off"])
        spread = {m: (max(v) - min(v)) / med[m] for m, v in got.items()}
        print(f"{n:>6} {med['off']:>12.2f} {med['on']:>12.2f} {ratios[-1]:>7.3f} {statistics.median(readings):>9.0f}"
              f"   range off {spread['off']:.0%}, on {spread['on']:.0%}", flush=True)
    telemetry.close()
    reader.close()
    geomean = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    print(f"ratio sampler on / off (geometric mean over sizes, target >= 0.99): {geomean:.3f}")


if __name__ == "__main__":
    main()
