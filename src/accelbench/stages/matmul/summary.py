"""The matmul stage's part of the report's summary: the best trustworthy square point per device and dtype (with
its % of peak and size), the speedup over the CPU of the same run, and their clauses of each device's headline."""

from __future__ import annotations

import json

from ...reporting import tables as S
from . import references as refs


def summary_best(tables, series) -> dict:
    best = S.best_tflops(tables["matmul"])
    measured_any = S.measured(S.square_points(tables["matmul"]))
    dtypes = S.dtype_sorted(list(measured_any["dtype"]) if not measured_any.empty else [])
    rows = []
    for _, s in series.iterrows():
        b = best[(best["run_id"] == s["run_id"]) & (best["device"] == s["device"])]
        m = (
            measured_any[(measured_any["run_id"] == s["run_id"]) & (measured_any["device"] == s["device"])]
            if not measured_any.empty
            else measured_any
        )
        if b.empty and m.empty:
            continue
        cells = []
        for dtype in dtypes:
            r = b[b["dtype"] == dtype]
            if r.empty:
                cells.append({"dtype": dtype, "tflops": None, "search": None})
                continue
            r = r.iloc[0]
            cells.append(
                {
                    "dtype": dtype,
                    "tflops": float(r["tflops"]),
                    "tflops_text": S.fmt_num(r["tflops"]),
                    "pct": None if r["pct_of_peak"] != r["pct_of_peak"] else float(r["pct_of_peak"]),
                    "pct_text": S.fmt_num(r["pct_of_peak"], 2) if r["pct_of_peak"] == r["pct_of_peak"] else "",
                    "peak": r["peak_tflops"],
                    "n": int(r["n"]),
                    "status": r["status"],
                    "search": None,
                }
            )
        rows.append(device_row(s, cells))
    return {"dtypes": dtypes, "dtype_labels": [S.DTYPE_LABEL.get(d, d) for d in dtypes], "rows": rows}


def device_row(s, cells: list[dict]) -> dict:
    """One device's row of the best-throughput table (``s``: its series row)."""
    return {
        "label": s["label"],
        "device_label": s["device_label"],
        "color": s["color"],
        "run_id": s["run_id"],
        "backend": s["backend"],
        "device": s["device"],
        "device_name": s["device_name"],
        "cells": cells,
    }


def summary_speedup(tables, series) -> dict:
    sp = S.cpu_speedup(tables["matmul"])
    accel = S.accelerator_devices(tables["matmul"])
    blocks = []
    for _, s in series.iterrows():
        g = sp[(sp["run_id"] == s["run_id"]) & (sp["device"] == s["device"])]
        if g.empty:
            continue
        sizes = sorted({int(n) for n in g["n"]})
        rows = []
        for dtype in S.dtype_sorted(g["dtype"]):
            d = g[g["dtype"] == dtype]
            cells = []
            for n in sizes:
                r = d[d["n"] == n]
                v = float(r["speedup"].iloc[0]) if not r.empty else None
                cells.append({"n": n, "value": v, "text": "—" if v is None else S.fmt_num(v, 3) + "×"})
            rows.append({"dtype": dtype, "dtype_label": S.DTYPE_LABEL.get(dtype, dtype), "cells": cells})
        blocks.append(
            {
                "label": s["label"],
                "device_label": s["device_label"],
                "color": s["color"],
                "run_id": s["run_id"],
                "device": s["device"],
                "baseline": g["baseline_device"].iloc[0],
                "sizes": sizes,
                "rows": rows,
            }
        )
    return {"blocks": blocks, "any_accelerator": not accel.empty}


def reference_summary(tables) -> list[dict]:
    """Per run, device and dtype with a published figure (``references``): its sentence."""
    out = []
    runs = tables["runs"]
    for run_id, mm in tables["matmul"].groupby("run_id") if not tables["matmul"].empty else []:
        r = runs[runs["run_id"].astype(str) == str(run_id)] if not runs.empty else runs
        torch_version = (
            str(r["torch_version"].iloc[0])
            if len(r) and r["torch_version"].iloc[0] == r["torch_version"].iloc[0]
            else ""
        )
        env = json.loads(r["env_json"].iloc[0]) if len(r) and isinstance(r["env_json"].iloc[0], str) else {}
        out += refs.reference_lines(mm, torch_version=torch_version, env=env)
    return out


def context(tables, series, ctx) -> dict:
    return {
        "best": summary_best(tables, series),
        "speedup": summary_speedup(tables, series),
        "references": reference_summary(tables),
    }


def headline(ctx, s) -> list[tuple[int, str]]:
    """The device's peak TFLOP/s (rank 10) and its speedup over the CPU in FP32 at the largest size (rank 30)."""
    out = []
    row = next((r for r in ctx["best"]["rows"] if r["run_id"] == s["run_id"] and r["device"] == s["device"]), None)
    cells = [c for c in row["cells"] if c["tflops"] is not None] if row else []
    if not cells:
        return out
    top = max(cells, key=lambda c: c["tflops"])
    out.append(
        (
            10,
            f"peaks at {top['tflops_text']} TFLOP/s in {S.DTYPE_LABEL.get(top['dtype'], top['dtype'])}"
            + (f" ({top['pct_text']}% of peak)" if top.get("pct_text") else ""),
        )
    )
    for b in ctx["speedup"]["blocks"]:
        if b["run_id"] == s["run_id"] and b["device"] == s["device"]:
            fp = [r for r in b["rows"] if r["dtype"] == "float32"] or b["rows"][:1]
            last = [c for c in fp[0]["cells"] if c["value"] is not None] if fp else []
            if last:
                out.append(
                    (30, f"{last[-1]['text']} the {b['baseline']} in {fp[0]['dtype_label']} at n={last[-1]['n']}")
                )
    return out
