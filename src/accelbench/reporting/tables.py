"""What the aggregated tables say, as small tables: pure functions shared by the plots and the report.

* ``series``: one entry per measured (run, device), with its label and its colour; the plots and
  the report use the same mapping, so a device has one colour everywhere.
* ``square_points`` / ``shape_points``: the square sweep's rows (m = n = k, no shape name: every row of
  a file from before shapes) and the rows of ``matmul.shapes``.
* ``best_tflops``: per device and dtype the best trustworthy throughput of the square sweep and its % of peak.
* ``best_search``: per device and dtype the shape search's result (its best confirmed shape, with CI).
* ``cpu_speedup``: accelerator over CPU time for the same dtype and n, within one run (square points).
* ``amp_verdicts``: the AMP rows of the summary tables (the FP32 baseline rows left out).
* telemetry: ``telemetry_windows`` (every sampled point and trial on a time line), ``throttle_warnings``,
  ``clock_ramp_counts``, ``sensor_notes`` (what each device's sampler found, and why sensors are missing),
  ``soak_summary`` (boost against sustained throughput and clock).
"""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import seaborn as sns

from .. import backends, columns, registry

BACKEND_ORDER = list(backends.NAMES)
DTYPE_ORDER = ["float64", "float32", "tf32", "bfloat16", "float16", "float8_e4m3fn"]
DTYPE_LABEL = {
    "float64": "FP64",
    "float32": "FP32",
    "tf32": "TF32",
    "bfloat16": "BF16",
    "float16": "FP16",
    "float8_e4m3fn": "FP8 (e4m3)",
}

# statuses with a timing (the number exists) and those whose number can be trusted
MEASURED, TRUSTED = columns.MEASURED, columns.TRUSTED  # the status groups (accelbench.columns)

# status -> (foreground, background, one-line meaning); colours readable for colour-blind readers
# and always shown together with the status word
STATUS_INFO = {
    "ok": ("#1a5e20", "#e3f1e4", "measured; every check passed"),
    "unstable": (
        "#7a4a00",
        "#fdf0d5",
        "measured, but the IQR/median of the repeats is above matmul.unstable_iqr_ratio",
    ),
    "invalid": (
        "#8c1111",
        "#fbe1e1",
        "above 100% of the device's peak: a missing synchronization or a wrong peak; not trusted",
    ),
    "wrong_result": (
        "#5b1f73",
        "#efe2f5",
        "the result differs from a float64 reference by more than rel_error_max for the dtype",
    ),
    "skipped_budget": ("#3d3d3d", "#e9e9e9", "not measured: its predicted time exceeded matmul.point_budget_s"),
    "oom": ("#8a3b00", "#fde3cf", "not measured: the device ran out of memory"),
    "unsupported": ("#4a4a4a", "#f1f1f1", "not measured: this device or build does not support the dtype/operation"),
    "error": ("#8c1111", "#fbe1e1", "not measured: the measurement raised an error (see status_detail and the log)"),
    "absent": ("#555555", "#f4f4f4", "the backend has no device on this machine"),
}

_NAME_NOISE = [
    r"\bNVIDIA\b",
    r"\bAMD\b",
    r"\bIntel\(R\)",
    r"\(R\)",
    r"\(TM\)",
    r"\bCPU\b",
    r"with Radeon Graphics",
    r"\d+-Core Processor",
    r"\bProcessor\b",
    r"@ [\d.]+GHz",
]


