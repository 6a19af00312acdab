"""The ``accelbench`` command: one subcommand per pipeline stage.

Snakemake rules are thin calls of these subcommands, so the same code runs on the host, in a
Docker/Podman/Apptainer image, and on a cluster node. Each stage module provides
``add_arguments(parser)`` and ``cli(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> (module, one-line help)
STAGES = {
    "run-info": ("runinfo", "check the config and write results/<run>/run.json (config, hash, commit)"),
    "detect": ("devices", "detect every backend and device; write devices.json"),
    "warmup": ("warmup", "cold vs warm: repeat a fixed workload until its time is stable"),
    "matmul": ("matmul", "matrix-multiplication sweep over sizes x dtypes on every device of a backend"),
    "transfer": ("transfer", "host<->device copy bandwidth (pageable and pinned)"),
    "amp": ("amp", "AMP vs FP32 training trials"),
    "aggregate": ("aggregate", "gather every run's CSVs under results/ into tidy tables"),
    "plots": ("plots", "seaborn figures (PNG and SVG) from the aggregated tables"),
    "report": ("report", "one self-contained HTML report"),
    "container": ("containers", "container argv and image builds for docker/podman"),
}


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="accelbench", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"accelbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="STAGE", required=True)
    for name, (module, help_) in STAGES.items():
        p = sub.add_parser(name, help=help_, description=help_)
        mod = importlib.import_module(f"accelbench.{module}")
        mod.add_arguments(p)
        p.set_defaults(_module=mod)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._module.cli(args) or 0)
    except Exception as exc:  # one line for known input errors, traceback otherwise
        from .config import ConfigError

        if isinstance(exc, ConfigError):
            print(f"accelbench {args.command}: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
