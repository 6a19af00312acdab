"""The AMP summary table's lines in the GPU check's summary (``Table.gpu_summary``; bench/gpu_summary.py)."""

from __future__ import annotations


def lines(df, num) -> list[str]:
    """Every mode's speedup over FP32 with its interval, the accuracy difference and the verdict (the FP32 rows,
    the baseline, are left out)."""
    return [
        f"  amp {r['device']} {r['workload']} {r['mode']}: speedup {num(r['speedup'], '.3g')} "
        f"[{num(r['speedup_ci95_low'], '.3g')}, {num(r['speedup_ci95_high'], '.3g')}], "
        f"acc diff {num(r['acc_diff'], '+.3f')}: {r['verdict']}"
        for _, r in df.iterrows()
        if str(r.get("mode")) != "fp32"
    ]
