"""The AMP stage's own comparison of two runs (``accelbench compare``, ``plugin.CompareExtra``): per workload and
AMP mode each run's speedup over FP32 and accuracy difference, and how they changed, with paired-by-seed t intervals
(``measure.paired``). Written to ``results/compare/<baseline>__<candidate>_amp.csv``; its card in the report's
"Compared with" section is ``compare.html.j2`` here."""

from __future__ import annotations

import math

import pandas as pd

from ...measure.paired import paired_diff_ci, speedup_ci
from ...reporting import tables as S
from .stats import BASELINE

# the columns of <baseline>__<candidate>_amp.csv: speedups are FP32 step time / the mode's (x), accuracy
# differences the mode's test accuracy minus FP32's (a fraction); ratio and change: candidate over/minus baseline
COLUMNS = (
    "backend",
    "device",
    "device_name",
    "workload",
    "mode",
    "seeds",
    "baseline_speedup",
    "baseline_speedup_ci95_low",
    "baseline_speedup_ci95_high",
    "candidate_speedup",
    "candidate_speedup_ci95_low",
    "candidate_speedup_ci95_high",
    "speedup_diff",
    "speedup_ratio",
    "speedup_ratio_ci95_low",
    "speedup_ratio_ci95_high",
    "baseline_acc_diff",
    "candidate_acc_diff",
    "acc_diff_change",
    "acc_diff_change_ci95_low",
    "acc_diff_change_ci95_high",
)


def comparison(base_run, cand_run, any_device_model: bool = False) -> pd.DataFrame:
    """Per (backend, device, workload, AMP mode) in both runs: each run's speedup over FP32 and accuracy difference
    (from its summary), and the change: candidate/baseline speedup ratio and accuracy-difference change, paired by
    seed (the same seed is the same initial weights and data in both runs), with t intervals (``measure.paired``)."""
    cols = list(COLUMNS)
    bt, ct = base_run.tables.get("amp_trials"), cand_run.tables.get("amp_trials")
    bs, cs = base_run.tables.get("amp_summary"), cand_run.tables.get("amp_summary")
    if bt is None or ct is None or bt.empty or ct.empty:
        return pd.DataFrame(columns=cols)

    def per_seed(trials, backend, device, workload, mode):
        t = trials[
            (trials["backend"] == backend)
            & (trials["device"].astype(str) == device)
            & (trials["workload"] == workload)
            & (trials["status"] == "ok")
        ]
        base = t[t["mode"] == BASELINE].set_index("seed")
        cur = t[t["mode"] == mode].set_index("seed")
        seeds = sorted(set(base.index) & set(cur.index))
        return {
            int(s): (
                float(base.at[s, "step_median_s"]) / float(cur.at[s, "step_median_s"]),
                float(cur.at[s, "test_acc"]) - float(base.at[s, "test_acc"]),
            )
            for s in seeds
        }

    def summary_row(summary, device, workload, mode):
        if summary is None or summary.empty:
            return {}
        s = summary[
            (summary["device"].astype(str) == device) & (summary["workload"] == workload) & (summary["mode"] == mode)
        ]
        return s.iloc[0].to_dict() if len(s) else {}

    rows = []
    keys = ["backend", "device", "device_name", "workload", "mode"]
    cand_modes = ct[(ct["mode"] != BASELINE) & ct["device"].notna()][keys].drop_duplicates()
    for _, k in cand_modes.iterrows():
        device, workload, mode = str(k["device"]), k["workload"], k["mode"]
        same = bt[
            (bt["device"].astype(str) == device)
            & (bt["workload"] == workload)
            & (bt["mode"] == mode)
            & (bt["backend"] == k["backend"])
        ]
        if not any_device_model:
            same = same[same["device_name"] == k["device_name"]]
        if same.empty:
            continue
        b, c = per_seed(bt, k["backend"], device, workload, mode), per_seed(ct, k["backend"], device, workload, mode)
        seeds = sorted(set(b) & set(c))
        ratio, r_low, r_high = (
            speedup_ci([c[s][0] for s in seeds], [b[s][0] for s in seeds]) if seeds else (math.nan,) * 3
        )
        change, a_low, a_high = (
            paired_diff_ci([c[s][1] for s in seeds], [b[s][1] for s in seeds]) if seeds else (math.nan,) * 3
        )
        sb, sc = summary_row(bs, device, workload, mode), summary_row(cs, device, workload, mode)
        rows.append(
            {
                "backend": k["backend"],
                "device": device,
                "device_name": k["device_name"],
                "workload": workload,
                "mode": mode,
                "seeds": len(seeds),
                "baseline_speedup": sb.get("speedup", math.nan),
                "baseline_speedup_ci95_low": sb.get("speedup_ci95_low", math.nan),
                "baseline_speedup_ci95_high": sb.get("speedup_ci95_high", math.nan),
                "candidate_speedup": sc.get("speedup", math.nan),
                "candidate_speedup_ci95_low": sc.get("speedup_ci95_low", math.nan),
                "candidate_speedup_ci95_high": sc.get("speedup_ci95_high", math.nan),
                "speedup_diff": sc.get("speedup", math.nan) - sb.get("speedup", math.nan),
                "speedup_ratio": ratio,
                "speedup_ratio_ci95_low": r_low,
                "speedup_ratio_ci95_high": r_high,
                "baseline_acc_diff": sb.get("acc_diff", math.nan),
                "candidate_acc_diff": sc.get("acc_diff", math.nan),
                "acc_diff_change": change,
                "acc_diff_change_ci95_low": a_low,
                "acc_diff_change_ci95_high": a_high,
            }
        )
    return pd.DataFrame(rows, columns=cols)


