"""Stage: the highest matmul throughput a device reaches over (m, n, k), found by a search within a budget.

For every device of one backend and every dtype of ``matmul.search.dtypes``, ``measure.shape_search``
searches the grid ``matmul.search.m``/``n``/``k`` (min, max, step each) for at most
``matmul.search.budget_s`` seconds (the method and why: that module's docstring). Every evaluation is
one ``stages.matmul.measure_point``, so it has the sweep's warm device, untimed calls, synchronized
timing with at least 6 blocks and a 95% interval of the median, float64 check, peak check and status.
What differs from the sweep:

- screening evaluations (phases ``coarse`` and ``refine``) are timed for ``matmul.search.min_run_time_s``;
  the finalists are measured again (phase ``confirm``) for ``matmul.min_run_time_s``, as the sweep's
  points are, and the best confirmed median is the result (its row has ``best`` true);
- the rotated operands are views into one pool of random values per dtype (``matmul.OperandPool``),
  drawn once instead of per point, and as cache-cold as the sweep's (together at least twice the
  last-level cache);
- each evaluation may take what is left of the search's budget (its ``point_budget_s``), and the
  search starts an evaluation only when its estimated time (``Estimator``, from the throughput and
  overheads measured so far) and the confirmation still fit.

Rows: every evaluation, in the order measured (``evaluation``), with the search's summary repeated on
each (``grid_points``, ``evaluated_shapes``, ``search_s``, ``budget_s``, ``stop_reason``, ``method``).
Off by default (``matmul.search.enabled``): the file then holds only its header. Finished evaluations
are checkpointed; a rerun replays them without measuring (the search is deterministic given its
measurements) and goes on from there. CUDA/ROCm/MPS/XLA/XPU paths are **untested on hardware**.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import replace

from ... import registry
from ...columns import TRUSTED
from ...measure import shape_search
from ...measure.timing import Measurer
from ...run.io import Checkpoint, atomic_write_csv
from ..common import add_device_stage_arguments, start
from ..matmul.measure import Settings, Shape, TorchMatmul, _Unusable, measure_point, peak_safe, predict_point_s

TABLE = registry.TABLES["matmul_search"]
COLUMNS = TABLE.all_columns
CHECKPOINT_KEY = ("device", "dtype", "phase", "m", "n", "k")
ERRORS_TO_GIVE_UP = 3  # consecutive errors before any usable point: the device cannot run this dtype


def _finite(x) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


class Estimator:
    """How long the next evaluation will take, from what the search has measured so far: the product's
    time from the lower quartile of the throughput seen (errs long), the measurement from
    ``predict_point_s``, plus the median fixed cost per evaluation seen (probe, check, setup)."""

    def __init__(self, min_run_time_s: dict[str, float]):
        self.min_run_time_s = min_run_time_s  # phase -> timed seconds
        self.rates: list[float] = []  # flop/s
        self.overheads: list[float] = []

    def _rt(self, phase: str) -> float:
        return self.min_run_time_s.get(phase, self.min_run_time_s["coarse"])

    def observe(self, phase: str, flops: float, median_s: float, wall_s: float | None) -> None:
        if not (_finite(median_s) and median_s > 0):
            return
        self.rates.append(flops / median_s)
        if wall_s is not None:
            self.overheads.append(max(0.0, wall_s - predict_point_s(median_s, self._rt(phase)) - 2 * median_s))

    def __call__(self, shape, phase: str) -> float:
        if not self.rates:
            return 0.0  # nothing measured yet: the first (smallest) shape is measured to learn
        rate = statistics.quantiles(self.rates, n=4)[0] if len(self.rates) >= 4 else min(self.rates)
        call_s = 2.0 * math.prod(shape) / rate
        overhead = statistics.median(self.overheads) if self.overheads else 0.0
        return predict_point_s(call_s, self._rt(phase)) + 2 * call_s + overhead


def search_device_dtype(
    kernels,
    *,
    dtype: str,
    space: shape_search.Space,
    search_cfg: dict,
    settings: Settings,
    peak: tuple,
    base: dict,
    checkpoint,
    config_hash: str,
    measurers: dict | None = None,
    clock: Callable[[], float] = time.monotonic,
    log: Callable[[str], None] = print,
) -> list[dict]:
    """Search one dtype on one device; every evaluation's row (with ``base``: provenance, device columns).

    ``measurers`` ({"screen": Measurer, "confirm": Measurer}) are swapped into ``kernels`` per phase
    (the real TorchMatmul); fakes that time by themselves need none.
    """
    device = base.get("device", "")
    budget_s = float(search_cfg["budget_s"])
    rt = {
        "coarse": float(search_cfg["min_run_time_s"]),
        "refine": float(search_cfg["min_run_time_s"]),
        "confirm": settings.min_run_time_s,
    }
    estimate = Estimator(rt)
    measured: list[tuple[float, float, float]] = []  # (flops, cube edge, median_s) of every timed point
    errors = {"consecutive": 0}
    started = clock()
    deadline = started + budget_s
    reserve = getattr(kernels, "reserve", None)
    if callable(reserve):
        try:
            if not kernels.support(dtype):  # no pool for a dtype the device cannot multiply
                reserve(dtype, Shape(*space.largest()))
        except Exception:  # the first evaluation meets the same failure and records it as its status
            pass

    def previous_for(flops: float):
        """The measured point nearest in flops: its time scales to this shape's (``predict_call_s``)."""
        if not measured:
            return None
        f, edge, median_s = min(measured, key=lambda p: abs(math.log(p[0] / flops)))
        return edge, median_s

    def evaluate(shape, phase):
        m, n, k = shape
        key = checkpoint.key({"device": device, "dtype": dtype, "phase": phase, "m": m, "n": n, "k": k})
        done = checkpoint.rows.get(key)
        flops = 2.0 * m * n * k
        if done is not None and done.get("config_hash") == config_hash:
            row, wall = done, None
        else:
            if measurers:
                kernels.measurer = measurers["confirm" if phase == "confirm" else "screen"]
            left = max(0.0, deadline - clock())
            t0 = clock()
            row = {
                **base,
                **measure_point(
                    kernels,
                    dtype=dtype,
                    n=n,
                    m=m,
                    k=k,
                    shape_name="",
                    settings=replace(settings, min_run_time_s=rt[phase], point_budget_s=left),
                    peak=peak,
                    previous=previous_for(flops),
                ),
                "phase": phase,
            }
            wall = clock() - t0
            checkpoint.add(row)
        estimate.observe(phase, flops, row.get("median_s"), wall)
        if _finite(row.get("median_s")):
            measured.append((flops, float(math.prod(shape)) ** (1 / 3), float(row["median_s"])))
        log(
            f"matmul-search {device} {dtype} {phase} {m}x{n}x{k}: {row['status']} "
            f"tflops={float(row.get('tflops', math.nan)):.4g}{' (checkpoint)' if wall is None else ''}"
        )
        score = float(row["tflops"]) if row.get("status") in TRUSTED and _finite(row.get("tflops")) else math.nan
        return score, row

    def stop(e: shape_search.Evaluation) -> str | None:
        status = e.row.get("status")
        if status == "unsupported":
            return f"unsupported: {e.row.get('status_detail', '')}"
        errors["consecutive"] = errors["consecutive"] + 1 if status == "error" else 0
        if errors["consecutive"] >= ERRORS_TO_GIVE_UP and not measured:
            return f"error: {e.row.get('status_detail', '')}"
        return None

    # the pool was drawn on the budget's time: the search gets what is left
    result = shape_search.search(
        space,
        evaluate,
        budget_s=max(0.0, deadline - clock()),
        estimate_s=estimate,
        clock=clock,
        coarse_points=int(search_cfg["coarse_points"]),
        starts=int(search_cfg["starts"]),
        confirm=int(search_cfg["confirm"]),
        stop=stop,
    )
    elapsed = clock() - started
    rows = []
    for e in result.evaluations:
        row = dict(e.row)
        median_s, flops = row.get("median_s"), row.get("flops")
        lo_s, hi_s = row.get("ci95_low_s"), row.get("ci95_high_s")
        row.update(
            evaluation=e.order,
            phase=e.phase,
            best=result.best is not None and e is result.best,
            tflops_ci95_low=float(flops) / float(hi_s) / 1e12 if _finite(hi_s) and float(hi_s) > 0 else math.nan,
            tflops_ci95_high=float(flops) / float(lo_s) / 1e12 if _finite(lo_s) and float(lo_s) > 0 else math.nan,
            method=result.method,
            grid_points=result.grid_points,
            evaluated_shapes=result.evaluated_shapes,
            search_s=elapsed,
            budget_s=budget_s,
            stop_reason=result.stop_reason,
            min_run_time_s=rt[e.phase],
        )
        if not _finite(median_s):
            row["tflops"] = math.nan
        rows.append(row)
    if result.best is not None:
        b = result.best
        log(
            f"matmul-search {device} {dtype}: best {b.shape[0]}x{b.shape[1]}x{b.shape[2]} {b.score:.4g} TFLOP/s "
            f"({b.phase}); {result.evaluated_shapes}/{result.grid_points} shapes "
            f"({100 * result.share:.1f}%) in {elapsed:.1f} s of {budget_s:g}; {result.stop_reason}"
        )
    return rows


