"""The history store: one DuckDB file (``results/history.duckdb``, ``registry.HISTORY_FILE``) holding every
finished run's run median per measured point, its series over runs, and their change points.

``accelbench history`` (``reporting.history``) adds runs and prints the series; this module opens, writes and
reads the store and finds change points, and imports nothing of the reporting besides the registry's names
(``accelbench aggregate`` reads the ``history`` table from it). See ``reporting.history`` for what a point, a
testbed and a series are, and docs/history.md for why DuckDB.
"""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import json
import math
import time
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from .. import registry
from ..columns import COMPARABLE
from ..measure import samples as sample_table
from ..measure.power import MIN_EFFECT

DEFAULT_MIN_EFFECT = MIN_EFFECT  # accelbench compare's noise floor (measure.power says how it was chosen)
MIN_SEGMENT = 2  # runs per segment: one run alone is an outlier, not a level
MIN_SPREAD_RUNS = 3
EXACT_TAIL = 100  # the latest runs of a series searched run by run
COARSE_POINTS = 100  # the grid an older stretch is searched on
LOCK_TIMEOUT_S = 120.0
SERIES_KEY = ("host", "device_name", "config_hash", "tbl", "backend", "device", "point")
TESTBED_FIELDS = (
    "host",
    "device_name",
    "container_image",
    "torch_version",
    "cuda_version",
    "hip_version",
    "python_version",
    "accelbench_version",
    "config_hash",
)
RUN_COLUMNS = (
    "run_id",
    "run_dir",
    "timestamp_utc",
    "host",
    "config_hash",
    "container_image",
    "torch_version",
    "cuda_version",
    "hip_version",
    "python_version",
    "accelbench_version",
    "git_commit",
    "added_utc",
)
POINT_COLUMNS = (
    "run_id",
    "testbed",
    *TESTBED_FIELDS,
    "tbl",
    "backend",
    "device",
    "point",
    "label",
    "status",
    "median_s",
    "lower_is_better",
    "method_version",
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, run_dir VARCHAR, timestamp_utc VARCHAR, host VARCHAR, config_hash VARCHAR,
    container_image VARCHAR, torch_version VARCHAR, cuda_version VARCHAR, hip_version VARCHAR,
    python_version VARCHAR, accelbench_version VARCHAR, git_commit VARCHAR, added_utc VARCHAR);
CREATE TABLE IF NOT EXISTS points (
    run_id VARCHAR NOT NULL, testbed VARCHAR, host VARCHAR, device_name VARCHAR, container_image VARCHAR,
    torch_version VARCHAR, cuda_version VARCHAR, hip_version VARCHAR, python_version VARCHAR,
    accelbench_version VARCHAR, config_hash VARCHAR, tbl VARCHAR NOT NULL, backend VARCHAR NOT NULL,
    device VARCHAR NOT NULL, point VARCHAR NOT NULL, label VARCHAR, status VARCHAR, median_s DOUBLE,
    lower_is_better BOOLEAN, method_version INTEGER,
    PRIMARY KEY (run_id, tbl, backend, device, point));
