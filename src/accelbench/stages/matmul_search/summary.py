"""The shape search's part of the report's summary: beside each best square point of the matmul summary, the
search's best confirmed shape in that dtype, and its clause of the device's headline."""

from __future__ import annotations

from ...reporting import tables as S
from ...reporting.html import _shape_text, _tflops_ci
from ..matmul.summary import device_row


def context(tables, series, ctx) -> dict:
    """The matmul summary's ``best`` with each cell's ``search`` filled in (a device or dtype measured by the
    search only gets its row or column)."""
    best = ctx["best"]
    searched = S.best_search(tables.get("matmul_search"))
    if searched.empty:
        return {"best": best}
    dtypes = S.dtype_sorted(list(best["dtypes"]) + list(searched["dtype"]))
    rows = {(r["run_id"], r["device"]): r for r in best["rows"]}
    out_rows = []
    for _, s in series.iterrows():
        found = searched[(searched["run_id"] == s["run_id"]) & (searched["device"] == s["device"])]
        row = rows.get((s["run_id"], s["device"]))
        if row is None and found.empty:
            continue
        cells = {c["dtype"]: c for c in (row["cells"] if row else [])}
        new = []
        for dtype in dtypes:
            c = dict(cells.get(dtype) or {"dtype": dtype, "tflops": None, "search": None})
            f = found[found["dtype"] == dtype]
            if not f.empty:
                f = f.iloc[0]
                c["search"] = {
                    "tflops": float(f["tflops"]),
                    "tflops_text": S.fmt_num(f["tflops"]),
                    "shape": _shape_text(f["m"], f["n"], f["k"]),
                    "ci": _tflops_ci(f["tflops_ci95_low"], f["tflops_ci95_high"]),
                }
            new.append(c)
        out_rows.append({**(row or device_row(s, [])), "cells": new})
    return {"best": {"dtypes": dtypes, "dtype_labels": [S.DTYPE_LABEL.get(d, d) for d in dtypes], "rows": out_rows}}


def headline(ctx, s) -> list[tuple[int, str]]:
    """The search's best shape of the device (rank 20, after the peak)."""
    row = next((r for r in ctx["best"]["rows"] if r["run_id"] == s["run_id"] and r["device"] == s["device"]), None)
    searched = [c for c in (row["cells"] if row else []) if c.get("search")]
    if not searched or not any(c["tflops"] is not None for c in row["cells"]):
        return []
    c = max(searched, key=lambda c: c["search"]["tflops"])
    return [
        (
            20,
            f"the shape search reached {c['search']['tflops_text']} TFLOP/s in "
            f"{S.DTYPE_LABEL.get(c['dtype'], c['dtype'])} at {c['search']['shape']}",
        )
    ]
