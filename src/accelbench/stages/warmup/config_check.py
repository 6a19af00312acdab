"""The warm-up stage's rules between config keys (``Stage.config_check``: run.config.check_cross_keys)."""

from __future__ import annotations

from ...run.config import ConfigError


def check(config: dict) -> None:
    warm = config.get("warmup") or {}
    if {"window", "max_iters"} <= warm.keys() and warm["window"] > warm["max_iters"]:
        raise ConfigError(
            f"warmup.window: {warm['window']} is larger than warmup.max_iters ({warm['max_iters']}), "
            f"so the device could never be found stable; allowed: 2 .. {warm['max_iters']}"
        )
