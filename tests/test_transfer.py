"""Host<->device bandwidth: the loop and status logic with fakes (no accelerator here), the copy
statements on real CPU tensors, and the CLI's absent rows."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from accelbench import backends, registry
from accelbench.measure.stability import DeviceWarmup
from accelbench.measure.timing import Measurer, summarize
from accelbench.run.config import config_hash, with_defaults
from accelbench.stages import common
from accelbench.stages.transfer import measure as transfer
from accelbench.stages.transfer.measure import TorchCopies, device_rows, gbps, measure_copy, size_bytes

CFG = {"sizes_mb": [2, 1], "min_run_time_s": 0.01, "unstable_iqr_ratio": 0.1}


def test_sizes_are_decimal_megabytes():
    assert size_bytes(1) == 1_000_000 and size_bytes(0.5) == 500_000 and size_bytes(1e-9) == 1
    assert gbps(2_000_000_000, 0.5) == pytest.approx(4.0)


class FakeCopies:
    """A device whose pinned memory may fail and whose device buffer may run out."""

    def __init__(self, pin_error=None, oom_at=None):
        self.pin_error = pin_error
        self.oom_at = oom_at
        self.statements = []

    def host_buffer(self, nbytes, pinned):
        if pinned and self.pin_error:
            raise self.pin_error
        return ("host", nbytes, pinned)

    def device_buffer(self, nbytes):
        if nbytes == self.oom_at:
            raise torch.OutOfMemoryError("CUDA out of memory")
        return ("dev", nbytes)

    def statement(self, direction, pinned):
        s = TorchCopies.statement(direction, pinned)
        self.statements.append(s)
        return s


class FakeMeasurer:
    """1 GB/s for every copy: median = bytes / 1e9."""

    def __init__(self, spread=0.0):
        self.spread = spread

    def measure(self, stmt, g):
        nbytes = g["host"][1]
        base = nbytes / 1e9
        return summarize([base * (1 + self.spread * (i - 4.5) / 4.5) for i in range(10)], 3)


def test_every_size_memory_direction_with_fakes():
    fake = FakeCopies()
    rows = device_rows("cuda:0", CFG, copies=fake, measurer=FakeMeasurer(), log=lambda s: None)
    keys = [(r["size_bytes"], r["memory"], r["direction"]) for r in rows]
    assert keys == [(s, m, d) for s in (1_000_000, 2_000_000) for m in ("pageable", "pinned") for d in ("h2d", "d2h")]
    assert all(r["status"] == "ok" and r["gbps"] == pytest.approx(1.0) for r in rows)
    assert all(r["repeats"] == 30 and r["blocks"] == 10 for r in rows)
    assert "dev.copy_(host, non_blocking=True)" in fake.statements  # pinned h2d is asynchronous
    assert "host.copy_(dev, non_blocking=False)" in fake.statements  # pageable d2h is not


def test_unpinnable_memory_is_unsupported_and_oom_is_recorded():
    fake = FakeCopies(pin_error=RuntimeError("pin_memory is not available on mps"), oom_at=2_000_000)
    rows = device_rows("mps", CFG, copies=fake, measurer=FakeMeasurer(), log=lambda s: None)
    status = {(r["size_bytes"], r["memory"], r["direction"]): r["status"] for r in rows}
    assert status[(1_000_000, "pageable", "h2d")] == "ok"
    assert status[(1_000_000, "pinned", "d2h")] == "unsupported"
    assert status[(2_000_000, "pageable", "h2d")] == "oom"
    assert status[(2_000_000, "pinned", "h2d")] == "unsupported"  # cannot pin: said before any allocation
    assert "cannot pin" in rows[2]["status_detail"]


def test_unstable_copy():
    row = measure_copy(
        FakeCopies(), FakeMeasurer(spread=0.5), direction="h2d", memory="pageable", nbytes=10**6, unstable_iqr_ratio=0.1
    )
    assert row["status"] == "unstable" and "IQR/median" in row["status_detail"]


def test_real_copies_between_cpu_tensors():
    """The real statements and buffers, with the CPU standing in for the device."""
    cpu = backends.get("cpu")
    copies = TorchCopies("cpu", cpu)
    m = Measurer(cpu.synced_timer("cpu"), min_run_time_s=0.01, threads=1)
    row = measure_copy(copies, m, direction="h2d", memory="pageable", nbytes=1_000_000, unstable_iqr_ratio=10.0)
    assert row["status"] == "ok" and row["gbps"] > 0 and row["blocks"] >= 6
    # the CPU backend has no memory to pin for (Backend.pinned_memory_support), whatever torch could do
    row = measure_copy(copies, m, direction="d2h", memory="pinned", nbytes=1_000_000, unstable_iqr_ratio=10.0)
    assert row["status"] == "unsupported" and "pin" in row["status_detail"]
    assert cpu.pinned_memory_support() in row["status_detail"]


def write_run(tmp_path) -> str:
    cfg = with_defaults({"run": "x", "transfer": {"sizes_mb": [1]}})
    path = tmp_path / "run.json"
    path.write_text(
        json.dumps(
            {"run": "x", "config": cfg, "config_hash": config_hash(cfg), "git_commit": "abc", "accelbench_version": "0"}
        )
    )
    return str(path)


@pytest.mark.parametrize("backend,reason", [("cpu", "cpu is the host"), ("cuda", "CUDA"), ("rocm", "ROCM")])
def test_cli_absent_rows(tmp_path, backend, reason):
    from accelbench.cli import main

    out = tmp_path / f"transfer_{backend}.csv"
    assert main(["transfer", "--run-file", write_run(tmp_path), "--backend", backend, "--out-dir", str(tmp_path)]) == 0
    df = pd.read_csv(out)
    assert list(df.columns[: len(list(registry.TABLES["transfer"].columns))]) == list(
        registry.TABLES["transfer"].columns
    )
    assert len(df) == 1 and df.loc[0, "status"] == "absent" and reason in df.loc[0, "status_detail"]
    assert df.loc[0, "backend"] == backend and df.loc[0, "run_id"] == "x"
    assert df.loc[0, "method_version"] == registry.STAGES["transfer"].method_version


def test_cli_on_a_fake_accelerator(tmp_path, monkeypatch):
    """The CLI's device loop with the devices, their warm-up and the copies faked (untested on hardware)."""
    from accelbench.cli import main

    warmed = []

    def fake_warm(backend, device, warm_cfg, seed=0):
        warmed.append(device)
        return DeviceWarmup(seconds=0.25, calls=5, status="ok", warm_s=0.001)

    monkeypatch.setattr(backends.CudaBackend, "devices", lambda self: ["cuda:0", "cuda:1"])
    monkeypatch.setattr(common, "warm_device", fake_warm)
    monkeypatch.setattr(
        transfer,
        "device_rows",
        lambda d, cfg, **k: device_rows(d, cfg, copies=FakeCopies(), measurer=FakeMeasurer(), log=lambda s: None),
    )
    assert main(["transfer", "--run-file", write_run(tmp_path), "--backend", "cuda", "--out-dir", str(tmp_path)]) == 0
    df = pd.read_csv(tmp_path / "transfer_cuda.csv")
    assert list(df["device"].unique()) == ["cuda:0", "cuda:1"] and len(df) == 2 * 4
    assert df["gbps"].tolist() == pytest.approx([1.0] * 8) and (df["status"] == "ok").all()
    assert warmed == ["cuda:0", "cuda:1"]  # each device warmed once, before its copies
    assert (df["device_warmup_s"] == 0.25).all() and (df["device_warmup_calls"] == 5).all()
    assert (df["device_warmup_status"] == "ok").all()


