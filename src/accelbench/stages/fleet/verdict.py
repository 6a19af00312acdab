"""The fleet's verdicts: pure functions from the nodes' tables to one verdict per node (docs/fleet.md).

1. ``headline_points``: each device's headlines (``registry.HEADLINES``: the tables' declared one-number figures),
   from the trusted rows of each node's run; a device without a trusted value gets its rows' status and detail.
2. ``judge``: each value held against the fleet's median of the same metric on the same device model, at two
   levels: the device, and the node (the median of its devices). A value is ``slow`` when it is worse than the
   median by more than ``k_mad`` MADs (scaled to a normal sigma) AND by more than ``min_drop_pct`` percent: the MAD
   rule alone flags noise in a tight fleet (MAD near 0), the percentage alone flags a real but tiny spread. Where
   a stored baseline holds the metric, the same rule is held against the baseline's median and MAD too.
3. ``node_verdicts``: healthy, slow (naming the metric and by how much), throttled (from the telemetry's
   ``throttled`` column of any table that has it) or failed (the job's error, or no trusted value of a metric
   the fleet has); failed before throttled before slow.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from ... import registry
from ...columns import TRUSTED

VERDICTS = ("healthy", "slow", "throttled", "failed")
LEVELS = ("device", "node")
POINT_COLUMNS = (
    "node",
    "run_id",
    "backend",
    "device",
    "device_name",
    "metric",
    "unit",
    "higher_is_better",
    "value",
    "status",
    "detail",
)
JUDGED_COLUMNS = (
    *POINT_COLUMNS,
    "level",
    "fleet_n",
    "fleet_median",
    "fleet_mad",
    "drop_pct",
    "mads",
    "slow",
    "baseline_median",
    "baseline_drop_pct",
    "baseline_slow",
)
VERDICT_COLUMNS = (
    "node",
    "verdict",
    "detail",
    "devices",
    "slow_metrics",
    "throttle_reasons",
    "error",
    "run_id",
    "job_id",
)
BASELINE_COLUMNS = ("metric", "backend", "device_name", "unit", "higher_is_better", "n", "median", "mad")
GROUP = ["metric", "backend", "device_name"]


@dataclass(frozen=True)
class Rule:
    """The outlier rule's settings (config section ``fleet``; the defaults are argued in docs/fleet.md)."""

    k_mad: float = 3.0
    min_drop_pct: float = 10.0
    min_devices: int = 3

    @classmethod
    def from_config(cls, fleet: dict) -> Rule:
        return cls(float(fleet["k_mad"]), float(fleet["min_drop_pct"]), int(fleet["min_devices"]))


@dataclass
class NodeRecord:
    """What the dispatcher knows of one node (``fleet_node.json``): ``state`` ok or failed, and why."""

    node: str
    state: str = "ok"
    error: str = ""
    run_id: str = ""
    job_id: str = ""


def _text(value) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def node_of_runs(runs: pd.DataFrame) -> dict[str, str]:
    """run id -> node name: the node the fleet check named (ACCELBENCH_FLEET_NODE: Kubernetes), the SLURM node
    (SLURMD_NODENAME), else the run's host (its env_json and host columns)."""
    out = {}
    if runs is None or runs.empty:
        return out
    for _, r in runs.iterrows():
        env = {}
        try:
            env = json.loads(r.get("env_json") or "{}") or {}
        except (TypeError, ValueError):
            pass
        out[str(r["run_id"])] = str(
            env.get("ACCELBENCH_FLEET_NODE") or env.get("SLURMD_NODENAME") or r.get("host") or r["run_id"]
        )
    return out


def _matches(series: pd.Series, allowed) -> pd.Series:
    allowed = allowed if isinstance(allowed, (tuple, list, set)) else (allowed,)
    return series.astype(str).isin([str(a) for a in allowed])


