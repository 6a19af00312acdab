"""One self-contained HTML report from the aggregated tables and the figures.

The page needs nothing but itself: figures are inlined as base64 PNG, the CSS is in a <style>
element, there is no script, no web font and no link to anything outside the page, so it can be
mailed, archived as a CI artifact, or opened offline and looks the same.

Each figure's text is the lead paragraph of its Snakemake report caption (``workflow/report/<figure>.rst``,
``registry.Figure``): one source for both reports.

Order of the page: the summary first (per device the best trustworthy TFLOP/s per dtype and its %
of peak, beside it the shape search's best, the CPU-to-accelerator speedup per size, the AMP speedup
and accuracy verdict, throttling warnings), then the runs and their environment side by side, the
figures, your shapes (``matmul.shapes``), the shape search, memory bandwidth and the roofline with a
verdict per point, scaling over several devices, what each device was doing (the telemetry strip,
missing sensors and why, the soak's boost against sustained readings), and every measured point with
flagged ones marked in colour and words. When the manifest says the data are incomplete, a banner at the top
names the files.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import yaml
from jinja2 import (
    ChoiceLoader,
    Environment,
    FileSystemLoader,
    PackageLoader,
    PrefixLoader,
    StrictUndefined,
    select_autoescape,
)
from markupsafe import Markup, escape

from .. import __version__, backends, registry
from ..columns import VERDICT_COLORS
from ..run.io import atomic_write_text
from ..run.provenance import CHECKOUT
from . import compare as C
from . import roofline as R
from . import tables as S


def caption(captions_dir: Path | None, name: str) -> dict:
    """A figure's text: the lead paragraph of its Snakemake report caption (``registry.Figure.caption``),
    as plain text (for ``alt``) and as HTML (inline ``code``, bold and italics kept)."""
    file = (
        registry.FIGURES[name].caption if name in registry.FIGURES else f"{name}.rst"
    )  # comparison: no registry figure
    path = Path(captions_dir) / file if captions_dir else None
    text = path.read_text(encoding="utf-8") if path and path.is_file() else ""
    lead = " ".join(text.strip().split("\n\n")[0].split())
    plain = re.sub(r"\*\*(.+?)\*\*|\*(.+?)\*|``(.+?)``", lambda m: next(g for g in m.groups() if g), lead)
    html = str(escape(lead))
    html = re.sub(r"``(.+?)``", r"<code>\1</code>", html)
    html = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html)
    html = re.sub(r"\*(.+?)\*", r"<i>\1</i>", html)
    return {"text": plain, "html": Markup(html)}


def default_captions_dir() -> Path | None:
    """``workflow/report`` of the working folder, else of the checkout this package runs from."""
    for base in (Path.cwd(), CHECKOUT):
        if (base / registry.CAPTIONS_DIR).is_dir():
            return base / registry.CAPTIONS_DIR
    return None


def _read_csv(path: Path):
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame()
    return pd.read_csv(path)


def _records(df, cols=None) -> list[dict]:
    if df is None or df.empty:
        return []
    df = df[cols] if cols else df
    return [
        {k: (None if (not isinstance(v, (list, dict)) and pd.isna(v)) else v) for k, v in row.items()}
        for row in df.to_dict("records")
    ]


def image_data_uri(path: Path) -> str | None:
    if not path.exists() or path.stat().st_size == 0:
        return None
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _config_text(config_json) -> str:
    try:
        return yaml.safe_dump(json.loads(config_json), sort_keys=False, default_flow_style=None, width=100)
    except Exception:
        return str(config_json)


def _shape_text(m, n, k) -> str:
    return f"{int(m)}×{int(n)}×{int(k)}"


def _tflops_ci(lo, hi) -> str:
    return "" if lo != lo or hi != hi else f"{S.fmt_num(lo)}–{S.fmt_num(hi)}"


# What every within-run interval in the report covers (measure.blocks): the tables' headers say "within run",
# this note says what that means, and a descriptive interval is marked in its cell.
WITHIN_RUN_CI_NOTE = (
    "95% CI (within run): the interval of the median over this run's timed blocks, taken in time "
    "order: batch means (10 consecutive batches, which accounts for neighbouring blocks being "
    "alike) from 50 blocks on, else the order-statistic interval, which takes the blocks as "
    "exchangeable and is marked descr. (descriptive). Either covers variation within this one "
    "run only, not from one run to the next: comparing runs is accelbench compare's, over "
    "several runs a side."
)
DESCRIPTIVE_MARK = "descr."


def within_run_ci(text: str, method) -> str:
    """A within-run interval's cell text, marked ``descr.`` unless it is a batch-means interval (a row from before
    ``ci_method`` existed had the descriptive one)."""
    if not text:
        return text
    return text if method == "batch_means" else f"{text} {DESCRIPTIVE_MARK}"


def headlines(ctx: dict, series) -> list[dict]:
    """One sentence per accelerator (or per CPU when no accelerator was measured): the clauses each stage's
    ``Summary.headline(ctx, device)`` gives for that device (peak TFLOP/s, the search's best, the speedup over the
    CPU, AMP), in their rank order."""
    stages = [s for s in registry.STAGES.values() if s.summary is not None and s.summary.headline is not None]
    out = []
    for _, r in series.iterrows():
        clauses = sorted(c for s in stages for c in s.summary.headline.load()(ctx, r))
        if clauses:
            out.append(
                {
                    "label": r["label"],
                    "color": r["color"],
                    "text": "; ".join(t for _, t in clauses),
                    "accelerator": backends.is_accelerator(r["backend"]),
                }
            )
    accel = [h for h in out if h["accelerator"]]
    return accel or out


def _info_value(key: str, value) -> str:
    """A device detail for the environment table, short: bytes in GiB, peaks as numbers, long text cut."""
    if key.endswith("_bytes"):
        try:
            return f"{float(value) / 2**30:.1f} GiB"
        except (TypeError, ValueError):
            pass
    if isinstance(value, str) and value.startswith("{"):
        try:
            obj = json.loads(value)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and obj and all(isinstance(v, dict) and "tflops" in v for v in obj.values()):
            return "TFLOP/s: " + ", ".join(
                f"{S.DTYPE_LABEL.get(d, d)} {S.fmt_num(v['tflops'])}"
                for d, v in sorted(obj.items(), key=lambda kv: S.dtype_sorted(obj).index(kv[0]))
            )
        if isinstance(obj, dict) and isinstance(obj.get("found"), dict) and isinstance(obj.get("missing"), dict):
            return telemetry_text(obj)
    text = str(value)
    if key == "telemetry":
        return text  # the reasons are the point: never cut
    return text if len(text) <= 100 else text[:97] + "…"


def telemetry_text(found: dict) -> str:
    """What the telemetry sampler found on a device (devices.json ``telemetry``: measure.telemetry.describe), in
    words: its source and rate, each sensor found with where it is read, each missing one with why (never cut:
    the reason is what tells a reader how to get the sensor)."""
    if found.get("source") == "off" or found.get("hz") == 0:
        return found.get("note") or "off (telemetry.hz is 0)"
    head = f"{found.get('source') or 'none'}"
    if found.get("hz"):
        head += f" at {float(found['hz']):g} Hz"
    parts = [head]
    if found["found"]:
        parts.append("found " + ", ".join(f"{sensor} ({where})" for sensor, where in sorted(found["found"].items())))
    if found["missing"]:
        parts.append("missing " + "; ".join(f"{sensor}: {why}" for sensor, why in sorted(found["missing"].items())))
    return " — ".join(parts)


def runs_side_by_side(tables, series) -> dict:
    runs = tables["runs"]
    if runs.empty:
        return {"runs": [], "rows": []}
    runs = runs.sort_values("run_id")
    fields = [
        ("host", "host"),
        ("timestamp_utc", "started (UTC)"),
        ("run_dir", "folder"),
        ("accelbench_version", "accelbench"),
        ("git_commit", "git commit"),
        ("config_hash", "config hash"),
        ("container_image", "container image"),
        ("python_version", "Python"),
        ("torch_version", "PyTorch"),
        ("cuda_version", "CUDA"),
        ("hip_version", "HIP/ROCm"),
        ("cpu_model", "CPU"),
        ("threads", "threads (per backend)"),
        ("backends_requested", "backends asked for"),
        ("backends_present", "backends present"),
    ]
    rows = []
    for key, label in fields:
        values = ["" if v != v or v is None else str(v) for v in runs.get(key, [""] * len(runs))]
        rows.append({"label": label, "cells": values, "differs": len(set(values)) > 1})
    details = []
    for _, r in runs.iterrows():
        dev = tables["devices"]
        dev = dev[dev["run_id"].astype(str) == str(r["run_id"])] if not dev.empty else dev
        extra_cols = [
            c
            for c in dev.columns
            if c not in ("run_id", "host", "backend", "present", "reason", "device", "device_name")
        ]
        devices = []
        for _, d in dev.iterrows():
            info = "; ".join(
                f"{c.replace('peaks', 'peak')}={_info_value(c, d[c])}"
                for c in extra_cols
                if d[c] == d[c] and str(d[c]) != ""
            )
            devices.append(
                {
                    "backend": d["backend"],
                    "present": S.as_bool(d["present"]),
                    "device": "" if d["device"] != d["device"] else d["device"],
                    "device_name": "" if d["device_name"] != d["device_name"] else d["device_name"],
                    "reason": "" if d["reason"] != d["reason"] else d["reason"],
                    "info": info,
                }
            )
        colors = [(s["label"], s["color"]) for _, s in series[series["run_id"] == str(r["run_id"])].iterrows()]
        env = json.loads(r["env_json"]) if isinstance(r.get("env_json"), str) else {}
        packages = json.loads(r["packages_json"]) if isinstance(r.get("packages_json"), str) else {}
        details.append(
            {
                "run_id": r["run_id"],
                "devices": devices,
                "colors": colors,
                "config": _config_text(r.get("config_json", "{}")),
                "config_hash": r.get("config_hash"),
                "env": {k: v for k, v in env.items() if v not in (None, "")},
                "packages": {k: v for k, v in packages.items() if v},
            }
        )
    return {"runs": list(runs["run_id"].astype(str)), "rows": rows, "details": details}


def _cell(v):
    return "" if v is None or v != v else v


def run_overview(tables, series, manifest) -> list[dict]:
    """One line per run for the summary: where it ran, with what, which devices (with their colours)."""
    runs = tables["runs"]
    if runs.empty:
        return []
    complete = {r.get("run_id"): r.get("complete", True) for r in manifest.get("runs", [])}
    out = []
    for _, r in runs.sort_values("run_id").iterrows():
        software = [f"torch {r['torch_version']}"] if r["torch_version"] == r["torch_version"] else []
        for key, name in (("cuda_version", "CUDA"), ("hip_version", "HIP")):
            if r[key] == r[key] and str(r[key]) != "":
                software.append(f"{name} {r[key]}")
        image = r["container_image"] if r["container_image"] == r["container_image"] else ""
        devices = [
            {"label": s["device_label"], "color": s["color"]}
            for _, s in series[series["run_id"] == str(r["run_id"])].iterrows()
        ]
        out.append(
            {
                "run_id": str(r["run_id"]),
                "host": r["host"],
                "software": ", ".join(software),
                "image": image.rsplit("/", 1)[-1] if image else "host (no container)",
                "timestamp": str(r["timestamp_utc"])[:16].replace("T", " ")
                if r["timestamp_utc"] == r["timestamp_utc"]
                else "",
                "devices": devices,
                "complete": bool(complete.get(str(r["run_id"]), True)),
            }
        )
    return out


def point_telemetry_cells(r) -> dict:
    """A point's (or trial's) telemetry for the tables: clock, power, efficiency, throttling."""
    throttled = S.as_bool(r.get("throttled"))
    reasons = r.get("throttle_reasons")
    return {
        "clock": S.fmt_num(r.get("clock_mhz_median"), 4) if "clock_mhz_median" in r else "—",
        "power": S.fmt_num(r.get("power_w_median")) if "power_w_median" in r else "—",
        "gflop_per_j": S.fmt_num(r.get("gflop_per_j")) if "gflop_per_j" in r else "—",
        "throttled": throttled,
        "throttle_reasons": reasons if isinstance(reasons, str) else "",
    }


def telemetry_section(tables, series) -> dict:
    """The report's telemetry: per device what the sampler found and why sensors are missing, throttling
    and clock-ramp warnings (also in the summary), and the soak's boost against sustained readings."""
    labels = {(s["run_id"], s["device"]): (s["label"], s["color"]) for _, s in series.iterrows()}
    notes = []
    for n in S.sensor_notes(tables["devices"]):
        label, color = labels.get((n["run_id"], n["device"]), (f"{n['run_id']} · {n['device']}", None))
        notes.append({**n, "label": label, "color": color})
    ramps = {(r["run_id"], r["device"]): r for _, r in S.clock_ramp_counts(tables).iterrows()}
    warnings = []
    throttle = S.throttle_warnings(tables)
    seen = set()
    for _, w in throttle.iterrows():
        key = (w["run_id"], w["device"])
        seen.add(key)
        label, color = labels.get(key, (f"{w['run_id']} · {w['device']}", None))
        parts = [
            f"{w[f'{d.kind}_throttled']}/{w[f'{d.kind}_known']} {d.many}"
            for d in S.window_kinds().values()
            if w[f"{d.kind}_throttled"]
        ]
        text = f"throttled in {', '.join(parts)} ({w['reasons'] or 'reason not given'})"
        ramp = ramps.get(key)
        if ramp is not None and ramp["ramp"]:
            text += f"; {ramp['ramp']}/{ramp['known']} points before the clock settled"
        warnings.append(
            {"label": label, "color": color, "run_id": w["run_id"], "device": w["device"], "level": "bad", "text": text}
        )
    for key, ramp in ramps.items():
        if key in seen or not ramp["ramp"]:
            continue
        label, color = labels.get(key, (f"{key[0]} · {key[1]}", None))
        warnings.append(
            {
                "label": label,
                "color": color,
                "run_id": key[0],
                "device": key[1],
                "level": "meh",
                "text": f"{ramp['ramp']}/{ramp['known']} {ramp['what']} measured before the clock settled "
                "(flag clock_ramp)",
            }
        )
    for key, count in S.nominal_clock_counts(tables).items():
        label, color = labels.get(key, (f"{key[0]} · {key[1]}", None))
        warnings.append(
            {
                "label": label,
                "color": color,
                "run_id": key[0],
                "device": key[1],
                "level": "meh",
                "text": f"clock nominal: the clock reading cannot vary here ({count} row(s) with "
                "clock_source=nominal: a VM's fixed /proc/cpuinfo 'cpu MHz', or a reading that never "
                "changed), so whether the clock had settled is unknown (clock_ramp empty)",
            }
        )
    soak = []
    held = [S.soak_summary(tables.get(name)) for name, w in S.window_kinds().items() if w.soak]
    for _, r in (pd.concat(held, ignore_index=True) if held else S.soak_summary(None)).iterrows():
        label, color = labels.get((r["run_id"], r["device"]), (r["device"], None))
        drop = r["sustained_tflops"] / r["boost_tflops"] if r["boost_tflops"] else float("nan")
        soak.append(
            {
                "label": label,
                "color": color,
                "run_id": r["run_id"],
                "device": r["device"],
                "point": f"{S.DTYPE_LABEL.get(r['dtype'], r['dtype'])} n={r['n']}",
                "seconds": S.fmt_num(r["seconds"]),
                "boost": S.fmt_num(r["boost_tflops"]),
                "sustained": S.fmt_num(r["sustained_tflops"]),
                "ratio": S.fmt_unit(drop, "×"),
                "boost_clock": S.fmt_num(r["boost_clock_mhz"], 4),
                "sustained_clock": S.fmt_num(r["sustained_clock_mhz"], 4),
                "settled_at": S.fmt_unit(r["settled_at_s"], " s"),
                "temp": S.fmt_num(r["sustained_temp_c_max"]),
                "gflop_per_j": S.fmt_num(r["sustained_gflop_per_j"]),
                "throttled": r["throttled"],
                "reasons": r["reasons"],
            }
        )
    return {
        "notes": notes,
        "warnings": warnings,
        "soak": soak,
        "any_missing": any(n["missing"] or n["note"] for n in notes),
    }


