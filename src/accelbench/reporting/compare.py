"""``accelbench compare``: did it get slower, and why? Two groups of runs, the run as the unit of replication.

``accelbench compare --baseline A[,B,...] --candidate C[,D,...]`` (or ``accelbench compare BASELINE CANDIDATE``, one
run a side): each entry is a run folder (holding ``run.json``), a run id under ``--results``, or a label (every run
under ``--results`` whose ``run.json`` has that ``label``). Every measured point of the candidate runs (matmul,
transfer, warm-up, AMP trials) is matched with the baseline's point of the same identity: its table, backend,
device, device model and ``registry.POINT_IDENTITY`` (dtype, n, TF32 flag; direction, memory, size; workload, mode,
seed). Points without a partner are listed per side.

**Per matched point**, each run is one number: its median time (the table's ``Compare.median`` column, which is
what the history store keeps too; the median of the run's steady samples where that column is empty). The
inference is on the log run medians (``measure.runstats``, whose doc has the method and its references): the
candidate/baseline time ratio (of geometric means) with a 95% Welch t interval, which covers the variance
**between runs** (a fresh process each), not the timed blocks inside one (they are autocorrelated and share the
process's start-up state: treating them as replicates gave 63% false verdicts between runs of one config, issue
21). ``slower``/``faster``: the change is significant and larger than ``--min-effect``; ``same``: shown to lie within
+-``--min-effect`` by two one-sided tests (TOST); ``inconclusive`` otherwise, or when a side has no trustworthy run
(``unstable``, ``invalid``, ``wrong_result``, not measured). With one run a side the runs carry no between-run
spread: the verdict is ``inconclusive`` ("1 run per side") unless the history store (``results/history.duckdb``)
holds this point's measured spread on this testbed (``spread_source`` ``history``, named in the reason).

Next to each verdict the provenance that differs for that point (method_version, threads, device model, driver,
torch/CUDA/HIP, image, commit, the stage's config keys; the first run of each side), e.g. ``slower -12% [-14, -10];
threads 2->1``; the whole provenance diff is its own table. Beside the points, each stage's own comparison of the
first runs (``registry.COMPARE_EXTRAS``, ``plugin.CompareExtra``: the AMP stage's speedups over FP32 and accuracy
differences, and how they changed, with paired-by-seed t intervals), one file each, ``..._<key>.csv``.

Output: a compact table on stdout, regressions first; ``<results>/compare/<baseline>__<candidate>.csv``
(``registry.COMPARE_COLUMNS``; a group of several runs is named ``<first run>+<more>``, ``group_name``), the stages'
``..._<key>.csv``, ``..._provenance.csv`` and a figure of the ratios (``.png``, ``.svg``). Exit 0 when no point is
slower, 1 when any is, 2 on bad input (a missing run, a corrupt or truncated CSV or sample file, an empty group, a
group that mixes device models or configs without ``--allow-mixed``, no matched point): one line naming the run or
file, nothing written.

``--against references`` adds (or, with one run, gives only) how the run compares with the published figures the
stages ship (``Stage.references``, ``registry.REFERENCES``: the matmul stage's best throughput against
``accelbench/data/references.yaml``).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import registry
from ..columns import COMPARABLE
from ..measure import ratio as R
from ..measure import runstats as RS
from ..measure import samples as sample_table
from ..measure.power import MIN_EFFECT
from ..run.config import run_config
from ..run.io import atomic_write_csv, read_parquet
from .aggregate import Problems, read_checked_csv

# The default noise floor: docs/comparing.md says how it was chosen from bench/run_to_run_spread.py.
DEFAULT_MIN_EFFECT = MIN_EFFECT  # the noise floor (measure.power says how it was chosen)
COMPARED_TABLES = registry.COMPARED_TABLES  # every table that declares what compare matches (Table.compare)
TRUSTED = COMPARABLE  # any other status makes the verdict inconclusive (unstable: by the definition)
# regressions first; matched points that neither run measured (unsupported, skipped_budget) last
VERDICT_ORDER = {"slower": 0, "inconclusive": 1, "faster": 2, "same": 3, "unmeasured": 4}
# per-point provenance, in the order it is named: (row column, label)
POINT_FIELDS = (
    ("method_version", "method_version"),
    ("threads", "threads"),
    ("device_name", "device"),
    ("torch_version", "torch"),
    ("cuda_version", "CUDA"),
    ("hip_version", "HIP"),
    ("container_image", "image"),
    ("git_commit", "accelbench"),
)
# config keys that choose which points exist or how they are judged, not how they are timed: not named per point
NOT_TIMING_KEYS = {
    "sizes",
    "dtypes",
    "seeds",
    "workloads",
    "sizes_mb",
    "point_budget_s",
    "peak_tflops",
    "rel_error_max",
    "accuracy_tolerance",
    "unstable_iqr_ratio",
    "tf32",
    "fp8",
}
MAX_POINT_NOTES = 4
MAX_PRINTED = 40


class CompareInputError(Exception):
    """Bad input: str() is one line naming the run or file. Exit 2, nothing written."""


# ---------------------------------------------------------------------------------------------------------
# Reading a run (the only I/O besides the outputs)
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Run:
    run_id: str
    path: Path
    info: dict
    devices: dict
    tables: dict = field(default_factory=dict)  # table name -> DataFrame (every backend's file)
    samples: pd.DataFrame = field(default_factory=sample_table.empty)

    @property
    def config(self) -> dict:
        return self.info.get("config") or {}


def resolve_run(arg: str, results: Path) -> Path:
    """A run folder given directly, or ``results/<arg>``; CompareInputError naming both when neither has run.json."""
    for candidate in (Path(arg), Path(results) / arg):
        if (candidate / registry.RUN_FILE).is_file():
            return candidate
    raise CompareInputError(
        f"{arg}: no such run (neither {arg}/{registry.RUN_FILE} nor {Path(results) / arg / registry.RUN_FILE} exists)"
    )


def _json(path: Path) -> dict:
    try:
        obj = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CompareInputError(f"{path}: not a readable JSON file ({str(exc).splitlines()[0]})") from None
    if not isinstance(obj, dict):
        raise CompareInputError(f"{path}: expected a JSON object")
    return obj


def load_run(path: Path) -> Run:
    """Read and check every file a comparison needs; the first problem is raised, naming its file."""
    path = Path(path)
    info = _json(path / registry.RUN_FILE)
    run_id = str(info.get("run") or path.name)
    devices = _json(path / registry.DEVICES_FILE) if (path / registry.DEVICES_FILE).is_file() else {}
    backends = (info.get("config") or {}).get("backends") or []
    run = Run(run_id, path, info, devices)
    frames: dict[str, list] = {}
    for name in registry.run_files(backends):
        file = path / name
        if not file.is_file():
            raise CompareInputError(f"{file}: missing (run {run_id} lists backend(s) {', '.join(backends)})")
        problems = Problems()
        df, sound = read_checked_csv(file, registry.table_of(name), problems, run_id)
        if problems.items or df is None:
            raise CompareInputError(f"{file}: {problems.items[0]['message'] if problems.items else 'unreadable'}")
        frames.setdefault(registry.table_of(name), []).append(df)
    run.tables = {t: pd.concat(f, ignore_index=True) for t, f in frames.items()}
    parts = []
    for name in registry.sample_files(backends):
        file = path / name
        if not file.is_file():
            raise CompareInputError(
                f"{file}: missing sample file (a run made before accelbench kept raw samples "
                "cannot be compared with intervals; rerun it)"
            )
        try:
            df = read_parquet(file)
        except Exception as exc:  # pyarrow's ArrowInvalid/OSError for a truncated or foreign file
            raise CompareInputError(f"{file}: corrupt or truncated sample file ({str(exc).splitlines()[0]})") from None
        problem = sample_table.check(df)
        if problem:
            raise CompareInputError(f"{file}: {problem}")
        parts.append(df)
    run.samples = pd.concat(parts, ignore_index=True) if parts else sample_table.empty()
    _check_sample_counts(run)
    return run


def _check_sample_counts(run: Run) -> None:
    """A row that says it timed K blocks must have K samples: fewer means the sample file was cut or swapped."""
    counts = run.samples.groupby(["table", "backend", "device", "point"]).size() if len(run.samples) else {}
    for table in COMPARED_TABLES:  # the tables whose rows say how many timed blocks (samples) they have
        df = run.tables.get(table)
        if df is None or "blocks" not in df.columns:
            continue
        for _, row in df.iterrows():
            blocks = pd.to_numeric(pd.Series([row.get("blocks")]), errors="coerce").iloc[0]
            if not (blocks == blocks and blocks > 0) or not isinstance(row.get("device"), str):
                continue
            key = (table, str(row["backend"]), str(row["device"]), sample_table.point_key(table, row))
            have = int(counts.get(key, 0)) if len(run.samples) else 0
            if have != int(blocks):
                file = run.path / registry.SAMPLES[registry.TABLES[table].stage].filename(str(row["backend"]))
                raise CompareInputError(
                    f"{file}: {have} sample(s) for {table} {row['device']} {key[3]}, whose row "
                    f"says {int(blocks)} blocks (truncated or from another run)"
                )


def runs_with_label(label: str, results: Path) -> list[Path]:
    """The run folders under ``results`` whose run.json has ``"label": label`` (sorted by folder name)."""
    out = []
    for file in sorted(Path(results).glob(f"*/{registry.RUN_FILE}")):
        try:
            info = json.loads(file.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue  # a damaged run is named when it is named itself, not while looking for labels
        if isinstance(info, dict) and str(info.get("label") or "") == label:
            out.append(file.parent)
    return out


def resolve_group(spec: str, results: Path, flag: str) -> list[Path]:
    """``A,B,...``: each a run folder, a run id under ``results`` or a label (every run labelled so); one line
    naming the problem (an empty group or entry, no such run, a run given twice) otherwise."""
    entries = [e.strip() for e in str(spec).split(",")]
    if not spec or not spec.strip() or not any(entries):
        raise CompareInputError(
            f"{flag}: empty group; allowed: one or more run ids, run folders or labels, comma-separated"
        )
    if not all(entries):
        raise CompareInputError(
            f"{flag}: {spec!r} has an empty entry; allowed: run ids, run folders or labels, comma-separated"
        )
    paths: list[Path] = []
    for entry in entries:
        try:
            found = [resolve_run(entry, results)]
        except CompareInputError:
            found = runs_with_label(entry, results)
            if not found:
                raise
        paths += found
    seen: dict[str, Path] = {}
    for path in paths:
        key = str(path.resolve())
        if key in seen:
            raise CompareInputError(f"{flag}: run {path.name} is given twice")
        seen[key] = path
    return paths


@dataclass
class Group:
    """The runs of one side (baseline or candidate), each read and checked (``load_run``)."""

    runs: list[Run]

    @property
    def ids(self) -> list[str]:
        return [r.run_id for r in self.runs]

    @property
    def name(self) -> str:
        return group_name(self.ids)

    @property
    def first(self) -> Run:
        return self.runs[0]


def group_name(run_ids) -> str:
    """How a group is named in file names and headlines: its run id for one run, ``<first>+<more>`` otherwise."""
    run_ids = list(run_ids)
    return run_ids[0] if len(run_ids) == 1 else f"{run_ids[0]}+{len(run_ids) - 1}"


def timing_config_diff(a: Run, b: Run) -> list[tuple[str, str, str]]:
    """The config keys that differ between two runs and change how points are timed (the run id, and the keys
    that only choose which points exist or how they are judged, ``NOT_TIMING_KEYS``, aside). The config hash
    is not used: it also covers those keys."""
    return [(k, x, y) for k, x, y in config_diff(a.config, b.config) if k.split(".")[-1] not in NOT_TIMING_KEYS]


def device_models(points: pd.DataFrame) -> dict:
    """(backend, device) -> the device model(s) a run's points name there (``a / b`` if its tables disagree)."""
    if points.empty:
        return {}
    models: dict[tuple, set] = {}
    for _, r in points.iterrows():
        models.setdefault((str(r["backend"]), str(r["device"])), set()).add(str(r["device_name"]))
    return {k: " / ".join(sorted(v)) for k, v in models.items()}


