"""File I/O at the edges: atomic writes and per-point checkpoints.

A sweep may be killed at any moment (SIGKILL, a SLURM time limit, a laptop lid). Every file
is therefore written to a temporary name in the same folder and renamed into place: a reader
sees the old file or the new one, never half of one. Completed sweep points are appended to a
checkpoint (one JSON object per line, flushed and fsynced per point); a rerun reads it back
and measures only what is missing.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_file(path: str | Path, mode: str):
    """A file open for writing under a temporary name beside ``path``, renamed onto ``path`` once the block
    has written and synced it: a reader sees the old file or the whole new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; results are meant to be shared
        with os.fdopen(fd, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_file(path, "w") as fh:
        fh.write(text)


def atomic_write_json(path: str | Path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def atomic_write_csv(path: str | Path, rows: Iterable[dict] | pd.DataFrame, columns: list[str] | None = None) -> None:
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows), columns=columns)
    if columns is not None:
        df = df.reindex(columns=columns)
    atomic_write_text(path, df.to_csv(index=False))


def atomic_write_parquet(path: str | Path, df: pd.DataFrame) -> None:
    """``df`` as a Parquet file (pyarrow, zstd), written to a temporary name and renamed into place."""
    with atomic_file(path, "wb") as fh:
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), fh, compression="zstd")


def read_parquet(path: str | Path) -> pd.DataFrame:
    """A Parquet file as a DataFrame; pyarrow's error (ArrowInvalid, OSError) when it is truncated or not Parquet."""
    return pq.read_table(path).to_pandas()


class Checkpoint:
    """Completed points of one sweep, keyed by a tuple of their identifying fields.

    Stored as JSON lines; a last line cut short by a kill is ignored (it was not complete) and
    cut off the file, so the next point appended starts on a line of its own.
    """

    def __init__(self, path: str | Path, key_fields: tuple[str, ...]):
        self.path = Path(path)
        self.key_fields = key_fields
        self.rows: dict[tuple, dict] = {}
        if self.path.exists():
            data = self.path.read_bytes()
            complete = data[: data.rfind(b"\n") + 1]  # up to the last newline; b"" if there is none
            if len(complete) < len(data):
                with open(self.path, "r+b") as fh:  # drop the partial last line of a killed run
                    fh.truncate(len(complete))
                    fh.flush()
                    os.fsync(fh.fileno())
            for line in complete.decode("utf-8", errors="replace").splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line damaged some other way: that point is measured again
                if not isinstance(row, dict) or any(k not in row for k in key_fields):
                    continue
                self.rows[self.key(row)] = row

    def key(self, row: dict) -> tuple:
        return tuple(str(row[k]) for k in self.key_fields)

    def __contains__(self, key: tuple) -> bool:
        return tuple(str(k) for k in key) in self.rows

    def add(self, row: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as fh:
            fh.write(json.dumps(row, default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.rows[self.key(row)] = row