def roofline_tables(points: pd.DataFrame, series) -> dict:
    """Counts of each verdict per device, the shapes, the search's best and the AMP steps with their verdicts
    (every point in the details)."""
    if points.empty:
        return {"counts": [], "highlights": [], "all": []}
    pts = S.with_series(points, series)
    counts = []
    for label, g in pts.groupby("label", sort=False):
        c = g["verdict"].value_counts()
        counts.append(
            {
                "label": label,
                "color": g["color"].iloc[0],
                "counts": [{"verdict": v, "count": int(c.get(v, 0))} for v in R.VERDICTS],
            }
        )

    def row(r):
        return {
            "label": r["label"],
            "color": r["color"],
            "kind": r["kind"],
            "point": r["point"],
            "dtype": S.DTYPE_LABEL.get(r["dtype"], r["dtype"]),
            "intensity": S.fmt_num(r["intensity"]),
            "tflops": S.fmt_num(r["tflops"]),
            "roof": S.fmt_num(r["attainable_tflops"]),
            "pct": S.fmt_unit(r["pct_of_roof"], "%"),
            "time": S.fmt_time(r["time_s"]),
            "launches": int(r["launches"]),
            "verdict": r["verdict"],
        }

    rows = [row(r) for _, r in pts.iterrows()]
    highlights = [row(r) for _, r in pts[pts["kind"] != "square"].iterrows()]
    return {"counts": counts, "highlights": highlights, "all": rows}


