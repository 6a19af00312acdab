"""The matmul stage's points on the roofline: every trustworthy point of the square sweep (``square``) and of the
named shapes (``shape``), one product (m x k) @ (k x n) each: 2mnk flops over the bytes of A, B and C."""

from __future__ import annotations

import pandas as pd

from ...columns import TRUSTED
from ...reporting.roofline import _finite, _num, gemm_bytes


def points(matmul: pd.DataFrame, tables: dict) -> list[dict]:
    mm = matmul[matmul["status"].isin(TRUSTED) & (pd.to_numeric(matmul["median_s"], errors="coerce") > 0)]
    out = []
    for r in mm.to_dict("records"):
        n = int(_num(r["n"]))
        m = int(_num(r.get("m"))) if _finite(r.get("m")) else n
        k = int(_num(r.get("k"))) if _finite(r.get("k")) else n
        name = r.get("shape_name") if isinstance(r.get("shape_name"), str) else ""
        kind, label = ("shape", name) if name else ("square", f"n={n}")
        out.append(product(r, kind, label, m, n, k))
    return out


def product(r: dict, kind: str, label: str, m: int, n: int, k: int) -> dict:
    """One timed product (m x k) @ (k x n) of a row, as a roofline point."""
    return {
        **{c: r.get(c, "") for c in ("run_id", "backend", "device", "device_name")},
        "kind": kind,
        "point": label,
        "dtype": r["dtype"],
        "m": m,
        "n": n,
        "k": k,
        "flops": 2.0 * m * n * k,
        "bytes": gemm_bytes(m, n, k, r["dtype"]),
        "time_s": _num(r["median_s"]),
        "launches": 1,
    }
