"""Bad input stops the run before any job, with one line naming the key (and what it allows).

Two levels: ``accelbench.run.config`` itself (fast, exhaustive over the schema), and the real
``snakemake`` command on a temporary working directory (what a user sees; no job may start, so
no ``results/`` may appear).
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from accelbench import registry
from accelbench.run import config as cfg
from accelbench.run.config import ConfigError

REPO = Path(__file__).resolve().parents[1]
SCHEMA = cfg.load_schema()
DEFAULT_CONFIG = yaml.safe_load((REPO / "config.yaml").read_text())
PREFIX = "accelbench: config error: "
SNAKEMAKE_NOTICE = re.compile(
    r"^Config file \S+ is (extended|replaced) by additional config specified via the command line\.$"
)
# things a shell would act on; none may reach a command line
SHELL_NASTIES = ["a;rm -rf ~", "$(id)", "`id`", "a b", "a|b", "a&b", "a>b", "x'y", 'x"y', "a\nb", "a\\b", "*", "a\tb"]


# ---- walking the schema ---------------------------------------------------------------------


def resolve(node: dict) -> dict:
    return cfg._resolve(SCHEMA, node)


def schema_nodes(node: dict | None = None, path: tuple = ()):
    """(path, resolved sub-schema) for every property of the schema, depth first; a map with free
    keys ({backend: {dtype: peak}}, build args) is entered through one key its propertyNames allow."""
    node = resolve(node if node is not None else SCHEMA)
    children = list((node.get("properties") or {}).items())
    if isinstance(node.get("additionalProperties"), dict):
        names = resolve(node.get("propertyNames", {}))
        children.append((names["enum"][0] if "enum" in names else "KEY1", node["additionalProperties"]))
    for key, sub in children:
        sub = resolve(sub)
        yield path + (key,), sub
        if sub.get("type") == "object":
            yield from schema_nodes(sub, path + (key,))


def key_text(path: tuple) -> str:
    """The key path as config.describe_error prints it (``matmul.sizes``, ``backends[0]``)."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else ("." if out else "") + str(p)
    return out


def nested(path: tuple, value) -> dict:
    """A config holding only ``value`` at ``path``."""
    out = value
    for key in reversed(path):
        out = [out] if isinstance(key, int) else {key: out}
    return out


def one_error(config: dict) -> str:
    with pytest.raises(ConfigError) as info:
        cfg.check(config)
    message = str(info.value)
    assert "\n" not in message and message.strip() == message, repr(message)
    assert len(message) < 400, message
    return message


# ---- unit level: accelbench.run.config ----------------------------------------------------------


def test_default_config_is_valid_and_unchanged_by_check():
    before = copy.deepcopy(DEFAULT_CONFIG)
    assert cfg.check(DEFAULT_CONFIG) is DEFAULT_CONFIG
    assert before == DEFAULT_CONFIG


def test_load_fills_every_default(tmp_path):
    (tmp_path / "c.yaml").write_text("matmul:\n  sizes: [64]\n")
    loaded = cfg.load(tmp_path / "c.yaml")
    assert loaded["matmul"]["sizes"] == [64]
    assert loaded["matmul"]["dtypes"] == DEFAULT_CONFIG["matmul"]["dtypes"]
    assert loaded["amp"]["transformer"]["d_model"] == DEFAULT_CONFIG["amp"]["transformer"]["d_model"]
    # the schema's defaults and config.yaml agree: config.yaml documents them
    assert cfg.with_defaults({}) == cfg.with_defaults(DEFAULT_CONFIG)


