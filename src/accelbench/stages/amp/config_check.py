"""The AMP stage's rules between config keys (``Stage.config_check``: run.config.check_cross_keys)."""

from __future__ import annotations

from ...run.config import ConfigError


def check_amp_config(amp_cfg: dict) -> None:
    """AMP rules between keys; one line naming the key."""
    if amp_cfg["warmup_steps"] >= amp_cfg["steps"]:
        raise ConfigError(
            f"amp.warmup_steps: {amp_cfg['warmup_steps']} must be below amp.steps ({amp_cfg['steps']}); "
            f"allowed: 0 .. {amp_cfg['steps'] - 1}"
        )
    if amp_cfg["batch_size"] > amp_cfg["data"]["n_train"]:
        raise ConfigError(
            f"amp.batch_size: {amp_cfg['batch_size']} is larger than amp.data.n_train "
            f"({amp_cfg['data']['n_train']}); allowed: 1 .. {amp_cfg['data']['n_train']}"
        )
    if amp_cfg.get("compile") is True and amp_cfg["warmup_steps"] < 1:
        raise ConfigError(
            "amp.warmup_steps: 0 with amp.compile on; the first step compiles, so it must stay out "
            "of the step times; allowed: 1 or more"
        )
    check_workload_sizes(amp_cfg)
    t = amp_cfg["transformer"]
    if "transformer" in amp_cfg["workloads"] and t["d_model"] % t["n_heads"]:
        raise ConfigError(
            f"amp.transformer.n_heads: {t['n_heads']} does not divide amp.transformer.d_model "
            f"({t['d_model']}); allowed: a divisor of d_model"
        )


def check_workload_sizes(amp_cfg: dict) -> None:
    """The gpt and resnet sections of the workloads that will run: a known preset, sizes that fit together,
    a batch within the section's training set; one line naming the key."""
    from .workloads import PRESETS, gpt, resnet  # the presets' tables: no torch imported

    for workload in [w for w in amp_cfg["workloads"] if w in PRESETS]:
        own = amp_cfg.get(workload) or {}
        preset = own.get("preset")
        if preset not in PRESETS[workload]:
            raise ConfigError(
                f"amp.{workload}.preset: {preset!r} is not allowed; allowed: {', '.join(PRESETS[workload])}"
            )
        sizes = (gpt.resolve if workload == "gpt" else resnet.resolve)(own)
        if workload == "gpt":
            d, h = sizes["d_model"], sizes["n_heads"]
            if d % h:
                raise ConfigError(
                    f"amp.gpt.n_heads: {h} does not divide amp.gpt.d_model ({d}) of preset {preset}; "
                    "allowed: a divisor of d_model"
                )
            if sizes["style"] == "llama" and (d // h) % 2:
                raise ConfigError(
                    f"amp.gpt.d_model: head size {d}/{h} = {d // h} is odd; rotary positions rotate "
                    "pairs; allowed: d_model / n_heads even"
                )
        batch = own.get("batch_size")
        if batch is None:
            batch = amp_cfg["batch_size"]
        if isinstance(batch, int) and batch > own["n_train"]:
            raise ConfigError(
                f"amp.{workload}.batch_size: {batch} is larger than amp.{workload}.n_train "
                f"({own['n_train']}); allowed: 1 .. {own['n_train']} or max"
            )
        steps = own.get("steps") if own.get("steps") is not None else amp_cfg["steps"]
        warmup = own.get("warmup_steps") if own.get("warmup_steps") is not None else amp_cfg["warmup_steps"]
        compiled = amp_cfg.get("compile")
        if warmup < 1 and (compiled is True or (isinstance(compiled, list) and workload in compiled)):
            raise ConfigError(
                f"amp.{workload}.warmup_steps: 0 with amp.compile on; the first step compiles, so it "
                "must stay out of the step times; allowed: 1 or more"
            )
        if warmup >= steps:
            raise ConfigError(
                f"amp.{workload}.warmup_steps: {warmup} must be below its steps ({steps}); allowed: 0 .. {steps - 1}"
            )


def check(config: dict) -> None:
    if "amp" in config:
        check_amp_config(config["amp"])
