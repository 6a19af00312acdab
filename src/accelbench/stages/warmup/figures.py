"""The warm-up stage's figure (registry.FIGURES: its caption is workflow/report/warmup.rst)."""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import MaxNLocator

from ...reporting import tables as S
from ...reporting.plots import _finish, _legend_below, _message, _plain_log_y, _series_handles, _wrap


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
                ax1.scatter(
                    row["iter"], row["iter_s"] * 1e3, s=80, marker="v", color=color, edgecolors="black", zorder=5
                )
        per_dev.append((label, color, float(g["cold_s"].iloc[0]), float(g["warm_s"].iloc[0]), stable))
    _plain_log_y(ax1)
    ax1.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax1.set_xlabel("iteration")
    ax1.set_ylabel("time per iteration (ms, log scale)")
    ax1.set_title("Per-iteration time (▼ = stable from here)")
    x = np.arange(len(per_dev))
    w = 0.38
    for i, (_label, color, cold, warm, _) in enumerate(per_dev):
        ax2.bar(i - w / 2, cold * 1e3, w, color=color, alpha=0.45, hatch="//", edgecolor=color)
        ax2.bar(i + w / 2, warm * 1e3, w, color=color, edgecolor=color)
        if warm > 0:
            ax2.text(
                i,
                cold * 1e3 * 1.15,
                f"cold = {cold / warm:.0f}× warm" if cold / warm >= 10 else f"cold = {cold / warm:.1f}× warm",
                ha="center",
                va="bottom",
                fontsize=8,
            )
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
