"""The memory-bandwidth stage: the size plan, the GB/s arithmetic, the statements computing what they claim,
failures as statuses, the peak table with its sources, and the CLI on the CPU."""

from __future__ import annotations

import json
import math
import re
import types

import pandas as pd
import pytest
import torch

from accelbench import backends, registry
from accelbench.backends import bandwidth
from accelbench.measure.timing import summarize
from accelbench.run.config import config_hash, with_defaults
from accelbench.stages.membw import measure as membw
from accelbench.stages.membw.measure import TorchStreams, bandwidth_row, device_rows, plan_sizes

MIB = 1024**2
CFG = with_defaults({})["membw"]


def test_plan_sizes_from_inside_the_cache_to_the_cap():
    sizes = plan_sizes(32 * MIB, 64 * 1024 * MIB, {**CFG, "max_mb": 1024})
    assert sizes[0] == 64 * 1024 and sizes[-1] == 128 * MIB  # 4 x the 32 MiB cache
    assert all(b == a * 4 for a, b in zip(sizes[:-2], sizes[1:-1]))
    assert all(s % 4 == 0 for s in sizes) and sizes == sorted(set(sizes))


def test_plan_sizes_capped_by_config_and_free_memory():
    """This VM's sysfs says 480 MiB of L3: 4 x that is capped by membw.max_mb, and by free memory."""
    assert plan_sizes(480 * MIB, 64 * 1024 * MIB, CFG)[-1] == 256 * MIB
    assert plan_sizes(480 * MIB, 1024 * MIB, CFG)[-1] == int(0.4 * 1024 * MIB / 3) // 4 * 4
    assert plan_sizes(1 * MIB, 8 * 1024 * MIB, {**CFG, "min_kb": 64, "size_factor": 2})[-1] == 4 * MIB


def test_bandwidth_row_arithmetic_and_interval():
    stats = summarize([0.010 + 0.0001 * i for i in range(10)], calls_per_block=4)
    row = bandwidth_row("triad", 100 * MIB, stats, unstable_iqr_ratio=0.1, peak_gbps=200.0)
    moved = 3 * 100 * MIB
    assert row["bytes_moved"] == moved and row["gbps"] == pytest.approx(moved / stats.median_s / 1e9)
    assert row["gbps_ci95_low"] <= row["gbps"] <= row["gbps_ci95_high"]
    assert row["gbps_ci95_low"] == pytest.approx(moved / stats.ci95_high_s / 1e9)
    assert row["pct_of_peak"] == pytest.approx(100 * row["gbps"] / 200.0) and row["status"] == "ok"
    noisy = summarize([0.01 * (1 + 0.5 * (i % 2)) for i in range(10)])
    assert bandwidth_row("copy", MIB, noisy, 0.1, None)["status"] == "unstable"
    assert math.isnan(bandwidth_row("copy", MIB, noisy, 0.1, None)["pct_of_peak"])


@pytest.fixture
def streams():
    torch.set_num_threads(1)
    return TorchStreams("cpu", backends.get("cpu"))


def test_statements_compute_copy_and_triad(streams):
    streams.allocate(4096)
    stmt, g = streams.statement("copy")
    g["a"].copy_(torch.arange(1024, dtype=torch.float32))
    exec(stmt, g)
    assert torch.equal(g["b"], g["a"])
    stmt, g = streams.statement("triad")
    exec(stmt, g)
    assert torch.allclose(g["a"], g["b"] + membw.TRIAD_SCALAR * g["c"])
    assert streams.arrays["a"].numel() == 1024


def test_launch_statement_waits_for_every_op_and_xla_cuts_the_graph():
    """The floor is one tiny op plus a synchronization per call; on XLA the lazy graph is cut first (logic
    with a counting stand-in; untested on hardware)."""
    synced, cut = [], []
    fake = types.SimpleNamespace(
        torch=torch, graph_cut=lambda: lambda: cut.append(1), synchronizer=lambda device: lambda: synced.append(1)
    )
    s = TorchStreams("cpu", fake)
    stmt, g = s.statement("launch")
    assert stmt == "x.add_(1); cut(); sync()"
    for _ in range(3):
        exec(stmt, g)
    assert len(synced) == len(cut) == 3 and g["x"].item() == 3
    s.allocate(64)
    assert s.statement("triad")[0].endswith("; cut()")
    with pytest.raises(ValueError, match="allowed: launch, copy, triad"):
        s.statement("scale")


class FailingStreams:
    """Allocation fails (out of memory) at one size; the statements never run."""

    backend = None

    def __init__(self, oom_at):
        self.oom_at = oom_at
        self.size = None

    def allocate(self, size):
        if size == self.oom_at:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 3 GiB")
        self.size = size

    def release(self):
        pass

    def statement(self, kernel):
        return "pass", {}


class FixedMeasurer:
    def warm_up(self, stmt, g, calls=2):
        return 1e-6

    def measure(self, stmt, g):
        return summarize([0.001] * 8)