def headline_points(tables: dict[str, pd.DataFrame], node_of: dict[str, str]) -> pd.DataFrame:
    """One row per node, device and headline metric (``POINT_COLUMNS``): its best trusted value, or NaN with
    the status and detail of its rows. Devices whose every row is ``absent`` (no such device there) are left out."""
    rows = []
    for table, h in registry.HEADLINES:
        df = tables.get(table)
        if df is None or df.empty or h.column not in df.columns:
            continue
        for col, allowed in h.where.items():
            df = df[_matches(df[col], allowed)]
        keys = ["run_id", "backend", "device", "device_name", *h.per]
        df = df.assign(**{k: df[k].astype(str) if k in df.columns else "" for k in keys})
        for key, g in df.groupby(keys, sort=True, dropna=False):
            key = dict(zip(keys, key))
            status = g["status"].astype(str) if "status" in g.columns else pd.Series("ok", index=g.index)
            if (status == "absent").all():
                continue
            value = pd.to_numeric(g[h.column], errors="coerce")
            good = g[status.isin(TRUSTED) & value.notna()]
            metric = ":".join([h.name, *(key[p] for p in h.per)])
            point = {
                "node": node_of.get(key["run_id"], key["run_id"]),
                **{k: key[k] for k in keys[:4]},
                "metric": metric,
                "unit": h.unit,
                "higher_is_better": h.higher_is_better,
            }
            if good.empty:
                bad = g[~status.isin(TRUSTED)]
                first = bad.iloc[0] if not bad.empty else g.iloc[0]
                rows.append(
                    {
                        **point,
                        "value": np.nan,
                        "status": _text(first.get("status")) or "missing",
                        "detail": _text(first.get("status_detail")),
                    }
                )
                continue
            vals = pd.to_numeric(good[h.column])
            if h.at_max:
                best = vals.loc[pd.to_numeric(good[h.at_max], errors="coerce").idxmax()]
            else:
                best = vals.max() if h.higher_is_better else vals.min()
            rows.append({**point, "value": float(best), "status": "ok", "detail": ""})
    out = pd.DataFrame(rows, columns=list(POINT_COLUMNS))
    # a node measured as one run per device (all its GPUs at once): name each device by its run too
    runs_per_node = out.groupby("node")["run_id"].transform("nunique") if not out.empty else out["run_id"]
    many = runs_per_node > 1
    out.loc[many, "device"] = out.loc[many, "device"] + "@" + out.loc[many, "run_id"]
    return out


def node_level(points: pd.DataFrame) -> pd.DataFrame:
    """Each node's headline of a metric on one device model: the median of its devices' values."""
    good = points[points["value"].notna()]
    if good.empty:
        return points.iloc[0:0].assign(device="node")
    keys = ["node", *GROUP]
    agg = (
        good.groupby(keys, sort=True)
        .agg(
            value=("value", "median"),
            run_id=("run_id", "first"),
            unit=("unit", "first"),
            higher_is_better=("higher_is_better", "first"),
            devices=("device", "count"),
        )
        .reset_index()
    )
    return agg.assign(device="node", status="ok", detail=agg["devices"].map(lambda n: f"median of {n} device(s)"))[
        list(POINT_COLUMNS)
    ]


def _deficit(value: float, ref: float, higher_is_better: bool) -> float:
    return (ref - value) if higher_is_better else (value - ref)


def robust_center(values) -> tuple[float, float]:
    """The median and the MAD scaled to a normal sigma (scipy.stats.median_abs_deviation, scale='normal')."""
    v = np.asarray(values, dtype=float)
    return float(np.median(v)), float(stats.median_abs_deviation(v, scale="normal"))


def is_slow(value: float, median: float, mad: float, higher_is_better: bool, rule: Rule) -> tuple[bool, float, float]:
    """(slow, drop_pct, mads): worse than ``median`` by more than ``k_mad`` MADs and more than ``min_drop_pct``%."""
    deficit = _deficit(value, median, higher_is_better)
    drop = 100.0 * deficit / abs(median) if median else math.nan
    mads = deficit / mad if mad > 0 else (math.inf if deficit > 0 else 0.0)
    return bool(deficit > rule.k_mad * mad and drop > rule.min_drop_pct), drop, mads


