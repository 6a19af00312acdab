"""The matmul stage's rules between config keys (``Stage.config_check``: run.config.check_cross_keys)."""

from __future__ import annotations

from ...run.config import ConfigError, shape_label


def check_matmul_config(mm: dict) -> None:
    """matmul.shapes: every shape reported under its own name; matmul.search: each axis min <= max."""
    seen: dict[str, int] = {}
    for i, shape in enumerate(mm.get("shapes") or []):
        label = shape_label(shape)
        if label in seen:
            raise ConfigError(
                f"matmul.shapes[{i}]: name {label!r} is also matmul.shapes[{seen[label]}]'s; "
                "allowed: a name (or m x n x k) used once"
            )
        seen[label] = i
    search = mm.get("search") or {}
    for axis in ("m", "n", "k"):
        a = search.get(axis) or {}
        if {"min", "max"} <= a.keys() and a["min"] > a["max"]:
            raise ConfigError(
                f"matmul.search.{axis}.min: {a['min']} is larger than matmul.search.{axis}.max "
                f"({a['max']}); allowed: 1 .. {a['max']}"
            )


def check(config: dict) -> None:
    mm = config.get("matmul") or {}
    if mm.get("soak_s", 0) > 0 and mm.get("soak_interval_s", 0) > mm["soak_s"]:
        raise ConfigError(
            f"matmul.soak_interval_s: {mm['soak_interval_s']} is longer than matmul.soak_s "
            f"({mm['soak_s']}), so the soak would have no whole interval; allowed: up to {mm['soak_s']}"
        )
    if "matmul" in config:
        check_matmul_config(config["matmul"])
