"""The matmul table's lines in the GPU check's summary (``Table.gpu_summary``; bench/gpu_summary.py)."""

from __future__ import annotations


def lines(df, num) -> list[str]:
    """TFLOP/s and % of peak at the largest size of every (device, dtype), with the torch dtype it ran as."""
    out = []
    for (device, dtype), g in df.groupby(["device", "dtype"], sort=False):
        r = g.sort_values("n").iloc[-1]
        used = f" ({r['torch_dtype']})" if "torch_dtype" in r and isinstance(r["torch_dtype"], str) else ""
        out.append(
            f"  matmul {device} {dtype}{used} n={int(r['n'])}: {num(r['tflops'])} TFLOP/s, "
            f"{num(r['pct_of_peak'], '.1f')}% of peak, {r['status']}"
        )
    return out
