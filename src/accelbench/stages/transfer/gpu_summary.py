"""The transfer table's lines in the GPU check's summary (``Table.gpu_summary``; bench/gpu_summary.py)."""

from __future__ import annotations

from ...columns import TRUSTED


def lines(df, num) -> list[str]:
    """The best trusted bandwidth per device, direction and host memory kind."""
    ok = df[df["status"].astype(str).isin(TRUSTED)]
    return [
        f"  transfer {device} {direction} {memory}: best {num(g['gbps'].max(), '.3g')} GB/s"
        for (device, direction, memory), g in ok.groupby(["device", "direction", "memory"])
    ]
