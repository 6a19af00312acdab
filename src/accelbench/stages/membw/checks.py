"""What accelbench aggregate checks in a membw file beyond its columns: the launch floor and both kernels at every
size (Table.check)."""

from __future__ import annotations

from pathlib import Path

from ...reporting.aggregate import Problems
from . import KERNELS, LAUNCH


def check_membw_points(df, table: str, config: dict, path: Path, problems: Problems, run_id: str) -> None:
    """Every device has its launch floor, and copy and triad at the same sizes (a file cut at a line end
    loses the last rows: a size measured by one kernel and not the other)."""
    if df is None or df.empty or not {"device", "kernel", "size_bytes"} <= set(df.columns):
        return
    for device, group in df[df["status"].astype(str) != "absent"].groupby("device", sort=True):
        kernels = set(group["kernel"].dropna().astype(str))
        if LAUNCH not in kernels:
            problems.add(path, "missing_points", f"{device}: no launch-latency row (file cut short?)", run_id)
        sizes = {k: set(group[group["kernel"] == k]["size_bytes"].dropna().astype(int)) for k in KERNELS}
        first, second = (sizes[k] for k in KERNELS)
        if first != second or not first:
            odd = sorted(first ^ second) or ["all"]
            problems.add(
                path,
                "missing_points",
                f"{device}: copy and triad rows differ at size(s) {', '.join(map(str, odd))} (file cut short?)",
                run_id,
            )
