"""The shape search's point on the roofline: the best shape found per device and dtype (``search``)."""

from __future__ import annotations

import pandas as pd

from ...columns import TRUSTED
from ...reporting.roofline import _num
from ..matmul.roofline import product


def points(search: pd.DataFrame, tables: dict) -> list[dict]:
    if "best" not in search.columns:
        return []
    best = search[search["best"].astype(str).str.lower().isin(["true", "1"]) & search["status"].isin(TRUSTED)]
    out = []
    for r in best.to_dict("records"):
        m, n, k = (int(_num(r[a])) for a in ("m", "n", "k"))
        out.append(product(r, "search", f"searched {m}x{n}x{k}", m, n, k))
    return out
