"""Property-based: configs drawn from the schema's own structure.

Valid ones (every key optional, every value drawn from what the schema allows) give a DAG that
``snakemake --dry-run`` accepts, with one benchmark job per backend. Invalid ones (one key of a
valid config mutated: wrong type, out of range, bad enum value, shell metacharacters, empty list,
unknown key) stop with one line naming that key, before any job. The strategies are built by
walking ``workflow/schemas/config.schema.yaml``, so keys added later are covered too.

Each snakemake call costs a few seconds, so the snakemake-level properties keep few examples;
the same mutations are checked in-process (``accelbench.run.config.check``) with many more.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from accelbench.run import config as cfg
from accelbench.run.config import ConfigError

REPO = Path(__file__).resolve().parents[1]
SCHEMA = cfg.load_schema()
SNAKEMAKE_NOTICE = re.compile(r"^Config file \S+ is (extended|replaced) by additional config")
SHELL_NASTIES = ["a;b", "$(id)", "`id`", "a b", "a|b", "a&&b", "a>b", "x'y", "a\nb", "a\tb", "a*"]


def resolve(node: dict) -> dict:
    return cfg._resolve(SCHEMA, node)


# ---- valid configs from the schema ----------------------------------------------------------


def _integers(sub: dict):
    low = (
        sub["minimum"] if "minimum" in sub else sub.get("exclusiveMinimum", -1) + 1 if "exclusiveMinimum" in sub else 0
    )
    return st.integers(min_value=low, max_value=low + 4096)


def _numbers(sub: dict):
    if "minimum" in sub:
        low, exclude = sub["minimum"], False
    elif "exclusiveMinimum" in sub:
        low, exclude = sub["exclusiveMinimum"], True
    else:
        low, exclude = 0.0, False
    high, exclude_high = sub.get("maximum", sub.get("exclusiveMaximum", low + 100.0)), "exclusiveMaximum" in sub
    return st.floats(
        min_value=low,
        max_value=high,
        exclude_min=exclude,
        exclude_max=exclude_high,
        allow_nan=False,
        allow_infinity=False,
    )


def valid(sub: dict):
    """A strategy for values the schema accepts at ``sub``; every object key is optional."""
    sub = resolve(sub)
    if "anyOf" in sub:  # e.g. amp.compile: a boolean or a list of workloads; batch_size: an integer or "max"
        rest = {k: v for k, v in sub.items() if k != "anyOf"}
        return st.one_of([valid({**rest, **alt}) for alt in sub["anyOf"]])
    if "enum" in sub:
        return st.sampled_from(sub["enum"])
    kind = sub.get("type")
    if isinstance(kind, list):  # e.g. ["integer", "null"]: any one of the types, with the node's other bounds
        return st.one_of([st.none() if k == "null" else valid({**sub, "type": k}) for k in kind])
    if kind == "object":
        if "properties" in sub:
            required = set(sub.get("required", ()))
            return st.fixed_dictionaries(
                {k: valid(v) for k, v in sub["properties"].items() if k in required},
                optional={k: valid(v) for k, v in sub["properties"].items() if k not in required},
            )
        if "enum" not in resolve(sub.get("propertyNames", {})):  # free-form sections (fleet.check): left empty
            return st.just({})
        keys = resolve(sub.get("propertyNames", {})).get("enum", ["k"])
        return st.dictionaries(st.sampled_from(keys), valid(sub.get("additionalProperties", {})), max_size=2)
    if kind == "array":
        items = resolve(sub["items"])
        unique_by = (lambda x: json.dumps(x, sort_keys=True)) if sub.get("uniqueItems") else None
        return st.lists(valid(items), min_size=sub.get("minItems", 0), max_size=4, unique_by=unique_by)
    if kind == "integer":
        return _integers(sub)
    if kind == "number":
        return _numbers(sub)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "string":
        pattern = sub.get("pattern", r"^[a-z]{1,8}$")
        return st.from_regex(pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern, fullmatch=True)
    raise AssertionError(f"no strategy for schema node {sub}")


def satisfy_cross_keys(config: dict) -> dict:
    """Adjust a schema-valid config to the rules between keys (config.check_cross_keys), by setting
    the keys involved explicitly: warmup.window <= max_iters; amp.warmup_steps < steps;
    amp.batch_size <= data.n_train; amp.transformer.n_heads divides d_model; with a container
    runtime only backends that have an image (cpu, cuda, rocm); scaling.sizes.min_bytes <= max_bytes,
    scaling.world_sizes including 1 and within each scaling workload's n_train // its batch per rank (no
    batch_size max for a workload scaling trains); a soak at least one interval
    long; matmul.shapes reported under distinct names; each matmul.search axis min <= max; membw.min_kb below
    membw.max_mb."""
    filled = cfg.with_defaults(config)
    mm = filled["matmul"]
    if mm["shapes"]:
        by_label = {}
        for shape in mm["shapes"]:
            by_label.setdefault(cfg.shape_label(shape), shape)
        config.setdefault("matmul", {})["shapes"] = list(by_label.values())
    for axis in ("m", "n", "k"):
        a = mm["search"][axis]
        if a["min"] > a["max"]:
            config.setdefault("matmul", {}).setdefault("search", {})[axis] = {**a, "min": a["max"], "max": a["min"]}
    bw = filled["membw"]
    if bw["min_kb"] * 1024 >= bw["max_mb"] * 1024**2:
        config.setdefault("membw", {}).update(min_kb=1, max_mb=max(1, bw["max_mb"]))
    if filled["container"]["runtime"] != "none":
        kept = [b for b in filled["backends"] if b in ("cpu", "cuda", "rocm")]
        config["backends"] = kept or ["cpu"]
    warm, amp = filled["warmup"], filled["amp"]
    if warm["window"] > warm["max_iters"]:
        config.setdefault("warmup", {})["window"] = warm["max_iters"]
    if amp["warmup_steps"] >= amp["steps"]:
        config.setdefault("amp", {})["warmup_steps"] = amp["steps"] - 1
    if amp["batch_size"] > amp["data"]["n_train"]:
        config.setdefault("amp", {})["batch_size"] = amp["data"]["n_train"]
    mm = filled["matmul"]
    if mm["soak_s"] > 0 and mm["soak_interval_s"] > mm["soak_s"]:
        config.setdefault("matmul", {})["soak_interval_s"] = mm["soak_s"]
    satisfy_workload_sizes(config, cfg.with_defaults(config)["amp"])
    t = amp["transformer"]
    if t["d_model"] % t["n_heads"]:
        config.setdefault("amp", {}).setdefault("transformer", {})["d_model"] = t["n_heads"] * max(
            1, t["d_model"] // t["n_heads"]
        )
    # scaling: sizes in order; world size 1 measured; every world's global batch within amp.data.n_train
    scaling = filled["scaling"]
    sizes = scaling["sizes"]
    if sizes["min_bytes"] > sizes["max_bytes"]:
        config.setdefault("scaling", {}).setdefault("sizes", {})["min_bytes"] = sizes["max_bytes"]
    # (per workload of scaling.workloads: its batch per rank, gpt/resnet their section's, never max when enabled)
    from accelbench.stages.amp.workloads import PRESETS

    now = cfg.with_defaults(config)["amp"]
    most = None
    for workload in scaling["workloads"]:
        own = now.get(workload) if workload in PRESETS else None
        if isinstance(own, dict):
            batch, n_train = (own["batch_size"] if own["batch_size"] is not None else now["batch_size"]), own["n_train"]
            if batch == "max" and not scaling["enabled"]:
                continue
            if batch == "max" or batch > n_train:
                batch = min(now["batch_size"], n_train)
                config.setdefault("amp", {}).setdefault(workload, {})["batch_size"] = batch
        else:
            batch, n_train = min(now["batch_size"], now["data"]["n_train"]), now["data"]["n_train"]
        most = min(most or n_train // batch, max(1, n_train // batch))
    worlds = scaling["world_sizes"]
    if worlds:
        config.setdefault("scaling", {})["world_sizes"] = sorted({1} | {w for w in worlds if w <= (most or 1)})
    if config.get("compare_to") and config["compare_to"] == expected_run_id(config):
        del config["compare_to"]  # a run compared with itself is refused (tests/test_config.py)
    return config


def satisfy_workload_sizes(config: dict, amp: dict) -> None:
    """The gpt and resnet sections' rules (stages.amp.config_check.check_workload_sizes): heads divide d_model
    (an even head size for the llama style), a batch within the section's n_train, 1 <= warmup < steps with
    compile on (0 <= warmup < steps without)."""
    from accelbench.stages.amp.workloads import PRESETS, gpt, resnet

    out = config.setdefault("amp", {})
    if amp["warmup_steps"] >= amp["steps"]:
        amp = {**amp, "warmup_steps": amp["steps"] - 1}
    if amp.get("compile") is True and amp["warmup_steps"] < 1:
        out.update(steps=max(2, amp["steps"]), warmup_steps=1)
        amp = {**amp, "steps": max(2, amp["steps"]), "warmup_steps": 1}
    for workload in [w for w in amp["workloads"] if w in PRESETS]:
        own = dict(amp.get(workload) or {})
        mine = out.setdefault(workload, {})
        if workload == "gpt":
            sizes = gpt.resolve(own)
            d, h = sizes["d_model"], sizes["n_heads"]
            step = 2 if sizes["style"] == "llama" else 1
            if d % h or (d // h) % step:
                mine["d_model"] = h * step * max(1, (d // h) // step)
        batch = own.get("batch_size") if own.get("batch_size") is not None else amp["batch_size"]
        if isinstance(batch, int) and batch > own["n_train"]:
            mine["batch_size"] = own["n_train"]
        steps = own.get("steps") if own.get("steps") is not None else amp["steps"]
        warmup = own.get("warmup_steps") if own.get("warmup_steps") is not None else amp["warmup_steps"]
        compiled = amp.get("compile")
        least = 1 if (compiled is True or (isinstance(compiled, list) and workload in compiled)) else 0
        if warmup < least or warmup >= steps:
            mine.update(steps=max(steps, least + 1), warmup_steps=least)
        (gpt if workload == "gpt" else resnet).resolve({**own, **mine})  # still resolves


VALID = valid(SCHEMA).map(satisfy_cross_keys)


# ---- one mutation of a valid config ---------------------------------------------------------


def leaves(config, path=()):
    """(path, value) of every value in the config, containers included."""
    yield path, config
    if isinstance(config, dict):
        for k, v in config.items():
            yield from leaves(v, path + (k,))
    elif isinstance(config, list):
        for i, v in enumerate(config):
            yield from leaves(v, path + (i,))


def schema_at(path: tuple) -> dict:
    node = resolve(SCHEMA)
    for p in path:
        if "anyOf" in node:  # the alternative the value took (a list: the array one; a mapping: the object one)
            want = "array" if isinstance(p, int) else "object"
            node = resolve(next(a for a in node["anyOf"] if resolve(a).get("type") == want))
        if isinstance(p, int):
            node = resolve(node["items"])
        elif "properties" in node:
            node = resolve(node["properties"][p])
        else:
            node = resolve(node["additionalProperties"])
    return node


def named_key(path: tuple) -> tuple:
    """The key an error names for a bad value at ``path``: the path itself, or the key of an alternative
    (anyOf) above it, whose line says in words what it allows (x-allowed)."""
    for i in range(len(path) + 1):
        if "anyOf" in schema_at(path[:i]):
            return path[:i]
    return path


def key_text(path: tuple) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else ("." if out else "") + str(p)
    return out


def bad_values(sub: dict) -> list:
    """Values the schema rejects at ``sub``, each with the kind of mistake it is."""
    kind = sub.get("type")
    out = []
    if kind != "string":
        out.append(("type", "text"))
    if kind not in ("integer", "number"):
        out.append(("type", 3))
    else:
        out.append(("type", [1]))
        out.append(("type", float("nan")))
    if kind == "integer":
        out.append(("type", 2.5))
    if "minimum" in sub:
        out.append(("range", sub["minimum"] - 1))
    if "exclusiveMinimum" in sub:
        out.append(("range", sub["exclusiveMinimum"]))
    if "maximum" in sub:
        out.append(("range", sub["maximum"] + 1))
    if "enum" in sub:
        out.append(("enum", "not_a_" + str(sub["enum"][0])))
    if kind == "string" and "pattern" in sub:
        out += [("shell", s) for s in SHELL_NASTIES]
    if kind == "array" and sub.get("minItems", 0) > 0:
        out.append(("empty", []))
    if "anyOf" in sub:  # a value one alternative rejects may be another's: keep those the whole node rejects
        import jsonschema  # the test's own check of its candidates (the config code validates the same way)

        out = [
            (why, v)
            for why, v in out
            if not jsonschema.Draft7Validator({**sub, "definitions": SCHEMA.get("definitions", {})}).is_valid(v)
        ]
    return out


def replace(config, path: tuple, value):
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(config, list):
        return [replace(v, rest, value) if i == head else v for i, v in enumerate(config)]
    return {k: (replace(v, rest, value) if k == head else v) for k, v in config.items()}


@st.composite
def invalid(draw):
    """(config, message must start with (a prefix or a tuple of them), message must contain): one key of a valid
    config mutated."""
    config = draw(VALID)
    spots = [(p, v) for p, v in leaves(config) if p]
    objects = [p for p, v in leaves(config) if isinstance(v, dict) and "properties" in schema_at(p)]
    choices = []
    for path, _ in spots:
        for kind, bad in bad_values(schema_at(path)):
            choices.append(("value", path, kind, bad))
    for path in objects:
        choices.append(("unknown", path, "unknown", None))
    action, path, kind, bad = draw(st.sampled_from(choices))
    if action == "unknown":
        node = config
        for p in path:
            node = node[p]
        known = sorted(schema_at(path)["properties"])
        typo = draw(st.sampled_from(known))[:-1] + "_"  # a near-miss of a real key
        node_bad = {**node, typo: 1}
        where = key_text(path) if path else "config"
        return replace(config, path, node_bad), f"{where}: unknown key(s) {typo!r}", "allowed: " + ", ".join(known)
    sub = schema_at(path)
    contains = {
        "enum": "allowed: " + ", ".join(map(str, sub.get("enum", []))),
        "shell": "is not allowed",
        "range": "out of range",
        "empty": "must not be empty",
    }.get(kind, "")
    named = named_key(path)
    if named != path:  # inside an alternative (anyOf): the item's own path or the alternative's key, in its words
        return (
            replace(config, path, bad),
            (key_text(path) + ":", key_text(named) + ":"),
            schema_at(named).get("x-allowed") or contains,
        )
    return replace(config, path, bad), key_text(path) + ":", contains


# ---- in-process: many examples --------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALID)
def test_valid_configs_pass_check(config):
    cfg.check(config)
    filled = cfg.with_defaults(config)
    cfg.check(filled)
    assert cfg.config_hash(filled) == cfg.config_hash(cfg.with_defaults(filled))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(invalid())
def test_invalid_configs_name_the_key(case):
    config, starts, contains = case
    with pytest.raises(ConfigError) as info:
        cfg.check(config)
    message = str(info.value)
    assert "\n" not in message and message.startswith(starts) and contains in message, (message, starts)


# ---- the real snakemake command: few examples -----------------------------------------------

# a snakemake call takes seconds: no shrinking (it would call snakemake hundreds of times); a failing
# example is printed as drawn
SNAKEMAKE_PHASES = [Phase.explicit, Phase.reuse, Phase.generate]
SNAKEMAKE_CHECKS = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
# 3-4 s a call: the in-process properties above draw hundreds of configs; these check that what passes or
# fails there passes or fails the real command the same way, which a few draws a run show (each CI run
# draws new ones)
VALID_DAG_EXAMPLES = 8
INVALID_STOP_EXAMPLES = 4


def snakemake(workdir: Path, config: dict, *args: str) -> subprocess.CompletedProcess:
    from workflow_runner import run_snakemake

    return run_snakemake(
        workdir, "--cores", "1", *args, config=config, config_name="c.yaml", env={"OMP_NUM_THREADS": "1"}
    )


def job_counts(stdout: str) -> dict[str, int]:
    """The 'Job stats' table of a dry run: rule -> number of jobs."""
    table = stdout.split("Job stats:", 1)[1]
    counts = {}
    for line in table.splitlines()[3:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    return counts


def expected_run_id(config: dict) -> str:
    if config.get("run"):
        return config["run"]
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname().split(".")[0]) or "host"
    return f"{host}-{config.get('container', {}).get('runtime', 'none')}"


@pytest.mark.slow
@settings(
    max_examples=VALID_DAG_EXAMPLES, deadline=None, phases=SNAKEMAKE_PHASES, suppress_health_check=SNAKEMAKE_CHECKS
)
@given(config=VALID)
@example(config={"run": "candidate", "compare_to": "baseline"})  # the compare step, whatever the draws
def test_valid_config_gives_dag(tmp_path_factory, config):
    work = tmp_path_factory.mktemp("valid")
    baseline = config.get("compare_to") or ""
    if baseline:
        # compare_to must name a finished run (checked before any job): plant one, the only thing under results/
        (work / "results" / baseline).mkdir(parents=True)
        (work / "results" / baseline / "run.json").write_text("{}")
    proc = snakemake(work, config, "--dry-run")
    if config.get("container", {}).get("runtime") == "apptainer":
        # valid, but only under `snakemake --sdm apptainer` (which needs the apptainer binary to build a
        # DAG): without it the run stops at once with one line saying so
        errors = [l for l in proc.stderr.splitlines() if l.strip() and not SNAKEMAKE_NOTICE.match(l)]
        assert proc.returncode != 0 and len(errors) == 1, (config, proc.stderr)
        assert errors[0].startswith("accelbench: config error: container.runtime: apptainer needs"), errors
        return
    assert proc.returncode == 0, (config, proc.stdout[-2000:] + proc.stderr[-3000:])
    backends = config.get("backends", ["cpu"])
    accel = [b for b in backends if b != "cpu"]
    counts = job_counts(proc.stdout)
    assert counts.get("run_info") == 1 and counts.get("detect") == 1, counts
    for rule in ("warmup", "matmul", "amp"):
        assert counts.get(rule) == len(backends), (rule, counts)
    assert counts.get("transfer", 0) == len(accel), counts
    assert counts.get("report") == 1, counts
    assert counts.get("compare", 0) == (1 if baseline else 0), counts
    run = expected_run_id(config)
    for b in backends:
        assert f"results/{run}/matmul_{b}.csv" in proc.stdout, (run, b)
    written = (
        sorted(str(p.relative_to(work)) for p in (work / "results").rglob("*")) if (work / "results").exists() else []
    )
    assert written == ([f"results/{baseline}", f"results/{baseline}/run.json"] if baseline else []), written


@pytest.mark.slow
@settings(
    max_examples=INVALID_STOP_EXAMPLES, deadline=None, phases=SNAKEMAKE_PHASES, suppress_health_check=SNAKEMAKE_CHECKS
)
@given(case=invalid())
def test_invalid_config_stops_snakemake_with_one_line(tmp_path_factory, case):
    config, starts, contains = case
    work = tmp_path_factory.mktemp("invalid")
    proc = snakemake(work, config)  # a real run, not a dry run: no job may start
    assert proc.returncode != 0, (config, proc.stdout[-2000:])
    errors = [l for l in proc.stderr.splitlines() if l.strip() and not SNAKEMAKE_NOTICE.match(l)]
    assert len(errors) == 1, (config, proc.stderr)
    assert errors[0].startswith("accelbench: config error: " + starts) and contains in errors[0], (errors, starts)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (work / "results").exists()
