"""Stage: cold vs warm - how long a device takes to reach steady speed.

On every device of the backend the fixed workload of ``measure.stability`` (an n x n float32 product,
``warmup.n``) is run again and again, each call timed on its own with the device's synced timer. The
first call is the *cold* one; the device is *warm* once the last ``warmup.window`` calls all lie within
``warmup.rel_tol`` of their median (``warm_s`` is that median, ``stable_at_iter`` the first call of
that window). A device never stable within ``warmup.max_iters`` calls gets ``stable_at_iter = -1`` and
status ``unstable``.

This stage measures cold-start cost and time-to-stable. It does not warm the device for the stages
after it: they are separate processes, and each warms its own devices with the same rule
(``measure.stability.warm_device``) and records how long that took.

One row per call. CUDA/ROCm/MPS/XLA/XPU are **untested on hardware** (the loop is device-agnostic: it
uses the backend's synced timer; it runs end to end on the CPU).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ... import registry
from ...measure import samples as sample_table
from ...measure.stability import synced_call, warm_up
from ...run.io import atomic_write_csv
from ..common import add_device_stage_arguments, start

TABLE = registry.TABLES["warmup"]
COLUMNS = TABLE.all_columns


def device_rows(
    backend,
    device: str,
    warm_cfg: dict,
    *,
    threads: int,
    seed: int = 0,
    make_call: Callable[..., Callable[[], float]] = synced_call,
) -> list[dict]:
    """The per-call rows of one device (without provenance); one ``error`` row if the workload fails."""
    n = warm_cfg["n"]
    result = warm_up(backend, device, warm_cfg, seed, make_call=make_call)
    if result["status"] == "error":
        return [
            {
                "n": n,
                "iter": 0,
                "iter_s": math.nan,
                "cold_s": math.nan,
                "warm_s": math.nan,
                "stable_at_iter": -1,
                "threads": threads,
                "status": "error",
                "status_detail": result["detail"],
            }
        ]
    detail = (
        ""
        if result["status"] == "ok"
        else f"not within {warm_cfg['rel_tol']:g} of the median over {warm_cfg['window']} calls "
        f"after {warm_cfg['max_iters']} calls"
    )
    return [
        {
            "n": n,
            "iter": i,
            "iter_s": t,
            "cold_s": result["cold_s"],
            "warm_s": result["warm_s"],
            "stable_at_iter": result["stable_at_iter"],
            "threads": threads,
            "status": result["status"],
            "status_detail": detail,
        }
        for i, t in enumerate(result["times_s"])
    ]


def add_arguments(p) -> None:
    add_device_stage_arguments(p)


def cli(args) -> int:
    st = start("warmup", args.run_file, args.backend, args.threads)
    out = st.out_path(args.out_dir, "warmup")
    if not st.devices:
        atomic_write_csv(out, [{**st.absent_row(), "stable_at_iter": -1}], columns=COLUMNS)
        st.write_samples(args.out_dir, sample_table.empty())
        print(f"warmup: {st.absent_reason}")
        return 0
    rows = []
    for device in st.devices:
        base = {**st.prov, "backend": st.backend.name, "device": device, "device_name": st.info(device)["name"]}
        dev_rows = device_rows(
            st.backend, device, st.config["warmup"], threads=st.threads, seed=st.config.get("seed", 0)
        )
        last = dev_rows[-1]
        print(
            f"warmup {device}: {last['status']} cold {last['cold_s']:.4g} s, warm {last['warm_s']:.4g} s, "
            f"stable at call {last['stable_at_iter']} of {len(dev_rows)}"
        )
        rows += [{**base, **r} for r in dev_rows]
    atomic_write_csv(out, rows, columns=COLUMNS)
    steady = sample_table.warmup_steady(rows, st.config["warmup"]["window"])
    st.write_samples(
        args.out_dir, sample_table.from_series_rows("warmup", rows, index="iter", value="iter_s", steady=steady)
    )
    return 0
