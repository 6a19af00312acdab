"""Stage: matrix-multiplication throughput sweep (every device of one backend x dtypes x sizes).

One row per (device, dtype, n): the time of an n x n by n x n product (2 n^3 flops), its TFLOP/s
from the median, how that compares with the device's theoretical peak, and whether the result
was right. What makes a number here trustworthy:

- **Warm device**: before its first point each device is warmed in this process to the warm-up stage's
  stability rule (``measure.stability.warm_device``), recorded in ``device_warmup_*``; each point then
  gets at least 2 untimed calls and ``WARMUP_S`` of them (its kernel selection, its clocks).
- **Synchronized timing**: ``torch.utils.benchmark.Timer`` with ``Backend.synced_timer(device)``,
  at least 6 blocks, median with a distribution-free 95% interval (see ``timing``).
- **Not from cache**: the timed statement cycles through several input pairs that together
  span at least twice the last-level cache (CPU L3, GPU L2, MI300 Infinity Cache), bounded by
  40% of free memory, so small sizes are not measured with operands already on chip.
- **Output reused** (``out=``): no allocation or page faults inside the timed loop.
- **Strict float32**: float32 is measured with TF32 off and matmul precision "highest"; on CUDA
  TF32 is its own dtype ``tf32`` (``torch.backends.cuda.matmul.allow_tf32`` set, then restored).
- **fp8** (``float8_e4m3fn``) through ``torch._scaled_mm`` (bf16 output, unit scales) where the
  hardware has it (``Backend.fp8_support``: CUDA compute capability >= 8.9, ROCm gfx94x/gfx95x/gfx12);
  elsewhere ``unsupported`` with the reason.
- **Checked**: on fresh normal inputs (never zeros) the product is compared with a float64
  reference of the same (quantized) inputs on up to 128 sampled rows: relative Frobenius error
  against ``matmul.rel_error_max[dtype]`` -> ``wrong_result``. Quantizing the inputs first isolates
  the kernel's accumulation from the rounding of the inputs.
- **Plausible**: above 100% of the theoretical peak -> ``invalid`` (a missing synchronization,
  a kernel that skipped work, or a wrong peak).
- **Bounded**: each point's time is predicted before it runs (from the previous size of the same
  dtype scaled by n^3, or from a probe grown from n=128 until a call takes 10 ms) and a point
  predicted over ``matmul.point_budget_s`` is recorded as ``skipped_budget`` without running.
- **Robust**: OOM (memory freed, sweep goes on), an unsupported dtype, or any exception is that
  point's status; every finished point is checkpointed, and a rerun measures only what is missing.

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
from dataclasses import dataclass, field
from typing import Callable

from .. import registry
from ..backends import DTYPES, Backend
from ..measure import samples as sample_table
from ..measure.failures import failure_status, one_line
from ..measure.timing import MIN_BLOCKS, Measurer, TimingStats, is_unstable
from ..run.io import Checkpoint, atomic_write_csv
from .common import add_device_stage_arguments, start

# First match wins: a point that did not run has exactly one of the first five.
STATUS_PRECEDENCE = ("error", "oom", "unsupported", "absent", "skipped_budget", "invalid", "wrong_result", "unstable")
TABLE = registry.TABLES["matmul"]
COLUMNS = TABLE.all_columns

WARMUP_S = 0.05  # untimed calls before each point (at least 2)
PROBE_MIN_S = 0.01  # a probe call shorter than this is overhead-bound: probe a larger size
PROBE_START_N = 128
PROBE_CALLS = 3  # a probe is the fastest of this many single calls
CHECK_ROWS = 128  # rows of the product compared with the float64 reference
ROTATION_CACHE_FACTOR = 2  # input sets span at least this many last-level caches ...
ROTATION_MEMORY_FRACTION = 0.4  # ... within this share of free memory
MAX_WARMUP_CALLS = 100_000


# ---- pure logic ---------------------------------------------------------------------------------

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


def predict_call_s(n: int, previous: tuple[int, float] | None, probe: Callable[[int], float],
                   probe_min_s: float = PROBE_MIN_S, start_n: int = PROBE_START_N) -> tuple[float, str]:
    """Predicted seconds for one n x n product, and where the prediction came from.

    From the previous size of the same dtype, scaled by (n/n_prev)^3, when that call took at least
    ``probe_min_s`` (shorter calls are launch-overhead bound and would over-predict large sizes);
    otherwise from ``probe(m)`` at m = 128 (or twice the previous size), doubling up to n, stopping at
    the first m whose call takes ``probe_min_s``. Small sizes run below peak efficiency, so the
    scaling errs high (safe).
    """
    if previous is not None:
        prev_n, prev_s = previous
        if prev_s >= probe_min_s:
            return prev_s * (n / prev_n) ** 3, f"n={prev_n} measured"
    m = min(n, max(start_n, 2 * previous[0] if previous else 0))
    while True:
        t = probe(m)
        if t >= probe_min_s or m >= n:
            return t * (n / m) ** 3, f"probe n={m}"
        m = min(n, 2 * m)


def warmup_calls(call_s: float, warmup_s: float = WARMUP_S) -> int:
    """Untimed calls before timing: at least 2, and at least ``warmup_s`` worth."""
    if not call_s > 0:
        return 2
    return int(min(MAX_WARMUP_CALLS, max(2, math.ceil(warmup_s / call_s))))


def predict_point_s(call_s: float, min_run_time_s: float, warmup_s: float = WARMUP_S,
                    min_blocks: int = MIN_BLOCKS) -> float:
    """Seconds one point takes: warm-up, the Timer's block-size estimate (about one call for long
    calls), the timed blocks (``min_run_time_s``, at least ``min_blocks`` calls), and the check (one call)."""
    warm = warmup_calls(call_s, warmup_s) * call_s
    return warm + call_s + max(min_run_time_s, min_blocks * call_s) + call_s


def rotation_sets(pair_bytes: int, cache_bytes: int, free_bytes: int, rotate: bool = True,
                  cache_factor: float = ROTATION_CACHE_FACTOR,
                  memory_fraction: float = ROTATION_MEMORY_FRACTION) -> int:
    """How many distinct (A, B) pairs the timed statement cycles through: enough to span
    ``cache_factor`` last-level caches (at least 2, so consecutive calls never share operands),
    at most ``memory_fraction`` of free memory, at least 1."""
    if not rotate:
        return 1
    want = max(2, math.ceil(cache_factor * cache_bytes / pair_bytes))
    cap = int(memory_fraction * free_bytes // pair_bytes)
    return max(1, min(want, cap))


def point_flags(*, tflops: float, peak_tflops: float | None, rel_error: float, rel_error_max: float,
                stats: TimingStats, unstable_iqr_ratio: float,
                peak_is_bound: bool = True) -> tuple[list[str], list[str]]:
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
    def from_config(cls, config: dict, threads: int) -> "Settings":
        mm = config["matmul"]
        return cls(min_run_time_s=mm["min_run_time_s"], point_budget_s=mm["point_budget_s"],
                   unstable_iqr_ratio=mm["unstable_iqr_ratio"], rotate_inputs=mm["rotate_inputs"],
                   rel_error_max=dict(mm["rel_error_max"]), seed=config.get("seed", 0), threads=threads)


def _nan() -> float:
    return float("nan")


def measure_point(kernels, *, dtype: str, n: int, settings: Settings, peak: tuple,
                  previous: tuple[int, float] | None = None) -> dict:
    """Measure one (dtype, n) on the device ``kernels`` drives; return its row (without provenance).

    ``peak`` is (peak TFLOP/s or None, its source[, whether it is a true upper bound (default True)]).

    ``kernels`` supplies the device-specific pieces (``TorchMatmul`` for real; tests plant fakes):
    ``support(dtype)``, ``mode(dtype)`` (context), ``allow_tf32()``, ``probe(dtype, m)``,
    ``check(dtype, n)`` -> rel_error, ``time(dtype, n, warmup_calls)`` -> (TimingStats, input_sets),
    ``free()``.
    """
    peak_tflops, peak_source, *rest = peak
    peak_is_bound = bool(rest[0]) if rest else True
    row = {
        "dtype": dtype, "n": n, "flops": 2 * n ** 3, "threads": settings.threads, "allow_tf32": False,
        "median_s": _nan(), "iqr_s": _nan(), "ci95_low_s": _nan(), "ci95_high_s": _nan(), "repeats": 0,
        "blocks": 0, "input_sets": 0, "predicted_s": _nan(), "tflops": _nan(),
        "peak_tflops": peak_tflops if peak_tflops else _nan(), "peak_source": peak_source,
        "pct_of_peak": _nan(), "rel_error": _nan(), "rel_error_max": settings.rel_error_max.get(dtype, _nan()),
        "status": "ok", "flags": "", "status_detail": "",
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
            call_s, basis = predict_call_s(n, previous, lambda m: kernels.probe(dtype, m))
            predicted = predict_point_s(call_s, settings.min_run_time_s)
            row["predicted_s"] = predicted
            if predicted > settings.point_budget_s:
                return done("skipped_budget", f"predicted {predicted:.3g} s ({call_s:.3g} s per call from {basis}) "
                                              f"> matmul.point_budget_s {settings.point_budget_s:g}")
            rel_error = float(kernels.check(dtype, n))
            stats, sets = kernels.time(dtype, n, warmup_calls(call_s))
    except Exception as exc:  # recorded as this point's status; the sweep goes on
        failure = (failure_status(exc, getattr(kernels, "backend", None)), one_line(exc))
    if failure is not None:
        kernels.free()  # after the except block: the traceback no longer pins the tensors
        return done(*failure)

    tflops = row["flops"] / stats.median_s / 1e12
    row.update(median_s=stats.median_s, iqr_s=stats.iqr_s, ci95_low_s=stats.ci95_low_s,
               ci95_high_s=stats.ci95_high_s, repeats=stats.repeats, blocks=stats.blocks, input_sets=sets,
               tflops=tflops, rel_error=rel_error,
               pct_of_peak=100 * tflops / peak_tflops if peak_tflops else _nan())
    flags, why = point_flags(tflops=tflops, peak_tflops=peak_tflops, rel_error=rel_error,
                             rel_error_max=row["rel_error_max"], stats=stats,
                             unstable_iqr_ratio=settings.unstable_iqr_ratio, peak_is_bound=peak_is_bound)
    row.update(status=classify(flags), flags=";".join(flags), status_detail="; ".join(why))
    row[sample_table.SAMPLES_KEY] = list(stats.samples_s)  # the samples file's, not a CSV column
    return row


# ---- the sweep ----------------------------------------------------------------------------------

def _finite(x) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def sweep(devices: list[str], dtypes: list[str], sizes: list[int], settings: Settings, *,
          kernels_for: Callable[[str], object], device_row: Callable[[str], dict],
          peak_for: Callable[[str, str], tuple], checkpoint, config_hash: str,
          point: Callable[..., dict] = measure_point, log: Callable[[str], None] = print) -> list[dict]:
    """Every device x dtype x size, ascending sizes per dtype (each prediction builds on the last).

    A point already in ``checkpoint`` under the same ``config_hash`` is taken from it, not measured.
    Every new point is added to the checkpoint as soon as it is done.
    """
    rows = []
    for device in devices:
        base = None  # the device's columns; it is warmed just before its first point that is measured
        kernels = None
        for dtype in dtypes:
            previous = None
            peak = None
            for n in sorted(sizes):
                key = tuple(str(k) for k in (device, dtype, n))
                done = checkpoint.rows.get(key)
                if done is not None and done.get("config_hash") == config_hash:
                    row = done
                    log(f"matmul {device} {dtype} n={n}: from checkpoint ({row['status']})")
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
                    row = {**base, **point(kernels, dtype=dtype, n=n, settings=settings, peak=peak,
                                           previous=previous)}
                    checkpoint.add(row)
                    log(f"matmul {device} {dtype} n={n}: {row['status']} tflops={row['tflops']:.4g} "
                        f"(took {time.perf_counter() - started:.3g} s, predicted {row['predicted_s']:.3g} s) "
                        f"{row['status_detail']}".rstrip())
                rows.append(row)
                if _finite(row.get("median_s")):
                    previous = (int(row["n"]), float(row["median_s"]))
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

_TORCH_DTYPES = {"float32": "float32", "tf32": "float32", "bfloat16": "bfloat16", "float16": "float16",
                 "float8_e4m3fn": "float8_e4m3fn"}
_ELEMENT_BYTES = {"float32": 4, "tf32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1}


class TorchMatmul:
    """The real device side of one point: inputs, the timed statement, the float64 check.

    Device specifics come from ``backend`` (an ``accelbench.backends.Backend``) and ``info`` (its
    ``device_info``). Paths other than the CPU's are untested on hardware.
    """

    def __init__(self, device: str, backend: Backend, *, measurer: Measurer, info: dict | None = None,
                 seed: int = 0, rotate: bool = True):
        self.backend = backend
        self.torch = backend.torch
        self.device = device
        self.info = info if info is not None else backend.device_info(device)
        self.measurer = measurer
        self.seed = seed
        self.rotate = rotate
        self.cut = backend.graph_cut()
        self._cache_bytes = None
        self._tf32 = False

    # -- device facts
    def cache_bytes(self) -> int:
        """Last-level cache the rotation must overflow."""
        if self._cache_bytes is None:
            self._cache_bytes = self.backend.cache_bytes(self.device, self.info)
        return self._cache_bytes

    def free_bytes(self) -> int:
        return self.backend.free_bytes(self.device)

    def free(self) -> None:
        """Give memory back after a failed point (OOM): collect, then empty the device allocator's cache."""
        gc.collect()
        with contextlib.suppress(Exception):
            self.backend.empty_cache(self.device)

    # -- modes
    def support(self, dtype: str) -> str | None:
        return self.backend.dtype_support(dtype, self.info)

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
        return (self.seed * 1_000_003 + zlib.crc32(repr(parts).encode())) % (2 ** 63)

    def _pair(self, dtype: str, n: int):
        """One (A, B) pair of standard-normal values in ``dtype`` (B column-major for fp8's _scaled_mm)."""
        return self._pairs(dtype, n, 1)[0]

    def _pairs(self, dtype: str, n: int, count: int) -> list:
        """``count`` distinct pairs, drawn in batches of up to 64 MiB of float32 (thousands of tiny
        pairs in a few calls), each pair a view into its batch."""
        t = self.torch
        per_batch = max(1, (64 * 1024 ** 2) // (n * n * 4))
        pairs = []
        while len(pairs) < count:
            c = min(per_batch, count - len(pairs))
            a = t.randn(c, n, n, device=self.device, dtype=t.float32)
            b = t.randn(c, n, n, device=self.device, dtype=t.float32)
            a, b = self._quantize(dtype, a, b)
            pairs += [(a[i], b[i]) for i in range(c)]
        return pairs

    def _quantize(self, dtype: str, a, b):
        t = self.torch
        target = getattr(t, _TORCH_DTYPES[dtype])
        a, b = a.to(target), b.to(target)
        if dtype == "float8_e4m3fn":
            b = b.transpose(-2, -1).contiguous().transpose(-2, -1)  # column-major, as _scaled_mm wants
        return a, b

    def _op(self, dtype: str, n: int) -> tuple[str, dict]:
        """The product as a call template over globals: ``op(A_, B_, ...)`` (A_/B_ filled in by the caller)."""
        t = self.torch
        if dtype == "float8_e4m3fn":
            one = t.ones((), device=self.device, dtype=t.float32)
            return "D = op(A_, B_, sa, sb, out_dtype=od)", dict(op=t._scaled_mm, sa=one, sb=one, od=t.bfloat16)
        out = t.empty(n, n, device=self.device, dtype=getattr(t, _TORCH_DTYPES[dtype]))
        return "op(A_, B_, out=C)", dict(op=t.mm, C=out)

    def _statement(self, dtype: str, n: int, rotating: bool) -> tuple[str, dict]:
        """The timed statement: one product on the next input pair (or the only one)."""
        template, g = self._op(dtype, n)  # the result stays bound (C or D) until the cut/sync
        a_, b_ = ("next(A)", "next(B)") if rotating else ("a", "b")
        stmt = template.replace("A_", a_).replace("B_", b_)
        if self.cut is not None:  # XLA: cut the lazy graph after every product, or it runs only the last
            g["cut"] = self.cut
            stmt += "; cut()"
        return stmt, g

    def product(self, dtype: str, a, b):
        """One product, untimed, through the same call as the timed statement."""
        template, g = self._op(dtype, a.shape[0])
        fn = g.pop("op")
        if dtype == "float8_e4m3fn":
            return fn(a, b, g["sa"], g["sb"], out_dtype=g["od"])
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

    def check(self, dtype: str, n: int) -> float:
        """Relative Frobenius error of the product on fresh normal inputs against float64, on up to
        CHECK_ROWS rows spread over the whole output (the full n x n product is computed)."""
        t = self.torch
        t.manual_seed(self._seed("check", dtype, n))
        a, b = self._pair(dtype, n)
        c = self.product(dtype, a, b)
        rows = t.linspace(0, n - 1, min(n, CHECK_ROWS)).round().long().unique()
        ref_device = self.backend.reference_device(self.device)  # MPS/XLA: the CPU (no fast float64)
        a64 = a.index_select(0, rows.to(a.device)).to(ref_device).to(t.float64)
        b64 = b.to(ref_device).to(t.float64)
        ref = a64 @ b64
        got = c.index_select(0, rows.to(c.device)).to(ref_device).to(t.float64)
        err = (t.linalg.norm(got - ref) / t.linalg.norm(ref)).item()
        return err if math.isfinite(err) else math.inf

    def time(self, dtype: str, n: int, warmup: int) -> tuple[TimingStats, int]:
        """Time the product, cycling through input pairs that do not fit in the last-level cache."""
        pair_bytes = 2 * n * n * _ELEMENT_BYTES[dtype]
        sets = rotation_sets(pair_bytes, self.cache_bytes(), self.free_bytes(), self.rotate)
        self.torch.manual_seed(self._seed("time", dtype, n))
        pairs = self._pairs(dtype, n, sets)
        stmt, g = self._statement(dtype, n, rotating=sets > 1)
        if sets > 1:
            g.update(A=itertools.cycle([p[0] for p in pairs]), B=itertools.cycle([p[1] for p in pairs]))
        else:
            g.update(a=pairs[0][0], b=pairs[0][1])
        self.measurer.warm_up(stmt, g, calls=warmup)
        return self.measurer.measure(stmt, g), sets


# ---- the stage ----------------------------------------------------------------------------------

def peak_safe(backend: Backend, info: dict, dtype: str, threads: int, overrides: dict) -> tuple[float | None, str, bool]:
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


def add_arguments(p) -> None:
    add_device_stage_arguments(p)


def cli(args) -> int:
    st = start("matmul", args.run_file, args.backend, args.threads)
    out = st.out_path(args.out_dir, "matmul")
    if not st.devices:
        row = {c: "" for c in COLUMNS}
        row.update(st.absent_row(), flags="absent")
        atomic_write_csv(out, [row], columns=COLUMNS)
        st.write_samples(args.out_dir, sample_table.empty())
        print(f"matmul: {st.absent_reason}")
        return 0

    settings = Settings.from_config(st.config, st.threads)
    mm_cfg = st.config["matmul"]
    checkpoint = Checkpoint(st.checkpoint_path(args.out_dir, args.checkpoint), ("device", "dtype", "n"))

    def kernels_for(device):
        measurer = Measurer(st.backend.synced_timer(device), min_run_time_s=settings.min_run_time_s,
                            threads=st.threads)
        return TorchMatmul(device, st.backend, measurer=measurer, info=st.info(device), seed=settings.seed,
                           rotate=settings.rotate_inputs)

    rows = sweep(
        st.devices, plan_dtypes(st.backend, mm_cfg), mm_cfg["sizes"], settings,
        kernels_for=kernels_for,
        device_row=st.device_row,
        peak_for=lambda d, dt: peak_safe(st.backend, st.info(d), dt, st.threads, mm_cfg.get("peak_tflops") or {}),
        checkpoint=checkpoint, config_hash=st.run_info["config_hash"],
    )
    atomic_write_csv(out, rows, columns=COLUMNS)
    st.write_samples(args.out_dir, sample_table.from_block_rows("matmul", rows))
    return 0
