"""How good is the shape search? Best found / exhaustive best, and the share of the grid it measured.

On a small grid (default 64..512 step 64 in m, n and k: 512 shapes), float32 on the CPU:

1. exhaustive: every shape measured once, exactly as the search screens a shape
   (``stages.matmul.measure_point``: warm-up, synced ``torch.utils.benchmark`` timing, >= 6 blocks,
   rotated cache-cold operands from the pool, float64 check), for ``--min-run-time`` each; its best
   ``--confirm`` shapes measured again for ``--confirm-run-time`` (the same confirmation the search
   does), the best confirmed being the exhaustive best;
2. the search (``stages.matmul_search.search_device_dtype``, the stage's own code) within ``--budget-s``;
3. the two winners side by side: ``--rounds`` interleaved rounds of both shapes at ``--confirm-run-time``
   (so a slow phase of a shared machine hits both), the figure of each the median over rounds.

Printed: the grid, the search's measurements and the share of the grid, time against budget, both
best shapes with TFLOP/s and the spread over rounds, then last the ratio best-found / exhaustive-best
with its min-max over rounds. ``--fake`` searches ``measure.shape_search.QuantizedGemmModel`` (a
synthetic device with a known optimum) instead, which isolates the method from measurement noise.
``--no-exhaustive`` runs only the search (e.g. 64..1024 step 64, whose 4096 shapes are too many to
measure all) and prints its best; ``--repeats`` runs it that many times to show its spread.

    python bench/search_quality.py [--min 64] [--max 512] [--step 64] [--threads 2] [--budget-s 60]
    python bench/search_quality.py --max 1024 --no-exhaustive --repeats 3
    python bench/search_quality.py --fake --max 1024
    python bench/search_quality.py --device cuda:0 --dtype bfloat16 --min 1024 --max 8192 --step 1024   # a GPU

On an accelerator (``--device``) the same code runs through that backend's synchronization and peaks;
untested on hardware until a GPU run is recorded in docs/measurements.md.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from dataclasses import replace

import torch

from accelbench import backends
from accelbench.measure import shape_search
from accelbench.measure.timing import Measurer
from accelbench.run.config import with_defaults
from accelbench.stages.matmul import PLUGIN as MATMUL
from accelbench.stages.matmul.measure import Settings, Shape, TorchMatmul, measure_point, peak_safe
from accelbench.stages.matmul_search.measure import search_device_dtype


class _NoCheckpoint:
    rows: dict = {}

    @staticmethod
    def key(row):
        return tuple(row.values())

    def add(self, row):
        pass


class FakeKernels:
    """The stage's kernels interface over ``QuantizedGemmModel``: each "measurement" advances a fake clock
    by its predicted cost, so the budget logic is exercised too."""

    def __init__(self, model: shape_search.QuantizedGemmModel):
        from accelbench.measure.timing import summarize  # lazy: only the fake needs it

        self.model, self.summarize, self.now = model, summarize, 0.0

    def clock(self):
        return self.now

    def support(self, dtype):
        return None

    def mode(self, dtype):
        import contextlib  # lazy: only the fake needs it

        return contextlib.nullcontext()

    def allow_tf32(self):
        return False

    def probe(self, dtype, m):
        return 2.0 * m**3 / (self.model.tflops(m, m, m) * 1e12)

    def check(self, dtype, size):
        return 1e-7

    def time(self, dtype, size, warmup):
        s = size if isinstance(size, Shape) else Shape.square(size)
        call_s = s.flops / (self.model.tflops(s.m, s.n, s.k) * 1e12)
        self.now += 0.05 + 0.1
        return self.summarize([call_s] * 10, calls_per_block=10), 2

    def free(self):
        pass


def measure_shape(kernels, measurer, dtype, shape, settings, peak, min_run_time_s) -> float:
    """TFLOP/s of one shape measured as the search measures it (NaN when not trustworthy)."""
    kernels.measurer = measurer
    measurer.min_run_time_s = min_run_time_s
    row = measure_point(
        kernels,
        dtype=dtype,
        n=shape[1],
        m=shape[0],
        k=shape[2],
        shape_name="",
        settings=replace(settings, min_run_time_s=min_run_time_s, point_budget_s=60.0),
        peak=peak,
    )
    return float(row["tflops"]) if row["status"] in ("ok", "unstable") else math.nan


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--min", type=int, default=64)
    p.add_argument("--max", type=int, default=512)
    p.add_argument("--step", type=int, default=64)
    p.add_argument("--device", default="cpu", help="torch device: cpu, cuda:0, ...")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--budget-s", type=float, default=60.0)
    p.add_argument("--min-run-time", type=float, default=0.05, help="screening time per shape (matmul.search)")
    p.add_argument("--confirm-run-time", type=float, default=0.3, help="confirmation time (matmul.min_run_time_s)")
    p.add_argument("--confirm", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds comparing the two winners")
    p.add_argument("--repeats", type=int, default=1, help="searches to run (their spread is printed)")
    p.add_argument("--no-exhaustive", action="store_true")
    p.add_argument("--fake", action="store_true", help="search a synthetic device with a known optimum")
    p.add_argument(
        "--cache-mb",
        type=float,
        default=None,
        help="last-level cache the rotation must overflow (default: the CPU's, from sysfs); for smoke runs",
    )
    args = p.parse_args()

    axis = {"min": args.min, "max": args.max, "step": args.step}
    cfg = with_defaults(
        {
            MATMUL.config_key: {
                "min_run_time_s": args.confirm_run_time,
                "search": {
                    "enabled": True,
                    "dtypes": [args.dtype],
                    "m": axis,
                    "n": axis,
                    "k": axis,
                    "budget_s": args.budget_s,
                    "min_run_time_s": args.min_run_time,
                    "confirm": args.confirm,
                },
            }
        }
    )
    search_cfg = cfg[MATMUL.config_key]["search"]
    space = shape_search.Space.from_config(search_cfg)
    settings = Settings.from_config(cfg, args.threads)
    if args.fake:
        kernels, measurer, measurers, peak = FakeKernels(shape_search.QuantizedGemmModel()), None, None, (None, "")
        clock = kernels.clock
        print(f"device: QuantizedGemmModel (synthetic, known optimum), {args.dtype}")
    else:
        torch.set_num_threads(args.threads)
        backend = backends.for_device(args.device)
        info = backend.device_info(args.device)
        timer = backend.synced_timer(args.device)
        measurer = Measurer(timer, min_run_time_s=args.min_run_time, threads=args.threads)
        measurers = {
            "screen": measurer,
            "confirm": Measurer(timer, min_run_time_s=args.confirm_run_time, threads=args.threads),
        }
        kernels = TorchMatmul(args.device, backend, measurer=measurer, info=info, seed=0, reuse_operands=True)
        if args.cache_mb:
            kernels._cache_bytes = int(args.cache_mb * 1024**2)
        peak = peak_safe(backend, info, args.dtype, args.threads, {})
        clock = time.monotonic
        print(f"device: {args.device} {info['name']}, {args.threads} threads, {args.dtype}, torch {torch.__version__}")
    print(
        f"grid: m, n, k in {args.min}..{args.max} step {args.step}: {space.size} shapes; "
        f"screening {args.min_run_time:g} s, confirmation {args.confirm_run_time:g} s per shape",
        flush=True,
    )

    found = []
    for r in range(args.repeats):
        t0 = clock()
        rows = search_device_dtype(
            kernels,
            dtype=args.dtype,
            space=space,
            search_cfg=search_cfg,
            settings=settings,
            peak=peak,
            base={"device": args.device},
            checkpoint=_NoCheckpoint(),
            config_hash="bench",
            measurers=measurers,
            clock=clock,
            log=lambda s: None,
        )
        took = clock() - t0
        best = next((row for row in rows if row.get("best")), None)
        shapes = rows[0]["evaluated_shapes"] if rows else 0
        if best is None:
            print(f"search {r + 1}: no trustworthy point ({rows[-1]['stop_reason'] if rows else 'no rows'})")
            continue
        shape = (int(best["m"]), int(best["n"]), int(best["k"]))
        found.append((shape, float(best["tflops"])))
        print(
            f"search {r + 1}: best {shape[0]}x{shape[1]}x{shape[2]} {best['tflops']:.4g} TFLOP/s "
            f"(95% CI {best['tflops_ci95_low']:.4g}-{best['tflops_ci95_high']:.4g}); {shapes} shapes "
            f"= {100 * shapes / space.size:.1f}% of the grid, {len(rows)} measurements; "
            f"{took:.1f} s of {args.budget_s:g} s ({rows[0]['stop_reason']})",
            flush=True,
        )
    if not found:
        raise SystemExit("the search found no trustworthy point")
    if len(found) > 1:
        values = [t for _, t in found]
        print(
            f"searches: best TFLOP/s min {min(values):.4g} / median {statistics.median(values):.4g} / "
            f"max {max(values):.4g} over {len(values)} runs"
        )
    if args.no_exhaustive:
        return

    t0 = clock()
    if args.fake:
        model = kernels.model
        ex = shape_search.exhaustive(space, lambda s, ph: (model.tflops(*s), {}))
        winner, shape = ex.best.score, found[0][0]
        print(
            f"exhaustive: best {ex.best.shape[0]}x{ex.best.shape[1]}x{ex.best.shape[2]} {winner:.4g} TFLOP/s "
            f"({space.size} shapes)"
        )
        print(
            f"ratio best-found/exhaustive-best: {model.tflops(*shape) / winner:.4f} "
            f"(share of evaluations: {100 * rows[0]['evaluated_shapes'] / space.size:.2f}%)"
        )
        return
    kernels.reserve(args.dtype, Shape(*space.largest()))
    with kernels.mode(args.dtype):
        screened = [
            (s, measure_shape(kernels, measurer, args.dtype, s, settings, peak, args.min_run_time))
            for s in (space.shape(i) for i in space.all_indices())
        ]
        top = sorted((x for x in screened if math.isfinite(x[1])), key=lambda x: -x[1])[: args.confirm]
        confirmed = [
            (s, measure_shape(kernels, measurer, args.dtype, s, settings, peak, args.confirm_run_time)) for s, _ in top
        ]
    ex_shape, ex_tflops = max(confirmed, key=lambda x: x[1] if math.isfinite(x[1]) else -1)
    print(
        f"exhaustive: best {ex_shape[0]}x{ex_shape[1]}x{ex_shape[2]} {ex_tflops:.4g} TFLOP/s (confirmed); "
        f"{space.size} shapes in {clock() - t0:.0f} s",
        flush=True,
    )

    search_shape = max(found, key=lambda x: x[1])[0]
    share = 100 * rows[0]["evaluated_shapes"] / space.size
    if search_shape == ex_shape:
        print(f"ratio best-found/exhaustive-best: 1.000 (the same shape; share of evaluations: {share:.1f}%)")
        return
    pair = {"search": search_shape, "exhaustive": ex_shape}
    rounds = {"search": [], "exhaustive": []}
    with kernels.mode(args.dtype):
        for r in range(args.rounds):
            for name in ("search", "exhaustive") if r % 2 == 0 else ("exhaustive", "search"):
                rounds[name].append(
                    measure_shape(kernels, measurer, args.dtype, pair[name], settings, peak, args.confirm_run_time)
                )
    for name in ("search", "exhaustive"):
        v = [x for x in rounds[name] if math.isfinite(x)]
        s = pair[name]
        print(
            f"{name:>10} {s[0]}x{s[1]}x{s[2]}: median {statistics.median(v):.4g} TFLOP/s over {len(v)} rounds "
            f"(min {min(v):.4g}, max {max(v):.4g})"
        )
    ratios = [a / b for a, b in zip(rounds["search"], rounds["exhaustive"]) if math.isfinite(a) and math.isfinite(b)]
    print(
        f"ratio best-found/exhaustive-best: {statistics.median(ratios):.3f} (per round {min(ratios):.3f}-"
        f"{max(ratios):.3f}; share of evaluations: {share:.1f}%)"
    )


if __name__ == "__main__":
    main()