def _num(x, fmt: str = ".3g") -> str:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return "\u2014"
    return "\u2014" if math.isnan(x) else format(x, fmt)


def lines(df: pd.DataFrame) -> list[str]:
    """One line per compared workload and mode, for the CLI's text (``df``: ``comparison``'s frame, or the file)."""
    return [
        f"AMP {r.device} {r.workload} {r.mode}: speedup {_num(r.baseline_speedup)}\u00d7 \u2192 "
        f"{_num(r.candidate_speedup)}\u00d7 (ratio {_num(r.speedup_ratio)} "
        f"[{_num(r.speedup_ratio_ci95_low)}, {_num(r.speedup_ratio_ci95_high)}]); accuracy difference "
        f"{_num(r.baseline_acc_diff, '+.3f')} \u2192 {_num(r.candidate_acc_diff, '+.3f')} (change "
        f"{_num(r.acc_diff_change, '+.3f')} [{_num(r.acc_diff_change_ci95_low, '+.3f')}, "
        f"{_num(r.acc_diff_change_ci95_high, '+.3f')}], {r.seeds} seed pair(s))"
        for r in df.itertuples()
    ]


def context(df: pd.DataFrame) -> list[dict]:
    """The rows of the report's card (``compare.html.j2``): each run's speedup with its interval, their difference
    and paired ratio, and the change of the accuracy difference in percentage points."""
    rows = []
    for _, a in df.iterrows():
        rows.append(
            {
                "device": a["device"],
                "workload": a["workload"],
                "mode": a["mode"],
                "seeds": a["seeds"],
                "baseline": S.fmt_unit(a["baseline_speedup"], "×"),
                "baseline_ci": f"{S.fmt_num(a['baseline_speedup_ci95_low'])}–{S.fmt_num(a['baseline_speedup_ci95_high'])}",
                "candidate": S.fmt_unit(a["candidate_speedup"], "×"),
                "candidate_ci": f"{S.fmt_num(a['candidate_speedup_ci95_low'])}–{S.fmt_num(a['candidate_speedup_ci95_high'])}",
                "diff": "—"
                if a["speedup_diff"] != a["speedup_diff"]
                else f"{a['speedup_diff']:+.3g}×".replace("-", "−"),
                "ratio": S.fmt_unit(a["speedup_ratio"], "×"),
                "ratio_ci": f"{S.fmt_num(a['speedup_ratio_ci95_low'])}–{S.fmt_num(a['speedup_ratio_ci95_high'])}",
                "acc_change": "—"
                if a["acc_diff_change"] != a["acc_diff_change"]
                else f"{a['acc_diff_change'] * 100:+.2f} pp",
                "acc_ci": ""
                if a["acc_diff_change_ci95_low"] != a["acc_diff_change_ci95_low"]
                else f"{a['acc_diff_change_ci95_low'] * 100:+.2f} to {a['acc_diff_change_ci95_high'] * 100:+.2f} pp",
            }
        )
    return rows