@pytest.mark.parametrize(
    "config,key,allowed",
    [
        # wrong types
        ({"seed": "zero"}, "seed", "integer"),
        ({"seed": True}, "seed", "integer"),
        ({"matmul": {"sizes": [256.0]}}, "matmul.sizes[0]", "integer"),
        ({"matmul": {"sizes": 256}}, "matmul.sizes", "array"),
        ({"matmul": "big"}, "matmul", "object"),
        ({"matmul": {"rotate_inputs": "yes"}}, "matmul.rotate_inputs", "boolean"),
        ({"warmup": {"rel_tol": float("nan")}}, "warmup.rel_tol", "finite number"),
        ({"matmul": {"min_run_time_s": float("inf")}}, "matmul.min_run_time_s", "finite number"),
        # negative or zero sizes and times
        ({"matmul": {"sizes": [256, 0]}}, "matmul.sizes[1]", ">= 1"),
        ({"matmul": {"sizes": [-512]}}, "matmul.sizes[0]", ">= 1"),
        ({"warmup": {"n": 0}}, "warmup.n", ">= 1"),
        ({"transfer": {"sizes_mb": [0]}}, "transfer.sizes_mb[0]", "> 0"),
        ({"matmul": {"min_run_time_s": 0}}, "matmul.min_run_time_s", "> 0"),
        ({"amp": {"batch_size": -1}}, "amp.batch_size", ">= 1"),
        ({"cpu_threads": -2}, "cpu_threads", ">= 0"),
        ({"matmul": {"peak_tflops": {"cpu": {"float32": 0}}}}, "matmul.peak_tflops.cpu.float32", "> 0"),
        # unknown dtypes and backends: the allowed values are listed
        (
            {"matmul": {"dtypes": ["float32", "float64"]}},
            "matmul.dtypes[1]",
            "float32, tf32, bfloat16, float16, float8_e4m3fn",
        ),
        ({"backends": ["cpu", "gpu"]}, "backends[1]", "cpu, cuda, rocm, mps, xla"),
        ({"amp": {"dtype": "fp8"}}, "amp.dtype", "auto, bfloat16, float16"),
        ({"amp": {"workloads": ["vgg"]}}, "amp.workloads[0]", "mlp, transformer, gpt, resnet"),
        ({"container": {"runtime": "lxc"}}, "container.runtime", "none, docker, podman, apptainer"),
        ({"matmul": {"peak_tflops": {"gpu": {"float32": 1.0}}}}, "matmul.peak_tflops", "cpu"),
        # empty lists, duplicates
        ({"backends": []}, "backends", "empty"),
        ({"matmul": {"sizes": []}}, "matmul.sizes", "empty"),
        ({"matmul": {"dtypes": []}}, "matmul.dtypes", "empty"),
        ({"amp": {"seeds": []}}, "amp.seeds", "empty"),
        ({"matmul": {"sizes": [64, 64]}}, "matmul.sizes", "duplicate"),
        # unknown keys: typos at the top level and nested; the allowed keys are listed
        ({"backend": ["cpu"]}, "config: unknown key(s) 'backend'", "backends"),
        ({"matmul": {"sizse": [64]}}, "matmul: unknown key(s) 'sizse'", "sizes"),
        ({"amp": {"data": {"n_trian": 64}}}, "amp.data: unknown key(s) 'n_trian'", "n_train"),
        ({"container": {"images": {"gpu": "x"}}}, "container.images: unknown key(s) 'gpu'", "cuda"),
        # shell metacharacters in what reaches a command line
        ({"run": "x; rm -rf ~"}, "run", "letters, digits"),
        ({"run": "r1\n"}, "run", "letters, digits"),
        ({"run": "../etc"}, "run", "letters, digits"),
        ({"run": "$(touch pwned)"}, "run", "contains '$'"),
        ({"run": "r1; touch pwned"}, "run", "contains ';'"),
        ({"container": {"images": {"cpu": "img`touch pwned`"}}}, "container.images.cpu", "contains '`'"),
        ({"amp": {"mlp": {"hiden": 8}}}, "amp.mlp: unknown key(s) 'hiden'", "hidden, layers"),
        ({"container": {"images": {"cpu": "img:1 && reboot"}}}, "container.images.cpu", "letters, digits"),
        (
            {"container": {"build_args": {"cpu": {"PIP": "x; curl evil"}}}},
            "container.build_args.cpu.PIP",
            "letters, digits",
        ),
        # rules between keys, checked with the schema (before any job, not when the stage gets there)
        ({"warmup": {"window": 9, "max_iters": 4}}, "warmup.window", "2 .. 4"),
        ({"amp": {"steps": 10, "warmup_steps": 10}}, "amp.warmup_steps", "0 .. 9"),
        ({"amp": {"transformer": {"d_model": 64, "n_heads": 3}}}, "amp.transformer.n_heads", "divisor"),
        ({"container": {"runtime": "podman"}, "backends": ["cpu", "mps"]}, "backends", "cpu, cuda, rocm"),
        # telemetry and the sustained mode
        ({"telemetry": {"hz": -5}}, "telemetry.hz", ">= 0"),
        ({"telemetry": {"hz": 1000}}, "telemetry.hz", "<= 100"),
        ({"telemetry": {"hz": "fast"}}, "telemetry.hz", "number"),
        ({"telemetry": {"settle_rel_tol": 0}}, "telemetry.settle_rel_tol", "> 0"),
        ({"telemetry": {"rate": 20}}, "telemetry: unknown key(s) 'rate'", "hz, settle_rel_tol"),
        ({"matmul": {"soak_s": -1}}, "matmul.soak_s", ">= 0"),
        ({"matmul": {"soak_s": 2, "soak_interval_s": 5}}, "matmul.soak_interval_s", "up to 2"),
        # shapes, the search, memory bandwidth
        ({"matmul": {"shapes": [{"m": 64, "n": 64}]}}, "matmul.shapes[0]", "missing key(s) 'k'; required: m, n, k"),
        ({"matmul": {"shapes": [{"m": 64, "n": 0, "k": 8}]}}, "matmul.shapes[0].n", ">= 1"),
        (
            {"matmul": {"shapes": [{"m": 64, "n": 8, "k": 8, "name": "q k v"}]}},
            "matmul.shapes[0].name",
            "letters, digits",
        ),
        (
            {"matmul": {"shapes": [{"m": 1, "n": 2, "k": 3, "nme": "x"}]}},
            "matmul.shapes[0]: unknown key(s) 'nme'",
            "name",
        ),
        (
            {"matmul": {"shapes": [{"m": 8, "n": 8, "k": 8}, {"m": 4, "n": 4, "k": 4, "name": "8x8x8"}]}},
            "matmul.shapes[1]",
            "used once",
        ),
        (
            {"matmul": {"shapes": [{"m": 8, "n": 8, "k": 8, "name": "a"}, {"m": 4, "n": 4, "k": 4, "name": "a"}]}},
            "matmul.shapes[1]",
            "name 'a' is also matmul.shapes[0]'s",
        ),
        ({"matmul": {"search": {"budget_s": 0}}}, "matmul.search.budget_s", "> 0"),
        ({"matmul": {"search": {"m": {"min": 512, "max": 256}}}}, "matmul.search.m.min", "1 .. 256"),
        ({"matmul": {"search": {"k": {"step": 0}}}}, "matmul.search.k.step", ">= 1"),
        ({"matmul": {"search": {"dtypes": ["int8"]}}}, "matmul.search.dtypes[0]", "float32, tf32"),
        ({"matmul": {"search": {"coarse_points": 1}}}, "matmul.search.coarse_points", ">= 2"),
        ({"matmul": {"search": {"enable": True}}}, "matmul.search: unknown key(s) 'enable'", "enabled"),
        ({"membw": {"max_mb": 0}}, "membw.max_mb", "> 0"),
        ({"membw": {"size_factor": 1.0}}, "membw.size_factor", ">= 1.5"),
        ({"membw": {"min_kb": 2048, "max_mb": 1}}, "membw.min_kb", "1 .. 1023"),
        ({"membw": {"peak_gbps": {"tpu": 800}}}, "membw.peak_gbps", "cpu, cuda"),
    ],
)
def test_bad_value_names_key_and_allowed(config, key, allowed):
    message = one_error(config)
    assert message.startswith(key), message
    assert allowed in message, message