def check_group(group: Group, points: list[pd.DataFrame], flag: str) -> None:
    """One line naming the first pair of runs that measured different device models or a different config."""
    first, first_models = group.first, device_models(points[0])
    for run, pts in zip(group.runs[1:], points[1:]):
        models = device_models(pts)
        for key in sorted(set(first_models) & set(models)):
            if first_models[key] != models[key]:
                raise CompareInputError(
                    f"{flag}: runs {first.run_id} and {run.run_id} mix device models on {key[0]} {key[1]} "
                    f"({first_models[key] or 'none'} vs {models[key] or 'none'}); allowed with --allow-mixed"
                )
        diff = timing_config_diff(first, run)
        if diff:
            key, x, y = diff[0]
            more = f" and {len(diff) - 1} more key(s)" if len(diff) > 1 else ""
            raise CompareInputError(
                f"{flag}: runs {first.run_id} and {run.run_id} mix configs ({key} {x} vs {y}"
                f"{more}); allowed with --allow-mixed"
            )


# ---------------------------------------------------------------------------------------------------------
# Points (pure: DataFrames in, DataFrames out)
# ---------------------------------------------------------------------------------------------------------


def _str(value) -> str:
    return sample_table.canonical(value)


def run_points(run: Run) -> pd.DataFrame:
    """One row per measured point of every compared table: identity, status, median, the provenance columns a
    point can differ in, and its steady samples (an array)."""
    steady = run.samples[run.samples["steady"]] if len(run.samples) else run.samples
    grouped = (
        {
            k: g.sort_values("sample")["sample_s"].to_numpy(float)
            for k, g in steady.groupby(["table", "backend", "device", "point"])
        }
        if len(steady)
        else {}
    )
    rows = []
    for table in COMPARED_TABLES:
        df = run.tables.get(table)
        if df is None or df.empty:
            continue
        df = df[df["device"].notna() & (df["device"].astype(str) != "")]
        spec = registry.TABLES[table].compare
        if spec.last_of:  # one point per device: its last row (the warm-up's warm per-call time)
            df = df.sort_values(spec.last_of).groupby(["backend", "device"], sort=False, as_index=False).tail(1)
        median_col = spec.median
        for _, r in df.iterrows():
            point = sample_table.point_key(table, r)
            key = (table, str(r["backend"]), str(r["device"]), point)
            entry = {
                "table": table,
                "backend": str(r["backend"]),
                "device": str(r["device"]),
                "device_name": str(r.get("device_name", "") if r.get("device_name") == r.get("device_name") else ""),
                "point": point,
                "status": str(r.get("status", "")),
                "median_s": pd.to_numeric(pd.Series([r.get(median_col)]), errors="coerce").iloc[0],
                "samples": grouped.get(key, np.array([])),
            }
            for col in sample_table.identity_columns(table):
                entry[col] = r.get(col)
            for col, _ in POINT_FIELDS:
                if col not in entry:
                    entry[col] = _str(r.get(col)) if col in r.index else ""
            # rows written before method_version existed mean 0 (registry.ADDED_COLUMNS)
            entry["method_version"] = entry["method_version"] or str(registry.ADDED_COLUMNS["method_version"])
            entry.update(spec.fixed)  # what the stage always has (the transfer stage times with one host thread)
            rows.append(entry)
    return pd.DataFrame(rows)


