"""What does the telemetry sampler cost the measurement beside which it runs? Side by side, in one run:

- off: the matmul stage's own measurement of a point (``TorchMatmul.time``: rotated cache-cold inputs,
  ``out=`` reuse, synced ``torch.utils.benchmark.Timer``, >= 6 blocks), nothing else running;
- on: the same measurement inside a telemetry window (``measure.telemetry.DeviceTelemetry.window``): the
  backend's reader (``Backend.telemetry_reader``) read every ``1 / --hz`` s on a background thread.

Paired, interleaved rounds: every round measures off and on back to back (the order alternating from round
to round) after an idle gap each, so a slow phase of a shared machine hits both of a pair alike. Per size:
each mode's median GFLOP/s over rounds, the median over rounds of the pair's ratio on / off (the headline:
pairing cancels drifts slower than a pair), and the ratio of the two modes' best rounds (interference only
ever slows a measurement down, so the best of each is its least disturbed reading). The last line is the
geometric mean over sizes of the paired ratio (target >= 0.99). Above it, what one reading costs (the
reader alone, timed in a loop), the share of one core that is at ``--hz``, how many readings a window took,
and the CPU time the sampling thread actually used over all windows (``time.thread_time``: unlike the
throughput ratio, not blurred by whatever else the machine runs).

    python bench/telemetry_overhead.py [--sizes 256 512 1024] [--threads 2] [--rounds 7] [--hz 20]
    python bench/telemetry_overhead.py --device cuda:0 --dtype bfloat16 --sizes 4096 8192   # on a GPU

On a GPU the reader is NVML (``pip install 'accelbench[nvidia]'``); untested on hardware until a GPU run
is recorded in docs/measurements.md.
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
from accelbench.stages.matmul.measure import TorchMatmul, warmup_calls


def gflops(n: int, seconds: float) -> float:
    return 2 * n**3 / seconds / 1e9


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
    print(
        f"torch {torch.__version__} threads={args.threads} device={args.device} dtype={args.dtype} "
        f"hz={args.hz:g} source={reader.source}"
    )
    print(f"sensors read: {', '.join(reader.found) or 'none'}; missing: {', '.join(reader.missing) or 'none'}")
    if not reader.any:
        print("no sensor on this device: the sampler never starts, so there is nothing to measure")
    cost = read_cost_us(reader) if reader.any else 0.0
    print(f"one reading: {cost:.1f} us (at {args.hz:g} Hz: {cost * args.hz / 1e4:.3f}% of one core)")
    measurer = Measurer(backend.synced_timer(args.device), min_run_time_s=args.min_run_time, threads=args.threads)
    kernels = TorchMatmul(args.device, backend, measurer=measurer, seed=0)
    print(
        f"{'n':>6} {'off GFLOP/s':>12} {'on GFLOP/s':>12} {'on/off':>7} {'readings':>9} {'best on/off':>12}"
        f"   (medians of {args.rounds} paired rounds; on/off: median of the pairs' ratios; "
        "range = (max - min) / median)"
    )
    ratios = []
    for n in args.sizes:
        got = {"off": [], "on": []}
        readings = []
        for r in range(args.rounds):
            for mode in ("off", "on") if r % 2 == 0 else ("on", "off"):  # alternate which goes first
                time.sleep(args.gap_s)
                value, k = measure(kernels, n, args.dtype, telemetry if mode == "on" else None)
                got[mode].append(value)
                if mode == "on":
                    readings.append(k)
        med = {m: statistics.median(v) for m, v in got.items()}
        ratios.append(statistics.median(on / off for on, off in zip(got["on"], got["off"])))
        best = max(got["on"]) / max(got["off"])
        spread = {m: (max(v) - min(v)) / med[m] for m, v in got.items()}
        print(
            f"{n:>6} {med['off']:>12.2f} {med['on']:>12.2f} {ratios[-1]:>7.3f} {statistics.median(readings):>9.0f}"
            f" {best:>12.3f}   range off {spread['off']:.0%}, on {spread['on']:.0%}",
            flush=True,
        )
    sampler = telemetry.sampler
    if sampler is not None and sampler.window_s > 0:
        print(
            f"sampler thread CPU time: {sampler.thread_cpu_s:.3f} s over {sampler.window_s:.1f} s of windows = "
            f"{100 * sampler.thread_cpu_s / sampler.window_s:.3f}% of one core (what it takes from the "
            f"measurement, whatever else runs on the machine)"
        )
    telemetry.close()
    reader.close()
    geomean = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    print(f"ratio sampler on / off (paired, geometric mean over sizes, target >= 0.99): {geomean:.3f}")


if __name__ == "__main__":
    main()
