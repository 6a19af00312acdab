"""The scaling stage's rules between config keys (``Stage.config_check``: run.config.check_cross_keys)."""

from __future__ import annotations

from ...run.config import ConfigError
from ..amp.workloads import PRESETS as OWN_SECTION  # gpt and resnet: their own amp.<workload> section


def check_scaling_config(scaling: dict, amp_cfg: dict) -> None:
    """Scaling rules between keys: sizes in order, world size 1 measured (the efficiency's baseline), every
    world's global batch (world size x the workload's batch per rank) within its training set, and no
    ``batch_size: max`` for a workload scaling trains (a bisected batch could differ between worlds)."""
    sizes = scaling["sizes"]
    if sizes["min_bytes"] > sizes["max_bytes"]:
        raise ConfigError(
            f"scaling.sizes.min_bytes: {sizes['min_bytes']} is larger than scaling.sizes.max_bytes "
            f"({sizes['max_bytes']}); allowed: 1 .. {sizes['max_bytes']}"
        )
    worlds = scaling["world_sizes"]
    if worlds and 1 not in worlds:
        raise ConfigError(
            f"scaling.world_sizes: {worlds} lacks 1, the baseline of scaling_efficiency; allowed: a "
            "list that includes 1, or [] for 1, 2, 4, ... up to every device"
        )
    for workload in scaling["workloads"]:
        own = amp_cfg.get(workload) if workload in OWN_SECTION else None
        if isinstance(own, dict) and own.get("batch_size") is not None:
            batch_key, batch = f"amp.{workload}.batch_size", own["batch_size"]
        else:
            batch_key, batch = "amp.batch_size", amp_cfg["batch_size"]
        n_key, n_train = (
            (f"amp.{workload}.n_train", own["n_train"])
            if isinstance(own, dict)
            else ("amp.data.n_train", amp_cfg["data"]["n_train"])
        )
        if batch == "max":
            if scaling.get("enabled"):
                raise ConfigError(
                    f"{batch_key}: max is not allowed while scaling.workloads has {workload} (the batch "
                    "per rank must be the same in every world); allowed: a positive integer, or null "
                    "(amp.batch_size)"
                )
            continue
        if worlds and max(worlds) * batch > n_train:
            raise ConfigError(
                f"scaling.world_sizes: world size {max(worlds)} x {batch_key} {batch} exceeds "
                f"{n_key} ({n_train}); allowed: world sizes up to {n_train // batch}"
            )


def check(config: dict) -> None:
    if "scaling" in config and "amp" in config:
        check_scaling_config(config["scaling"], config["amp"])
