"""Stage: cold vs warm — how long a device takes to reach steady speed.

On every device of the backend a fixed workload (an n x n float32 product, ``warmup.n``) is run
again and again, each call timed on its own with the device's synced timer (the clock is read
after the device finished, XLA's lazy graph included). The first call is the *cold* one: it pays
for library initialisation, kernel selection/autotuning, lazy allocation and clocks still ramping
up. The device is *warm* once the last ``warmup.window`` calls all lie within ``warmup.rel_tol``
of their median; ``warm_s`` is that median and ``stable_at_iter`` the first call of that window.
A device never stable within ``warmup.max_iters`` calls gets ``stable_at_iter = -1`` and status
``unstable``. The stage also leaves the device warm for the matmul sweep that follows it.

One row per call. CUDA/ROCm/MPS/XLA are **untested on hardware** (the loop is device-agnostic:
it uses ``backend.synced_timer``; it runs end to end on the CPU).
"""

from __future__ import annotations

import math
from statistics import median
from typing import Callable, Sequence

from . import columns

EXTRA_COLUMNS = ["n", "status_detail"]
COLUMNS = columns.WARMUP + EXTRA_COLUMNS


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


def synced_call(device: str, n: int, seed: int = 0, torch=None) -> Callable[[], float]:
    """One n x n float32 product on ``device`` per call, timed with the device's synced timer."""
    from .backend import synced_timer

    if torch is None:
        import torch
    torch.manual_seed(seed)
    a = torch.randn(n, n, device=device, dtype=torch.float32)
    b = torch.randn(n, n, device=device, dtype=torch.float32)
    clock = synced_timer(device, torch=torch)
    clock()  # the inputs are on the device before the first call is timed

    def call() -> float:
        start = clock()
        c = torch.mm(a, b)  # kept alive until the clock: XLA runs only what a live tensor needs
        end = clock()
        del c
        return end - start

    return call


def device_rows(device: str, warm_cfg: dict, *, threads: int, seed: int = 0,
                make_call: Callable[..., Callable[[], float]] = synced_call) -> list[dict]:
    """The per-call rows of one device (without provenance); one ``error`` row if the workload fails."""
    from .stage import one_line

    n = warm_cfg["n"]
    try:
        result = run_until_stable(make_call(device, n, seed), window=warm_cfg["window"],
                                  rel_tol=warm_cfg["rel_tol"], max_iters=warm_cfg["max_iters"])
    except Exception as exc:
        return [{"n": n, "iter": 0, "iter_s": math.nan, "cold_s": math.nan, "warm_s": math.nan,
                 "stable_at_iter": -1, "threads": threads, "status": "error", "status_detail": one_line(exc)}]
    detail = ("" if result["status"] == "ok" else
              f"not within {warm_cfg['rel_tol']:g} of the median over {warm_cfg['window']} calls "
              f"after {warm_cfg['max_iters']} calls")
    return [{"n": n, "iter": i, "iter_s": t, "cold_s": result["cold_s"], "warm_s": result["warm_s"],
             "stable_at_iter": result["stable_at_iter"], "threads": threads, "status": result["status"],
             "status_detail": detail} for i, t in enumerate(result["times_s"])]


def add_arguments(p) -> None:
    from .backend import BACKENDS

    p.add_argument("--run-file", required=True, help="results/<run>/run.json")
    p.add_argument("--backend", required=True, choices=BACKENDS)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--out", required=True, help="warmup_<backend>.csv")


def cli(args) -> int:
    from .io import atomic_write_csv
    from .stage import set_threads, start

    st = start(args.run_file, args.backend, args.threads)
    if not st.devices:
        row = {**st.prov, "backend": args.backend, "device": "", "device_name": "", "status": "absent",
               "status_detail": st.absent_reason, "stable_at_iter": -1}
        atomic_write_csv(args.out, [row], columns=COLUMNS)
        print(f"warmup: {st.absent_reason}")
        return 0
    threads = set_threads(args.threads)
    rows = []
    for device in st.devices:
        base = st.device_row(args.backend, device)
        dev_rows = device_rows(device, st.config["warmup"], threads=threads, seed=st.config.get("seed", 0))
        last = dev_rows[-1]
        print(f"warmup {device}: {last['status']} cold {last['cold_s']:.4g} s, warm {last['warm_s']:.4g} s, "
              f"stable at call {last['stable_at_iter']} of {len(dev_rows)}")
        rows += [{**base, **r} for r in dev_rows]
    atomic_write_csv(args.out, rows, columns=COLUMNS)
    return 0
