"""The raw timing samples behind every measured point, as one long table (``registry.SAMPLE_COLUMNS``).

A results row says a median and an interval; two runs can only be compared properly from the samples that
gave them. Each device stage keeps them next to its CSVs (``registry.SAMPLES``, Parquet):

- matmul, transfer: the per-call time of each timed block (``TimingStats.samples_s``), ``calls`` = calls per
  block; the stage puts them in the row under ``SAMPLES_KEY`` (kept in the checkpoint, so a resumed sweep
  keeps them; never a CSV column);
- warmup: every call of the fixed workload; ``steady`` from the call it became stable (the last
  ``warmup.window`` calls when it never did);
- amp: every training step of every trial; ``steady`` false for the ``amp.warmup_steps`` first steps.

Which row a sample belongs to is the row's ``table`` and ``point_key``: the row's POINT_IDENTITY values
(without ``device_name``, a column of its own here through ``device``), so adding a dimension to a table's
points is one entry in the registry. Pure functions: no files (``run.io`` writes them), no torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

from .. import registry

COLUMNS = list(registry.SAMPLE_COLUMNS)
SAMPLES_KEY = "samples_s"  # a row's per-block times, for the samples file only (never a CSV column)
DTYPES = {
    "run_id": "string",
    "method_version": "int64",
    "backend": "string",
    "device": "string",
    "table": "string",
    "point": "string",
    "sample": "int64",
    "sample_s": "float64",
    "calls": "int64",
    "steady": "bool",
}


def canonical(value) -> str:
    """One spelling per value, whether it comes from Python or back from a CSV: 512, 512.0 and "512" are "512";
    True and "True" are "true"; NaN and None are ""."""
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("true", "false"):
            return low
        try:
            number = float(value)
        except ValueError:
            return value.strip()
        value = number
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(number):
        return ""
    return str(int(number)) if number.is_integer() and abs(number) < 2**63 else repr(number)


def identity_columns(table: str) -> tuple[str, ...]:
    """The columns besides backend and device that name a point of ``table``."""
    return tuple(c for c in registry.POINT_IDENTITY[table] if c != "device_name")


def identity_items(table: str, row) -> list[tuple[str, str]]:
    """(column, canonical value) of a row's identity. A square matmul point leaves out ``shape_name``, ``m`` and
    ``k`` (the table's ``identity_fill``), so it is named as in runs from before shapes existed; a named shape has
    them all."""
    items = []
    fill = registry.TABLES[table].identity_fill
    for c in identity_columns(table):
        value = canonical(row.get(c))
        if c in fill:
            same_as = fill[c]
            if value == "" or (same_as and value == canonical(row.get(same_as))):
                continue
        items.append((c, value))
    return items


def point_key(table: str, row) -> str:
    """``dtype=float32|n=512|allow_tf32=false``: which point of ``table`` a row (dict or Series) is."""
    return "|".join(f"{c}={v}" for c, v in identity_items(table, row))


def _frame(records: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(records, columns=COLUMNS)
    return df.astype(DTYPES)


def empty() -> pd.DataFrame:
    """The samples table of a stage that measured nothing (its backend absent here)."""
    return _frame([])


def from_block_rows(table: str, rows: Iterable[dict]) -> pd.DataFrame:
    """Samples of rows that carry their blocks' per-call times under ``SAMPLES_KEY`` (matmul, transfer); rows
    without (not measured) have none."""
    records = []
    for row in rows:
        values = row.get(SAMPLES_KEY) or ()
        if not len(values):
            continue
        blocks, repeats = row.get("blocks"), row.get("repeats")
        try:
            calls = max(1, int(repeats) // int(blocks))
        except (TypeError, ValueError, ZeroDivisionError):
            calls = 1
        base = _base(table, row)
        records += [
            {**base, "sample": i, "sample_s": float(v), "calls": calls, "steady": True} for i, v in enumerate(values)
        ]
    return _frame(records)


def from_series_rows(
    table: str, rows: Iterable[dict], *, index: str, value: str, steady: Callable[[dict], bool]
) -> pd.DataFrame:
    """Samples of rows that are themselves one call or step each (warm-up calls, AMP steps): ``index`` numbers
    them within their point, ``value`` is the seconds; rows without a finite time are left out."""
    records = []
    for row in rows:
        t = row.get(value)
        try:
            t = float(t)
        except (TypeError, ValueError):
            continue
        if not (math.isfinite(t) and t > 0) or not row.get("device"):
            continue
        records.append(
            {**_base(table, row), "sample": int(row[index]), "sample_s": t, "calls": 1, "steady": bool(steady(row))}
        )
    return _frame(records)


def warmup_steady(rows: list[dict], window: int) -> Callable[[dict], bool]:
    """Which warm-up calls count as warm: from ``stable_at_iter`` on, or the last ``window`` calls of a device
    that never became stable."""
    last = {}
    for r in rows:
        last[r.get("device")] = max(last.get(r.get("device"), -1), int(r.get("iter", -1)))

    def steady(row: dict) -> bool:
        start = int(row.get("stable_at_iter", -1))
        if start < 0:
            start = last.get(row.get("device"), 0) - window + 1
        return int(row["iter"]) >= start

    return steady


def _base(table: str, row: dict) -> dict:
    version = canonical(row.get("method_version"))
    return {
        "run_id": row.get("run_id", ""),
        "method_version": int(version) if version.isdigit() else 0,
        "backend": row.get("backend", ""),
        "device": row.get("device", ""),
        "table": table,
        "point": point_key(table, row),
    }


def check(df: pd.DataFrame) -> str | None:
    """What is wrong with a samples table read back (missing columns, times that are not positive numbers),
    or None."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        return f"missing column(s) {', '.join(missing)}"
    t = pd.to_numeric(df["sample_s"], errors="coerce")
    if len(df) and not (np.isfinite(t.to_numpy(float)).all() and (t > 0).all()):
        return "sample_s holds values that are not positive numbers"
    return None
