"""The memory-bandwidth stage's part in the roofline: each device's memory roof (the measured bandwidth) and its
launch floor (``reporting.roofline``: a point within a factor of it is launch-bound)."""

from __future__ import annotations

import math

import pandas as pd

from ...columns import TRUSTED
from ...reporting.roofline import _finite, _num
from . import KERNELS, LAUNCH


def device_roofs(membw: pd.DataFrame) -> pd.DataFrame:
    """Per (run_id, device): ``bandwidth_gbps`` (triad at the largest size measured, else copy, else the
    datasheet peak), ``bandwidth_source``, ``bandwidth_size_bytes``, ``beyond_cache`` (the size exceeded
    the last-level cache), ``peak_gbps`` and ``launch_s``."""
    cols = [
        "run_id",
        "device",
        "bandwidth_gbps",
        "bandwidth_source",
        "bandwidth_size_bytes",
        "beyond_cache",
        "peak_gbps",
        "launch_s",
    ]
    if membw is None or membw.empty or "kernel" not in membw.columns:
        return pd.DataFrame(columns=cols)
    df = membw[membw["status"].isin(TRUSTED)]
    out = []
    for (run_id, device), g in membw.groupby(["run_id", "device"], sort=True):
        ok = df[(df["run_id"] == run_id) & (df["device"] == device)]
        launch = ok[ok["kernel"] == LAUNCH]["median_s"]
        peak = _num(g["peak_gbps"].dropna().iloc[0]) if g["peak_gbps"].notna().any() else math.nan
        row = {
            "run_id": run_id,
            "device": device,
            "peak_gbps": peak,
            "launch_s": float(launch.iloc[0]) if len(launch) else math.nan,
            "bandwidth_gbps": math.nan,
            "bandwidth_source": "",
            "bandwidth_size_bytes": math.nan,
            "beyond_cache": False,
        }
        for kernel in reversed(KERNELS):  # triad first (reads two arrays, writes one: as most kernels), then copy
            k = ok[(ok["kernel"] == kernel) & (ok["gbps"] > 0)]
            if len(k):
                top = k.loc[k["size_bytes"].idxmax()]
                size, cache = _num(top["size_bytes"]), _num(top.get("cache_bytes"))
                row.update(
                    bandwidth_gbps=float(top["gbps"]),
                    bandwidth_size_bytes=size,
                    beyond_cache=bool(_finite(cache) and size > cache),
                    bandwidth_source=f"measured {kernel} at {size / 2**20:.4g} MiB per array",
                )
                break
        if not _finite(row["bandwidth_gbps"]) and _finite(peak):
            row.update(bandwidth_gbps=peak, bandwidth_source="datasheet peak (no bandwidth measured)")
        out.append(row)
    return pd.DataFrame(out, columns=cols)
