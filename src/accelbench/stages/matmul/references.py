"""Published reference figures (``accelbench/data/references.yaml``) and what a run's numbers are against them.

Each entry is the best public figure for a known device and dtype, with its source (URL, commit or date) and
the conditions it was measured under. ``reference_lines`` takes a run's matmul rows, finds per device and
dtype its best trustworthy point (``tables.best_tflops``) and the reference for that device model, and says
e.g. "cuda:0 NVIDIA H100 80GB HBM3: 781 TFLOP/s BF16 = 98% of the best published (mamf-finder, searched
shape; here square n=8192)", naming every condition that differs (how the shape was chosen, the statistic,
the torch build, environment variables such as TunableOp, power notes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

import pandas as pd
import yaml

from ...reporting import tables as S

PATH = "references.yaml"
# what an unset environment variable means to torch, for comparing with a reference's setting
ENV_DEFAULTS = {"PYTORCH_TUNABLEOP_ENABLED": "0"}
STATISTIC_HERE = "median"  # accelbench: median of timed blocks


@dataclass(frozen=True)
class Reference:
    device: str
    match: str
    dtype: str
    tflops: float
    source: dict
    conditions: dict = field(default_factory=dict)

    def matches(self, device_name: str) -> bool:
        return bool(re.search(self.match, str(device_name or ""), flags=re.IGNORECASE))


class ReferenceError(ValueError):
    """references.yaml breaks its own rules (an entry without a source or conditions)."""


def parse(data: dict) -> list[Reference]:
    """Entries of a references document; ReferenceError naming the entry when a source or condition is missing."""
    sources = data.get("sources") or {}
    out = []
    for i, entry in enumerate(data.get("matmul") or []):
        where = f"references.yaml matmul[{i}] ({entry.get('device')} {entry.get('dtype')})"
        src = sources.get(entry.get("source"))
        if not src or not src.get("url") or not (src.get("commit") or src.get("date")):
            raise ReferenceError(f"{where}: source {entry.get('source')!r} needs a url and a commit or date")
        if not entry.get("conditions") or not src.get("conditions"):
            raise ReferenceError(f"{where}: no conditions")
        if not (isinstance(entry.get("tflops"), (int, float)) and entry["tflops"] > 0):
            raise ReferenceError(f"{where}: tflops must be a positive number")
        out.append(
            Reference(
                device=str(entry["device"]),
                match=str(entry["match"]),
                dtype=str(entry["dtype"]),
                tflops=float(entry["tflops"]),
                source=dict(src),
                conditions={**src.get("conditions", {}), **entry["conditions"]},
            )
        )
    return out


@lru_cache(maxsize=1)
def load() -> tuple[Reference, ...]:
    """The shipped references."""
    text = resources.files("accelbench").joinpath("data", PATH).read_text(encoding="utf-8")
    return tuple(parse(yaml.safe_load(text)))


def find(device_name: str, dtype: str, refs=None) -> Reference | None:
    """The best published figure for this device model and dtype, or None."""
    found = [r for r in (load() if refs is None else refs) if r.dtype == dtype and r.matches(device_name)]
    return max(found, key=lambda r: r.tflops) if found else None


def differences(ref: Reference, *, n: int, torch_version: str, env: dict) -> list[str]:
    """The conditions of ``ref`` that differ from this measurement, in words."""
    c = ref.conditions
    out = []
    if c.get("statistic") and c["statistic"] != STATISTIC_HERE:
        out.append(f"statistic: {c['statistic']} of iterations there, {STATISTIC_HERE} of timed blocks here")
    if c.get("torch") and torch_version and c["torch"] != torch_version:
        out.append(f"torch {c['torch']} there, {torch_version} here")
    for var, want in (c.get("env") or {}).items():
        have = (env or {}).get(var) or ENV_DEFAULTS.get(var, "")
        if str(have) != str(want):
            out.append(f"{var}={want} there, {have or 'unset'} here")
    if c.get("note"):
        out.append(str(c["note"]))
    return out


def reference_lines(matmul: pd.DataFrame, *, torch_version: str = "", env: dict | None = None, refs=None) -> list[dict]:
    """Per (run, device, dtype) with a reference: the best trustworthy point against it, as a dict with ``text``
    (one sentence), ``pct``, ``flags`` (differing conditions) and the numbers."""
    best = S.best_tflops(matmul)
    out = []
    for _, r in best.iterrows():
        ref = find(r["device_name"], r["dtype"], refs)
        if ref is None:
            continue
        tflops, n = float(r["tflops"]), int(r["n"])
        pct = 100.0 * tflops / ref.tflops
        shape = "searched shape" if ref.conditions.get("shape") == "searched" else "its shape"
        flags = differences(ref, n=n, torch_version=torch_version, env=env or {})
        best_shape = ref.conditions.get("best_shape")
        text = (
            f"{r['device']} {r['device_name']}: {S.fmt_num(tflops) if tflops < 100 else f'{tflops:.0f}'} TFLOP/s {S.DTYPE_LABEL.get(r['dtype'], r['dtype'])} "
            f"= {pct:.0f}% of the best published ({ref.source['name']} {ref.device}, {ref.tflops:g} TFLOP/s, "
            f"{shape}{f' {best_shape}' if best_shape else ''}; here square n={n})"
        )
        if flags:
            text += "; differs: " + "; ".join(flags)
        out.append(
            {
                "run_id": str(r["run_id"]),
                "device": str(r["device"]),
                "device_name": str(r["device_name"]),
                "dtype": r["dtype"],
                "tflops": tflops,
                "n": n,
                "reference_tflops": ref.tflops,
                "pct": pct,
                "reference_device": ref.device,
                "source": ref.source["name"],
                "url": ref.source["url"],
                "commit": ref.source.get("commit", ""),
                "date": ref.source.get("date", ""),
                "flags": flags,
                "text": text,
            }
        )
    return out


def run_lines(run) -> list[str]:
    """``accelbench compare --against references`` (``Stage.references``): one line per device and dtype of the run
    (``reporting.compare.Run``) that has a published figure, each starting ``references:``; a single line naming
    the run and its device models when none has one."""
    matmul = run.tables.get("matmul", pd.DataFrame())
    env = run.devices.get("env") or {}
    lines = reference_lines(matmul, torch_version=str(run.devices.get("torch_version") or ""), env=env)
    if not lines:
        models = sorted(set(matmul.get("device_name", pd.Series(dtype=str)).dropna().astype(str)))
        return [
            f"references: no published figure for a device and dtype of run {run.run_id} "
            f"({', '.join(models) or 'no matmul'})"
        ]
    return [f"references: {line['text']}" for line in lines]