def short_device_name(name) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'H100 80GB HBM3'; 'AMD EPYC 7V13 64-Core Processor' -> 'EPYC 7V13'."""
    if not isinstance(name, str) or not name:
        return ""
    short = name
    for pattern in _NAME_NOISE:
        short = re.sub(pattern, "", short)
    short = re.sub(r"\s+", " ", short).strip()
    return (short or name)[:28]


def _sort_key(row) -> tuple:
    backend = row["backend"] if row["backend"] in BACKEND_ORDER else "zz"
    return (str(row["run_id"]), BACKEND_ORDER.index(backend) if backend in BACKEND_ORDER else 99, str(row["device"]))


def series(tables: dict) -> pd.DataFrame:
    """One row per (run_id, device) measured anywhere: backend, device_name, label, color (hex).

    The label carries the run id when several runs are compared. Colours come from seaborn's
    colour-blind-safe palette in a fixed order (run, then backend, then device).
    """
    keys = ["run_id", "backend", "device", "device_name"]
    parts = []
    for name in registry.RUN_TABLES:  # every table a stage writes (each row names its device)
        df = tables.get(name)
        if df is not None and not df.empty and set(keys) <= set(df.columns):
            parts.append(df[keys])
    devices = tables.get("devices")
    if devices is not None and not devices.empty and set(keys) <= set(devices.columns):
        present = devices[devices["present"].astype(str).str.lower().isin(["true", "1"]) & devices["device"].notna()]
        parts.append(present[keys])
    if not parts:
        return pd.DataFrame(columns=keys + ["device_label", "label", "color"])
    df = pd.concat(parts, ignore_index=True)
    df = df.dropna(subset=["run_id", "device"])
    df[keys] = df[keys].fillna("").astype(str)
    df = df[df["device"] != ""].drop_duplicates(subset=["run_id", "device"], keep="first")
    df = df.loc[sorted(df.index, key=lambda i: _sort_key(df.loc[i]))].reset_index(drop=True)
    multi = df["run_id"].nunique() > 1
    short = df["device_name"].map(short_device_name)
    device_part = df["device"] + short.map(lambda s: f" {s}" if s else "")
    df["device_label"] = device_part
    df["label"] = (df["run_id"] + " · " + device_part) if multi else device_part
    palette = sns.color_palette("colorblind", max(len(df), 1)).as_hex()
    df["color"] = [palette[i % len(palette)] for i in range(len(df))]
    return df


def with_series(df: pd.DataFrame, series_df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the ``label`` and ``color`` of its (run_id, device)."""
    if df is None or df.empty:
        return pd.DataFrame(columns=list(getattr(df, "columns", [])) + ["device_label", "label", "color"])
    out = df.copy()
    out["run_id"] = out["run_id"].astype(str)
    out["device"] = out["device"].astype(str)
    return out.merge(
        series_df[["run_id", "device", "device_label", "label", "color"]], on=["run_id", "device"], how="left"
    )


def dtype_sorted(values) -> list[str]:
    values = [v for v in dict.fromkeys(values) if isinstance(v, str)]
    return sorted(values, key=lambda d: (DTYPE_ORDER.index(d) if d in DTYPE_ORDER else 99, d))


def shape_names(matmul: pd.DataFrame) -> pd.Series:
    """Each row's ``shape_name``, '' for square sweep points (and every row of a file from before shapes)."""
    if "shape_name" not in matmul.columns:
        return pd.Series("", index=matmul.index, dtype=object)
    return matmul["shape_name"].astype(object).fillna("").astype(str)


def square_points(matmul: pd.DataFrame) -> pd.DataFrame:
    """The square sweep's rows: no shape name (named shapes are reported on their own, even square ones)."""
    if matmul is None or matmul.empty:
        return pd.DataFrame(columns=list(getattr(matmul, "columns", [])))
    return matmul[shape_names(matmul) == ""]


