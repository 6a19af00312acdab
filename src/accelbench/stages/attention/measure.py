"""Stage ``attention``: ``torch.nn.functional.scaled_dot_product_attention`` (SDPA) throughput per kernel.

One row per (device, kernel, dtype, mode, batch, heads, seq_len_q, seq_len_k, head_dim, causal): the median
time of one call, its TFLOP/s and % of the device's peak, the peak memory of one call, and whether the result
was right. What makes a number here trustworthy:

- **One kernel per point**: each point forces one SDPA kernel with ``torch.nn.attention.sdpa_kernel([...])``
  (``flash``: FLASH_ATTENTION, ``efficient``: EFFICIENT_ATTENTION, ``cudnn``: CUDNN_ATTENTION, ``math``: MATH),
  so a kernel that cannot run a shape or dtype fails instead of falling back to another one silently. Which
  kernels a device has (``device_kernels``): the CPU has flash and math; on CUDA torch is asked whether flash
  is compiled in (``torch.backends.cuda.is_flash_attention_available``) and whether cuDNN is there; ROCm has
  no cuDNN; other devices try every configured kernel. A kernel that refuses a point (not compiled in, head
  dim too large, SM too old, dtype) gives it ``unsupported`` with torch's reason in one line: the first line
  of its error and the reason torch gave in its warnings ("Flash attention requires ...").
- **FLOPs by FlashAttention's benchmark convention** (``attention_flops``), as in flash-attn's
  ``benchmarks/benchmark_flash_attention.py`` (github.com/Dao-AILab/flash-attention, commit 0469c72,
  read 2026-12-02): forward 4·b·h·s_q·s_k·d (its ``flops()`` has s², s_q = s_k), halved when causal;
  backward 2.5 x the forward, so forward+backward is 3.5 x. The causal halving is the convention's, not the
  exact count (s_q·(s_k+1)/2 of the s_q·s_k scores are kept), and the softmax is not counted: TFLOP/s are
  comparable with the FlashAttention papers, not a count of every operation.
- **Harness** (as matmul and membw): the device warmed in this process first (``device_warmup_*``); per
  point the check call, then untimed calls (at least 2, and ``WARMUP_S`` or ``min_run_time_s`` if that is
  shorter), then ``measure.timing.Measurer``: ``torch.utils.benchmark.Timer`` with the backend's synchronizing
  timer, at least 6 blocks, the median with a 95% interval over the blocks of this run in time order (batch means
  from 50 blocks, else descriptive: ``measure.blocks``; not run-to-run variance); ``unstable`` when IQR/median > ``attention.unstable_iqr_ratio``. The raw per-block
  times go to the samples Parquet. Inputs are not rotated out of the cache (FlashAttention's benchmark does
  not either): a small point's q, k and v may be read from the last-level cache.
- **Forward+backward** (``forward_backward``): one call is the forward and ``torch.autograd.grad`` of the
  output, with a fixed random gradient, for q, k and v (no accumulation into ``.grad``).
- **Peak memory** (``peak_mem_bytes``, ``work_mem_bytes``, ``mem_kind``): one extra untimed call after the
  timing, with the backend's peak counter reset before it (``Backend.reset_peak_memory``/``peak_memory``).
  CUDA/ROCm: ``max_memory_allocated`` (tensors, the caching allocator's reserve excluded); ``work_mem_bytes``
  subtracts ``memory_allocated`` just before the call, so it is what the kernel needed beyond its inputs:
  quadratic in the sequence for math, linear for the fused kernels. CPU: torch has no allocator statistics
  there (and ``tracemalloc`` does not see torch's allocations), so this is the process's resident high-water
  mark (``VmHWM``, reset per point through ``/proc/self/clear_refs``; ``rss``), after glibc's ``malloc_trim``
  gave the heap's free memory back, and ``work_mem_bytes`` subtracts the resident size before the call: the
  pages the call touched, math's score matrix among them. Still a lower bound (memory the heap kept is
  reused unseen). Where no counter exists both are null and ``mem_kind`` empty.
- **Checked** against a float64 math reference of the same (rounded) inputs (``check``): the output on up
  to ``CHECK_ROWS`` query rows spread over the sequence (each row's reference needs only its own query, with
  the causal mask written out), and for ``forward_backward`` the gradients of q, k and v, at the point's
  shape when its score matrix is at most ``FULL_CHECK_SCORES`` elements, else at the same kernel, dtype,
  head dim and mask on ``GRAD_CHECK_SEQ`` tokens. Relative Frobenius error (the worst of them) above
  ``attention.rel_error_max[dtype]`` gives ``wrong_result``; NaN counts as wrong.
- **Plausible**: above 100% of a peak that is a true bound (``Backend.peak_is_bound``) gives ``invalid``.
- **Failures**: out of memory, or a predicted working set over ``attention.memory_fraction`` of free memory
  (not run: the CPU would swap or be killed rather than raise), gives ``oom``; an unsupported kernel
  ``unsupported``; any other exception ``error``; the other points go on. Every finished point is
  checkpointed; a rerun measures only what is missing.

fp8 (``float8_e4m3fn``, with ``attention.fp8`` where torch has the dtype) is passed to SDPA as it is: the
kernels that take no fp8 (all of them on the CPU) make it ``unsupported`` with their reason.

CUDA, ROCm, MPS, XLA and XPU paths are **untested on hardware**: their kernel selection and failure logic is
unit-tested with fakes; the CPU path runs end to end.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import time
import warnings
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from ... import backends
from ...backends.base import proc_status_bytes
from ...measure import samples as sample_table
from ...measure.failures import failure_status, first_line, one_line
from ...measure.timing import Measurer
from ...run.io import Checkpoint, atomic_write_csv
from ..common import add_device_stage_arguments, start
from . import DTYPES, IDENTITY, KERNELS, MODES, PLUGIN, TABLE

STAGE = PLUGIN.name
COLUMNS = [*TABLE.columns, *TABLE.extra]
CHECKPOINT_KEY = ("device", *[c for c in IDENTITY if c != "device_name"])
# First match wins: a point that did not run has exactly one of the first four.
STATUS_PRECEDENCE = ("error", "oom", "unsupported", "absent", "invalid", "wrong_result", "unstable")
SDPA_BACKENDS = {
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "math": "MATH",
}
ELEMENT_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1}
# SDPA kernels a backend's devices never have (torch has no memory-efficient or cuDNN kernel on the CPU, no cuDNN
# on ROCm): left out of its plan. The backend classes hold no SDPA facts (yet), so they are this table.
NEVER_KERNELS = {"cpu": ("efficient", "cudnn"), "rocm": ("cudnn",)}
# Kernels a torch build may lack on a backend, and how to ask it: kernel -> (query(torch) -> bool, reason).
KERNEL_QUERIES = {
    "cuda": {
        "flash": (
            lambda t: t.backends.cuda.is_flash_attention_available(),
            "flash attention is not compiled into this torch build",
        ),
        "cudnn": (lambda t: t.backends.cudnn.is_available(), "cuDNN is not available"),
    }
}
WARMUP_S = 0.05
MAX_WARMUP_CALLS = 1000
CHECK_ROWS = 128
FULL_CHECK_SCORES = 2**22  # b·h·s_q·s_k up to this: gradients checked at the point's own shape
GRAD_CHECK_SEQ = 256
SAMPLES_KEY = sample_table.SAMPLES_KEY  # a row's per-block times, for the samples file only (never a CSV column)
# torch's words for a kernel refusing a point; its RuntimeError says only "No viable backend ..." (CPU) or
# "No available kernel. Aborting execution." (CUDA), the reasons come as warnings
UNSUPPORTED_MARKERS = (
    "no viable backend",
    "no available kernel",
    "only supports",
    "not supported",
    "not implemented",
    "not compiled",
    "unsupported",
    "not available",
)


# ---- pure logic ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    kernel: str
    dtype: str
    mode: str
    batch: int
    heads: int
    seq_len_q: int
    seq_len_k: int
    head_dim: int
    causal: bool

    @property
    def flops(self) -> float:
        return attention_flops(
            self.batch, self.heads, self.seq_len_q, self.seq_len_k, self.head_dim, self.causal, self.mode
        )

    @property
    def scores(self) -> int:
        """Elements of the score matrix (b·h·s_q·s_k): what the math kernel materializes."""
        return self.batch * self.heads * self.seq_len_q * self.seq_len_k

    def columns(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return (
            f"{self.kernel} {self.dtype} {self.mode} b={self.batch} h={self.heads} s={self.seq_len_q}x"
            f"{self.seq_len_k} d={self.head_dim}{' causal' if self.causal else ''}"
        )


def attention_flops(
    batch: int, heads: int, seq_len_q: int, seq_len_k: int, head_dim: int, causal: bool, mode: str = "forward"
) -> float:
    """FLOP of one call by FlashAttention's benchmark convention (module docstring): forward
    4·b·h·s_q·s_k·d (two products of 2·s_q·s_k·d each per head), halved when causal; the backward is 2.5x
    the forward, so ``forward_backward`` is 3.5x."""
    if mode not in MODES:
        raise ValueError(f"attention mode: unknown {mode!r}; allowed: {', '.join(MODES)}")
    forward = 4.0 * batch * heads * seq_len_q * seq_len_k * head_dim / (2 if causal else 1)
    return forward if mode == "forward" else 3.5 * forward


def min_bytes(p: Point) -> float:
    """The least memory traffic of one call: q, k, v read and o written once (backward: q, k, v, o, dO read
    and dq, dk, dv written once more), at the dtype's element size. The roofline's denominator."""
    e = ELEMENT_BYTES.get(p.dtype, 4)
    fwd = (2 * p.seq_len_q + 2 * p.seq_len_k) * p.batch * p.heads * p.head_dim * e
    bwd = (4 * p.seq_len_q + 4 * p.seq_len_k) * p.batch * p.heads * p.head_dim * e
    return float(fwd if p.mode == "forward" else fwd + bwd)


def predicted_bytes(p: Point) -> float:
    """A generous estimate of the memory one point needs (inputs, output, gradients, the float64 check, and
    for math the score and probability matrices, twice for the backward), to refuse a point before it runs."""
    e = ELEMENT_BYTES.get(p.dtype, 4)
    tensors = (2 * p.seq_len_q + 2 * p.seq_len_k) * p.batch * p.heads * p.head_dim
    grads = 2 if p.mode == "forward_backward" else 1
    need = tensors * e * 2 * grads
    if p.kernel == "math":
        need += p.scores * (2 * e + 4) * grads
    check_rows = min(p.seq_len_q, CHECK_ROWS)
    need += 8 * (tensors + 3 * p.batch * p.heads * check_rows * p.seq_len_k)
    if p.mode == "forward_backward" and p.scores <= FULL_CHECK_SCORES:
        need += 8 * 4 * (tensors + p.scores)
    return float(need)


def sweep_config(cfg: dict, backend_name: str) -> dict:
    """The attention section as the sweep uses it on ``backend_name``: where the backend is the host (not an
    accelerator: the CPU) its ``host`` keys replace the general ones."""
    out = {k: v for k, v in cfg.items() if k != "host"}
    if not backends.is_accelerator(backend_name):
        out.update(cfg.get("host") or {})
    return out


def plan_dtypes(cfg: dict, torch) -> list[str]:
    """The configured dtypes, plus ``float8_e4m3fn`` with ``fp8`` where this torch has the dtype."""
    dtypes = [d for d in cfg["dtypes"] if d in DTYPES]
    if cfg.get("fp8") and "float8_e4m3fn" not in dtypes and hasattr(torch, "float8_e4m3fn"):
        dtypes.append("float8_e4m3fn")
    return dtypes


def batch_for(cfg: dict, seq_len: int) -> int:
    """``attention.batch``, or with ``attention.tokens`` set the batch that holds that many tokens at
    ``seq_len`` (at least 1): the FlashAttention papers keep batch x sequence at 16k."""
    tokens = cfg.get("tokens")
    return max(1, int(tokens) // int(seq_len)) if tokens else int(cfg["batch"])


def plan_points(cfg: dict, kernels: list[str], dtypes: list[str]) -> list[Point]:
    """Every point, kernel by kernel and dtype by dtype, each sequence length ascending (s_q = s_k)."""
    return [
        Point(kernel, dtype, mode, batch_for(cfg, s), int(cfg["heads"]), int(s), int(s), int(d), bool(c))
        for kernel in kernels
        for dtype in dtypes
        for mode in cfg["modes"]
        for d in cfg["head_dims"]
        for c in cfg["causal"]
        for s in sorted(cfg["seq_lens"])
    ]


def _call_or_reason(fn, what: str) -> str | None:
    try:
        return None if fn() else what
    except Exception as exc:  # an old torch without the query: let the point itself say
        return None if isinstance(exc, AttributeError) else f"{what} ({type(exc).__name__}: {exc})"


def device_kernels(torch, backend_name: str, configured) -> list[tuple[str, str | None]]:
    """The configured kernels this device can have, each with None or the reason it is not available here
    (its points become ``unsupported`` without running). Kernels a backend's devices never have
    (``NEVER_KERNELS``) are left out. Asked of torch, not assumed (``KERNEL_QUERIES``): a kernel torch has no
    ``SDPBackend`` member for, flash not compiled into a CUDA build, cuDNN missing."""
    sdpb = getattr(getattr(getattr(torch, "nn", None), "attention", None), "SDPBackend", None)
    never = NEVER_KERNELS.get(backend_name, ())
    queries = KERNEL_QUERIES.get(backend_name, {})
    out = []
    for k in (k for k in KERNELS if k in configured and k not in never):
        reason = None
        if sdpb is None or not hasattr(sdpb, SDPA_BACKENDS[k]):
            reason = f"this torch has no torch.nn.attention.SDPBackend.{SDPA_BACKENDS[k]}"
        elif k in queries:
            query, what = queries[k]
            reason = _call_or_reason(lambda q=query: q(torch), what)
        out.append((k, reason))
    return out


def failure(exc: BaseException, backend=None, reasons: list[str] | None = None) -> tuple[str, str]:
    """(status, one line) of an exception at a point: ``oom`` (the backend's OOM test or the usual messages),
    ``unsupported`` (a kernel refusing: torch's words, ``UNSUPPORTED_MARKERS``) or ``error``. ``reasons`` are
    the warnings torch gave while refusing, added to the error's first line."""
    status = failure_status(exc, backend)
    msg = str(exc).lower()
    if status == "error" and (isinstance(exc, NotImplementedError) or any(m in msg for m in UNSUPPORTED_MARKERS)):
        status = "unsupported"
    detail = first_line(exc)
    if status == "unsupported" and reasons:
        detail = f"{detail} | torch: {'; '.join(reasons)}"
    return status, " ".join(detail.split())[:400]


def torch_reasons(caught) -> list[str]:
    """The reasons torch warned about while choosing a kernel (each warning's first line, its C++ source
    location cut off), at most three, without repeats."""
    out = []
    for w in caught:
        text = str(getattr(w, "message", w)).split("(Triggered internally")[0]
        line = " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""
        if line and line not in out:
            out.append(line)
    return out[:3]


def point_flags(
    *,
    tflops: float,
    peak_tflops: float | None,
    peak_is_bound: bool,
    rel_error: float,
    rel_error_max: float,
    iqr_s: float,
    median_s: float,
    unstable_iqr_ratio: float,
) -> tuple[list[str], list[str]]:
    """Conditions of a measured point (``invalid``, ``wrong_result``, ``unstable``) and why, one phrase each."""
    flags, why = [], []
    if peak_tflops and tflops > peak_tflops:
        pct = f"{100 * tflops / peak_tflops:.0f}% of the peak {peak_tflops:g} TFLOP/s"
        if peak_is_bound:
            flags.append("invalid")
            why.append(pct)
        else:
            why.append(f"{pct} (a nominal peak: the clock it uses is not a known maximum)")
    if not (rel_error <= rel_error_max):  # NaN counts as wrong
        flags.append("wrong_result")
        why.append(f"rel_error {rel_error:.3g} > {rel_error_max:g}")
    ratio = iqr_s / median_s if median_s > 0 else math.inf
    if not (ratio <= unstable_iqr_ratio):
        flags.append("unstable")
        why.append(f"IQR/median {ratio:.3f} > {unstable_iqr_ratio:g}")
    return flags, why


def classify(flags: list[str]) -> str:
    for status in STATUS_PRECEDENCE:
        if status in flags:
            return status
    return "ok"


def warmup_calls(call_s: float, warmup_s: float = WARMUP_S) -> int:
    """Untimed calls before timing: at least 2, and at least ``warmup_s`` worth."""
    if not call_s > 0:
        return 2
    return int(min(MAX_WARMUP_CALLS, max(2, math.ceil(warmup_s / call_s))))


def empty_row(p: Point, threads: int, rel_error_max: float) -> dict:
    nan = math.nan
    return {
        **p.columns(),
        "flops": p.flops,
        "threads": threads,
        "median_s": nan,
        "iqr_s": nan,
        "ci95_low_s": nan,
        "ci95_high_s": nan,
        "ci_method": "",
        "lag1_autocorr": nan,
        "repeats": 0,
        "blocks": 0,
        "tflops": nan,
        "peak_tflops": nan,
        "peak_source": "",
        "pct_of_peak": nan,
        "peak_mem_bytes": None,
        "work_mem_bytes": None,
        "mem_kind": "",
        "rel_error": nan,
        "rel_error_max": rel_error_max,
        "status": "ok",
        "status_detail": "",
        "sdpa_backend": SDPA_BACKENDS[p.kernel],
        "torch_dtype": p.dtype,
        "min_bytes": min_bytes(p),
        "intensity_flop_per_byte": p.flops / min_bytes(p),
    }


# ---- one point ----------------------------------------------------------------------------------


def measure_point(
    att,
    p: Point,
    *,
    settings: dict,
    peak: tuple,
    threads: int = 1,
    unavailable: str | None = None,
    free_bytes: float | None = None,
) -> dict:
    """Measure one point on the device ``att`` drives (``TorchAttention`` for real; tests plant fakes with
    ``check(p) -> (rel_error, reasons)``, ``time(p, warmup) -> TimingStats``, ``memory(p) -> (peak, work, kind)``,
    ``probe(p) -> seconds``, ``free()`` and ``backend``); return its row (without provenance).

    ``peak``: (TFLOP/s or None, source, whether it bounds the device). ``unavailable``: the kernel's reason
    it is not on this device (the point is not run)."""
    peak_tflops, peak_source, peak_is_bound = peak
    row = empty_row(p, threads, float(settings["rel_error_max"].get(p.dtype, math.nan)))
    row.update(peak_tflops=peak_tflops if peak_tflops else math.nan, peak_source=peak_source)

    def done(status: str, detail: str) -> dict:
        row.update(status=status, status_detail=detail)
        return row

    if unavailable:
        return done("unsupported", unavailable)
    need = predicted_bytes(p)
    if free_bytes is not None and need > settings["memory_fraction"] * free_bytes:
        return done(
            "oom",
            f"not run: predicted {need / 2**30:.3g} GiB > attention.memory_fraction "
            f"{settings['memory_fraction']:g} of {free_bytes / 2**30:.3g} GiB free",
        )
    reasons: list[str] = []
    fail = None
    try:
        rel_error, reasons = att.check(p)
        call_s = att.probe(p)
        stats = att.time(p, warmup_calls(call_s, min(WARMUP_S, settings.get("min_run_time_s", WARMUP_S))))
        peak_mem, work_mem, mem_kind = att.memory(p)
    except Exception as exc:  # this point's status; the sweep goes on
        fail = failure(exc, getattr(att, "backend", None), reasons or getattr(exc, "torch_reasons", None))
    if fail is not None:
        att.free(collect=True)  # after the except block: the traceback no longer pins the tensors
        return done(*fail)
    att.free()
    tflops = p.flops / stats.median_s / 1e12
    row.update(
        median_s=stats.median_s,
        iqr_s=stats.iqr_s,
        ci95_low_s=stats.ci95_low_s,
        ci95_high_s=stats.ci95_high_s,
        ci_method=stats.ci_method,
        lag1_autocorr=stats.lag1_autocorr,
        repeats=stats.repeats,
        blocks=stats.blocks,
        tflops=tflops,
        pct_of_peak=100 * tflops / peak_tflops if peak_tflops else math.nan,
        rel_error=rel_error,
        peak_mem_bytes=peak_mem,
        work_mem_bytes=work_mem,
        mem_kind=mem_kind,
    )
    flags, why = point_flags(
        tflops=tflops,
        peak_tflops=peak_tflops,
        peak_is_bound=peak_is_bound,
        rel_error=rel_error,
        rel_error_max=row["rel_error_max"],
        iqr_s=stats.iqr_s,
        median_s=stats.median_s,
        unstable_iqr_ratio=settings["unstable_iqr_ratio"],
    )
    row.update(status=classify(flags), status_detail="; ".join(why))
    row[SAMPLES_KEY] = list(stats.samples_s)
    return row


# ---- the sweep ----------------------------------------------------------------------------------


def sweep(
    devices: list[str],
    points: list[Point],
    settings: dict,
    *,
    att_for: Callable[[str], object],
    device_row: Callable[[str], dict],
    peak_for: Callable[[str, str], tuple],
    unavailable: dict[str, str | None],
    checkpoint,
    config_hash: str,
    threads: int = 1,
    free_for: Callable[[str], float | None] = lambda d: None,
    point: Callable[..., dict] = measure_point,
    log: Callable[[str], None] = print,
) -> list[dict]:
    """Every device x point; a point in ``checkpoint`` under the same ``config_hash`` is taken from it. Each
    new point is checkpointed as soon as it is done."""
    rows = []
    for device in devices:
        base, att, peaks = None, None, {}
        for p in points:
            key = checkpoint.key({"device": device, **p.columns()})
            done = checkpoint.rows.get(key)
            if done is not None and done.get("config_hash") == config_hash:
                rows.append(done)
                log(f"{STAGE} {device} {p}: from checkpoint ({done['status']})")
                continue
            if base is None:
                base = device_row(device)
            if att is None:
                try:
                    att = att_for(device)
                except Exception as exc:  # every point of this device records it
                    att = _Unusable(exc)
            if p.dtype not in peaks:
                peaks[p.dtype] = peak_for(device, p.dtype)
            started = time.perf_counter()
            measured = point(
                att,
                p,
                settings=settings,
                peak=peaks[p.dtype],
                threads=threads,
                unavailable=unavailable.get(p.kernel),
                free_bytes=free_for(device),
            )
            row = {**base, **measured}
            checkpoint.add(row)
            rows.append(row)
            log(
                f"{STAGE} {device} {p}: {row['status']} tflops={row['tflops']:.4g} "
                f"(took {time.perf_counter() - started:.3g} s) {row['status_detail']}".rstrip()
            )
    return rows


class _Unusable:
    """Stands in for a device whose side could not be set up: every point records the reason."""

    def __init__(self, exc: BaseException):
        self.exc = exc
        self.backend = None

    def check(self, p):
        raise self.exc

    def free(self, collect: bool = False):
        pass


# ---- the device side: torch -----------------------------------------------------------------------


class TorchAttention:
    """Inputs, the timed call, the float64 check and the memory reading of one point on ``device``.
    Device specifics (synchronization, the reference device, memory counters, XLA's graph cut) come from
    ``backend``. Paths other than the CPU's are untested on hardware."""

    def __init__(self, device: str, backend, *, measurer, seed: int = 0):
        self.backend = backend
        self.torch = backend.torch
        self.device = device
        self.measurer = measurer
        self.seed = seed
        self.cut = backend.graph_cut()
        self._tensors: dict = {}
        self._sdpb, self._sdpa_kernel, self._sdpa = SDPBackend, sdpa_kernel, F.scaled_dot_product_attention

    def _seed(self, *parts) -> int:
        return (self.seed * 1_000_003 + zlib.crc32(repr(parts).encode())) % (2**63)

    def kernel(self, p: Point):
        """The context that allows only ``p.kernel``."""
        return self._sdpa_kernel([getattr(self._sdpb, SDPA_BACKENDS[p.kernel])])

    def inputs(self, p: Point, device: str | None = None) -> dict:
        """q (b, h, s_q, d), k and v (b, h, s_k, d) and the output gradient, standard normal, rounded to the
        dtype; q, k, v require grad for ``forward_backward``."""
        t = self.torch
        t.manual_seed(self._seed(str(p)))
        dev = device or self.device
        dtype = getattr(t, p.dtype)
        shape_q = (p.batch, p.heads, p.seq_len_q, p.head_dim)
        shape_k = (p.batch, p.heads, p.seq_len_k, p.head_dim)
        grad = p.mode == "forward_backward"
        out = {
            name: t.randn(*shape, device=dev, dtype=t.float32).to(dtype).requires_grad_(grad)
            for name, shape in (("q", shape_q), ("k", shape_k), ("v", shape_k))
        }
        out["g"] = t.randn(*shape_q, device=dev, dtype=t.float32).to(dtype) if grad else None
        return out

    def call(self, p: Point, x: dict) -> Callable[[], object]:
        """One call of the point: the forward, or the forward and the gradients of q, k and v."""
        sdpa, grad, cut, causal = self._sdpa, self.torch.autograd.grad, self.cut, p.causal
        q, k, v, g = x["q"], x["k"], x["v"], x["g"]
        if p.mode == "forward":

            def fn():
                out = sdpa(q, k, v, is_causal=causal)
                if cut is not None:
                    cut()
                return out
        else:

            def fn():
                out = sdpa(q, k, v, is_causal=causal)
                grads = grad(out, (q, k, v), g)
                if cut is not None:
                    cut()
                return out, grads

        return fn

    def _rel(self, got, ref) -> float:
        t = self.torch
        got = got.detach().to(ref.device).to(t.float64)
        err = (t.linalg.norm(got - ref) / t.linalg.norm(ref)).item()
        return err if math.isfinite(err) else math.inf

    def _reference_rows(self, p: Point, x: dict, rows):
        """float64 math attention of the query ``rows`` against every key (the causal mask written out)."""
        t = self.torch
        ref_dev = self.backend.reference_device(self.device)
        # widened before indexing: index_select of float8 tensors is missing on some devices and torch versions
        q = x["q"].detach().to(ref_dev).to(t.float64).index_select(2, rows.to(ref_dev))
        k, v = (x[n].detach().to(ref_dev).to(t.float64) for n in ("k", "v"))
        mask = None
        if p.causal:  # is_causal is top-left aligned: query i sees keys 0..i
            mask = t.arange(p.seq_len_k, device=ref_dev)[None, :] <= rows.to(ref_dev)[:, None]
        with self._sdpa_kernel([self._sdpb.MATH]):
            return self._sdpa(q, k, v, attn_mask=mask)

    def check(self, p: Point) -> tuple[float, list[str]]:
        """(relative error against float64, torch's warnings while choosing the kernel): the first call of
        the point, so a kernel refusing it fails here with its reasons attached to the exception."""
        t = self.torch
        x = self.inputs(p)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with self.kernel(p):
                    result = self.call(p, x)()
            except Exception as exc:
                exc.torch_reasons = torch_reasons(caught)
                raise
        out = result if p.mode == "forward" else result[0]
        rows = t.linspace(0, p.seq_len_q - 1, min(p.seq_len_q, CHECK_ROWS)).round().long().unique()
        got = out.detach().to(t.float32).index_select(2, rows.to(out.device))
        err = self._rel(got, self._reference_rows(p, x, rows))
        if p.mode == "forward_backward":
            err = max(err, self._grad_error(p, x if p.scores <= FULL_CHECK_SCORES else None, result))
        del result, out, x
        return err, []

    def _grad_error(self, p: Point, x: dict | None, result) -> float:
        """The worst relative error of the gradients of q, k, v against float64 math autograd: of this call
        (``x``), or of a call on ``GRAD_CHECK_SEQ`` tokens when the point is too large for a float64 copy."""
        t = self.torch
        if x is None:
            small = Point(
                p.kernel,
                p.dtype,
                p.mode,
                1,
                min(p.heads, 2),
                min(p.seq_len_q, GRAD_CHECK_SEQ),
                min(p.seq_len_k, GRAD_CHECK_SEQ),
                p.head_dim,
                p.causal,
            )
            x = self.inputs(small)
            with self.kernel(small):
                result = self.call(small, x)()
            p = small
        ref_dev = self.backend.reference_device(self.device)
        x64 = {n: x[n].detach().to(ref_dev).to(t.float64).requires_grad_(True) for n in ("q", "k", "v")}
        with self._sdpa_kernel([self._sdpb.MATH]):
            out64 = self._sdpa(x64["q"], x64["k"], x64["v"], is_causal=p.causal)
        refs = t.autograd.grad(out64, (x64["q"], x64["k"], x64["v"]), x["g"].to(ref_dev).to(t.float64))
        return max(self._rel(g, r) for g, r in zip(result[1], refs))

    def probe(self, p: Point) -> float:
        """Seconds of one synchronized call (the warm-up's length is chosen from it)."""
        x = self.inputs(p)
        self._tensors = x
        with self.kernel(p):
            return self.measurer.warm_up(self.call(p, x), calls=1)

    def time(self, p: Point, warmup: int):
        x = self._tensors or self.inputs(p)
        fn = self.call(p, x)
        with self.kernel(p):
            self.measurer.warm_up(fn, calls=warmup)
            return self.measurer.measure(fn)

    def _in_use(self, kind: str) -> float | None:
        """Bytes in use now, on the counter ``kind`` the backend's peak reads (None where there is none)."""
        try:
            if kind == "allocator":
                module = getattr(self.torch, self.device.split(":")[0], None)
                return float(module.memory_allocated(self.device))
            if kind == "rss":
                value = proc_status_bytes("VmRSS")
                return float(value) if value is not None else None
        except Exception:  # a counter missing on this device: the work memory stays null
            return None
        return None

    def memory(self, p: Point) -> tuple[float | None, float | None, str]:
        """(peak bytes, peak - bytes in use before, counter) of one untimed call. On the CPU (``rss``) the
        heap's free memory is first given back to the system (glibc ``malloc_trim``), so that the pages the
        call touches show in the resident high-water mark instead of being reused unseen."""
        x = self._tensors or self.inputs(p)
        fn = self.call(p, x)
        try:
            per_point = bool(self.backend.reset_peak_memory(self.device))
            _, kind = self.backend.peak_memory(self.device, per_trial=per_point)
        except Exception:  # no counter on this device
            return None, None, ""
        if kind == "rss":
            _malloc_trim()
            self.backend.reset_peak_memory(self.device)
        before = self._in_use(kind)
        with self.kernel(p):
            result = fn()
            self.backend.synchronize(self.device)
        peak, kind = self.backend.peak_memory(self.device, per_trial=per_point)
        del result
        work = peak - before if before is not None and math.isfinite(peak) else None
        return float(peak), (max(0.0, work) if work is not None else None), kind

    def free(self, collect: bool = False) -> None:
        """Drop the point's tensors (and, after a failure, collect: a traceback's cycles pin them)."""
        self._tensors = {}
        if collect:
            gc.collect()
        with contextlib.suppress(Exception):
            self.backend.empty_cache(self.device)


def _malloc_trim() -> None:
    """Give the C heap's free memory back to the system (glibc; a no-op elsewhere)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the reading is a lower bound, as documented
        pass


# ---- the stage ----------------------------------------------------------------------------------


def peak_for(backend, info: dict, dtype: str, threads: int, overrides: dict) -> tuple[float | None, str, bool]:
    """(peak TFLOP/s or None, its source, whether it bounds the device): ``attention.peak_tflops`` first,
    then the backend's table (as matmul: a CPU peak from a clock that is not the maximum is no bound)."""
    override = ((overrides or {}).get(backend.name) or {}).get(dtype)
    if override is not None:
        return float(override), f"config attention.peak_tflops.{backend.name}.{dtype} = {override}", True
    try:
        peak, source = backend.peak_tflops(info, dtype, threads, {})
        bound = backend.peak_is_bound(info, False)
    except Exception as exc:
        return None, f"unknown ({one_line(exc, 120)})", True
    return (float(peak) if peak else None), str(source), bool(bound)


def point_key(row: dict) -> str:
    """``kernel=flash|dtype=bfloat16|...``: which point a row is (``measure.samples.point_key``: the identity
    without device_name)."""
    return sample_table.point_key(TABLE.name, row)


def add_arguments(p) -> None:
    add_device_stage_arguments(p)


def write(st, out_dir: str, rows: list[dict]) -> None:
    """The table (``attention_<backend>.csv``) and its raw samples (``measure.samples``), registry file names."""
    atomic_write_csv(
        st.out_path(out_dir, TABLE.name),
        [{k: v for k, v in r.items() if k != SAMPLES_KEY} for r in rows],
        columns=COLUMNS,
    )
    st.write_samples(out_dir, sample_table.from_block_rows(TABLE.name, rows))


def run_stage(st, out_dir: str, checkpoint_path: str | None = None, log: Callable[[str], None] = print) -> list[dict]:
    """Measure every device of the started stage ``st`` (``stages.common.StageStart``) and write the files."""
    if not st.devices:
        rows = [st.absent_row()]
        write(st, out_dir, rows)
        log(f"{STAGE}: {st.absent_reason}")
        return rows
    cfg = sweep_config({**PLUGIN.defaults, **(st.config.get(PLUGIN.config_key) or {})}, st.backend.name)
    settings = {
        "rel_error_max": {**PLUGIN.defaults["rel_error_max"], **(cfg.get("rel_error_max") or {})},
        "unstable_iqr_ratio": float(cfg["unstable_iqr_ratio"]),
        "memory_fraction": float(cfg["memory_fraction"]),
        "min_run_time_s": float(cfg["min_run_time_s"]),
    }
    torch = st.backend.torch
    kernels = device_kernels(torch, st.backend.name, cfg["kernels"])
    points = plan_points(cfg, [k for k, _ in kernels], plan_dtypes(cfg, torch))
    checkpoint = Checkpoint(st.checkpoint_path(out_dir, checkpoint_path), CHECKPOINT_KEY)

    def att_for(device):
        # at most 10 x min_run_time_s (at least 0.2 s) of timed blocks per point, where the Measurer's own floor is
        # 1 s: a busy host's slow calls cost a point its interval, not the pipeline its time budget
        measurer = Measurer(
            st.backend.synced_timer(device),
            min_run_time_s=float(cfg["min_run_time_s"]),
            threads=st.threads,
            max_run_time_s=max(0.2, 10 * float(cfg["min_run_time_s"])),
        )
        return TorchAttention(device, st.backend, measurer=measurer, seed=int(st.config.get("seed", 0)))

    def free_for(device):
        try:
            return float(st.backend.free_bytes(device))
        except Exception:  # unknown: no memory guard
            return None

    rows = sweep(
        st.devices,
        points,
        settings,
        att_for=att_for,
        device_row=st.device_row,
        peak_for=lambda d, dt: peak_for(st.backend, st.info(d), dt, st.threads, cfg.get("peak_tflops")),
        unavailable=dict(kernels),
        checkpoint=checkpoint,
        config_hash=st.run_info["config_hash"],
        threads=st.threads,
        free_for=free_for,
        log=log,
    )
    write(st, out_dir, rows)
    return rows


def cli(args) -> int:
    st = start(STAGE, args.run_file, args.backend, args.threads)
    run_stage(st, args.out_dir, args.checkpoint)
    return 0
