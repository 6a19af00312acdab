"""The report's History section and its figure, from the aggregated ``history`` table (``registry.HISTORY_TABLE``,
every stored run of every point's series, read from the store by ``accelbench aggregate``).

Headline points: the series with a change point first (the latest step's size, largest first), then the others,
taking one series of each table in turn (so every table gets a panel), at most ``HEADLINE_MAX``. The figure draws each headline series' run medians over its runs with
the levels between change points and the change points marked; the table beside it says, per headline point,
how many runs, the latest run median, the last change point and the verdict.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import registry
from . import tables as S

HEADLINE_MAX = 9
VERDICT_COLOR = {"slower": "#c0392b", "faster": "#1e8449", "same": "#555555"}


def _ms(seconds) -> str:
    if seconds is None or pd.isna(seconds):
        return ""
    return f"{seconds * 1e3:.4g} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.4g} µs"


def headline_series(history: pd.DataFrame, limit: int = HEADLINE_MAX) -> list[str]:
    """The series shown (their ``series`` keys), changed ones first."""
    if history is None or history.empty:
        return []
    order = {name: i for i, name in enumerate(registry.TABLES)}
    rows = []
    for key, g in history.groupby("series", sort=False):
        steps = g.loc[g["change_point"].map(S.as_bool).eq(True), "step_pct"]
        last = abs(float(steps.iloc[-1])) if len(steps) else 0.0
        rows.append(
            (
                0 if len(steps) else 1,
                -last,
                order.get(g["table"].iloc[0], 99),
                str(g["label"].iloc[0]),
                key,
                g["table"].iloc[0],
            )
        )
    # changed first, largest step first; then one series per table in turn, so every table gets a panel
    picked, seen = [], {}
    for r in sorted(rows):
        seen.setdefault((r[0], r[5]), []).append(r)
    ordered = sorted(seen.items(), key=lambda kv: (kv[0][0], kv[1][0][1:3]))
    for changed in (0, 1):
        queues = [q for (c, _), q in ordered if c == changed]
        while any(queues) and len(picked) < limit:
            for q in queues:
                if q and len(picked) < limit:
                    picked.append(q.pop(0)[4])
    return picked


def history_context(tables, series, ctx) -> dict:
    h = tables.get(registry.HISTORY_TABLE)
    focus = (ctx.get("manifest") or {}).get("focus") or {}
    in_focus = {"n": len(focus.get("runs") or []), "of": int(focus.get("of") or 0)}
    if h is None or h.empty:
        return {"history": {"rows": [], "n_series": 0, "n_runs": 0, "n_changed": 0, "n_slower": 0, "focus": in_focus}}
    rows = []
    for key in headline_series(h):
        g = h[h["series"] == key].sort_values("run_index")
        cps = g[g["change_point"].map(S.as_bool).eq(True)]
        last = g.iloc[-1]
        rows.append(
            {
                "label": last["label"],
                "host": last["host"],
                "device_name": last["device_name"],
                "runs": int(g["run_index"].max()) + 1,
                "shown": len(g),
                "latest": _ms(float(last["median_s"])),
                "latest_run": last["run_id"],
                "level": _ms(float(last["segment_median_s"])),
                "n_changes": len(cps),
                "last_change_run": cps["run_id"].iloc[-1] if len(cps) else "",
                "last_step": f"{float(cps['step_pct'].iloc[-1]):+.1f}%" if len(cps) else "",
                "changes": str(cps["changes"].iloc[-1])
                if len(cps) and cps["changes"].iloc[-1] == cps["changes"].iloc[-1]
                else "",
                "verdict": str(last["verdict"]),
            }
        )
    per_series = h.groupby("series")
    verdicts = per_series["verdict"].last()
    return {
        "history": {
            "rows": rows,
            "n_series": int(per_series.ngroups),
            "n_runs": int(h["run_id"].nunique()),
            "n_changed": int((per_series["change_point"].apply(lambda c: c.map(S.as_bool).any())).sum()),
            "n_slower": int((verdicts == "slower").sum()),
            "focus": in_focus,
        }
    }


def fig_history(plt, sns, tables, series):
    h = tables.get(registry.HISTORY_TABLE)
    keys = headline_series(h) if h is not None else []
    if not keys:
        fig, ax = plt.subplots(figsize=(7, 1.8))
        ax.axis("off")
        ax.text(
            0.5,
            0.5,
            "No history yet: the store holds no run of a measured point\n"
            "(a finished run adds itself; accelbench history add RUN)",
            ha="center",
            va="center",
        )
        ax.set_title("History")
        return fig
    ncols = min(3, len(keys))
    nrows = math.ceil(len(keys) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.3 * ncols, 2.9 * nrows), squeeze=False)
    for ax in axes.flat[len(keys) :]:
        ax.axis("off")
    for ax, key in zip(axes.flat, keys):
        g = h[h["series"] == key].sort_values("run_index")
        x = g["run_index"].to_numpy(int) + 1
        y = g["median_s"].to_numpy(float) * 1e3
        ax.plot(x, y, marker="o" if len(g) <= 60 else None, ms=3, lw=1, color="#4c72b0", label="run median")
        for _, seg in g.groupby("segment"):
            sx = seg["run_index"].to_numpy(int) + 1
            ax.hlines(
                float(seg["segment_median_s"].iloc[0]) * 1e3,
                sx.min() - 0.4,
                sx.max() + 0.4,
                color="#222222",
                lw=2,
                alpha=0.7,
            )
        for _, cp in g[g["change_point"].map(S.as_bool).eq(True)].iterrows():
            color = "#c0392b" if (cp["step_pct"] > 0) == bool(S.as_bool(cp["lower_is_better"])) else "#1e8449"
            ax.axvline(int(cp["run_index"]) + 0.5, color=color, ls="--", lw=1.2)
            ax.annotate(
                f"{float(cp['step_pct']):+.0f}%",
                (int(cp["run_index"]) + 0.6, ax.get_ylim()[1]),
                va="top",
                fontsize=8,
                color=color,
            )
        focus = g[g["in_focus"].map(S.as_bool).eq(True)]
        if len(focus):
            ax.scatter(
                focus["run_index"].to_numpy(int) + 1,
                focus["median_s"].to_numpy(float) * 1e3,
                s=28,
                facecolors="none",
                edgecolors="#dd8452",
                zorder=3,
                label="in focus",
            )
        label = str(g["label"].iloc[-1])
        ax.set_title(label if len(label) <= 38 else label[:36] + "…", fontsize=9)
        ax.set_xlabel("run")
        ax.set_ylabel("run median (ms)")
        lo, hi = np.nanmin(y), np.nanmax(y)
        pad = max((hi - lo) * 0.25, hi * 0.02)
        ax.set_ylim(lo - pad, hi + pad)
    fig.suptitle(
        "History: run medians over runs; levels between change points, change points dashed "
        "(red: slower, green: faster)",
        fontsize=10,
    )
    fig.tight_layout()
    return fig