def test_every_enum_lists_its_allowed_values():
    enums = [(p, s) for p, s in schema_nodes() if "enum" in s]
    enums += [
        (p + (0,), resolve(s["items"]))
        for p, s in schema_nodes()
        if s.get("type") == "array" and "enum" in resolve(s.get("items", {}))
    ]
    assert len(enums) >= 5, enums  # backends, dtypes, workloads, amp.dtype, runtime
    for path, sub in enums:
        message = one_error(nested(path, "no-such-value"))
        assert message.startswith(key_text(path) + ":"), message
        assert ", ".join(map(str, sub["enum"])) in message, message


def test_every_object_rejects_unknown_keys():
    """additionalProperties: false everywhere: a typo anywhere is an error, not a silent default."""
    objects = [()] + [p for p, s in schema_nodes() if s.get("type") == "object" and "properties" in s]
    assert len(objects) >= 10
    for path in objects:
        message = one_error(nested(path, {"zz_typo": 1}) if path else {"zz_typo": 1})
        where = key_text(path) if path else "config"
        assert message.startswith(f"{where}: unknown key(s) 'zz_typo'; allowed: "), message


def test_every_free_string_rejects_shell_metacharacters():
    """Every string that is not an enum (run id, image names, anything added later) has a
    pattern that keeps shell metacharacters, spaces and newlines out."""
    strings = [(p, s) for p, s in schema_nodes() if s.get("type") == "string" and "enum" not in s]
    assert {("run",), ("container", "images", "cpu"), ("cluster", "gpu_model")} <= {p for p, _ in strings}
    for path, sub in strings:
        assert "pattern" in sub, f"{key_text(path)}: free string without a pattern"
        for bad in SHELL_NASTIES:
            message = one_error(nested(path, bad))
            assert message.startswith(key_text(path) + ":") and "not allowed" in message, message


