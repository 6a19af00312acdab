"""Prepare .gpu-wheels/ for bench/gpu_check.sh: snakemake and jsonschema for the GPU machine's Python 3.12.

The device machine cannot fetch packages, and its image (Python 3.12, manylinux x86_64; torch 2.11 + CUDA 13
in /opt/torch/.venv, nvidia-ml-py, pandas, scipy, seaborn, pyarrow, jinja2, pyyaml, psutil) has no snakemake
and no jsonschema. Only the check's pipeline step needs them: its headline steps (device, headline, nvml,
fidelity, telemetry) import accelbench with torch and the image's packages alone (jsonschema is imported
lazily by run/config.py; tests/test_gpu_check.py runs the headline with both blocked).

What this does:

1. the dependency closure of snakemake and jsonschema, at the versions this checkout's .venv resolved (a set
   known to work together), with every requirement's environment marker evaluated for the *target*
   (CPython 3.12 on Linux x86_64, not the Python running this): a dependency only 3.12 needs is included,
   one only older Pythons need is not;
2. leaves out what the image already has (``DEVICE_HAS``);
3. downloads one wheel per remaining package for the target (``pip download --no-deps --only-binary=:all:
   --python-version 3.12 --implementation cp --platform manylinux...x86_64``; a pure-Python package published
   only as an sdist is built into a ``py3-none-any`` wheel here);
4. checks every wheel's tags (``packaging.utils.parse_wheel_filename``) against the target: interpreter
   py3/cp3/cp312, ABI none/abi3/cp312, platform any or manylinux x86_64 (``check_tags``), and fails on one
   that is not;
5. with ``--verify PYTHON3.12``: installs the image's packages (those of the closure that the image has,
   downloaded the same way into a second folder, a stand-in for the image without torch) and then the
   carried wheels into two clean ``--target`` folders with that interpreter, ``--no-index --no-deps``, and
   imports snakemake and jsonschema from there, validates a schema and runs ``snakemake --version``: the
   wheel set installs and imports on CPython 3.12.

Run here, once, from the repository root, with the venv's Python:

    .venv/bin/python bench/gpu_wheels.py [--python-version 3.12] [--dest .gpu-wheels] [--verify python3.12]

``packaging`` and ``typing-extensions`` are carried although the image has them: snakemake pins
``packaging<26`` and pydantic needs a recent ``typing-extensions``; the carried copies shadow the
image's (newer typing-extensions is backward compatible; torch does not pin packaging).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import parse_wheel_filename

ROOTS = ("snakemake", "jsonschema")

# In the device image already (the device tool's description of the lent machine), as far as the closure goes.
DEVICE_HAS = {
    "attrs",
    "certifi",
    "charset-normalizer",
    "idna",
    "jinja2",
    "markupsafe",
    "psutil",
    "pyyaml",
    "requests",
    "tabulate",
    "urllib3",
    "wrapt",
    "numpy",
    "pandas",
    "six",
    "python-dateutil",
    "pygments",
}

PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_5_x86_64",
    "manylinux1_x86_64",
)


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def target_environment(python_version: str) -> dict:
    """PEP 508 marker values for CPython ``python_version`` on Linux x86_64 (the device machine)."""
    return {
        "python_version": python_version,
        "python_full_version": f"{python_version}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
        "extra": "",
    }


def closure(roots=ROOTS, python_version: str = "3.12") -> tuple[dict[str, str | None], list[str]]:
    """(name -> version installed here, or None for a dependency the target needs that is not installed
    here), and the requirement lines taken, with every marker evaluated for the target (no extras)."""
    env = target_environment(python_version)
    seen: dict[str, str | None] = {}
    taken: list[str] = []
    todo = list(roots)
    while todo:
        name = todo.pop()
        if norm(name) in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:  # needed on the target only: pip picks its newest wheel
            seen[norm(name)] = None
            continue
        seen[norm(name)] = dist.version
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker and not req.marker.evaluate(env):
                continue
            taken.append(f"{name}: {line}")
            todo.append(req.name)
    return seen, taken


def check_tags(wheel: str, python_version: str = "3.12") -> str | None:
    """None when the wheel installs on CPython ``python_version`` manylinux x86_64; else why not."""
    cp = "cp" + python_version.replace(".", "")
    _, _, _, tags = parse_wheel_filename(wheel)
    for tag in tags:
        interpreter_ok = tag.interpreter in {"py3", "cp3", cp, "py" + python_version.replace(".", "")} or (
            tag.abi == "abi3"
            and tag.interpreter.startswith("cp3")
            and int(tag.interpreter[3:] or 0) <= int(python_version.split(".")[1])
        )
        abi_ok = tag.abi in {"none", "abi3", cp}
        platform_ok = tag.platform == "any" or (
            tag.platform.startswith("manylinux") and tag.platform.endswith("x86_64")
        )
        if interpreter_ok and abi_ok and platform_ok:
            return None
    return f"{wheel}: tags {sorted(str(t) for t in tags)} are not {cp} manylinux x86_64 (nor pure Python)"


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


def download(pins: dict[str, str | None], dest: Path, python_version: str) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.whl"):  # one version of each package, or the install stops
        old.unlink()
    for name, version in sorted(pins.items()):
        fetch(f"{name}=={version}" if version else name, dest, python_version)
    return sorted(dest.glob("*.whl"))


VERIFY = """
import sys, jsonschema, snakemake
from importlib import metadata
assert sys.version_info[:2] == tuple(map(int, "{pv}".split("."))), sys.version
jsonschema.validate({{"a": 1}}, {{"type": "object", "properties": {{"a": {{"type": "integer"}}}}}})
import snakemake.api  # the CLI's import chain
print("verified on", sys.version.split()[0], "snakemake", metadata.version("snakemake"),
      "jsonschema", metadata.version("jsonschema"), "from", snakemake.__file__)
