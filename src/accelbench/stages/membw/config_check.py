"""The membw stage's rules between config keys (``Stage.config_check``: run.config.check_cross_keys)."""

from __future__ import annotations

from ...run.config import ConfigError


def check_membw_config(bw: dict) -> None:
    """membw: the smallest size must lie below the largest."""
    if {"min_kb", "max_mb"} <= bw.keys() and bw["min_kb"] * 1024 >= bw["max_mb"] * 1024**2:
        raise ConfigError(
            f"membw.min_kb: {bw['min_kb']} KiB is not below membw.max_mb ({bw['max_mb']:g} MiB); "
            f"allowed: 1 .. {int(bw['max_mb'] * 1024) - 1}"
        )


def check(config: dict) -> None:
    if "membw" in config:
        check_membw_config(config["membw"])