def match_key(row, any_device_model: bool) -> tuple:
    model = () if any_device_model else (_str(row.get("device_name")),)
    return (row["table"], row["backend"], row["device"], *model, sample_table.point_key(row["table"], row))


def match_points(base: pd.DataFrame, cand: pd.DataFrame, any_device_model: bool = False):
    """(pairs [(baseline row, candidate row)], baseline-only rows, candidate-only rows), in the candidate's order."""
    b_index = {match_key(r, any_device_model): r for _, r in base.iterrows()} if not base.empty else {}
    c_index = {match_key(r, any_device_model): r for _, r in cand.iterrows()} if not cand.empty else {}
    pairs = [(b_index[k], c) for k, c in c_index.items() if k in b_index]
    only_b = [r for k, r in b_index.items() if k not in c_index]
    only_c = [r for k, r in c_index.items() if k not in b_index]
    return pairs, only_b, only_c


def point_label(row) -> str:
    """``matmul cpu float32 n=1024``: stage, device, then the identity values (flags by name when set)."""
    parts = [registry.TABLES[row["table"]].stage, str(row["device"])]
    for col, value in sample_table.identity_items(row["table"], row):
        if value == "true":
            parts.append(col)
        elif value in ("false", ""):
            continue
        elif isinstance(row.get(col), str) and not value.replace(".", "").isdigit():
            parts.append(value)
        else:
            parts.append(f"{col}={value}")
    return " ".join(parts)


# spread_of(point row, baseline run, candidate run, run ids to leave out) -> (sd of log run medians, runs, where)
# or None: a between-run spread measured elsewhere for a 1-vs-1 comparison (the CLI's is the history store's,
# ``history.spread_lookup``); compare knows nothing of where it comes from.
SpreadLookup = Callable[[dict, "Run", "Run", list], "tuple[float, int, str] | None"]


def run_median(row) -> float:
    """A run's time at a point: the table's median column, else the median of its steady samples (NaN: none)."""
    value = pd.to_numeric(pd.Series([row.get("median_s")]), errors="coerce").iloc[0]
    if value == value and value > 0:
        return float(value)
    samples = row.get("samples")
    return float(np.median(samples)) if samples is not None and len(samples) else math.nan


def _usable(rows: list) -> tuple[list, list[str]]:
    """The rows (one per run) whose run median enters the statistics, and why the others do not."""
    keep, why = [], []
    for row in rows:
        if row["status"] not in TRUSTED:
            why.append(row["status"] or "not measured")
        elif math.isnan(run_median(row)):
            why.append("no median")
        else:
            keep.append(row)
    return keep, why


def _side_reason(side: str, n_all: int, why: list[str]) -> str:
    if not why:
        return ""
    if n_all == 1:
        return f"{side} {why[0]}"
    counts = ", ".join(f"{why.count(w)} {w}" for w in dict.fromkeys(why))
    return f"{side}: {len(why)} of {n_all} runs left out ({counts})"


