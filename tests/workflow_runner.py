"""Running the real ``snakemake`` on this repository's Snakefile from a test: one way, used by every test
that needs the whole workflow (a dry run, a full run, a failing run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the venv's: accelbench and snakemake for the jobs


def snakemake_env(extra: dict | None = None) -> dict:
    """The test process's environment with the venv first on PATH, so jobs find ``accelbench``."""
    return {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", **(extra or {})}


def snakemake_argv(workdir: Path, *args: str, repo: Path = REPO) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "--directory", str(workdir), *args]


def run_snakemake(
    workdir: Path,
    *args: str,
    config: dict | None = None,
    config_name: str = "config.yaml",
    env: dict | None = None,
    timeout: int = 300,
    repo: Path = REPO,
) -> subprocess.CompletedProcess:
    """``snakemake -s <repo>/Snakefile --directory workdir [--configfile workdir/config_name] *args``.

    With ``config``, it is written to ``workdir/config_name`` first and passed as ``--configfile``."""
    if config is not None:
        (workdir / config_name).write_text(yaml.safe_dump(config))
        args = ("--configfile", str(workdir / config_name), *args)
    return subprocess.run(
        snakemake_argv(workdir, *args, repo=repo),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=snakemake_env(env),
    )
