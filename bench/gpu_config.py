"""The GPU check's config (bench/gpu_check.sh, step "pipeline"): bench/gpu_config.yaml's run-wide keys, and each
stage's own section from its declaration (``Stage.gpu_check``, in its package), so a stage added to
``registry.PLUGINS`` runs in the check at its own small sizes without an edit here.

    python bench/gpu_config.py bench/gpu_config.yaml OUT.json   # JSON, which snakemake's --configfile reads

A key the file sets wins over a stage's section. The result is checked as every config is (exit 2 and one line
naming the key when it is wrong).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import yaml

from accelbench import registry
from accelbench.run.config import ConfigError, check


def gpu_check_config(base: dict) -> dict:
    out = copy.deepcopy(base)
    for stage in registry.STAGES.values():
        if stage.gpu_check and stage.config_key and stage.config_key not in out:
            out[stage.config_key] = copy.deepcopy(stage.gpu_check)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: gpu_config.py BASE.yaml OUT.json", file=sys.stderr)
        return 2
    config = gpu_check_config(yaml.safe_load(Path(argv[0]).read_text()) or {})
    try:
        check(config)
    except ConfigError as exc:
        print(f"gpu_config.py: {exc}", file=sys.stderr)
        return 2
    Path(argv[1]).write_text(json.dumps(config, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