def judge(bs, cs, min_effect: float, spread_of: SpreadLookup | None = None, exclude=()) -> dict:
    """Ratio, interval and verdict of one matched point from each side's rows (``run_points``, one per run that
    has the point; a single row is taken as a one-run side), with the reason when inconclusive. For
    ``spread_of`` each row carries its Run as ``_run``; ``exclude``: the run ids history must leave out."""
    bs = [bs] if isinstance(bs, (dict, pd.Series)) else list(bs)
    cs = [cs] if isinstance(cs, (dict, pd.Series)) else list(cs)
    n_samples = (sum(len(r["samples"]) for r in bs), sum(len(r["samples"]) for r in cs))
    medians = ([run_median(r) for r in bs], [run_median(r) for r in cs])
    out = {
        "n_samples": n_samples,
        "n_runs": (0, 0),
        "median_s": tuple(float(np.median(m)) if len(m) else math.nan for m in medians),
    }
    if not any(len(r["samples"]) for r in bs + cs) and not any(m == m for m in medians[0] + medians[1]):
        statuses = "/".join(dict.fromkeys(r["status"] for r in bs + cs if r["status"])) or "no status"
        return {
            **out,
            "stats": _no_stats(),
            "verdict": "inconclusive",
            "reason": f"measured in neither run ({statuses})",
            "order": VERDICT_ORDER["unmeasured"],
        }
    (b_ok, b_why), (c_ok, c_why) = _usable(bs), _usable(cs)
    reasons = [r for r in (_side_reason("baseline", len(bs), b_why), _side_reason("candidate", len(cs), c_why)) if r]
    b_log = [math.log(run_median(r)) for r in b_ok]
    c_log = [math.log(run_median(r)) for r in c_ok]
    out["n_runs"] = (len(b_log), len(c_log))
    if b_ok:
        out["median_s"] = (float(np.median([run_median(r) for r in b_ok])), out["median_s"][1])
    if c_ok:
        out["median_s"] = (out["median_s"][0], float(np.median([run_median(r) for r in c_ok])))
    if not b_log or not c_log:
        return {
            **out,
            "stats": _no_stats(),
            "verdict": "inconclusive",
            "reason": "; ".join(reasons),
            "order": VERDICT_ORDER["inconclusive"],
        }
    history = None
    b_run, c_run = b_ok[0].get("_run"), c_ok[0].get("_run")
    if len(b_log) == 1 and len(c_log) == 1 and spread_of is not None and b_run is not None and c_run is not None:
        history = spread_of(b_ok[0], b_run, c_run, list(exclude) or [b_run.run_id, c_run.run_id])
    stats = RS.compare_groups(
        b_log,
        c_log,
        min_effect,
        spread_log_sd=history[0] if history else None,
        spread_df=(history[1] - 1) if history else None,
    )
    stats["spread_source"] = {"given": "history"}.get(stats["spread_source"], stats["spread_source"])
    word = stats["verdict"]  # from the runs that remain when some were left out (named in the reason)
    if stats["reason"]:
        reasons.append(stats["reason"])
    if history and stats["spread_source"] == "history":
        reasons.append(f"between-run sd {100 * history[0]:.1f}% from {history[2]}")
    return {**out, "stats": stats, "verdict": word, "reason": "; ".join(reasons), "order": VERDICT_ORDER[word]}


def _no_stats() -> dict:
    return {
        "verdict": "inconclusive",
        "ratio": math.nan,
        "ci95_low": math.nan,
        "ci95_high": math.nan,
        "spread_log_sd": math.nan,
        "spread_source": "none",
        "t_df": math.nan,
        "p_value": math.nan,
        "tost_p": math.nan,
        "reason": "",
    }


def _config_flat(config: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in (config or {}).items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_config_flat(v, key + "."))
        else:
            out[key] = json.dumps(v, sort_keys=True) if isinstance(v, (list, tuple)) else _str(v)
    return out


def _short(field_name: str, value: str) -> str:
    if field_name in ("git_commit", "accelbench") and len(value) > 12:
        return value[:7] + ("+dirty" if value.endswith("+dirty") else "")
    if field_name in ("container_image", "image") and len(value) > 24:
        return value.rsplit("/", 1)[-1][:24]
    return value or "none"


def config_diff(base: dict, cand: dict) -> list[tuple[str, str, str]]:
    """(key, baseline value, candidate value) for every config key that differs (the run id aside)."""
    a, b = _config_flat(run_config(base)), _config_flat(run_config(cand))
    return [
        (k, a.get(k, ""), b.get(k, "")) for k in sorted(set(a) | set(b)) if k != "run" and a.get(k, "") != b.get(k, "")
    ]


def point_notes(b, c, base_run: Run, cand_run: Run, cfg_diff: list) -> str:
    """What differs for this point: its provenance columns, its backend's driver, the stage's timing config."""
    notes = []
    for col, label in POINT_FIELDS:
        x, y = _str(b.get(col)), _str(c.get(col))
        if x != y:
            notes.append(f"{label} {_short(col, x)}\u2192{_short(col, y)}")
    drv = [
        _str(((r.devices.get("backends") or {}).get(b["backend"]) or {}).get("driver_version"))
        for r in (base_run, cand_run)
    ]
    if drv[0] != drv[1]:
        notes.append(f"driver {drv[0] or 'none'}\u2192{drv[1] or 'none'}")
    section = registry.TABLES[b["table"]].stage
    for key, x, y in cfg_diff:
        head, _, leaf = key.partition(".")
        if head == section and leaf.split(".")[-1] not in NOT_TIMING_KEYS:
            notes.append(f"{key} {x}\u2192{y}")
    if len(notes) > MAX_POINT_NOTES:
        notes = notes[:MAX_POINT_NOTES] + [f"+{len(notes) - MAX_POINT_NOTES} more"]
    return "; ".join(notes)


