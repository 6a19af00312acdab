"""``accelbench ab``: an interleaved A/B measurement. A baseline and a candidate are measured alternately, as R
fresh runs each (A B A B ..., A B B A ..., or each pair in a seeded random order), on one machine, then compared as
two groups of runs (``accelbench compare --baseline ... --candidate ...``), whose verdict and exit code it returns.

Why interleave. Two runs of one config made one after the other differ by more than either run's own interval
says (issue 21: 63% false verdicts over 15 pairs of 6 sequential runs; later runs drift slower). The run, a fresh
process, is the unit of replication; and when the two sides alternate, a slow drift of the machine (thermals, a
neighbour on the host, allocator or page-cache state) falls on both sides alike instead of on the side measured
later. ``alternate`` (A B A B) leaves a linear drift of one slot in B's favour per pair; ``abba`` (A B B A ...)
cancels a linear drift exactly over every four runs; ``random`` orders each pair A B or B A at random
(seeded), so no fixed pattern of the machine can line up with a side. A fully random permutation is not offered:
it can put most of A before most of B, which is the confounding interleaving exists to avoid.

What a side is. The two sides may differ as two config files (``--baseline-config``/``--candidate-config``), two
Python environments (``--baseline-python``/``--candidate-python``: that interpreter runs snakemake and its
environment's ``accelbench`` runs every stage, e.g. two torch builds in two venvs), or two container images
(``--baseline-image``/``--candidate-image``: ``container.images`` of every backend, taken as they are, not
built). Each repetition is an ordinary pipeline run with its own folder ``results/<name>-a-01``,
``results/<name>-b-01``, ...: ``snakemake`` of the run's targets (its tables, samples and the history-store
receipt; ``workflow/rules``), so it has its provenance (run.json, devices.json), goes into the history store and is
in the next report like any run. Every command is an argv list (no shell); every config value is checked by the
schema before the first run starts, and a bad one is one line naming the key, exit 2.

R, the runs per side. ``measure.power.DEFAULT_RUNS`` gives 80% power against a 10% slowdown at the run-to-run
spread measured on this kind of machine (``measure.power`` names the measurement and is the calculation). ``--runs`` sets
it. A repetition that fails (its snakemake exits non-zero) is reported and left out; the others go on, and the
comparison uses the runs that finished (exit 2 when a side has none).

Files: ``<results>/ab/<name>/plan.json`` (the order, each run's side, argv and outcome), each run's config
``<run id>.yaml`` (exactly what it ran: the workdir's config.yaml with the side's file merged over it, as
``snakemake --configfile`` merges, and ``run`` set), its snakemake log ``<run id>.log``, and the comparison's
CSVs under ``compare/``.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .. import registry
from ..measure.power import DEFAULT_RUNS, MEASURED_SPREAD_LOG_SD, SLOWDOWN
from .config import ConfigError, check, with_defaults
from .io import atomic_write_json, atomic_write_text

ORDERS = ("alternate", "abba", "random")
SIDES = (("a", "baseline"), ("b", "candidate"))
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,56}$")  # the run id <name>-a-NN stays within the schema's 64
AB_DIR = "ab"
PLAN_FILE = "plan.json"


# ------------------------------------------------------------------------------------------------- the plan


def order_plan(runs: int, order: str = "alternate", seed: int = 0) -> list[tuple[str, int]]:
    """The measurement order: ``[(side, repetition), ...]`` with side "a" (baseline) or "b" (candidate) and
    repetitions 1..runs, each side ``runs`` times. Every consecutive pair holds one A and one B (so at any point
    the two sides have had the same number of runs, give or take one): ``alternate`` A B A B ..., ``abba``
    A B B A A B ..., ``random`` each pair A B or B A by a ``random.Random(seed)`` coin."""
    if order not in ORDERS:
        raise ConfigError(f"--order: {order!r} is not allowed; allowed: {', '.join(ORDERS)}")
    if not isinstance(runs, int) or runs < 1:
        raise ConfigError(f"--runs: {runs!r} is not allowed; allowed: an integer of at least 1")
    rng = random.Random(seed)
    plan = []
    for i in range(1, runs + 1):
        if order == "alternate":
            first = "a"
        elif order == "abba":
            first = "a" if i % 2 else "b"
        else:
            first = rng.choice("ab")
        plan += [(first, i), ("b" if first == "a" else "a", i)]
    return plan


def run_id(name: str, side: str, repetition: int) -> str:
    return f"{name}-{side}-{repetition:02d}"


@dataclass
class Side:
    """One side of the comparison: its label (a/b), role, config file, interpreter and image."""

    label: str
    role: str
    config_file: Path
    raw: dict  # the config as run (the workdir's config.yaml with the side's file merged over it), without run
    python: str  # the interpreter that runs snakemake; its bin folder is first on the jobs' PATH
    image: str | None = None
    runs: list[str] = field(default_factory=list)


def _merge(base: dict, over: dict) -> dict:
    """``over`` merged into a copy of ``base`` key by key, nested mappings recursively (snakemake's update_config,
    which is how ``snakemake --configfile`` merges a file over the workflow's config.yaml)."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def _read_yaml(path: Path, key: str) -> dict:
    if not path.is_file():
        raise ConfigError(f"{key}: {str(path)!r} does not exist")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{key}: {str(path)!r} is not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{key}: {str(path)!r} must hold a mapping of config keys, got {type(raw).__name__}")
    return raw


def check_python(python: str, key: str) -> str:
    """An interpreter for one side: an existing file, with ``accelbench`` next to it (the jobs call ``accelbench``
    from PATH, so its folder must hold that environment's) and able to import accelbench and snakemake."""
    path = Path(python).absolute()  # not resolved: a venv's python is a link out of the venv
    if not path.is_file() or not os.access(path, os.X_OK):
        raise ConfigError(f"{key}: {python!r} is not an executable file")
    if not (path.parent / "accelbench").is_file():
        raise ConfigError(
            f"{key}: {python!r} has no accelbench next to it ({path.parent}/accelbench); allowed: the "
            "python of an environment with accelbench installed"
        )
    probe = subprocess.run(
        [str(path), "-c", "import accelbench, snakemake"], capture_output=True, text=True, timeout=120, check=False
    )
    if probe.returncode:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        raise ConfigError(f"{key}: {python!r} cannot import accelbench and snakemake ({last})")
    return str(path)


def side_config(base: dict, side_file: dict, image: str | None, key: str) -> dict:
    """A side's config: ``side_file`` over the workdir's ``base``; with an image, every backend's
    ``container.images`` entry set to it and ``container.build`` off (the image is taken as it is)."""
    raw = _merge(base, side_file)
    raw.pop("run", None)
    if image is not None:
        check_side(raw, "ab-check", key.replace("-image", "-config"))  # the config itself first, then the image
        filled = with_defaults(raw)
        runtime = filled["container"]["runtime"]
        if runtime == "none":
            raise ConfigError(
                f"{key}: needs container.runtime docker, podman or apptainer in the config "
                "(it is none: the stages run on the host)"
            )
        raw.setdefault("container", {})
        raw["container"]["images"] = {**raw["container"].get("images", {}), **dict.fromkeys(filled["backends"], image)}
        raw["container"]["build"] = False
    return raw


def check_side(raw: dict, rid: str, key: str) -> None:
    try:
        check({**raw, "run": rid})
    except ConfigError as exc:
        raise ConfigError(f"{key}: {exc}") from None


def default_snakefile() -> Path | None:
    """The Snakefile of the checkout this package lives in (an editable install), or None."""
    candidate = Path(__file__).resolve().parents[3] / "Snakefile"
    return candidate if candidate.is_file() else None


def snakemake_argv(
    python: str,
    snakefile: Path,
    workdir: Path,
    config_file: Path,
    rid: str,
    cores: int,
    runtime: str = "none",
    extra: tuple[str, ...] = (),
) -> list[str]:
    """The argv of one repetition: snakemake of the run's targets (its history receipt, which needs every table
    and samples file of the run) with exactly ``config_file`` as the config (``--replace-workflow-config``: the
    file already holds the workdir's config.yaml merged under the side's)."""
    target = f"{registry.RESULTS}/{rid}/{registry.HISTORY_RECEIPT}"
    argv = [
        python,
        "-m",
        "snakemake",
        "-s",
        str(snakefile),
        "--directory",
        str(workdir),
        "--configfile",
        str(config_file),
        "--replace-workflow-config",
        "--cores",
        str(cores),
    ]
    if runtime == "apptainer":
        argv += ["--sdm", "apptainer"]
    return [*argv, *extra, target]


def run_env(python: str, env: dict | None = None) -> dict:
    """The environment of one repetition: the interpreter's folder first on PATH, so the rules' ``accelbench``
    is that environment's."""
    env = dict(os.environ if env is None else env)
    env["PATH"] = os.pathsep.join([str(Path(python).parent), *([env["PATH"]] if env.get("PATH") else [])])
    return env


@dataclass
class Plan:
    name: str
    workdir: Path
    results: Path
    out_dir: Path
    snakefile: Path
    cores: int
    order: list[tuple[str, int]]
    sides: dict[str, Side]

    def steps(self) -> list[dict]:
        """Each repetition in order: its run id, side, config file, argv and environment's PATH head."""
        out = []
        for label, rep in self.order:
            side = self.sides[label]
            rid = run_id(self.name, label, rep)
            cfg = self.out_dir / f"{rid}.yaml"
            runtime = with_defaults(side.raw)["container"]["runtime"]
            out.append(
                {
                    "run_id": rid,
                    "side": label,
                    "role": side.role,
                    "repetition": rep,
                    "config": str(cfg),
                    "argv": snakemake_argv(side.python, self.snakefile, self.workdir, cfg, rid, self.cores, runtime),
                }
            )
        return out


def build_plan(args) -> Plan:
    """Every check of the input, before any run starts: one ConfigError naming the flag or key."""
    name = args.name
    if not NAME_RE.match(name or ""):
        raise ConfigError(
            f"--name: {name!r} is not allowed; allowed: letters, digits and ._- (starting with a "
            "letter or digit), at most 57 characters"
        )
    runs = args.runs if args.runs is not None else DEFAULT_RUNS
    if runs < 1:
        raise ConfigError(f"--runs: {runs} is not allowed; allowed: an integer of at least 1")
    if args.cores is not None and args.cores < 1:
        raise ConfigError(f"--cores: {args.cores} is not allowed; allowed: an integer of at least 1")
    if args.min_effect is not None and not (0 <= args.min_effect < 1):
        raise ConfigError(f"--min-effect: {args.min_effect} is not allowed; allowed: a fraction in [0, 1)")
    order = order_plan(runs, args.order, args.seed)
    workdir = Path(args.workdir).absolute()
    if not workdir.is_dir():
        raise ConfigError(f"--workdir: {str(workdir)!r} is not a folder")
    snakefile = Path(args.snakefile).absolute() if args.snakefile else default_snakefile()
    if snakefile is None or not snakefile.is_file():
        raise ConfigError(
            f"--snakefile: {str(args.snakefile or 'the checkout’s Snakefile')!r} does not exist; "
            "allowed: the accelbench checkout's Snakefile"
        )
    base_file = workdir / "config.yaml"
    base = _read_yaml(base_file, "config.yaml (the workdir's)") if base_file.is_file() else {}
    sides = {}
    for label, role in SIDES:
        cfg_arg = getattr(args, f"{role}_config") or (args.baseline_config if role == "candidate" else None)
        path = Path(cfg_arg) if cfg_arg else None
        key = f"--{role}-config"
        own = _read_yaml(path, key) if path else {}
        image = getattr(args, f"{role}_image")
        raw = side_config(base, own, image, f"--{role}-image" if image else key)
        py_arg = getattr(args, f"{role}_python")
        python = check_python(py_arg, f"--{role}-python") if py_arg else str(Path(sys.executable).absolute())
        sides[label] = Side(label, role, path or base_file, raw, python, image)
    results = workdir / registry.RESULTS
    for side in sides.values():
        check_side(side.raw, run_id(name, side.label, runs), f"--{side.role}-{'image' if side.image else 'config'}")
    for label, rep in order:
        rid = run_id(name, label, rep)
        if (results / rid).exists():
            raise ConfigError(
                f"--name: {registry.RESULTS}/{rid} exists already; allowed: a name no earlier A/B run used"
            )
    out_dir = results / AB_DIR / name
    return Plan(name, workdir, results, out_dir, snakefile, args.cores or (os.cpu_count() or 1), order, sides)


# ------------------------------------------------------------------------------------------------- the runs


def compare_argv(plan: Plan, baseline: list[str], candidate: list[str], min_effect: float | None) -> list[str]:
    """``accelbench compare``'s arguments for the two groups (in this process: the same accelbench as ab's)."""
    argv = [
        "compare",
        "--results",
        str(plan.results),
        "--baseline",
        ",".join(baseline),
        "--candidate",
        ",".join(candidate),
        "--out-dir",
        str(plan.out_dir / "compare"),
    ]
    if min_effect is not None:
        argv += ["--min-effect", repr(float(min_effect))]
    return argv


def execute(plan: Plan, min_effect: float | None = None, out=None) -> int:
    """Every repetition in order, then the group comparison: its exit code (0 same, 1 slower, 2 unusable)."""
    out = out or sys.stdout  # at call time: whatever stdout is then (a redirect, a test's capture)
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    steps = plan.steps()
    record = {
        "name": plan.name,
        "workdir": str(plan.workdir),
        "snakefile": str(plan.snakefile),
        "cores": plan.cores,
        "sides": {
            s.label: {"role": s.role, "config_file": str(s.config_file), "python": s.python, "image": s.image}
            for s in plan.sides.values()
        },
        "order": [s["run_id"] for s in steps],
        "runs": steps,
    }
    atomic_write_json(plan.out_dir / PLAN_FILE, record)
    for i, step in enumerate(steps, 1):
        side = plan.sides[step["side"]]
        atomic_write_text(step["config"], yaml.safe_dump({**side.raw, "run": step["run_id"]}, sort_keys=False))
        t0 = time.monotonic()
        with open(plan.out_dir / f"{step['run_id']}.log", "w") as log:
            rc = subprocess.run(
                step["argv"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=run_env(side.python),
                cwd=plan.workdir,
                check=False,
            ).returncode
        step.update(returncode=rc, wall_s=round(time.monotonic() - t0, 1), ok=rc == 0)
        if rc == 0:
            side.runs.append(step["run_id"])
        print(
            f"[{i}/{len(steps)}] {step['run_id']} ({side.role}): "
            + (
                f"done in {step['wall_s']:.0f} s"
                if rc == 0
                else f"FAILED (snakemake exit {rc}; log {plan.out_dir / (step['run_id'] + '.log')})"
            ),
            file=out,
            flush=True,
        )
        atomic_write_json(plan.out_dir / PLAN_FILE, record)
    base, cand = plan.sides["a"].runs, plan.sides["b"].runs
    if not base or not cand:
        empty = "baseline" if not base else "candidate"
        print(f"accelbench ab: no {empty} run finished; nothing to compare", file=sys.stderr)
        return 2
    from ..cli import main as accelbench_main  # lazily: the CLI imports every stage's declaration

    argv = compare_argv(plan, base, cand, min_effect)
    record["compare"] = {"argv": ["accelbench", *argv]}
    try:
        rc = accelbench_main(argv)
    except SystemExit as exc:  # argparse's refusal of an argument: unusable input
        rc = exc.code if isinstance(exc.code, int) else 2
    record["compare"]["returncode"] = rc
    atomic_write_json(plan.out_dir / PLAN_FILE, record)
    verdict = {0: "no point slower", 1: "slower", 2: "unusable input"}.get(rc, f"exit {rc}")
    print(
        f"accelbench ab {plan.name}: {len(base)} baseline and {len(cand)} candidate runs, interleaved "
        f"({' '.join(s['side'].upper() for s in steps)}): {verdict} (exit {rc})",
        file=out,
    )
    return rc


def add_arguments(p) -> None:
    p.add_argument("--name", default="ab", help="the runs' ids are <name>-a-01, <name>-b-01, ... (default: ab)")
    for role in ("baseline", "candidate"):
        p.add_argument(
            f"--{role}-config",
            default=None,
            metavar="YAML",
            help=f"the {role}'s config file, merged over the workdir's config.yaml as snakemake does"
            + (" (default: the baseline's)" if role == "candidate" else " (default: none)"),
        )
        p.add_argument(
            f"--{role}-python",
            default=None,
            metavar="PYTHON",
            help=f"the {role}'s interpreter: it runs snakemake and its environment's accelbench every "
            "stage (default: this one)",
        )
        p.add_argument(
            f"--{role}-image",
            default=None,
            metavar="IMAGE",
            help=f"the {role}'s container image for every backend (needs container.runtime docker, "
            "podman or apptainer; taken as it is, not built)",
        )
    p.add_argument(
        "--runs",
        type=int,
        default=None,
        metavar="R",
        # argparse %-formats help: a literal percent sign is %%
        help=f"runs per side (default {DEFAULT_RUNS}: 80%% power against a {SLOWDOWN * 100:.0f}%% slowdown at "
        f"the measured run-to-run spread, {MEASURED_SPREAD_LOG_SD * 100:.1f}%% log SD)",
    )
    p.add_argument("--order", default="alternate", help=f"{', '.join(ORDERS)} (default: alternate, A B A B ...)")
    p.add_argument("--seed", type=int, default=0, help="the seed of --order random (default 0)")
    p.add_argument("--min-effect", type=float, default=None, help="compare's --min-effect (default: compare's)")
    p.add_argument("--cores", type=int, default=None, help="snakemake --cores (default: every CPU)")
    p.add_argument("--workdir", default=".", help="where results/ and config.yaml are (default: here)")
    p.add_argument("--snakefile", default=None, help="the pipeline's Snakefile (default: this checkout's)")
    p.add_argument("--dry-run", action="store_true", help="print the order and each run's argv; run nothing")


def cli(args) -> int:
    plan = build_plan(args)
    if args.dry_run:
        for step in plan.steps():
            print(f"{step['run_id']} ({step['role']}): {json.dumps(step['argv'])}")
        return 0
    return execute(plan, args.min_effect)
