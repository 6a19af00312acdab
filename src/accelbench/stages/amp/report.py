"""The AMP section of the HTML report: its context builder (the template is section.html.j2 here)."""

from __future__ import annotations

import pandas as pd

from ...reporting import tables as S
from ...reporting.html import point_telemetry_cells
from .stats import SPEEDUP_CI_NOTE


def amp_tables(tables, series) -> dict:
    su, tr = tables["amp_summary"], tables["amp_trials"]
    spj = {}  # mean samples per joule over a (run, device, workload, mode)'s trials
    if not tr.empty and "samples_per_j" in tr.columns:
        ok = tr[pd.to_numeric(tr["samples_per_j"], errors="coerce").notna()]
        for key, g in ok.groupby([ok["run_id"].astype(str), ok["device"].astype(str), "workload", "mode"]):
            spj[key] = float(pd.to_numeric(g["samples_per_j"]).mean())
    summ = []
    if not su.empty:
        su = S.with_series(su[su["mode"].notna()], series).sort_values(["label", "workload", "mode"])
        for _, r in su.iterrows():
            summ.append(
                {
                    "label": r["label"],
                    "color": r["color"],
                    "workload": r["workload"],
                    "mode": r["mode"],
                    "trials": r["trials"],
                    "step": S.fmt_time(r["step_s_mean"]),
                    "speedup": S.fmt_unit(r["speedup"], "×"),
                    "speedup_ci": f"{S.fmt_num(r['speedup_ci95_low'])}–{S.fmt_num(r['speedup_ci95_high'])}",
                    "acc": S.fmt_num(r["test_acc_mean"]),
                    "acc_diff": "—" if r["acc_diff"] != r["acc_diff"] else f"{r['acc_diff'] * 100:+.2f} pp",
                    "verdict": r["verdict"] if isinstance(r["verdict"], str) else "",
                    "note": r["note"] if isinstance(r["note"], str) else "",
                    "spj": S.fmt_num(spj.get((str(r["run_id"]), str(r["device"]), r["workload"], r["mode"]))),
                }
            )
    trials = []
    if not tr.empty:
        tr = S.with_series(tr, series).sort_values(["label", "workload", "mode", "seed"])
        for _, r in tr.iterrows():
            trials.append(
                {
                    "label": r["label"],
                    "color": r["color"],
                    "workload": r["workload"],
                    "mode": r["mode"],
                    "seed": r["seed"],
                    "amp_dtype": r["amp_dtype"] if isinstance(r["amp_dtype"], str) else "",
                    "step": S.fmt_time(r["step_median_s"]),
                    "sps": S.fmt_num(r["samples_per_s"]),
                    "mem": S.fmt_num(r["peak_mem_bytes"] / 2**20) + " MiB",
                    "mem_kind": r["mem_kind"],
                    "loss": S.fmt_num(r["final_loss"]),
                    "acc": S.fmt_num(r["test_acc"]),
                    "skipped": r["skipped_steps"],
                    "status": str(r["status"]),
                    "spj": S.fmt_num(r.get("samples_per_j")),
                    **point_telemetry_cells(r),
                }
            )
    return {"summary": summ, "trials": trials, "ci_note": SPEEDUP_CI_NOTE}


def context(tables, series, ctx) -> dict:
    return {"amp_tables": amp_tables(tables, series)}
