"""Loading and checking the configuration.

The schema (``workflow/schemas/config.schema.yaml``) is the single definition of what a
valid config is. Snakemake checks it when the workflow starts (``snakemake.utils.validate``,
which also fills defaults); ``check`` is the same check with a one-line message naming the key
and what it allows, so a bad value stops the run before any job, and says why in one line.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import jsonschema
import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """A config value the schema rejects; str() is one line naming the key."""


def load_schema(path: Path | str | None = None) -> dict:
    path = Path(path) if path else SCHEMA_PATH
    with open(path) as fh:
        return yaml.safe_load(fh)


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


def describe_error(error: jsonschema.ValidationError, schema: dict) -> str:
    """One line: the key, the offending value, and what the schema allows there."""
    key = _key_path(error)
    sub = _resolve(schema, error.schema) if isinstance(error.schema, dict) else {}
    v = error.validator
    if v == "additionalProperties":
        allowed = sorted((error.schema.get("properties") or {}).keys())
        extra = [k for k in error.instance if k not in allowed] if isinstance(error.instance, dict) else []
        where = key if key != "<top level>" else "config"
        return f"{where}: unknown key(s) {', '.join(map(repr, extra))}; allowed: {', '.join(allowed)}"
    if v == "enum":
        return f"{key}: {error.instance!r} is not allowed; allowed: {', '.join(map(str, sub.get('enum', error.validator_value)))}"
    if v == "propertyNames":
        return f"{key}: {error.message}"
    if v == "type":
        return f"{key}: {error.instance!r} has the wrong type; expected {error.validator_value}"
    if v in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}[v]
        return f"{key}: {error.instance!r} is out of range; allowed: {op} {error.validator_value}"
    if v == "minItems":
        return f"{key}: must not be empty (at least {error.validator_value} item(s))"
    if v == "uniqueItems":
        return f"{key}: {error.instance!r} has duplicate items"
    if v == "pattern":
        return (f"{key}: {error.instance!r} is not allowed; allowed: letters, digits and . _ - "
                f"(pattern {error.validator_value}) - no spaces or shell metacharacters")
    return f"{key}: {error.message}"


def check(config: dict, schema: dict | None = None) -> dict:
    """Validate ``config`` (unchanged) and return it; raise ConfigError with a one-line message.

    Among several errors the one jsonschema ranks most relevant is reported (``best_match``),
    and for errors inside ``anyOf``-like branches the deepest.
    """
    schema = schema or load_schema()
    cls = jsonschema.validators.validator_for(schema)
    validator = cls(schema)
    errors = list(validator.iter_errors(config))
    if errors:
        best = jsonschema.exceptions.best_match(errors)
        raise ConfigError(describe_error(best, schema))
    return config


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


def config_hash(config: dict) -> str:
    """sha256 of the canonical JSON of the (defaults-filled) config: equal configs, equal hash."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
