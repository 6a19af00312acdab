"""Loading and checking the configuration: every check of it, in this one module.

The schema (``accelbench/data/config.schema.yaml``, shipped in the package; the workflow's
``workflow/schemas/config.schema.yaml`` is a link to it) is the single definition of what a valid
config is. Snakemake checks it when the workflow starts (``snakemake.utils.validate``, which also
fills defaults); ``check`` is the same check with a one-line message naming the key and what it
allows, followed by the rules between keys a schema cannot say (``check_cross_keys``: warm-up, AMP,
containers), so a bad value stops the run before any job, and says why in one line.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from .. import backends, registry

if TYPE_CHECKING:  # annotations only: jsonschema itself is imported where a config is validated
    import jsonschema

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "data" / "config.schema.yaml"

# ---- container settings (used by run.containers for every argv it builds) ----
RUNTIMES = ("none", "docker", "podman", "apptainer")
ENGINES = ("docker", "podman")  # runtimes driven by our own argv (Apptainer is driven by Snakemake)
# Same rule as the schema's definitions.image (plus a leading / or . for a local .sif path).
IMAGE_RE = re.compile(r"^[A-Za-z0-9./][A-Za-z0-9._/:@+=-]{0,254}$")
BUILD_ARG_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
BUILD_ARG_VALUE_RE = re.compile(r"^[A-Za-z0-9._/:@+=,%~-]{0,500}$")


class ConfigError(ValueError):
    """A config value the schema rejects; str() is one line naming the key."""


_SCHEMA_CACHE: dict[tuple[str, int], dict] = {}


def load_schema(path: Path | str | None = None) -> dict:
    """The schema as a dict (a fresh copy; parsed once per file version: PyYAML is slow)."""
    path = Path(path) if path else SCHEMA_PATH
    key = (str(path.resolve()), path.stat().st_mtime_ns)
    if key not in _SCHEMA_CACHE:
        with open(path) as fh:
            _SCHEMA_CACHE[key] = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    schema = copy.deepcopy(_SCHEMA_CACHE[key])
    return add_plugin_sections(schema) if path.resolve() == SCHEMA_PATH.resolve() else schema


def add_plugin_sections(schema: dict, stages=None) -> dict:
    """The whole schema: the file's, plus each stage plug-in's own config section ``config[Stage.config_key]``
    (its ``schema`` fragment, with its ``defaults`` as the properties' defaults). A section the file already has
    (the stages written before plug-ins) must not be declared again."""
    props = schema.setdefault("properties", {})
    for stage in registry.STAGES.values() if stages is None else stages:
        if not stage.config_key or not (stage.schema or stage.defaults):
            continue
        if stage.config_key in props:
            raise ValueError(
                f"stage {stage.name}: config section {stage.config_key!r} is in the schema file and "
                "in its plug-in; declare it once"
            )
        section = copy.deepcopy(stage.schema) or {}
        section.setdefault("type", "object")
        section.setdefault("default", {})
        for key, value in stage.defaults.items():
            section.setdefault("properties", {}).setdefault(key, {}).setdefault("default", copy.deepcopy(value))
        props[stage.config_key] = section
    return schema


def _key_path(error: jsonschema.ValidationError) -> str:
    parts = []
    for p in error.absolute_path:
        parts.append(f"[{p}]" if isinstance(p, int) else ("." if parts else "") + str(p))
    return "".join(parts) or "<top level>"


def _resolve(schema: dict, sub: dict) -> dict:
    ref = sub.get("$ref")
    if not ref or not ref.startswith("#/"):
        return sub
    node = schema
    for part in ref[2:].split("/"):
        node = node[part]
    return {**node, **{k: v for k, v in sub.items() if k != "$ref"}}


def _short(value, limit: int = 60) -> str:
    """repr() of a config value, cut to ``limit`` characters (always one line: repr escapes newlines)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe_pattern(pattern: str, value) -> str:
    """Say in words what a ``^[first][rest]{0,N}$`` name pattern allows, and what in ``value`` breaks it.

    Falls back to quoting the pattern when it has another shape.
    """
    classes = re.findall(r"\[([^\]]+)\]", pattern)
    bounds = re.findall(r"\{0,(\d+)\}", pattern)
    if not classes:
        return f"allowed: pattern {pattern}"
    rest = max(classes, key=len)
    kinds = (["letters"] if "A-Z" in rest or "a-z" in rest else []) + (["digits"] if "0-9" in rest else [])
    punct = " ".join(rest.replace("A-Z", "").replace("a-z", "").replace("0-9", ""))
    allowed = ", ".join(kinds) + (f" and {punct}" if punct else "")
    max_len = int(bounds[-1]) + (len(classes) > 1) if bounds else None
    if max_len:
        allowed += f", at most {max_len} characters"
    if len(classes) > 1:
        first = classes[0]
        options = (["a letter"] if "A-Z" in first or "a-z" in first else []) + (["a digit"] if "0-9" in first else [])
        options += list(first.replace("A-Z", "").replace("a-z", "").replace("0-9", ""))
        allowed += ", starting with " + (
            ", ".join(options[:-1]) + " or " + options[-1] if len(options) > 1 else options[0]
        )
    why = ""
    if isinstance(value, str):
        bad = next((ch for ch in value if not re.fullmatch(f"[{rest}]", ch)), None)
        if bad is not None:
            why = f" (contains {bad!r})"
        elif len(classes) > 1 and value and not re.fullmatch(f"[{classes[0]}]", value[0]):
            why = f" (starts with {value[0]!r})"
        elif max_len and len(value) > max_len:
            why = f" (is {len(value)} characters long)"
    return f"is not allowed{why}; allowed: {allowed}; no spaces or shell metacharacters"


def describe_error(error: jsonschema.ValidationError, schema: dict) -> str:
    """One line: the key, the offending value, and what the schema allows there."""
    return " ".join(_describe_error(error, schema).split("\n"))


def _describe_error(error: jsonschema.ValidationError, schema: dict) -> str:
    key = _key_path(error)
    sub = _resolve(schema, error.schema) if isinstance(error.schema, dict) else {}
    v = error.validator
    parent = getattr(error, "parent", None)  # a branch of an anyOf that says in words what it allows
    if parent is not None and isinstance(parent.schema, dict) and parent.schema.get("x-allowed"):
        return f"{key}: {_short(error.instance)} is not allowed; allowed: {parent.schema['x-allowed']}"
    if v == "anyOf" and sub.get("x-allowed"):
        return f"{key}: {_short(error.instance)} is not allowed; allowed: {sub['x-allowed']}"
    if v == "additionalProperties":
        allowed = sorted((error.schema.get("properties") or {}).keys())
        extra = [k for k in error.instance if k not in allowed] if isinstance(error.instance, dict) else []
        where = key if key != "<top level>" else "config"
        return f"{where}: unknown key(s) {', '.join(map(repr, extra))}; allowed: {', '.join(allowed)}"
    if v == "enum":
        return f"{key}: {_short(error.instance)} is not allowed; allowed: {', '.join(map(str, sub.get('enum', error.validator_value)))}"
    if v == "propertyNames":
        return f"{key}: {error.message}"
    if v == "type":
        if isinstance(error.instance, float) and not math.isfinite(error.instance):
            return f"{key}: {error.instance!r} is not allowed; expected a finite number"
        return f"{key}: {_short(error.instance)} has the wrong type; expected {error.validator_value}"
    if v in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}[v]
        return f"{key}: {_short(error.instance)} is out of range; allowed: {op} {error.validator_value}"
    if v == "minItems":
        return f"{key}: must not be empty (at least {error.validator_value} item(s))"
    if v == "uniqueItems":
        return f"{key}: {_short(error.instance)} has duplicate items"
    if v == "required":
        missing = [k for k in error.validator_value if isinstance(error.instance, dict) and k not in error.instance]
        return f"{key}: missing key(s) {', '.join(map(repr, missing))}; required: {', '.join(error.validator_value)}"
    if v == "pattern":
        return f"{key}: {_short(error.instance)} {_describe_pattern(error.validator_value, error.instance)}"
    return f"{key}: {_short(error.message, 200)}"


