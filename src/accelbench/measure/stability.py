"""Warm-up to stability: repeat a fixed workload until its time stops changing.

The workload is one n x n float32 product on the device (``warmup.n``), each call timed on its own with
the backend's synced timer (the clock is read after the device finished, XLA's lazy graph included).
The first call is the *cold* one: library initialisation, kernel selection and autotuning, lazy
allocation, clocks still ramping up. The device is *warm* once the last ``warmup.window`` calls all lie
within ``warmup.rel_tol`` of their median.

Used twice, with the same rule: the ``warmup`` stage records every call (cold-start cost and
time-to-stable), and every measuring stage (matmul, transfer, amp) warms each of its devices *in its
own process* before measuring it (``warm_device``) and records how long that took: stages are separate
processes, with separate CUDA contexts, maybe on separate nodes, so one stage cannot warm the device
for the next.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from statistics import median
from typing import Callable, Sequence

from .failures import one_line


def stable_window(times_s: Sequence[float], window: int, rel_tol: float) -> bool:
    """True when the last ``window`` times all lie within ``rel_tol`` of their median."""
    if len(times_s) < window:
        return False
    last = list(times_s)[-window:]
    med = median(last)
    return med > 0 and all(abs(t - med) <= rel_tol * med for t in last)


def run_until_stable(call: Callable[[], float], *, window: int, rel_tol: float, max_iters: int) -> dict:
    """Time ``call`` (which returns the seconds of one synchronized call) until stable or ``max_iters``.

    Returns ``times_s`` (one per call), ``cold_s`` (the first), ``warm_s`` (median of the stable
    window, or of the last ``window`` calls when never stable), ``stable_at_iter`` (first call of the
    stable window, -1 if never) and ``status`` (ok / unstable).
    """
    times: list[float] = []
    while len(times) < max_iters:
        times.append(float(call()))
        if stable_window(times, window, rel_tol):
            return {"times_s": times, "cold_s": times[0], "warm_s": median(times[-window:]),
                    "stable_at_iter": len(times) - window, "status": "ok"}
    return {"times_s": times, "cold_s": times[0], "warm_s": median(times[-window:]) if times else math.nan,
            "stable_at_iter": -1, "status": "unstable"}


def synced_call(backend, device: str, n: int, seed: int = 0) -> Callable[[], float]:
    """One n x n float32 product on ``device`` per call, timed with the backend's synced timer."""
    torch = backend.torch
    torch.manual_seed(seed)
    a = torch.randn(n, n, device=device, dtype=torch.float32)
    b = torch.randn(n, n, device=device, dtype=torch.float32)
    clock = backend.synced_timer(device)
    clock()  # the inputs are on the device before the first call is timed

    def call() -> float:
        start = clock()
        c = torch.mm(a, b)  # kept alive until the clock: XLA runs only what a live tensor needs
        end = clock()
        del c
        return end - start

    return call


def warm_up(backend, device: str, warm_cfg: dict, seed: int = 0,
            make_call: Callable[..., Callable[[], float]] = synced_call) -> dict:
    """``run_until_stable`` on the fixed workload; an exception is returned as status ``error``."""
    n = warm_cfg["n"]
    try:
        return run_until_stable(make_call(backend, device, n, seed), window=warm_cfg["window"],
                                rel_tol=warm_cfg["rel_tol"], max_iters=warm_cfg["max_iters"])
    except Exception as exc:
        return {"times_s": [], "cold_s": math.nan, "warm_s": math.nan, "stable_at_iter": -1, "status": "error",
                "detail": one_line(exc)}


@dataclass(frozen=True)
class DeviceWarmup:
    """How a measuring stage warmed one device before measuring it: the columns every row of it carries."""

    seconds: float       # wall time from the first warm-up call to stable (or giving up)
    calls: int           # calls made
    status: str          # ok (stable), unstable (never within rel_tol), error (the workload failed)
    warm_s: float        # the stable per-call time
    detail: str = ""

    def columns(self) -> dict:
        return {"device_warmup_s": self.seconds, "device_warmup_calls": self.calls,
                "device_warmup_status": self.status}

    def describe(self, device: str) -> str:
        text = (f"warm-up {device}: {self.status} after {self.calls} call(s) in {self.seconds:.3g} s"
                f" (stable call {self.warm_s * 1e3:.4g} ms)" if self.status != "error" else
                f"warm-up {device}: error ({self.detail})")
        return text


def warm_device(backend, device: str, warm_cfg: dict, seed: int = 0,
                make_call: Callable[..., Callable[[], float]] = synced_call) -> DeviceWarmup:
    """Warm ``device`` to the warm-up stage's stability rule, in this process, and say how long it took."""
    started = time.perf_counter()
    result = warm_up(backend, device, warm_cfg, seed, make_call=make_call)
    seconds = time.perf_counter() - started
    return DeviceWarmup(seconds=seconds, calls=len(result["times_s"]), status=result["status"],
                        warm_s=result["warm_s"], detail=result.get("detail", ""))