def add_arguments(p) -> None:
    add_device_stage_arguments(p)


def cli(args) -> int:
    st = start("matmul-search", args.run_file, args.backend, args.threads)
    out = st.out_path(args.out_dir, "matmul_search")
    mm_cfg = st.config["matmul"]
    search_cfg = mm_cfg["search"]
    if not st.devices:
        atomic_write_csv(out, [{**st.absent_row(), "flags": "absent"}], columns=COLUMNS)
        print(f"matmul-search: {st.absent_reason}")
        return 0
    if not search_cfg["enabled"]:
        atomic_write_csv(out, [], columns=COLUMNS)
        print("matmul-search: off (matmul.search.enabled is false): header only")
        return 0
    settings = Settings.from_config(st.config, st.threads)
    space = shape_search.Space.from_config(search_cfg)
    checkpoint = Checkpoint(st.checkpoint_path(args.out_dir, args.checkpoint), CHECKPOINT_KEY)
    rows = []
    for device in st.devices:
        base = st.device_row(device)
        measurers = {
            phase: Measurer(st.backend.synced_timer(device), min_run_time_s=rt, threads=st.threads)
            for phase, rt in (("screen", search_cfg["min_run_time_s"]), ("confirm", settings.min_run_time_s))
        }
        try:
            kernels = TorchMatmul(
                device,
                st.backend,
                measurer=measurers["screen"],
                info=st.info(device),
                seed=settings.seed,
                rotate=settings.rotate_inputs,
                reuse_operands=True,
            )
        except Exception as exc:  # every evaluation records it; the search gives up after a few
            kernels, measurers = _Unusable(exc), None
        for dtype in search_cfg["dtypes"]:
            peak = peak_safe(st.backend, st.info(device), dtype, st.threads, mm_cfg.get("peak_tflops") or {})
            rows += search_device_dtype(
                kernels,
                dtype=dtype,
                space=space,
                search_cfg=search_cfg,
                settings=settings,
                peak=peak,
                base=base,
                checkpoint=checkpoint,
                config_hash=st.run_info["config_hash"],
                measurers=measurers,
            )
            free = getattr(kernels, "free", None)
            if callable(free):
                free()
    atomic_write_csv(out, rows, columns=COLUMNS)
    return 0