def shape_points(matmul: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``matmul.shapes``."""
    if matmul is None or matmul.empty:
        return pd.DataFrame(columns=list(getattr(matmul, "columns", [])))
    return matmul[shape_names(matmul) != ""]


def measured(matmul: pd.DataFrame, trusted_only: bool = False) -> pd.DataFrame:
    """Matmul rows that have a timing (and, with ``trusted_only``, a trustworthy one)."""
    if matmul is None or matmul.empty:
        return pd.DataFrame(columns=list(getattr(matmul, "columns", [])))
    keep = TRUSTED if trusted_only else MEASURED
    df = matmul[matmul["status"].isin(keep)].copy()
    df = df[pd.to_numeric(df["median_s"], errors="coerce") > 0]
    return df


def best_tflops(matmul: pd.DataFrame) -> pd.DataFrame:
    """Per (run_id, device, dtype) the trustworthy square point with the highest TFLOP/s: its n, tflops,
    pct_of_peak, peak_tflops and status (``unstable`` when the best one was)."""
    cols = [
        "run_id",
        "backend",
        "device",
        "device_name",
        "dtype",
        "n",
        "tflops",
        "pct_of_peak",
        "peak_tflops",
        "status",
    ]
    df = measured(square_points(matmul), trusted_only=True)
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df.sort_values("tflops", ascending=False, kind="stable")
    best = df.groupby(["run_id", "device", "dtype"], sort=False, as_index=False).head(1)
    return best[cols].reset_index(drop=True)


def cpu_speedup(matmul: pd.DataFrame) -> pd.DataFrame:
    """Accelerator speedup over the CPU of the same run: CPU median time / accelerator median time at
    the same dtype and n (both measured and trustworthy). One row per (run, accelerator device, dtype, n)."""
    cols = [
        "run_id",
        "backend",
        "device",
        "device_name",
        "baseline_device",
        "dtype",
        "n",
        "cpu_median_s",
        "accel_median_s",
        "speedup",
    ]
    df = measured(square_points(matmul), trusted_only=True)
    if df.empty:
        return pd.DataFrame(columns=cols)
    host = ~is_accelerator(df["backend"])
    cpu = df[host][["run_id", "device", "dtype", "n", "median_s"]]
    cpu = cpu.rename(columns={"device": "baseline_device", "median_s": "cpu_median_s"})
    accel = df[~host].rename(columns={"median_s": "accel_median_s"})
    if cpu.empty or accel.empty:
        return pd.DataFrame(columns=cols)
    out = accel.merge(cpu, on=["run_id", "dtype", "n"], how="inner")
    out["speedup"] = out["cpu_median_s"] / out["accel_median_s"]
    return out[cols].sort_values(["run_id", "device", "dtype", "n"]).reset_index(drop=True)


SEARCH_COLUMNS = [
    "run_id",
    "backend",
    "device",
    "device_name",
    "dtype",
    "m",
    "n",
    "k",
    "tflops",
    "tflops_ci95_low",
    "tflops_ci95_high",
    "ci_method",
    "pct_of_peak",
    "status",
    "phase",
    "evaluated_shapes",
    "grid_points",
    "search_s",
    "budget_s",
    "stop_reason",
    "evaluations",
]


def best_search(search: pd.DataFrame) -> pd.DataFrame:
    """Per (run_id, device, dtype) the search's result: its ``best`` row (m, n, k, TFLOP/s with its 95%
    interval, % of peak, the phase it was measured in), how much of the grid it measured and in what time,
    and why it stopped; ``evaluations``: the measurements it made."""
    if search is None or search.empty or "best" not in search.columns:
        return pd.DataFrame(columns=SEARCH_COLUMNS)
    flag = search["best"].astype(str).str.lower().isin(["true", "1"])
    best = search[flag & search["status"].isin(TRUSTED)].copy()
    if best.empty:
        return pd.DataFrame(columns=SEARCH_COLUMNS)
    counts = search.groupby(["run_id", "device", "dtype"]).size().rename("evaluations").reset_index()
    best = best.drop_duplicates(["run_id", "device", "dtype"]).merge(counts, on=["run_id", "device", "dtype"])
    return best.reindex(columns=SEARCH_COLUMNS).reset_index(drop=True)


def is_accelerator(backend_column: pd.Series) -> pd.Series:
    """Which rows' backend is a device beside the host (``Backend.is_accelerator``)."""
    return backend_column.map(backends.is_accelerator).astype(bool)


def accelerator_devices(matmul: pd.DataFrame) -> pd.DataFrame:
    """The (run_id, device) pairs of accelerators with at least one timing."""
    df = measured(matmul)
    if df.empty:
        return pd.DataFrame(columns=["run_id", "device"])
    return df[is_accelerator(df["backend"])][["run_id", "device"]].drop_duplicates()


