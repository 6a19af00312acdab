"""Gather every run under ``results/`` into tidy tables, and refuse to pass on half the data.

A run folder is any folder holding a ``run.json``. Every CSV a run should have (from the backends
its config lists) is read and checked before anything is written:

* the file exists and is not empty;
* it is UTF-8 text without NUL bytes and ends with a line end (the stages write atomically, so a
  missing final newline means a copy or a kill cut the file short);
* every line has as many fields as the header (a ragged line is a truncated or spliced file);
* every documented column (README, "Where results land"; ``registry.TABLES``) is present (a column
  added in a later version may be missing from older files: it is filled with what such a file means,
  ``registry.ADDED_COLUMNS``, and a warning names the file);
* numeric columns hold numbers;
* a matmul file has a row for every configured size and every configured shape (``matmul.shapes``) of
  every (device, dtype) it lists, a search file (with ``matmul.search`` on) rows for every searched
  dtype of each device, a memory-bandwidth file a launch row and copy and triad at the same sizes,
  an AMP trials file a trial for every configured seed and workload, an AMP summary every workload
  (one row per point whatever its status, so most files cut at a line boundary are still caught;
  warm-up and AMP step files cut exactly at a line end are not detectable);
* a run made before a stage existed (its config lacks the stage's key, ``Stage.since_config_key``) is
  not expected to have that stage's files, and a matmul file from before shapes gets m and k from n.

Every problem names its file. The tables are written either way (so the data can be inspected),
together with ``manifest.json``; when a problem was found the manifest says ``"complete": false``
and the command exits 1 unless ``--allow-incomplete`` was given, in which case the report carries
a banner naming the files.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from .. import __version__, registry
from ..run.config import ConfigError
from ..run.io import atomic_write_csv, atomic_write_json
from . import history_store

TABLES = list(registry.TABLES)
DEFAULT_FOCUS = 5  # runs shown in full by default (the latest); the others are history only (the store)


def expected_files(config: dict, stages: list[str] | None = None) -> list[str]:
    """The CSVs a finished run with this config has (the Snakefile's per-backend outputs; a run made before a
    stage existed is not expected to have its files); a run of some stages only (run.json ``stages``: the fleet
    node check) has only theirs."""
    files = registry.run_files(config.get("backends") or [], config)
    if stages is None:
        return files
    wanted = {
        f
        for s in registry.DEVICE_STAGES
        if s.name in stages
        for b in config.get("backends") or []
        for f in registry.stage_files(s, b, config)
    }
    return [f for f in files if f in wanted]


class Problems:
    """Problems found while reading; each names the file it is about."""

    def __init__(self):
        self.items: list[dict] = []
        self.warnings: list[dict] = []

    def add(self, path: Path, kind: str, message: str, run_id: str | None = None) -> None:
        self.items.append({"file": str(path), "run_id": run_id, "kind": kind, "message": message})

    def warn(self, path: Path, kind: str, message: str, run_id: str | None = None) -> None:
        self.warnings.append({"file": str(path), "run_id": run_id, "kind": kind, "message": message})


def read_checked_csv(path: Path, table: str, problems: Problems, run_id: str | None):
    """(rows that can be trusted as a DataFrame or None, whether the whole file was sound).

    Problems are recorded with the file's name. A truncated or ragged line is left out and the
    other rows kept (they are reported only with ``--allow-incomplete``); a file missing
    documented columns, or unreadable, yields None.
    """
    spec = registry.TABLES[table]
    raw = path.read_bytes()
    if not raw.strip():
        problems.add(path, "empty_file", "empty file (no header, no rows)", run_id)
        return None, False
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.add(path, "corrupted", f"not UTF-8 text at byte {exc.start} (corrupted file?)", run_id)
        return None, False
    if "\x00" in text:
        problems.add(path, "corrupted", "contains NUL bytes (corrupted file?)", run_id)
        return None, False
    ok = True
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        problems.add(path, "parse_error", f"CSV parse error: {exc}", run_id)
        return None, False
    header, body = rows[0], rows[1:]
    if not text.endswith("\n"):
        last = text.rsplit("\n", 1)[-1]
        problems.add(path, "truncated", f"truncated: the last line ({last[:60]!r}) has no line end; left out", run_id)
        body = body[:-1] if len(rows) > 1 else body
        ok = False
    ragged = [i for i, row in enumerate(body) if row and len(row) != len(header)]
    if ragged:
        lines = ", ".join(str(i + 2) for i in ragged[:5]) + (" ..." if len(ragged) > 5 else "")
        problems.add(
            path,
            "ragged",
            f"row(s) {lines}: field count differs from the header's {len(header)} "
            "(truncated or corrupted line); left out",
            run_id,
        )
        ok = False
    added, added_from = spec.added, spec.added_from
    missing = [c for c in spec.columns if c not in header and c not in added and c not in added_from]
    if missing:
        problems.add(path, "missing_columns", f"missing documented column(s): {', '.join(missing)}", run_id)
        return None, False
    left_out = set(ragged)
    good = [row for i, row in enumerate(body) if row and i not in left_out]
    buf = io.StringIO()
    csv.writer(buf).writerows([header, *good])
    try:
        df = pd.read_csv(io.StringIO(buf.getvalue()))
    except Exception as exc:  # pandas' ParserError, EmptyDataError, ...
        problems.add(path, "parse_error", f"CSV parse error: {str(exc).splitlines()[0]}", run_id)
        return None, False
    older = [c for c in added if c not in df.columns]
    if older:
        for c in older:
            df[c] = added[c]
        problems.warn(
            path,
            "older_file",
            f"written before column(s) {', '.join(older)} existed: filled with "
            f"{', '.join(f'{c}={added[c]!r}' for c in older)}",
            run_id,
        )
    older = [c for c, src in added_from.items() if c not in df.columns and src in df.columns]
    if older:
        for c in older:
            df[c] = df[added_from[c]]
        problems.warn(
            path,
            "older_file",
            f"written before column(s) {', '.join(older)} existed: filled from "
            f"{', '.join(f'{c}={added_from[c]}' for c in older)}",
            run_id,
        )
    for col in spec.numeric:
        values = pd.to_numeric(df[col], errors="coerce")
        bad = df[col].notna() & values.isna()
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            problems.add(
                path, "bad_value", f"column {col!r}: {df[col].iloc[i]!r} in data row {i + 1} is not a number", run_id
            )
            ok = False
        df[col] = values
    statuses = spec.statuses
    if statuses:
        unknown = sorted(set(df["status"].dropna().astype(str)) - set(statuses))
        if unknown:
            problems.warn(
                path, "unknown_status", f"status value(s) not in the documented list: {', '.join(unknown)}", run_id
            )
    if run_id is not None:
        other = sorted(set(df["run_id"].dropna().astype(str)) - {run_id})
        if other:
            problems.warn(
                path, "run_id_mismatch", f"rows with run_id {', '.join(other)} in the folder of run {run_id}", run_id
            )
    return df, ok


def check_sample_files(run_dir: Path, config: dict, problems: Problems, run_id: str) -> None:
    """The raw-sample files (``registry.SAMPLES``, read by ``accelbench compare``): a damaged one is a problem
    naming it; a missing one only a warning (runs made before they existed have none)."""
    for name in registry.sample_files(config.get("backends") or []):
        path = run_dir / name
        if not path.exists():
            problems.warn(
                path,
                "missing_samples",
                "no raw-sample file (a run made before accelbench kept them): accelbench compare cannot use this run",
                run_id,
            )
            continue
        try:
            pq.read_metadata(path)
        except Exception as exc:  # pyarrow: ArrowInvalid / OSError for a truncated or foreign file
            problems.add(path, "corrupted", f"not a readable Parquet sample file ({str(exc).splitlines()[0]})", run_id)


def _flat(value):
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def device_rows(devices: dict, run_id: str) -> list[dict]:
    """One row per device of every backend; a backend without devices gets one row with its reason."""
    rows = []
    host = devices.get("host", "")
    for backend, info in (devices.get("backends") or {}).items():
        info = info or {}
        devs = info.get("devices") or []
        base = {
            "run_id": run_id,
            "host": host,
            "backend": backend,
            "present": bool(info.get("present")),
            "reason": info.get("reason") or "",
        }
        # backend-wide facts (driver and runtime versions, ...) go on each of its rows
        for k, v in info.items():
            if k not in ("present", "reason", "devices") and not isinstance(v, (dict, list)) and v not in (None, ""):
                base[k] = v
        if not devs:
            rows.append({**base, "device": "", "device_name": ""})
        for d in devs:
            row = dict(base)
            for k, v in d.items():
                row["device_name" if k == "name" else k] = _flat(v)
            row.setdefault("device", "")
            row.setdefault("device_name", "")
            rows.append(row)
    return rows


def run_row(run_info: dict, devices: dict, run_dir: str, threads: str) -> dict:
    config = run_info.get("config") or {}
    cpu = devices.get("cpu") or {}
    present = [b for b, info in (devices.get("backends") or {}).items() if (info or {}).get("present")]
    return {
        "run_id": run_info.get("run"),
        "run_dir": run_dir,
        "host": devices.get("host", ""),
        "timestamp_utc": devices.get("timestamp_utc", ""),
        "accelbench_version": run_info.get("accelbench_version") or devices.get("accelbench_version", ""),
        "git_commit": run_info.get("git_commit") or devices.get("git_commit", ""),
        "config_hash": run_info.get("config_hash", ""),
        "python_version": devices.get("python_version", ""),
        "torch_version": devices.get("torch_version", ""),
        "cuda_version": devices.get("cuda_version", "") or "",
        "hip_version": devices.get("hip_version", "") or "",
        "container_image": devices.get("container_image", "") or "",
        "cpu_model": cpu.get("model_name") or cpu.get("name") or cpu.get("model", ""),
        "backends_requested": " ".join(config.get("backends") or []),
        "backends_present": " ".join(present),
        "threads": threads,
        "complete": True,
        "config_json": json.dumps(config, sort_keys=True),
        "env_json": json.dumps(devices.get("env") or {}, sort_keys=True),
        "packages_json": json.dumps(devices.get("packages") or {}, sort_keys=True),
        "cpu_json": json.dumps(cpu, sort_keys=True, default=str),
    }


def _read_json(path: Path, problems: Problems, run_id: str | None) -> dict | None:
    if not path.exists():
        problems.add(path, "missing_file", "missing file (the run should have it)", run_id)
        return None
    try:
        obj = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        problems.add(path, "bad_json", f"not valid JSON ({exc})", run_id)
        return None
    if not isinstance(obj, dict):
        problems.add(path, "bad_json", f"expected a JSON object, got {type(obj).__name__}", run_id)
        return None
    return obj


def find_run_dirs(results: Path, out_dir: Path | None = None) -> list[Path]:
    """Every folder under ``results`` holding a run.json (not the aggregate output, logs or checkpoints)."""
    out = []
    for run_json in sorted(results.rglob(registry.RUN_FILE)):
        d = run_json.parent
        if out_dir is not None and (d.resolve() == out_dir.resolve() or out_dir.resolve() in d.resolve().parents):
            continue
        if {"checkpoints", "logs"} & set(d.relative_to(results).parts):
            continue
        out.append(d)
    return out


def _run_order(run_dir: Path) -> tuple[str, str, str]:
    """(time, run id, folder) of a run folder, read from its run.json and devices.json (an unreadable one: empty)."""
    stamp, run_id = "", run_dir.name
    try:
        run_id = str(json.loads((run_dir / registry.RUN_FILE).read_text()).get("run") or run_id)
        stamp = str(json.loads((run_dir / registry.DEVICES_FILE).read_text()).get("timestamp_utc") or "")
    except (OSError, ValueError, AttributeError):
        pass
    return stamp, run_id, str(run_dir)


def select_focus(run_dirs: list[Path], focus: int | None = None, runs: list[str] | None = None) -> list[Path]:
    """The runs in focus: those named (by run id or folder name), else the latest ``focus`` by time (None or 0:
    all). The report shows them in full; the others only as history (the store)."""
    if runs:
        wanted = set(runs)
        return [d for d in run_dirs if d.name in wanted or _run_order(d)[1] in wanted]
    if not focus or len(run_dirs) <= focus:
        return run_dirs
    latest = sorted(run_dirs, key=_run_order)[-focus:]
    return [d for d in run_dirs if d in set(latest)]


def aggregate(
    results: Path,
    out_dir: Path | None = None,
    store: Path | None = None,
    focus: int | None = None,
    runs: list[str] | None = None,
) -> tuple[dict, dict]:
    """Read the runs in focus under ``results`` (``select_focus``; default every run): (tables as DataFrames,
    manifest). With a history ``store``, the ``history`` table holds every stored run of every point's series."""
    results = Path(results)
    problems = Problems()
    frames: dict[str, list] = {t: [] for t in TABLES}
    runs_manifest, files_read = [], []
    seen_ids: dict[str, str] = {}

    all_dirs = find_run_dirs(results, Path(out_dir) if out_dir else None) if results.is_dir() else []
    run_dirs = select_focus(all_dirs, focus, runs)
    if not results.is_dir():
        problems.add(results, "missing_results", "the results folder does not exist")
    elif not all_dirs:
        problems.add(results, "no_runs", "no run folder (a folder with run.json) found")
    elif runs and not run_dirs:
        problems.add(results, "no_runs", f"none of the runs named ({', '.join(runs)}) is under {results}")

    for run_dir in run_dirs:
        n_before = len(problems.items)
        run_info = _read_json(run_dir / registry.RUN_FILE, problems, None)
        if run_info is None:
            runs_manifest.append({"run_id": None, "run_dir": str(run_dir), "files": [], "complete": False})
            continue
        run_id = str(run_info.get("run") or run_dir.name)
        if run_id in seen_ids:
            problems.add(
                run_dir / registry.RUN_FILE,
                "duplicate_run",
                f"run id {run_id!r} also used by {seen_ids[run_id]}: rename one run (config key 'run')",
                run_id,
            )
        seen_ids.setdefault(run_id, str(run_dir))
        config = run_info.get("config") or {}
        devices = _read_json(run_dir / registry.DEVICES_FILE, problems, run_id) or {}
        if devices:
            # object dtype: device facts keep their own form ("9.0" stays a string, 16 an integer)
            frames["devices"].append(pd.DataFrame(device_rows(devices, run_id), dtype=object))
            if devices.get("config_hash") and devices.get("config_hash") != run_info.get("config_hash"):
                problems.warn(
                    run_dir / registry.DEVICES_FILE,
                    "config_hash_mismatch",
                    f"config_hash {devices.get('config_hash')} differs from run.json's {run_info.get('config_hash')}",
                    run_id,
                )

        present = sorted(p.name for p in run_dir.glob("*.csv"))
        for name in expected_files(config, run_info.get("stages")):
            if name not in present:
                problems.add(
                    run_dir / name, "missing_file", "missing file (the run's config lists its backend)", run_id
                )
        run_files, threads = [], {}
        for name in present:
            path = run_dir / name
            table = registry.table_of(name)
            if table is None:
                problems.warn(path, "unknown_file", "not a documented result file; not read", run_id)
                continue
            df, sound = read_checked_csv(path, table, problems, run_id)
            check = registry.TABLES[table].check
            if check is not None and sound:  # the table's completeness check (its plug-in's Table.check)
                check.load()(df, table, config, path, problems, run_id)
            rows = 0 if df is None else len(df)
            files_read.append({"file": str(path), "run_id": run_id, "table": table, "rows": rows, "ok": sound})
            run_files.append(str(path))
            if df is None or df.empty:
                continue
            df = df.copy()
            df["source_file"] = str(path)
            if "run_id" not in df.columns or df["run_id"].isna().all():
                df["run_id"] = run_id
            frames[table].append(df)
            if "threads" in df.columns and "backend" in df.columns and registry.TABLES[table].reports_threads:
                for b, t in df.groupby("backend")["threads"]:
                    vals = sorted({int(x) for x in t.dropna()})
                    if vals:
                        threads[b] = "/".join(map(str, vals))
        check_sample_files(run_dir, config, problems, run_id)
        complete = len(problems.items) == n_before
        threads_text = ", ".join(f"{b}: {t}" for b, t in sorted(threads.items()))
        row = run_row(run_info, devices, str(run_dir), threads_text)
        row["complete"] = complete
        frames["runs"].append(pd.DataFrame([row]))
        runs_manifest.append(
            {
                "run_id": run_id,
                "run_dir": str(run_dir),
                "files": run_files,
                "complete": complete,
                "config_hash": run_info.get("config_hash"),
                "git_commit": run_info.get("git_commit"),
            }
        )

    focus_ids = [m["run_id"] for m in runs_manifest if m["run_id"]]
    try:
        frames[registry.HISTORY_TABLE] = [history_store.history_rows(store, focus_ids)] if store else []
    except history_store.HistoryInputError as exc:  # a damaged store: the runs are still reported, without history
        problems.warn(Path(store), "history_unreadable", str(exc))
    tables = {}
    for table in TABLES:
        spec = registry.TABLES[table]
        base = list(spec.columns) + (["source_file"] if spec.file else [])
        parts = [f for f in frames[table] if not f.empty]
        df = pd.concat(parts, ignore_index=True, sort=False) if parts else pd.DataFrame(columns=base)
        extra = [c for c in df.columns if c not in base]
        tables[table] = df.reindex(columns=base + extra)

    manifest = {
        "complete": not problems.items,
        "generated_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "accelbench_version": __version__,
        "results_dir": str(results),
        "runs": runs_manifest,
        "files_read": files_read,
        "problems": problems.items,
        "warnings": problems.warnings,
        "tables": {t: {"file": f"{t}.csv", "rows": int(len(df))} for t, df in tables.items()},
        "focus": {
            "runs": focus_ids,
            "of": len(all_dirs),
            "history_store": str(store) if store else None,
            "history_runs": int(tables[registry.HISTORY_TABLE]["run_id"].nunique()),
        },
    }
    return tables, manifest


