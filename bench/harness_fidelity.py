"""Does accelbench's harness cost throughput? float32 GFLOP/s on the CPU, side by side, in one run:

- accelbench: the matmul stage's own measurement (``TorchMatmul.time``: rotated inputs that
  overflow the last-level cache, ``out=`` reuse, synced ``torch.utils.benchmark.Timer``, >= 6 blocks)
- accelbench, no rotation: the same with one input pair (operands may stay in cache)
- torch.utils.benchmark, bare: ``Timer("a @ b").blocked_autorange()`` on one pair, with the same
  thread count (its default would be ONE thread)
- numpy: ``a @ b`` in float32 through numpy's BLAS (stdlib ``timeit``, median of repeats), limited to
  the same thread count with threadpoolctl where installed

How the comparison is kept fair on a shared, noisy machine:

- Interleaved rounds: every round measures every method once, in an order that rotates from round
  to round, so slow phases of the host (steal time, clock changes) hit all methods alike.
- An idle gap (``--gap-s``) before each measurement: OpenBLAS and OpenMP worker threads spin-wait
  for a while after a call; without the gap, the previous library's spinning threads compete with
  the next one for the same cores (on 2 cores that alone can halve a reading).
- Each method's figure is the median over rounds of its per-round median: every method gets the
  same number of samples and the same statistic. (Best-of-rounds would favour "best", which is a
  maximum over two methods.)

"best" is the faster of the two outside harnesses (bare torch.utils.benchmark, numpy). The last
line is accelbench as the pipeline runs it / best (geometric mean over sizes; target >= 0.97). The
three lines above it split that ratio, size by size, into factors that multiply to it:

- harness: accelbench without rotation / bare torch.utils.benchmark -- same library, same
  cache-resident operands: what the harness itself costs;
- library: bare torch / best -- torch's BLAS against numpy's (1.0 where torch is the faster);
- rotation: accelbench / accelbench without rotation -- the deliberate cost of cache-cold operands,
  expected below 1 at sizes whose operands fit in the last-level cache and about 1 above. What numpy ran (BLAS library, kernel,
threads) is printed; OPENBLAS_CORETYPE, where set, changes numpy's kernel (this script does not
change it).

    python bench/harness_fidelity.py [--sizes 256 512 1024 2048] [--threads 2] [--rounds 5]
    python bench/harness_fidelity.py --device cuda:0 --dtype bfloat16 --sizes 4096 8192   # on a GPU

On an accelerator numpy does not take part: "best" is the bare torch.utils.benchmark loop (which
synchronizes ``torch.accelerator``). Untested on hardware until a GPU run is recorded in docs/measurements.md.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
import timeit

import numpy as np
import torch
import torch.utils.benchmark as tb

from accelbench import backends
from accelbench.measure.timing import Measurer
from accelbench.stages.matmul.measure import TorchMatmul, warmup_calls


def gflops(n: int, seconds: float) -> float:
    return 2 * n**3 / seconds / 1e9


def numpy_blas() -> tuple[str, object]:
    """A description of numpy's BLAS, and a context that limits its threads (or None)."""
    try:
        import threadpoolctl

        info = [i for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas"]
        desc = "; ".join(
            f"{i.get('internal_api')} {i.get('version')} kernel={i.get('architecture')} "
            f"threads={i.get('num_threads')} ({os.path.basename(i.get('filepath', ''))})"
            for i in info
        )
        return desc or "unknown BLAS", threadpoolctl
    except ImportError:
        cfg = np.show_config(mode="dicts") if "mode" in np.show_config.__code__.co_varnames else {}
        blas = (cfg.get("Build Dependencies", {}) or {}).get("blas", {}) if isinstance(cfg, dict) else {}
        name = f"{blas.get('name', 'unknown BLAS')} {blas.get('version', '')}"
        return f"{name} (install threadpoolctl to see the kernel)", None


def run_accelbench(
    n: int, threads: int, min_run_time: float, rotate: bool, device: str = "cpu", dtype: str = "float32"
) -> float:
    backend = backends.for_device(device)
    m = Measurer(backend.synced_timer(device), min_run_time_s=min_run_time, threads=threads)
    k = TorchMatmul(device, backend, measurer=m, seed=0, rotate=rotate)
    with k.mode(dtype):
        call_s = k.probe(dtype, n)
        stats, _ = k.time(dtype, n, warmup_calls(call_s))
    return gflops(n, stats.median_s)


def run_bare_timer(n: int, threads: int, min_run_time: float, device: str = "cpu", dtype: str = "float32") -> float:
    a = torch.randn(n, n, device=device, dtype=getattr(torch, dtype))
    b = torch.randn(n, n, device=device, dtype=getattr(torch, dtype))
    t = tb.Timer("a @ b", globals={"a": a, "b": b}, num_threads=threads)
    return gflops(n, t.blocked_autorange(min_run_time=min_run_time).median)


def run_numpy(n: int, threads: int, min_run_time: float, threadpoolctl) -> float:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    limit = threadpoolctl.threadpool_limits(threads, user_api="blas") if threadpoolctl else None
    try:
        t = timeit.Timer("a @ b", globals={"a": a, "b": b})
        number, elapsed = t.autorange()
        repeat = max(5, math.ceil(min_run_time / max(elapsed, 1e-9)))
        return gflops(n, statistics.median(t.repeat(repeat=repeat, number=number)) / number)
    finally:
        if limit is not None:
            limit.unregister() if hasattr(limit, "unregister") else limit.restore_original_limits()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048])
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--min-run-time", type=float, default=0.3)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument(
        "--gap-s",
        type=float,
        default=0.3,
        help="idle seconds before each measurement (spinning BLAS/OpenMP threads go to sleep)",
    )
    p.add_argument("--device", default="cpu", help="cpu, cuda:0, ... (numpy joins on the CPU only)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    args = p.parse_args()
    dev, dt = args.device, args.dtype

    torch.set_num_threads(args.threads)
    desc, threadpoolctl = numpy_blas()
    print(f"torch {torch.__version__} threads={args.threads}; numpy {np.__version__}: {desc}")
    env = {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS")}
    print(" ".join(f"{k}={v!r}" for k, v in env.items()))
    methods = {
        "accelbench": lambda n: run_accelbench(n, args.threads, args.min_run_time, True, dev, dt),
        "accelbench_norot": lambda n: run_accelbench(n, args.threads, args.min_run_time, False, dev, dt),
        "tub_bare": lambda n: run_bare_timer(n, args.threads, args.min_run_time, dev, dt),
    }
    if dev == "cpu" and dt == "float32":
        methods["numpy"] = lambda n: run_numpy(n, args.threads, args.min_run_time, threadpoolctl)
    print(f"device={dev} dtype={dt}")
    names = list(methods)
    print(
        f"{'n':>6} " + " ".join(f"{m:>17}" for m in names) + f" {'acc/best':>9}"
        f"   (GFLOP/s, median of {args.rounds} interleaved rounds; range = (max - min) / median)"
    )
    parts = {"harness": [], "library": [], "rotation": [], "total": []}
    for n in args.sizes:
        got = {m: [] for m in names}
        for r in range(args.rounds):
            for m in names[r % len(names) :] + names[: r % len(names)]:  # rotate the order every round
                time.sleep(args.gap_s)
                got[m].append(methods[m](n))
        med = {m: statistics.median(v) for m, v in got.items()}
        best = max(med["tub_bare"], med.get("numpy", 0.0))
        parts["harness"].append(med["accelbench_norot"] / med["tub_bare"])
        parts["library"].append(med["tub_bare"] / best)
        parts["rotation"].append(med["accelbench"] / med["accelbench_norot"])
        parts["total"].append(med["accelbench"] / best)
        print(f"{n:>6} " + " ".join(f"{med[m]:>17.2f}" for m in names) + f" {parts['total'][-1]:>9.3f}", flush=True)
        spread = {m: (max(v) - min(v)) / med[m] for m, v in got.items()}
        print(f"{'':>6} " + " ".join(f"{'range ' + format(spread[m], '.0%'):>17}" for m in names), flush=True)

    def geomean(xs):
        return math.exp(sum(math.log(x) for x in xs) / len(xs))

    # accelbench/best = harness x library x rotation, size by size: where each percent goes.
    print(
        f"harness:  accelbench without rotation / bare torch.utils.benchmark (same operands): "
        f"{geomean(parts['harness']):.3f}"
    )
    print(
        f"library:  bare torch.utils.benchmark / best (torch's BLAS against numpy's): {geomean(parts['library']):.3f}"
    )
    print(f"rotation: accelbench / accelbench without rotation (cache-cold operands): {geomean(parts['rotation']):.3f}")
    print(f"ratio accelbench/best (geometric mean over sizes, target >= 0.97): {geomean(parts['total']):.3f}")


if __name__ == "__main__":
    main()