def amp_verdicts(amp_summary: pd.DataFrame) -> pd.DataFrame:
    """AMP rows of the summary: a mode that differs from its baseline, on a device that exists."""
    if amp_summary is None or amp_summary.empty:
        return pd.DataFrame(columns=list(getattr(amp_summary, "columns", [])))
    mode, baseline = amp_summary["mode"], amp_summary["baseline"]
    keep = mode.notna() & (mode.astype(str) != baseline.fillna("").astype(str))
    if "status" in amp_summary.columns:
        keep &= amp_summary["status"].fillna("ok").astype(str) != "absent"
    return amp_summary[keep].reset_index(drop=True)


def as_bool(value) -> bool | None:
    if isinstance(value, bool):
        return value
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return None
    text = str(value).strip().lower()
    if text in ("true", "1", "1.0", "yes"):  # 1.0/0.0: a bool column pandas made float (NaN in another file)
        return True
    if text in ("false", "0", "0.0", "no"):
        return False
    return None


def fmt_num(x, digits: int = 3) -> str:
    """A human-readable number with ``digits`` significant figures, without exponents for 1e-3..1e6."""
    if x is None or pd.isna(x):
        return "—"
    x = float(x)
    ax = abs(x)
    if ax == 0:
        return "0"
    if ax >= 1e6 or ax < 1e-4:
        return f"{x:.{digits - 1}e}"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(ax))))
    return f"{x:,.{decimals}f}"


def fmt_time(seconds, digits: int = 3) -> str:
    """A duration in the unit that keeps it readable: 25.9 µs, 2.79 ms, 1.23 s."""
    if seconds is None or pd.isna(seconds):
        return "—"
    s = float(seconds)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(s) >= scale:
            return f"{fmt_num(s / scale, digits)} {unit}"
    return f"{fmt_num(s / 1e-9, digits)} ns"


def fmt_unit(x, unit: str, digits: int = 3) -> str:
    """``fmt_num`` with a unit, or a dash alone when there is no value."""
    text = fmt_num(x, digits)
    return text if text == "—" else f"{text}{unit}"


# ---- telemetry: what each device was doing while it was measured (measure.telemetry) ---------------------

SENSOR_LABEL = {
    "clock": "clock",
    "mem_clock": "memory clock",
    "power": "power",
    "energy": "energy",
    "temperature": "temperature",
    "utilization": "utilization",
    "throttle": "throttle reasons",
}


def _num(df: pd.DataFrame, col: str) -> pd.Series:
    return pd.to_numeric(df[col], errors="coerce") if col in df.columns else pd.Series(float("nan"), index=df.index)


def window_kinds() -> dict:
    """Each table whose rows are telemetry windows -> its ``Windows`` declaration (registry order)."""
    return {name: t.windows for name, t in registry.TABLES.items() if t.windows is not None}


def _what(template: str, row: dict) -> str:
    """A window's label: ``template`` formatted with the row's values (whole numbers without a decimal point)."""

    def plain(v):
        try:
            f = float(v)
        except (TypeError, ValueError):
            return "" if v is None else str(v)
        return "" if f != f else (str(int(f)) if f.is_integer() else str(v))

    return template.format(**{k: plain(v) for k, v in row.items()})


def telemetry_windows(tables: dict) -> pd.DataFrame:
    """Every sampled window on a time line, from the tables declaring ``windows`` (``kind``: the matmul points,
    the soak intervals, the AMP trials), with run_id, device, what it was (``what``), start/end on the wall
    clock, throttled, throttle_reasons and clock_ramp. Rows without a window (telemetry off, files from before
    it) are left out."""
    cols = [
        "run_id",
        "device",
        "kind",
        "what",
        "start_unix_s",
        "end_unix_s",
        "throttled",
        "throttle_reasons",
        "clock_ramp",
    ]
    parts = []
    for name, w in window_kinds().items():
        df = tables.get(name)
        if df is None or df.empty or "telemetry_start_unix_s" not in df.columns:
            continue
        start, end = _num(df, "telemetry_start_unix_s"), _num(df, "telemetry_end_unix_s")
        keep = start.notna() & end.notna()
        if not keep.any():
            continue
        d = df[keep]
        what = [_what(w.what, r) for r in d.to_dict("records")]
        parts.append(
            pd.DataFrame(
                {
                    "run_id": d["run_id"].astype(str),
                    "device": d["device"].astype(str),
                    "kind": w.kind,
                    "what": what,
                    "start_unix_s": start[keep],
                    "end_unix_s": end[keep],
                    "throttled": d["throttled"].map(as_bool) if "throttled" in d.columns else None,
                    "throttle_reasons": d.get("throttle_reasons"),
                    "clock_ramp": d["clock_ramp"].map(as_bool) if "clock_ramp" in d.columns else None,
                }
            )
        )
    if not parts:
        return pd.DataFrame(columns=cols)
    return pd.concat(parts, ignore_index=True)[cols]