def _is_integer(checker, instance) -> bool:
    """An int, not a bool and not a float such as 1.0 (a size of 1.0 would reach torch as a float)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


def _is_number(checker, instance) -> bool:
    """An int or a finite float: NaN passes every range check and infinity makes a time budget endless."""
    if isinstance(instance, bool):
        return False
    return isinstance(instance, int) or (isinstance(instance, float) and math.isfinite(instance))


def _pattern(validator, pattern, instance, schema):
    """``pattern`` with JSON Schema's (ECMA-262) meaning of a final ``$``: the end of the string.

    Python's ``re`` also lets ``$`` match before a trailing newline, so jsonschema would accept
    ``"run1\\n"`` as a run id; here a final ``$`` means ``\\Z``.
    """
    if not isinstance(instance, str):
        return
    strict = pattern[:-1] + r"\Z" if pattern.endswith("$") and not pattern.endswith("\\$") else pattern
    if not re.search(strict, instance):
        import jsonschema  # lazily: validating needs it, the GPU check's headline steps do not (see _validator)

        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _validator(schema: dict):
    import jsonschema  # not at module level: the GPU check's headline steps import this module without it

    base = jsonschema.validators.validator_for(schema)
    checker = base.TYPE_CHECKER.redefine_many({"integer": _is_integer, "number": _is_number})
    return jsonschema.validators.extend(base, validators={"pattern": _pattern}, type_checker=checker)(schema)


def check(config: dict, schema: dict | None = None) -> dict:
    """Validate ``config`` (unchanged) and return it; raise ConfigError with a one-line message.

    Among several errors the one jsonschema ranks most relevant is reported (``best_match``),
    and for errors inside ``anyOf``-like branches the deepest. Stricter than the schema's plain
    JSON types (so stricter than snakemake's ``validate``, which runs after this): an integer is
    never a bool or a float such as 1.0, and a number is never NaN or infinite.
    """
    schema = schema or load_schema()
    errors = list(_validator(schema).iter_errors(config))
    if errors:
        import jsonschema  # lazily, as in _validator

        best = jsonschema.exceptions.best_match(errors)
        raise ConfigError(describe_error(best, schema))
    check_cross_keys(with_defaults(config, schema))
    return config


def check_cross_keys(config: dict) -> None:
    """Rules between keys that a JSON schema cannot say, on the defaults-filled config; checked with
    the schema so that they too stop the run before any job (not halfway, when the stage gets there). Each stage's
    own rules are its declaration's ``config_check`` (a hook to ``check(config)``, in its package)."""
    for stage in registry.STAGES.values():
        if stage.config_check is not None:
            stage.config_check.load()(config)
    if "container" in config and "backends" in config:
        check_container_config(config)


def shape_label(shape: dict) -> str:
    """The name a ``matmul.shapes`` entry is reported under: its ``name``, else ``<m>x<n>x<k>``."""
    return shape.get("name") or f"{shape['m']}x{shape['n']}x{shape['k']}"


# Keys that choose what is reported about a run, not what it measures: left out of its hash (and of the run_info
# rule's params), so `--config compare_to=...` on a finished run re-measures nothing.
REPORT_ONLY_KEYS = ("compare_to",)


def run_config(config: dict) -> dict:
    """``config`` without the report-only keys: what a run measures (config_hash, the run_info rule's params)."""
    return {k: v for k, v in config.items() if k not in REPORT_ONLY_KEYS}


def check_compare_to(config: dict, results: str | Path, run: str) -> Path | None:
    """``compare_to`` names a finished run under ``results`` other than this one: its folder, or None when unset.
    ConfigError naming the key (and the runs there are) otherwise: checked before any job starts."""
    name = config.get("compare_to") or ""
    if not name:
        return None
    if name == run:
        raise ConfigError(f"compare_to: {name!r} is this run itself; allowed: another run under {results}/")
    folder = Path(results) / name
    if not (folder / registry.RUN_FILE).is_file():
        runs = sorted(p.parent.name for p in Path(results).glob(f"*/{registry.RUN_FILE}") if p.parent.name != run)
        raise ConfigError(
            f"compare_to: {name!r} is not a run under {results}/ (no {folder}/{registry.RUN_FILE}); "
            "allowed: " + (", ".join(runs) if runs else "none yet: run the baseline first")
        )
    return folder


def check_choice(key: str, value, allowed) -> str:
    if value not in allowed:
        raise ConfigError(f"{key}: {value!r} is not allowed; allowed: {', '.join(allowed)}")
    return value


def image_backends() -> tuple[str, ...]:
    """Backends with an image under containers/ (``Backend.has_image``)."""
    return tuple(n for n in backends.NAMES if backends.CLASSES[n].has_image)


def check_image(image: str, key: str = "container.images") -> str:
    if not isinstance(image, str) or not IMAGE_RE.match(image):
        raise ConfigError(
            f"{key}: {image!r} is not an image reference; allowed: letters, digits and ./:@+=-_ "
            "(registry/name:tag@digest, docker://..., or a .sif path) - no spaces or shell characters"
        )
    return image


def check_build_args(build_args: dict, key: str = "container.build_args") -> dict:
    for k, v in build_args.items():
        if not BUILD_ARG_RE.match(str(k)):
            raise ConfigError(f"{key}: {k!r} is not a build argument name; allowed: letters, digits, _")
        if not isinstance(v, str) or not BUILD_ARG_VALUE_RE.match(v):
            raise ConfigError(
                f"{key}.{k}: {v!r} is not allowed; allowed: letters, digits and ._/:@+=,%~- "
                "- no spaces or shell characters"
            )
    return dict(build_args)


def check_container_config(config: dict) -> None:
    """The container settings the schema cannot express: with a container runtime every backend must
    have an image (``Backend.has_image``). One line naming the key, before any job starts."""
    c = config["container"]
    runtime = check_choice("container.runtime", c["runtime"], RUNTIMES)
    if runtime == "none":
        return
    allowed = image_backends()
    for b in config["backends"]:
        if b not in allowed:
            raise ConfigError(
                f"backends: {b!r} has no container image (container.runtime: {runtime}); "
                f"allowed with a container runtime: {', '.join(allowed)}"
            )
        check_image(c["images"][b], f"container.images.{b}")
        if runtime in ENGINES:
            check_build_args(c.get("build_args", {}).get(b, {}), f"container.build_args.{b}")


def with_defaults(config: dict, schema: dict | None = None) -> dict:
    """A copy of ``config`` with every default of the schema filled in (as snakemake's validate does)."""
    schema = schema or load_schema()

    def fill(node: dict, sub: dict) -> None:
        sub = _resolve(schema, sub)
        for key, prop in (sub.get("properties") or {}).items():
            prop = _resolve(schema, prop)
            if key not in node and "default" in prop:
                node[key] = copy.deepcopy(prop["default"])
            if isinstance(node.get(key), dict) and prop.get("type") == "object":
                fill(node[key], prop)

    out = copy.deepcopy(config)
    fill(out, schema)
    return out


def load(path: str | Path, schema: dict | None = None) -> dict:
    """Read a YAML/JSON config file, check it, fill defaults."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file: {str(path)!r} does not exist")
    with open(path) as fh:
        try:
            raw = yaml.safe_load(fh) or {}
        except yaml.YAMLError as exc:
            first = str(exc).splitlines()[0]
            raise ConfigError(f"config file: {str(path)!r} is not valid YAML ({first})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"config file: {str(path)!r} must hold a mapping of keys, got {type(raw).__name__}")
    schema = schema or load_schema()
    check(raw, schema)
    return with_defaults(raw, schema)


# Keys that name a run without changing what it measures: left out of its hash only (the run_info rule still sees
# them), so that runs of one config under different ids (nightly runs, A/B repetitions) share one history series.
NAME_ONLY_KEYS = ("run",)


def config_hash(config: dict) -> str:
    """sha256 of the canonical JSON of the (defaults-filled) config, report-only keys and the run id left out:
    equal measurements, equal hash."""
    measured = {k: v for k, v in run_config(config).items() if k not in NAME_ONLY_KEYS}
    blob = json.dumps(measured, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
