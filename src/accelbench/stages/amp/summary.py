"""The AMP stage's part of the report's summary: each AMP mode's speedup over FP32 with its interval and the
accuracy change, three-state verdicts (a device x workload matrix), and its clause of each device's headline."""

from __future__ import annotations

from ...reporting import tables as S


def summary_amp(tables, series) -> list[dict]:
    amp = S.amp_verdicts(tables["amp_summary"])
    out = []
    if amp.empty:
        return out
    amp = S.with_series(amp, series)
    order = {lab: i for i, lab in enumerate(series["label"])}
    amp = amp.assign(_o=amp["label"].map(order)).sort_values(["_o", "workload", "mode"], kind="stable")
    previous = None
    for _, r in amp.iterrows():
        # faster / accuracy_parity are tri-state: yes, no, inconclusive (the CI straddles the line)
        faster, parity = S.as_bool(r["faster"]), S.as_bool(r["accuracy_parity"])
        verdict_class = "good" if faster and parity else ("bad" if parity is False else "meh")
        speed = {True: "faster", False: "slower", None: "no clear difference"}[faster]
        short = (
            speed
            + {True: " · accuracy parity", False: " · accuracy lost", None: " · accuracy parity inconclusive"}[parity]
        )
        icon = "✗" if parity is False else {"faster": "✓", "slower": "▼"}.get(speed, "≈")
        out.append(
            {
                "label": r["label"],
                "device_label": r["device_label"],
                "color": r["color"],
                "run_id": r["run_id"],
                "device": r["device"],
                "first_of_device": r["label"] != previous,
                "verdict_short": short,
                "verdict_icon": icon,
                "workload": r["workload"],
                "mode": r["mode"],
                "speedup": r["speedup"],
                "speedup_text": S.fmt_num(r["speedup"], 3) + "×" if r["speedup"] == r["speedup"] else "—",
                "speedup_ci": f"{S.fmt_num(r['speedup_ci95_low'], 3)}–{S.fmt_num(r['speedup_ci95_high'], 3)}",
                "acc_diff_text": "—" if r["acc_diff"] != r["acc_diff"] else f"{r['acc_diff'] * 100:+.1f} pp",
                "acc_ci": (
                    ""
                    if r["acc_diff_ci95_low"] != r["acc_diff_ci95_low"]
                    else f"{r['acc_diff_ci95_low'] * 100:+.1f} to {r['acc_diff_ci95_high'] * 100:+.1f} pp"
                ),
                "faster": faster,
                "parity": parity,
                "verdict": r["verdict"] if isinstance(r["verdict"], str) else "",
                "verdict_class": verdict_class,
                "trials": r["trials"],
            }
        )
        previous = r["label"]
    return out


def amp_matrix(amp: list[dict]) -> dict:
    """The summary card's layout: one row per run, device and mode, one column per workload (in the trials' order),
    so that four workloads on three devices still fit above the fold; each cell is one entry of ``amp``."""
    workloads = list(dict.fromkeys(a["workload"] for a in amp))
    rows: dict[tuple, dict] = {}
    for a in amp:
        row = rows.setdefault((a["run_id"], a["device"], a["mode"]), {**a, "cells": {}})
        row["cells"][a["workload"]] = a
    return {"workloads": workloads, "rows": list(rows.values())}


def context(tables, series, ctx) -> dict:
    amp = summary_amp(tables, series)
    return {"amp": amp, "amp_matrix": amp_matrix(amp)}


def headline(ctx, s) -> list[tuple[int, str]]:
    """The AMP speedup range of the device and whether accuracy held (rank 40, last)."""
    a = [
        x
        for x in ctx["amp"]
        if x["run_id"] == s["run_id"] and x["device"] == s["device"] and str(x["mode"]).startswith("amp")
    ]
    sp = [x["speedup"] for x in a if x["speedup"] == x["speedup"]]
    if not sp:
        return []
    lo, hi = f"{min(sp):.2f}", f"{max(sp):.2f}"
    text = f"AMP trains at {lo}× FP32 speed" if lo == hi else f"AMP trains at {lo}–{hi}× FP32 speed"
    return [(40, text + (", accuracy parity" if all(x["parity"] for x in a) else ", accuracy NOT at parity"))]
