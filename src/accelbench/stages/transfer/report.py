"""The transfer section of the HTML report: its context builder (the template is section.html.j2 here)."""

from __future__ import annotations

from ...reporting import tables as S


def transfer_rows(tables, series) -> list[dict]:
    t = tables["transfer"]
    if t.empty:
        return []
    t = S.with_series(t, series).sort_values(["label", "direction", "memory", "size_bytes"])
    return [
        {
            "label": r["label"],
            "color": r["color"],
            "direction": r["direction"],
            "memory": r["memory"],
            "size": S.fmt_num(r["size_bytes"] / 2**20) + " MiB",
            "gbps": S.fmt_num(r["gbps"]),
            "median": S.fmt_time(r["median_s"]),
            "repeats": r["repeats"],
            "status": str(r["status"]),
        }
        for _, r in t.iterrows()
    ]


def context(tables, series, ctx) -> dict:
    transfer = transfer_rows(tables, series)
    return {"transfer": transfer, "transfer_measured": any(r["status"] == "ok" for r in transfer)}
