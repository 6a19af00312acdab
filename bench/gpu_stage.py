"""One guarded stage step of the GPU check: a stage other developers are adding (attention, gpt2 MFU,
history, fleet), run by itself at small sizes, or recorded as "not available in this build".

The step names its candidate stage names (``--stage``, in order); the first one that
``accelbench.registry.STAGES`` has is run, with the step's small config section of
bench/gpu_stages.yaml (merged over the plug-in's own ``gpu_check`` section where the stage declares one):

- a device/run stage: ``accelbench run-info`` writes the run's run.json from that config (validated, so
  this step needs jsonschema: it runs after setup), then ``accelbench STAGE --run-file ... --backend ...
  --out-dir ...``, as the pipeline's rule does;
- a report/tool stage: the step's ``argv`` (a list; ``{results}``, ``{run_dir}``, ``{backend}`` and
  ``{pipeline_results}`` (the check's pipeline results/) filled in, never through a shell).

None of them is in the registry: one line ``KEY <step>: not available in this build (...)`` and exit 0,
so the check goes on. After a run, one ``KEY`` line per table of the stage (rows and statuses) and up to
six of its headline numbers (columns such as ``tflops`` or ``mfu``), for summary.txt.

    python bench/gpu_stage.py attention --stage attention --results /tmp/work/stage-results
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import yaml

from accelbench import registry

HEADLINE_COLUMNS = (
    "tflops",
    "tflops_median",
    "mfu",
    "mfu_pct",
    "mfu_percent",
    "tokens_per_s",
    "samples_per_s",
    "speedup",
)
PLACEHOLDERS = ("results", "run_dir", "backend", "pipeline_results")


def find_stage(candidates: list[str]) -> str | None:
    return next((c for c in candidates if c in registry.STAGES), None)


def step_config(path: Path, step: str, stage: str) -> dict:
    """The step's section of bench/gpu_stages.yaml, over the plug-in's ``gpu_check`` section if any."""
    sections = yaml.safe_load(path.read_text()) or {}
    own = dict(sections.get(step) or {})
    declared = getattr(registry.STAGES[stage], "gpu_check", None) or {}
    from accelbench.run.config import load_schema

    known = set(load_schema().get("properties") or {})
    mine = own.get("config") or {}
    dropped = sorted(k for k in mine if k not in known)
    if dropped:
        print(f"gpu_stage: {step}: config keys {dropped} are not in the config schema: dropped")
    # the plug-in declares its own section's keys: they go under its config key, and this file's keys of that
    # section over them
    key = registry.STAGES[stage].config_key
    config = {key: dict(declared)} if declared and key else {}
    for k, v in mine.items():
        if k in known:
            config[k] = {**config[k], **v} if isinstance(v, dict) and isinstance(config.get(k), dict) else v
    return {"config": config, "argv": own.get("argv")}


def fill(argv: list, values: dict) -> list[str]:
    """Each element with the placeholders filled in (only those: no other ``{...}`` is allowed)."""
    out = []
    for a in argv:
        text = str(a)
        for k in PLACEHOLDERS:
            text = text.replace("{" + k + "}", str(values[k]))
        if "{" in text or "}" in text:
            raise SystemExit(
                f"gpu_stage: argv element {a!r}: only "
                + ", ".join("{" + k + "}" for k in PLACEHOLDERS)
                + " are filled in"
            )
        out.append(text)
    return out


def headline_lines(stage: str, run_dir: Path, backend: str) -> list[str]:
    lines = []
    for table in registry.TABLES.values():
        if table.stage != stage or not table.file:
            continue
        path = run_dir / table.filename(backend)
        if not path.exists():
            lines.append(f"{path.name}: not written")
            continue
        import pandas as pd

        df = pd.read_csv(path)
        counts = df["status"].astype(str).value_counts().to_dict() if "status" in df else {}
        lines.append(f"{path.name}: {len(df)} rows (" + ", ".join(f"{k} {v}" for k, v in counts.items()) + ")")
        cols = [c for c in HEADLINE_COLUMNS if c in df]
        if not cols:
            continue
        ident = [
            c
            for c in df.columns
            if c
            in (
                "device",
                "dtype",
                "workload",
                "mode",
                "compile",
                "compiled",
                "shape_name",
                "seq_len",
                "batch_size",
                "n",
            )
        ]
        for _, r in df.head(6).iterrows():
            what = " ".join(f"{c}={r[c]}" for c in ident)
            nums = ", ".join(
                f"{c} {float(r[c]):.4g}" for c in cols if isinstance(r[c], (int, float)) and math.isfinite(float(r[c]))
            )
            lines.append(f"  {stage} {what}: {nums or 'no number'} ({r.get('status', '?')})")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("step", help="the check's step name (a section of --config)")
    p.add_argument("--stage", required=True, help="candidate stage names, comma-separated, first found wins")
    p.add_argument("--config", default=str(Path(__file__).with_name("gpu_stages.yaml")))
    p.add_argument("--results", required=True, help="a results folder for this step's run")
    p.add_argument("--backend", default="auto", help="auto: cuda where torch sees a GPU, else cpu")
    p.add_argument("--pipeline-results", default="", help="the check's pipeline results/ ({pipeline_results})")
    args = p.parse_args()
    candidates = [c for c in args.stage.split(",") if c]
    stage = find_stage(candidates)
    if stage is None:
        print(
            f"KEY {args.step}: not available in this build (no stage {' or '.join(candidates)} in "
            f"accelbench.registry.STAGES)"
        )
        return 0
    backend = args.backend
    if backend == "auto":
        import torch

        backend = (
            "cuda"
            if torch.cuda.is_available() and torch.version.hip is None
            else ("rocm" if torch.cuda.is_available() else "cpu")
        )
    cfg = step_config(Path(args.config), args.step, stage)
    results = Path(args.results)
    run_id = f"gpu-check-{args.step}".replace("_", "-")
    run_dir = results / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    kind = registry.STAGES[stage].kind
    py = [sys.executable, "-m", "accelbench.cli"]
    if cfg["argv"]:
        argv = py + fill(
            cfg["argv"],
            {
                "results": results,
                "run_dir": run_dir,
                "backend": backend,
                "pipeline_results": args.pipeline_results or results,
            },
        )
    elif kind in ("device", "run"):
        config = {"run": run_id, "backends": [backend], **cfg["config"]}
        info = subprocess.run(
            py
            + [
                "run-info",
                "--config-json",
                json.dumps(config),
                "--run",
                run_id,
                "--out",
                str(run_dir / registry.RUN_FILE),
            ]
        )
        if info.returncode != 0:
            print(f"KEY {args.step}: {stage}: run-info failed (exit {info.returncode}): its config in {args.config}?")
            return info.returncode
        argv = py + [
            stage,
            "--run-file",
            str(run_dir / registry.RUN_FILE),
            "--backend",
            backend,
            "--out-dir",
            str(run_dir),
        ]
    else:
        print(f"KEY {args.step}: {stage} is a {kind} stage and {args.config} gives it no argv: not run")
        return 0
    print("running:", " ".join(argv), flush=True)
    rc = subprocess.run(argv).returncode
    print(f"KEY {args.step}: {stage} exit {rc}")
    for line in headline_lines(stage, run_dir, backend):
        print(f"KEY {line}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
