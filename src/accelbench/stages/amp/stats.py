"""The AMP verdict: is a low-precision mode faster than the FP32 baseline, by how much, and does the
model still learn as well? Pure functions over the trials table (no torch, no I/O).

Statistics, per (device, workload, mode), over the seeds where both the mode's trial and the FP32
trial of the same seed finished (``status == ok``); a seed is one *pair* (same initial weights, same
data order, only the precision differs):

- **speedup** = FP32 step time / mode step time (per-trial median step times). The point estimate is
  the geometric mean of the paired ratios, and its 95% interval is a Student-t interval on the log
  ratios (``scipy.stats.t``, n-1 degrees of freedom), exponentiated. Log ratios make 2x and 0.5x
  symmetric and the interval positive.
- **acc_diff** = mode held-out accuracy - FP32 held-out accuracy, mean of the paired differences with a
  paired-t 95% interval.
- **faster**: ``yes`` when the speedup interval lies above 1, ``no`` when it lies below 1 (the mode is
  *slower*), ``inconclusive`` when it contains 1 or there is no interval (a single pair).
- **accuracy_parity**: an equivalence check. ``yes`` when the whole acc_diff interval lies within
  ±tolerance, ``no`` when it lies entirely outside (a real difference larger than the tolerance),
  ``inconclusive`` otherwise (too few or too noisy seeds to tell).

With one seed there is no interval: the CIs are NaN, both verdicts are ``inconclusive`` and the
note says so.

**What the intervals cover.** All seeds run in one process, modes interleaved within a seed (slow drift hits a
pair's two trials alike). The intervals therefore cover seed-to-seed variation within this one run, not the
variation from one run (process) to the next, and the pairs' independence cannot be checked from a handful of
seeds: ``speedup_ci_method`` labels the speedup interval ``descriptive``. Run-to-run claims are
``accelbench compare``'s, over several runs a side.
"""

from __future__ import annotations

import math

import pandas as pd

from ...measure.paired import _t_interval, paired_diff_ci, speedup_ci  # noqa: F401  (re-exported)

BASELINE = "fp32"
COMPILED = "_compiled"
MODE_LABEL = {"amp_bf16": "AMP (bf16)", "amp_fp16": "AMP (fp16)", "tf32": "TF32", "fp32": "FP32"}


def mode_label(mode: str) -> str:
    """``AMP (bf16)``, ``FP32 compiled``, ..."""
    if mode.endswith(COMPILED):
        base = mode[: -len(COMPILED)]
        return f"{MODE_LABEL.get(base, base)} compiled"
    return MODE_LABEL.get(mode, mode)


def baseline_of(mode: str, modes) -> str:
    """What a mode is compared with: a compiled mode with the same precision in eager mode (the compile
    speedup), every other mode with FP32."""
    if mode.endswith(COMPILED) and mode[: -len(COMPILED)] in set(modes):
        return mode[: -len(COMPILED)]
    return BASELINE


# The speedup interval is a t-interval over the seed pairs of one process: the pairs are not separate runs and
# their independence cannot be checked from a handful of seeds, so it is labelled descriptive (measure.blocks):
# it covers seed-to-seed variation within this run, not run-to-run variation.
CI_SEED_PAIRS = "descriptive"
# what the report says under each table of speedup intervals
SPEEDUP_CI_NOTE = (
    "95% CI (within run, descriptive): a Student-t interval over the seed pairs of this one run (the "
    "modes take turns within a seed, so slow drift hits both sides of a pair); it covers "
    "seed-to-seed variation within this process, not from one run to the next, which accelbench "
    "compare measures over several runs a side."
)
# summary rows for modes that could not be compared
STATUS_OK, STATUS_NO_PAIRS, STATUS_ABSENT = "ok", "no_pairs", "absent"


