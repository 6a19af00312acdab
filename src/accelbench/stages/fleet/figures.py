"""The fleet's heat map (registry.FIGURES: its caption is workflow/report/fleet.rst)."""

from __future__ import annotations

import numpy as np

from ...reporting.plots import _message
from .report import fleet_result

ORDER = {"failed": 0, "throttled": 1, "slow": 2, "healthy": 3}


def heat_matrix(result):
    """node x metric: each node's headline as a percentage of the fleet median (100: the median; below: worse,
    whichever way the metric goes), flagged nodes first; and the nodes' verdicts in that order."""
    nodes = result.judged[result.judged["level"] == "node"].copy()
    good = np.where(
        nodes["higher_is_better"].astype(bool),
        nodes["value"] / nodes["fleet_median"],
        nodes["fleet_median"] / nodes["value"],
    )
    nodes["pct"] = 100.0 * good
    matrix = nodes.pivot_table(index="node", columns="metric", values="pct", aggfunc="first")
    verdict = dict(zip(result.verdicts["node"], result.verdicts["verdict"]))
    order = sorted(set(matrix.index) | set(verdict), key=lambda n: (ORDER.get(verdict.get(n, "healthy"), 9), n))
    return matrix.reindex(order), [verdict.get(n, "healthy") for n in order]


def fig_fleet(plt, sns, tables, series):
    title = "Fleet: each node's headlines as % of the fleet median (flagged nodes first)"
    result = fleet_result(tables)
    if result is None:
        return _message(plt, title, "The runs come from one node: no fleet to compare.")
    matrix, verdicts = heat_matrix(result)
    fig, ax = plt.subplots(figsize=(1.1 * max(4, matrix.shape[1]) + 3, 0.45 * max(3, len(matrix)) + 2))
    sns.heatmap(
        matrix,
        ax=ax,
        cmap="RdYlGn",
        vmin=50,
        vmax=150,
        center=100,
        annot=True,
        fmt=".0f",
        cbar_kws={"label": "% of the fleet median (higher: better)"},
        linewidths=0.5,
        linecolor="white",
    )
    ax.set_yticklabels([f"{n} ({v})" for n, v in zip(matrix.index, verdicts)], rotation=0)
    ax.set_xlabel("headline metric")
    ax.set_ylabel("node (verdict)")
    ax.set_title(title, loc="left")
    fig.tight_layout()
    return fig
