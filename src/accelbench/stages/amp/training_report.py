"""The training section of the HTML report (template training.html.j2 here): tokens/s or images/s and MFU per
workload and mode, the AMP and compile speedups with their intervals, memory, held-out loss against the known
floor, and the published figures beside the trials that match them (``references.compare``)."""

from __future__ import annotations

import math

import pandas as pd

from ...reporting import tables as S
from . import references
from .stats import SPEEDUP_CI_NOTE

TRAINING_WORKLOADS = ("gpt", "resnet")


def _num(v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f


def _mean(g: pd.DataFrame, col: str) -> float:
    if col not in g.columns:
        return math.nan
    v = pd.to_numeric(g[col], errors="coerce").dropna()
    return float(v.mean()) if len(v) else math.nan


def _first(g: pd.DataFrame, col: str):
    if col not in g.columns:
        return ""
    v = g[col].dropna()
    return v.iloc[0] if len(v) else ""


def training_points(trials: pd.DataFrame, series=None) -> list[dict]:
    """One point per (run, device, workload, mode) of the gpt and resnet trials that finished: means over the
    seeds (numbers; the template formats them); with ``series`` also the run's label and colour."""
    if trials is None or trials.empty or "workload" not in trials.columns:
        return []
    tr = trials[trials["workload"].isin(TRAINING_WORKLOADS) & (trials["status"] == "ok")]
    if tr.empty:
        return []
    if series is not None:
        tr = S.with_series(tr, series)
    else:
        tr = tr.assign(label=tr["run_id"].astype(str), color="#888888")
    points = []
    for (run, device, workload, mode), g in tr.groupby(["run_id", "device", "workload", "mode"], sort=False):
        points.append(
            {
                "run_id": run,
                "device": device,
                "device_name": _first(g, "device_name"),
                "label": _first(g, "label"),
                "color": _first(g, "color"),
                "workload": workload,
                "mode": mode,
                "preset": _first(g, "preset"),
                "trials": len(g),
                "batch": _first(g, "batch_size"),
                "batch_search": _first(g, "batch_search"),
                "tokens_per_s": _mean(g, "tokens_per_s"),
                "images_per_s": _mean(g, "images_per_s"),
                "mfu_pct": _mean(g, "mfu_pct"),
                "tflops": _mean(g, "model_tflops_per_s"),
                "peak_tflops": _mean(g, "peak_tflops"),
                "peak_dtype": _first(g, "peak_dtype"),
                "flops": _mean(g, "model_flops_per_step"),
                "analytic": _mean(g, "analytic_flops_per_step"),
                "mem": _mean(g, "peak_mem_bytes"),
                "compile_s": _mean(g, "compile_s"),
                "test_loss": _mean(g, "test_loss"),
                "test_acc": _mean(g, "test_acc"),
                "floor": _mean(g, "loss_floor_nats"),
                "world": 1,
            }
        )
    return points


def _row(p: dict) -> dict:
    rate = p["tokens_per_s"] if p["workload"] == "gpt" else p["images_per_s"]
    unit = "tokens/s" if p["workload"] == "gpt" else "images/s"
    agree = p["flops"] / p["analytic"] - 1 if p["analytic"] and p["analytic"] == p["analytic"] else math.nan
    return {
        "label": p["label"],
        "color": p["color"],
        "workload": p["workload"],
        "preset": p["preset"],
        "mode": p["mode"],
        "trials": p["trials"],
        "batch": f"{p['batch']}" + (" (max)" if p["batch_search"] == "max" else ""),
        "rate": f"{S.fmt_num(rate)} {unit}",
        "mfu": S.fmt_unit(p["mfu_pct"], "%"),
        "tflops": S.fmt_num(p["tflops"]),
        "peak": f"{S.fmt_num(p['peak_tflops'])} ({p['peak_dtype']})",
        "flops": S.fmt_num(p["flops"] / 1e9),
        "agree": "—" if agree != agree else f"{agree * 100:+.1f}%",
        "mem": S.fmt_num(p["mem"] / 2**20) + " MiB" if p["mem"] == p["mem"] else "—",
        "compile": S.fmt_time(p["compile_s"]) if p["compile_s"] == p["compile_s"] else "—",
        "loss": S.fmt_num(p["test_loss"]),
        "floor": S.fmt_num(p["floor"]) if p["floor"] == p["floor"] else "—",
        "acc": S.fmt_num(p["test_acc"]),
    }


def speedups(summary: pd.DataFrame, series) -> list[dict]:
    """The summary rows of the training workloads: AMP over FP32, compiled over eager, with their intervals."""
    if summary is None or summary.empty or "workload" not in summary.columns:
        return []
    su = summary[summary["workload"].isin(TRAINING_WORKLOADS) & summary["mode"].notna()]
    if su.empty:
        return []
    su = S.with_series(su, series).sort_values(["label", "workload", "mode"])
    out = []
    for _, r in su.iterrows():
        out.append(
            {
                "label": r["label"],
                "color": r["color"],
                "workload": r["workload"],
                "mode": r["mode"],
                "baseline": r.get("baseline", "fp32"),
                "trials": r["trials"],
                "speedup": S.fmt_unit(r["speedup"], "×"),
                "ci": f"{S.fmt_num(r['speedup_ci95_low'])}–{S.fmt_num(r['speedup_ci95_high'])}",
                "faster": r.get("faster", ""),
                "verdict": r["verdict"] if isinstance(r["verdict"], str) else "",
            }
        )
    return out


def context(tables, series, ctx) -> dict:
    points = training_points(tables.get("amp_trials"), series)
    refs = []
    for r in references.compare(points):
        refs.append(
            {
                **r,
                "measured": S.fmt_num(r["measured"]) if r["measured"] else "—",
                "ratio": f"{r['ratio'] * 100:.0f}%" if r["ratio"] else "—",
            }
        )
    return {
        "training": {
            "rows": [_row(p) for p in points],
            "speedups": speedups(tables.get("amp_summary"), series),
            "references": refs,
            "ci_note": SPEEDUP_CI_NOTE,
        }
    }
