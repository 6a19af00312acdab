"""The scaling stage's figures (registry.FIGURES: their captions are workflow/report/<name>.rst)."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ...reporting import tables as S
from ...reporting.plots import (
    _bytes_label,
    _finish,
    _grid,
    _legend_below,
    _log2_axis,
    _message,
    _plain_log_y,
    _series_handles,
)

SCALING_OFF_TEXT = (
    "Scaling not measured: scaling.enabled is false (the default).\n"
    "Set  scaling: {enabled: true}  in the config to measure DDP scaling, collectives and device copies."
)


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
        return _message(
            plt, title, "Scaling not measured here:\n" + "\n".join(textwrap.shorten(r, 110) for r in reasons)
        )
    return None


def throughput_unit(rows) -> tuple[str, str]:
    """(column, axis unit) of a workload's throughput: tokens/s (gpt), images/s (resnet) where its rows have
    them, else samples/s."""
    for column, unit in (("tokens_per_s", "tokens/s"), ("images_per_s", "images/s")):
        if column in rows.columns and pd.to_numeric(rows[column], errors="coerce").gt(0).any():
            return column, unit
    return "samples_per_s", "samples/s"


def fig_scaling_efficiency(plt, sns, tables, series):
    df = tables["scaling"]
    title = "Weak scaling: throughput and efficiency against world size (95% CI over seeds)"
    off = _scaling_not_measured(plt, title, df)
    if off is not None:
        return off
    ok = df[(df["status"] == "ok") & (pd.to_numeric(df["samples_per_s"], errors="coerce") > 0)]
    if ok.empty:
        reasons = sorted(set(df.get("status_detail", pd.Series(dtype=object)).dropna().astype(str)))[:2]
        return _message(
            plt, title, "No world size finished training.\n" + "\n".join(textwrap.shorten(r, 110) for r in reasons)
        )
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
            column, _ = throughput_unit(d)
            per_sample = (pd.to_numeric(g[column], errors="coerce") / g["samples_per_s"]).to_numpy(float)
            sps = g["samples_per_s"].to_numpy(float) * per_sample
            gb = g["samples_per_s"] * g["step_median_s"] * per_sample
            lo = (gb / g["step_ci95_high_s"]).to_numpy(float)
            hi = (gb / g["step_ci95_low_s"]).to_numpy(float)
            lo, hi = np.where(np.isfinite(lo), lo, sps), np.where(np.isfinite(hi), hi, sps)
            row[0].errorbar(
                x,
                sps,
                yerr=np.vstack([np.clip(sps - lo, 0, None), np.clip(hi - sps, 0, None)]),
                color=color,
                marker=marker,
                ls=style,
                lw=1.8,
                capsize=3,
            )
            eff = g["scaling_efficiency"].to_numpy(float)
            elo = np.where(np.isfinite(g["efficiency_ci95_low"].to_numpy(float)), g["efficiency_ci95_low"], eff)
            ehi = np.where(np.isfinite(g["efficiency_ci95_high"].to_numpy(float)), g["efficiency_ci95_high"], eff)
            row[1].errorbar(
                x,
                eff,
                yerr=np.vstack([np.clip(eff - elo, 0, None), np.clip(ehi - eff, 0, None)]),
                color=color,
                marker=marker,
                ls=style,
                lw=1.8,
                capsize=3,
            )
            if (label, color) not in used:
                used.append((label, color))
            if mode not in modes:
                modes.append(mode)
        sizes = sorted({int(v) for v in d["world_size"]})
        for ax in row:
            ax.set_xticks(sizes)
            ax.set_xlabel("world size (ranks)")
        row[0].set_title(f"{workload}: global throughput")
        row[0].set_ylabel(f"{throughput_unit(d)[1]} (95% CI over seeds)")
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
    if "scope" in df.columns:  # the world's points (a split's sub-groups are in the table)
        df = df[df["scope"].astype(object).fillna("world").astype(str) == "world"]
    ok = df[(df["status"] == "ok") & (pd.to_numeric(df["busbw_gbps"], errors="coerce") > 0)]
    if ok.empty:
        return _message(plt, title, "No collective was timed: they need a world of 2 ranks or more.")
    ok = S.with_series(ok, series)
    collectives = [c for c in ("all_reduce", "all_gather", "reduce_scatter", "broadcast") if c in set(ok["collective"])]
    fig, axes = _grid(plt, len(collectives), ncols=2, panel_w=5.6, panel_h=3.6)
    worlds = sorted({int(w) for w in ok["world_size"]})
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
        return _message(
            plt, title, "No device-to-device copy: they need a backend with 2 devices or more\n(the CPU is one device)."
        )
    panels = list(ok.groupby(["run_id", "backend", "peer"], sort=True))
    fig, axes = _grid(plt, len(panels), ncols=2, panel_w=5.4, panel_h=4.4)
    for ax, ((run_id, backend, peer), g) in zip(axes, panels):
        devices = sorted(set(g["src"]) | set(g["dst"]), key=lambda d: (len(d), d))
        grid = g.pivot_table(index="src", columns="dst", values="gbps", aggfunc="median").reindex(
            index=devices, columns=devices
        )
        sns.heatmap(
            grid,
            ax=ax,
            annot=True,
            fmt=".3g",
            cmap="viridis",
            cbar_kws={"label": "GB/s"},
            annot_kws={"fontsize": 8},
            linewidths=0.5,
            linecolor="white",
        )
        ax.set_title(
            f"{run_id} · {backend} · peer access {'on' if peer == 'on' else 'off (host-staged)'}", fontsize=9.5
        )
        ax.set_xlabel("destination")
        ax.set_ylabel("source")
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    fig.tight_layout()
    return fig
