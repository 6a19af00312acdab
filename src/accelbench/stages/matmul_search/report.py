"""The shape-search section of the HTML report: its context builder (the template is section.html.j2 here)."""

from __future__ import annotations

from ...reporting import tables as S
from ...reporting.html import WITHIN_RUN_CI_NOTE, _cell, _shape_text, _tflops_ci, within_run_ci


def search_tables(tables, series) -> dict:
    """The search per device and dtype (best shape, TFLOP/s and CI, share of the grid, time) and every
    evaluation."""
    search = tables.get("matmul_search")
    if search is None or search.empty:
        return {"summary": [], "evaluations": []}
    best = S.with_series(S.best_search(search), series)
    summary = []
    for _, r in best.iterrows():
        share = r["evaluated_shapes"] / r["grid_points"] if r["grid_points"] else float("nan")
        summary.append(
            {
                "label": r["label"],
                "color": r["color"],
                "run_id": r["run_id"],
                "device": r["device"],
                "dtype": S.DTYPE_LABEL.get(r["dtype"], r["dtype"]),
                "dtype_key": r["dtype"],
                "shape": _shape_text(r["m"], r["n"], r["k"]),
                "tflops": S.fmt_num(r["tflops"]),
                "tflops_value": float(r["tflops"]),
                "ci": within_run_ci(_tflops_ci(r["tflops_ci95_low"], r["tflops_ci95_high"]), r.get("ci_method")),
                "pct": S.fmt_unit(r["pct_of_peak"], "%"),
                "shapes": f"{int(r['evaluated_shapes'])} of {int(r['grid_points'])}",
                "share": S.fmt_unit(100 * share, "%", 2),
                "evaluations": int(r["evaluations"]),
                "time": f"{S.fmt_time(r['search_s'])} of {S.fmt_time(r['budget_s'])}",
                "stop": str(_cell(r["stop_reason"])),
                "phase": str(r["phase"]),
            }
        )
    ev = S.with_series(search[search["status"].astype(str) != "absent"], series)
    evaluations = []
    if not ev.empty:
        ev = ev.sort_values(["label", "dtype", "evaluation"])
        for _, r in ev.iterrows():
            evaluations.append(
                {
                    "label": r["label"],
                    "color": r["color"],
                    "dtype": S.DTYPE_LABEL.get(r["dtype"], r["dtype"]),
                    "evaluation": "" if r["evaluation"] != r["evaluation"] else int(r["evaluation"]),
                    "phase": str(_cell(r["phase"])),
                    "shape": _shape_text(r["m"], r["n"], r["k"]) if r["m"] == r["m"] else "",
                    "tflops": S.fmt_num(r["tflops"]),
                    "ci": within_run_ci(_tflops_ci(r["tflops_ci95_low"], r["tflops_ci95_high"]), r.get("ci_method")),
                    "best": S.as_bool(r["best"]) is True,
                    "status": str(r["status"]),
                }
            )
    return {"summary": summary, "evaluations": evaluations, "ci_note": WITHIN_RUN_CI_NOTE}


def context(tables, series, ctx) -> dict:
    return {"search": search_tables(tables, series)}
