"""Sustained mode of the matmul stage (``matmul.soak_s``): tell a boost reading from a sustained one.

A sweep point lasts a fraction of a second to a few seconds, often before a GPU has heated up: its
TFLOP/s may be a boost-clock figure the device does not hold. With ``matmul.soak_s`` > 0, after the
sweep each device's *largest point* (the measured point, status ok or unstable, with the largest n; at
that n the dtype with the highest TFLOP/s) is held for ``soak_s`` seconds: the same product, on the
same rotation of cache-cold inputs, one synchronized call after another. Every ``soak_interval_s`` one
row is written (``matmul_soak_<backend>.csv``): the calls finished in that interval, their TFLOP/s,
and that interval's telemetry window (clock, power, temperature, energy, GFLOP per joule, throttling).

``clock_settled`` marks the intervals from which the clock is settled
(``measure.telemetry.settled_from``: that interval and every later one within
``telemetry.settle_rel_tol`` of the sustained clock, the median of the second half of the soak). The
intervals before it are the boost (or ramp) phase; the report sets the first interval's TFLOP/s and
clock beside the sustained ones. Off (0) by default. A failure (OOM, an error) ends that device's soak
with one row saying so; the sweep's rows are written before the soak starts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from ...columns import TRUSTED
from ...measure import telemetry as tm
from ...measure.failures import failure_status, one_line


def soak_target(rows: list[dict], device: str) -> tuple[str, int] | None:
    """(dtype, n) of the point the soak holds on ``device``: among its measured points the largest n, and at
    that n the dtype with the highest TFLOP/s; None when the device has no measured point."""
    best = None
    for r in rows:
        if str(r.get("device")) != str(device) or r.get("status") not in TRUSTED:
            continue
        try:
            n, tflops = int(r["n"]), float(r["tflops"])
        except (KeyError, TypeError, ValueError):
            continue
        if not math.isfinite(tflops):
            continue
        if best is None or (n, tflops) > (best[1], best[2]):
            best = (str(r["dtype"]), n, tflops)
    return None if best is None else (best[0], best[1])


def mark_settled(rows: list[dict], rel_tol: float) -> None:
    """Set ``clock_settled`` on the soak's interval rows (in order): True from the interval at which the clock
    settled (``settled_from``), False before it; None throughout when no interval has a clock, or when the clock
    is nominal (``clock_source``: it cannot vary, so it says nothing of settling)."""
    clocks = [r.get("clock_mhz_median") for r in rows]
    nominal = any(r.get("clock_source") == tm.CLOCK_NOMINAL for r in rows)
    start = None if nominal else tm.settled_from(clocks, rel_tol)
    for i, r in enumerate(rows):
        r["clock_settled"] = None if start is None else i >= start


def run_soak(
    kernels,
    telemetry,
    *,
    dtype: str,
    n: int,
    seconds: float,
    interval_s: float,
    rel_tol: float = tm.DEFAULT_SETTLE_REL_TOL,
    clock: Callable[[], float] = time.perf_counter,
    log: Callable[[str], None] = print,
) -> list[dict]:
    """Hold one (dtype, n) product on ``kernels``' device for ``seconds``: one row per ``interval_s``
    (interval, t_s since the soak started, calls, TFLOP/s and its telemetry window's columns).

    ``kernels`` is the sweep's device side (``TorchMatmul``): ``mode(dtype)`` and ``soak_step(dtype, n)``
    (one synchronized product per call); ``telemetry`` a ``DeviceTelemetry``."""
    flops = 2.0 * n**3
    key = {"dtype": dtype, "n": n}
    rows: list[dict] = []
    try:
        with kernels.mode(dtype):
            step = kernels.soak_step(dtype, n)
            step()  # untimed: inputs in place, kernel chosen
            start = clock()
            while clock() - start < seconds:
                with telemetry.window() as window:
                    t0, calls = clock(), 0
                    while True:
                        step()
                        calls += 1
                        if clock() - t0 >= interval_s:
                            break
                    t1 = clock()
                cols = window.columns()
                tflops = calls * flops / (t1 - t0) / 1e12
                w_start, w_end = cols.get("telemetry_start_unix_s"), cols.get("telemetry_end_unix_s")
                duration = w_end - w_start if w_start is not None and w_end is not None else None
                rows.append(
                    {
                        **key,
                        "interval": len(rows),
                        "t_s": t1 - start,
                        "interval_s": t1 - t0,
                        "calls": calls,
                        "tflops": tflops,
                        **{k: v for k, v in cols.items() if k != "clock_halves_mhz"},
                        "gflop_per_j": tm.per_joule(tflops * 1e3, cols.get("energy_j"), duration),
                        "status": "ok",
                        "status_detail": "",
                    }
                )
                log(
                    f"matmul soak {dtype} n={n} t={t1 - start:.1f}s: {tflops:.4g} TFLOP/s, "
                    f"clock {cols.get('clock_mhz_median')} MHz, power {cols.get('power_w_median')} W"
                )
    except Exception as exc:  # recorded as the soak's last row; the stage goes on
        backend = getattr(kernels, "backend", None)
        rows.append(
            {
                **key,
                "interval": len(rows),
                "status": failure_status(exc, backend),
                "status_detail": one_line(exc),
                "telemetry_source": telemetry.source,
            }
        )
        if hasattr(kernels, "free"):
            kernels.free()
    mark_settled([r for r in rows if r["status"] == "ok"], rel_tol)
    return rows


def soak_rows_for(
    st,
    rows: list[dict],
    mm_cfg: dict,
    *,
    kernels_for: Callable[[str], object],
    run: Callable[..., list[dict]] = run_soak,
    log: Callable[[str], None] = print,
) -> list[dict]:
    """The ``matmul_soak`` rows of a started matmul stage ``st`` after its sweep (``rows``): one soak per
    device, or one row per device saying why there is none (``off``: ``matmul.soak_s`` is 0; ``skipped``:
    no measured point to hold)."""
    seconds = float(mm_cfg.get("soak_s") or 0)
    rel_tol = float((st.config.get("telemetry") or {}).get("settle_rel_tol", tm.DEFAULT_SETTLE_REL_TOL))
    out = []
    for device in st.devices:
        base = {**st.prov, "backend": st.backend.name, "device": device, "device_name": st.info(device)["name"]}
        if seconds <= 0:
            out.append({**base, "status": "off", "status_detail": "matmul.soak_s is 0: no sustained run"})
            continue
        target = soak_target(rows, device)
        if target is None:
            out.append({**base, "status": "skipped", "status_detail": "no measured point (ok or unstable) to hold"})
            continue
        dtype, n = target
        log(f"matmul soak {device}: holding {dtype} n={n} for {seconds:g} s")
        try:
            kernels = kernels_for(device)
        except Exception as exc:  # the device cannot be set up again: that is the soak's row
            out.append({**base, "dtype": dtype, "n": n, "status": failure_status(exc), "status_detail": one_line(exc)})
            continue
        out += [
            {**base, **r}
            for r in run(
                kernels,
                st.telemetry(device),
                dtype=dtype,
                n=n,
                seconds=seconds,
                interval_s=float(mm_cfg.get("soak_interval_s") or 1.0),
                rel_tol=rel_tol,
                log=log,
            )
        ]
    return out
