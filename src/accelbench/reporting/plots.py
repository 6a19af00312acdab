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
* ``scaling_efficiency``: DDP (and DataParallel) throughput and weak-scaling efficiency against world size,
  95% CI over seeds.
* ``collective_busbw``: nccl-tests' bus bandwidth against message size per collective and world size.
* ``peer_copy``: the device-to-device copy matrix (GB/s) as a heatmap, peer access on and off.
* ``telemetry``: per device, clock, power and temperature over the run (both stages' series), every
  matmul point, soak interval and AMP trial shaded, throttled ones red, clock_ramp points marked.
* ``matmul_soak``: the sustained mode, TFLOP/s and clock per interval, the settled stretch shaded.
* ``membw``: device-local copy and triad GB/s against array size (95% CI), the last-level cache and the
  datasheet peak marked, the launch floor in the legend.
* ``roofline``: every trustworthy matmul point (square sweep, named shapes, the search's best) and every
  AMP training step by arithmetic intensity against the measured memory roof and the compute roofs;
  hollow markers are ``launch_bound`` (``reporting.roofline``).

One colour per (run, device) in every figure (``tables.series``), from the colour-blind palette. The
figure names are ``registry.FIGURES``; ``make_figures`` draws each with its declaration's ``draw`` hook.
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
from . import roofline as R  # noqa: E402
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
    df = S.with_series(S.measured(S.square_points(tables["matmul"])), series)
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


# ---- scaling (stages/scaling.py) ------------------------------------------------------------------------------

SCALING_OFF_TEXT = ("Scaling not measured: scaling.enabled is false (the default).\n"
                    "Set  scaling: {enabled: true}  in the config to measure DDP scaling, collectives and device copies.")
MODE_MARKERS = {"fp32": "o", "tf32": "s", "amp_bf16": "^", "amp_fp16": "v"}
METHOD_STYLE = {"ddp": "-", "dp": ":"}
METHOD_NAME = {"ddp": "DistributedDataParallel", "dp": "nn.DataParallel"}


def _scaling_not_measured(plt, title: str, df, measured_anywhere: bool = True) -> object | None:
    """The figure to show instead when scaling was off (every row ``disabled``) or, with
    ``measured_anywhere``, when no backend measured it at all (absent, unsupported: their reasons)."""
    if df is None or df.empty or "status" not in df.columns:
        return _message(plt, title, "No scaling result in these data.")
    statuses = set(df["status"].dropna().astype(str))
    if statuses and statuses <= {"disabled"}:
        return _message(plt, title, SCALING_OFF_TEXT)
    if measured_anywhere and statuses and statuses <= {"disabled", "absent", "unsupported"}:
        details = sorted(set(df.get("status_detail", pd.Series(dtype=object)).dropna().astype(str)))[:3]
        reasons = details or [f"status: {', '.join(sorted(statuses))}"]
        return _message(plt, title, "Scaling not measured here:\n" + "\n".join(textwrap.shorten(r, 110)
                                                                                for r in reasons))
    return None


def fig_scaling_efficiency(plt, sns, tables, series):
    df = tables["scaling"]
    title = "Weak scaling: throughput and efficiency against world size (95% CI over seeds)"
    off = _scaling_not_measured(plt, title, df)
    if off is not None:
        return off
    ok = df[(df["status"] == "ok") & (pd.to_numeric(df["samples_per_s"], errors="coerce") > 0)]
    if ok.empty:
        reasons = sorted(set(df.get("status_detail", pd.Series(dtype=object)).dropna().astype(str)))[:2]
        return _message(plt, title, "No world size finished training.\n" + "\n".join(textwrap.shorten(r, 110)
                                                                                    for r in reasons))
    ok = S.with_series(ok, series)
    workloads = sorted(set(ok["workload"]))
    fig, axes = plt.subplots(len(workloads), 2, figsize=(11.5, 3.6 * len(workloads) + 1.0), squeeze=False)
    used, modes = [], []
    for row, workload in zip(axes, workloads):
        d = ok[ok["workload"] == workload]
        for (label, method, mode), g in d.groupby(["label", "method", "mode"], sort=False):
            g = g.sort_values("world_size")
            color = g["color"].iloc[0] if isinstance(g["color"].iloc[0], str) else "#555555"
            marker = MODE_MARKERS.get(mode, "^")
            style = METHOD_STYLE.get(method, "--")
            x = g["world_size"].to_numpy(float)
            sps = g["samples_per_s"].to_numpy(float)
            gb = g["samples_per_s"] * g["step_median_s"]
            lo = (gb / g["step_ci95_high_s"]).to_numpy(float)
            hi = (gb / g["step_ci95_low_s"]).to_numpy(float)
            lo, hi = np.where(np.isfinite(lo), lo, sps), np.where(np.isfinite(hi), hi, sps)
            row[0].errorbar(x, sps, yerr=np.vstack([np.clip(sps - lo, 0, None), np.clip(hi - sps, 0, None)]),
                            color=color, marker=marker, ls=style, lw=1.8, capsize=3)
            eff = g["scaling_efficiency"].to_numpy(float)
            elo = np.where(np.isfinite(g["efficiency_ci95_low"].to_numpy(float)), g["efficiency_ci95_low"], eff)
            ehi = np.where(np.isfinite(g["efficiency_ci95_high"].to_numpy(float)), g["efficiency_ci95_high"], eff)
            row[1].errorbar(x, eff, yerr=np.vstack([np.clip(eff - elo, 0, None), np.clip(ehi - eff, 0, None)]),
                            color=color, marker=marker, ls=style, lw=1.8, capsize=3)
            if (label, color) not in used:
                used.append((label, color))
            if mode not in modes:
                modes.append(mode)
        sizes = sorted(set(int(v) for v in d["world_size"]))
        for ax in row:
            ax.set_xticks(sizes)
            ax.set_xlabel("world size (ranks)")
        row[0].set_title(f"{workload}: global throughput")
        row[0].set_ylabel("samples/s (median step, 95% CI)")
        row[0].set_ylim(bottom=0)
        row[1].axhline(1.0, color="#444444", ls="--", lw=1)
        row[1].set_title(f"{workload}: efficiency = thr_N / (N · thr_1)")
        row[1].set_ylabel("scaling efficiency")
        top = np.nanmax(d["efficiency_ci95_high"].to_numpy(float)) if d["efficiency_ci95_high"].notna().any() else 1.2
        row[1].set_ylim(0, min(max(1.25, float(top) * 1.05), 3.0))
    h, lab = _series_handles(plt, used)
    h += [Line2D([0], [0], color="#555555", ls="", marker=MODE_MARKERS.get(m, "^")) for m in modes]
    lab += modes
    methods = [m for m in METHOD_STYLE if m in set(ok["method"])]
    h += [Line2D([0], [0], color="#555555", ls=METHOD_STYLE[m]) for m in methods]
    lab += [METHOD_NAME[m] for m in methods]
    _legend_below(fig, h, lab, ncol=3)
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    _finish(fig, (len(lab) + 2) // 3)
    return fig


def fig_collective_busbw(plt, sns, tables, series):
    df = tables["collectives"]
    title = "Collectives: bus bandwidth against message size (nccl-tests' busbw)"
    off = _scaling_not_measured(plt, title, df)
    if off is not None:
        return off
    ok = df[(df["status"] == "ok") & (pd.to_numeric(df["busbw_gbps"], errors="coerce") > 0)]
    if ok.empty:
        return _message(plt, title, "No collective was timed: they need a world of 2 ranks or more.")
    ok = S.with_series(ok, series)
    collectives = [c for c in ("all_reduce", "all_gather", "reduce_scatter", "broadcast") if c in set(ok["collective"])]
    fig, axes = _grid(plt, len(collectives), ncols=2, panel_w=5.6, panel_h=3.6)
    worlds = sorted(set(int(w) for w in ok["world_size"]))
    labels = list(dict.fromkeys(ok["label"].fillna("")))
    pal = dict(zip(worlds, sns.color_palette("viridis", len(worlds) + 1).as_hex()))
    styles = dict(zip(labels, ["-", "--", ":", "-."] * 4))
    for ax, collective in zip(axes, collectives):
        d = ok[ok["collective"] == collective]
        for (label, world), g in d.groupby([d["label"].fillna(""), "world_size"], sort=False):
            g = g.sort_values("size_bytes")
            ax.plot(g["size_bytes"], g["busbw_gbps"], color=pal[int(world)], ls=styles[label], marker="o", ms=4, lw=1.8)
        _log2_axis(ax, d["size_bytes"], _bytes_label)
        ax.tick_params(axis="x", labelrotation=45, labelsize=7)
        _plain_log_y(ax)
        ax.set_title(collective)
        ax.set_xlabel("size S")
        ax.set_ylabel("busbw GB/s (median)")
    h = [Line2D([0], [0], color=pal[w], lw=2) for w in worlds]
    lab = [f"{w} ranks" for w in worlds]
    if len(labels) > 1:
        h += [Line2D([0], [0], color="#555555", ls=styles[x]) for x in labels]
        lab += labels
    _legend_below(fig, h, lab, ncol=4)
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    _finish(fig, (len(lab) + 3) // 4)
    return fig


def fig_peer_copy(plt, sns, tables, series):
    df = tables["peer_copy"]
    title = "Device-to-device copies (GB/s): source → destination"
    off = _scaling_not_measured(plt, title, df, measured_anywhere=False)
    if off is not None:
        return off
    ok = df[(df["status"] == "ok") & (pd.to_numeric(df["gbps"], errors="coerce") > 0)]
    if ok.empty:
        return _message(plt, title, "No device-to-device copy: they need a backend with 2 devices or more\n"
                                    "(the CPU is one device).")
    panels = list(ok.groupby(["run_id", "backend", "peer"], sort=True))
    fig, axes = _grid(plt, len(panels), ncols=2, panel_w=5.4, panel_h=4.4)
    for ax, ((run_id, backend, peer), g) in zip(axes, panels):
        devices = sorted(set(g["src"]) | set(g["dst"]), key=lambda d: (len(d), d))
        grid = g.pivot_table(index="src", columns="dst", values="gbps", aggfunc="median").reindex(index=devices,
                                                                                                   columns=devices)
        sns.heatmap(grid, ax=ax, annot=True, fmt=".3g", cmap="viridis", cbar_kws={"label": "GB/s"},
                    annot_kws={"fontsize": 8}, linewidths=0.5, linecolor="white")
        ax.set_title(f"{run_id} · {backend} · peer access {'on' if peer == 'on' else 'off (host-staged)'}", fontsize=9.5)
        ax.set_xlabel("destination")
        ax.set_ylabel("source")
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    fig.tight_layout()
    return fig


# ---- telemetry (measure.telemetry) --------------------------------------------------------------------

WINDOW_STYLE = {"matmul": ("#4c72b0", "matmul point"), "soak": ("#8172b3", "soak interval"),
                "amp": ("#55a868", "AMP trial")}
STRIP_PANELS = (("clock_mhz", "clock (MHz)"), ("power_w", "power (W)"), ("temp_c", "temperature (°C)"))


def telemetry_series(tables: dict) -> pd.DataFrame:
    """Every reading of every device (both stages' series), sorted by time, readings only."""
    parts = [tables.get(name) for name in ("telemetry_matmul", "telemetry_amp")]
    parts = [p for p in parts if p is not None and not p.empty and "time_unix_s" in p.columns]
    if not parts:
        return pd.DataFrame()
    df = pd.concat(parts, ignore_index=True)
    df = df[(df["status"].astype(str) == "ok") & pd.to_numeric(df["time_unix_s"], errors="coerce").notna()].copy()
    for c in ("time_unix_s", "clock_mhz", "power_w", "temp_c"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    df["run_id"], df["device"] = df["run_id"].astype(str), df["device"].astype(str)
    return df.sort_values("time_unix_s", kind="stable")


def _with_gaps(t: np.ndarray, y: np.ndarray, gap_s: float):
    """Break the line where readings are further apart than ``gap_s`` (the sampler runs only inside windows)."""
    if len(t) < 2:
        return t, y
    cut = np.nonzero(np.diff(t) > gap_s)[0]
    return np.insert(t, cut + 1, np.nan), np.insert(y, cut + 1, np.nan)


def fig_telemetry(plt, sns, tables, series):
    """Per device: clock, power and temperature over the run, with every matmul point, soak interval and AMP
    trial shaded, throttled ones in red and points measured before the clock settled marked."""
    title = "What the device was doing: clock, power and temperature over the run"
    data = telemetry_series(tables)
    if data.empty:
        return _message(plt, title, "No telemetry was recorded: telemetry.hz is 0, no device had a sensor, or the\n"
                                    "runs predate telemetry (see the Telemetry section).")
    windows = S.telemetry_windows(tables)
    keys = [(r["run_id"], r["device"], r["label"], r["color"]) for _, r in series.iterrows()
            if ((data["run_id"] == r["run_id"]) & (data["device"] == r["device"])).any()]
    nrows = 3 * len(keys)
    fig, axes = plt.subplots(nrows, 1, figsize=(12.5, 1.35 * nrows + 1.2), squeeze=False, sharex=False)
    for k, (run_id, device, label, color) in enumerate(keys):
        d = data[(data["run_id"] == run_id) & (data["device"] == device)]
        t0 = float(d["time_unix_s"].min())
        t = (d["time_unix_s"] - t0).to_numpy(float)
        step = float(np.median(np.diff(t))) if len(t) > 1 else 1.0
        w = windows[(windows["run_id"] == run_id) & (windows["device"] == device)]
        for j, (col, ylabel) in enumerate(STRIP_PANELS):
            ax = axes[3 * k + j][0]
            y = d[col].to_numpy(float)
            for _, win in w.iterrows():
                lo, hi = win["start_unix_s"] - t0, win["end_unix_s"] - t0
                red = S.as_bool(win["throttled"]) is True
                ax.axvspan(lo, hi, facecolor="#c44e52" if red else WINDOW_STYLE[win["kind"]][0],
                           alpha=0.35 if red else 0.12, edgecolor="white", lw=0.8)  # white edge: where points meet
                if j == 0 and S.as_bool(win["clock_ramp"]) is True:
                    ax.plot([(lo + hi) / 2], [1.0], marker="v", color="#dd8452", ms=6, transform=ax.get_xaxis_transform(),
                            clip_on=False)
            if np.isfinite(y).any():
                tt, yy = _with_gaps(t, y, max(0.2, 3 * step))
                ax.plot(tt, yy, color=color, lw=1.3)
                lo_y, hi_y = np.nanmin(y), np.nanmax(y)
                pad = max((hi_y - lo_y) * 0.15, abs(hi_y) * 0.02, 1.0)
                ax.set_ylim(lo_y - pad, hi_y + pad)
            else:
                ax.text(0.5, 0.5, f"no {ylabel.split(' (')[0]} reading on this device (why: Telemetry section)",
                        ha="center", va="center", transform=ax.transAxes, fontsize=9, color="#666666")
                ax.set_yticks([])
            ax.set_xlim(0, max(float(t.max()), 1e-3))
            ax.set_ylabel(ylabel, fontsize=8)
            ax.tick_params(labelsize=8)
            if j == 0:
                ax.set_title(label, loc="left", fontsize=10, color=color)
            if j < 2:
                ax.set_xticklabels([])
            else:
                ax.set_xlabel("seconds since the device's first reading in the run", fontsize=8)
    handles = [Patch(color=c, alpha=0.3) for c, _ in WINDOW_STYLE.values()] + [
        Patch(color="#c44e52", alpha=0.5), Line2D([0], [0], ls="", marker="v", color="#dd8452")]
    labels = [lab for _, lab in WINDOW_STYLE.values()] + ["throttled", "clock not settled (clock_ramp)"]
    _legend_below(fig, handles, labels, ncol=5)
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    _finish(fig, 1)
    return fig


def fig_matmul_soak(plt, sns, tables, series):
    """Per soaked device: TFLOP/s and clock over the soak; the settled stretch shaded."""
    title = "Sustained mode (matmul.soak_s): throughput and clock over time"
    soak = tables.get("matmul_soak")
    if soak is None or soak.empty or not (soak["status"].astype(str) == "ok").any():
        return _message(plt, title, "No soak was run (matmul.soak_s is 0): boost and sustained readings are not\n"
                                    "told apart here. Set matmul.soak_s to hold the largest point.")
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


def _fmt_us(seconds: float) -> str:
    if not seconds == seconds:
        return "—"
    return f"{seconds * 1e6:.3g} µs" if seconds < 1e-3 else f"{seconds * 1e3:.3g} ms"


def fig_membw(plt, sns, tables, series):
    df = tables.get("membw")
    title = "Device memory bandwidth: copy (dashed) and triad (solid), median with 95% CI"
    if df is None or df.empty or "kernel" not in df.columns or not (
            df["kernel"].isin(["copy", "triad"]) & df["status"].isin(S.TRUSTED)).any():
        return _message(plt, title, "No memory bandwidth was measured (stage membw).")
    roofs = R.device_roofs(df)
    ok = S.with_series(df[df["kernel"].isin(["copy", "triad"]) & df["status"].isin(S.TRUSTED) & (df["gbps"] > 0)],
                       series)
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
            ax.errorbar(d["size_bytes"], y, yerr=np.vstack([np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)]),
                        color=color, ls=ls, marker="o" if kernel == "triad" else "s", ms=4, lw=1.7, capsize=2.5)
        cache = pd.to_numeric(g["cache_bytes"], errors="coerce").dropna()
        if len(cache):
            ax.axvline(float(cache.iloc[0]), color=color, ls=":", lw=1.2)
            ax.text(float(cache.iloc[0]), 0.98, " last-level cache", transform=ax.get_xaxis_transform(), color=color,
                    fontsize=7.5, va="top", rotation=90)
        r = roofs[(roofs["run_id"] == run_id) & (roofs["device"] == device)]
        peak = float(r["peak_gbps"].iloc[0]) if len(r) else math.nan
        if peak == peak:
            ax.axhline(peak, color=color, ls="-.", lw=1.1)
            ax.text(g["size_bytes"].min(), peak, f" datasheet peak {peak:,.0f} GB/s",
                    color=color, fontsize=7.5, va="bottom")
        launch = float(r["launch_s"].iloc[0]) if len(r) else math.nan
        handles.append(Line2D([0], [0], color=color, marker="o", lw=2))
        labels.append(f"{label} (launch floor {_fmt_us(launch)})")
    _log2_axis(ax, ok["size_bytes"], _bytes_label)
    ax.tick_params(axis="x", labelsize=8, labelrotation=30)
    _plain_log_y(ax)
    ax.set_xlabel("size of each array (float32)")
    ax.set_ylabel("GB/s (10⁹ bytes/s, STREAM byte counts)")
    handles += [Line2D([0], [0], color="#555555", ls="-", marker="o"), Line2D([0], [0], color="#555555", ls="--",
                                                                               marker="s")]
    labels += ["triad a = b + s·c (3 arrays)", "copy b = a (2 arrays)"]
    _legend_below(fig, handles, labels, ncol=2)
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    _finish(fig, (len(labels) + 1) // 2)
    return fig


ROOFLINE_MARKERS = {"square": ("o", "square sweep n×n×n"), "shape": ("s", "matmul.shapes"),
                    "search": ("*", "search's best shape"), "amp": ("^", "AMP / FP32 training step (GEMMs)")}


def fig_roofline(plt, sns, tables, series):
    title = ("Roofline: TFLOP/s against arithmetic intensity\n"
             "memory roof = measured bandwidth (membw), compute roofs = peaks")
    pts = R.roofline_points(tables)
    if pts.empty:
        return _message(plt, title, "No trustworthy matmul point or AMP trial to place on a roofline.")
    pts = S.with_series(pts, series)
    labels = [lab for lab in series["label"] if lab in set(pts["label"])]
    fig, axes = _grid(plt, len(labels), ncols=2, panel_w=6.4 if len(labels) > 1 else 9.0, panel_h=4.6)
    dtypes = S.dtype_sorted(pts["dtype"])
    pal = dict(zip(dtypes, sns.color_palette("colorblind", len(dtypes) + 3).as_hex()[3:]))
    for ax, label in zip(axes, labels):
        d = pts[pts["label"] == label]
        x = d["intensity"].to_numpy(float)
        finite = x[np.isfinite(x) & (x > 0)]
        lo, hi = (finite.min() / 4, finite.max() * 4) if len(finite) else (0.1, 1000.0)
        bw = float(d["bandwidth_gbps"].dropna().iloc[0]) if d["bandwidth_gbps"].notna().any() else math.nan
        roofs = d.dropna(subset=["compute_roof_tflops"]).drop_duplicates("dtype")
        top = float(roofs["compute_roof_tflops"].max()) if len(roofs) else math.nan
        if bw == bw:
            lo = min(lo, (top * 1e3 / bw) / 50 if top == top else lo)
            hi = max(hi, (top * 1e3 / bw) * 8 if top == top else hi)
            xs = np.geomspace(lo, hi, 200)
            ys = xs * bw / 1e3
            if top == top:
                ys = np.minimum(ys, top)
            ax.plot(xs, ys, color="#333333", lw=1.6)
            ax.text(lo, lo * bw / 1e3, f" memory roof {S.fmt_num(bw)} GB/s", fontsize=7.5, color="#333333",
                    va="bottom")
        for _, r in roofs.iterrows():
            peak = float(r["compute_roof_tflops"])
            start = peak * 1e3 / bw if bw == bw else lo
            ax.plot([start, hi], [peak, peak], color=pal[r["dtype"]], lw=1.3, ls="--")
            roof = "peak" if r["roof_source"] == "peak" else "best"
            ax.text(hi, peak, f"{S.DTYPE_LABEL.get(r['dtype'], r['dtype'])} {roof} ",
                    fontsize=7.5, color=pal[r["dtype"]], ha="right", va="bottom")
        for (kind, dtype, launch), g in d.groupby(["kind", "dtype", d["verdict"] == "launch_bound"], sort=False):
            marker = ROOFLINE_MARKERS.get(kind, ("o", kind))[0]
            ax.scatter(g["intensity"], g["tflops"], marker=marker, s=90 if kind == "search" else 36,
                       facecolors="none" if launch else pal[dtype], edgecolors=pal[dtype], linewidths=1.3, zorder=4)
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        _plain_log_y(ax)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("arithmetic intensity (FLOP/byte of A, B and C)")
        ax.set_ylabel("TFLOP/s")
    handles = [Patch(color=pal[dt]) for dt in dtypes]
    names = [S.DTYPE_LABEL.get(dt, dt) for dt in dtypes]
    kinds = [k for k in ROOFLINE_MARKERS if k in set(pts["kind"])]
    handles += [Line2D([0], [0], ls="", marker=ROOFLINE_MARKERS[k][0], color="#555555", ms=8) for k in kinds]
    names += [ROOFLINE_MARKERS[k][1] for k in kinds]
    handles += [Line2D([0], [0], ls="", marker="o", mfc="none", mec="#555555", ms=8)]
    names += [f"hollow: launch_bound (≤ {R.LAUNCH_FACTOR:g}× the launch floor)"]
    _legend_below(fig, handles, names, ncol=3)
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold", fontsize=10)
    _finish(fig, (len(names) + 2) // 3)
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


def fig_matmul_tflops(plt, sns, tables, series):
    return fig_matmul(plt, sns, tables, series, "tflops")


def fig_matmul_pct_of_peak(plt, sns, tables, series):
    return fig_matmul(plt, sns, tables, series, "pct_of_peak")


def drawer(name: str):
    """How figure ``name`` is drawn: its declaration's ``draw`` hook (registry.FIGURES), loaded now."""
    return registry.FIGURES[name].draw.load()


def make_figures(tables: dict) -> dict:
    """name -> matplotlib Figure for every name in FIGURES."""
    plt, sns = _setup()
    series = S.series(tables)
    return {name: drawer(name)(plt, sns, tables, series) for name in FIGURES}


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
