"""Stage: matrix-multiplication throughput sweep (every device of one backend x dtypes x sizes and shapes).

One row per (device, dtype, n): the time of an n x n by n x n product (2 n^3 flops), its TFLOP/s
from the median, how that compares with the device's theoretical peak, and whether the result
was right. ``matmul.shapes`` adds one row per named (m, n, k): an (m x k) by (k x n) product
(2mnk flops), measured in exactly the same way (square points have m = n = k and an empty
``shape_name``). What makes a number here trustworthy:

- **Warm device**: before its first point each device is warmed in this process to the warm-up stage's
  stability rule (``measure.stability.warm_device``), recorded in ``device_warmup_*``; each point then
  gets at least 2 untimed calls and ``WARMUP_S`` of them (its kernel selection, its clocks).
- **Synchronized timing**: ``torch.utils.benchmark.Timer`` with ``Backend.synced_timer(device)``,
  at least 6 blocks, median with a within-run 95% interval (batch means from 50 blocks, else descriptive:
  ``measure.blocks``; ``ci_method`` says which).
- **Not from cache**: the timed statement cycles through several input pairs (A: m x k, B: k x n) that
  together span at least twice the last-level cache (CPU L3, GPU L2, MI300 Infinity Cache), bounded by
  40% of free memory, so small sizes are not measured with operands already on chip.
- **Output reused** (``out=``): no allocation or page faults inside the timed loop.
- **Strict float32**: float32 is measured with TF32 off and matmul precision "highest" (on XLA torch_xla's
  own switch, ``Backend.strict_float32``, set for the whole process before its first graph); on CUDA
  TF32 is its own dtype ``tf32`` (``torch.backends.cuda.matmul.allow_tf32`` set, then restored).
- **fp8** (configured as ``float8_e4m3fn``) through ``torch._scaled_mm`` (bf16 output, unit scales) where
  the hardware has it (``Backend.fp8_support``: CUDA compute capability >= 8.9, ROCm gfx94x/gfx95x/gfx12,
  torch >= 2.6); elsewhere ``unsupported`` with the reason. The inputs are in the e4m3 encoding the device
  multiplies (``Backend.fp8_dtype``: ``float8_e4m3fnuz`` on MI300X/MI325X, gfx942), recorded per row as
  ``torch_dtype``; the configured name stays in ``dtype`` so rows of every device line up. ``_scaled_mm``
  runs without ``use_fast_accum`` (full-precision accumulation: what the check's tolerance is for), said in
  the row's ``fp8_fast_accum`` (False; None on other dtypes); fast accumulation (Hopper's faster, less
  precise fp8 accumulation, the mode datasheet-like fp8 figures use) is ``TorchMatmul(fp8_fast_accum=True)``,
  which bench/gpu_headline.py measures beside it.
- **Checked**: on fresh normal inputs (never zeros) the product is compared with a float64
  reference of the same (quantized) inputs on up to 128 sampled rows: relative Frobenius error
  against ``matmul.rel_error_max[dtype]`` -> ``wrong_result``. Quantizing the inputs first isolates
  the kernel's accumulation from the rounding of the inputs.
- **Plausible**: above 100% of the theoretical peak -> ``invalid`` (a missing synchronization,
  a kernel that skipped work, or a wrong peak).
- **Bounded**: each point's time is predicted before it runs (from the previous point of the same
  dtype scaled by its flops, or from a probe grown from n=128 until a call takes 10 ms) and a point
  predicted over ``matmul.point_budget_s`` is recorded as ``skipped_budget`` without running.
- **Robust**: OOM (memory freed, sweep goes on), an unsupported dtype, or any exception is that
  point's status; every finished point is checkpointed, and a rerun measures only what is missing.
- **What the device was doing**: each point runs inside a window of its device's telemetry sampler
  (``measure.telemetry``, wrapped around the ``point(...)`` call in ``sweep``): clock, power,
  temperature, energy and GFLOP per joule, throttling, and ``clock_ramp`` when the clock had not
  settled over the point (``point_telemetry``). With ``matmul.soak_s`` > 0 the largest point is then
  held for that long (``matmul_soak``) to tell a boost reading from a sustained one.

What differs between devices (dtype support, TF32, caches, free memory, where float64 runs, XLA's
graph cuts) is asked of the backend object (``accelbench.backends``). CUDA, ROCm, MPS, XLA and XPU
paths are **untested on hardware**: their logic is unit-tested with fakes; the CPU path runs end to end.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from ... import registry
from ...backends import Backend
from ...measure import samples as sample_table
from ...measure import telemetry as tm
from ...measure.failures import failure_status, one_line
from ...measure.timing import MIN_BLOCKS, Measurer, TimingStats, is_unstable
from ...run.config import shape_label
from ...run.io import Checkpoint, atomic_write_csv
from ..common import add_device_stage_arguments, start
from .soak import run_soak, soak_rows_for

# First match wins: a point that did not run has exactly one of the first five.
STATUS_PRECEDENCE = ("error", "oom", "unsupported", "absent", "skipped_budget", "invalid", "wrong_result", "unstable")
TABLE = registry.TABLES["matmul"]
COLUMNS = TABLE.all_columns
SOAK_COLUMNS = registry.TABLES["matmul_soak"].all_columns
SERIES_COLUMNS = registry.TABLES["telemetry_matmul"].all_columns
# what identifies a point in the checkpoint (a named shape and a square size never collide)
CHECKPOINT_KEY = ("device", "dtype", "shape_name", "m", "n", "k")

WARMUP_S = 0.05  # untimed calls before each point (at least 2)
PROBE_MIN_S = 0.01  # a probe call shorter than this is overhead-bound: probe a larger size
PROBE_START_N = 128
PROBE_CALLS = 3  # a probe is the fastest of this many single calls
CHECK_ROWS = 128  # rows of the product compared with the float64 reference
ROTATION_CACHE_FACTOR = 2  # input sets span at least this many last-level caches ...
ROTATION_MEMORY_FRACTION = 0.4  # ... within this share of free memory
MAX_WARMUP_CALLS = 100_000


# ---- pure logic ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """One product: A (m x k) times B (k x n), 2mnk flops. ``name`` says what it is (``qkv``, ``mlp_up``);
    empty for a point of the square sweep."""

    m: int
    n: int
    k: int
    name: str = ""

    @classmethod
    def square(cls, n: int) -> Shape:
        return cls(int(n), int(n), int(n))

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    @property
    def is_square(self) -> bool:
        return self.m == self.n == self.k

    @property
    def cube_edge(self) -> float:
        """The n of the square product with the same flops: what the time predictor scales by."""
        return float(self.m * self.n * self.k) ** (1.0 / 3.0)

    def elements(self) -> int:
        """Elements of one input pair (A and B)."""
        return self.m * self.k + self.k * self.n

    def __str__(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"


def as_shape(size) -> Shape:
    """``size`` as a Shape: an int n is the square n x n x n."""
    return size if isinstance(size, Shape) else Shape.square(size)


def plan_points(sizes, shapes=()) -> list[Shape]:
    """The points of one dtype, in the order they are measured: the square sizes ascending (each
    prediction builds on the last), then the configured shapes by ascending flops."""
    return [Shape.square(n) for n in sorted(sizes)] + sorted(shapes, key=lambda s: (s.flops, s.name))


def plan_dtypes(backend: Backend, mm_cfg: dict) -> list[str]:
    """The dtypes swept on ``backend``: the configured ones, plus ``tf32`` next to float32 where the backend
    has TF32 and ``matmul.tf32`` is on, plus ``float8_e4m3fn`` when ``matmul.fp8`` (recorded as unsupported
    where it is)."""
    dtypes = list(mm_cfg["dtypes"])
    if mm_cfg.get("tf32") and backend.tf32_available() is None and "float32" in dtypes and "tf32" not in dtypes:
        dtypes.insert(dtypes.index("float32") + 1, "tf32")
    if mm_cfg.get("fp8") and "float8_e4m3fn" not in dtypes:
        dtypes.append("float8_e4m3fn")
    return dtypes


def predict_call_s(
    n: float,
    previous: tuple[float, float] | None,
    probe: Callable[[int], float],
    probe_min_s: float = PROBE_MIN_S,
    start_n: int = PROBE_START_N,
) -> tuple[float, str]:
    """Predicted seconds for one n x n product, and where the prediction came from. For an (m, n, k)
    shape ``n`` is its ``Shape.cube_edge`` (the square with the same flops).

    From the previous point of the same dtype, scaled by (n/n_prev)^3, when that call took at least
    ``probe_min_s`` (shorter calls are launch-overhead bound and would over-predict large sizes);
    otherwise from ``probe(m)`` at m = 128 (or twice the previous size), doubling up to n, stopping at
    the first m whose call takes ``probe_min_s``. Small sizes run below peak efficiency, so the
    scaling errs high (safe).
    """
    if previous is not None:
        prev_n, prev_s = previous
        if prev_s >= probe_min_s:
            return prev_s * (n / prev_n) ** 3, f"n={prev_n:.0f} measured"
    edge = math.ceil(n)  # probes are square and whole
    m = min(edge, max(start_n, 2 * int(previous[0]) if previous else 0))
    while True:
        t = probe(m)
        if t >= probe_min_s or m >= edge:
            return t * (n / m) ** 3, f"probe n={m}"
        m = min(edge, 2 * m)


def warmup_calls(call_s: float, warmup_s: float = WARMUP_S) -> int:
    """Untimed calls before timing: at least 2, and at least ``warmup_s`` worth."""
    if not call_s > 0:
        return 2
    return int(min(MAX_WARMUP_CALLS, max(2, math.ceil(warmup_s / call_s))))


def predict_point_s(
    call_s: float, min_run_time_s: float, warmup_s: float = WARMUP_S, min_blocks: int = MIN_BLOCKS
) -> float:
    """Seconds one point takes: warm-up, the Timer's block-size estimate (about one call for long
    calls), the timed blocks (``min_run_time_s``, at least ``min_blocks`` calls), and the check (one call)."""
    warm = warmup_calls(call_s, warmup_s) * call_s
    return warm + call_s + max(min_run_time_s, min_blocks * call_s) + call_s


def rotation_sets(
    pair_bytes: int,
    cache_bytes: int,
    free_bytes: int,
    rotate: bool = True,
    cache_factor: float = ROTATION_CACHE_FACTOR,
    memory_fraction: float = ROTATION_MEMORY_FRACTION,
) -> int:
    """How many distinct (A, B) pairs the timed statement cycles through: enough to span
    ``cache_factor`` last-level caches (at least 2, so consecutive calls never share operands),
    at most ``memory_fraction`` of free memory, at least 1."""
    if not rotate:
        return 1
    want = max(2, math.ceil(cache_factor * cache_bytes / pair_bytes))
    cap = int(memory_fraction * free_bytes // pair_bytes)
    return max(1, min(want, cap))


def point_flags(
    *,
    tflops: float,
    peak_tflops: float | None,
    rel_error: float,
    rel_error_max: float,
    stats: TimingStats,
    unstable_iqr_ratio: float,
    peak_is_bound: bool = True,
) -> tuple[list[str], list[str]]:
    """Conditions of a measured point (``invalid``, ``wrong_result``, ``unstable``) and why, one phrase each.

    Above the peak is ``invalid`` when the peak is a true upper bound. A CPU peak computed from the
    current clock (no maximum boost clock known, as in many VMs) is not: a turbo clock may exceed
    it, so such a point only gets the flag ``above_nominal_peak`` and keeps its status.
    """
    flags, why = [], []
    if peak_tflops and tflops > peak_tflops:
        pct = f"{100 * tflops / peak_tflops:.0f}% of the theoretical peak {peak_tflops:g} TFLOP/s"
        if peak_is_bound:
            flags.append("invalid")
            why.append(pct)
        else:
            flags.append("above_nominal_peak")
            why.append(f"{pct} (a nominal peak: the clock it uses is not a known maximum)")
    if not (rel_error <= rel_error_max):  # NaN counts as wrong
        flags.append("wrong_result")
        why.append(f"rel_error {rel_error:.3g} > {rel_error_max:g}")
    if is_unstable(stats.iqr_s, stats.median_s, unstable_iqr_ratio):
        flags.append("unstable")
        why.append(f"IQR/median {stats.iqr_ratio:.3f} > {unstable_iqr_ratio:g}")
    return flags, why


def classify(flags: list[str]) -> str:
    """The status of a point from every condition that applied: the first in STATUS_PRECEDENCE, else ok."""
    for status in STATUS_PRECEDENCE:
        if status in flags:
            return status
    return "ok"


# ---- one point ----------------------------------------------------------------------------------


@dataclass
class Settings:
    """The matmul config section, as the sweep uses it."""

    min_run_time_s: float
    point_budget_s: float
    unstable_iqr_ratio: float
    rotate_inputs: bool
    rel_error_max: dict = field(default_factory=dict)
    seed: int = 0
    threads: int = 1

    @classmethod
    def from_config(cls, config: dict, threads: int) -> Settings:
        mm = config["matmul"]
        return cls(
            min_run_time_s=mm["min_run_time_s"],
            point_budget_s=mm["point_budget_s"],
            unstable_iqr_ratio=mm["unstable_iqr_ratio"],
            rotate_inputs=mm["rotate_inputs"],
            rel_error_max=dict(mm["rel_error_max"]),
            seed=config.get("seed", 0),
            threads=threads,
        )


def _nan() -> float:
    return float("nan")


def _torch_dtype(kernels, dtype: str) -> str:
    """The torch dtype ``kernels`` multiplies for the configured ``dtype`` ("" where it cannot say)."""
    name = getattr(kernels, "torch_dtype", None)
    try:
        return str(name(dtype)) if name is not None else ""
    except Exception:  # a device whose kernels could not be set up: the row says why elsewhere
        return ""


def measure_point(
    kernels,
    *,
    dtype: str,
    n: int,
    settings: Settings,
    peak: tuple,
    previous: tuple[float, float] | None = None,
    m: int | None = None,
    k: int | None = None,
    shape_name: str = "",
) -> dict:
    """Measure one (dtype, n) - or (dtype, m, n, k) - on the device ``kernels`` drives; return its row
    (without provenance).

    ``peak`` is (peak TFLOP/s or None, its source[, whether it is a true upper bound (default True)]).

    ``kernels`` supplies the device-specific pieces (``TorchMatmul`` for real; tests plant fakes):
    ``support(dtype)``, ``mode(dtype)`` (context), ``allow_tf32()``, ``probe(dtype, m)``,
    ``check(dtype, size)`` -> rel_error, ``time(dtype, size, warmup_calls)`` -> (TimingStats, input_sets),
    ``free()``, and optionally ``torch_dtype(dtype)`` -> the torch dtype the device multiplies (the row's
    ``torch_dtype``; empty where the kernels cannot say); ``size`` is the int n of a square product, else a
    ``Shape``.
    """
    peak_tflops, peak_source, *rest = peak
    peak_is_bound = bool(rest[0]) if rest else True
    shape = Shape(int(m or n), int(n), int(k or n), shape_name)
    size = shape.n if shape.is_square else shape
    row = {
        "dtype": dtype,
        "shape_name": shape_name,
        "m": shape.m,
        "n": shape.n,
        "k": shape.k,
        "flops": shape.flops,
        "threads": settings.threads,
        "allow_tf32": False,
        "median_s": _nan(),
        "iqr_s": _nan(),
        "ci95_low_s": _nan(),
        "ci95_high_s": _nan(),
        "ci_method": "",
        "lag1_autocorr": _nan(),
        "repeats": 0,
        "blocks": 0,
        "input_sets": 0,
        "predicted_s": _nan(),
        "tflops": _nan(),
        "peak_tflops": peak_tflops if peak_tflops else _nan(),
        "peak_source": peak_source,
        "pct_of_peak": _nan(),
        "rel_error": _nan(),
        "rel_error_max": settings.rel_error_max.get(dtype, _nan()),
        "status": "ok",
        "flags": "",
        "status_detail": "",
        "torch_dtype": _torch_dtype(kernels, dtype),
        "fp8_fast_accum": bool(getattr(kernels, "fp8_fast_accum", False)) if dtype == "float8_e4m3fn" else None,
    }

    def done(status: str, detail: str) -> dict:
        row.update(status=status, flags=status, status_detail=detail)
        return row

    failure = None
    try:
        reason = kernels.support(dtype)
        if reason:
            return done("unsupported", reason)
        with kernels.mode(dtype):
            row["allow_tf32"] = bool(kernels.allow_tf32())
            call_s, basis = predict_call_s(
                shape.cube_edge if not shape.is_square else shape.n, previous, lambda edge: kernels.probe(dtype, edge)
            )
            predicted = predict_point_s(call_s, settings.min_run_time_s)
            row["predicted_s"] = predicted
            if predicted > settings.point_budget_s:
                return done(
                    "skipped_budget",
                    f"predicted {predicted:.3g} s ({call_s:.3g} s per call from {basis}) "
                    f"> matmul.point_budget_s {settings.point_budget_s:g}",
                )
            rel_error = float(kernels.check(dtype, size))
            stats, sets = kernels.time(dtype, size, warmup_calls(call_s))
    except Exception as exc:  # recorded as this point's status; the sweep goes on
        failure = (failure_status(exc, getattr(kernels, "backend", None)), one_line(exc))
    if failure is not None:
        kernels.free()  # after the except block: the traceback no longer pins the tensors
        return done(*failure)

    tflops = row["flops"] / stats.median_s / 1e12
    row.update(
        median_s=stats.median_s,
        iqr_s=stats.iqr_s,
        ci95_low_s=stats.ci95_low_s,
        ci95_high_s=stats.ci95_high_s,
        ci_method=stats.ci_method,
        lag1_autocorr=stats.lag1_autocorr,
        repeats=stats.repeats,
        blocks=stats.blocks,
        input_sets=sets,
        tflops=tflops,
        rel_error=rel_error,
        pct_of_peak=100 * tflops / peak_tflops if peak_tflops else _nan(),
    )
    flags, why = point_flags(
        tflops=tflops,
        peak_tflops=peak_tflops,
        rel_error=rel_error,
        rel_error_max=row["rel_error_max"],
        stats=stats,
        unstable_iqr_ratio=settings.unstable_iqr_ratio,
        peak_is_bound=peak_is_bound,
    )
    row.update(status=classify(flags), flags=";".join(flags), status_detail="; ".join(why))
    row[sample_table.SAMPLES_KEY] = list(stats.samples_s)  # the samples file's, not a CSV column
    return row


# ---- the sweep ----------------------------------------------------------------------------------


def _finite(x) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def point_telemetry(window: dict, row: dict) -> dict:
    """A point's telemetry columns from its window's (``measure.telemetry.summarize``): those, its GFLOP per
    joule (TFLOP/s x 1000 / the window's mean power), and ``clock_ramp`` (True when the clock had not settled
    over the point; None for a point without a timing, or with too few clock readings to tell). A ramping
    clock adds the flag ``clock_ramp`` and a phrase to ``status_detail``; the status stays."""
    out = {k: v for k, v in window.items() if k not in ("clock_settled", "clock_halves_mhz")}
    measured = _finite(row.get("median_s")) and _finite(row.get("tflops"))
    start, end = window.get("telemetry_start_unix_s"), window.get("telemetry_end_unix_s")
    duration = end - start if _finite(start) and _finite(end) else None
    out["gflop_per_j"] = (
        tm.per_joule(float(row["tflops"]) * 1e3, window.get("energy_j"), duration) if measured else None
    )
    settled = window.get("clock_settled")
    out["clock_ramp"] = None if not measured or settled is None else not settled
    if out["clock_ramp"]:
        halves = window.get("clock_halves_mhz") or ("?", "?")
        out["flags"] = ";".join(f for f in (row.get("flags") or "", "clock_ramp") if f)
        phrase = (
            f"clock not settled: {halves[0]:.4g} -> {halves[1]:.4g} MHz over the point"
            if all(isinstance(h, float) for h in halves)
            else "clock not settled over the point"
        )
        out["status_detail"] = "; ".join(d for d in (row.get("status_detail") or "", phrase) if d)
    return out


def _edge(row: dict) -> float:
    """The cube edge of a row's product (its n for square rows and rows from before shapes)."""
    n = float(row["n"])
    m = float(row.get("m") or n) if _finite(row.get("m")) else n
    k = float(row.get("k") or n) if _finite(row.get("k")) else n
    return (m * n * k) ** (1.0 / 3.0)