def judge(
    points: pd.DataFrame, rule: Rule, baseline: pd.DataFrame | None = None, level: str = "device"
) -> pd.DataFrame:
    """``points`` with their fleet median, MAD, drop (percent worse than the median) and slow flag, per metric
    and device model; and against ``baseline`` (``BASELINE_COLUMNS``) where it holds the metric."""
    out = points.copy()
    for col in JUDGED_COLUMNS[len(POINT_COLUMNS) :]:
        out[col] = np.nan
    out["level"] = level
    out["slow"] = False
    out["baseline_slow"] = False
    base = {}
    if baseline is not None and not baseline.empty:
        base = {
            (str(r["metric"]), str(r["backend"]), str(r["device_name"])): (float(r["median"]), float(r["mad"]))
            for _, r in baseline.iterrows()
        }
    for key, g in out[out["value"].notna()].groupby(GROUP, sort=False):
        median, mad = robust_center(g["value"])
        out.loc[g.index, ["fleet_n", "fleet_median", "fleet_mad"]] = [len(g), median, mad]
        for i, r in g.iterrows():
            slow, drop, mads = is_slow(r["value"], median, mad, bool(r["higher_is_better"]), rule)
            out.loc[i, ["drop_pct", "mads"]] = [drop, mads]
            out.loc[i, "slow"] = slow and len(g) >= rule.min_devices
            if tuple(map(str, key)) in base:
                b_med, b_mad = base[tuple(map(str, key))]
                b_slow, b_drop, _ = is_slow(r["value"], b_med, b_mad, bool(r["higher_is_better"]), rule)
                out.loc[i, ["baseline_median", "baseline_drop_pct"]] = [b_med, b_drop]
                out.loc[i, "baseline_slow"] = b_slow
    return out[list(JUDGED_COLUMNS)]


def baseline_of(judged: pd.DataFrame) -> pd.DataFrame:
    """A fleet baseline to store (``accelbench fleet --save-baseline``): each metric's median and MAD per device
    model, over the devices that were not flagged."""
    rows = []
    good = judged[(judged["level"] == "device") & judged["value"].notna() & ~judged["slow"].astype(bool)]
    for key, g in good.groupby(GROUP, sort=True):
        median, mad = robust_center(g["value"])
        rows.append(
            {
                **dict(zip(GROUP, key)),
                "unit": g["unit"].iloc[0],
                "higher_is_better": g["higher_is_better"].iloc[0],
                "n": len(g),
                "median": median,
                "mad": mad,
            }
        )
    return pd.DataFrame(rows, columns=list(BASELINE_COLUMNS))


def _truthy(v) -> bool:
    return str(v).strip().lower() in ("true", "1", "1.0", "yes")


def throttles(tables: dict[str, pd.DataFrame], node_of: dict[str, str]) -> dict[str, set[str]]:
    """node -> the throttle reasons its telemetry reported (rows with ``throttled`` true, in any table)."""
    out: dict[str, set[str]] = {}
    for name in registry.TABLES:
        df = tables.get(name)
        if df is None or df.empty or "throttled" not in df.columns or "run_id" not in df.columns:
            continue
        hit = df[df["throttled"].map(_truthy)]
        for _, r in hit.iterrows():
            node = node_of.get(str(r["run_id"]), str(r["run_id"]))
            reasons = _text(r.get("throttle_reasons")) or "throttled"
            out.setdefault(node, set()).update(x.strip() for x in reasons.replace(";", ",").split(",") if x.strip())
    return out


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def _slow_text(r) -> str:
    where = "" if r["device"] == "node" else f" ({r['device']})"
    if r["slow"]:
        mads = "inf" if math.isinf(r["mads"]) else f"{r['mads']:.1f}"
        return (
            f"{r['metric']}{where} {r['drop_pct']:.0f}% worse than the fleet median "
            f"({_fmt(r['value'])} vs {_fmt(r['fleet_median'])} {r['unit']}, {mads} MADs)"
        )
    return (
        f"{r['metric']}{where} {r['baseline_drop_pct']:.0f}% worse than the baseline "
        f"({_fmt(r['value'])} vs {_fmt(r['baseline_median'])} {r['unit']})"
    )