def _pct_text(value) -> str:
    return "—" if value is None or value != value else f"{value:+.1f}%".replace("-", "−")


def comparison_context(points_path: str | Path | None, captions_dir: Path | None) -> dict | None:
    """The "Compared with <baseline>" section from what ``accelbench compare`` wrote, or None without one."""
    if not points_path or not Path(points_path).is_file():
        return None
    cmp = C.read_comparison(points_path)
    pts = cmp.points
    stem = Path(points_path).with_suffix("")
    rows = []
    for i, r in pts.iterrows():
        if r["match"] != "both":
            continue
        measured = r["speed_change_pct"] == r["speed_change_pct"]
        rows.append(
            {
                "label": cmp.labels[i],
                "verdict": r["verdict"],
                "table": r["table"],
                "change": _pct_text(r["speed_change_pct"]) if measured else "—",
                "ci": (
                    f"[{_pct_text(r['speed_change_ci95_low_pct'])}, {_pct_text(r['speed_change_ci95_high_pct'])}]"
                    if r["speed_change_ci95_low_pct"] == r["speed_change_ci95_low_pct"]
                    else ""
                ),
                "ratio": S.fmt_num(r["time_ratio"]) if measured else "—",
                "why": "; ".join(str(x) for x in (r["provenance_diff"], r["reason"]) if isinstance(x, str) and x),
                "dtype": _cell(r.get("dtype")),
                "n": _cell(r.get("n")),
            }
        )
    # each stage's own comparison (registry.COMPARE_EXTRAS): its card's rows and the partial that renders them
    extras = [
        {"key": x.key, "include": x.include, "rows": x.context.load()(cmp.extras.get(x.key, pd.DataFrame()))}
        for x in registry.COMPARE_EXTRAS
    ]
    counts = cmp.counts
    return {
        "baseline": cmp.baseline,
        "candidate": cmp.candidate,
        "headline": C.headline(cmp),
        "counts": counts,
        "min_effect_pct": f"{100 * cmp.min_effect:g}",
        "points": rows,
        "extras": extras,
        "provenance": _records(cmp.provenance),
        "only_baseline": [cmp.labels[i] for i in pts.index[pts["match"] == "baseline_only"]],
        "only_candidate": [cmp.labels[i] for i in pts.index[pts["match"] == "candidate_only"]],
        "figure": {
            "uri": image_data_uri(Path(f"{stem}.png")),
            "name": "comparison",
            **caption(captions_dir, "comparison"),
        },
        "csv": str(points_path),
    }