"""


class HistoryInputError(Exception):
    """Unusable input: str() is one line naming the problem (exit 2, nothing written)."""


def default_store(results: str | Path = registry.RESULTS) -> Path:
    return Path(results) / registry.HISTORY_FILE


# ---------------------------------------------------------------------------------------------------------
# Opening the store: one writer at a time (a lock file), readers retry while a writer holds it
# ---------------------------------------------------------------------------------------------------------


def _connect(store: Path, read_only: bool, timeout_s: float = LOCK_TIMEOUT_S):
    """A DuckDB connection; retried while another process holds the file (DuckDB allows one writer process)."""
    deadline = time.monotonic() + timeout_s
    delay = 0.02
    while True:
        try:
            return duckdb.connect(str(store), read_only=read_only)
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


@contextmanager
def _writer(store: Path, timeout_s: float = LOCK_TIMEOUT_S):
    """The store open for writing, under an exclusive lock on ``<store>.lock`` (writers queue there)."""
    store = Path(store)
    store.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{store}.lock", "a+") as lock:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise HistoryInputError(
                        f"{store}: another process has held the store's lock for over {timeout_s:.0f} s"
                    ) from None
                time.sleep(0.05)
        try:
            con = _connect(store, read_only=False, timeout_s=timeout_s)
            try:
                con.execute(SCHEMA)
                yield con
            finally:
                con.close()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def reader(store: str | Path):
    """The store open read-only; HistoryInputError (one line) when it is missing or not a DuckDB file."""
    store = Path(store)
    if not store.is_file():
        raise HistoryInputError(f"{store}: no history store (a finished run adds itself: accelbench history add RUN)")
    deadline = time.monotonic() + 2.0  # a store being created: its first writer adds the tables at once
    while True:
        try:
            con = _connect(store, read_only=True)
        except duckdb.Error as exc:
            raise HistoryInputError(f"{store}: not a readable history store ({str(exc).splitlines()[0]})") from None
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if {"runs", "points"} <= tables:
            break
        con.close()
        if time.monotonic() > deadline:
            raise HistoryInputError(f"{store}: not a history store (no runs/points tables)")
        time.sleep(0.1)
    try:
        yield con
    finally:
        con.close()


def testbed_id(fields: Mapping) -> str:
    """A short hash of the testbed (host, device model, image, versions, config hash)."""
    text = json.dumps({k: str(fields.get(k) or "") for k in TESTBED_FIELDS}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# ---------------------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------------------


def _insert_points(con, points: pd.DataFrame) -> None:
    con.register("new_points", points)
    try:
        con.execute(
            f"INSERT INTO points ({', '.join(POINT_COLUMNS)}) SELECT {', '.join(POINT_COLUMNS)} FROM new_points"
        )
    finally:
        con.unregister("new_points")


def _write_one(con, record: tuple[dict, pd.DataFrame]) -> bool:
    run, points = record
    if con.execute("SELECT 1 FROM runs WHERE run_id = ?", [run["run_id"]]).fetchone():
        return False
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(
            f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join('?' * len(RUN_COLUMNS))})",
            [run[c] for c in RUN_COLUMNS],
        )
        if len(points):
            _insert_points(con, points)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return True


def add_records(store: str | Path, records: Iterable[tuple[dict, pd.DataFrame]]) -> list[bool]:
    """Add runs' (row, points) to the store, each in its own transaction, under one lock; per run, False when
    its run id was already there (nothing written for it)."""
    with _writer(Path(store)) as con:
        return [_write_one(con, rec) for rec in records]


def add_record(store: str | Path, record: tuple[dict, pd.DataFrame]) -> bool:
    """Add one run's (row, points) to the store, in one transaction; False when its run id is already there."""
    return add_records(store, [record])[0]


def has_run(store: str | Path, run_id: str) -> bool:
    if not Path(store).is_file():
        return False
    with reader(store) as con:
        return con.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchone() is not None


# ---------------------------------------------------------------------------------------------------------
# Reading and change points
# ---------------------------------------------------------------------------------------------------------


def read_points(
    store: str | Path, table: str | None = None, match: str | None = None, host: str | None = None
) -> pd.DataFrame:
    """Every stored point of every run (with the run's time), in series then time order; filtered by table,
    a substring of the point's label and host."""
    where, args = [], []
    if table:
        where.append("p.tbl = ?")
        args.append(table)
    if match:
        where.append("strpos(lower(p.label), lower(?)) > 0")
        args.append(match)
    if host:
        where.append("p.host = ?")
        args.append(host)
    sql = (
        "SELECT p.*, r.timestamp_utc, r.git_commit FROM points p JOIN runs r USING (run_id)"
        + (f" WHERE {' AND '.join(where)}" if where else "")
        + f" ORDER BY {', '.join('p.' + k for k in SERIES_KEY)}, r.timestamp_utc, p.run_id"
    )
    with reader(store) as con:
        return con.execute(sql, args).df()