def node_verdicts(
    records: list[NodeRecord], points: pd.DataFrame, judged: pd.DataFrame, throttled: dict[str, set[str]]
) -> pd.DataFrame:
    """One row per node (``VERDICT_COLUMNS``), flagged nodes first (failed, throttled, slow), then by name."""
    nodes = {r.node: r for r in records}
    for node in points["node"].unique():
        nodes.setdefault(str(node), NodeRecord(str(node)))
    # what the fleet measured: a metric present (trusted) on some device of a model
    fleet_metrics = points[points["value"].notna()].groupby(["backend", "device_name"])["metric"].agg(set).to_dict()
    rows = []
    for name, rec in sorted(nodes.items()):
        mine = points[points["node"] == name]
        flagged = judged[
            (judged["node"] == name) & (judged["slow"].astype(bool) | judged["baseline_slow"].astype(bool))
        ]
        errors = []
        if rec.state != "ok":
            errors.append(rec.error or rec.state)
        elif mine.empty:
            errors.append("no results from this node")
        for (backend, model), metrics in fleet_metrics.items():
            devs = mine[(mine["backend"] == backend) & (mine["device_name"] == model)]
            for dev, d in devs.groupby("device"):
                have = set(d.loc[d["value"].notna(), "metric"])
                for m in sorted(metrics - have):
                    bad = d[d["metric"] == m]
                    status = f"{bad['status'].iloc[0]}" if not bad.empty else "missing"
                    detail = _text(bad["detail"].iloc[0]) if not bad.empty else ""
                    errors.append(f"{m} ({dev}): {status}" + (f": {detail}" if detail else ""))
        reasons = sorted(throttled.get(name, set()))
        # a node-level flag names the metric once; a device's flag is added where its node's median was not flagged
        # (one slow GPU of eight)
        at_node = set(flagged.loc[flagged["device"] == "node", "metric"])
        slow = sorted(
            {_slow_text(r) for _, r in flagged.iterrows() if r["device"] == "node" or r["metric"] not in at_node}
        )
        if errors:
            verdict, detail = "failed", "; ".join(errors)
        elif reasons:
            verdict, detail = (
                "throttled",
                "throttle reasons: " + ", ".join(reasons) + ("; " + "; ".join(slow) if slow else ""),
            )
        elif slow:
            verdict, detail = "slow", "; ".join(slow)
        else:
            verdict, detail = "healthy", ""
        rows.append(
            {
                "node": name,
                "verdict": verdict,
                "detail": detail,
                "devices": int(mine["device"].nunique()) if not mine.empty else 0,
                "slow_metrics": ",".join(sorted(set(flagged["metric"]))),
                "throttle_reasons": ",".join(reasons),
                "error": "; ".join(errors),
                "run_id": rec.run_id or (mine["run_id"].iloc[0] if not mine.empty else ""),
                "job_id": rec.job_id,
            }
        )
    order = {"failed": 0, "throttled": 1, "slow": 2, "healthy": 3}
    out = pd.DataFrame(rows, columns=list(VERDICT_COLUMNS))
    if out.empty:
        return out
    return out.sort_values(
        ["verdict", "node"], key=lambda s: s.map(order) if s.name == "verdict" else s, kind="stable"
    ).reset_index(drop=True)


@dataclass
class FleetResult:
    points: pd.DataFrame  # every device's headlines
    judged: pd.DataFrame  # device and node level, with medians, MADs and flags
    verdicts: pd.DataFrame  # one row per node

    @property
    def exit_code(self) -> int:
        return 0 if (self.verdicts["verdict"] == "healthy").all() else 1


def evaluate(
    tables: dict[str, pd.DataFrame],
    records: list[NodeRecord],
    rule: Rule,
    baseline: pd.DataFrame | None = None,
    node_of: dict[str, str] | None = None,
) -> FleetResult:
    """The whole fleet check on gathered tables (``accelbench aggregate``'s, or fakes): points, judged, verdicts."""
    node_of = node_of if node_of is not None else node_of_runs(tables.get("runs"))
    run_of = {r.run_id: r.node for r in records if r.run_id}
    node_of = {**node_of, **run_of}
    points = headline_points(tables, node_of)
    judged = pd.concat(
        [judge(points, rule, baseline, "device"), judge(node_level(points), rule, None, "node")], ignore_index=True
    )
    verdicts = node_verdicts(records, points, judged, throttles(tables, node_of))
    return FleetResult(points, judged, verdicts)
