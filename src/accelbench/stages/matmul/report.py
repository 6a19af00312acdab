"""The matmul sections of the HTML report (your shapes, every matmul point): their context builders (templates:
shapes.html.j2, points.html.j2, section.html.j2 here)."""

from __future__ import annotations

import pandas as pd

from ...reporting import tables as S
from ...reporting.html import WITHIN_RUN_CI_NOTE, _cell, _shape_text, _tflops_ci, point_telemetry_cells, within_run_ci


def point_rows(tables, series) -> dict:
    """Every matmul point for the big table, grouped per device, flagged ones marked."""
    mm = tables["matmul"]
    if mm.empty:
        return {"groups": [], "counts": [], "n": 0}
    mm = S.with_series(mm, series)
    order = {lab: i for i, lab in enumerate(series["label"])}
    # rows of a backend without a device (status absent) get a grey group of their own
    nodev = mm["label"].isna()
    no_device = mm["backend"].astype(str) + " (no device)"
    mm.loc[nodev, "device_label"] = no_device[nodev]
    mm.loc[nodev, "label"] = (mm["run_id"].astype(str) + " · " + no_device)[nodev]
    mm.loc[nodev, "color"] = "#bbbbbb"
    mm.loc[nodev, "device"] = ""
    mm = mm.assign(
        _o=mm["label"].map(order).fillna(len(order)),
        _d=mm["dtype"].map(lambda d: S.DTYPE_ORDER.index(d) if d in S.DTYPE_ORDER else 99),
    )
    mm = mm.sort_values(["_o", "_d", "n"], kind="stable")
    groups = []
    for label, g in mm.groupby("label", sort=False):
        first = g.iloc[0]
        rows = []
        for _, r in g.iterrows():
            ratio = r["iqr_s"] / r["median_s"] if r["median_s"] == r["median_s"] and r["median_s"] else float("nan")
            rows.append(
                {
                    "dtype": S.DTYPE_LABEL.get(r["dtype"], _cell(r["dtype"])),
                    "n": (
                        f"{r['shape_name']} {_shape_text(r['m'], r['n'], r['k'])}"
                        if isinstance(r.get("shape_name"), str) and r.get("shape_name")
                        else int(r["n"])
                        if r["n"] == r["n"]
                        else ""
                    ),
                    "tflops": S.fmt_num(r["tflops"]),
                    "pct": S.fmt_unit(r["pct_of_peak"], "%"),
                    "median": S.fmt_time(r["median_s"]),
                    "ci": within_run_ci(
                        ""
                        if r["ci95_low_s"] != r["ci95_low_s"]
                        else f"{S.fmt_time(r['ci95_low_s'])} – {S.fmt_time(r['ci95_high_s'])}",
                        r.get("ci_method"),
                    ),
                    "iqr_pct": S.fmt_unit(ratio * 100, "%", 2),
                    "repeats": "" if r["repeats"] != r["repeats"] else int(r["repeats"]),
                    "rel_error": S.fmt_num(r["rel_error"], 2),
                    "rel_error_max": S.fmt_num(r["rel_error_max"], 2),
                    "threads": "" if r["threads"] != r["threads"] else int(r["threads"]),
                    "status": str(r["status"]),
                    "flags": str(_cell(r["flags"])),
                    "detail": str(_cell(r["status_detail"])),
                    "peak": S.fmt_num(r["peak_tflops"]),
                    "peak_source": str(_cell(r["peak_source"])),
                    **point_telemetry_cells(r),
                }
            )
        groups.append(
            {
                "label": label,
                "device_label": first["device_label"],
                "color": first["color"],
                "run_id": first["run_id"],
                "device": first["device"],
                "rows": rows,
            }
        )
    counts = mm["status"].value_counts()
    statuses = [s for s in S.STATUS_INFO if s in counts] + sorted(set(counts.index) - set(S.STATUS_INFO))
    return {
        "groups": groups,
        "counts": [{"status": s, "count": int(counts[s])} for s in statuses],
        "n": len(mm),
        "ci_note": WITHIN_RUN_CI_NOTE,
    }


def _verdicts(points: pd.DataFrame) -> dict:
    """(run_id, device, kind, point, dtype) -> the roofline row of that point."""
    if points.empty:
        return {}
    return {(r["run_id"], r["device"], r["kind"], r["point"], r["dtype"]): r for r in points.to_dict("records")}


def shape_rows(tables, series, points: pd.DataFrame) -> list[dict]:
    """Every ``matmul.shapes`` point: its TFLOP/s with the 95% interval, % of peak, how it compares with the
    best square point of the same device and dtype, its roofline verdict and status."""
    mm = S.shape_points(tables["matmul"])
    if mm.empty:
        return []
    best = S.best_tflops(tables["matmul"])
    verdicts = _verdicts(points)
    mm = S.with_series(mm, series)
    order = {lab: i for i, lab in enumerate(series["label"])}
    mm = mm.assign(
        _o=mm["label"].map(order).fillna(99),
        _d=mm["dtype"].map(lambda d: S.DTYPE_ORDER.index(d) if d in S.DTYPE_ORDER else 99),
    ).sort_values(["_o", "_d", "flops"])
    out = []
    for _, r in mm.iterrows():
        sq = best[(best["run_id"] == r["run_id"]) & (best["device"] == r["device"]) & (best["dtype"] == r["dtype"])]
        measured = not sq.empty and r["tflops"] == r["tflops"]
        ratio = float(r["tflops"]) / float(sq["tflops"].iloc[0]) if measured else None
        v = verdicts.get((r["run_id"], r["device"], "shape", r["shape_name"], r["dtype"]))
        lo = r["flops"] / r["ci95_high_s"] / 1e12 if r["ci95_high_s"] == r["ci95_high_s"] else float("nan")
        hi = r["flops"] / r["ci95_low_s"] / 1e12 if r["ci95_low_s"] == r["ci95_low_s"] else float("nan")
        out.append(
            {
                "label": r["label"],
                "color": r["color"],
                "run_id": r["run_id"],
                "device": r["device"],
                "name": r["shape_name"],
                "shape": _shape_text(r["m"], r["n"], r["k"]),
                "dtype": S.DTYPE_LABEL.get(r["dtype"], r["dtype"]),
                "tflops": S.fmt_num(r["tflops"]),
                "tflops_value": None if r["tflops"] != r["tflops"] else float(r["tflops"]),
                "ci": within_run_ci(_tflops_ci(lo, hi), r.get("ci_method")),
                "pct": S.fmt_unit(r["pct_of_peak"], "%"),
                "vs_square": "—" if ratio is None else f"{ratio:.2f}× (n={int(sq['n'].iloc[0])})",
                "verdict": v["verdict"] if v else "",
                "status": str(r["status"]),
                "detail": str(_cell(r["status_detail"])),
            }
        )
    return out


def shapes_context(tables, series, ctx) -> dict:
    return {"shapes": shape_rows(tables, series, ctx["roofline_points"]), "shapes_ci_note": WITHIN_RUN_CI_NOTE}


def points_context(tables, series, ctx) -> dict:
    return {"points": point_rows(tables, series)}