def read_runs(store: str | Path) -> pd.DataFrame:
    with reader(store) as con:
        return con.execute("SELECT * FROM runs ORDER BY timestamp_utc, run_id").df()


def _noise(y: np.ndarray) -> float:
    """The series' run-to-run sd, robust to its steps: the MAD of successive differences over sqrt(2)."""
    if len(y) < 3:
        return 0.0
    d = np.diff(y)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


class _CumsumL2:
    """ruptures' ``l2`` cost (the squared deviations from the segment's mean) from cumulative sums: O(1) per
    segment instead of ruptures' O(length) ``CostL2.error`` (the same numbers; a ruptures ``BaseCost``)."""

    model = "l2_cumsum"
    min_size = 1

    def fit(self, signal):
        self.signal = np.asarray(signal, float).reshape(len(signal), -1)
        y = self.signal[:, 0]  # one series (the log run medians)
        self.s1 = [0.0, *np.cumsum(y).tolist()]  # Python floats: this is called ~n times per run, in a loop
        self.s2 = [0.0, *np.cumsum(y * y).tolist()]
        return self

    def error(self, start, end):
        s1 = self.s1[end] - self.s1[start]
        return self.s2[end] - self.s2[start] - s1 * s1 / (end - start)


def _pelt(y: np.ndarray, penalty: float, jump: int = 1) -> list[int]:
    import ruptures as rpt  # lazy: only a series long enough to hold a change needs it
    from ruptures.base import BaseCost  # lazy, as ruptures above

    cost = type("CumsumL2", (_CumsumL2, BaseCost), {})()
    algo = rpt.Pelt(custom_cost=cost, min_size=max(MIN_SEGMENT, jump), jump=jump).fit(y.reshape(-1, 1))
    return [int(e) for e in algo.predict(pen=penalty)[:-1]]


