"""Reading system files and commands without ever failing: what detection is built on.

Every reader returns None when the file or command is missing, fails or hangs; commands are argv
lists, never parsed by a shell. The backends take these as arguments so tests pass fixture trees
and fake runners.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

Runner = Callable[..., "subprocess.CompletedProcess"]


def run_text(argv: list[str], run: Runner = subprocess.run, timeout: float = 10.0) -> str | None:
    """stdout of ``argv``, or None when it is missing, fails or hangs (argv list: nothing is shell-parsed)."""
    if shutil.which(argv[0]) is None and run is subprocess.run:
        return None
    try:
        proc = run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    if getattr(proc, "returncode", 1) != 0:
        return None
    return proc.stdout


def read_file(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None