def provenance_diff(base_run: Run, cand_run: Run, base_pts: pd.DataFrame, cand_pts: pd.DataFrame) -> pd.DataFrame:
    """Every provenance field that differs: scope (run, a backend, a stage on a backend, config), field, both values."""
    rows = []

    def add(scope, name, x, y):
        x, y = _str(x), _str(y)
        if x != y:
            rows.append({"scope": scope, "field": name, "baseline": x, "candidate": y})

    bi, ci = base_run.info, cand_run.info
    bd, cd = base_run.devices, cand_run.devices
    add("run", "accelbench commit", bi.get("git_commit"), ci.get("git_commit"))
    add("run", "accelbench version", bi.get("accelbench_version"), ci.get("accelbench_version"))
    cfg_rows = config_diff(base_run.config, cand_run.config)
    if cfg_rows:  # the run id is part of the config: its hash alone would differ between any two runs
        add("run", "config hash", bi.get("config_hash"), ci.get("config_hash"))
    for key, label in (
        ("host", "host"),
        ("python_version", "Python"),
        ("torch_version", "torch"),
        ("cuda_version", "CUDA"),
        ("hip_version", "HIP"),
        ("container_image", "container image"),
    ):
        add("run", label, bd.get(key), cd.get(key))
    add("run", "CPU model", (bd.get("cpu") or {}).get("model_name"), (cd.get("cpu") or {}).get("model_name"))
    for pkg in sorted(set(bd.get("packages") or {}) | set(cd.get("packages") or {})):
        add("run", f"package {pkg}", (bd.get("packages") or {}).get(pkg), (cd.get("packages") or {}).get(pkg))
    for var in sorted(set(bd.get("env") or {}) | set(cd.get("env") or {})):
        add("run", f"env {var}", (bd.get("env") or {}).get(var), (cd.get("env") or {}).get(var))
    for backend in sorted(set(bd.get("backends") or {}) | set(cd.get("backends") or {})):
        x, y = (bd.get("backends") or {}).get(backend) or {}, (cd.get("backends") or {}).get(backend) or {}
        add(backend, "present", x.get("present"), y.get("present"))
        for key in ("driver_version", "runtime_version"):
            add(backend, key.replace("_", " "), x.get(key), y.get(key))
        add(
            backend,
            "device models",
            ", ".join(sorted(str(d.get("name", "")) for d in x.get("devices") or [])),
            ", ".join(sorted(str(d.get("name", "")) for d in y.get("devices") or [])),
        )
    for table in COMPARED_TABLES:
        stage = registry.TABLES[table].stage
        for backend in sorted(set(base_pts.get("backend", [])) | set(cand_pts.get("backend", []))):
            for col in ("method_version", "threads", "container_image"):
                vals = []
                for pts in (base_pts, cand_pts):
                    sel = pts[(pts["table"] == table) & (pts["backend"] == backend)] if not pts.empty else pts
                    vals.append("/".join(sorted({_str(v) for v in sel[col]})) if len(sel) else "")
                if vals[0] and vals[1]:
                    add(f"{stage} {backend}", col.replace("_", " ") if col != "method_version" else col, *vals)
    for key, x, y in cfg_rows:
        rows.append({"scope": "config", "field": key, "baseline": x, "candidate": y})
    return pd.DataFrame(rows, columns=["scope", "field", "baseline", "candidate"])


@dataclass
class Comparison:
    baseline: str
    candidate: str
    min_effect: float
    points: pd.DataFrame  # registry.COMPARE_COLUMNS + identity columns, regressions first
    extras: dict  # each stage's own comparison (registry.COMPARE_EXTRAS), by its key -> DataFrame
    provenance: pd.DataFrame
    labels: dict  # point row index -> label
    runs: tuple = ((), ())  # the run ids of each side

    @property
    def group_sizes(self) -> tuple[int, int]:
        return len(self.runs[0]) or 1, len(self.runs[1]) or 1

    @property
    def counts(self) -> dict:
        matched = self.points[self.points["match"] == "both"]
        out = {v: int((matched["verdict"] == v).sum()) for v in registry.COMPARE_VERDICTS}
        out["baseline_only"] = int((self.points["match"] == "baseline_only").sum())
        out["candidate_only"] = int((self.points["match"] == "candidate_only").sum())
        out["matched"] = int(len(matched))
        return out

    @property
    def exit_code(self) -> int:
        return 1 if self.counts["slower"] else 0


def identity_union() -> list[str]:
    out = []
    for table in COMPARED_TABLES:
        out += [c for c in sample_table.identity_columns(table) if c not in out]
    return out


def compare_runs(
    base_run: Run,
    cand_run: Run,
    min_effect: float = DEFAULT_MIN_EFFECT,
    any_device_model: bool = False,
    spread_of: SpreadLookup | None = None,
) -> Comparison:
    """One run against one: ``compare_groups`` with a group of one a side."""
    return compare_groups(Group([base_run]), Group([cand_run]), min_effect, any_device_model, spread_of=spread_of)


def group_points(group: Group, points: list[pd.DataFrame], any_device_model: bool) -> dict:
    """match key -> [(run, point row), ...] over the group's runs, in first-seen order."""
    out: dict[tuple, list] = {}
    for run, pts in zip(group.runs, points):
        for _, row in pts.iterrows():
            out.setdefault(match_key(row, any_device_model), []).append((run, row))
    return out


