"""Same config, same rows: a rerun gives the same files, columns, keys and non-timing values; the
config hash is stable, and changes whenever the config does.

Timing-derived columns (times, TFLOP/s, bandwidth, speedups, repeat counts, the CPU peak, which
uses the current clock) and what the device's sensors read (clock, power, temperature, energy,
throttling) differ between runs by nature and are not compared; neither is whether a
point came out ``ok`` or ``unstable`` (that depends on noise). Everything else must be identical:
seeded inputs give the same relative errors, seeded training the same losses and accuracies.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from accelbench import registry
from accelbench.run import config as cfg
from test_provenance import MINI, STAGE_KINDS, mini_run

REPO = Path(__file__).resolve().parents[1]

# rows are identified by these columns
KEYS = {
    "matmul": ["device", "dtype", "shape_name", "m", "n", "k"],
    "matmul_search": ["device", "dtype", "phase", "m", "n", "k"],
    "membw": ["device", "kernel", "size_bytes"],
    "warmup": ["device"],  # one row per iteration; how many iterations depends on timing
    "amp_steps": ["device", "workload", "mode", "seed", "step"],
    "amp_trials": ["device", "workload", "mode", "seed"],
    "amp_summary": ["device", "workload", "mode"],
    "scaling_trials": ["device", "method", "workload", "mode", "world_size", "seed"],
    "scaling": ["device", "method", "workload", "mode", "world_size"],
    "collectives": ["device", "collective", "world_size", "size_bytes"],
    "peer_copy": ["device", "src", "dst", "peer"],
    "matmul_soak": ["device", "status"],  # off by default: one row per device
    "telemetry_matmul": ["device", "stage", "telemetry_source"],  # one row per reading; how many depends on timing
    "telemetry_amp": ["device", "stage", "telemetry_source"],
}
# a plug-in table's rows are keyed by its declared point identity
KEYS.update({name: ["device", *t.identity] for name, t in registry.TABLES.items() if name not in KEYS and t.identity})
# tables with a row per iteration or reading: how many rows depends on timing
PER_TICK = ("warmup", "telemetry_matmul", "telemetry_amp")
# columns whose values come from a clock (or from the host's memory use) and so differ per run
TIMING = re.compile(
    r"(_s|_s_mean|tflops|pct_of_peak|peak_source|gbps|_ci95_low|_ci95_high|samples_per_s|speedup.*|repeats|blocks"
    r"|input_sets|peak_mem_bytes|work_mem_bytes|stable_at_iter|iter|faster|verdict|note|timestamp.*|device_warmup_calls"
    r"|device_warmup_status"
    # the within-run interval's method and the blocks' autocorrelation (measure.blocks): from the timed blocks
    r"|.*lag1_autocorr|ci_method|.*_per_s.*|mfu.*"
    # what the device's sensors read while it ran (measure.telemetry): the machine's state, not the config's
    r"|clock_mhz.*|power_w.*|temp_c.*|util_pct.*|energy_j|gflop_per_j|samples_per_j|telemetry_samples|throttled"
    r"|throttle_reasons|clock_ramp)$"
)
# columns that carry ok-vs-unstable (noise) and its explanation
NOISE = {"status", "flags", "status_detail"}
MEASURED = {"ok", "unstable"}


def compared_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if not TIMING.search(c) and c not in NOISE]


def status_class(s: str) -> str:
    return "measured" if s in MEASURED else s


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    return mini_run(tmp_path_factory, "first"), mini_run(tmp_path_factory, "second")


# ---- config_hash ----------------------------------------------------------------------------------


def test_config_hash_is_sha256_of_canonical_json():
    import hashlib

    assert (
        cfg.config_hash({"b": [1, 2], "a": {"y": 1.5, "x": "s"}})
        == hashlib.sha256(b'{"a":{"x":"s","y":1.5},"b":[1,2]}').hexdigest()[:16]
    )


def test_config_hash_ignores_key_order_and_spelled_out_defaults():
    a = cfg.with_defaults({"seed": 1, "matmul": {"sizes": [64, 128]}})
    b = cfg.with_defaults(
        {"matmul": {"sizes": [64, 128], "dtypes": cfg.with_defaults({})["matmul"]["dtypes"]}, "seed": 1}
    )
    reordered = {
        k: (dict(reversed(list(v.items()))) if isinstance(v, dict) else v) for k, v in reversed(list(a.items()))
    }
    assert list(reordered) != list(a)
    assert cfg.config_hash(a) == cfg.config_hash(b) == cfg.config_hash(reordered)
    # the default config file and an empty config are the same run
    assert cfg.config_hash(cfg.load(REPO / "config.yaml")) == cfg.config_hash(cfg.with_defaults({}))


def test_config_hash_is_stable_across_processes():
    """No dependence on PYTHONHASHSEED, dict order or the process: the same hash in a fresh interpreter."""
    config = cfg.with_defaults(MINI)
    code = (
        "import json,sys; from accelbench.run.config import config_hash; "
        "print(config_hash(json.loads(sys.stdin.read())))"
    )
    for seed in ("0", "12345"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps(config),
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONHASHSEED=seed),
            check=True,
        ).stdout.strip()
        assert out == cfg.config_hash(config)


def _leaves(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, path + (k,))
    else:
        yield path, node


def _changed(value):
    if value is None:  # an unset optional (attention.tokens)
        return 1
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 2 + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return value[:-1] if len(value) > 1 else (value + value if value else [1])  # [] (scaling.world_sizes) -> [1]
    raise AssertionError(value)


def test_config_hash_changes_with_any_value():
    base = cfg.with_defaults(MINI)
    h0 = cfg.config_hash(base)
    leaves = list(_leaves(base))
    assert len(leaves) >= 40
    seen = {h0}
    for path, value in leaves:
        changed = copy.deepcopy(base)
        node = changed
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = _changed(value)
        h = cfg.config_hash(changed)
        # what is reported about the run, or its name, not what it measures
        if path[0] in cfg.REPORT_ONLY_KEYS + cfg.NAME_ONLY_KEYS:
            assert h == h0, f"changing {'.'.join(path)} changed config_hash"
            continue
        assert h != h0, f"changing {'.'.join(path)} left config_hash unchanged"
        seen.add(h)
    unhashed = sum(path[0] in cfg.REPORT_ONLY_KEYS + cfg.NAME_ONLY_KEYS for path, _ in leaves)
    assert unhashed == len(cfg.REPORT_ONLY_KEYS + cfg.NAME_ONLY_KEYS)
    assert len(seen) == len(leaves) - unhashed + 1  # and no two changes collide


def test_run_info_hash_same_for_same_config_and_differs_otherwise(tmp_path):
    def run_info(config, name):
        out = tmp_path / f"{name}.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "accelbench.cli",
                "run-info",
                "--config-json",
                json.dumps(config),
                "--run",
                "r",
                "--git-commit",
                "c",
                "--out",
                str(out),
            ],
            check=True,
            capture_output=True,
        )
        return json.loads(out.read_text())

    a, b = run_info(MINI, "a"), run_info(json.loads(json.dumps(MINI)), "b")
    c = run_info({**MINI, "seed": 1}, "c")
    assert a == b
    assert a["config_hash"] != c["config_hash"]


# ---- two real runs of the same config -------------------------------------------------------------


@pytest.mark.slow
def test_rerun_same_files_columns_and_hash(two_runs):
    first, second = (w / "results" / "mini" for w in two_runs)
    files = lambda d: sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file() and "logs" not in p.parts)
    assert files(first) == files(second)
    info1, info2 = (json.loads((d / "run.json").read_text()) for d in (first, second))
    assert info1["git_commit"] == info2["git_commit"], (
        f"the checkout changed between the two runs ({info1['git_commit']} vs {info2['git_commit']}): not the same code"
    )
    assert info1 == info2  # config, hash, commit, version: all the same
    assert info1["config_hash"] == cfg.config_hash(cfg.with_defaults(MINI))
    for name in STAGE_KINDS:
        df1, df2 = pd.read_csv(first / name), pd.read_csv(second / name)
        assert list(df1.columns) == list(df2.columns), name
        assert set(df1["config_hash"]) == set(df2["config_hash"]) == {info1["config_hash"]}, name
    dev1, dev2 = (json.loads((d / "devices.json").read_text()) for d in (first, second))
    strip = lambda d: {k: v for k, v in d.items() if k not in ("timestamp_utc", "cpu", "backends")}
    assert strip(dev1) == strip(dev2)
    assert {b: e.get("present") for b, e in dev1["backends"].items()} == {
        b: e.get("present") for b, e in dev2["backends"].items()
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STAGE_KINDS))
def test_rerun_same_rows_and_values(two_runs, name):
    kind = STAGE_KINDS[name]
    df1, df2 = (pd.read_csv(w / "results" / "mini" / name, keep_default_na=False) for w in two_runs)
    keys = KEYS[kind]
    if kind in PER_TICK:  # the number of iterations (readings) depends on timing; the rest must match
        assert set(map(tuple, df1[keys].astype(str).values)) == set(map(tuple, df2[keys].astype(str).values))
        df1, df2 = df1.drop_duplicates(keys), df2.drop_duplicates(keys)
    k1 = sorted(map(tuple, df1[keys].astype(str).values))
    k2 = sorted(map(tuple, df2[keys].astype(str).values))
    assert k1 == k2 and len(k1) == len(set(k1)), f"{name}: rows differ between reruns"
    a = df1.set_index(keys).sort_index()
    b = df2.set_index(keys).sort_index()
    if "status" in a.columns:
        sa, sb = a["status"].astype(str).map(status_class), b["status"].astype(str).map(status_class)
        assert (sa == sb).all(), f"{name}: statuses differ\n{pd.concat([a['status'], b['status']], axis=1)}"
    cols = [c for c in compared_columns(df1) if c not in keys]
    assert "run_id" in cols and "config_hash" in cols
    for col in cols:
        x, y = a[col].astype(str), b[col].astype(str)
        diff = x != y
        assert not diff.any(), (
            f"{name}: column {col!r} differs between reruns:\n{pd.concat([x[diff], y[diff]], axis=1).head()}"
        )
