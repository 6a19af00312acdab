"""``accelbench history``: every finished run in one store, each point's series over runs, and its change points.

The store (``results/history.duckdb`` by default, ``registry.HISTORY_FILE``) is one DuckDB file; docs/history.md
says why DuckDB and not Parquet with a catalog. Two tables:

* ``runs``: one row per ingested run (its id, folder, time, host, config hash, image and versions);
* ``points``: per run and measured point, the run's **median** (the run is the unit of replication, never a
  timed block inside it), its status, and the testbed it was measured on.

A point is what ``accelbench compare`` matches: its table (``registry.TABLES``, the tables that declare
``Compare``), backend, device and the table's declared ``identity`` (``measure.samples.point_key``); its time is
the table's ``Compare.median`` column (one row per device for a ``Compare.last_of`` table). The testbed is the
host, the device model, the container image, the versions (torch, CUDA, HIP, Python, accelbench) and the config
hash; ``testbed`` is a short hash of all of them. A *series* is one point on one host, device model and config
hash, over runs in time order: image and version changes stay inside the series, because a changed torch build is
what history is there to catch (``accelbench history`` names them at each change point).

Writes: ``add_run`` takes an exclusive file lock (``<store>.lock``: two runs finishing at once queue), then
writes a run's rows in one transaction, so a kill -9 in the middle leaves the store as it was (DuckDB's WAL
rolls the open transaction back when the file is next opened). Adding a run already there is a no-op (by run
id). Readers open the file read-only and retry while a writer holds it.

Change points: ruptures' PELT (``model="l2"``) on the log run medians of a series, with a BIC-like penalty
from the series' own noise (the MAD of successive differences); a change of less than ``min_effect`` is
merged away. ``accelbench history --check``: for each series, whether the latest run is past a change point
of more than ``min_effect``: exit 0 when none is slower, 1 when one is, 2 on unusable input (no store, an
empty history, nothing matching the filters), one line naming the problem and nothing written.

``measured_spread(store, testbed, point)`` gives ``accelbench compare`` the between-run spread of a point
from history: the sd of its log run medians since the series' last change point (at least 3 runs).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from .. import registry
from ..measure import samples as sample_table
from ..run.io import atomic_write_json
from .aggregate import Problems, expected_files, read_checked_csv
from .history_store import (
    DEFAULT_MIN_EFFECT,
    MIN_SEGMENT,
    POINT_COLUMNS,
    TESTBED_FIELDS,
    HistoryInputError,
    Series,
    add_record,
    add_records,
    default_store,
    measured_spread,
    read_points,
    reader,
    series_of,
    testbed_id,
)

__all__ = ["HistoryInputError", "add_run", "measured_spread", "run_record", "spread_lookup"]


def spread_lookup(store: str | Path, min_effect: float = DEFAULT_MIN_EFFECT):
    """``accelbench compare``'s hook for a 1-vs-1 comparison: ``(point row, baseline run, candidate run, run ids
    to leave out) -> (sd of log run medians, runs, where) | None``, the point's measured spread on the baseline's
    testbed (host, device model, config hash), else on the candidate's (``measured_spread``)."""

    def lookup(point, base_run, cand_run, exclude):
        for run in (base_run, cand_run):
            testbed = {
                "host": (run.devices or {}).get("host"),
                "config_hash": run.info.get("config_hash"),
                "device_name": point.get("device_name"),
            }
            found = measured_spread(store, testbed, point, exclude=exclude, min_effect=min_effect)
            if found is not None:
                return found
        return None

    return lookup


# ---------------------------------------------------------------------------------------------------------
# A run's points (from its folder; pure but for reading the files)
# ---------------------------------------------------------------------------------------------------------


def _text(value) -> str:
    return sample_table.canonical(value)


def point_label(table: str, row) -> str:
    """``<stage> cpu float32 n=512``: the table's stage, the device, then the identity values."""
    parts = [registry.TABLES[table].stage, _text(row.get("device"))]
    for col, value in sample_table.identity_items(table, row):
        if value == "true":
            parts.append(col)
        elif value in ("false", ""):
            continue
        elif not value.replace(".", "").isdigit():
            parts.append(value)
        else:
            parts.append(f"{col}={value}")
    return " ".join(parts)


def _load_json(path: Path) -> dict:
    try:
        obj = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HistoryInputError(f"{path}: not a readable JSON file ({str(exc).splitlines()[0]})") from None
    if not isinstance(obj, dict):
        raise HistoryInputError(f"{path}: expected a JSON object")
    return obj


