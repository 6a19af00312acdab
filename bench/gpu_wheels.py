"""Prepare .gpu-wheels/ for bench/gpu_check.sh: snakemake and jsonschema for the GPU machine.

The device machine cannot fetch packages, and its image (Python 3.12, manylinux x86_64; see the
device tool's KINDS.md) has torch, pandas, seaborn, jinja2, scipy and the like, but not snakemake.
This takes the dependency closure of snakemake and jsonschema *at the versions this checkout's
.venv resolved* (a set known to work together), leaves out what the image already has, and downloads
one wheel per remaining package for the target Python with ``--no-deps`` (a pure-Python package
published only as an sdist is built into a wheel here).

Run here, once, from the repository root, with the venv's Python:

    .venv/bin/python bench/gpu_wheels.py [--python-version 3.12] [--dest .gpu-wheels]

``packaging`` and ``typing-extensions`` are carried although the image has them: snakemake pins
``packaging<26`` and pydantic needs a recent ``typing-extensions``; the carried copies shadow the
image's (newer typing-extensions is backward compatible; torch does not pin packaging).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOTS = ("snakemake", "jsonschema")

# In the device image already (KINDS.md, "Python packages already there"), as far as the closure goes.
DEVICE_HAS = {
    "attrs", "certifi", "charset-normalizer", "idna", "jinja2", "markupsafe", "psutil", "pyyaml",
    "requests", "tabulate", "urllib3", "wrapt", "numpy", "pandas", "six", "python-dateutil", "pygments",
}

PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux_2_5_x86_64", "manylinux1_x86_64")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(roots=ROOTS) -> dict[str, str]:
    """name -> installed version for the roots and everything they require (no extras)."""
    seen: dict[str, str] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if norm(name) in seen:
            continue
        dist = metadata.distribution(name)
        seen[norm(name)] = dist.version
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker and not req.marker.evaluate({"extra": ""}):
                continue
            todo.append(req.name)
    return seen


def fetch(pin: str, dest: Path, python_version: str) -> None:
    base = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(dest)]
    target = ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp"]
    target += [a for p in PLATFORMS for a in ("--platform", p)]
    got = subprocess.run(base + target + [pin], capture_output=True, text=True)
    if got.returncode == 0:
        return
    with tempfile.TemporaryDirectory() as tmp:  # sdist only: build a wheel (pure Python) here
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp, pin], check=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if not wheels or not all(w.name.endswith("-none-any.whl") for w in wheels):
            raise SystemExit(f"gpu_wheels: {pin}: no wheel for Python {python_version} and not pure Python")
        for w in wheels:
            w.rename(dest / w.name)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python-version", default="3.12")
    p.add_argument("--dest", default=".gpu-wheels")
    args = p.parse_args()
    dest = Path(args.dest)
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.whl"):  # one version of each package, or the install stops
        old.unlink()
    pins = {n: v for n, v in closure().items() if n not in DEVICE_HAS}
    for name, version in sorted(pins.items()):
        fetch(f"{name}=={version}", dest, args.python_version)
    wheels = sorted(dest.glob("*.whl"))
    size = sum(w.stat().st_size for w in wheels)
    print(f"{len(wheels)} wheels for Python {args.python_version} in {dest} ({size / 2**20:.1f} MiB): "
          + " ".join(f"{n}=={v}" for n, v in sorted(pins.items())))
    if len(wheels) != len(pins):
        raise SystemExit(f"gpu_wheels: {len(pins)} packages but {len(wheels)} wheels")


if __name__ == "__main__":
    main()
