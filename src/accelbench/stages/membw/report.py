"""The memory-bandwidth section of the HTML report: its context builder (the template is section.html.j2 here)."""

from __future__ import annotations

import pandas as pd

from ...reporting import tables as S
from ...reporting.html import WITHIN_RUN_CI_NOTE, _cell, _tflops_ci, within_run_ci
from . import KERNELS
from .roofline import device_roofs


def membw_tables(tables, series) -> dict:
    """Per device: the launch floor, copy and triad GB/s (with CI) at the largest size, the datasheet peak
    and its source; and every measurement."""
    bw = tables.get("membw")
    if bw is None or bw.empty or "kernel" not in bw.columns:
        return {"devices": [], "points": []}
    roofs = device_roofs(bw)
    bw = S.with_series(bw[bw["status"].astype(str) != "absent"], series)
    devices = []
    for label, g in bw.groupby("label", sort=False):
        r = roofs[(roofs["run_id"] == g["run_id"].iloc[0]) & (roofs["device"] == g["device"].iloc[0])]
        r = r.iloc[0] if len(r) else None
        cells = {}
        for kernel in KERNELS:
            k = g[(g["kernel"] == kernel) & g["status"].isin(S.TRUSTED)]
            if k.empty:
                cells[kernel] = {"gbps": "—", "ci": "", "pct": "—"}
                continue
            top = k.loc[k["size_bytes"].idxmax()]
            cells[kernel] = {
                "gbps": S.fmt_num(top["gbps"]),
                "ci": within_run_ci(_tflops_ci(top["gbps_ci95_low"], top["gbps_ci95_high"]), top.get("ci_method")),
                "pct": S.fmt_unit(top["pct_of_peak"], "%"),
            }
        size = r["bandwidth_size_bytes"] if r is not None else float("nan")
        cache = pd.to_numeric(g["cache_bytes"], errors="coerce").dropna()
        devices.append(
            {
                "label": label,
                "color": g["color"].iloc[0],
                "run_id": g["run_id"].iloc[0],
                "device": g["device"].iloc[0],
                "copy_bw": cells["copy"],
                "triad_bw": cells["triad"],
                "size": "—" if size != size else f"{S.fmt_num(size / 2**20)} MiB",
                "cache": "—" if cache.empty else f"{S.fmt_num(cache.iloc[0] / 2**20)} MiB",
                "beyond_cache": bool(r["beyond_cache"]) if r is not None else False,
                "launch": S.fmt_time(r["launch_s"]) if r is not None else "—",
                "launch_value": None if r is None or r["launch_s"] != r["launch_s"] else float(r["launch_s"]),
                "peak": S.fmt_unit(r["peak_gbps"], " GB/s") if r is not None else "—",
                "peak_source": str(_cell(g["peak_source"].iloc[0])),
            }
        )
    points = []
    for _, r in bw.sort_values(["label", "kernel", "size_bytes"]).iterrows():
        points.append(
            {
                "label": r["label"],
                "color": r["color"],
                "kernel": r["kernel"],
                "size": ("" if r["size_bytes"] != r["size_bytes"] else f"{S.fmt_num(r['size_bytes'] / 2**10)} KiB"),
                "gbps": S.fmt_num(r["gbps"]),
                "ci": within_run_ci(_tflops_ci(r["gbps_ci95_low"], r["gbps_ci95_high"]), r.get("ci_method")),
                "median": S.fmt_time(r["median_s"]),
                "status": str(r["status"]),
            }
        )
    return {"devices": devices, "points": points, "ci_note": WITHIN_RUN_CI_NOTE}


def context(tables, series, ctx) -> dict:
    return {"membw": membw_tables(tables, series)}
