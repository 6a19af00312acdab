"""What accelbench aggregate checks in a matmul file beyond its columns: every configured point is there
(Table.check)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...reporting.aggregate import Problems
from ...run.config import shape_label


def _shape_names(df):
    """Each row's shape name ('' for the square sweep, and for files from before shapes)."""
    if "shape_name" not in df.columns:
        return pd.Series([""] * len(df), index=df.index)
    return df["shape_name"].astype(object).fillna("").astype(str)


def check_matmul_points(df, table: str, config: dict, path: Path, problems: Problems, run_id: str) -> None:
    """Every (device, dtype) in the file must have a row for every configured size and every configured shape."""
    mm = config.get("matmul") or {}
    sizes = set(mm.get("sizes") or [])
    shapes = {shape_label(s) for s in mm.get("shapes") or []}
    if df is None or df.empty or not (sizes or shapes) or not {"device", "dtype", "n"} <= set(df.columns):
        return
    names = _shape_names(df)
    for (device, dtype), group in df.groupby(["device", "dtype"], sort=True):
        square = group[names[group.index] == ""]
        lacking = sorted(sizes - set(square["n"].dropna().astype(int)))
        if lacking:
            problems.add(
                path,
                "missing_points",
                f"{device} {dtype}: no row for n={', '.join(map(str, lacking))} (file cut short?)",
                run_id,
            )
        lacking_shapes = sorted(shapes - set(names[group.index]))
        if lacking_shapes:
            problems.add(
                path,
                "missing_points",
                f"{device} {dtype}: no row for shape(s) {', '.join(lacking_shapes)} of matmul.shapes (file cut short?)",
                run_id,
            )