def throttle_warnings(tables: dict) -> pd.DataFrame:
    """Per (run_id, device) that throttled anywhere: how many windows of each kind (``<kind>_throttled``)
    carried a throttling reason, out of how many with a throttle reading (``<kind>_known``), and which reasons."""
    kinds = [w.kind for w in window_kinds().values()]
    cols = ["run_id", "device", *(f"{k}_{c}" for k in kinds for c in ("throttled", "known")), "reasons"]
    w = telemetry_windows(tables)
    if w.empty:
        return pd.DataFrame(columns=cols)
    out = []
    for (run_id, device), g in w.groupby(["run_id", "device"], sort=True):
        known = g[g["throttled"].notna()]
        hit = known[known["throttled"].eq(True)]  # tri-state column: True, False, None
        if hit.empty:
            continue
        reasons = sorted({r for text in hit["throttle_reasons"].dropna().astype(str) for r in text.split(";") if r})
        row = {"run_id": run_id, "device": device, "reasons": ", ".join(reasons)}
        for kind in kinds:
            row[f"{kind}_throttled"] = int((hit["kind"] == kind).sum())
            row[f"{kind}_known"] = int((known["kind"] == kind).sum())
        out.append(row)
    return pd.DataFrame(out, columns=cols)


def clock_ramp_counts(tables: dict) -> pd.DataFrame:
    """Per (run_id, device): windows measured before the clock settled (``clock_ramp``), of those for which it
    could be told (the tables that carry the flag: the matmul points); ``what``: their kinds' names."""
    cols = ["run_id", "device", "ramp", "known", "what"]
    w = telemetry_windows(tables)
    df = w[w["clock_ramp"].notna()] if not w.empty else w
    if df.empty:
        return pd.DataFrame(columns=cols)
    many = {d.kind: d.many for d in window_kinds().values()}
    out = []
    for (run_id, device), g in df.groupby(["run_id", "device"], sort=True):
        out.append(
            {
                "run_id": run_id,
                "device": device,
                "ramp": int(g["clock_ramp"].eq(True).sum()),  # tri-state column
                "known": len(g),
                "what": ", ".join(many[k] for k in dict.fromkeys(g["kind"])),
            }
        )
    return pd.DataFrame(out, columns=cols)


def nominal_clock_counts(tables: dict) -> dict[tuple[str, str], int]:
    """Per (run_id, device): the rows of every table whose clock was nominal (``clock_source``: the reading
    cannot vary, so clock_ramp is unknown)."""
    out: dict[tuple[str, str], int] = {}
    for df in tables.values():
        if df is None or df.empty or "clock_source" not in df.columns or "device" not in df.columns:
            continue
        nominal = df[df["clock_source"].astype(str) == "nominal"]
        for (run, device), g in nominal.groupby([nominal["run_id"].astype(str), nominal["device"].astype(str)]):
            out[(run, device)] = out.get((run, device), 0) + len(g)
    return out


