"""The matmul stage's figures (registry.FIGURES: their captions are workflow/report/<name>.rst)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...reporting import tables as S
from ...reporting.plots import (
    FLAG_MARKERS,
    _finish,
    _flag_handles,
    _grid,
    _legend_below,
    _log2_axis,
    _message,
    _plain_log_y,
    _series_handles,
)


def fig_matmul(plt, sns, tables, series, value: str):
    """TFLOP/s (``value='tflops'``) or % of peak (``value='pct_of_peak'``) against n, one panel per dtype."""
    title = "Matmul throughput" if value == "tflops" else "Matmul throughput as % of the device's peak"
    df = S.with_series(S.measured(S.square_points(tables["matmul"])), series)
    if value == "pct_of_peak" and not df.empty:
        df = df[df["pct_of_peak"].notna()]
    if df.empty:
        text = (
            "No matmul point was measured."
            if value == "tflops"
            else "No peak is known for any measured device.\nSet matmul.peak_tflops in the config to see % of peak."
        )
        return _message(plt, title, text)
    dtypes = S.dtype_sorted(df["dtype"])
    fig, axes = _grid(plt, len(dtypes))
    used = []
    for ax, dtype in zip(axes, dtypes):
        d = df[df["dtype"] == dtype].sort_values("n")
        for label, g in d.groupby("label", sort=False):
            color = g["color"].iloc[0]
            if value == "tflops":
                y = g["tflops"].to_numpy(float)
                lo = (g["flops"] / g["ci95_high_s"] / 1e12).to_numpy(float)
                hi = (g["flops"] / g["ci95_low_s"] / 1e12).to_numpy(float)
                iqr_rel = (g["iqr_s"] / g["median_s"]).to_numpy(float)
                lo = np.where(np.isfinite(lo), lo, y / (1 + iqr_rel / 2))
                hi = np.where(np.isfinite(hi), hi, y * (1 + iqr_rel / 2))
            else:
                y = g["pct_of_peak"].to_numpy(float)
                scale = (g["pct_of_peak"] / g["tflops"]).to_numpy(float)
                lo = (g["flops"] / g["ci95_high_s"] / 1e12).to_numpy(float) * scale
                hi = (g["flops"] / g["ci95_low_s"] / 1e12).to_numpy(float) * scale
                lo = np.where(np.isfinite(lo), lo, y)
                hi = np.where(np.isfinite(hi), hi, y)
            yerr = np.vstack([np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)])
            ax.errorbar(g["n"], y, yerr=yerr, color=color, marker="o", ms=4.5, lw=1.8, capsize=3, label=label)
            for status, (marker, _) in FLAG_MARKERS.items():
                f = g[g["status"] == status]
                if not f.empty:
                    ax.scatter(
                        f["n"],
                        f[value],
                        s=90,
                        marker=marker,
                        facecolors="none",
                        edgecolors="black",
                        linewidths=1.4,
                        zorder=5,
                    )
            if (label, color) not in used:
                used.append((label, color))
        _log2_axis(ax, d["n"])
        ax.set_title(S.DTYPE_LABEL.get(dtype, dtype))
        ax.set_xlabel("matrix size n (n×n · n×n)")
        if value == "tflops":
            _plain_log_y(ax)
            ax.set_ylabel("TFLOP/s (median, 95% CI)")
        else:
            ax.axhline(100, color="#444444", ls="--", lw=1)
            ax.text(ax.get_xlim()[0], 100, " peak", va="bottom", ha="left", fontsize=8, color="#444444")
            ax.set_ylim(0, max(110.0, float(np.nanmax(hi)) * 1.08 if np.isfinite(np.nanmax(hi)) else 110.0))
            ax.set_ylabel("% of peak TFLOP/s")
    h, lab = _series_handles(plt, used)
    fh, fl = _flag_handles(df["status"])
    handles, labels = h + fh, lab + fl
    _legend_below(fig, handles, labels, ncol=3)
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    _finish(fig, (len(labels) + 2) // 3)
    return fig


def fig_speedup(plt, sns, tables, series):
    sp = S.cpu_speedup(tables["matmul"])
    title = "Speedup over the CPU (same run, dtype and n)"
    if sp.empty:
        has_accel = not S.accelerator_devices(tables["matmul"]).empty
        text = (
            "No accelerator measured: these results hold CPU timings only,\nso there is no CPU-to-accelerator "
            "speedup to show."
            if not has_accel
            else "No size and dtype measured on both the CPU and an accelerator of the same run."
        )
        return _message(plt, title, text)
    sp = S.with_series(sp, series)
    groups = list(sp.groupby("label", sort=False))
    fig, axes = _grid(plt, len(groups), ncols=2, panel_w=8.0 if len(groups) == 1 else 5.8, panel_h=4.2)
    dtypes = S.dtype_sorted(sp["dtype"])
    pal = dict(zip(dtypes, sns.color_palette("colorblind", len(dtypes) + 3).as_hex()[3:]))
    for ax, (label, g) in zip(axes, groups):
        for dtype in dtypes:
            d = g[g["dtype"] == dtype].sort_values("n")
            if d.empty:
                continue
            ax.plot(d["n"], d["speedup"], marker="o", lw=2, color=pal[dtype], label=S.DTYPE_LABEL.get(dtype, dtype))
            last = d.iloc[-1]
            ax.annotate(
                f"{last['speedup']:.0f}×" if last["speedup"] >= 10 else f"{last['speedup']:.1f}×",
                (last["n"], last["speedup"]),
                textcoords="offset points",
                xytext=(5, 0),
                va="center",
                fontsize=8,
                color=pal[dtype],
            )
        ax.axhline(1, color="#444444", ls="--", lw=1)
        _log2_axis(ax, g["n"])
        _plain_log_y(ax)
        ax.set_title(f"{label}\nvs {g['baseline_device'].iloc[0]} of the same run", fontsize=10)
        ax.set_ylim(top=ax.get_ylim()[1] * 3)
        ax.set_xlabel("matrix size n")
        ax.set_ylabel("speedup over CPU (×, log scale)")
        ax.legend(title="dtype", fontsize=8, title_fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold", fontsize=10)
    fig.tight_layout()
    return fig


def fig_matmul_soak(plt, sns, tables, series):
    """Per soaked device: TFLOP/s and clock over the soak; the settled stretch shaded."""
    title = "Sustained mode (matmul.soak_s): throughput and clock over time"
    soak = tables.get("matmul_soak")
    if soak is None or soak.empty or not (soak["status"].astype(str) == "ok").any():
        return _message(
            plt,
            title,
            "No soak was run (matmul.soak_s is 0): boost and sustained readings are not\n"
            "told apart here. Set matmul.soak_s to hold the largest point.",
        )
    ok = S.with_series(soak[soak["status"].astype(str) == "ok"], series)
    groups = list(ok.groupby("label", sort=False))
    fig, axes = _grid(plt, len(groups), ncols=2, panel_w=6.2, panel_h=3.4)
    for ax, (label, g) in zip(axes, groups):
        g = g.sort_values("interval")
        color = g["color"].iloc[0]
        t = pd.to_numeric(g["t_s"], errors="coerce")
        ax.plot(t, g["tflops"], color=color, marker="o", ms=3.5, lw=1.8)
        settled = g["clock_settled"].map(S.as_bool)
        if (settled == True).any():  # noqa: E712
            start = float((t - pd.to_numeric(g["interval_s"], errors="coerce"))[settled == True].min())  # noqa: E712
            ax.axvspan(start, float(t.max()), color="#55a868", alpha=0.10, lw=0)
            ax.text(start, 0.02, " clock settled", transform=ax.get_xaxis_transform(), fontsize=8, color="#2f6b3d")
        ax.set_ylim(bottom=0, top=float(pd.to_numeric(g["tflops"], errors="coerce").max()) * 1.15)
        ax.set_ylabel("TFLOP/s per interval")
        ax.set_xlabel("seconds into the soak")
        ax.set_title(f"{label}\n{g['dtype'].iloc[0]} n={int(g['n'].iloc[0])}", fontsize=9.5)
        clock = pd.to_numeric(g["clock_mhz_median"], errors="coerce")
        if clock.notna().any():
            ax2 = ax.twinx()
            ax2.plot(t, clock, color="#555555", ls="--", lw=1.2)
            ax2.set_ylabel("clock (MHz, dashed)", fontsize=8)
            ax2.grid(False)
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold", fontsize=10)
    fig.tight_layout()
    return fig


def fig_matmul_tflops(plt, sns, tables, series):
    return fig_matmul(plt, sns, tables, series, "tflops")


def fig_matmul_pct_of_peak(plt, sns, tables, series):
    return fig_matmul(plt, sns, tables, series, "pct_of_peak")