def compare_groups(
    base: Group,
    cand: Group,
    min_effect: float = DEFAULT_MIN_EFFECT,
    any_device_model: bool = False,
    allow_mixed: bool = False,
    spread_of: SpreadLookup | None = None,
) -> Comparison:
    """Match, judge and explain every point (pure apart from the runs already read, and ``spread_of``).
    CompareInputError for a group that mixes device models or configs (unless ``allow_mixed``) or when no point
    matches."""
    if not base.runs or not cand.runs:
        raise CompareInputError(f"{'--baseline' if not base.runs else '--candidate'}: empty group")
    base_each = [run_points(r) for r in base.runs]
    cand_each = [run_points(r) for r in cand.runs]
    if not allow_mixed:
        check_group(base, base_each, "--baseline")
        check_group(cand, cand_each, "--candidate")
    base_run, cand_run = base.first, cand.first  # provenance is named from the first run of each side
    b_index = group_points(base, base_each, any_device_model)
    c_index = group_points(cand, cand_each, any_device_model)
    pairs = [(b_index[k], c) for k, c in c_index.items() if k in b_index]
    only_b = [r for k, r in b_index.items() if k not in c_index]
    only_c = [r for k, r in c_index.items() if k not in b_index]
    if not pairs:
        raise CompareInputError(
            f"{base_run.path}: no point of run {base_run.run_id} matches one of run {cand_run.run_id} "
            f"(matched by table, backend, device{'' if any_device_model else ', device model'} and "
            f"{', '.join(identity_union())}; {len(b_index)} vs {len(c_index)} points)"
        )
    cfg_diff = config_diff(base_run.config, cand_run.config)
    ident = identity_union()
    names = (",".join(base.ids), ",".join(cand.ids))
    rows = []
    for bl, cl in pairs:
        b, c = bl[0][1], cl[0][1]
        j = judge(
            [_with_run(r, run) for run, r in bl],
            [_with_run(r, run) for run, r in cl],
            min_effect,
            spread_of,
            exclude=[*base.ids, *cand.ids],
        )
        st = j["stats"]
        est = R.RatioEstimate(st["ratio"], st["ci95_low"], st["ci95_high"], *j["n_samples"])
        low_pct, high_pct = (100 * v for v in est.speed_change_interval)
        rows.append(
            {
                **_common(names, c, ident),
                "match": "both",
                "baseline_status": _statuses(bl),
                "candidate_status": _statuses(cl),
                "baseline_median_s": j["median_s"][0],
                "candidate_median_s": j["median_s"][1],
                "baseline_samples": est.n_baseline,
                "candidate_samples": est.n_candidate,
                "time_ratio": est.ratio,
                "time_ratio_ci95_low": est.low,
                "time_ratio_ci95_high": est.high,
                "speed_change_pct": 100 * est.speed_change,
                "speed_change_ci95_low_pct": low_pct,
                "speed_change_ci95_high_pct": high_pct,
                "min_effect_pct": 100 * min_effect,
                "verdict": j["verdict"],
                "reason": j["reason"],
                "provenance_diff": point_notes(b, c, bl[0][0], cl[0][0], cfg_diff),
                "method": RS.METHOD,
                "baseline_runs": j["n_runs"][0],
                "candidate_runs": j["n_runs"][1],
                "spread_log_sd": st["spread_log_sd"],
                "spread_source": st["spread_source"],
                "t_df": st["t_df"],
                "p_value": st["p_value"],
                "tost_p": st["tost_p"],
                "_label": point_label(c),
                "_order": j["order"],
            }
        )
    for side, unmatched, run_row_of in (("baseline_only", only_b, "baseline"), ("candidate_only", only_c, "candidate")):
        for lst in unmatched:
            r = lst[0][1]
            rows.append(
                {
                    **_common(names, r, ident),
                    "match": side,
                    f"{run_row_of}_status": _statuses(lst),
                    f"{run_row_of}_median_s": float(np.median([run_median(x) for _, x in lst])),
                    f"{run_row_of}_samples": sum(len(x["samples"]) for _, x in lst),
                    f"{run_row_of}_runs": len(lst),
                    "min_effect_pct": 100 * min_effect,
                    "verdict": "",
                    "reason": f"only in the {run_row_of}",
                    "method": RS.METHOD,
                    "spread_source": "none",
                    "_label": point_label(r),
                    "_order": 9,
                }
            )
    df = pd.DataFrame(rows)
    df = df.sort_values(["_order", "speed_change_pct"], kind="stable", na_position="last").reset_index(drop=True)
    df["label"] = df.pop("_label")
    labels = dict(enumerate(df["label"]))
    df = df.drop(columns="_order").reindex(columns=[*registry.COMPARE_COLUMNS, *ident])
    for col in [*ident, "baseline_runs", "candidate_runs"]:  # whole numbers stay whole next to empty cells
        values = pd.to_numeric(df[col], errors="coerce")
        if df[col].notna().any() and values.notna().sum() == df[col].notna().sum() and (values.dropna() % 1 == 0).all():
            df[col] = values.astype("Int64")
    return Comparison(
        base.name,
        cand.name,
        min_effect,
        df,
        {x.key: x.build.load()(base_run, cand_run, any_device_model) for x in registry.COMPARE_EXTRAS},
        provenance_diff(base_run, cand_run, base_each[0], cand_each[0]),
        labels,
        runs=(base.ids, cand.ids),
    )


def _with_run(row: pd.Series, run: Run) -> pd.Series:
    row = row.copy()
    row["_run"] = run
    return row


def _statuses(lst) -> str:
    """The statuses of a point's runs on one side: one word when they agree, ``ok/unstable`` otherwise."""
    return "/".join(dict.fromkeys(str(r["status"]) for _, r in lst))


def _common(names: tuple[str, str], row, ident: list[str]) -> dict:
    out = {
        "baseline_run": names[0],
        "candidate_run": names[1],
        "table": row["table"],
        "backend": row["backend"],
        "device": row["device"],
        "device_name": row["device_name"],
        "point": row["point"],
    }
    for col in ident:
        out[col] = row.get(col) if col in sample_table.identity_columns(row["table"]) else None
    return out


# ---------------------------------------------------------------------------------------------------------
# Words
# ---------------------------------------------------------------------------------------------------------


def verdict_text(row) -> str:
    """``slower −12% [−14, −10]; threads 2→1`` for a matched point (a CSV row of the points table)."""
    est = R.RatioEstimate(
        row["time_ratio"],
        row["time_ratio_ci95_low"],
        row["time_ratio_ci95_high"],
        int(row["baseline_samples"] or 0),
        int(row["candidate_samples"] or 0),
    )
    text = R.describe(est, row["verdict"])
    named = row["verdict"] == "inconclusive" or row.get("spread_source") == "history"  # a borrowed spread is named
    extra = [p for p in (row.get("provenance_diff"), row.get("reason") if named else "") if isinstance(p, str) and p]
    return "; ".join([text, *extra])


