"""The attention stage's figures, drawn from the aggregated ``attention`` table with the plots module's
drawer signature ``(plt, sns, tables, series)``:

* ``attention_tflops``: TFLOP/s (FlashAttention's FLOP convention) against the sequence length, one panel
  per mode (forward, forward+backward), one colour per (device, kernel, dtype), solid non-causal, dashed causal;
  error bars from the 95% interval of the median time. Only the largest head dim of each device is drawn
  (the table in the report has them all).
* ``attention_memory``: the memory one call needed beyond its inputs (``work_mem_bytes``; ``peak_mem_bytes``
  where that is missing) against the sequence length per kernel: the math kernel's grows with s², the fused
  kernels' with s.

Points on the roofline: the table's ``roofline`` declaration (``roofline.points``) places every trustworthy
point by ``flops`` over ``min_bytes`` on the report's roofline figure, beside the matmul and AMP points.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator

TRUSTED = ("ok", "unstable")
KERNEL_MARKERS = {"flash": "o", "efficient": "s", "cudnn": "D", "math": "^"}
DTYPE_LABEL = {"float32": "FP32", "bfloat16": "BF16", "float16": "FP16", "float8_e4m3fn": "FP8"}
MODE_TITLE = {"forward": "forward", "forward_backward": "forward + backward"}


def labelled(df: pd.DataFrame, series: pd.DataFrame | None) -> pd.DataFrame:
    """``df`` with each (run, device)'s ``label`` and ``color``: the report's series where it has them, else
    the device and its model in a colour of the colour-blind palette (a series list that does not know this
    table's devices yet)."""
    out = df.copy()
    out["run_id"] = out["run_id"].astype(str)
    out["device"] = out["device"].astype(str)
    if series is not None and not series.empty and {"run_id", "device", "label", "color"} <= set(series.columns):
        s = series[["run_id", "device", "label", "color"]].astype(str)
        out = out.drop(columns=[c for c in ("label", "color") if c in out.columns]).merge(
            s, on=["run_id", "device"], how="left"
        )
    else:
        out["label"], out["color"] = None, None
    out["label"], out["color"] = out["label"].astype(object), out["color"].astype(object)
    missing = out["label"].isna() | out["color"].isna()
    if missing.any():
        keys = list(dict.fromkeys(zip(out.loc[missing, "run_id"], out.loc[missing, "device"])))
        palette = sns.color_palette("colorblind", max(len(keys), 1)).as_hex()
        multi = out["run_id"].nunique() > 1
        names = out.drop_duplicates(["run_id", "device"]).set_index(["run_id", "device"])["device_name"].to_dict()
        for i, (run, dev) in enumerate(keys):
            sel = missing & (out["run_id"] == run) & (out["device"] == dev)
            name = str(names.get((run, dev)) or "")
            label = f"{dev} {name}".strip()
            out.loc[sel, "label"] = f"{run} · {label}" if multi else label
            out.loc[sel, "color"] = palette[i % len(palette)]
    return out


def trusted(tables: dict) -> pd.DataFrame:
    df = tables.get("attention")
    if df is None or df.empty or "status" not in df.columns:
        return pd.DataFrame()
    df = df[df["status"].astype(str).isin(TRUSTED)].copy()
    for c in (
        "seq_len_q",
        "tflops",
        "median_s",
        "ci95_low_s",
        "ci95_high_s",
        "flops",
        "head_dim",
        "work_mem_bytes",
        "peak_mem_bytes",
    ):
        if c in df.columns:
            df[c] = pd.to_numeric(df[c], errors="coerce")
    df["causal"] = df["causal"].astype(str).str.lower().isin(["true", "1", "1.0"])
    return df[df["tflops"] > 0]


def _message(plt, title: str, text: str):
    fig, ax = plt.subplots(figsize=(8, 2.6))
    ax.axis("off")
    ax.set_title(title, loc="left")
    ax.text(0.0, 0.5, text, transform=ax.transAxes, fontsize=10, va="center")
    return fig


def _largest_head_dim(df: pd.DataFrame) -> pd.DataFrame:
    top = df.groupby(["run_id", "device"])["head_dim"].transform("max")
    return df[df["head_dim"] == top]


def _seq_axis(ax, values) -> None:
    values = sorted({int(v) for v in values if math.isfinite(v) and v > 0})
    ax.set_xscale("log", base=2)
    if values:
        ax.set_xticks(values)
        ax.set_xticklabels([f"{v // 1024}k" if v >= 1024 and v % 1024 == 0 else str(v) for v in values])
        ax.minorticks_off()


def _plain_log_y(ax) -> None:
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=12))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.6g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def _line_colors(df: pd.DataFrame) -> dict:
    """One colour per (device, kernel, dtype) line set: several kernels of one device must be told apart."""
    keys = sorted(set(zip(df["label"], df["kernel"], df["dtype"])), key=str)
    palette = sns.color_palette("colorblind", max(len(keys), 1)).as_hex()
    return {k: palette[i % len(palette)] for i, k in enumerate(keys)}