def sweep(
    devices: list[str],
    dtypes: list[str],
    sizes: list[int],
    settings: Settings,
    *,
    kernels_for: Callable[[str], object],
    device_row: Callable[[str], dict],
    peak_for: Callable[[str, str], tuple],
    checkpoint,
    config_hash: str,
    point: Callable[..., dict] = measure_point,
    log: Callable[[str], None] = print,
    shapes: tuple[Shape, ...] | list[Shape] = (),
    telemetry_for: Callable[[str], tm.DeviceTelemetry] | None = None,
) -> list[dict]:
    """Every device x dtype x point: the square sizes ascending per dtype (each prediction builds on the
    last), then the named ``shapes`` (``plan_points``).

    A point already in ``checkpoint`` under the same ``config_hash`` is taken from it, not measured
    (its key: ``CHECKPOINT_KEY``). Every new point is added to the checkpoint as soon as it is done. Each
    point is measured inside a window of its device's telemetry (``telemetry_for(device)``; none: telemetry
    off), whose columns (``point_telemetry``) go on its row.
    """
    off = tm.DeviceTelemetry(None, 0)
    rows = []
    for device in devices:
        base = None  # the device's columns; it is warmed just before its first point that is measured
        kernels = None
        for dtype in dtypes:
            previous = None
            peak = None
            for shape in plan_points(sizes, shapes):
                n = shape.n
                what = f"{shape.name} ({shape})" if shape.name else f"n={n}"
                key = checkpoint.key(
                    {
                        "device": device,
                        "dtype": dtype,
                        "shape_name": shape.name,
                        "m": shape.m,
                        "n": shape.n,
                        "k": shape.k,
                    }
                )
                done = checkpoint.rows.get(key)
                if done is not None and done.get("config_hash") == config_hash:
                    row = done
                    log(f"matmul {device} {dtype} {what}: from checkpoint ({row['status']})")
                else:
                    if base is None:
                        base = device_row(device)
                    if kernels is None:
                        try:
                            kernels = kernels_for(device)
                        except Exception as exc:  # every point of this device records it
                            kernels = _Unusable(exc)
                    if peak is None:
                        peak = peak_for(device, dtype)
                    started = time.perf_counter()
                    named = {"m": shape.m, "k": shape.k, "shape_name": shape.name} if shape.name else {}
                    with (telemetry_for(device) if telemetry_for else off).window() as window:
                        measured = point(
                            kernels, dtype=dtype, n=n, settings=settings, peak=peak, previous=previous, **named
                        )
                    row = {**base, **measured}
                    row.update(point_telemetry(window.columns(), row))
                    checkpoint.add(row)
                    log(
                        f"matmul {device} {dtype} {what}: {row['status']} tflops={row['tflops']:.4g} "
                        f"(took {time.perf_counter() - started:.3g} s, predicted {row['predicted_s']:.3g} s) "
                        f"{row['status_detail']}".rstrip()
                    )
                rows.append(row)
                if _finite(row.get("median_s")):
                    previous = (_edge(row), float(row["median_s"]))
    return rows


