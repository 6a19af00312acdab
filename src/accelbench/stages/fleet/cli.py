"""``accelbench fleet``: judge a fleet's folder (and, with ``--submit``, run the node check on every node first).

    accelbench fleet results/fleet-a                    # verdicts of the nodes found there; exit 0 / 1 / 2
    accelbench fleet results/fleet-a --submit --partition gpu   # SLURM: every node at once, then the verdicts
    accelbench fleet results/fleet-a --node             # inside a node's job: that node's check

Exit codes: 0 every node healthy, 1 some node slow, throttled or failed, 2 unusable input (a bad key, no
folder, no node results); bad input is one line naming the key, before any job starts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from ...reporting.aggregate import aggregate
from ...run.config import ConfigError, check, load, with_defaults
from ...run.io import atomic_write_csv
from ...run.runinfo import parse_config_json
from .plan import NODE_FILE
from .verdict import BASELINE_COLUMNS, NodeRecord, Rule, baseline_of, evaluate

VERDICTS_FILE = "fleet.csv"  # one row per node (verdict.VERDICT_COLUMNS)
POINTS_FILE = "fleet_points.csv"  # device and node level headlines, medians, MADs and flags


def add_arguments(p) -> None:
    p.add_argument("results", help="the fleet's folder: one run folder per node (what --submit writes)")
    p.add_argument("--configfile", default=None, help="a config file (its fleet section; default: the defaults)")
    p.add_argument("--config-json", default=None, help="the config as JSON (the Snakemake rule's), instead of a file")
    p.add_argument("--partition", default=None, help="fleet.partition: the SLURM partition to check")
    p.add_argument("--nodes", default=None, help="fleet.nodes, comma-separated (instead of a partition)")
    p.add_argument("--k-mad", type=float, default=None, help="fleet.k_mad")
    p.add_argument("--min-drop-pct", type=float, default=None, help="fleet.min_drop_pct")
    p.add_argument("--baseline", default=None, help="fleet.baseline: a stored fleet baseline CSV")
    p.add_argument("--save-baseline", default=None, help="write this fleet's medians and MADs as a baseline CSV")
    p.add_argument("--submit", action="store_true", help="run the node check on every node through SLURM first")
    p.add_argument("--node", action="store_true", help="run this node's check (inside its SLURM job)")


def fleet_config(args) -> dict:
    """The defaults-filled config with the command line's fleet keys laid over it, checked (ConfigError)."""
    if args.config_json is not None:
        config = with_defaults(parse_config_json(args.config_json))
    else:
        config = load(args.configfile) if args.configfile else with_defaults({})
    fleet = config["fleet"]
    if args.partition is not None:
        fleet["partition"] = args.partition
    if args.nodes is not None:
        fleet["nodes"] = [n.strip() for n in args.nodes.split(",") if n.strip()]
        if not fleet["nodes"]:
            raise ConfigError(f"fleet.nodes: {args.nodes!r} names no node; allowed: node names, comma-separated")
    for key in ("k_mad", "min_drop_pct", "baseline"):
        if getattr(args, key) is not None:
            fleet[key] = getattr(args, key)
    check(config)
    return with_defaults(config)


def read_records(folder: Path) -> list[NodeRecord]:
    records = []
    for path in sorted(folder.rglob(NODE_FILE)):
        try:
            d = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            records.append(NodeRecord(path.parent.name, "failed", f"unreadable {path.name}: {exc}"))
            continue
        records.append(
            NodeRecord(
                str(d.get("node") or path.parent.name),
                str(d.get("state") or "failed"),
                str(d.get("error") or ""),
                str(d.get("run_id") or ""),
                str(d.get("job_id") or ""),
            )
        )
    return records


def read_baseline(path: str) -> pd.DataFrame | None:
    if not path:
        return None
    p = Path(path)
    if not p.is_file():
        raise ConfigError(
            f"fleet.baseline: {path!r} does not exist; allowed: a CSV from accelbench fleet --save-baseline"
        )
    df = pd.read_csv(p)
    missing = [c for c in BASELINE_COLUMNS if c not in df.columns]
    if missing:
        raise ConfigError(
            f"fleet.baseline: {path!r} lacks column(s) {', '.join(missing)}; allowed: a CSV from "
            "accelbench fleet --save-baseline"
        )
    return df


def judge_folder(folder: Path, config: dict, save_baseline: str | None = None, out=print):
    """Read every node's run under ``folder``, judge it, print the table, write fleet.csv; the FleetResult."""
    if not folder.is_dir():
        raise ConfigError(f"results: {str(folder)!r} is not a folder; allowed: a fleet's folder of node runs")
    baseline = read_baseline(config["fleet"]["baseline"])
    tables, _ = aggregate(folder)
    records = read_records(folder)
    if tables["runs"].empty and not records:
        raise ConfigError(
            f"results: {str(folder)!r} holds no node result (no run.json, no {NODE_FILE}); allowed: "
            "a folder written by accelbench fleet --submit, or run folders"
        )
    result = evaluate(tables, records, Rule.from_config(config["fleet"]), baseline)
    if result.points["value"].notna().sum() == 0 and all(r.state == "ok" for r in records):
        raise ConfigError(
            f"results: {str(folder)!r} holds no headline value of any node; allowed: runs of the fleet check's stages"
        )
    atomic_write_csv(folder / VERDICTS_FILE, result.verdicts)
    atomic_write_csv(folder / POINTS_FILE, result.judged)
    if save_baseline:
        atomic_write_csv(Path(save_baseline), baseline_of(result.judged))
    out(format_table(result.verdicts))
    return result


def format_table(verdicts: pd.DataFrame) -> str:
    lines = [f"{'node':<16} {'verdict':<10} detail"]
    for _, r in verdicts.iterrows():
        lines.append(f"{r['node']:<16} {r['verdict']:<10} {r['detail']}")
    counts = verdicts["verdict"].value_counts()
    lines.append(
        f"{len(verdicts)} node(s): "
        + ", ".join(f"{counts[v]} {v}" for v in ("healthy", "slow", "throttled", "failed") if v in counts)
    )
    return "\n".join(lines)


def cli(args) -> int:
    config = fleet_config(args)
    folder = Path(args.results)
    if args.node:
        from .node import run_node_check  # only inside a node's job: it imports torch

        return run_node_check(folder, config)
    if args.submit:
        from .dispatch import submit  # only with --submit: it calls SLURM

        submit(folder, config, log=lambda m: print(m, file=sys.stderr))
    return judge_folder(folder, config, args.save_baseline).exit_code