def test_one_size_out_of_memory_is_its_rows_status_and_the_rest_goes_on():
    cfg = {**CFG, "min_kb": 64, "max_mb": 4, "size_factor": 4}
    rows = device_rows(
        "cpu",
        cfg,
        streams=FailingStreams(oom_at=1024 * 1024),
        measurer=FixedMeasurer(),
        cache_bytes=MIB,
        free_bytes=64 * 1024 * MIB,
        peak=(None, "cpu: measured only"),
        log=lambda s: None,
    )
    df = pd.DataFrame(rows)
    assert df.iloc[0]["kernel"] == "launch" and df.iloc[0]["status"] == "ok"
    oom = df[df["size_bytes"] == MIB]
    assert list(oom["status"]) == ["oom", "oom"] and list(oom["kernel"]) == ["copy", "triad"]
    assert (df[(df["size_bytes"] != MIB) & (df["kernel"] != "launch")]["status"] == "ok").all()
    assert set(df["peak_source"]) == {"cpu: measured only"} and (df["cache_bytes"] == MIB).all()


# ---- peaks -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,gbps",
    [
        ("NVIDIA H100 80GB HBM3", 3350.0),
        ("NVIDIA H100 PCIe", 2000.0),
        ("NVIDIA H100 NVL", 3900.0),
        ("NVIDIA H200", 4800.0),
        ("NVIDIA H200 NVL", 4800.0),
        ("NVIDIA A100-SXM4-80GB", 2039.0),
        ("NVIDIA A100 80GB PCIe", 1935.0),
        ("NVIDIA A100-SXM4-40GB", 1555.0),
        ("NVIDIA A100-PCIE-40GB", 1555.0),
        ("AMD Instinct MI300X", 5300.0),
        ("AMD Instinct MI325X", 6000.0),
    ],
)
def test_datasheet_bandwidth_by_device_name(name, gbps):
    got, source = backends.get("cuda").peak_gbps({"name": name})
    assert got == gbps and "read 2026-12-01" in source


def test_every_bandwidth_entry_has_a_url_and_a_date():
    for e in bandwidth.MEMORY_PEAKS:
        assert re.search(r"https?://", e.source) or "datasheet" in e.source, e.key
        assert "read 20" in e.source, e.key
        assert e.gbps > 0


def test_tpu_by_device_kind_cpu_measured_only_and_the_config_wins():
    xla = backends.get("xla")
    assert xla.peak_gbps({"name": "xla:0", "device_kind": "TPU v5 lite"})[0] == 819.0
    peak, source = backends.get("cpu").peak_gbps({"name": "AMD EPYC 7V13"})
    assert peak is None and "measured only" in source and "membw.peak_gbps.cpu" in source
    assert backends.get("cpu").peak_gbps({}, {"cpu": 51.2}) == (51.2, "config membw.peak_gbps.cpu = 51.2")
    assert backends.get("cuda").peak_gbps({"name": "NVIDIA GH200 480GB"})[0] is None  # not tabulated, not H200


# ---- the CLI on the CPU ---------------------------------------------------------------------------------


def write_run(tmp_path, cfg: dict) -> str:
    full = with_defaults({"run": "t", "membw": cfg})
    path = tmp_path / "run.json"
    path.write_text(
        json.dumps(
            {
                "run": "t",
                "config": full,
                "config_hash": config_hash(full),
                "git_commit": "abc",
                "accelbench_version": "0",
            }
        )
    )
    return str(path)


def cli(*argv) -> int:
    from accelbench.cli import main

    return main(["membw", *argv])


def test_cli_on_the_cpu_triad_gbps_with_an_interval(tmp_path):
    run = write_run(tmp_path, {"min_kb": 64, "max_mb": 4, "min_run_time_s": 0.02})
    assert cli("--run-file", run, "--backend", "cpu", "--threads", "1", "--out-dir", str(tmp_path)) == 0
    df = pd.read_csv(tmp_path / "membw_cpu.csv")
    assert list(df.columns[: len(registry.TABLES["membw"].columns)]) == list(registry.TABLES["membw"].columns)
    launch = df[df["kernel"] == "launch"]
    assert len(launch) == 1 and 0 < launch["median_s"].iloc[0] < 1e-3
    triad = df[df["kernel"] == "triad"]
    assert list(triad["size_bytes"]) == [64 * 1024, 256 * 1024, MIB, 4 * MIB]
    measured = triad[triad["status"].isin(["ok", "unstable"])]
    assert len(measured) >= 3 and (measured["gbps"] > 0).all()
    assert (measured["gbps_ci95_low"] <= measured["gbps"]).all() and (
        measured["gbps"] <= measured["gbps_ci95_high"]
    ).all()
    assert (df["run_id"] == "t").all() and (df["method_version"] == registry.STAGES["membw"].method_version).all()
    assert df["peak_source"].str.contains("measured only").all() and (df["device_warmup_s"] > 0).all()


def test_cli_absent_backend_writes_one_row(tmp_path):
    run = write_run(tmp_path, {})
    assert cli("--run-file", run, "--backend", "cuda", "--threads", "1", "--out-dir", str(tmp_path)) == 0
    df = pd.read_csv(tmp_path / "membw_cuda.csv")
    assert len(df) == 1 and df.loc[0, "status"] == "absent"