def _refine(y: np.ndarray, cp: int, lo: int, hi: int, width: int) -> int:
    """The exact best split (least squared error) near a coarse change point, within (lo, hi)."""
    best, best_cost = cp, math.inf
    for c in range(max(lo + MIN_SEGMENT, cp - width), min(hi - MIN_SEGMENT, cp + width) + 1):
        a, b = y[lo:c], y[c:hi]
        cost = float(((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum())
        if cost < best_cost:
            best, best_cost = c, cost
    return best


def change_points(log_medians: Iterable[float], min_effect: float = DEFAULT_MIN_EFFECT) -> list[int]:
    """Indices of the runs that start a new level (each a change point), from ruptures' PELT on the log run
    medians; a step smaller than ``min_effect`` (as a ratio of the segments' medians) is merged away.

    The last ``EXACT_TAIL`` runs are searched run by run (where ``--check`` looks); an older stretch of a long
    series on a grid of every ``ceil(n / COARSE_POINTS)`` runs, each change point then refined to the exact run
    (PELT in ruptures is pure Python: run by run, 1,000 runs take seconds per point)."""
    y = np.asarray(list(log_medians), float)
    n = len(y)
    if n < 2 * MIN_SEGMENT:
        return []
    sigma = max(_noise(y), 0.25 * math.log1p(min_effect) / 3, 1e-4)  # a perfectly flat series still has a floor
    penalty = 3.0 * sigma**2 * math.log(n)
    if n <= EXACT_TAIL + COARSE_POINTS:
        cps = _pelt(y, penalty)
    else:
        jump = math.ceil(n / COARSE_POINTS)
        coarse = _pelt(y, penalty, jump)
        start = n - EXACT_TAIL
        tail = [start + c for c in _pelt(y[start:], penalty)]
        bounds = [0, *coarse, n]
        old = [_refine(y, c, bounds[i], bounds[i + 2], jump) for i, c in enumerate(coarse) if c < start - jump]
        cps = sorted({*old, *tail})
    threshold = math.log1p(min_effect)
    while cps:  # merge the smallest step below min_effect (or a segment too short), then look again
        bounds = [0, *cps, n]
        steps = [
            abs(np.median(y[bounds[i + 1] : bounds[i + 2]]) - np.median(y[bounds[i] : bounds[i + 1]]))
            if bounds[i + 2] - bounds[i + 1] >= MIN_SEGMENT and bounds[i + 1] - bounds[i] >= MIN_SEGMENT
            else 0.0
            for i in range(len(cps))
        ]
        i = int(np.argmin(steps))
        if steps[i] >= threshold:
            break
        cps.pop(i)
    return cps


@dataclass
class Series:
    key: tuple
    label: str
    lower_is_better: bool
    runs: pd.DataFrame  # one row per run, in time order (the usable ones: trusted status, a time)
    cps: list[int]

    @property
    def segments(self) -> list[tuple[int, int]]:
        bounds = [0, *self.cps, len(self.runs)]
        return list(itertools.pairwise(bounds))

    def level(self, seg: tuple[int, int]) -> float:
        return float(np.median(self.runs["median_s"].to_numpy(float)[seg[0] : seg[1]]))

    def latest_step(self) -> float | None:
        """The last change point's time ratio (after over before, > 1: slower for a time), None without one."""
        if not self.cps:
            return None
        segs = self.segments
        return self.level(segs[-1]) / self.level(segs[-2])

    def verdict(self, min_effect: float) -> str:
        ratio = self.latest_step()
        if ratio is None:
            return "same"
        slower = ratio > 1 + min_effect if self.lower_is_better else ratio < 1 / (1 + min_effect)
        faster = ratio < 1 / (1 + min_effect) if self.lower_is_better else ratio > 1 + min_effect
        return "slower" if slower else "faster" if faster else "same"

    def changes_at(self, index: int) -> str:
        """What differs between the run that starts a segment and the one before it (image, versions, commit)."""
        if index <= 0:
            return ""
        a, b = self.runs.iloc[index - 1], self.runs.iloc[index]
        out = []
        for col, name in (
            ("container_image", "image"),
            ("torch_version", "torch"),
            ("cuda_version", "CUDA"),
            ("hip_version", "HIP"),
            ("accelbench_version", "accelbench"),
            ("git_commit", "commit"),
            ("method_version", "method_version"),
        ):
            if str(a.get(col, "")) != str(b.get(col, "")):
                out.append(f"{name} {str(a.get(col, ''))[:12] or '-'}->{str(b.get(col, ''))[:12] or '-'}")
        return ", ".join(out)


def series_of(points: pd.DataFrame, min_effect: float = DEFAULT_MIN_EFFECT) -> list[Series]:
    """Each series' usable runs (trusted status and a time) and change points."""
    out = []
    if points.empty:
        return out
    usable = points[points["status"].isin(COMPARABLE) & points["median_s"].notna() & (points["median_s"] > 0)]
    for key, g in usable.groupby(list(SERIES_KEY), sort=False):
        g = g.sort_values(["timestamp_utc", "run_id"]).reset_index(drop=True)
        cps = change_points(np.log(g["median_s"].to_numpy(float)), min_effect)
        out.append(Series(key, str(g["label"].iloc[-1]), bool(g["lower_is_better"].iloc[-1]), g, cps))
    return out


def measured_spread(
    store: str | Path,
    testbed: Mapping,
    point: Mapping,
    exclude: Iterable[str] = (),
    min_effect: float = DEFAULT_MIN_EFFECT,
):
    """The between-run sd of a point's log run medians on a testbed, from history: ``(sigma_log, n_runs,
    source)`` over the runs since the series' last change point, or None (no store, fewer than 3 runs).

    ``testbed``: a mapping with ``host`` and ``config_hash`` (and ``device_name``, else the point's); ``point``:
    a mapping with ``table``, ``backend``, ``device`` and ``point`` (``measure.samples.point_key``), as a row of
    ``accelbench compare``'s points; ``exclude``: run ids to leave out (the runs being compared)."""
    if not Path(store).is_file():
        return None
    device_name = _text(testbed.get("device_name") or point.get("device_name"))
    key = (
        str(testbed.get("host") or ""),
        device_name,
        str(testbed.get("config_hash") or ""),
        str(point.get("table") or point.get("tbl")),
        _text(point.get("backend")),
        _text(point.get("device")),
        str(point.get("point")),
    )
    sql = (
        "SELECT p.run_id, p.status, p.median_s, p.label, p.lower_is_better, r.timestamp_utc FROM points p "
        "JOIN runs r USING (run_id) WHERE "
        + " AND ".join(f"p.{k} = ?" for k in SERIES_KEY)
        + " ORDER BY r.timestamp_utc, p.run_id"
    )
    try:
        with reader(store) as con:
            rows = con.execute(sql, list(key)).df()
    except HistoryInputError:
        return None
    rows = rows[~rows["run_id"].isin(set(exclude)) & rows["status"].isin(COMPARABLE) & (rows["median_s"] > 0)]
    if len(rows) < MIN_SPREAD_RUNS:
        return None
    y = np.log(rows["median_s"].to_numpy(float))
    cps = change_points(y, min_effect)
    since = cps[-1] if cps else 0
    tail = y[since:]
    if len(tail) < MIN_SPREAD_RUNS:
        return None
    ids = rows["run_id"].iloc[since:]
    source = (
        f"history {Path(store).name}: {len(tail)} runs on {key[0] or '?'} ({device_name or key[5]}) "
        f"{ids.iloc[0]}..{ids.iloc[-1]}" + (" since a change point" if cps else "")
    )
    return float(np.std(tail, ddof=1)), len(tail), source


def history_rows(
    store: str | Path | None,
    focus_runs: Iterable[str] = (),
    min_effect: float = DEFAULT_MIN_EFFECT,
    max_runs: int | None = None,
) -> pd.DataFrame:
    """The aggregated ``history`` table (``registry`` core table): every usable run of every series, with its
    segment, whether it starts one (a change point) and the step there; empty without a store."""
    cols = list(registry.TABLES[registry.HISTORY_TABLE].columns)
    if store is None or not Path(store).is_file():
        return pd.DataFrame(columns=cols)
    focus = set(focus_runs)
    parts = []
    for s in series_of(read_points(store), min_effect):
        n = len(s.runs)
        segs = s.segments
        levels = np.array([s.level(seg) for seg in segs])
        index = np.arange(n)
        seg_of = np.searchsorted(np.array(s.cps, dtype=int), index, side="right")
        is_cp = np.isin(index, s.cps)
        step = np.full(n, np.nan)
        changes = np.full(n, "", dtype=object)
        for k, cp in enumerate(s.cps, start=1):
            step[cp] = 100 * (levels[k] / levels[k - 1] - 1)
            changes[cp] = s.changes_at(cp)
        run_ids = s.runs["run_id"].astype(str).to_numpy()
        part = pd.DataFrame(
            {
                "series": "|".join(map(str, s.key)),
                "label": s.label,
                "table": s.key[3],
                "host": s.key[0],
                "device_name": s.key[1],
                "config_hash": s.key[2],
                "backend": s.key[4],
                "device": s.key[5],
                "point": s.key[6],
                "run_index": index,
                "run_id": run_ids,
                "timestamp_utc": s.runs["timestamp_utc"].astype(str).to_numpy(),
                "median_s": s.runs["median_s"].to_numpy(float),
                "segment": seg_of,
                "segment_median_s": levels[seg_of],
                "change_point": is_cp,
                "step_pct": step,
                "changes": changes,
                "verdict": s.verdict(min_effect),
                "lower_is_better": s.lower_is_better,
                "in_focus": np.isin(run_ids, list(focus)),
            }
        )
        parts.append(part if max_runs is None else part.iloc[max(0, n - max_runs) :])
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


def _text(value) -> str:
    return sample_table.canonical(value)