def sensor_notes(devices: pd.DataFrame) -> list[dict]:
    """Per present device: its telemetry source, the sensors read and the missing ones with why, from the
    ``telemetry`` entry ``detect`` wrote into devices.json (what the sampler found there)."""
    out = []
    if devices is None or devices.empty:
        return out
    for _, d in devices.iterrows():
        if not as_bool(d.get("present")) or not isinstance(d.get("device"), str) or not d.get("device"):
            continue
        raw = d.get("telemetry")
        info = None
        if isinstance(raw, str) and raw.startswith("{"):
            try:
                info = json.loads(raw)
            except ValueError:
                info = None
        entry = {
            "run_id": str(d["run_id"]),
            "backend": d["backend"],
            "device": d["device"],
            "device_name": d.get("device_name") or "",
        }
        if not isinstance(info, dict):
            out.append(
                {
                    **entry,
                    "source": "",
                    "found": [],
                    "missing": [],
                    "note": "not recorded (devices.json written before telemetry existed)",
                }
            )
            continue
        missing = [
            {"sensor": SENSOR_LABEL.get(k, k), "why": v}
            for k, v in (info.get("missing") or {}).items()
            if k != "mem_clock" or info.get("source") != "cpu_sysfs"
        ]
        out.append(
            {
                **entry,
                "source": info.get("source") or "",
                "found": sorted(SENSOR_LABEL.get(k, k) for k in (info.get("found") or {})),
                "missing": missing,
                "note": info.get("note") or "",
            }
        )
    return out


def settled_at(intervals: pd.DataFrame, settled: pd.Series) -> float:
    """Seconds into a soak at which its first settled interval began (NaN when none settled)."""
    first = intervals[settled.eq(True)]  # tri-state column
    if first.empty:
        return float("nan")
    return float(_num(first, "t_s").iloc[0] - _num(first, "interval_s").iloc[0])


def soak_summary(soak: pd.DataFrame) -> pd.DataFrame:
    """Per (run_id, device) soak: the point held, its boost reading (the first interval) against its sustained
    one (the median over the intervals from which the clock had settled; over the second half where no clock
    was read), when it settled, and whether it throttled."""
    cols = [
        "run_id",
        "backend",
        "device",
        "device_name",
        "dtype",
        "n",
        "intervals",
        "seconds",
        "boost_tflops",
        "sustained_tflops",
        "boost_clock_mhz",
        "sustained_clock_mhz",
        "settled_at_s",
        "sustained_temp_c_max",
        "sustained_gflop_per_j",
        "throttled",
        "reasons",
    ]
    if soak is None or soak.empty or "interval" not in soak.columns:
        return pd.DataFrame(columns=cols)
    ok = soak[soak["status"].astype(str) == "ok"]
    out = []
    for (run_id, device), g in ok.groupby([ok["run_id"].astype(str), ok["device"].astype(str)], sort=True):
        g = g.sort_values("interval")
        settled = g["clock_settled"].map(as_bool) if "clock_settled" in g.columns else pd.Series(None, index=g.index)
        steady = g[settled.eq(True)] if settled.eq(True).any() else g.iloc[len(g) // 2 :]  # tri-state column
        first = g.iloc[0]
        reasons = sorted({r for text in g["throttle_reasons"].dropna().astype(str) for r in text.split(";") if r})
        throttled = g["throttled"].map(as_bool)
        out.append(
            {
                "run_id": run_id,
                "backend": first["backend"],
                "device": device,
                "device_name": first["device_name"],
                "dtype": first["dtype"],
                "n": int(first["n"]),
                "intervals": len(g),
                "seconds": float(_num(g, "t_s").max()),
                "boost_tflops": float(first["tflops"]),
                "sustained_tflops": float(_num(steady, "tflops").median()),
                "boost_clock_mhz": _num(g, "clock_mhz_median").iloc[0],
                "sustained_clock_mhz": _num(steady, "clock_mhz_median").median(),
                "settled_at_s": settled_at(g, settled),
                "sustained_temp_c_max": _num(steady, "temp_c_max").max(),
                "sustained_gflop_per_j": _num(steady, "gflop_per_j").median(),
                "throttled": None if throttled.isna().all() else bool(throttled.eq(True).any()),  # tri-state column
                "reasons": ", ".join(reasons),
            }
        )
    return pd.DataFrame(out, columns=cols)