def faster_verdict(ci_low: float, ci_high: float) -> str:
    """``yes`` (interval above 1), ``no`` (below 1: slower) or ``inconclusive``."""
    if math.isnan(ci_low) or math.isnan(ci_high):
        return "inconclusive"
    if ci_low > 1:
        return "yes"
    if ci_high < 1:
        return "no"
    return "inconclusive"


def parity_verdict(ci_low: float, ci_high: float, tolerance: float) -> str:
    """``yes`` when the difference interval lies within ±tolerance, ``no`` when entirely outside it."""
    if math.isnan(ci_low) or math.isnan(ci_high):
        return "inconclusive"
    if -tolerance <= ci_low and ci_high <= tolerance:
        return "yes"
    if ci_low > tolerance or ci_high < -tolerance:
        return "no"
    return "inconclusive"


def _fmt_ci(low: float, high: float, fmt: str, sep: str = "-") -> str:
    if math.isnan(low) or math.isnan(high):
        return "no CI: one seed"
    return f"95% CI {low:{fmt}}{sep}{high:{fmt}}"


def verdict_text(
    mode: str,
    device: str,
    speedup: float,
    ci: tuple[float, float],
    faster: str,
    parity: str,
    acc_diff: float,
    acc_ci: tuple[float, float],
    tolerance: float,
    baseline_step_s: float,
    baseline_acc: float,
    device_name: str = "",
    tf32_measured: bool = False,
    baseline_mode: str = BASELINE,
) -> str:
    """One sentence a reader can quote, e.g. ``AMP (bf16) is 0.42x FP32 (slower, ...) on cpu; ...``."""
    word = {"yes": "faster", "no": "slower", "inconclusive": "no clear difference"}[faster]
    label = mode_label(mode)
    where = f"{device} ({device_name})" if device_name and device_name != device else device
    base_label = mode_label(baseline_mode)
    if baseline_mode == BASELINE:
        baseline = "FP32 baseline (TF32 off)" if tf32_measured else "FP32 baseline"
    else:
        baseline = f"{base_label} (eager) baseline"
    return (
        f"{label} is {speedup:.2f}x {base_label} ({word}, {_fmt_ci(*ci, '.2f')}x) on {where}; "
        f"accuracy parity within {tolerance:g}: {parity} (difference {acc_diff:+.3f}, {_fmt_ci(*acc_ci, '+.3f', '..')}); "
        f"{baseline}: {baseline_step_s * 1e3:.3g} ms/step, held-out accuracy {baseline_acc:.3f}"
    )


def _failed_note(label: str, rows: pd.DataFrame) -> str:
    bad = rows[rows["status"] != "ok"]
    if bad.empty:
        return ""
    parts = [f"seed {int(r.seed)}: {r.status}" for r in bad.itertuples()]
    return (
        f"{len(bad)} of {len(rows)} {label} trials did not finish ({'; '.join(parts)}); they are left out of the pairs."
    )