"""


def verify(python: str, carried: Path, image: Path, python_version: str) -> None:
    """Install the image stand-in and the carried wheels into two clean targets with ``python``; import."""
    with tempfile.TemporaryDirectory() as tmp:
        targets = {}
        for name, folder in (("image", image), ("carried", carried)):
            target = Path(tmp) / name
            subprocess.run(
                [
                    python,
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--no-index",
                    "--no-deps",
                    "--no-compile",
                    "--target",
                    str(target),
                    *map(str, sorted(folder.glob("*.whl"))),
                ],
                check=True,
            )
            targets[name] = target
        env = {
            **os.environ,
            "PYTHONPATH": f"{targets['carried']}{os.pathsep}{targets['image']}",
            "PYTHONNOUSERSITE": "1",
        }
        subprocess.run([python, "-s", "-c", VERIFY.format(pv=python_version)], check=True, env=env)
        got = subprocess.run([python, "-s", "-m", "snakemake", "--version"], env=env, capture_output=True, text=True)
        if got.returncode != 0:
            raise SystemExit(f"gpu_wheels: snakemake --version failed on {python}: {got.stderr[-500:]}")
        print(f"snakemake --version on {python}: {got.stdout.strip()}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python-version", default="3.12")
    p.add_argument("--dest", default=".gpu-wheels")
    p.add_argument("--verify", metavar="PYTHON", help="a CPython of --python-version: install and import there")
    p.add_argument(
        "--image-dest",
        default=".gpu-wheels-image",
        help="with --verify: where the image stand-in's wheels go (not carried)",
    )
    args = p.parse_args()
    pins, _ = closure(python_version=args.python_version)
    carried = {n: v for n, v in pins.items() if n not in DEVICE_HAS}
    dest = Path(args.dest)
    wheels = download(carried, dest, args.python_version)
    bad = [why for w in wheels if (why := check_tags(w.name, args.python_version))]
    if bad:
        raise SystemExit("gpu_wheels: " + "; ".join(bad))
    size = sum(w.stat().st_size for w in wheels)
    print(
        f"{len(wheels)} wheels for CPython {args.python_version} manylinux x86_64 in {dest} "
        f"({size / 2**20:.1f} MiB), tags checked: "
        + " ".join(f"{n}=={v or 'newest'}" for n, v in sorted(carried.items()))
    )
    if len(wheels) != len(carried):
        raise SystemExit(f"gpu_wheels: {len(carried)} packages but {len(wheels)} wheels")
    if args.verify:
        image = {n: v for n, v in pins.items() if n in DEVICE_HAS}
        download(image, Path(args.image_dest), args.python_version)
        verify(args.verify, dest, Path(args.image_dest), args.python_version)


if __name__ == "__main__":
    main()
