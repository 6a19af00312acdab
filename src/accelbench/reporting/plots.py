"""Figures from the aggregated tables: seaborn on matplotlib's Agg backend, each saved as PNG and SVG.

Exactly these figures are written (the Snakemake rule declares them), whatever the data holds; a
figure with nothing to show says so in words instead of being left out:

* ``matmul_tflops``: median TFLOP/s against n (log2 axis) per dtype, error bars = 95% interval of
  the median (IQR when no interval was recorded); flagged points marked.
* ``matmul_pct_of_peak``: the same points as % of the device's peak.
* ``speedup``: accelerator over CPU (same run, dtype and n) per size and dtype.
* ``warmup``: per-iteration time of the fixed workload, and cold (first call) vs warm per device.
* ``transfer``: host<->device GB/s against transfer size, pageable and pinned.
* ``amp_step_time``: median step time per trial, FP32 vs AMP modes, mean with 95% CI over seeds.
* ``amp_loss``: training loss per step, mean over seeds with the min-max band.

One colour per (run, device) in every figure (``tables.series``), from the colour-blind palette. The
figure names are ``registry.FIGURES``; ``make_figures`` draws each with the function ``DRAW`` names.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg", force=True)  # before pyplot: files only, never a window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator, NullLocator  # noqa: E402

from .. import registry  # noqa: E402
from . import tables as S  # noqa: E402

FIGURES = list(registry.FIGURES)
TABLE_NAMES = list(registry.TABLES)
FLAG_MARKERS = {"unstable": ("D", "unstable"), "invalid": ("X", "invalid (> peak)"),
                "wrong_result": ("P", "wrong result")}
DPI = 110


def _setup():
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind", font_scale=0.9)
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "accelbench", "figure.dpi": DPI,
                         "axes.titleweight": "bold", "axes.titlesize": 11, "legend.frameon": False})
    return plt, sns


def load_tables(aggregate_dir: str | Path) -> dict:
    tables = {}
    for name in TABLE_NAMES:
        path = Path(aggregate_dir) / f"{name}.csv"
        tables[name] = pd.read_csv(path) if path.exists() and path.stat().st_size else pd.DataFrame()
    return tables


def _size_label(n: float) -> str:
    n = int(n)
    return f"{n // 1024}k" if n >= 8192 and n % 1024 == 0 else str(n)


def _bytes_label(b: float) -> str:
    b = float(b)
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if b >= scale:
            v = b / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{b:.0f} B"


def _wrap(label: str, width: int = 20) -> str:
    """Series labels on a categorical axis: one line per part, long parts wrapped."""
    return "\n".join(textwrap.fill(part, width) for part in str(label).split(" · "))


def _plain_log_y(ax):
    """Log y axis labelled 0.02, 0.5, 300 instead of 2×10⁻², for readers who are not plotting people."""
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    decades = math.log10(hi / lo) if lo > 0 and hi > lo else 1.0
    fmt = FuncFormatter(lambda v, _: f"{v:,.6g}" if 1e-4 <= v < 1e7 else f"{v:.0e}")
    ax.yaxis.set_major_formatter(fmt)
    subs = (1.0, 2.0, 5.0) if decades <= 2.5 else (1.0, 3.0) if decades <= 4 else (1.0,)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def _log2_axis(ax, values, label_fn=_size_label):
    values = sorted(set(float(v) for v in values if v == v and v > 0))
    ax.set_xscale("log", base=2)
    if values:
        ax.set_xticks(values)
        ax.set_xticklabels([label_fn(v) for v in values])
        ax.minorticks_off()


def _message(plt, title: str, text: str):
    fig, ax = plt.subplots(figsize=(8, 2.6))
    ax.axis("off")
    ax.set_title(title, loc="left")
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=12, color="#444444", wrap=True,
            transform=ax.transAxes)
    return fig


def _grid(plt, n_panels: int, ncols: int = 3, panel_w: float = 4.2, panel_h: float = 3.3, sharey=False):
    ncols = max(1, min(ncols, n_panels))
    nrows = (n_panels + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel_w * ncols, panel_h * nrows + 0.9), squeeze=False,
                             sharey=sharey)
    flat = list(axes.flat)
    for ax in flat[n_panels:]:
        ax.set_visible(False)
    return fig, flat[:n_panels]


def _legend_below(fig, handles, labels, ncol=None):
    if not handles:
        return
    ncol = ncol or min(len(labels), 3)
    fig.legend(handles, labels, loc="lower center", ncol=ncol, bbox_to_anchor=(0.5, 0.0), fontsize=9)


def _finish(fig, n_legend_rows: int = 1):
    bottom = min(0.35, (0.06 + 0.045 * n_legend_rows) * 4.5 / max(fig.get_figheight(), 2.5))
    fig.tight_layout(rect=(0, bottom, 1, 1))


def _series_handles(plt, labels_colors):
    return [Line2D([0], [0], color=c, marker="o", lw=2) for _, c in labels_colors], [lab for lab, _ in labels_colors]


def _flag_handles(statuses):
    present = [s for s in FLAG_MARKERS if s in set(statuses)]
    return ([Line2D([0], [0], ls="", marker=FLAG_MARKERS[s][0], mfc="none", mec="black", ms=8) for s in present],
            [f"flagged: {FLAG_MARKERS[s][1]}" for s in present])


def fig_matmul(plt, sns, tables, series, value: str):
    """TFLOP/s (``value='tflops'``) or % of peak (``value='pct_of_peak'``) against n, one panel per dtype."""
    title = "Matmul throughput" if value == "tflops" else "Matmul throughput as % of the device's peak"
    df = S.with_series(S.measured(tables["matmul"]), series)
    if value == "pct_of_peak" and not df.empty:
        df = df[df["pct_of_peak"].notna()]
    if df.empty:
        text = ("No matmul point was measured." if value == "tflops" else
                "No peak is known for any measured device.\nSet matmul.peak_tflops in the config to see % of peak.")
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
                    ax.scatter(f["n"], f[value], s=90, marker=marker, facecolors="none", edgecolors="black",
                               linewidths=1.4, zorder=5)
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
        text = ("No accelerator measured: these results hold CPU timings only,\nso there is no CPU-to-accelerator "
                "speedup to show." if not has_accel else
                "No size and dtype measured on both the CPU and an accelerator of the same run.")
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
            ax.annotate(f"{last['speedup']:.0f}×" if last["speedup"] >= 10 else f"{last['speedup']:.1f}×",
                        (last["n"], last["speedup"]), textcoords="offset points", xytext=(5, 0), va="center",
                        fontsize=8, color=pal[dtype])
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


def fig_warmup(plt, sns, tables, series):
    df = tables["warmup"]
    title = "Warm-up: the same workload repeated until its time is stable"
    if df is None or df.empty or not (df["iter_s"] > 0).any():
        return _message(plt, title, "No warm-up was measured.")
    df = S.with_series(df, series)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12.5, 4.4), gridspec_kw={"width_ratios": [1.35, 1]})
    per_dev = []
    for label, g in df.groupby("label", sort=False):
        color = g["color"].iloc[0]
        g = g.sort_values("iter")
        ax1.plot(g["iter"], g["iter_s"] * 1e3, color=color, lw=1.6, marker=".", ms=4, label=label)
        stable = g["stable_at_iter"].iloc[0]
        if stable == stable and stable >= 0:
            row = g[g["iter"] == stable]
            if not row.empty:
                ax1.scatter(row["iter"], row["iter_s"] * 1e3, s=80, marker="v", color=color, edgecolors="black",
                            zorder=5)
        per_dev.append((label, color, float(g["cold_s"].iloc[0]), float(g["warm_s"].iloc[0]), stable))
    _plain_log_y(ax1)
    ax1.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax1.set_xlabel("iteration")
    ax1.set_ylabel("time per iteration (ms, log scale)")
    ax1.set_title("Per-iteration time (▼ = stable from here)")
    x = np.arange(len(per_dev))
    w = 0.38
    for i, (label, color, cold, warm, _) in enumerate(per_dev):
        ax2.bar(i - w / 2, cold * 1e3, w, color=color, alpha=0.45, hatch="//", edgecolor=color)
        ax2.bar(i + w / 2, warm * 1e3, w, color=color, edgecolor=color)
        if warm > 0:
            ax2.text(i, cold * 1e3 * 1.15, f"cold = {cold / warm:.0f}× warm" if cold / warm >= 10 else
                     f"cold = {cold / warm:.1f}× warm", ha="center", va="bottom", fontsize=8)
    ax2.set_xlim(-0.9, max(len(per_dev) - 0.1, 0.9))
    ax2.set_xticks(x)
    ax2.set_xticklabels([_wrap(p[0]) for p in per_dev], fontsize=8)
    ax2.set_ylabel("ms (log scale)")
    ax2.set_title("Cold (first call, hatched) vs warm (stable median)")
    top = max(p[2] for p in per_dev) * 1e3
    bottom = min(p[3] for p in per_dev if p[3] > 0) * 1e3 if any(p[3] > 0 for p in per_dev) else top / 100
    ax2.set_yscale("log")
    ax2.set_ylim(bottom / 3, top * 4)
    _plain_log_y(ax2)
    h, lab = _series_handles(plt, [(p[0], p[1]) for p in per_dev])
    _legend_below(fig, h, lab)
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    _finish(fig, (len(lab) + 2) // 3)
    return fig


def fig_transfer(plt, sns, tables, series):
    df = tables["transfer"]
    title = "Host↔device copy bandwidth"
    if df is None or df.empty or not (df["status"] == "ok").any():
        return _message(plt, title, "Transfer not measured: no accelerator in these results\n"
                                    "(host↔device bandwidth is measured for accelerators only).")
    df = S.with_series(df[(df["status"] == "ok") & (df["gbps"] > 0)], series)
    directions = [d for d in ("h2d", "d2h") if d in set(df["direction"])] + sorted(
        set(df["direction"]) - {"h2d", "d2h"})
    fig, axes = _grid(plt, len(directions), ncols=2, panel_w=5.6, panel_h=3.6, sharey=True)
    names = {"h2d": "host → device", "d2h": "device → host"}
    used = []
    for ax, direction in zip(axes, directions):
        d = df[df["direction"] == direction]
        for (label, memory), g in d.groupby(["label", "memory"], sort=False):
            g = g.sort_values("size_bytes")
            color = g["color"].iloc[0]
            ax.plot(g["size_bytes"], g["gbps"], color=color, marker="o" if memory == "pinned" else "s",
                    ls="-" if memory == "pinned" else "--", lw=1.8)
            if (label, color) not in used:
                used.append((label, color))
        _log2_axis(ax, d["size_bytes"], _bytes_label)
        ax.set_title(names.get(direction, direction))
        ax.set_xlabel("transfer size")
        ax.set_ylabel("GB/s (10⁹ bytes/s, median)")
        ax.set_ylim(bottom=0)
    h, lab = _series_handles(plt, used)
    h += [Line2D([0], [0], color="#555555", ls="-", marker="o"), Line2D([0], [0], color="#555555", ls="--", marker="s")]
    lab += ["pinned host memory", "pageable host memory"]
    _legend_below(fig, h, lab)
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    _finish(fig, (len(lab) + 2) // 3)
    return fig


def _mode_palette(sns, modes):
    order = ["fp32", "tf32", "amp_bf16", "amp_fp16"]
    modes = sorted(set(modes), key=lambda m: (order.index(m) if m in order else 99, m))
    colors = sns.color_palette("colorblind", 10).as_hex()
    fixed = {"fp32": colors[7], "tf32": colors[9], "amp_bf16": colors[2], "amp_fp16": colors[4]}
    return modes, {m: fixed.get(m, colors[(5 + i) % 10]) for i, m in enumerate(modes)}


def fig_amp_step_time(plt, sns, tables, series):
    tr = tables["amp_trials"]
    title = "Training step time: FP32 vs AMP (mean of per-trial medians, 95% CI over seeds)"
    if tr is None or tr.empty or not (tr["step_median_s"] > 0).any():
        return _message(plt, title, "No AMP trial was measured.")
    tr = S.with_series(tr[tr["step_median_s"] > 0], series)
    tr["step_ms"] = tr["step_median_s"] * 1e3
    workloads = sorted(set(tr["workload"]))
    modes, pal = _mode_palette(sns, tr["mode"])
    labels = list(dict.fromkeys(series["label"][series["label"].isin(tr["label"])]))
    fig, axes = _grid(plt, len(workloads), ncols=2, panel_w=max(5.2, 1.6 * len(labels) + 2.2), panel_h=3.9)
    summ = S.amp_verdicts(tables["amp_summary"])
    summ = S.with_series(summ, series) if not summ.empty else summ
    for ax, workload in zip(axes, workloads):
        d = tr[tr["workload"] == workload]
        d = d.assign(label=d["label"].map(_wrap))
        sns.barplot(data=d, x="label", y="step_ms", hue="mode", order=[_wrap(x) for x in labels if _wrap(x) in set(d["label"])],
                    hue_order=modes, palette=pal, errorbar=("ci", 95), n_boot=500, seed=0, capsize=0.08,
                    err_kws={"linewidth": 1.2}, ax=ax)
        span = d["step_ms"].max() / d["step_ms"].min()
        log = span > 20  # devices far apart: a log axis keeps the fast one visible
        if log:
            _plain_log_y(ax)
        ax.set_title(f"workload: {workload}")
        ax.set_xlabel("")
        ax.set_ylabel("step time (ms, log scale)" if log else "step time (ms)")
        ax.tick_params(axis="x", labelsize=8)
        if ax.get_legend():
            ax.get_legend().remove()
        if not summ.empty:
            order = [_wrap(x) for x in labels if _wrap(x) in set(d["label"])]
            for _, r in summ[summ["workload"] == workload].iterrows():
                if _wrap(r["label"]) not in order or r["mode"] not in modes:
                    continue
                i = order.index(_wrap(r["label"]))
                k = modes.index(r["mode"])
                offset = (k - (len(modes) - 1) / 2) * 0.8 / len(modes)
                y = d[(d["label"] == _wrap(r["label"])) & (d["mode"] == r["mode"])]["step_ms"].max()
                if y == y:
                    ax.text(i + offset, y * 1.3 if log else y * 1.03, f"{r['speedup']:.2f}×", ha="center", va="bottom", fontsize=8,
                            fontweight="bold")
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi * 2.2) if log else ax.set_ylim(0, hi * 1.15)
    handles = [Patch(color=pal[m]) for m in modes]
    _legend_below(fig, handles, modes, ncol=len(modes))
    fig.suptitle(title + "\nlabels: speedup over FP32 from the summary", x=0.01, ha="left", fontweight="bold",
                 fontsize=10)
    _finish(fig)
    return fig


def fig_amp_loss(plt, sns, tables, series):
    st = tables["amp_steps"]
    title = "Training loss per step: FP32 vs AMP (mean over seeds, band = min–max)"
    if st is None or st.empty or not st["loss"].notna().any():
        return _message(plt, title, "No AMP training steps were recorded.")
    st = S.with_series(st[st["loss"].notna()], series)
    labels = list(dict.fromkeys(series["label"][series["label"].isin(st["label"])]))
    workloads = sorted(set(st["workload"]))
    modes, pal = _mode_palette(sns, st["mode"])
    nrows, ncols = len(labels), len(workloads)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 2.7 * nrows + 0.9), squeeze=False, sharex=True)
    for i, label in enumerate(labels):
        for j, workload in enumerate(workloads):
            ax = axes[i][j]
            d = st[(st["label"] == label) & (st["workload"] == workload)]
            if d.empty:
                ax.axis("off")
                continue
            # the FP32 baseline last, dashed, on top: where AMP tracks it exactly, both stay visible
            present = [m for m in modes if m in set(d["mode"]) and m != "fp32"] + (
                ["fp32"] if "fp32" in set(d["mode"]) else [])
            sns.lineplot(data=d, x="step", y="loss", hue="mode", hue_order=present, style="mode", style_order=present,
                         dashes={m: (4, 2) if m == "fp32" else "" for m in present}, palette=pal,
                         errorbar=("pi", 100), estimator="mean", lw=1.8, ax=ax, legend=False)
            ax.set_title(f"{label} — {workload}", fontsize=9.5)
            ax.set_ylabel("loss")
            ax.set_xlabel("training step" if i == nrows - 1 else "")
    _legend_below(fig, [Line2D([0], [0], color=pal[m], lw=2, ls="--" if m == "fp32" else "-") for m in modes], modes,
                  ncol=len(modes))
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    _finish(fig)
    return fig


# ---- the comparison of two runs (accelbench compare; not a registry figure: it exists only with a baseline) ----

VERDICT_COLORS = {"slower": "#D55E00", "faster": "#009E73", "same": "#7f7f7f", "inconclusive": "#E69F00"}
DEVICE_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def fig_comparison(plt, sns, points: pd.DataFrame, baseline: str, candidate: str, min_effect: float):
    """Speed change of every matched point with its 95% interval, coloured by verdict: matmul per dtype against n
    (one marker per device), the other points (warm-up, transfer, AMP trials) as one labelled row each; the band
    is +-min_effect."""
    title = f"{candidate} against {baseline}: speed change per point (95% interval; band: ±{100 * min_effect:g}%)"
    pts = points[(points["match"] == "both") & points["speed_change_pct"].notna()] if len(points) else points
    if pts is None or pts.empty:
        return _message(plt, title, "No matched point has a ratio to show.")
    mm = pts[(pts["table"] == "matmul") & pts["n"].notna()] if "n" in pts.columns else pts.iloc[0:0]
    other = pts.drop(index=mm.index)
    dtypes = S.dtype_sorted(mm["dtype"]) if len(mm) else []
    panels = len(dtypes) + (1 if len(other) else 0)
    fig, axes = _grid(plt, panels, ncols=min(3, panels), panel_w=4.6, panel_h=3.4 if not len(other) else
                      max(3.4, 0.28 * len(other) + 1.2))
    devices = list(dict.fromkeys(pts["device"].astype(str)))
    marker = {d: DEVICE_MARKERS[i % len(DEVICE_MARKERS)] for i, d in enumerate(devices)}

    def draw(ax, x, row, horizontal=False):
        # on the axis: speed ratio 1 + change (log scale, so -50% and +100% lie equally far from 0)
        y, lo, hi = (1 + row[c] / 100 for c in ("speed_change_pct", "speed_change_ci95_low_pct",
                                                  "speed_change_ci95_high_pct"))
        err = [[max(0.0, y - lo)] if lo == lo else [0.0], [max(0.0, hi - y)] if hi == hi else [0.0]]
        color = VERDICT_COLORS.get(row["verdict"], "#333333")
        kw = dict(fmt=marker[str(row["device"])], color=color, ms=6, capsize=3, lw=1.6)
        (ax.errorbar(y, x, xerr=err, **kw) if horizontal else ax.errorbar(x, y, yerr=err, **kw))

    for ax, dtype in zip(axes, dtypes):
        d = mm[mm["dtype"] == dtype].sort_values("n")
        for i, (_, row) in enumerate(d.iterrows()):
            shift = 1.0 + 0.04 * (devices.index(str(row["device"])) - (len(devices) - 1) / 2)
            draw(ax, float(row["n"]) * shift, row)
        ax.axhspan(1 - min_effect, 1 + min_effect, color="#dddddd", alpha=0.6, lw=0)
        ax.axhline(1, color="#444444", lw=1)
        _change_axis(ax, "y", d)
        _log2_axis(ax, d["n"])
        ax.set_title(f"matmul {S.DTYPE_LABEL.get(dtype, dtype)}")
        ax.set_xlabel("matrix size n")
        ax.set_ylabel("speed change (− = slower; log scale)")
    if len(other):
        ax = axes[-1]
        labels = []
        for i, (_, row) in enumerate(other.iterrows()):
            draw(ax, i, row, horizontal=True)
            labels.append(str(row["label"]))
        ax.axvspan(1 - min_effect, 1 + min_effect, color="#dddddd", alpha=0.6, lw=0)
        ax.axvline(1, color="#444444", lw=1)
        _change_axis(ax, "x", other)
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels([textwrap.shorten(lab, 44) for lab in labels], fontsize=7.5)
        ax.invert_yaxis()
        ax.set_title("warm-up, transfer, AMP trials")
        ax.set_xlabel("speed change (− = slower; log scale)")
    handles = [Line2D([0], [0], ls="", marker="o", color=c) for c in VERDICT_COLORS.values()]
    labels = list(VERDICT_COLORS)
    if len(devices) > 1:
        handles += [Line2D([0], [0], ls="", marker=marker[d], color="#555555") for d in devices]
        labels += devices
    _legend_below(fig, handles, labels, ncol=min(len(labels), 6))
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold", fontsize=10)
    _finish(fig, (len(labels) + 5) // 6)
    return fig


CHANGE_TICKS_PCT = (-99, -90, -75, -50, -25, -10, -5, -2, 0, 2, 5, 10, 25, 50, 100, 300, 1000, 1e4, 1e5, 1e6)


def _change_axis(ax, which: str, rows: pd.DataFrame):
    """A log axis of the speed ratio labelled as speed change in %, ticks at round changes within the data."""
    values = 1 + pd.concat([rows[c] for c in ("speed_change_pct", "speed_change_ci95_low_pct",
                                               "speed_change_ci95_high_pct")]).dropna().to_numpy(float) / 100
    values = values[values > 0]
    lo, hi = (min(values.min(), 0.9), max(values.max(), 1.1)) if len(values) else (0.9, 1.1)
    lo, hi = lo / 1.08, hi * 1.08
    gap = math.log(hi / lo) / 7  # at most about 7 labels: each at least this far (in log space) from the last
    ticks = [1.0]
    for side in (sorted(1 + t / 100 for t in CHANGE_TICKS_PCT if 1 < 1 + t / 100 <= hi),
                 sorted((1 + t / 100 for t in CHANGE_TICKS_PCT if lo <= 1 + t / 100 < 1), reverse=True)):
        last = 1.0
        for t in side:
            if abs(math.log(t / last)) >= gap:
                ticks.append(t)
                last = t
    ticks.sort()
    label = FuncFormatter(lambda v, _: "0" if abs(v - 1) < 1e-9 else f"{(v - 1) * 100:+,.0f}%".replace("-", "\u2212"))
    axis = ax.yaxis if which == "y" else ax.xaxis
    (ax.set_yscale if which == "y" else ax.set_xscale)("log")
    (ax.set_ylim if which == "y" else ax.set_xlim)(lo, hi)
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(label)
    axis.set_minor_locator(NullLocator())


def write_comparison_figure(points: pd.DataFrame, baseline: str, candidate: str, min_effect: float,
                            png: str | Path, svg: str | Path) -> list[Path]:
    """``fig_comparison`` as PNG and SVG, each written to a temporary name and renamed into place."""
    plt, sns = _setup()
    fig = fig_comparison(plt, sns, points, baseline, candidate, min_effect)
    written = []
    for path, ext in ((Path(png), "png"), (Path(svg), "svg")):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".{ext}", dir=path.parent)
        os.close(fd)
        try:
            fig.savefig(tmp, format=ext, dpi=DPI, metadata={"Date": None} if ext == "svg" else {"Software": None})
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        written.append(path)
    plt.close(fig)
    return written


# figure name (registry.FIGURES) -> how it is drawn
DRAW = {
    "matmul_tflops": lambda plt, sns, tables, series: fig_matmul(plt, sns, tables, series, "tflops"),
    "matmul_pct_of_peak": lambda plt, sns, tables, series: fig_matmul(plt, sns, tables, series, "pct_of_peak"),
    "speedup": fig_speedup,
    "warmup": fig_warmup,
    "transfer": fig_transfer,
    "amp_step_time": fig_amp_step_time,
    "amp_loss": fig_amp_loss,
}


def make_figures(tables: dict) -> dict:
    """name -> matplotlib Figure for every name in FIGURES."""
    plt, sns = _setup()
    series = S.series(tables)
    return {name: DRAW[name](plt, sns, tables, series) for name in FIGURES}


def write_figures(aggregate_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """Every figure as ``<name>.png`` and ``<name>.svg`` in ``out_dir`` (written atomically)."""
    plt, _ = _setup()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = make_figures(load_tables(aggregate_dir))
    written = []
    for name in FIGURES:
        fig = figures[name]
        for ext in ("png", "svg"):
            path = out_dir / f"{name}.{ext}"
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".{ext}", dir=out_dir)
            os.close(fd)
            try:
                fig.savefig(tmp, format=ext, dpi=DPI, metadata={"Date": None} if ext == "svg" else {"Software": None})
                os.chmod(tmp, 0o644)
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            written.append(path)
        plt.close(fig)
    return written


def add_arguments(p) -> None:
    p.add_argument("--aggregate-dir", required=True, help="folder with the aggregated tables (accelbench aggregate)")
    p.add_argument("--out-dir", required=True, help="where <figure>.png and <figure>.svg go")


def cli(args) -> int:
    written = write_figures(args.aggregate_dir, args.out_dir)
    print(f"accelbench plots: {len(written)} file(s) -> {args.out_dir}", file=sys.stderr)
    return 0