def test_every_free_map_constrains_its_keys():
    """Maps with free keys ({backend: {dtype: peak}}, build args -> --build-arg KEY=...) allow only
    listed or patterned keys: no shell metacharacters through a key either."""
    maps = [
        (p, s)
        for p, s in [((), resolve(SCHEMA))] + list(schema_nodes())
        if isinstance(s.get("additionalProperties"), dict)
    ]
    assert {("matmul", "peak_tflops"), ("container", "build_args")} <= {p for p, _ in maps}
    for path, sub in maps:
        assert "propertyNames" in sub, f"{key_text(path)}: free keys without propertyNames"
        value = {"float32": 1.0} if path[-1] == "peak_tflops" else ({} if path[-1] == "build_args" else "x")
        for bad in ["a;b", "$(id)", "a b", "--x"]:
            message = one_error(nested(path, {bad: value}))
            assert message.startswith(key_text(path) + ":") and repr(bad) in message, message


def test_every_number_rejects_wrong_type_and_nonfinite():
    numbers = [(p, s) for p, s in schema_nodes() if s.get("type") in ("integer", "number")]
    assert len(numbers) >= 20
    for path, _ in numbers:
        for bad in ("1", None, [1], float("nan"), float("inf")):
            message = one_error(nested(path, bad))
            assert message.startswith(key_text(path) + ":"), message


def test_every_lower_bound_is_enforced():
    bounded = [(p, s) for p, s in schema_nodes() if "minimum" in s or "exclusiveMinimum" in s]
    assert len(bounded) >= 20
    for path, sub in bounded:
        low = sub["minimum"] - 1 if "minimum" in sub else sub["exclusiveMinimum"]
        message = one_error(nested(path, low))
        assert message.startswith(key_text(path) + ":") and "out of range" in message, message


def test_sizes_have_no_upper_bound():
    """A size that cannot fit in memory is a measurement (status=oom), not a config error."""
    for path, sub in schema_nodes():
        if path[-1] in ("sizes", "sizes_mb", "n"):
            items = resolve(sub.get("items", {})) if sub.get("type") == "array" else sub
            assert "maximum" not in items and "exclusiveMaximum" not in items, key_text(path)
    cfg.check({"matmul": {"sizes": [1 << 20]}, "warmup": {"n": 1 << 17}, "transfer": {"sizes_mb": [1e6]}})


