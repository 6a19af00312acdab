"""The accelbench command: one subcommand per pipeline stage (registry.STAGES).

Snakemake rules are thin calls of these subcommands, so the same code runs on the host, in a
Docker/Podman/Apptainer image, and on a cluster node. Each stage module provides
``add_arguments(parser)`` and ``cli(args) -> int``; it is imported only when its subcommand runs
(``accelbench aggregate`` on a login node never imports torch).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__, registry
from .run.config import ConfigError


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand; only ``command``'s module is imported, to add its arguments (None: all)."""
    parser = argparse.ArgumentParser(prog="accelbench", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"accelbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="STAGE", required=True)
    for name, stage in registry.STAGES.items():
        p = sub.add_parser(name, help=stage.help, description=stage.help)
        p.set_defaults(_stage=stage)
        if command is None or name == command:
            importlib.import_module(stage.module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), "")
    args = build_parser(command).parse_args(argv)
    module = importlib.import_module(args._stage.module)
    try:
        return int(module.cli(args) or 0)
    except ConfigError as exc:  # one line for known input errors, a traceback otherwise
        print(f"accelbench {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
