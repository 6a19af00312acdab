"""What the fleet check will do, decided before any job: the node check's config, the run ids, and the nodes
of a partition or list as SLURM knows them (one line naming the key on bad input: ConfigError)."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from dataclasses import dataclass

from ... import registry
from ...run.config import ConfigError, check, with_defaults

NODE_FILE = "fleet_node.json"  # in each node's folder: what the dispatcher and the node's job know of the node
# sinfo's compact states that mean no job will start there (a trailing * : the node does not respond)
UNUSABLE = ("down", "drain", "drng", "drained", "fail", "failg", "maint", "unk", "futr", "pow_dn", "npc", "inval")


def merge(base: dict, over: dict) -> dict:
    """``over`` laid over ``base``, section by section (nested dicts merged, anything else replaced)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def node_config(config: dict, run_id: str) -> dict:
    """The config one node's check runs with: the stages' own fleet-check sections (``registry.FLEET_CHECK``),
    then ``fleet.check``, over ``config``; checked like any config (ConfigError names the key)."""
    out = merge(config, registry.FLEET_CHECK)
    out = merge(out, config["fleet"].get("check") or {})
    out["run"] = run_id
    try:
        check(out)
    except ConfigError as exc:
        raise ConfigError(f"fleet.check: the node check's config is not valid: {exc}") from None
    return with_defaults(out)


def run_id(fleet_id: str, node: str) -> str:
    """A node's run id: the fleet folder's name and the node's (within the schema's rule for run ids)."""
    text = re.sub(r"[^A-Za-z0-9._-]", "-", f"{fleet_id}-{node}")[:64].lstrip("._-")
    return text or node


@dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str  # sinfo's compact state (idle, mix, down*, ...)
    partitions: tuple[str, ...]

    @property
    def unreachable(self) -> str:
        """Why no job will start on this node, or '' when one can."""
        if self.state.endswith("*"):
            return f"node {self.name} is {self.state} in SLURM (not responding)"
        base = self.state.rstrip("~#!%$@^-+")
        if base in UNUSABLE:
            return f"node {self.name} is {self.state} in SLURM"
        return ""


def run_slurm(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    if shutil.which(argv[0]) is None:
        raise ConfigError(
            f"fleet: SLURM's {argv[0]} is not on PATH; allowed: run --submit where SLURM's client commands are"
        )
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def cluster_nodes() -> dict[str, SlurmNode]:
    """Every node SLURM knows (sinfo -N: one line per node and partition), with its state and partitions."""
    proc = run_slurm(["sinfo", "-h", "-N", "-o", "%N|%P|%t"])
    if proc.returncode != 0:
        raise ConfigError(
            f"fleet: sinfo failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}"
        )
    nodes: dict[str, tuple[str, list[str]]] = {}
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3:
            continue
        name, part, state = parts
        entry = nodes.setdefault(name, (state, []))
        entry[1].append(part.rstrip("*"))
    return {n: SlurmNode(n, s, tuple(p)) for n, (s, p) in nodes.items()}


def partitions() -> list[str]:
    proc = run_slurm(["sinfo", "-h", "-o", "%R"])
    return sorted({p.strip() for p in proc.stdout.split() if p.strip()})


def resolve_nodes(
    fleet: dict, known: dict[str, SlurmNode] | None = None, known_partitions: list[str] | None = None
) -> list[SlurmNode]:
    """The nodes to check: ``fleet.nodes`` (each must exist, and be in ``fleet.partition`` when both are set),
    else every node of ``fleet.partition``. ConfigError naming the key otherwise."""
    part, names = fleet.get("partition") or "", list(fleet.get("nodes") or [])
    if not part and not names:
        raise ConfigError(
            "fleet.nodes: empty, and fleet.partition is unset; allowed: a partition "
            "(--partition) or node names (--nodes a,b)"
        )
    known = cluster_nodes() if known is None else known
    if part:
        parts = partitions() if known_partitions is None else known_partitions
        if part not in parts:
            raise ConfigError(
                f"fleet.partition: {part!r} is not a partition of this cluster; allowed: "
                + (", ".join(parts) or "none (sinfo lists no partition)")
            )
    if names:
        for n in names:
            if n not in known:
                raise ConfigError(
                    f"fleet.nodes: {n!r} is not a node of this cluster; allowed: "
                    + (", ".join(sorted(known)) or "none")
                )
            if part and part not in known[n].partitions:
                raise ConfigError(
                    f"fleet.nodes: {n!r} is not in partition {part!r}; allowed: "
                    + ", ".join(sorted(k for k, v in known.items() if part in v.partitions))
                )
        return [known[n] for n in names]
    chosen = [v for k, v in sorted(known.items()) if part in v.partitions]
    if not chosen:
        raise ConfigError(f"fleet.partition: {part!r} has no nodes; allowed: a partition with nodes")
    return chosen
