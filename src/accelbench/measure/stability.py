"""Warm-up to stability: repeat a fixed workload until its time stops changing.

The workload is one n x n float32 product on the device (``warmup.n``), each call timed on its own with
the backend's synced timer (the clock is read after the device finished, XLA's lazy graph included).
The first call is the *cold* one: library initialisation, kernel selection and autotuning, lazy
allocation, clocks still ramping up. The device is *warm* once the last ``warmup.window`` calls all lie
within ``warmup.rel_tol`` of their median, and, on an accelerator whose telemetry reads the clock
(``Backend.telemetry_reader``: NVML's SM clock, amdsmi's GFX clock), once the clock read after each of
those calls lies within ``warmup.rel_tol`` of their median too: an H100/H200 goes from ~345 MHz idle to
~1980 MHz under load in a ramp that a small product's step times need not show (the times can be flat
while the clock still climbs), and a point measured on the ramp reads low.

Used twice, with the same rule: the ``warmup`` stage records every call (cold-start cost and
time-to-stable), and every measuring stage (matmul, transfer, amp) warms each of its devices *in its
own process* before measuring it (``warm_device``) and records how long that took: stages are separate
processes, with separate CUDA contexts, maybe on separate nodes, so one stage cannot warm the device
for the next.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import median

from .failures import one_line


def stable_window(times_s: Sequence[float], window: int, rel_tol: float) -> bool:
    """True when the last ``window`` times all lie within ``rel_tol`` of their median."""
    if len(times_s) < window:
        return False
    last = list(times_s)[-window:]
    med = median(last)
    return med > 0 and all(abs(t - med) <= rel_tol * med for t in last)


def run_until_stable(
    call: Callable[[], float],
    *,
    window: int,
    rel_tol: float,
    max_iters: int,
    clock_mhz: Callable[[], float | None] | None = None,
) -> dict:
    """Time ``call`` (which returns the seconds of one synchronized call) until stable or ``max_iters``.

    With ``clock_mhz`` (the device clock, read after each call), stable also needs the last ``window``
    clock readings within ``rel_tol`` of their median (a reading of None: that call's clock is unknown,
    and the window is not stable by clock).

    Returns ``times_s`` (one per call), ``cold_s`` (the first), ``warm_s`` (median of the stable
    window, or of the last ``window`` calls when never stable), ``stable_at_iter`` (first call of the
    stable window, -1 if never), ``status`` (ok / unstable) and ``clock_mhz`` (the readings; [] without).
    """
    times: list[float] = []
    clocks: list = []
    while len(times) < max_iters:
        times.append(float(call()))
        if clock_mhz is not None:
            clocks.append(clock_mhz())
        clock_ok = clock_mhz is None or (None not in clocks[-window:] and stable_window(clocks, window, rel_tol))
        if stable_window(times, window, rel_tol) and clock_ok:
            return {
                "times_s": times,
                "cold_s": times[0],
                "warm_s": median(times[-window:]),
                "stable_at_iter": len(times) - window,
                "status": "ok",
                "clock_mhz": clocks,
            }
    return {
        "times_s": times,
        "cold_s": times[0],
        "warm_s": median(times[-window:]) if times else math.nan,
        "stable_at_iter": -1,
        "status": "unstable",
        "clock_mhz": clocks,
    }


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


def warm_up(
    backend,
    device: str,
    warm_cfg: dict,
    seed: int = 0,
    make_call: Callable[..., Callable[[], float]] = synced_call,
    clock_mhz: Callable[[], float | None] | None = None,
) -> dict:
    """``run_until_stable`` on the fixed workload (and the clock, with ``clock_mhz``); an exception is
    returned as status ``error``."""
    n = warm_cfg["n"]
    try:
        return run_until_stable(
            make_call(backend, device, n, seed),
            window=warm_cfg["window"],
            rel_tol=warm_cfg["rel_tol"],
            max_iters=warm_cfg["max_iters"],
            clock_mhz=clock_mhz,
        )
    except Exception as exc:
        return {
            "times_s": [],
            "cold_s": math.nan,
            "warm_s": math.nan,
            "stable_at_iter": -1,
            "status": "error",
            "detail": one_line(exc),
        }


@dataclass(frozen=True)
class DeviceWarmup:
    """How a measuring stage warmed one device before measuring it: the columns every row of it carries."""

    seconds: float  # wall time from the first warm-up call to stable (or giving up)
    calls: int  # calls made
    status: str  # ok (stable), unstable (never within rel_tol), error (the workload failed)
    warm_s: float  # the stable per-call time
    detail: str = ""
    clock_mhz: float | None = None  # the device clock after the last call, where telemetry reads it

    def columns(self) -> dict:
        return {"device_warmup_s": self.seconds, "device_warmup_calls": self.calls, "device_warmup_status": self.status}

    def describe(self, device: str) -> str:
        text = (
            f"warm-up {device}: {self.status} after {self.calls} call(s) in {self.seconds:.3g} s"
            f" (stable call {self.warm_s * 1e3:.4g} ms"
            + (f", clock {self.clock_mhz:.4g} MHz" if self.clock_mhz is not None else "")
            + ")"
            if self.status != "error"
            else f"warm-up {device}: error ({self.detail})"
        )
        return text


def device_clock(backend, device: str):
    """(a function reading ``device``'s clock in MHz, the reader to close) from the backend's telemetry
    reader on an accelerator whose reader has the clock; (None, None) otherwise (the CPU's clock is not
    watched: cpufreq jitters with no ramp to wait for, and a VM reports a constant)."""
    if not getattr(backend, "is_accelerator", False) or not hasattr(backend, "telemetry_reader"):
        return None, None
    try:
        reader = backend.telemetry_reader(device).open()
    except Exception:
        return None, None
    if "clock" not in reader.found:
        reader.close()
        return None, None
    return (lambda: reader.read_one("clock")), reader


def warm_device(
    backend, device: str, warm_cfg: dict, seed: int = 0, make_call: Callable[..., Callable[[], float]] = synced_call
) -> DeviceWarmup:
    """Warm ``device`` to the warm-up stage's stability rule, in this process, and say how long it took;
    on an accelerator whose telemetry reads the clock, until the clock has stopped ramping too."""
    started = time.perf_counter()
    clock, reader = device_clock(backend, device)
    try:
        result = warm_up(backend, device, warm_cfg, seed, make_call=make_call, clock_mhz=clock)
    finally:
        if reader is not None:
            reader.close()
    seconds = time.perf_counter() - started
    clocks = [c for c in result.get("clock_mhz", []) if c is not None]
    return DeviceWarmup(
        seconds=seconds,
        calls=len(result["times_s"]),
        status=result["status"],
        warm_s=result["warm_s"],
        detail=result.get("detail", ""),
        clock_mhz=clocks[-1] if clocks else None,
    )
