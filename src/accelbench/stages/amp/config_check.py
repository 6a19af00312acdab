"""The AMP stage's rules between config keys (``Stage.config_check``: run.config.check_cross_keys)."""

from __future__ import annotations

from ...run.config import ConfigError


def check_amp_config(amp_cfg: dict) -> None:
    """AMP rules between keys; one line naming the key."""
    if amp_cfg["warmup_steps"] >= amp_cfg["steps"]:
        raise ConfigError(f"amp.warmup_steps: {amp_cfg['warmup_steps']} must be below amp.steps ({amp_cfg['steps']}); "
                          f"allowed: 0 .. {amp_cfg['steps'] - 1}")
    if amp_cfg["batch_size"] > amp_cfg["data"]["n_train"]:
        raise ConfigError(f"amp.batch_size: {amp_cfg['batch_size']} is larger than amp.data.n_train "
                          f"({amp_cfg['data']['n_train']}); allowed: 1 .. {amp_cfg['data']['n_train']}")
    t = amp_cfg["transformer"]
    if "transformer" in amp_cfg["workloads"] and t["d_model"] % t["n_heads"]:
        raise ConfigError(f"amp.transformer.n_heads: {t['n_heads']} does not divide amp.transformer.d_model "
                          f"({t['d_model']}); allowed: a divisor of d_model")


def check(config: dict) -> None:
    if "amp" in config:
        check_amp_config(config["amp"])