def build_context(
    aggregate_dir: Path, plots_dir: Path, captions_dir: Path | None = None, comparison: str | Path | None = None
) -> dict:
    captions_dir = captions_dir if captions_dir is not None else default_captions_dir()
    aggregate_dir, plots_dir = Path(aggregate_dir), Path(plots_dir)
    manifest_path = aggregate_dir / registry.MANIFEST
    manifest = (
        json.loads(manifest_path.read_text())
        if manifest_path.exists()
        else {
            "complete": False,
            "problems": [{"file": str(manifest_path), "message": "missing: run accelbench aggregate"}],
            "warnings": [],
            "runs": [],
            "files_read": [],
        }
    )
    tables = {name: _read_csv(aggregate_dir / f"{name}.csv") for name in registry.TABLES}
    if not tables["devices"].empty:  # device facts as written ("9.0" is a compute capability, not a float)
        tables["devices"] = pd.read_csv(aggregate_dir / "devices.csv", dtype=str)
    series = S.series(tables)
    figures, missing_figures = {}, []
    for name in registry.FIGURES:
        uri = image_data_uri(plots_dir / f"{name}.png")
        if uri is None:
            missing_figures.append(str(plots_dir / f"{name}.png"))
        figures[name] = {"uri": uri, "name": name, **caption(captions_dir, name)}
    ctx = {
        "version": __version__,
        "generated_utc": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "manifest": manifest,
        "complete": bool(manifest.get("complete")) and not missing_figures,
        "problems": manifest.get("problems", []),
        "warnings": manifest.get("warnings", []),
        "missing_figures": missing_figures,
        "n_runs": len(tables["runs"]),
        "multi_run": len(tables["runs"]) > 1,
        "series": _records(series),
        "env": runs_side_by_side(tables, series),
        "run_overview": run_overview(tables, series, manifest),
        "figures": figures,
        "status_info": [{"status": s, "fg": fg, "bg": bg, "text": t} for s, (fg, bg, t) in S.STATUS_INFO.items()],
        "status_colors": {
            **{s: {"fg": fg, "bg": bg} for s, (fg, bg, _) in S.STATUS_INFO.items()},
            "incomplete": {"fg": "#8a2c00", "bg": "#fff4e5"},
        },
        "roofline_points": R.roofline_points(tables),
        "launch_factor": R.LAUNCH_FACTOR,
        "files_read": manifest.get("files_read", []),
        "comparison": comparison_context(comparison, captions_dir),
        "verdict_colors": VERDICT_COLORS,
    }
    # the summary's variables from the stages that declare a part of it (Stage.summary, in its order), then its
    # headline sentences from their clauses
    for stage in sorted((s for s in registry.STAGES.values() if s.summary), key=lambda s: s.summary.order):
        ctx.update(stage.summary.context.load()(tables, series, ctx))
    ctx["headlines"] = headlines(ctx, series)
    # every section's variables, from its declaration's context hook (registry.SECTIONS, in page order)
    sections = []
    for section in registry.SECTIONS.values():
        if section.context is not None:
            ctx.update(section.context.load()(tables, series, ctx))
        sections.append({"name": section.name, "title": section.title, "include": section.include})
    ctx["sections"] = sections
    return ctx