def headline(cmp: Comparison) -> str:
    """One sentence: how many matched points are slower, the same, faster, inconclusive; the worst regression and
    why; what is unmatched."""
    n = cmp.counts
    pts = cmp.points
    parts = [
        f"{n['slower']} of {n['matched']} matched point{'s' if n['matched'] != 1 else ''} "
        f"{'is' if n['slower'] == 1 else 'are'} slower"
    ]
    slower = pts[pts["verdict"] == "slower"]
    if len(slower):
        worst = slower.index[0]
        parts[-1] += f" (worst: {cmp.labels[worst]}, {verdict_text(pts.loc[worst])})"
    parts.append(f"{n['same']} the same, {n['faster']} faster, {n['inconclusive']} inconclusive")
    alone = int(pts["reason"].fillna("").astype(str).str.startswith("1 run per side").sum()) if len(pts) else 0
    if alone:
        parts[-1] += (
            f" ({alone} for want of a between-run spread: 1 run per side, and no history of the point; "
            "compare groups of runs)"
        )
    if n["faster"]:
        best = pts[pts["verdict"] == "faster"].sort_values("speed_change_pct", ascending=False).index[0]
        parts[-1] += f" (best: {cmp.labels[best]}, {verdict_text(pts.loc[best])})"
    if n["baseline_only"] or n["candidate_only"]:
        parts.append(
            f"{n['baseline_only']} point(s) only in {cmp.baseline}, {n['candidate_only']} only in {cmp.candidate}"
        )
    nb, nc = cmp.group_sizes
    sizes = f" ({nc} vs {nb} runs)" if max(nb, nc) > 1 else ""
    return (
        f"{cmp.candidate} against {cmp.baseline}{sizes}: "
        + "; ".join(parts)
        + f" (min effect \u00b1{100 * cmp.min_effect:g}%)."
    )


def format_table(cmp: Comparison, limit: int = MAX_PRINTED) -> str:
    """The compact table printed by the CLI: matched points, regressions first, then the unmatched ones."""
    pts = cmp.points
    nb, nc = cmp.group_sizes
    lines = [
        f"accelbench compare: {cmp.baseline} (baseline, {nb} run{'s' if nb != 1 else ''}) \u2192 {cmp.candidate} "
        f"(candidate, {nc} run{'s' if nc != 1 else ''}); ratio of geometric means of run medians, 95% Welch t "
        f"interval over runs, same by TOST; min effect \u00b1{100 * cmp.min_effect:g}%"
    ]
    matched = pts[pts["match"] == "both"]
    neither = matched["reason"].fillna("").str.startswith("measured in neither run")
    matched, unmeasured = matched[~neither], matched[neither]
    width = max([len(cmp.labels[i]) for i in matched.index] + [10])
    for shown, (i, row) in enumerate(matched.iterrows()):
        if shown == limit:
            lines.append(f"  ... {len(matched) - limit} more point(s) in the CSV")
            break
        lines.append(f"  {row['verdict']:<12} {cmp.labels[i]:<{width}}  {verdict_text(row).split(' ', 1)[-1]}")
    if len(unmeasured):
        lines.append(
            f"  inconclusive: {len(unmeasured)} matched point(s) measured in neither run "
            f"({', '.join(sorted(set(unmeasured['candidate_status'].astype(str))))})"
        )
    for side, name in (("baseline_only", cmp.baseline), ("candidate_only", cmp.candidate)):
        only = pts[pts["match"] == side]
        if len(only):
            listed = ", ".join(cmp.labels[i] for i in only.index[:12]) + (" ..." if len(only) > 12 else "")
            lines.append(f"  only in {name} ({len(only)}): {listed}")
    if len(cmp.provenance):
        lines.append(
            "provenance that differs: "
            + "; ".join(
                f"{r.field} ({r.scope}) {_short(r.field, r.baseline)}\u2192{_short(r.field, r.candidate)}"
                for r in cmp.provenance.itertuples()
            )
        )
    for x in registry.COMPARE_EXTRAS:  # each stage's own comparison, its lines
        lines += x.lines.load()(cmp.extras.get(x.key, pd.DataFrame()))
    lines.append(headline(cmp))
    return "\n".join(lines)


def read_comparison(points_path: str | Path) -> Comparison:
    """A comparison written by ``write`` (the points CSV and the stages' own and the provenance CSVs beside it; a
    missing or empty one reads as an empty frame)."""
    points_path = Path(points_path)
    points = pd.read_csv(points_path)
    stem = str(points_path.with_suffix(""))
    extras = {}
    for x in registry.COMPARE_EXTRAS:
        path = Path(registry.compare_extra_file(stem, x.key))
        extras[x.key] = pd.read_csv(path) if path.is_file() and path.stat().st_size else pd.DataFrame()
    prov_path = Path(registry.compare_extra_file(stem, "provenance"))
    prov = (
        pd.read_csv(prov_path, dtype=str, keep_default_na=False)
        if prov_path.is_file() and prov_path.stat().st_size
        else pd.DataFrame(columns=["scope", "field", "baseline", "candidate"])
    )
    first = points.iloc[0] if len(points) else {}
    min_effect = (
        float(first.get("min_effect_pct", 100 * DEFAULT_MIN_EFFECT)) / 100 if len(points) else DEFAULT_MIN_EFFECT
    )
    runs = tuple(
        str(first.get(f"{side}_run", "")).split(",") if len(points) else [] for side in ("baseline", "candidate")
    )
    return Comparison(
        group_name(runs[0]) if runs[0] else "",
        group_name(runs[1]) if runs[1] else "",
        min_effect,
        points,
        extras,
        prov,
        dict(enumerate(points["label"].astype(str))) if len(points) else {},
        runs=runs,
    )


# ---------------------------------------------------------------------------------------------------------
# Writing and the CLI
# ---------------------------------------------------------------------------------------------------------