def summarize_trials(trials: pd.DataFrame, tolerance: float, amp_notes: dict | None = None) -> pd.DataFrame:
    """One row per (device, workload, non-baseline mode): speedup and accuracy difference vs FP32.

    ``trials`` needs columns backend, device, device_name, workload, mode, seed, amp_dtype,
    step_median_s, test_acc, majority_acc, skipped_steps, status. ``amp_notes`` maps a device to what
    its backend says about AMP there (``Backend.amp_note``: a CPU without native bf16, say).
    """
    amp_notes = amp_notes or {}
    rows = []
    keys = ["backend", "device", "device_name", "workload"]
    for (backend, device, device_name, workload), group in trials.groupby(keys, sort=False, dropna=False):
        all_modes = list(dict.fromkeys(group["mode"]))
        for mode in [m for m in all_modes if m != BASELINE]:
            baseline_mode = baseline_of(mode, all_modes)
            base = group[group["mode"] == baseline_mode].set_index("seed")
            cur = group[group["mode"] == mode].set_index("seed")
            ok_seeds = [
                s for s in cur.index if s in base.index and cur.at[s, "status"] == "ok" and base.at[s, "status"] == "ok"
            ]
            b, m = base.loc[ok_seeds], cur.loc[ok_seeds]
            speedup, s_low, s_high = speedup_ci(b["step_median_s"], m["step_median_s"])
            acc_diff, a_low, a_high = paired_diff_ci(m["test_acc"], b["test_acc"])
            faster = faster_verdict(s_low, s_high)
            parity = parity_verdict(a_low, a_high, tolerance)
            amp_dtype = str(cur["amp_dtype"].iloc[0]) if len(cur) else ""
            notes = []
            if mode.startswith("amp_") and baseline_mode == BASELINE:
                notes.append(amp_notes.get(device, ""))
            notes.append(_failed_note(mode_label(mode), cur.reset_index()))
            notes.append(_failed_note(mode_label(baseline_mode), base.reset_index()))
            if len(ok_seeds) == 1:
                notes.append(
                    "Only one seed pair: no confidence intervals, so faster and accuracy_parity are "
                    "inconclusive by design; list more seeds in amp.seeds."
                )
            base_acc = float(b["test_acc"].mean()) if len(b) else math.nan
            majority = float(b["majority_acc"].mean()) if len(b) and "majority_acc" in b else math.nan
            if not math.isnan(base_acc) and not math.isnan(majority) and base_acc < majority + 0.1:
                notes.append(
                    f"The FP32 baseline barely learned (held-out accuracy {base_acc:.3f}, majority class "
                    f"{majority:.3f}): accuracy parity says little here; raise amp.steps."
                )
            skipped = m["skipped_steps"]
            if mode.startswith("amp_fp16") and len(skipped) and skipped.sum() > 0:
                notes.append(
                    f"GradScaler skipped {int(skipped.sum())} steps over {len(skipped)} trials "
                    f"(inf/NaN gradients; a few at the start are the scale calibrating)."
                )
            if ok_seeds:
                verdict = verdict_text(
                    mode,
                    device,
                    speedup,
                    (s_low, s_high),
                    faster,
                    parity,
                    acc_diff,
                    (a_low, a_high),
                    tolerance,
                    float(b["step_median_s"].mean()),
                    base_acc,
                    device_name=str(device_name),
                    tf32_measured="tf32" in set(group["mode"]),
                    baseline_mode=baseline_mode,
                )
                status = STATUS_OK
            else:
                verdict = (
                    f"No verdict for {mode_label(mode)} on {device}: no seed where both it and "
                    f"{mode_label(baseline_mode)} finished."
                )
                status = STATUS_NO_PAIRS
            rows.append(
                {
                    "backend": backend,
                    "device": device,
                    "device_name": device_name,
                    "workload": workload,
                    "mode": mode,
                    "amp_dtype": amp_dtype,
                    "baseline": baseline_mode,
                    "trials": len(ok_seeds),
                    "step_s_mean": float(m["step_median_s"].mean()) if ok_seeds else math.nan,
                    "baseline_step_s_mean": float(b["step_median_s"].mean()) if ok_seeds else math.nan,
                    "speedup": speedup,
                    "speedup_ci95_low": s_low,
                    "speedup_ci95_high": s_high,
                    "speedup_ci_method": CI_SEED_PAIRS if not math.isnan(s_low) else "",
                    "test_acc_mean": float(m["test_acc"].mean()) if ok_seeds else math.nan,
                    "baseline_test_acc_mean": base_acc,
                    "acc_diff": acc_diff,
                    "acc_diff_ci95_low": a_low,
                    "acc_diff_ci95_high": a_high,
                    "accuracy_tolerance": tolerance,
                    "faster": faster,
                    "accuracy_parity": parity,
                    "verdict": verdict,
                    "note": " ".join(n for n in notes if n),
                    "status": status,
                }
            )
    return pd.DataFrame(rows)