class _Unusable:
    """Stands in for a device whose kernels could not be set up: every point records the reason."""

    def __init__(self, exc: BaseException):
        self.exc = exc

    def support(self, dtype):
        raise self.exc

    def free(self):
        pass


# ---- the device side: torch -----------------------------------------------------------------------

# configured dtype -> torch dtype; the fp8 entry is a default: the backend names the encoding its device multiplies
_TORCH_DTYPES = {
    "float32": "float32",
    "tf32": "float32",
    "bfloat16": "bfloat16",
    "float16": "float16",
    "float8_e4m3fn": "float8_e4m3fn",
}
_ELEMENT_BYTES = {"float32": 4, "tf32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1}  # e4m3fnuz: 1 too


class TorchMatmul:
    """The real device side of one point: inputs, the timed statement, the float64 check.

    Device specifics come from ``backend`` (an ``accelbench.backends.Backend``) and ``info`` (its
    ``device_info``). Paths other than the CPU's are untested on hardware.
    """

    def __init__(
        self,
        device: str,
        backend: Backend,
        *,
        measurer: Measurer,
        info: dict | None = None,
        seed: int = 0,
        rotate: bool = True,
        reuse_operands: bool = False,
        fp8_fast_accum: bool = False,
    ):
        self.backend = backend
        self.fp8_fast_accum = bool(fp8_fast_accum)  # _scaled_mm's use_fast_accum (fp8 only)
        self.torch = backend.torch
        self.device = device
        self.info = info if info is not None else backend.device_info(device)
        self.measurer = measurer
        self.seed = seed
        self.rotate = rotate
        self.cut = backend.graph_cut()
        self._cache_bytes = None
        self._tf32 = False
        # the search measures hundreds of shapes: their rotated operands are views into one pool of
        # random values per dtype (OperandPool), drawn once, instead of fresh pairs per point
        self.reuse_operands = reuse_operands
        self._pool: OperandPool | None = None

    # -- device facts
    def cache_bytes(self) -> int:
        """Last-level cache the rotation must overflow."""
        if self._cache_bytes is None:
            self._cache_bytes = self.backend.cache_bytes(self.device, self.info)
        return self._cache_bytes

    def free_bytes(self) -> int:
        return self.backend.free_bytes(self.device)

    def free(self) -> None:
        """Give memory back after a failed point (OOM) or a finished search: drop the operand pool, collect,
        then empty the device allocator's cache."""
        self._pool = None
        gc.collect()
        with contextlib.suppress(Exception):
            self.backend.empty_cache(self.device)

    # -- modes
    def support(self, dtype: str) -> str | None:
        return self.backend.dtype_support(dtype, self.info)

    def torch_dtype(self, dtype: str) -> str:
        """The torch dtype this device multiplies for the configured ``dtype``: fp8 is the backend's
        (``float8_e4m3fnuz`` on gfx942), the others are themselves (tf32 is float32 with TF32 allowed)."""
        if dtype == "float8_e4m3fn":
            return self.backend.fp8_dtype(self.info)
        return _TORCH_DTYPES[dtype]

    @contextlib.contextmanager
    def mode(self, dtype: str):
        """float32 math for ``dtype`` (``Backend.float32_math``): TF32 allowed for ``tf32`` where the backend
        has it, strict otherwise; restored afterwards. Yields whether TF32 is in effect."""
        with self.backend.float32_math(dtype == "tf32") as tf32, self.backend.device_scope(self.device):
            self._tf32 = tf32
            try:
                yield tf32
            finally:
                self._tf32 = False

    def allow_tf32(self) -> bool:
        """Whether the product inside the current ``mode`` runs with TF32 allowed."""
        return self._tf32

    # -- tensors
    def _seed(self, *parts) -> int:
        return (self.seed * 1_000_003 + zlib.crc32(repr(parts).encode())) % (2**63)

    @staticmethod
    def _key(size):
        """What seeds a point's inputs: n for a square product (as before shapes existed), else (m, n, k)."""
        return size if not isinstance(size, Shape) else (size.m, size.n, size.k)

    def _pair(self, dtype: str, size):
        """One (A, B) pair of standard-normal values in ``dtype`` (B column-major for fp8's _scaled_mm)."""
        return self._pairs(dtype, size, 1)[0]

    def _pairs(self, dtype: str, size, count: int) -> list:
        """``count`` distinct pairs (A: m x k, B: k x n; ``size`` an int n or a Shape), drawn in batches of up
        to 64 MiB of float32 per operand (thousands of tiny pairs in a few calls), each pair a view into its
        batch."""
        t = self.torch
        s = as_shape(size)
        per_batch = max(1, (64 * 1024**2) // (max(s.m * s.k, s.k * s.n) * 4))
        pairs = []
        while len(pairs) < count:
            c = min(per_batch, count - len(pairs))
            a = t.randn(c, s.m, s.k, device=self.device, dtype=t.float32)
            b = t.randn(c, s.k, s.n, device=self.device, dtype=t.float32)
            a, b = self._quantize(dtype, a, b)
            pairs += [(a[i], b[i]) for i in range(c)]
        return pairs

    def _rotation(self, dtype: str, size, sets: int) -> list:
        """The pairs the timed statement cycles through: fresh ones, or views into the operand pool."""
        if not self.reuse_operands:
            return self._pairs(dtype, size, sets)
        if self._pool is None or self._pool.dtype != dtype:
            self._pool = None  # the previous dtype's pool goes before the next is drawn
            self._pool = OperandPool(self, dtype)
        return self._pool.pairs(as_shape(size), sets)

    def reserve(self, dtype: str, largest: Shape) -> None:
        """Draw the operand pool for ``dtype`` now, large enough for the rotation of ``largest`` (and of
        every smaller shape), so that no measurement waits for a bigger pool to be drawn."""
        if not self.reuse_operands:
            return
        want = OperandPool.pair_elements(largest) * self.rotation_sets(dtype, largest.elements())
        if self._pool is not None and self._pool.dtype == dtype and self._pool.elements >= want:
            return  # the pool already drawn holds it
        self._pool = None
        self._pool = OperandPool(self, dtype, want)

    def _quantize(self, dtype: str, a, b):
        t = self.torch
        target = getattr(t, self.torch_dtype(dtype))
        a, b = a.to(target), b.to(target)
        if dtype == "float8_e4m3fn":
            b = b.transpose(-2, -1).contiguous().transpose(-2, -1)  # column-major, as _scaled_mm wants
        return a, b

    def _op(self, dtype: str, size) -> tuple[str, dict]:
        """The product as a call template over globals: ``op(A_, B_, ...)`` (A_/B_ filled in by the caller)."""
        t = self.torch
        if dtype == "float8_e4m3fn":
            one = t.ones((), device=self.device, dtype=t.float32)
            return (
                "D = op(A_, B_, sa, sb, out_dtype=od, use_fast_accum=fa)",
                dict(op=t._scaled_mm, sa=one, sb=one, od=t.bfloat16, fa=self.fp8_fast_accum),
            )
        s = as_shape(size)
        out = t.empty(s.m, s.n, device=self.device, dtype=getattr(t, self.torch_dtype(dtype)))
        return "op(A_, B_, out=C)", dict(op=t.mm, C=out)

    def _statement(self, dtype: str, size, rotating: bool) -> tuple[str, dict]:
        """The timed statement: one product on the next input pair (or the only one)."""
        template, g = self._op(dtype, size)  # the result stays bound (C or D) until the cut/sync
        a_, b_ = ("next(A)", "next(B)") if rotating else ("a", "b")
        stmt = template.replace("A_", a_).replace("B_", b_)
        if self.cut is not None:  # XLA: cut the lazy graph after every product, or it runs only the last
            g["cut"] = self.cut
            stmt += "; cut()"
        return stmt, g

    def product(self, dtype: str, a, b):
        """One product, untimed, through the same call as the timed statement."""
        template, g = self._op(dtype, Shape(a.shape[0], b.shape[1], a.shape[1]))
        fn = g.pop("op")
        if dtype == "float8_e4m3fn":
            return fn(a, b, g["sa"], g["sb"], out_dtype=g["od"], use_fast_accum=g["fa"])
        return fn(a, b, out=g["C"])

    def probe(self, dtype: str, n: int, calls: int = PROBE_CALLS) -> float:
        """Seconds for one synchronized n x n product: the fastest of ``calls`` single calls after an
        untimed one (the fastest, so that one call preempted on a busy machine does not inflate the
        prediction by the cube of the size ratio)."""
        self.torch.manual_seed(self._seed("probe", dtype, n))
        a, b = self._pair(dtype, n)
        stmt, g = self._statement(dtype, n, rotating=False)
        g.update(a=a, b=b)
        self.measurer.warm_up(stmt, g, calls=1)
        return min(self.measurer.warm_up(stmt, g, calls=1) for _ in range(calls))

    def check(self, dtype: str, size) -> float:
        """Relative Frobenius error of the product on fresh normal inputs against float64, on up to
        CHECK_ROWS rows spread over the whole output (the full m x n product is computed)."""
        t = self.torch
        m = as_shape(size).m
        t.manual_seed(self._seed("check", dtype, self._key(size)))
        a, b = self._pair(dtype, size)
        c = self.product(dtype, a, b)
        rows = t.linspace(0, m - 1, min(m, CHECK_ROWS)).round().long().unique()
        ref_device = self.backend.reference_device(self.device)  # MPS/XLA: the CPU (no fast float64)
        a64 = a.index_select(0, rows.to(a.device)).to(ref_device).to(t.float64)
        b64 = b.to(ref_device).to(t.float64)
        ref = a64 @ b64
        got = c.index_select(0, rows.to(c.device)).to(ref_device).to(t.float64)
        err = (t.linalg.norm(got - ref) / t.linalg.norm(ref)).item()
        return err if math.isfinite(err) else math.inf

    def soak_step(self, dtype: str, n: int) -> Callable[[], None]:
        """For the sustained mode (``matmul_soak``): one product on the next input pair (the same rotation
        as ``time``), then the device synchronized, per call; the output buffer reused."""
        pair_bytes = 2 * n * n * _ELEMENT_BYTES[dtype]
        sets = rotation_sets(pair_bytes, self.cache_bytes(), self.free_bytes(), self.rotate)
        self.torch.manual_seed(self._seed("soak", dtype, n))
        pairs = itertools.cycle(self._pairs(dtype, n, sets))
        _, g = self._op(dtype, n)
        op, sync, cut = g.pop("op"), self.backend.synchronizer(self.device), self.cut
        fp8 = dtype == "float8_e4m3fn"

        def step() -> None:
            a, b = next(pairs)
            out = op(a, b, g["sa"], g["sb"], out_dtype=g["od"]) if fp8 else op(a, b, out=g["C"])
            if cut is not None:
                cut()
            sync()
            del out

        return step

    def rotation_sets(self, dtype: str, elements: int) -> int:
        """Input pairs of ``elements`` elements (A and B) a timed loop cycles through here."""
        return rotation_sets(elements * _ELEMENT_BYTES[dtype], self.cache_bytes(), self.free_bytes(), self.rotate)

    def time(self, dtype: str, size, warmup: int) -> tuple[TimingStats, int]:
        """Time the product, cycling through input pairs (A and B: m x k and k x n) that do not fit in the
        last-level cache."""
        sets = self.rotation_sets(dtype, as_shape(size).elements())
        self.torch.manual_seed(self._seed("time", dtype, self._key(size)))
        pairs = self._rotation(dtype, size, sets)
        sets = len(pairs)
        stmt, g = self._statement(dtype, size, rotating=sets > 1)
        if sets > 1:
            g.update(A=itertools.cycle([p[0] for p in pairs]), B=itertools.cycle([p[1] for p in pairs]))
        else:
            g.update(a=pairs[0][0], b=pairs[0][1])
        self.measurer.warm_up(stmt, g, calls=warmup)
        return self.measurer.measure(stmt, g), sets


class OperandPool:
    """Operands for many shapes of one dtype, drawn once: a flat tensor of standard-normal values (in the
    dtype, through ``TorchMatmul._quantize``) from which each shape's rotated (A, B) pairs are cut as views.

    The pairs of one shape are disjoint and consecutive, and there are as many as fresh pairs would be
    (``rotation_sets``: together at least twice the last-level cache), so they are as cache-cold as the
    sweep's; only the drawing of new random values per point is saved. Every view starts on an ``ALIGN``-
    element boundary: vendor GEMM libraries pick slower kernels for operands that are not 16-byte aligned.
    """

    ALIGN = 256  # elements: 1 KiB of float32, 512 B of bf16, 256 B of fp8
    MARGIN = 1.25  # room for the alignment gaps between views

    def __init__(self, kernels: TorchMatmul, dtype: str, capacity: int = 0):
        self.kernels = kernels
        self.dtype = dtype
        self.flat = None
        rotation = ROTATION_CACHE_FACTOR * kernels.cache_bytes() / _ELEMENT_BYTES[dtype]
        self._draw(max(int(capacity), math.ceil(self.MARGIN * rotation)))

    @classmethod
    def _aligned(cls, elements: int) -> int:
        return -(-elements // cls.ALIGN) * cls.ALIGN

    @classmethod
    def pair_elements(cls, shape: Shape) -> int:
        """Pool elements one (A, B) pair of ``shape`` takes, alignment included."""
        return cls._aligned(shape.m * shape.k) + cls._aligned(shape.k * shape.n)

    @property
    def elements(self) -> int:
        return int(self.flat.numel()) if self.flat is not None else 0

    def _draw(self, elements: int, at_least: int = 1) -> None:
        """(Re)draw the pool: ``elements`` values, at most ``ROTATION_MEMORY_FRACTION`` of free memory, but
        never fewer than ``at_least`` (one pair must fit; beyond free memory that is an OOM of the point)."""
        k = self.kernels
        t = k.torch
        self.flat = None  # the old pool goes first
        cap = int(ROTATION_MEMORY_FRACTION * k.free_bytes() // _ELEMENT_BYTES[self.dtype])
        n = max(min(int(elements), cap), int(at_least), 1)
        t.manual_seed(k._seed("pool", self.dtype, n))
        x = t.randn(1, n, device=k.device, dtype=t.float32)
        self.flat = k._quantize(self.dtype, x, x[:, :1])[0].reshape(-1)

    def pairs(self, shape: Shape, sets: int) -> list:
        """Up to ``sets`` disjoint pairs of ``shape`` (at least one), the pool grown first when it holds fewer."""
        per = self.pair_elements(shape)
        if self.elements < sets * shape.elements():  # drawn again only when too small without the gaps
            self._draw(math.ceil(self.MARGIN * sets * per), at_least=per)
        use = max(1, min(sets, self.elements // per))
        m, n, k = shape.m, shape.n, shape.k
        out = []
        for i in range(use):
            a0 = i * per
            b0 = a0 + self._aligned(m * k)
            a = self.flat[a0 : a0 + m * k].view(m, k)
            if self.dtype == "float8_e4m3fn":  # column-major B, as _scaled_mm wants (see _quantize)
                b = self.flat[b0 : b0 + k * n].view(n, k).t()
            else:
                b = self.flat[b0 : b0 + k * n].view(k, n)
            out.append((a, b))
        return out


# ---- the stage ----------------------------------------------------------------------------------


def peak_safe(
    backend: Backend, info: dict, dtype: str, threads: int, overrides: dict
) -> tuple[float | None, str, bool]:
    """(peak TFLOP/s or None, its source, whether it bounds what the device can do).

    A configured override is taken as a bound; otherwise the backend says (``Backend.peak_is_bound``:
    a CPU peak from a clock that is not the maximum boost clock is not one).
    """
    try:
        peak, source = backend.peak_tflops(info, dtype, threads, overrides)
    except Exception as exc:
        return None, f"unknown ({one_line(exc, 120)})", True
    overridden = dtype in ((overrides or {}).get(backend.name) or {})
    return (float(peak) if peak else None), str(source), backend.peak_is_bound(info, overridden)


def configured_shapes(mm_cfg: dict) -> list[Shape]:
    """``matmul.shapes`` as Shapes, each under its reported name (``run.config.shape_label``)."""
    return [Shape(int(s["m"]), int(s["n"]), int(s["k"]), shape_label(s)) for s in mm_cfg.get("shapes") or []]


def add_arguments(p) -> None:
    add_device_stage_arguments(p)


def cli(args) -> int:
    st = start("matmul", args.run_file, args.backend, args.threads)
    out = st.out_path(args.out_dir, "matmul")
    if not st.devices:
        row = dict.fromkeys(COLUMNS, "")
        row.update(st.absent_row(), flags="absent")
        atomic_write_csv(out, [row], columns=COLUMNS)
        atomic_write_csv(st.out_path(args.out_dir, "matmul_soak"), [st.absent_row()], columns=SOAK_COLUMNS)
        atomic_write_csv(st.out_path(args.out_dir, "telemetry_matmul"), st.telemetry_rows(), columns=SERIES_COLUMNS)
        st.write_samples(args.out_dir, sample_table.empty())
        print(f"matmul: {st.absent_reason}")
        return 0

    settings = Settings.from_config(st.config, st.threads)
    mm_cfg = st.config["matmul"]
    checkpoint = Checkpoint(st.checkpoint_path(args.out_dir, args.checkpoint), CHECKPOINT_KEY)

    def kernels_for(device):
        measurer = Measurer(st.backend.synced_timer(device), min_run_time_s=settings.min_run_time_s, threads=st.threads)
        return TorchMatmul(
            device,
            st.backend,
            measurer=measurer,
            info=st.info(device),
            seed=settings.seed,
            rotate=settings.rotate_inputs,
        )

    rows = sweep(
        st.devices,
        plan_dtypes(st.backend, mm_cfg),
        mm_cfg["sizes"],
        settings,
        kernels_for=kernels_for,
        device_row=st.device_row,
        peak_for=lambda d, dt: peak_safe(st.backend, st.info(d), dt, st.threads, mm_cfg.get("peak_tflops") or {}),
        checkpoint=checkpoint,
        config_hash=st.run_info["config_hash"],
        shapes=configured_shapes(mm_cfg),
        telemetry_for=st.telemetry,
    )
    atomic_write_csv(out, rows, columns=COLUMNS)
    soak = soak_rows_for(st, rows, mm_cfg, kernels_for=kernels_for, run=run_soak)
    atomic_write_csv(st.out_path(args.out_dir, "matmul_soak"), soak, columns=SOAK_COLUMNS)
    atomic_write_csv(st.out_path(args.out_dir, "telemetry_matmul"), st.telemetry_rows(), columns=SERIES_COLUMNS)
    st.write_samples(args.out_dir, sample_table.from_block_rows("matmul", rows))
    return 0
