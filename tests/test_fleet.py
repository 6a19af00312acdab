"""The fleet check's verdicts on fake node results: the outlier rule (k MADs AND x% below the median), a planted
slow node flagged with its metric, a throttled node, a failed node, a healthy fleet (exit 0), the baseline, the
bad-input lines (exit 2), and the CLI's exit codes on run folders as the node jobs write them."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from accelbench import registry
from accelbench.stages.fleet import verdict as V
from accelbench.stages.fleet.plan import NODE_FILE

REPO = Path(__file__).resolve().parents[1]
MODEL = "Fake CPU"


def headline_table(metric_prefix: str):
    """The (table name, headline) pair of a metric, from the declarations (no table named here)."""
    return next((t, h) for t, h in registry.HEADLINES if h.name == metric_prefix)


def fake_tables(
    nodes: dict[str, float], throttled: set[str] = frozenset(), failed_point: dict | None = None, devices: int = 1
) -> dict[str, pd.DataFrame]:
    """Tables as aggregate gathers them: for each node (value: its speed factor, 1.0 = nominal) every headline
    table gets rows per device and per value of the headline's ``per`` columns; a lower-is-better headline's value
    is divided by the factor. Values vary by a small deterministic jitter (+-1%)."""
    tables: dict[str, list] = {}
    runs = []
    for i, (node, factor) in enumerate(sorted(nodes.items())):
        run_id = f"fleet-{node}"
        runs.append(
            {
                "run_id": run_id,
                "host": "samehost",
                "env_json": json.dumps({"SLURMD_NODENAME": node}),
                "config_json": "{}",
                "timestamp_utc": "2026-12-02T07:00:00Z",
            }
        )
        for table, h in registry.HEADLINES:
            per_values = {
                "dtype": ["float32", "bfloat16"],
                "kernel": ["copy", "triad"],
                "direction": ["h2d"],
                "memory": ["pinned"],
            }
            combos = [{}]
            for p in h.per:
                combos = [{**c, p: v} for c in combos for v in per_values[p]]
            for d in range(devices):
                for c in combos:
                    jitter = 1.0 + 0.01 * (((i * 7 + d * 3 + len(str(c))) % 5) - 2) / 2
                    nominal = 10.0 * jitter
                    value = nominal * factor if h.higher_is_better else nominal / factor
                    row = {
                        "run_id": run_id,
                        "backend": "cpu",
                        "device": f"dev{d}",
                        "device_name": MODEL,
                        **c,
                        h.column: value,
                        "status": "ok",
                        "status_detail": "",
                        "throttled": False,
                        "throttle_reasons": "",
                    }
                    if h.at_max:  # a smaller size that must be ignored (in cache: far faster)
                        tables.setdefault(table, []).append({**row, h.at_max: 1024, h.column: value * 5})
                        row[h.at_max] = 1 << 24
                    if node in throttled:
                        row.update(throttled=True, throttle_reasons="thermal")
                    if failed_point and failed_point["node"] == node and h.name == failed_point["metric"]:
                        row.update(status="error", status_detail=failed_point["detail"])
                        row[h.column] = None
                    for col, allowed in h.where.items():
                        row.setdefault(col, allowed[0])
                    tables.setdefault(table, []).append(row)
    out = {name: pd.DataFrame(rows) for name, rows in tables.items()}
    out["runs"] = pd.DataFrame(runs)
    return out


def evaluate(tables, records=(), **rule):
    return V.evaluate(tables, list(records), V.Rule(**rule))


def verdict_of(result, node):
    return result.verdicts.set_index("node").loc[node]


# ---- the rule --------------------------------------------------------------------------------------------


def test_rule_needs_both_k_mads_and_the_percentage():
    rule = V.Rule(k_mad=3, min_drop_pct=10)
    # tight fleet: MAD tiny, a 2% dip is many MADs but under 10% -> not slow
    assert V.is_slow(98.0, 100.0, 0.1, True, rule)[0] is False
    # wide fleet: 15% below but within 3 MADs (MAD 10) -> not slow
    assert V.is_slow(85.0, 100.0, 10.0, True, rule)[0] is False
    # both: 30% below, 3+ MADs -> slow; lower-is-better mirrored
    slow, drop, mads = V.is_slow(70.0, 100.0, 5.0, True, rule)
    assert slow and drop == pytest.approx(30.0) and mads == pytest.approx(6.0)
    assert V.is_slow(1.3, 1.0, 0.05, False, rule)[0] and not V.is_slow(0.7, 1.0, 0.05, False, rule)[0]
    # faster than the median is never slow
    assert not V.is_slow(150.0, 100.0, 1.0, True, rule)[0]


def test_robust_center_is_the_median_and_normal_scaled_mad():
    median, mad = V.robust_center([10, 11, 12, 13, 100])
    assert median == 12 and mad == pytest.approx(1.4826, rel=1e-3)


# ---- verdicts on fake node results -----------------------------------------------------------------------


def test_healthy_fleet_is_all_healthy():
    result = evaluate(fake_tables({f"n{i}": 1.0 for i in range(1, 6)}))
    assert list(result.verdicts["verdict"]) == ["healthy"] * 5 and result.exit_code == 0
    metrics = set(result.points["metric"])
    assert {"matmul_tflops:float32", "matmul_tflops:bfloat16", "membw_gbps:triad", "warmup_warm_s"} <= metrics
    # at_max: the largest size's value, not the 5x faster small one
    triad = result.points[result.points["metric"] == "membw_gbps:triad"]["value"]
    assert triad.max() < 11


def test_planted_slow_node_is_flagged_with_the_metric_and_by_how_much():
    result = evaluate(fake_tables({"n1": 1.0, "n2": 1.0, "n3": 1.0, "n4": 0.5}))
    v = verdict_of(result, "n4")
    assert v["verdict"] == "slow" and result.exit_code == 1
    assert "matmul_tflops:float32" in v["slow_metrics"].split(",")
    assert "warmup_warm_s" in v["slow_metrics"].split(",")  # lower is better: twice the time is slow too
    assert "% worse than the fleet median" in v["detail"] and "matmul_tflops:bfloat16" in v["detail"]
    drop = result.judged[
        (result.judged["node"] == "n4")
        & (result.judged["metric"] == "matmul_tflops:float32")
        & (result.judged["level"] == "node")
    ]["drop_pct"].iloc[0]
    assert drop == pytest.approx(50, abs=2)
    assert all(verdict_of(result, n)["verdict"] == "healthy" for n in ("n1", "n2", "n3"))
    assert result.verdicts["node"].iloc[0] == "n4"  # flagged nodes first


def test_a_small_dip_is_not_flagged():
    result = evaluate(fake_tables({"n1": 1.0, "n2": 1.0, "n3": 1.0, "n4": 0.95}))
    assert result.exit_code == 0  # 5% is under min_drop_pct (10%) whatever the MADs say
    assert evaluate(fake_tables({"n1": 1.0, "n2": 1.0, "n3": 1.0, "n4": 0.95}), min_drop_pct=3).exit_code == 1


def test_one_slow_device_of_a_node_is_named():
    tables = fake_tables({"n1": 1.0, "n2": 1.0, "n3": 1.0}, devices=4)
    m, h = headline_table("matmul_tflops")
    df = tables[m]
    hit = (df["run_id"] == "fleet-n2") & (df["device"] == "dev3") & (df["dtype"] == "bfloat16")
    df.loc[hit, h.column] = df.loc[hit, h.column] * 0.6
    result = evaluate(tables)
    v = verdict_of(result, "n2")
    assert v["verdict"] == "slow" and "(dev3)" in v["detail"] and "matmul_tflops:bfloat16" in v["detail"]
    assert v["devices"] == 4


def test_throttled_node():
    result = evaluate(fake_tables({"n1": 1.0, "n2": 1.0, "n3": 1.0}, throttled={"n2"}))
    v = verdict_of(result, "n2")
    assert v["verdict"] == "throttled" and "thermal" in v["detail"] and result.exit_code == 1


def test_failed_node_from_its_job_and_from_a_failed_point():
    tables = fake_tables(
        {"n1": 1.0, "n2": 1.0, "n3": 1.0},
        failed_point={"node": "n3", "metric": "matmul_tflops", "detail": "CUDA error: ECC"},
    )
    records = [
        V.NodeRecord("n1", run_id="fleet-n1"),
        V.NodeRecord("n2", run_id="fleet-n2"),
        V.NodeRecord("n3", run_id="fleet-n3"),
        V.NodeRecord("n9", state="failed", error="node n9 is down* in SLURM (not responding)"),
    ]
    result = evaluate(tables, records)
    assert verdict_of(result, "n9")["verdict"] == "failed" and "down*" in verdict_of(result, "n9")["detail"]
    v3 = verdict_of(result, "n3")
    assert v3["verdict"] == "failed" and "matmul_tflops:float32 (dev0): error: CUDA error: ECC" in v3["detail"]
    assert verdict_of(result, "n1")["verdict"] == "healthy"  # the rest still report
    assert list(result.verdicts["verdict"])[:2] == ["failed", "failed"]


def test_fleet_too_small_for_a_median_uses_only_the_baseline():
    tables = fake_tables({"n1": 1.0, "n2": 0.5})
    assert evaluate(tables).exit_code == 0  # two devices: no median to judge by (min_devices 3)
    healthy = evaluate(fake_tables({f"n{i}": 1.0 for i in range(1, 5)}))
    baseline = V.baseline_of(healthy.judged)
    assert set(baseline.columns) == set(V.BASELINE_COLUMNS) and (baseline["n"] == 4).all()
    result = V.evaluate(tables, [], V.Rule(), baseline)
    v = verdict_of(result, "n2")
    assert v["verdict"] == "slow" and "worse than the baseline" in v["detail"]
    assert verdict_of(result, "n1")["verdict"] == "healthy"


# ---- the CLI on run folders ------------------------------------------------------------------------------


def write_node_folders(root: Path, tables: dict[str, pd.DataFrame], records=()) -> None:
    """Each node's run folder as the node job writes it: run.json, each table's CSV with every documented
    column, fleet_node.json."""
    runs = tables["runs"]
    for _, r in runs.iterrows():
        node = json.loads(r["env_json"])["SLURMD_NODENAME"]
        d = root / node
        d.mkdir(parents=True)
        (d / registry.RUN_FILE).write_text(
            json.dumps(
                {
                    "run": r["run_id"],
                    "config": {"backends": ["cpu"]},
                    "env": {"SLURMD_NODENAME": node},
                    "host": "samehost",
                }
            )
        )
        (d / registry.DEVICES_FILE).write_text(json.dumps({"host": "samehost", "env": {"SLURMD_NODENAME": node}}))
        (d / NODE_FILE).write_text(json.dumps({"node": node, "state": "ok", "run_id": r["run_id"]}))
        for name, df in tables.items():
            if name == "runs":
                continue
            spec = registry.TABLES[name]
            mine = df[df["run_id"] == r["run_id"]].reindex(columns=spec.all_columns)
            mine.to_csv(d / spec.filename("cpu"), index=False)
    for rec in records:
        (root / rec.node).mkdir(parents=True, exist_ok=True)
        (root / rec.node / NODE_FILE).write_text(json.dumps(rec.__dict__))


def accelbench(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "accelbench", *args], capture_output=True, text=True, cwd=cwd, check=False, timeout=300
    )


def test_run_info_records_the_slurm_node_name():
    from accelbench.run import provenance

    assert "SLURMD_NODENAME" in provenance.RELEVANT_ENV


@pytest.mark.parametrize("case", ["healthy", "slow_and_failed"])
def test_cli_exit_codes_and_table(tmp_path, case):
    if case == "healthy":
        write_node_folders(tmp_path, fake_tables({"n1": 1.0, "n2": 1.0, "n3": 1.0}))
    else:
        write_node_folders(
            tmp_path,
            fake_tables({"n1": 1.0, "n2": 1.0, "n3": 0.4}),
            [V.NodeRecord("n4", "failed", "node n4 is down* in SLURM (not responding)")],
        )
    proc = accelbench("fleet", str(tmp_path))
    assert proc.returncode == (0 if case == "healthy" else 1), proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:3] == ["node", "verdict", "detail"]
    verdicts = pd.read_csv(tmp_path / "fleet.csv").set_index("node")["verdict"].to_dict()
    if case == "healthy":
        assert verdicts == {"n1": "healthy", "n2": "healthy", "n3": "healthy"} and "3 healthy" in lines[-1]
    else:
        assert verdicts == {"n1": "healthy", "n2": "healthy", "n3": "slow", "n4": "failed"}
        assert lines[1].startswith("n4") and "down*" in lines[1]  # flagged first
        assert "matmul_tflops" in lines[2] and lines[2].startswith("n3")
    points = pd.read_csv(tmp_path / "fleet_points.csv")
    assert set(points["level"]) == {"device", "node"}


def test_cli_baseline_round_trip(tmp_path):
    good, small = tmp_path / "good", tmp_path / "small"
    write_node_folders(good, fake_tables({f"n{i}": 1.0 for i in range(1, 5)}))
    assert accelbench("fleet", str(good), "--save-baseline", str(tmp_path / "base.csv")).returncode == 0
    write_node_folders(small, fake_tables({"n1": 1.0, "n2": 0.6}))
    assert accelbench("fleet", str(small)).returncode == 0  # two nodes: no fleet median
    proc = accelbench("fleet", str(small), "--baseline", str(tmp_path / "base.csv"))
    assert proc.returncode == 1 and "worse than the baseline" in proc.stdout


@pytest.mark.parametrize(
    "args, key",
    [
        (["--k-mad", "0"], "fleet.k_mad"),
        (["--min-drop-pct", "150"], "fleet.min_drop_pct"),
        (["--min-drop-pct", "-1"], "fleet.min_drop_pct"),
        (["--nodes", ","], "fleet.nodes"),
        (["--nodes", "n1;rm -rf"], "fleet.nodes"),
        (["--partition", "bad name"], "fleet.partition"),
        (["--baseline", "/nonexistent/base.csv"], "fleet.baseline"),
    ],
)
def test_bad_input_is_one_line_naming_the_key(tmp_path, args, key):
    write_node_folders(tmp_path, fake_tables({"n1": 1.0, "n2": 1.0, "n3": 1.0}))
    proc = accelbench("fleet", str(tmp_path), *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and key in proc.stderr, proc.stderr
    assert not (tmp_path / "fleet.csv").exists()


def test_unusable_folder_exits_2(tmp_path):
    proc = accelbench("fleet", str(tmp_path / "missing"))
    assert proc.returncode == 2 and "results:" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    (tmp_path / "empty").mkdir()
    proc = accelbench("fleet", str(tmp_path / "empty"))
    assert proc.returncode == 2 and "no node result" in proc.stderr


def test_fleet_config_section_from_the_plugin():
    from accelbench.run.config import ConfigError, check, with_defaults

    config = with_defaults({})
    assert config["fleet"]["k_mad"] == 3.0 and config["fleet"]["min_drop_pct"] == 10.0
    with pytest.raises(ConfigError, match="fleet.min_devices"):
        check({"fleet": {"min_devices": 2}})
    assert not math.isnan(V.Rule.from_config(config["fleet"]).k_mad)


# ---- the report's Fleet section and heat map ---------------------------------------------------------------


def test_report_fleet_section_and_heat_map(tmp_path):
    from accelbench.reporting import aggregate as A
    from accelbench.reporting.html import build_context, render
    from accelbench.reporting.plots import _setup
    from accelbench.stages.fleet.figures import fig_fleet, heat_matrix
    from accelbench.stages.fleet.report import fleet_result

    write_node_folders(tmp_path / "fleet-r", fake_tables({"n1": 1.0, "n2": 1.0, "n3": 0.5, "n4": 1.0}))
    tables, manifest = A.aggregate(tmp_path)
    result = fleet_result(tables)
    assert result is not None and result.verdicts.set_index("node").loc["n3", "verdict"] == "slow"
    matrix, verdicts = heat_matrix(result)
    assert matrix.index[0] == "n3" and verdicts[0] == "slow"  # flagged nodes first
    assert matrix.loc["n3", "warmup_warm_s"] == pytest.approx(50, abs=3)  # lower is better: 2x the time is 50%
    assert matrix.loc["n1", "matmul_tflops:float32"] == pytest.approx(100, abs=3)
    plt, sns = _setup()
    fig = fig_fleet(plt, sns, tables, None)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[0] == "n3 (slow)" and len(labels) == 4
    plt.close(fig)
    A.write(tables, manifest, tmp_path / "agg")
    html = render(build_context(tmp_path / "agg", tmp_path / "plots"))
    section = html[html.index('<section id="fleet">') :]
    section = section[: section.index("</section>")]
    assert "4 nodes" in section and section.index(">n3<") < section.index(">n1<")
    assert "worse than the fleet median" in section


def test_report_has_no_fleet_for_one_node(tmp_path):
    from accelbench.stages.fleet.report import context

    tables = fake_tables({"n1": 1.0})
    assert context(tables, None, {}) == {"fleet": None}


def test_snakemake_fleet_target_submits_from_the_host(tmp_path):
    """`snakemake fleet` is its own target (not part of all): one local job running accelbench fleet --submit into
    results/fleet-<run>, with the config's fleet section."""
    (tmp_path / "config.yaml").write_text("run: lab\nfleet:\n  partition: gpu\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "fleet",
            "-n",
            "-p",
            "-s",
            str(REPO / "Snakefile"),
            "--directory",
            str(tmp_path),
            "--configfile",
            str(tmp_path / "config.yaml"),
            "--profile",
            str(REPO / "profiles" / "slurm"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "rule fleet:" in out, out
    assert "accelbench fleet results/fleet-lab --submit --config-json" in out and '"partition": "gpu"' in out
    assert "rule run_info" not in out  # the fleet check runs nothing of the pipeline here


def test_a_node_check_run_expects_only_its_stages_files(tmp_path):
    """The node check runs a few stages: run-info records them (--stages) and aggregate expects only their files."""
    from accelbench.reporting.aggregate import expected_files

    stages = [s.name for s in registry.FLEET_STAGES]
    assert stages and all(any(registry.TABLES[t].headlines for t in s.tables) for s in registry.FLEET_STAGES)
    every = expected_files({"backends": ["cpu"]})
    mine = expected_files({"backends": ["cpu"]}, stages)
    assert mine and set(mine) < set(every)
    assert all(registry.TABLES[registry.table_of(f)].stage in stages for f in mine)
    out = tmp_path / "run.json"
    proc = accelbench("run-info", "--config-json", "{}", "--run", "r1", "--out", str(out), "--stages", ",".join(stages))
    assert proc.returncode == 0 and json.loads(out.read_text())["stages"] == stages
    bad = accelbench("run-info", "--config-json", "{}", "--run", "r1", "--out", str(out), "--stages", "nosuch")
    assert bad.returncode == 2 and "--stages" in bad.stderr


def test_node_config_lays_fleet_check_over_the_stages_settings():
    from accelbench.run.config import ConfigError, with_defaults
    from accelbench.stages.fleet import plan

    config = with_defaults({})
    node = plan.node_config(config, "f-n1")
    for key, section in registry.FLEET_CHECK.items():
        for k, v in section.items():
            if not isinstance(v, dict):
                assert node[key][k] == v, (key, k)
    key, section = next(iter(registry.FLEET_CHECK.items()))
    k = next(k for k, v in section.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
    config["fleet"]["check"] = {key: {k: section[k] * 2}}
    assert plan.node_config(config, "f-n1")[key][k] == section[k] * 2 and node["run"] == "f-n1"
    config["fleet"]["check"] = {key: {"no_such_key": 1}}
    with pytest.raises(ConfigError, match="fleet.check"):
        plan.node_config(config, "f-n1")


def test_resolve_nodes_bad_input_lines():
    from accelbench.run.config import ConfigError
    from accelbench.stages.fleet import plan

    known = {n: plan.SlurmNode(n, s, ("gpu",)) for n, s in (("a1", "idle"), ("a2", "down*"), ("a3", "drain"))}
    known["c1"] = plan.SlurmNode("c1", "mix", ("cpu",))
    assert [n.name for n in plan.resolve_nodes({"partition": "gpu"}, known, ["gpu", "cpu"])] == ["a1", "a2", "a3"]
    assert [n.unreachable != "" for n in plan.resolve_nodes({"partition": "gpu"}, known, ["gpu"])] == [
        False,
        True,
        True,
    ]
    assert "not responding" in known["a2"].unreachable and known["c1"].unreachable == ""
    for fleet, key in (
        ({"partition": "nosuch"}, "fleet.partition"),
        ({"nodes": ["zz"]}, "fleet.nodes"),
        ({}, "fleet.nodes"),
        ({"partition": "gpu", "nodes": ["c1"]}, "fleet.nodes"),
    ):
        with pytest.raises(ConfigError, match=key):
            plan.resolve_nodes(fleet, known, ["gpu", "cpu"])


def test_kubernetes_fleet_job_is_one_pod_per_node_at_once_running_the_node_check():
    """profiles/kubernetes/fleet-job.yaml (an example for clusters without SLURM): an Indexed Job whose pods all start
    at once, at most one per node, each told its node's name, each running a node check accelbench accepts."""
    import yaml

    from accelbench.cli import build_parser

    job = yaml.safe_load((REPO / "profiles" / "kubernetes" / "fleet-job.yaml").read_text())
    spec = job["spec"]
    assert job["kind"] == "Job" and spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] >= 2 and spec["backoffLimit"] == 0
    pod = spec["template"]["spec"]
    rule = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert rule["topologyKey"] == "kubernetes.io/hostname"
    assert rule["labelSelector"]["matchLabels"] == spec["template"]["metadata"]["labels"]
    container = pod["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["ACCELBENCH_FLEET_NODE"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    command = container["command"]
    assert command[:2] == ["accelbench", "fleet"]
    args = build_parser("fleet").parse_args(command[1:])
    assert args.node and args.results.startswith("/results/") and args.configfile.startswith("/config/")
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/results", "/config"} <= mounts


def test_node_name_from_kubernetes_then_slurm_then_host(monkeypatch):
    from accelbench.stages.fleet import node

    monkeypatch.setenv("SLURMD_NODENAME", "s1")
    monkeypatch.setenv("ACCELBENCH_FLEET_NODE", "k8s-node-7")
    assert node.node_name() == "k8s-node-7"
    monkeypatch.delenv("ACCELBENCH_FLEET_NODE")
    assert node.node_name() == "s1"
    runs = pd.DataFrame(
        [
            {"run_id": "r1", "host": "pod-abc", "env_json": json.dumps({"ACCELBENCH_FLEET_NODE": "k1"})},
            {"run_id": "r2", "host": "h2", "env_json": "{}"},
        ]
    )
    assert V.node_of_runs(runs) == {"r1": "k1", "r2": "h2"}


@pytest.mark.slow
def test_every_device_of_a_node_is_checked_at_once_in_its_own_process(tmp_path, monkeypatch):
    """A backend with several devices: one process per device, started together, each seeing only its device
    (the backend's visible-devices variable), each its own run folder; the judge names each device by its run.
    Faked here with the CPU backend said to have two devices (the GPU path is untested on hardware)."""
    from accelbench.run.config import with_defaults
    from accelbench.stages.fleet import node
    from accelbench.stages.fleet.cli import judge_folder

    monkeypatch.setattr(node, "visible_variable", lambda b: "ACCELBENCH_TEST_VISIBLE")
    monkeypatch.setattr(node, "device_count", lambda b: 2)
    monkeypatch.setenv("ACCELBENCH_FLEET_NODE", "gpu-node-1")
    config = with_defaults(
        {
            "cpu_threads": 1,
            "fleet": {
                "threads": 1,
                "check": {
                    "matmul": {"sizes": [64], "dtypes": ["float32"], "min_run_time_s": 0.02},
                    "membw": {"max_mb": 1, "min_run_time_s": 0.02},
                },
            },
        }
    )
    folder = tmp_path / "fleet-d"
    started = []
    real_popen = subprocess.Popen

    def popen(*args, **kwargs):
        started.append((time.monotonic(), kwargs["env"]["ACCELBENCH_TEST_VISIBLE"]))
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(node.subprocess, "Popen", popen)
    assert node.run_node_check(folder, config, log=lambda m: None) == 0
    assert [v for _, v in started] == ["0", "1"] and started[1][0] - started[0][0] < 2  # together, not in turn
    runs = sorted(p.parent.name for p in (folder / "gpu-node-1").glob("*/run.json"))
    assert runs == ["cpu0", "cpu1"]
    env = json.loads((folder / "gpu-node-1" / "cpu1" / registry.DEVICES_FILE).read_text())["env"]
    assert env["ACCELBENCH_FLEET_NODE"] == "gpu-node-1"
    result = judge_folder(folder, config, out=lambda m: None)
    v = result.verdicts.set_index("node").loc["gpu-node-1"]
    assert v["devices"] == 2 and v["verdict"] in ("healthy", "slow")  # two devices, too few for a fleet median
    assert result.points["device"].str.contains("@").all()


def test_dispatch_with_a_fake_slurm_deadline_unreachable_and_lost_jobs(tmp_path, monkeypatch):
    """--submit's bookkeeping against a fake SLURM: a down node gets no job; a job pending past fleet.timeout_s is
    cancelled and failed; a job that ended without its node's record is failed naming its state; every sbatch
    pins its node; the job script quotes every path."""
    import shlex

    from accelbench.run.config import with_defaults
    from accelbench.stages.fleet import dispatch, plan

    calls = []

    def fake(argv, timeout=60):
        calls.append(argv)
        out = ""
        if argv[:2] == ["sinfo", "-h"] and "-N" in argv:
            out = "a1|gpu*|idle\na2|gpu*|mix\na3|gpu*|down*\n"
        elif argv[:2] == ["sinfo", "-h"]:
            out = "gpu\n"
        elif argv[0] == "sbatch":
            node = next(a for a in argv if a.startswith("--nodelist=")).split("=")[1]
            out = {"a1": "101", "a2": "102;cluster"}[node] + "\n"
        elif argv[0] == "squeue":
            out = "101|COMPLETED|None\n102|PENDING|Resources\n"
        return subprocess.CompletedProcess(argv, 0, out, "")

    monkeypatch.setattr(plan, "run_slurm", fake)
    config = with_defaults({"fleet": {"partition": "gpu", "timeout_s": 10}})
    folder = tmp_path / "my fleet"
    t0 = time.monotonic()
    request = dispatch.submit(folder, config, log=lambda m: None, poll_s=0.2)
    assert 10 <= time.monotonic() - t0 < 30
    assert request["jobs"] == {"a1": "101", "a2": "102"} and request["nodes"] == ["a1", "a2", "a3"]
    sbatch = [c for c in calls if c[0] == "sbatch"]
    assert len(sbatch) == 2 and all("--exclusive" in c and "--partition=gpu" in c and "--nodes=1" in c for c in sbatch)
    assert ["scancel", "102"] in calls
    rec = {n: json.loads((folder / n / NODE_FILE).read_text()) for n in ("a1", "a2", "a3")}
    assert rec["a3"]["state"] == "failed" and "down*" in rec["a3"]["error"] and "no job submitted" in rec["a3"]["error"]
    assert rec["a2"]["state"] == "failed" and "PENDING (Resources); cancelled" in rec["a2"]["error"]
    assert rec["a1"]["state"] == "failed" and "ended COMPLETED without a result" in rec["a1"]["error"]
    script = (folder / dispatch.JOB_SCRIPT).read_text().splitlines()[-1]
    argv = shlex.split(script)
    assert argv[0] == "exec" and argv[argv.index("fleet") + 1] == str(folder.resolve()) and "--node" in argv
    with pytest.raises(Exception, match="already holds a fleet check"):
        dispatch.submit(folder, config, log=lambda m: None)