def write(cmp: Comparison, out_dir: Path, plot: bool = True) -> dict[str, Path]:
    """The points CSV, each stage's own comparison's (``registry.COMPARE_EXTRAS``), the provenance CSV, and the
    figure, under ``out_dir`` (results/compare)."""
    names = registry.compare_files(cmp.baseline, cmp.candidate)
    paths = {k: Path(out_dir) / Path(v).name for k, v in names.items()}
    atomic_write_csv(paths["points"], cmp.points)
    for x in registry.COMPARE_EXTRAS:
        atomic_write_csv(paths[x.key], cmp.extras.get(x.key, pd.DataFrame()))
    atomic_write_csv(paths["provenance"], cmp.provenance)
    if plot:
        from . import plots  # matplotlib only when a figure is drawn: --no-plot skips its import

        plots.write_comparison_figure(
            cmp.points, cmp.baseline, cmp.candidate, cmp.min_effect, paths["png"], paths["svg"]
        )
    return paths


def add_arguments(p) -> None:
    p.add_argument(
        "runs",
        nargs="*",
        metavar="RUN",
        help="BASELINE CANDIDATE: run folders or run ids under --results, one run a side (one RUN with "
        "--against references); or give groups with --baseline and --candidate",
    )
    p.add_argument(
        "--baseline",
        default=None,
        metavar="A[,B,...]",
        help="the baseline group: run ids, run folders or labels (run.json's label), comma-separated",
    )
    p.add_argument("--candidate", default=None, metavar="C[,D,...]", help="the candidate group, as --baseline")
    p.add_argument("--results", default=registry.RESULTS, help="where run ids are looked up (default: results)")
    p.add_argument("--out-dir", default=None, help="where the CSVs and the figure go (default: RESULTS/compare)")
    p.add_argument(
        "--min-effect",
        type=float,
        default=DEFAULT_MIN_EFFECT,
        help=f"speed changes within this fraction count as the same (default {DEFAULT_MIN_EFFECT}: "
        "docs/comparing.md says how it was chosen)",
    )
    p.add_argument(
        "--any-device-model",
        action="store_true",
        help="match points by device index even when the device models differ (compare two partitions); "
        "the model change is then named next to each verdict",
    )
    p.add_argument(
        "--allow-mixed",
        action="store_true",
        help="let a group mix device models or (timing) configs: its spread then includes that mixing",
    )
    p.add_argument(
        "--history",
        default=None,
        metavar="STORE",
        help="the history store whose measured between-run spread a 1-vs-1 comparison may use "
        f"(default: RESULTS/{registry.HISTORY_FILE}; 'none': never)",
    )
    p.add_argument(
        "--against",
        choices=["references"],
        default=None,
        help="also compare the candidate's best matmul throughput with published figures",
    )
    p.add_argument("--no-plot", action="store_true", help="write the CSVs only")
    p.add_argument(
        "--exit-zero",
        action="store_true",
        help="exit 0 even when a point is slower (the workflow's compare step: the report shows it)",
    )


def _reference_report(run: Run) -> list[str]:
    """The run against published figures: every stage's lines that ships them (``registry.REFERENCES``)."""
    return [line for hook in registry.REFERENCES for line in hook.load()(run)]


def cli(args) -> int:
    try:
        return _cli(args)
    except CompareInputError as exc:
        print(f"accelbench compare: {exc}", file=sys.stderr)
        return 2


def _spread_lookup(args, results: Path) -> SpreadLookup | None:
    """The history store's measured spread as compare's hook (None: no store, or ``--history none``)."""
    if args.history == "none":
        return None
    store = Path(args.history) if args.history else results / registry.HISTORY_FILE
    if not store.is_file():
        return None
    from .history import spread_lookup  # duckdb only when a store exists to read

    return spread_lookup(store, args.min_effect)


def _cli(args) -> int:
    results = Path(args.results)
    groups = args.baseline is not None or args.candidate is not None
    if groups and args.runs:
        raise CompareInputError(
            f"RUN: {' '.join(args.runs)} given with --baseline/--candidate; allowed: BASELINE "
            "CANDIDATE, or --baseline A[,B,...] --candidate C[,D,...]"
        )
    if groups and (args.baseline is None or args.candidate is None):
        missing = "--candidate" if args.candidate is None else "--baseline"
        raise CompareInputError(
            f"{missing}: empty group; allowed: one or more run ids, run folders or labels, comma-separated"
        )
    if len(args.runs) > 2:
        raise CompareInputError(
            f"RUN: {len(args.runs)} runs given; allowed: BASELINE CANDIDATE, or one RUN with "
            "--against references, or --baseline A[,B,...] --candidate C[,D,...]"
        )
    if not (args.min_effect >= 0 and math.isfinite(args.min_effect)) or args.min_effect >= 1:
        raise CompareInputError(
            f"--min-effect: {args.min_effect!r} is out of range; allowed: 0 <= x < 1 (a fraction: 0.05 is 5%)"
        )
    if not groups and len(args.runs) < 2:
        if len(args.runs) == 0 or args.against != "references":
            raise CompareInputError(
                f"RUN: {'no run' if not args.runs else 'one run'} given; allowed: BASELINE "
                "CANDIDATE, --baseline A[,B,...] --candidate C[,D,...], or one RUN with "
                "--against references"
            )
        run = load_run(resolve_run(args.runs[0], results))
        print("\n".join(_reference_report(run)))
        return 0
    if groups:
        base_paths = resolve_group(args.baseline, results, "--baseline")
        cand_paths = resolve_group(args.candidate, results, "--candidate")
    else:
        base_paths, cand_paths = ([resolve_run(a, results)] for a in args.runs)
    both = {str(p.resolve()) for p in base_paths} & {str(p.resolve()) for p in cand_paths}
    if both:
        raise CompareInputError(f"--candidate: run {Path(min(both)).name} is in both groups")
    base = Group([load_run(p) for p in base_paths])
    cand = Group([load_run(p) for p in cand_paths])
    cmp = compare_groups(
        base,
        cand,
        args.min_effect,
        args.any_device_model,
        allow_mixed=args.allow_mixed,
        spread_of=_spread_lookup(args, results),
    )
    print(format_table(cmp))
    if args.against == "references":
        print("\n".join(_reference_report(cand.first)))
    out_dir = Path(args.out_dir) if args.out_dir else results / registry.COMPARE_DIR
    paths = write(cmp, out_dir, plot=not args.no_plot)
    print(f"accelbench compare: wrote {paths['points']}", file=sys.stderr)
    return 0 if args.exit_zero else cmp.exit_code