class HostAsAccelerator(backends.CpuBackend):
    """The CPU dressed up as an accelerator backend, so the transfer stage's real device loop (warm-up,
    copies, Measurer) runs end to end here: its "device" is the host."""

    name = "cuda"
    is_accelerator = True


def run_info_file(tmp_path, cfg: dict) -> str:
    from accelbench.cli import main

    path = str(tmp_path / "run.json")
    assert main(["run-info", "--config-json", json.dumps(cfg), "--run", "t", "--out", path]) == 0
    return path


def test_cli_warms_each_device_and_records_it_and_the_method_version(tmp_path, monkeypatch, capsys):
    from accelbench.cli import main

    monkeypatch.setitem(backends.CLASSES, "cuda", HostAsAccelerator)
    cfg = {
        "run": "t",
        "warmup": {"n": 16, "max_iters": 30, "window": 3, "rel_tol": 0.5},
        "transfer": {"sizes_mb": [0.01], "min_run_time_s": 0.002, "unstable_iqr_ratio": 10.0},
    }
    run = run_info_file(tmp_path, cfg)
    assert main(["transfer", "--run-file", run, "--backend", "cuda", "--threads", "1", "--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    df = pd.read_csv(tmp_path / registry.TABLES["transfer"].filename("cuda"))
    assert len(df) == 4 and set(df["device"]) == {"cpu"}
    assert df.loc[(df["memory"] == "pageable"), "status"].eq("ok").all()
    assert (df["device_warmup_s"] > 0).all()
    assert df["device_warmup_status"].isin(["ok", "unstable"]).all()
    assert (df["device_warmup_calls"] >= 3).all()
    assert "warm-up" in out
    assert (df["method_version"] == registry.STAGES["transfer"].method_version).all()