def write(tables: dict, manifest: dict, out_dir: Path) -> None:
    out_dir = Path(out_dir)
    for table, df in tables.items():
        atomic_write_csv(out_dir / f"{table}.csv", df)
    atomic_write_json(out_dir / registry.MANIFEST, manifest)  # last: its presence means the tables are there


def add_arguments(p) -> None:
    p.add_argument("--results", default="results", help="folder holding one folder per run (default: results)")
    p.add_argument("--out-dir", default=None, help="where the tables and manifest.json go (default: RESULTS/aggregate)")
    p.add_argument(
        "--focus",
        type=int,
        default=DEFAULT_FOCUS,
        help=f"how many of the latest runs the report shows in full (default {DEFAULT_FOCUS}; 0: all); "
        "the others appear only as history, from the store",
    )
    p.add_argument(
        "--runs",
        nargs="+",
        default=None,
        metavar="RUN",
        help="the runs in focus, by run id or folder name (instead of the latest --focus)",
    )
    p.add_argument(
        "--store",
        default=None,
        help=f"the history store (default: RESULTS/{registry.HISTORY_FILE}; the history table is empty without one)",
    )
    p.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="exit 0 even when files are missing or corrupt (the manifest and report still say so)",
    )


def cli(args) -> int:
    results = Path(args.results)
    out_dir = Path(args.out_dir) if args.out_dir else results / registry.AGGREGATE_DIR
    if args.focus < 0:
        raise ConfigError(f"--focus: {args.focus} is negative; allowed: 0 (every run) or a count of runs")
    store = Path(args.store) if args.store else results / registry.HISTORY_FILE
    tables, manifest = aggregate(results, out_dir, store=store, focus=args.focus, runs=args.runs)
    manifest["allow_incomplete"] = bool(args.allow_incomplete)
    write(tables, manifest, out_dir)
    n_runs = len(manifest["runs"])
    print(
        f"accelbench aggregate: {n_runs} run(s) in focus of {manifest['focus']['of']}, "
        f"{len(manifest['files_read'])} file(s), {manifest['focus']['history_runs']} run(s) in the history -> "
        f"{out_dir}"
    )
    for w in manifest["warnings"]:
        print(f"accelbench aggregate: warning: {w['file']}: {w['message']}", file=sys.stderr)
    if manifest["complete"]:
        return 0
    for p in manifest["problems"]:
        print(f"accelbench aggregate: {p['file']}: {p['message']}", file=sys.stderr)
    if args.allow_incomplete:
        print(
            f"accelbench aggregate: {len(manifest['problems'])} problem(s); continuing (--allow-incomplete): "
            "the report will carry a warning",
            file=sys.stderr,
        )
        return 0
    print(
        f"accelbench aggregate: {len(manifest['problems'])} problem(s): data incomplete; fix or remove the files "
        "named above, or pass --allow-incomplete to report what is there",
        file=sys.stderr,
    )
    return 1
