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
import sys
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg", force=True)  # before pyplot: files only, never a window
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

from .. import columns, registry
from ..run.io import atomic_file
from . import roofline as R
from . import tables as S

FIGURES = list(registry.FIGURES)
TABLE_NAMES = list(registry.TABLES)
FLAG_MARKERS = {
    "unstable": ("D", "unstable"),
    "invalid": ("X", "invalid (> peak)"),
    "wrong_result": ("P", "wrong result"),
}
DPI = 110


def _setup():
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind", font_scale=0.9)
    plt.rcParams.update(
        {
            "svg.fonttype": "none",
            "svg.hashsalt": "accelbench",
            "figure.dpi": DPI,
            "axes.titleweight": "bold",
            "axes.titlesize": 11,
            "legend.frameon": False,
        }
    )
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
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
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
    values = sorted({float(v) for v in values if v == v and v > 0})
    ax.set_xscale("log", base=2)
    if values:
        ax.set_xticks(values)
        ax.set_xticklabels([label_fn(v) for v in values])
        ax.minorticks_off()


def _message(plt, title: str, text: str):
    fig, ax = plt.subplots(figsize=(8, 2.6))
    ax.axis("off")
    ax.set_title(title, loc="left")
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=12, color="#444444", wrap=True, transform=ax.transAxes)
    return fig


def _grid(plt, n_panels: int, ncols: int = 3, panel_w: float = 4.2, panel_h: float = 3.3, sharey=False):
    ncols = max(1, min(ncols, n_panels))
    nrows = (n_panels + ncols - 1) // ncols
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(panel_w * ncols, panel_h * nrows + 0.9), squeeze=False, sharey=sharey
    )
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
    return (
        [Line2D([0], [0], ls="", marker=FLAG_MARKERS[s][0], mfc="none", mec="black", ms=8) for s in present],
        [f"flagged: {FLAG_MARKERS[s][1]}" for s in present],
    )


# ---- scaling (stages/scaling.py) ------------------------------------------------------------------------------

# ---- telemetry (measure.telemetry) --------------------------------------------------------------------

STRIP_PANELS = (("clock_mhz", "clock (MHz)"), ("power_w", "power (W)"), ("temp_c", "temperature (°C)"))


def telemetry_series(tables: dict) -> pd.DataFrame:
    """Every reading of every device (both stages' series), sorted by time, readings only."""
    parts = [tables.get(name) for name, t in registry.TABLES.items() if t.telemetry_series]
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
        return _message(
            plt,
            title,
            "No telemetry was recorded: telemetry.hz is 0, no device had a sensor, or the\n"
            "runs predate telemetry (see the Telemetry section).",
        )
    windows = S.telemetry_windows(tables)
    style = {w.kind: (w.color, w.one) for w in S.window_kinds().values()}  # the stages' Windows declarations
    keys = [
        (r["run_id"], r["device"], r["label"], r["color"])
        for _, r in series.iterrows()
        if ((data["run_id"] == r["run_id"]) & (data["device"] == r["device"])).any()
    ]
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
                ax.axvspan(
                    lo,
                    hi,
                    facecolor="#c44e52" if red else style[win["kind"]][0],
                    alpha=0.35 if red else 0.12,
                    edgecolor="white",
                    lw=0.8,
                )  # white edge: where points meet
                if j == 0 and S.as_bool(win["clock_ramp"]) is True:
                    ax.plot(
                        [(lo + hi) / 2],
                        [1.0],
                        marker="v",
                        color="#dd8452",
                        ms=6,
                        transform=ax.get_xaxis_transform(),
                        clip_on=False,
                    )
            if np.isfinite(y).any():
                tt, yy = _with_gaps(t, y, max(0.2, 3 * step))
                ax.plot(tt, yy, color=color, lw=1.3)
                lo_y, hi_y = np.nanmin(y), np.nanmax(y)
                pad = max((hi_y - lo_y) * 0.15, abs(hi_y) * 0.02, 1.0)
                ax.set_ylim(lo_y - pad, hi_y + pad)
            else:
                ax.text(
                    0.5,
                    0.5,
                    f"no {ylabel.split(' (')[0]} reading on this device (why: Telemetry section)",
                    ha="center",
                    va="center",
                    transform=ax.transAxes,
                    fontsize=9,
                    color="#666666",
                )
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
    handles = [Patch(color=c, alpha=0.3) for c, _ in style.values()] + [
        Patch(color="#c44e52", alpha=0.5),
        Line2D([0], [0], ls="", marker="v", color="#dd8452"),
    ]
    labels = [lab for _, lab in style.values()] + ["throttled", "clock not settled (clock_ramp)"]
    _legend_below(fig, handles, labels, ncol=5)
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    _finish(fig, 1)
    return fig


