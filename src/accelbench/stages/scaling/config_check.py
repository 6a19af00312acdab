"""The scaling stage's rules between config keys (``Stage.config_check``: run.config.check_cross_keys)."""

from __future__ import annotations

from ...run.config import ConfigError


def check_scaling_config(scaling: dict, amp_cfg: dict) -> None:
    """Scaling rules between keys: sizes in order, world size 1 measured (the efficiency's baseline),
    every world's global batch (world size x amp.batch_size) within the training set."""
    sizes = scaling["sizes"]
    if sizes["min_bytes"] > sizes["max_bytes"]:
        raise ConfigError(f"scaling.sizes.min_bytes: {sizes['min_bytes']} is larger than scaling.sizes.max_bytes "
                          f"({sizes['max_bytes']}); allowed: 1 .. {sizes['max_bytes']}")
    worlds = scaling["world_sizes"]
    if worlds and 1 not in worlds:
        raise ConfigError(f"scaling.world_sizes: {worlds} lacks 1, the baseline of scaling_efficiency; allowed: a "
                          "list that includes 1, or [] for 1, 2, 4, ... up to every device")
    n_train, batch = amp_cfg["data"]["n_train"], amp_cfg["batch_size"]
    if worlds and max(worlds) * batch > n_train:
        raise ConfigError(f"scaling.world_sizes: world size {max(worlds)} x amp.batch_size {batch} exceeds "
                          f"amp.data.n_train ({n_train}); allowed: world sizes up to {n_train // batch}")


def check(config: dict) -> None:
    if "scaling" in config and "amp" in config:
        check_scaling_config(config["scaling"], config["amp"])
