"""What accelbench aggregate checks in the AMP files beyond their columns: every configured seed, workload and mode
(Table.check)."""

from __future__ import annotations

from pathlib import Path

from ...reporting.aggregate import Problems


def check_amp_points(df, table: str, config: dict, path: Path, problems: Problems, run_id: str) -> None:
    """Trials: every (device, workload, mode) has every configured seed. Trials and summary: every device has
    every configured workload, each with the same modes. (Catches files cut at a line boundary.)"""
    amp = config.get("amp") or {}
    seeds, workloads = set(amp.get("seeds") or []), set(amp.get("workloads") or [])
    if df is None or df.empty:
        return
    for device, group in df.groupby("device", sort=True):
        lacking = sorted(workloads - set(group["workload"].astype(str)))
        if lacking:
            problems.add(
                path,
                "missing_points",
                f"{device}: no row for workload(s) {', '.join(lacking)} (file cut short?)",
                run_id,
            )
        modes = set(group["mode"].astype(str))
        for workload, wg in group.groupby("workload", sort=True):
            missing_modes = sorted(modes - set(wg["mode"].astype(str)))
            if missing_modes:
                problems.add(
                    path,
                    "missing_points",
                    f"{device} {workload}: no row for mode(s) "
                    f"{', '.join(missing_modes)} that other workloads have (file cut short?)",
                    run_id,
                )
    if table == "amp_trials" and seeds:
        for (device, workload, mode), group in df.groupby(["device", "workload", "mode"], sort=True):
            lacking = sorted(seeds - set(group["seed"].dropna().astype(int)))
            if lacking:
                problems.add(
                    path,
                    "missing_points",
                    f"{device} {workload} {mode}: no trial for seed(s) "
                    f"{', '.join(map(str, lacking))} (file cut short?)",
                    run_id,
                )