def fig_roofline(plt, sns, tables, series):
    title = (
        "Roofline: TFLOP/s against arithmetic intensity\n"
        "memory roof = measured bandwidth (membw), compute roofs = peaks"
    )
    pts = R.roofline_points(tables)
    markers = R.markers()  # each kind's marker and legend label, from the stages' Table.roofline declarations
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
            ax.text(lo, lo * bw / 1e3, f" memory roof {S.fmt_num(bw)} GB/s", fontsize=7.5, color="#333333", va="bottom")
        for _, r in roofs.iterrows():
            peak = float(r["compute_roof_tflops"])
            start = peak * 1e3 / bw if bw == bw else lo
            ax.plot([start, hi], [peak, peak], color=pal[r["dtype"]], lw=1.3, ls="--")
            roof = "peak" if r["roof_source"] == "peak" else "best"
            ax.text(
                hi,
                peak,
                f"{S.DTYPE_LABEL.get(r['dtype'], r['dtype'])} {roof} ",
                fontsize=7.5,
                color=pal[r["dtype"]],
                ha="right",
                va="bottom",
            )
        for (kind, dtype, launch), g in d.groupby(["kind", "dtype", d["verdict"] == "launch_bound"], sort=False):
            marker = markers.get(kind, ("o", kind))[0]
            ax.scatter(
                g["intensity"],
                g["tflops"],
                marker=marker,
                s=90 if kind == "search" else 36,
                facecolors="none" if launch else pal[dtype],
                edgecolors=pal[dtype],
                linewidths=1.3,
                zorder=4,
            )
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        _plain_log_y(ax)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("arithmetic intensity (FLOP/byte of A, B and C)")
        ax.set_ylabel("TFLOP/s")
    handles = [Patch(color=pal[dt]) for dt in dtypes]
    names = [S.DTYPE_LABEL.get(dt, dt) for dt in dtypes]
    kinds = [k for k in markers if k in set(pts["kind"])]
    handles += [Line2D([0], [0], ls="", marker=markers[k][0], color="#555555", ms=8) for k in kinds]
    names += [markers[k][1] for k in kinds]
    handles += [Line2D([0], [0], ls="", marker="o", mfc="none", mec="#555555", ms=8)]
    names += [f"hollow: launch_bound (≤ {R.LAUNCH_FACTOR:g}× the launch floor)"]
    _legend_below(fig, handles, names, ncol=3)
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold", fontsize=10)
    _finish(fig, (len(names) + 2) // 3)
    return fig


# ---- the comparison of two runs (accelbench compare; not a registry figure: it exists only with a baseline) ----

VERDICT_COLORS = {verdict: c["line"] for verdict, c in columns.VERDICT_COLORS.items()}
DEVICE_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def fig_comparison(plt, sns, points: pd.DataFrame, baseline: str, candidate: str, min_effect: float):
    """Speed change of every matched point with its 95% interval, coloured by verdict: the points of a table that
    declares a sweep (``Compare.sweep``: the matmul sweep, per dtype against n) against its column, one marker per
    device, a panel per value of its panel column; the other points (warm-up, transfer, AMP trials, ...) as one
    labelled row each; the band is +-min_effect."""
    title = f"{candidate} against {baseline}: speed change per point (95% interval; band: ±{100 * min_effect:g}%)"
    pts = points[(points["match"] == "both") & points["speed_change_pct"].notna()] if len(points) else points
    if pts is None or pts.empty:
        return _message(plt, title, "No matched point has a ratio to show.")
    sweeps = {name: t.compare.sweep for name, t in registry.TABLES.items() if t.compare and t.compare.sweep}
    swept = pd.Series(False, index=pts.index)
    for name, sweep in sweeps.items():
        if sweep.x in pts.columns:
            swept |= (pts["table"] == name) & pts[sweep.x].notna()
    other = pts[~swept]
    # one panel per swept table and value of its panel column: (table, sweep, value, its rows)
    sweep_panels = []
    for name, sweep in sweeps.items():
        rows = pts[swept & (pts["table"] == name)]
        if not len(rows):
            continue
        if sweep.panel and sweep.panel in rows.columns:
            sweep_panels += [(name, sweep, v, rows[rows[sweep.panel] == v]) for v in S.dtype_sorted(rows[sweep.panel])]
        else:
            sweep_panels.append((name, sweep, None, rows))
    panels = len(sweep_panels) + (1 if len(other) else 0)
    fig, axes = _grid(
        plt,
        panels,
        ncols=min(3, panels),
        panel_w=4.6,
        panel_h=3.4 if not len(other) else max(3.4, 0.28 * len(other) + 1.2),
    )
    devices = list(dict.fromkeys(pts["device"].astype(str)))
    marker = {d: DEVICE_MARKERS[i % len(DEVICE_MARKERS)] for i, d in enumerate(devices)}

    def draw(ax, x, row, horizontal=False):
        # on the axis: speed ratio 1 + change (log scale, so -50% and +100% lie equally far from 0)
        y, lo, hi = (
            1 + row[c] / 100 for c in ("speed_change_pct", "speed_change_ci95_low_pct", "speed_change_ci95_high_pct")
        )
        err = [[max(0.0, y - lo)] if lo == lo else [0.0], [max(0.0, hi - y)] if hi == hi else [0.0]]
        color = VERDICT_COLORS.get(row["verdict"], "#333333")
        kw = {"fmt": marker[str(row["device"])], "color": color, "ms": 6, "capsize": 3, "lw": 1.6}
        (ax.errorbar(y, x, xerr=err, **kw) if horizontal else ax.errorbar(x, y, yerr=err, **kw))

    for ax, (name, sweep, value, d) in zip(axes, sweep_panels):
        d = d.sort_values(sweep.x)
        for _, row in d.iterrows():
            shift = 1.0 + 0.04 * (devices.index(str(row["device"])) - (len(devices) - 1) / 2)
            draw(ax, float(row[sweep.x]) * shift, row)
        ax.axhspan(1 - min_effect, 1 + min_effect, color="#dddddd", alpha=0.6, lw=0)
        ax.axhline(1, color="#444444", lw=1)
        _change_axis(ax, "y", d)
        _log2_axis(ax, d[sweep.x])
        ax.set_title(name if value is None else f"{name} {S.DTYPE_LABEL.get(value, value)}")
        ax.set_xlabel(sweep.label)
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
        ax.set_title(textwrap.shorten(", ".join(dict.fromkeys(map(_stage_title, other["table"].astype(str)))), 52))
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


def _stage_title(table: str) -> str:
    """A table's stage as the report titles it (its section of the stage's name: Warm-up, Transfer, AMP)."""
    stage = registry.TABLES[table].stage if table in registry.TABLES else table
    section = registry.SECTIONS.get(stage)
    return section.title if section else stage


CHANGE_TICKS_PCT = (-99, -90, -75, -50, -25, -10, -5, -2, 0, 2, 5, 10, 25, 50, 100, 300, 1000, 1e4, 1e5, 1e6)


def _change_axis(ax, which: str, rows: pd.DataFrame):
    """A log axis of the speed ratio labelled as speed change in %, ticks at round changes within the data."""
    values = (
        1
        + pd.concat([rows[c] for c in ("speed_change_pct", "speed_change_ci95_low_pct", "speed_change_ci95_high_pct")])
        .dropna()
        .to_numpy(float)
        / 100
    )
    values = values[values > 0]
    lo, hi = (min(values.min(), 0.9), max(values.max(), 1.1)) if len(values) else (0.9, 1.1)
    lo, hi = lo / 1.08, hi * 1.08
    gap = math.log(hi / lo) / 7  # at most about 7 labels: each at least this far (in log space) from the last
    ticks = [1.0]
    for side in (
        sorted(1 + t / 100 for t in CHANGE_TICKS_PCT if 1 < 1 + t / 100 <= hi),
        sorted((1 + t / 100 for t in CHANGE_TICKS_PCT if lo <= 1 + t / 100 < 1), reverse=True),
    ):
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


def write_comparison_figure(
    points: pd.DataFrame, baseline: str, candidate: str, min_effect: float, png: str | Path, svg: str | Path
) -> list[Path]:
    """``fig_comparison`` as PNG and SVG, each written to a temporary name and renamed into place."""
    plt, sns = _setup()
    fig = fig_comparison(plt, sns, points, baseline, candidate, min_effect)
    written = []
    for path, ext in ((Path(png), "png"), (Path(svg), "svg")):
        save_figure(fig, path, ext)
        written.append(path)
    plt.close(fig)
    return written


def save_figure(fig, path: Path, ext: str) -> None:
    """``fig`` as ``ext`` (png, svg) at ``path``, written atomically and synced (``run.io.atomic_file``); no date or
    software stamp in the file, so the same figure gives the same bytes."""
    with atomic_file(path, "wb") as fh:
        fig.savefig(fh, format=ext, dpi=DPI, metadata={"Date": None} if ext == "svg" else {"Software": None})


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
            save_figure(fig, path, ext)
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
