"""The attention section of the report: its context builder ``context(tables, series, ctx)`` for the
template partial ``section.html.j2`` (the report's Jinja environment finds it in this package).

Per device: the best trusted TFLOP/s per (kernel, dtype, mode) with its point and % of peak, how many points
ended in each status, every point, and the published figures (``references``) beside a device they match
(or one with the same compute, saying what differs); for any other device only what differs.
"""

from __future__ import annotations

import math

import pandas as pd

from . import references as refs
from .figures import DTYPE_LABEL, TRUSTED, labelled

FIGURES = ("attention_tflops", "attention_memory")


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _fmt(x, digits: int = 3) -> str:
    v = _num(x)
    if not math.isfinite(v):
        return "—"
    if v == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(v))))
    return f"{v:,.{decimals}f}"


def _time(s) -> str:
    v = _num(s)
    if not math.isfinite(v):
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if v >= scale:
            return f"{_fmt(v / scale)} {unit}"
    return f"{_fmt(v / 1e-9)} ns"


def _mib(b) -> str:
    v = _num(b)
    return "—" if not math.isfinite(v) else f"{_fmt(v / 2**20)} MiB"


def _causal(x) -> bool:
    return str(x).strip().lower() in ("true", "1", "1.0")


def _point(r) -> str:
    return (
        f"b={int(_num(r['batch']))} h={int(_num(r['heads']))} s={int(_num(r['seq_len_q']))}"
        f"{'' if _num(r['seq_len_q']) == _num(r['seq_len_k']) else 'x' + str(int(_num(r['seq_len_k'])))}"
        f" d={int(_num(r['head_dim']))}{' causal' if _causal(r['causal']) else ''}"
    )


def context(tables: dict, series: pd.DataFrame | None = None, ctx: dict | None = None) -> dict:
    """The template's variables: ``attention`` = {figures, devices, points, references}. ``series``: the
    report's (run, device) labels and colours; ``ctx``: the report's context so far (its ``figures``)."""
    ctx = ctx or {}
    figures = ctx.get("figures") or {}
    out = {
        "figures": [figures[n] for n in FIGURES if n in figures],
        "devices": [],
        "points": [],
        "references": [
            {
                k: r[k]
                for k in (
                    "label",
                    "tflops",
                    "pct_of_peak",
                    "pct_published",
                    "peak_tflops",
                    "device",
                    "setting",
                    "source",
                    "url",
                )
            }
            for r in refs.REFERENCES
        ],
    }
    df = tables.get("attention")
    if df is None or df.empty or "kernel" not in df.columns:
        return {"attention": out}
    df = df[df["status"].astype(str) != "absent"]
    if df.empty:
        return {"attention": out}
    df = labelled(df, series if isinstance(series, pd.DataFrame) else None)
    for c in ("tflops", "pct_of_peak", "seq_len_q", "head_dim", "batch", "heads"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    for (label, run_id, device), g in df.groupby(["label", "run_id", "device"], sort=False):
        ok = g[g["status"].astype(str).isin(TRUSTED) & (g["tflops"] > 0)]
        best = []
        for (kernel, dtype, mode), k in ok.groupby(["kernel", "dtype", "mode"], sort=True):
            top = k.loc[k["tflops"].idxmax()]
            best.append(
                {
                    "kernel": kernel,
                    "dtype": DTYPE_LABEL.get(dtype, dtype),
                    "mode": mode,
                    "tflops": _fmt(top["tflops"]),
                    "pct": "—" if not math.isfinite(_num(top["pct_of_peak"])) else f"{_fmt(top['pct_of_peak'])}%",
                    "point": _point(top),
                }
            )
        points = [
            {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
            for r in ok.to_dict("records")
        ]
        name = str(g["device_name"].iloc[0])
        out["devices"].append(
            {
                "label": label,
                "color": g["color"].iloc[0],
                "run_id": run_id,
                "device": device,
                "device_name": name,
                "best": best,
                "counts": [{"status": s, "count": int(n)} for s, n in g["status"].value_counts().items()],
                "references": [refs.compare(r, name, points) for r in refs.REFERENCES],
            }
        )
    for _, r in df.sort_values(["label", "kernel", "dtype", "mode", "head_dim", "causal", "seq_len_q"]).iterrows():
        out["points"].append(
            {
                "label": r["label"],
                "color": r["color"],
                "kernel": r["kernel"],
                "dtype": DTYPE_LABEL.get(r["dtype"], r["dtype"]),
                "mode": r["mode"],
                "point": _point(r),
                "tflops": _fmt(r["tflops"]),
                "pct": _fmt(r["pct_of_peak"]),
                "median": _time(r["median_s"]),
                "mem": _mib(r.get("work_mem_bytes")),
                "mem_kind": "" if pd.isna(r.get("mem_kind")) else str(r.get("mem_kind")),
                "rel_error": _fmt(r["rel_error"], 2),
                "status": str(r["status"]),
                "detail": "" if pd.isna(r.get("status_detail")) else str(r.get("status_detail")),
            }
        )
    for d in out["devices"]:
        for c in d["references"]:
            c["ours_text"] = "—" if c["ours"] is None else _fmt(c["ours"])
            c["ratio_text"] = "—" if c["ratio"] is None else f"{100 * c['ratio']:.0f}%"
    return {"attention": out}