def run_record(run_dir: str | Path) -> tuple[dict, pd.DataFrame]:
    """(the run's row, its points) from a run folder; HistoryInputError naming the file when one is missing or
    damaged (a run with a broken file is not history)."""
    run_dir = Path(run_dir)
    if not (run_dir / registry.RUN_FILE).is_file():
        raise HistoryInputError(f"{run_dir}: not a run folder (no {registry.RUN_FILE})")
    info = _load_json(run_dir / registry.RUN_FILE)
    devices = _load_json(run_dir / registry.DEVICES_FILE) if (run_dir / registry.DEVICES_FILE).is_file() else {}
    run_id = str(info.get("run") or run_dir.name)
    config = info.get("config") or {}
    run = {
        "run_id": run_id,
        "run_dir": str(run_dir),
        "timestamp_utc": str(devices.get("timestamp_utc") or ""),
        "host": str(devices.get("host") or ""),
        "config_hash": str(info.get("config_hash") or ""),
        "container_image": str(devices.get("container_image") or ""),
        "torch_version": str(devices.get("torch_version") or ""),
        "cuda_version": str(devices.get("cuda_version") or ""),
        "hip_version": str(devices.get("hip_version") or ""),
        "python_version": str(devices.get("python_version") or ""),
        "accelbench_version": str(info.get("accelbench_version") or devices.get("accelbench_version") or ""),
        "git_commit": str(info.get("git_commit") or devices.get("git_commit") or ""),
        "added_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    frames: dict[str, list] = {}
    for name in expected_files(config):
        file = run_dir / name
        table = registry.table_of(name)
        if registry.TABLES[table].compare is None:
            continue
        if not file.is_file():
            raise HistoryInputError(f"{file}: missing (run {run_id} lists its backend)")
        problems = Problems()
        df, _ = read_checked_csv(file, table, problems, run_id)
        if problems.items or df is None:
            raise HistoryInputError(f"{file}: {problems.items[0]['message'] if problems.items else 'unreadable'}")
        frames.setdefault(table, []).append(df)
    rows = []
    for table, parts in frames.items():
        spec = registry.TABLES[table].compare
        df = pd.concat(parts, ignore_index=True)
        df = df[df["device"].notna() & (df["device"].astype(str) != "")]
        if df.empty:
            continue
        if spec.last_of:  # one point per device: its last row
            df = df.sort_values(spec.last_of).groupby(["backend", "device"], sort=False, as_index=False).tail(1)
        for r in df.to_dict("records"):
            median = pd.to_numeric(pd.Series([r.get(spec.median)]), errors="coerce").iloc[0]
            device_name = _text(r.get("device_name"))
            tb = {**{k: run[k] for k in TESTBED_FIELDS if k in run}, "device_name": device_name}
            rows.append(
                {
                    "run_id": run_id,
                    "testbed": testbed_id(tb),
                    **tb,
                    "tbl": table,
                    "backend": _text(r.get("backend")),
                    "device": _text(r.get("device")),
                    "point": sample_table.point_key(table, r),
                    "label": point_label(table, r),
                    "status": _text(r.get("status")),
                    "median_s": float(median) if pd.notna(median) and median > 0 else None,
                    "lower_is_better": bool(spec.lower_is_better),
                    "method_version": int(pd.to_numeric(r.get("method_version"), errors="coerce") or 0)
                    if _text(r.get("method_version"))
                    else 0,
                }
            )
    points = pd.DataFrame(rows, columns=list(POINT_COLUMNS))
    points = points.drop_duplicates(subset=["tbl", "backend", "device", "point"], keep="last")
    return run, points


def add_run(store: str | Path, run_dir: str | Path) -> bool:
    """Add one run folder to the store (one transaction); False when its run id is already there. HistoryInputError
    (one line) for a missing or damaged run, before anything is written."""
    return add_record(store, run_record(run_dir))


# ---------------------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.4g} us"


def format_series(series: list[Series], full: bool = False, min_effect: float = DEFAULT_MIN_EFFECT) -> str:
    lines = []
    for s in series:
        runs = s.runs
        head = (
            f"{s.label} [{s.key[0] or '?'} {s.key[1] or s.key[5]} config {s.key[2][:8]}]: {len(runs)} run(s), "
            f"latest {_ms(float(runs['median_s'].iloc[-1]))} ({runs['run_id'].iloc[-1]})"
        )
        verdict = s.verdict(min_effect)
        if s.cps:
            head += f"; latest level vs the one before: {100 * (s.latest_step() - 1):+.1f}% ({verdict})"
        lines.append(head)
        if not s.cps and not full:
            continue
        for si, (a, b) in enumerate(s.segments):
            step = ""
            if si:
                step = f"  <- change point {100 * (s.level((a, b)) / s.level(s.segments[si - 1]) - 1):+.1f}%"
                changed = s.changes_at(a)
                step += f" ({changed})" if changed else ""
            lines.append(
                f"    runs {a + 1}-{b} {runs['run_id'].iloc[a]}..{runs['run_id'].iloc[b - 1]}: "
                f"median {_ms(s.level((a, b)))}{step}"
            )
            if full:
                for i in range(a, b):
                    r = runs.iloc[i]
                    lines.append(
                        f"      {i + 1:>4} {r['run_id']:<24} {r['timestamp_utc']!s:<22} {_ms(float(r['median_s']))}"
                    )
    return "\n".join(lines)


def add_arguments(p) -> None:
    p.add_argument(
        "action",
        nargs="?",
        choices=("show", "add"),
        default="show",
        help="show (default): each point's series and change points; add RUN...: ingest run folders",
    )
    p.add_argument("runs", nargs="*", help="with add: run folders (holding run.json)")
    p.add_argument("--store", default=None, help=f"the history store (default: results/{registry.HISTORY_FILE})")
    p.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when the latest run of a series is past a change point slower by more than "
        "--min-effect, 0 otherwise, 2 on unusable input",
    )
    p.add_argument(
        "--min-effect",
        type=float,
        default=DEFAULT_MIN_EFFECT,
        help=f"the smallest step that counts, as a fraction (default {DEFAULT_MIN_EFFECT})",
    )
    p.add_argument(
        "--recent",
        type=int,
        default=0,
        metavar="K",
        help="with --check: only a change point within a series' last K runs counts (0, the default: any; "
        "a CI gate that should stop failing once a slowdown has been accepted sets it)",
    )
    p.add_argument("--table", default=None, help="only this table's points")
    p.add_argument("--match", default=None, help="only points whose label contains this text")
    p.add_argument("--host", default=None, help="only this host's points")
    p.add_argument("--full", action="store_true", help="print every run of each series, not only its levels")
    p.add_argument(
        "--receipt",
        default=None,
        help="with add: write this JSON file (run ids, points added) when done (the pipeline's rule output)",
    )


