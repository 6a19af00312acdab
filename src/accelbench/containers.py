"""Container launch argv for Docker/Podman (work in progress: runtime none only)."""

from __future__ import annotations


def launch_prefix(config: dict, backend: str, workdir: str) -> str:
    runtime = config["container"]["runtime"]
    if runtime in ("none", "apptainer"):
        return ""
    raise NotImplementedError(f"container.runtime {runtime!r} not implemented yet")


def add_arguments(p) -> None:
    pass


def cli(args) -> int:
    raise NotImplementedError
