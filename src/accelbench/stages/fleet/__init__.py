"""The fleet check: a short node check on every node of a SLURM partition (or node list) at once, and each
node's verdict against the fleet's median and a stored baseline (docs/fleet.md).

``accelbench fleet RESULTS`` judges a fleet's folder (exit 0: every node healthy, 1: some node flagged, 2: unusable
input); ``--submit`` first runs the node check on every node through SLURM (``dispatch.py``); ``--node`` is what
each node's job runs (``node.py``). The verdict logic is ``verdict.py`` (pure functions); the headline metrics are
the tables' own declarations (``registry.HEADLINES``), so this package names no other stage.
"""

from ...plugin import Figure, Hook, Section, Stage

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"  # a SLURM partition or node name (no shell characters)

DEFAULTS = {
    "partition": "",
    "nodes": [],
    "k_mad": 3.0,
    "min_drop_pct": 10.0,
    "min_devices": 3,
    "baseline": "",
    "timeout_s": 900,
    "runtime_min": 15,
    "mem_mb": 4000,
    "threads": 0,
    "check": {},
}

SCHEMA = {
    "description": "the fleet check (accelbench fleet, docs/fleet.md): which nodes, and when a node is slow",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "partition": {
            "description": "SLURM partition whose nodes are checked (empty: use fleet.nodes)",
            "type": "string",
            "pattern": r"^([A-Za-z0-9][A-Za-z0-9_.-]{0,63})?$",
        },
        "nodes": {
            "description": "node names to check (empty: every node of fleet.partition)",
            "type": "array",
            "items": {"type": "string", "pattern": NAME},
            "uniqueItems": True,
        },
        "k_mad": {
            "description": "slow when worse than the fleet median by more than this many MADs (scaled to a "
            "normal sigma) and by more than fleet.min_drop_pct",
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 50,
        },
        "min_drop_pct": {
            "description": "slow when worse than the fleet median (or baseline) by more than this "
            "percentage and by more than fleet.k_mad MADs",
            "type": "number",
            "exclusiveMinimum": 0,
            "exclusiveMaximum": 100,
        },
        "min_devices": {
            "description": "devices of one model needed for a fleet median (fewer: only the baseline judges)",
            "type": "integer",
            "minimum": 3,
            "maximum": 100000,
        },
        "baseline": {
            "description": "a stored fleet baseline (accelbench fleet --save-baseline), empty: none",
            "type": "string",
            "pattern": r"^([A-Za-z0-9_./-]{1,512})?$",
        },
        "timeout_s": {
            "description": "a node whose check has not ended this long after submission (pending "
            "included) is failed and its job cancelled",
            "type": "integer",
            "minimum": 10,
            "maximum": 604800,
        },
        "runtime_min": {
            "description": "the node job's SLURM time limit (sbatch --time)",
            "type": "integer",
            "minimum": 1,
            "maximum": 10080,
        },
        "mem_mb": {
            "description": "the node job's memory (sbatch --mem)",
            "type": "integer",
            "minimum": 100,
            "maximum": 4194304,
        },
        "threads": {
            "description": "host threads of the node check (0: every CPU SLURM gives the job)",
            "type": "integer",
            "minimum": 0,
            "maximum": 4096,
        },
        "check": {
            "description": "config sections laid over the stages' own fleet-check settings "
            "(Stage.fleet_check), e.g. GPU-sized points; the result is checked as a config",
            "type": "object",
            "propertyNames": {"pattern": r"^[a-z][a-z0-9_]{0,63}$"},
            "additionalProperties": {"type": "object"},
        },
    },
}

PLUGIN = Stage(
    "fleet",
    "fleet check: every node of a partition at once, each node's verdict (exit 0 healthy, 1 flagged, 2 bad input)",
    "tool",
    entry="accelbench.stages.fleet.cli",
    figures=(Figure("fleet", (), draw=Hook("accelbench.stages.fleet.figures:fig_fleet"), category="Fleet"),),
    sections=(Section("fleet", "Fleet", 5, context=Hook("accelbench.stages.fleet.report:context")),),
    config_key="fleet",
    defaults=DEFAULTS,
    schema=SCHEMA,
)