def cli(args) -> int:
    try:
        return _cli(args)
    except HistoryInputError as exc:
        print(f"accelbench history: {exc}", file=sys.stderr)
        return 2


def _cli(args) -> int:
    store = Path(args.store) if args.store else default_store()
    if args.recent < 0:
        raise HistoryInputError(
            f"--recent: {args.recent} is negative; allowed: 0 (any change point) or a count of runs"
        )
    if not (0 < args.min_effect < 1):
        raise HistoryInputError(f"--min-effect: {args.min_effect} is not a fraction between 0 and 1 (e.g. 0.05)")
    if args.action == "add":
        if not args.runs:
            raise HistoryInputError("add: name at least one run folder (holding run.json)")
        records = [run_record(r) for r in args.runs]  # every run checked before anything is written
        receipt = []
        for rec, added in zip(records, add_records(store, records)):
            receipt.append({"run_id": rec[0]["run_id"], "added": added, "points": len(rec[1])})
            print(
                f"accelbench history: {rec[0]['run_id']}: "
                f"{f'{len(rec[1])} point(s) added' if added else 'already in the store'} -> {store}"
            )
        if args.receipt:
            atomic_write_json(Path(args.receipt), {"store": str(store), "runs": receipt})
        return 0
    if args.table and args.table not in registry.TABLES:
        allowed = ", ".join(n for n, t in registry.TABLES.items() if t.compare is not None)
        raise HistoryInputError(f"--table: {args.table!r} is not a table; allowed: {allowed}")
    points = read_points(store, args.table, args.match, args.host)
    if points.empty:
        with reader(store) as con:
            n_runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
        what = "no run" if not n_runs else "no point matches the filters"
        raise HistoryInputError(f"{store}: empty history ({what})")
    series = series_of(points, args.min_effect)
    if not series:
        raise HistoryInputError(f"{store}: no trustworthy run median to show (every stored point is flagged)")
    print(format_series(series, full=args.full, min_effect=args.min_effect))
    if not args.check:
        return 0

    def counts(s) -> bool:  # with --recent K, only a change point within the series' last K runs
        return not args.recent or (bool(s.cps) and len(s.runs) - s.cps[-1] <= args.recent)

    slower = [s for s in series if s.verdict(args.min_effect) == "slower" and counts(s)]
    faster = [s for s in series if s.verdict(args.min_effect) == "faster" and counts(s)]
    short = sum(len(s.runs) < 2 * MIN_SEGMENT for s in series)
    print(
        f"accelbench history --check: {len(series)} series; {len(slower)} slower, {len(faster)} faster past "
        f"their last change point (min_effect {100 * args.min_effect:g}%"
        + (f", a change point within the last {args.recent} runs" if args.recent else "")
        + ")"
        + (f"; {short} too short to hold a change point (< {2 * MIN_SEGMENT} runs)" if short else "")
    )
    for s in slower:
        print(f"  slower: {s.label} {100 * (s.latest_step() - 1):+.1f}% since run {s.runs['run_id'].iloc[s.cps[-1]]}")
    return 1 if slower else 0