def test_missing_bad_and_non_mapping_config_files(tmp_path):
    with pytest.raises(ConfigError, match="config file: .*nope.yaml.* does not exist"):
        cfg.load(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("matmul: [sizes: 1\n")
    with pytest.raises(ConfigError, match="bad.yaml.* is not valid YAML"):
        cfg.load(tmp_path / "bad.yaml")
    (tmp_path / "list.yaml").write_text("- cpu\n")
    with pytest.raises(ConfigError, match="list.yaml.* must hold a mapping"):
        cfg.load(tmp_path / "list.yaml")
    (tmp_path / "typo.yaml").write_text("matmul:\n  dtype: [float32]\n")
    with pytest.raises(ConfigError, match=r"^matmul: unknown key\(s\) 'dtype'"):
        cfg.load(tmp_path / "typo.yaml")


# ---- accelbench run-info with a bad config --------------------------------------------------


def accelbench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "accelbench.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )


@pytest.mark.parametrize(
    "config_json,run,needle",
    [
        ("{not json", "r1", "--config-json: not valid JSON"),
        ("[1, 2]", "r1", "--config-json: must be a JSON object"),
        ('{"matmul": {"sizes": [0]}}', "r1", "matmul.sizes[0]: 0 is out of range"),
        ('{"backends": ["tpu"]}', "r1", "backends[0]: 'tpu' is not allowed; allowed: cpu, cuda, rocm, mps, xla"),
        ('{"matmul": {"sizes": [NaN]}}', "r1", "matmul.sizes[0]: nan"),
        ('{"sede": 1}', "r1", "config: unknown key(s) 'sede'"),
        ("{}", "r1;reboot", "--run: 'r1;reboot' is not allowed"),
        ("{}", "", "--run: must not be empty"),
    ],
)
def test_run_info_rejects_bad_config_json(tmp_path, config_json, run, needle):
    out = tmp_path / "run.json"
    proc = accelbench("run-info", "--config-json", config_json, "--run", run, "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert not out.exists()


def test_run_info_writes_defaults_filled_config(tmp_path):
    out = tmp_path / "run.json"
    proc = accelbench(
        "run-info",
        "--config-json",
        json.dumps({"matmul": {"sizes": [64]}}),
        "--run",
        "r1",
        "--git-commit",
        "abc",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    info = json.loads(out.read_text())
    assert info["run"] == "r1" and info["git_commit"] == "abc"
    assert info["config"] == cfg.with_defaults({"matmul": {"sizes": [64]}})
    assert info["config_hash"] == cfg.config_hash(info["config"])


# ---- the real snakemake command -------------------------------------------------------------


def snakemake(workdir: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    from workflow_runner import run_snakemake

    return run_snakemake(workdir, *args, env={"OMP_NUM_THREADS": "1"}, timeout=timeout)


def user_workdir(tmp_path: Path) -> Path:
    """A working directory like the repo root: config.yaml present, a user config merged over it."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "config.yaml").write_text((REPO / "config.yaml").read_text())
    return work


def assert_config_error(proc: subprocess.CompletedProcess, work: Path, *needles: str) -> str:
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    # one line, and nothing else on stderr but snakemake's usual notice that --configfile/--config
    # extend config.yaml ("Config file config.yaml is extended by additional config ...")
    errors = [l for l in proc.stderr.splitlines() if l.strip() and not SNAKEMAKE_NOTICE.match(l)]
    assert len(errors) == 1 and errors[0].startswith(PREFIX), out
    assert "Traceback" not in out and "Building DAG" not in out and "rule " not in out, out
    for needle in needles:
        assert needle in errors[0], errors[0]
    assert not (work / "results").exists(), sorted(p.name for p in (work / "results").rglob("*"))
    return errors[0]


@pytest.mark.slow
@pytest.mark.parametrize(
    # Every message is checked in-process by test_bad_value_names_key_and_allowed (milliseconds a case);
    # a real snakemake costs seconds a case, so here one case a kind of failure: a wrong type, an
    # unknown key, a shell metacharacter (and that nothing ran it)
    "text,needles",
    [
        ("seed: zero\n", ["seed: 'zero' has the wrong type; expected integer"]),
        ("backend: [cpu]\n", ["config: unknown key(s) 'backend'", "allowed: amp, "]),
        ("run: '$(touch pwned)'\n", ["run:", "contains '$'"]),
    ],
)
def test_snakemake_bad_configfile_one_line_no_job(tmp_path, text, needles):
    work = user_workdir(tmp_path)
    (work / "bad.yaml").write_text(text)
    proc = snakemake(work, "--cores", "1", "--configfile", str(work / "bad.yaml"))
    assert_config_error(proc, work, *needles)
    assert not (work / "pwned").exists() and not (REPO / "pwned").exists()


@pytest.mark.slow
def test_snakemake_bad_config_on_command_line(tmp_path):
    work = user_workdir(tmp_path)
    proc = snakemake(work, "--cores", "1", "--config", "run=a b")
    assert_config_error(proc, work, "run: 'a b' is not allowed")


@pytest.mark.slow
def test_snakemake_missing_configfile_names_it(tmp_path):
    """Snakemake reads --configfile before our Snakefile runs, so the message is snakemake's own:
    a traceback whose last line names the missing file (accepted: it is clear, and nothing runs)."""
    work = user_workdir(tmp_path)
    proc = snakemake(work, "--cores", "1", "--configfile", str(work / "nope.yaml"))
    assert proc.returncode != 0
    last = [l for l in (proc.stdout + proc.stderr).splitlines() if l.strip()][-1]
    assert "No such file or directory" in last and "nope.yaml" in last, last
    assert not (work / "results").exists()


@pytest.mark.slow
def test_snakemake_unparsable_configfile_stops(tmp_path):
    """Also snakemake's own message (before our Snakefile runs): non-zero, nothing runs."""
    work = user_workdir(tmp_path)
    (work / "bad.yaml").write_text("matmul: [sizes: 1\n")
    proc = snakemake(work, "--cores", "1", "--configfile", str(work / "bad.yaml"))
    assert proc.returncode != 0
    assert "Config file is not valid JSON or YAML" in proc.stdout + proc.stderr
    assert not (work / "results").exists()


@pytest.mark.slow
def test_snakemake_valid_config_dry_run(tmp_path):
    """The same path with a good config builds the DAG (so the errors above are not from a broken setup),
    and the config reaches the run-info command as one quoted argument that parses back exactly."""
    import shlex

    work = user_workdir(tmp_path)
    (work / "ok.yaml").write_text("run: okrun\nmatmul:\n  sizes: [64, 1048576]\n")
    proc = snakemake(work, "--cores", "1", "--dry-run", "--printshellcmds", "--configfile", str(work / "ok.yaml"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "results/okrun/matmul_cpu.csv" in proc.stdout
    assert not (work / "results").exists()
    line = next(l for l in proc.stdout.splitlines() if "accelbench run-info" in l)
    argv = shlex.split(line.split("Shell command:", 1)[-1])
    config = json.loads(argv[argv.index("--config-json") + 1])
    expected = cfg.with_defaults(
        {**DEFAULT_CONFIG, "run": "okrun", "matmul": {**DEFAULT_CONFIG["matmul"], "sizes": [64, 1048576]}}
    )
    assert config == cfg.run_config(expected)  # the report-only keys (compare_to) are not the run's
    assert argv[argv.index("--run") + 1] == "okrun"


# ---- compare_to (accelbench compare as a step of the run) --------------------------------------------------


def test_compare_to_must_name_another_finished_run(tmp_path):
    results = tmp_path / "results"
    assert cfg.check_compare_to({"compare_to": ""}, results, "me") is None
    with pytest.raises(ConfigError) as e:
        cfg.check_compare_to({"compare_to": "old"}, results, "me")
    assert str(e.value).startswith("compare_to: 'old' is not a run under") and "none yet" in str(e.value)
    (results / "old").mkdir(parents=True)
    (results / "old" / "run.json").write_text("{}")
    (results / "other").mkdir()
    (results / "other" / "run.json").write_text("{}")
    assert cfg.check_compare_to({"compare_to": "old"}, results, "me") == results / "old"
    with pytest.raises(ConfigError, match="allowed: old, other$"):
        cfg.check_compare_to({"compare_to": "gone"}, results, "me")
    with pytest.raises(ConfigError, match="compare_to: 'me' is this run itself"):
        cfg.check_compare_to({"compare_to": "me"}, results, "me")


def test_compare_to_is_not_part_of_the_config_hash():
    base = cfg.with_defaults({"run": "r"})
    assert cfg.config_hash(base) == cfg.config_hash({**base, "compare_to": "old"})
    assert cfg.config_hash(base) != cfg.config_hash({**base, "seed": 1})
    assert "compare_to" not in cfg.run_config({**base, "compare_to": "old"})


def test_the_run_id_is_not_part_of_the_config_hash():
    """One config run under two ids (nightly runs, A/B repetitions) is one testbed in the history store."""
    base = cfg.with_defaults({"run": "night-001"})
    assert cfg.config_hash(base) == cfg.config_hash({**base, "run": "night-002"})
    assert cfg.config_hash(base) != cfg.config_hash({**base, "cpu_threads": 1})
    assert cfg.run_config(base)["run"] == "night-001"  # the run_info rule still sees it


@pytest.mark.slow
def test_snakemake_compare_to_a_missing_run_stops_before_any_job(tmp_path):
    work = user_workdir(tmp_path)
    proc = snakemake(work, "--cores", "1", "--config", "compare_to=yesterday")
    assert_config_error(proc, work, "compare_to: 'yesterday' is not a run under results/", "none yet")


@pytest.mark.slow
def test_snakemake_compare_to_bad_name_and_existing_runs_named(tmp_path):
    work = user_workdir(tmp_path)
    proc = snakemake(work, "--cores", "1", "--config", "compare_to=a;b")
    assert_config_error(proc, work, "compare_to: 'a;b' is not allowed (contains ';')")
    (work / "results" / "monday").mkdir(parents=True)
    (work / "results" / "monday" / "run.json").write_text("{}")
    proc = snakemake(work, "--cores", "1", "--config", "run=tuesday", "compare_to=sunday")
    errors = [l for l in proc.stderr.splitlines() if l.strip() and not SNAKEMAKE_NOTICE.match(l)]
    assert proc.returncode != 0 and len(errors) == 1, proc.stdout + proc.stderr
    assert errors[0] == (
        PREFIX + "compare_to: 'sunday' is not a run under results/ (no results/sunday/run.json); allowed: monday"
    )
    assert sorted(p.name for p in (work / "results").iterdir()) == ["monday"]  # no job ran
    proc = snakemake(work, "--cores", "1", "--dry-run", "--config", "run=tuesday", "compare_to=monday")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "compare" in proc.stdout and "results/compare/monday__tuesday.csv" in proc.stdout
    for path in registry.compare_files("monday", "tuesday").values():  # each stage's own comparison file too
        assert f"results/{path}" in proc.stdout, path


def test_a_plugin_config_section_joins_the_schema_with_its_defaults():
    """A stage plug-in declares its config section (Stage.schema, Stage.defaults): the schema gains it, the
    defaults fill it, a wrong value is one line naming the key, and a section declared twice is refused."""
    from accelbench.plugin import Stage

    new = Stage(
        "planted",
        "a planted stage",
        "device",
        entry="accelbench.stages.planted.measure",
        config_key="planted",
        schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "sizes": {"type": "array", "items": {"type": "integer", "minimum": 1}},
                "enabled": {"type": "boolean"},
            },
        },
        defaults={"sizes": [128, 256], "enabled": True},
    )
    schema = cfg.add_plugin_sections(cfg.load_schema(cfg.SCHEMA_PATH), [new])
    assert cfg.add_plugin_sections(cfg.load_schema(cfg.SCHEMA_PATH), []) == cfg.load_schema()  # no plug-in has one yet
    filled = cfg.with_defaults({"backends": ["cpu"]}, schema)
    assert filled["planted"] == {"sizes": [128, 256], "enabled": True}
    cfg.check({"backends": ["cpu"], "planted": {"sizes": [64]}}, schema)
    with pytest.raises(cfg.ConfigError, match=r"^planted\.sizes"):
        cfg.check({"backends": ["cpu"], "planted": {"sizes": [0]}}, schema)
    with pytest.raises(cfg.ConfigError, match="planted"):
        cfg.check({"backends": ["cpu"], "planted": {"size": [64]}}, schema)
    clash = Stage("again", "x", "device", entry="m", config_key="matmul", defaults={"sizes": [1]})
    with pytest.raises(ValueError, match="declare it once"):
        cfg.add_plugin_sections(cfg.load_schema(cfg.SCHEMA_PATH), [clash])
