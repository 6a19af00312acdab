"""What accelbench aggregate checks in a shape-search file beyond its columns: every configured dtype was searched
(Table.check)."""

from __future__ import annotations

from pathlib import Path

from ...reporting.aggregate import Problems


def check_search_points(df, table: str, config: dict, path: Path, problems: Problems, run_id: str) -> None:
    """With the search on, every device in the file searched every dtype of matmul.search.dtypes."""
    search = (config.get("matmul") or {}).get("search") or {}
    if df is None or df.empty or not search.get("enabled"):
        return
    wanted = set(search.get("dtypes") or [])
    for device, group in df[df["status"].astype(str) != "absent"].groupby("device", sort=True):
        lacking = sorted(wanted - set(group["dtype"].dropna().astype(str)))
        if lacking:
            problems.add(
                path,
                "missing_points",
                f"{device}: no search row for dtype(s) {', '.join(lacking)} (file cut short?)",
                run_id,
            )
