"""The warm-up section of the HTML report: its context builder (the template is section.html.j2 here)."""

from __future__ import annotations

from ...reporting import tables as S


def warmup_rows(tables, series) -> list[dict]:
    w = tables["warmup"]
    if w.empty:
        return []
    w = S.with_series(w, series)
    out = []
    for label, g in w.groupby("label", sort=False):
        r = g.iloc[0]
        cold, warm = r["cold_s"], r["warm_s"]
        stable = r["stable_at_iter"]
        statuses = sorted(set(g["status"].astype(str)))
        out.append(
            {
                "label": label,
                "color": r["color"],
                "cold": S.fmt_time(cold),
                "warm": S.fmt_time(warm),
                "ratio": S.fmt_num(cold / warm) + "×" if warm else "—",
                "stable_at": "never" if stable != stable or stable < 0 else int(stable),
                "iters": len(g),
                "status": "ok" if statuses == ["ok"] else ", ".join(statuses),
            }
        )
    order = {lab: i for i, lab in enumerate(series["label"])}
    return sorted(out, key=lambda x: order.get(x["label"], 99))


def context(tables, series, ctx) -> dict:
    return {"warmup": warmup_rows(tables, series)}
