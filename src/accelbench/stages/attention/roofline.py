"""The attention stage's points on the roofline (``attention``): every trustworthy point, its flops by
FlashAttention's convention over ``min_bytes`` (q, k, v read and o written once; backward: once more), so the
point's intensity is the least traffic's, as for a matmul."""

from __future__ import annotations

import math

import pandas as pd

from ...columns import TRUSTED
from ...reporting.roofline import _num

# kernel launches per timed call, for the launch-bound verdict only: forward one fused kernel; forward+backward
# the forward and the backward's preprocessing and main kernel (FlashAttention-2's backward)
LAUNCHES = {"forward": 1, "forward_backward": 3}


def points(df: pd.DataFrame, tables: dict) -> list[dict]:
    ok = df[df["status"].isin(TRUSTED) & (pd.to_numeric(df["median_s"], errors="coerce") > 0)]
    out = []
    for r in ok.to_dict("records"):
        flops, nbytes = _num(r.get("flops")), _num(r.get("min_bytes"))
        if not (math.isfinite(flops) and math.isfinite(nbytes) and nbytes > 0):
            continue
        causal = str(r.get("causal")).lower() in ("true", "1")
        label = f"{r['kernel']} {r['mode']} s={int(_num(r['seq_len_q']))} d={int(_num(r['head_dim']))}" + (
            " causal" if causal else ""
        )
        out.append(
            {
                **{c: r.get(c, "") for c in ("run_id", "backend", "device", "device_name")},
                "kind": "attention",
                "point": label,
                "dtype": r["dtype"],
                "m": math.nan,
                "n": math.nan,
                "k": math.nan,
                "flops": flops,
                "bytes": nbytes,
                "time_s": _num(r["median_s"]),
                "launches": LAUNCHES.get(str(r["mode"]), 1),
            }
        )
    return out
