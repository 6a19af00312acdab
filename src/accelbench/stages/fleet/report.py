"""The Fleet section of the HTML report: each node's verdict (flagged nodes first) over the gathered runs, where
they come from two or more nodes (the template is section.html.j2 here; the heat map is figures.py's)."""

from __future__ import annotations

import json

import pandas as pd

from ...run.config import with_defaults
from .verdict import FleetResult, Rule, evaluate, node_of_runs


def fleet_rule(runs: pd.DataFrame) -> Rule:
    """The rule the runs were checked with: the fleet section of the newest run's config (else the defaults)."""
    config = {}
    if runs is not None and not runs.empty and "config_json" in runs.columns:
        try:
            config = json.loads(runs.sort_values("timestamp_utc")["config_json"].iloc[-1] or "{}")
        except (TypeError, ValueError):
            config = {}
    fleet = with_defaults({"fleet": (config or {}).get("fleet") or {}})["fleet"]
    return Rule.from_config(fleet)


def fleet_result(tables: dict) -> FleetResult | None:
    """The fleet check over the report's tables, or None when the runs come from fewer than two nodes."""
    node_of = node_of_runs(tables.get("runs"))
    if len(set(node_of.values())) < 2:
        return None
    result = evaluate(tables, [], fleet_rule(tables.get("runs")), node_of=node_of)
    return result if len(result.verdicts) >= 2 else None


def context(tables, series, ctx) -> dict:
    result = fleet_result(tables)
    if result is None:
        return {"fleet": None}
    v = result.verdicts
    return {
        "fleet": {
            "nodes": v.to_dict("records"),
            "n": len(v),
            "counts": {k: int(n) for k, n in v["verdict"].value_counts().items()},
            "rule": fleet_rule(tables.get("runs")).__dict__,
        }
    }