def _legend(fig, handles, labels, rows_hint: int) -> None:
    fig.legend(handles, labels, loc="lower center", ncol=min(3, max(1, len(labels))), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06 + 0.035 * ((len(labels) + 2) // 3), 1, 0.95))


def fig_tflops(plt, sns, tables, series):
    title = "Attention (scaled_dot_product_attention): TFLOP/s against sequence length, per kernel and dtype"
    df = trusted(tables)
    if df.empty:
        return _message(plt, title, "No attention point was measured (stage attention).")
    df = labelled(_largest_head_dim(df), series)
    modes = [m for m in MODE_TITLE if m in set(df["mode"])]
    fig, axes = plt.subplots(1, len(modes), figsize=(6.0 * len(modes), 4.6), squeeze=False)
    colors = _line_colors(df)
    handles, labels, seen = [], [], set()
    for ax, mode in zip(axes[0], modes):
        d = df[df["mode"] == mode]
        for (label, kernel, dtype, causal), g in d.groupby(["label", "kernel", "dtype", "causal"], sort=True):
            g = g.sort_values("seq_len_q")
            y = g["tflops"].to_numpy(float)
            flops = g["flops"].to_numpy(float)
            lo = np.where(np.isfinite(g["ci95_high_s"]), flops / g["ci95_high_s"].to_numpy(float) / 1e12, y)
            hi = np.where(np.isfinite(g["ci95_low_s"]), flops / g["ci95_low_s"].to_numpy(float) / 1e12, y)
            color = colors[(label, kernel, dtype)]
            ax.errorbar(
                g["seq_len_q"],
                y,
                yerr=np.vstack([np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)]),
                color=color,
                ls="--" if causal else "-",
                marker=KERNEL_MARKERS.get(kernel, "o"),
                ms=4,
                lw=1.5,
                capsize=2,
                alpha=1.0 if dtype != "float32" else 0.75,
            )
            key = (label, kernel, dtype)
            if key not in seen:
                seen.add(key)
                handles.append(Line2D([0], [0], color=color, marker=KERNEL_MARKERS.get(kernel, "o"), lw=1.5))
                labels.append(f"{label} · {kernel} · {DTYPE_LABEL.get(dtype, dtype)}")
        _seq_axis(ax, d["seq_len_q"])
        _plain_log_y(ax)
        ax.set_xlabel("sequence length (query = key)")
        ax.set_ylabel("TFLOP/s (FlashAttention's FLOP count)")
        dims = ", ".join(str(int(v)) for v in sorted(set(d["head_dim"])))
        ax.set_title(f"{MODE_TITLE[mode]} (head dim {dims})", loc="left")
    handles += [Line2D([0], [0], color="#555555", ls="-"), Line2D([0], [0], color="#555555", ls="--")]
    labels += ["not causal", "causal"]
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    _legend(fig, handles, labels, len(labels))
    return fig


def fig_memory(plt, sns, tables, series):
    title = "Attention: memory one call needed beyond its inputs, against sequence length"
    df = trusted(tables)
    if not df.empty:
        work = df["work_mem_bytes"] if "work_mem_bytes" in df.columns else pd.Series(np.nan, index=df.index)
        df["mem_bytes"] = work.where(work.notna(), df.get("peak_mem_bytes"))
        df = df[df["mem_bytes"] > 0]
    if df.empty:
        return _message(plt, title, "No attention point has a memory reading (stage attention; mem_kind says why).")
    df = labelled(_largest_head_dim(df), series)
    modes = [m for m in MODE_TITLE if m in set(df["mode"])]
    fig, axes = plt.subplots(1, len(modes), figsize=(6.0 * len(modes), 4.4), squeeze=False)
    colors = _line_colors(df)
    handles, labels, seen = [], [], set()
    for ax, mode in zip(axes[0], modes):
        d = df[(df["mode"] == mode) & ~df["causal"]]
        d = d if not d.empty else df[df["mode"] == mode]
        # one dtype per line set: the widest measured (memory scales with the element size)
        for (label, kernel, dtype), g in d.groupby(["label", "kernel", "dtype"], sort=True):
            g = g.sort_values("seq_len_q")
            color = colors[(label, kernel, dtype)]
            ax.plot(
                g["seq_len_q"],
                g["mem_bytes"] / 2**20,
                color=color,
                marker=KERNEL_MARKERS.get(kernel, "o"),
                ls="-" if kernel == "math" else "--",
                lw=1.5,
                ms=4,
            )
            key = (label, kernel, dtype)
            if key not in seen:
                seen.add(key)
                handles.append(
                    Line2D(
                        [0],
                        [0],
                        color=color,
                        marker=KERNEL_MARKERS.get(kernel, "o"),
                        ls="-" if kernel == "math" else "--",
                    )
                )
                kinds = ", ".join(sorted(set(g["mem_kind"].astype(str)) - {"", "nan"}))
                labels.append(f"{label} · {kernel} · {DTYPE_LABEL.get(dtype, dtype)} ({kinds or 'counter?'})")
        _seq_axis(ax, d["seq_len_q"])
        _plain_log_y(ax)
        ax.set_xlabel("sequence length (query = key)")
        ax.set_ylabel("MiB beyond the inputs (work_mem_bytes)")
        ax.set_title(f"{MODE_TITLE[mode]}, not causal", loc="left")
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    _legend(fig, handles, labels, len(labels))
    return fig
