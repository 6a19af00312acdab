"""The scaling section of the HTML report: its context builder (the template is section.html.j2 here)."""

from __future__ import annotations

from ...reporting import tables as S
from ...reporting.html import _cell

SCALING_ENABLE_HINT = "scaling: {enabled: true}"


def _tf(value) -> str:
    v = S.as_bool(value)
    return "—" if v is None else ("yes" if v else "NO")


def _items(r) -> tuple[str, str]:
    """(the world's throughput, one rank's) in the workload's items: tokens/s (gpt), images/s (resnet), else
    samples/s."""
    for name, unit in (("tokens", "tokens/s"), ("images", "images/s"), ("samples", "samples/s")):
        world = r.get(f"{name}_per_s")
        if world is not None and world == world:
            per_rank = r.get(f"{name}_per_s_per_rank")
            if per_rank is None or per_rank != per_rank:
                n = r.get("world_size")
                per_rank = world / n if n and n == n else float("nan")
            return f"{S.fmt_num(world)} {unit}", f"{S.fmt_num(per_rank)} {unit}"
    return "—", "—"


def scaling_section(tables, series) -> dict:
    """The Scaling section: ``state`` is ``off`` (every row says scaling.enabled was false), ``none`` (no
    scaling rows at all) or ``measured``; the summary rows, every collective point and every copy."""
    sc, co, pc = tables["scaling"], tables["collectives"], tables["peer_copy"]
    statuses = set(sc["status"].dropna().astype(str)) if not sc.empty else set()
    if not statuses:
        return {
            "state": "none",
            "hint": SCALING_ENABLE_HINT,
            "rows": [],
            "collectives": [],
            "copies": [],
            "reasons": [],
        }
    if statuses <= {"disabled"}:
        return {"state": "off", "hint": SCALING_ENABLE_HINT, "rows": [], "collectives": [], "copies": [], "reasons": []}
    # a backend's one row saying why nothing was measured (disabled, absent, unsupported) has no method
    placeholder = sc["method"].isna() | (sc["method"].astype(str) == "")
    reasons = sorted(
        {
            f"{r['run_id']} · {r['backend']}: {r['status']}"
            + (f": {r.get('status_detail')}" if isinstance(r.get("status_detail"), str) else "")
            for _, r in sc[placeholder].iterrows()
        }
    )
    measured = S.with_series(sc[~placeholder], series)
    rows = []
    for _, r in measured.sort_values(["label", "workload", "mode", "method", "world_size"]).iterrows():
        ci = (
            ""
            if r["step_ci95_low_s"] != r["step_ci95_low_s"]
            else f"{S.fmt_time(r['step_ci95_low_s'])} – {S.fmt_time(r['step_ci95_high_s'])}"
        )
        eff_ci = (
            ""
            if r["efficiency_ci95_low"] != r["efficiency_ci95_low"]
            else f"{S.fmt_num(r['efficiency_ci95_low'])}–{S.fmt_num(r['efficiency_ci95_high'])}"
        )
        items, per_rank = _items(r)
        mfu = r.get("mfu_pct")
        over = r.get("interval_over")
        over = over if isinstance(over, str) and over else "—"  # a run before the column: its steps pooled
        rows.append(
            {
                "label": r["label"],
                "color": r["color"],
                "run_id": r["run_id"],
                "device": r["device"],
                "throughput": items,
                "rank_throughput": per_rank,
                "mfu": "—" if mfu is None or mfu != mfu else f"{S.fmt_num(mfu)}%",
                "interval_over": over,
                "method": r["method"],
                "workload": r["workload"],
                "mode": r["mode"],
                "world_size": int(r["world_size"]) if r["world_size"] == r["world_size"] else "",
                "threads": "" if r["threads_per_rank"] != r["threads_per_rank"] else int(r["threads_per_rank"]),
                "pg": _cell(r["process_group"]) or "—",
                "sps": S.fmt_num(r["samples_per_s"]),
                "step": S.fmt_time(r["step_median_s"]),
                "step_ci": ci,
                "efficiency": S.fmt_num(r["scaling_efficiency"]),
                "efficiency_value": _cell(r["scaling_efficiency"]),
                "efficiency_ci": eff_ci,
                "loss": _tf(r["loss_matches_single"]),
                "tolerance": S.fmt_num(r.get("loss_tolerance"), 2),
                "status": str(r["status"]),
                "detail": str(_cell(r.get("status_detail", ""))),
            }
        )
    coll = []
    if not co.empty:
        c = S.with_series(co[co["collective"].notna() & (co["collective"].astype(str) != "")], series)
        for _, r in c.sort_values(["label", "collective", "world_size", "size_bytes"]).iterrows():
            scope = str(r.get("scope", "world"))
            split = f" ({scope.replace('_', '-')})" if scope not in ("world", "nan", "") else ""
            coll.append(
                {
                    "label": r["label"],
                    "color": r["color"],
                    "collective": f"{r['collective']}{split}",
                    "world_size": int(r["world_size"]) if r["world_size"] == r["world_size"] else "",
                    "size": S.fmt_num(r["size_bytes"]) + " B",
                    "time": S.fmt_time(r["median_s"]),
                    "algbw": S.fmt_num(r["algbw_gbps"]),
                    "busbw": S.fmt_num(r["busbw_gbps"]),
                    "status": str(r["status"]),
                }
            )
    copies = []
    if not pc.empty:
        for _, r in pc[~pc["status"].isin(["disabled", "absent"])].iterrows():
            copies.append(
                {
                    "backend": r["backend"],
                    "src": _cell(r["src"]),
                    "dst": _cell(r["dst"]),
                    "peer": _cell(r["peer"]),
                    "gbps": S.fmt_num(r["gbps"]),
                    "status": str(r["status"]),
                    "detail": str(_cell(r.get("status_detail", ""))),
                }
            )
    return {
        "state": "measured",
        "hint": SCALING_ENABLE_HINT,
        "rows": rows,
        "collectives": coll,
        "copies": copies,
        "reasons": reasons,
    }


def context(tables, series, ctx) -> dict:
    return {"scaling": scaling_section(tables, series)}
