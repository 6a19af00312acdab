"""The transfer stage's figure (registry.FIGURES: its caption is workflow/report/transfer.rst)."""

from __future__ import annotations

from matplotlib.lines import Line2D

from ...reporting import tables as S
from ...reporting.plots import _bytes_label, _finish, _grid, _legend_below, _log2_axis, _message, _series_handles


def fig_transfer(plt, sns, tables, series):
    df = tables["transfer"]
    title = "Host↔device copy bandwidth"
    if df is None or df.empty or not (df["status"] == "ok").any():
        return _message(
            plt,
            title,
            "Transfer not measured: no accelerator in these results\n"
            "(host↔device bandwidth is measured for accelerators only).",
        )
    df = S.with_series(df[(df["status"] == "ok") & (df["gbps"] > 0)], series)
    directions = [d for d in ("h2d", "d2h") if d in set(df["direction"])] + sorted(
        set(df["direction"]) - {"h2d", "d2h"}
    )
    fig, axes = _grid(plt, len(directions), ncols=2, panel_w=5.6, panel_h=3.6, sharey=True)
    names = {"h2d": "host → device", "d2h": "device → host"}
    used = []
    for ax, direction in zip(axes, directions):
        d = df[df["direction"] == direction]
        for (label, memory), g in d.groupby(["label", "memory"], sort=False):
            g = g.sort_values("size_bytes")
            color = g["color"].iloc[0]
            ax.plot(
                g["size_bytes"],
                g["gbps"],
                color=color,
                marker="o" if memory == "pinned" else "s",
                ls="-" if memory == "pinned" else "--",
                lw=1.8,
            )
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