def roofline_context(tables, series, ctx) -> dict:
    return {"roofline": roofline_tables(ctx["roofline_points"], series)}


def telemetry_context(tables, series, ctx) -> dict:
    return {"telemetry": telemetry_section(tables, series)}


def template_loader() -> ChoiceLoader:
    """The report's template, and each section's and compare extra's partial as ``<package>/<file>`` from the
    package that declares it (a stage plug-in's own folder)."""
    folders = {}
    for package in dict.fromkeys(x.package for x in (*registry.SECTIONS.values(), *registry.COMPARE_EXTRAS)):
        spec = importlib.util.find_spec(package)
        folders[package] = FileSystemLoader(list(spec.submodule_search_locations))
    return ChoiceLoader([PackageLoader("accelbench.reporting", "templates"), PrefixLoader(folders, delimiter="/")])


def render(context: dict) -> str:
    env = Environment(
        loader=template_loader(),
        autoescape=select_autoescape(["j2", "html"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template("report.html.j2").render(**context)


def write_report(aggregate_dir, plots_dir, out, captions_dir=None, comparison=None) -> Path:
    html = render(
        build_context(
            Path(aggregate_dir),
            Path(plots_dir),
            Path(captions_dir) if captions_dir else None,
            comparison=comparison or None,
        )
    )
    atomic_write_text(out, html)
    return Path(out)


def add_arguments(p) -> None:
    p.add_argument(
        "--aggregate-dir", required=True, help="folder with the tables and manifest.json (accelbench aggregate)"
    )
    p.add_argument("--plots-dir", required=True, help="folder with the PNG figures (accelbench plots)")
    p.add_argument("--out", required=True, help="the HTML file to write")
    p.add_argument(
        "--captions-dir",
        default=None,
        help="the figure captions (default: workflow/report here, else in this package's checkout)",
    )
    p.add_argument(
        "--comparison",
        default="",
        help="results/compare/<baseline>__<candidate>.csv (accelbench compare): adds the "
        "'Compared with <baseline>' section; empty: none",
    )


def cli(args) -> int:
    path = write_report(args.aggregate_dir, args.plots_dir, args.out, args.captions_dir, args.comparison)
    print(f"accelbench report: {path} ({path.stat().st_size / 1e6:.1f} MB)", file=sys.stderr)
    return 0
