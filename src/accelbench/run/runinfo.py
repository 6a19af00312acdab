"""Stage 0: fix what this run is — its id, its exact config, the config's hash, the code's commit.

Every later stage reads ``results/<run>/run.json`` instead of the YAML, so a stage running in a
container or on a cluster node sees exactly the config the workflow validated.
"""

from __future__ import annotations

import json

from .. import __version__, registry
from .config import ConfigError, check, config_hash, load_schema, with_defaults
from .io import atomic_write_json
from .provenance import git_commit


def add_arguments(p) -> None:
    p.add_argument("--config-json", required=True, help="the workflow's config as JSON")
    p.add_argument("--run", required=True, help="run id")
    p.add_argument("--git-commit", default="", help="commit of the pipeline checkout (default: ask git)")
    p.add_argument("--out", required=True)
    p.add_argument(
        "--stages",
        default="",
        help="the device stages this run runs, comma-separated (empty: every "
        "one; the fleet node check runs a few): aggregate expects only their files",
    )


def parse_config_json(text: str) -> dict:
    """The workflow's config from ``--config-json``; a ConfigError (one line) if it is not a JSON mapping."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--config-json: not valid JSON ({exc})") from None
    if not isinstance(config, dict):
        raise ConfigError(f"--config-json: must be a JSON object of config keys, got {type(config).__name__}")
    return config


def cli(args) -> int:
    config = parse_config_json(args.config_json)
    schema = load_schema()
    check(config, schema)
    # the run id names folders and reaches command lines: same rule as the config's "run"
    try:
        check({"run": args.run}, schema)
    except ConfigError as exc:
        raise ConfigError(f"--run: {str(exc).split(': ', 1)[1]}") from None
    if not args.run:
        raise ConfigError("--run: must not be empty")
    config = with_defaults(config, schema)
    stages = [s for s in args.stages.split(",") if s]
    device_stages = [s.name for s in registry.DEVICE_STAGES]
    for s in stages:
        if s not in device_stages:
            raise ConfigError(f"--stages: {s!r} is not a device stage; allowed: {', '.join(device_stages)}")
    atomic_write_json(
        args.out,
        {
            **({"stages": stages} if stages else {}),
            "run": args.run,
            "config": config,
            "config_hash": config_hash(config),
            "git_commit": args.git_commit or git_commit(),
            "accelbench_version": __version__,
        },
    )
    return 0
