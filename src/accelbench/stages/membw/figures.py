"""The membw stage's figure (registry.FIGURES: its caption is workflow/report/membw.rst)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ...reporting import tables as S
from ...reporting.plots import _bytes_label, _finish, _legend_below, _log2_axis, _message, _plain_log_y
from . import KERNELS
from .roofline import device_roofs


def _fmt_us(seconds: float) -> str:
    if seconds != seconds:
        return "—"
    return f"{seconds * 1e6:.3g} µs" if seconds < 1e-3 else f"{seconds * 1e3:.3g} ms"


def fig_membw(plt, sns, tables, series):
    df = tables.get("membw")
    title = "Device memory bandwidth: copy (dashed) and triad (solid), median with 95% CI"
    if (
        df is None
        or df.empty
        or "kernel" not in df.columns
        or not (df["kernel"].isin(KERNELS) & df["status"].isin(S.TRUSTED)).any()
    ):
        return _message(plt, title, "No memory bandwidth was measured (stage membw).")
    roofs = device_roofs(df)
    ok = S.with_series(df[df["kernel"].isin(KERNELS) & df["status"].isin(S.TRUSTED) & (df["gbps"] > 0)], series)
    fig, ax = plt.subplots(figsize=(10.5, 5.0))
    handles, labels = [], []
    for label, g in ok.groupby("label", sort=False):
        color = g["color"].iloc[0]
        run_id, device = g["run_id"].iloc[0], g["device"].iloc[0]
        for kernel, ls in (("triad", "-"), ("copy", "--")):
            d = g[g["kernel"] == kernel].sort_values("size_bytes")
            if d.empty:
                continue
            y = d["gbps"].to_numpy(float)
            lo = np.where(np.isfinite(d["gbps_ci95_low"].to_numpy(float)), d["gbps_ci95_low"], y)
            hi = np.where(np.isfinite(d["gbps_ci95_high"].to_numpy(float)), d["gbps_ci95_high"], y)
            ax.errorbar(
                d["size_bytes"],
                y,
                yerr=np.vstack([np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)]),
                color=color,
                ls=ls,
                marker="o" if kernel == "triad" else "s",
                ms=4,
                lw=1.7,
                capsize=2.5,
            )
        cache = pd.to_numeric(g["cache_bytes"], errors="coerce").dropna()
        if len(cache):
            ax.axvline(float(cache.iloc[0]), color=color, ls=":", lw=1.2)
            ax.text(
                float(cache.iloc[0]),
                0.98,
                " last-level cache",
                transform=ax.get_xaxis_transform(),
                color=color,
                fontsize=7.5,
                va="top",
                rotation=90,
            )
        r = roofs[(roofs["run_id"] == run_id) & (roofs["device"] == device)]
        peak = float(r["peak_gbps"].iloc[0]) if len(r) else math.nan
        if peak == peak:
            ax.axhline(peak, color=color, ls="-.", lw=1.1)
            ax.text(
                g["size_bytes"].min(), peak, f" datasheet peak {peak:,.0f} GB/s", color=color, fontsize=7.5, va="bottom"
            )
        launch = float(r["launch_s"].iloc[0]) if len(r) else math.nan
        handles.append(Line2D([0], [0], color=color, marker="o", lw=2))
        labels.append(f"{label} (launch floor {_fmt_us(launch)})")
    _log2_axis(ax, ok["size_bytes"], _bytes_label)
    ax.tick_params(axis="x", labelsize=8, labelrotation=30)
    _plain_log_y(ax)
    ax.set_xlabel("size of each array (float32)")
    ax.set_ylabel("GB/s (10⁹ bytes/s, STREAM byte counts)")
    handles += [
        Line2D([0], [0], color="#555555", ls="-", marker="o"),
        Line2D([0], [0], color="#555555", ls="--", marker="s"),
    ]
    labels += ["triad a = b + s·c (3 arrays)", "copy b = a (2 arrays)"]
    _legend_below(fig, handles, labels, ncol=2)
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    _finish(fig, (len(labels) + 1) // 2)
    return fig
