"""Host<->device bandwidth: the loop and status logic with fakes (no accelerator here), the copy
statements on real CPU tensors, and the CLI's absent rows."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from accelbench import columns, transfer
from accelbench.config import config_hash, with_defaults
from accelbench.timing import Measurer, summarize
from accelbench.transfer import TorchCopies, device_rows, gbps, measure_copy, size_bytes

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
    rows = device_rows("cuda:0", CFG, copies_for=lambda d: fake, measurer_for=lambda d: FakeMeasurer(),
                       log=lambda s: None)
    keys = [(r["size_bytes"], r["memory"], r["direction"]) for r in rows]
    assert keys == [(s, m, d) for s in (1_000_000, 2_000_000) for m in ("pageable", "pinned") for d in ("h2d", "d2h")]
    assert all(r["status"] == "ok" and r["gbps"] == pytest.approx(1.0) for r in rows)
    assert all(r["repeats"] == 30 and r["blocks"] == 10 for r in rows)
    assert "dev.copy_(host, non_blocking=True)" in fake.statements  # pinned h2d is asynchronous
    assert "host.copy_(dev, non_blocking=False)" in fake.statements  # pageable d2h is not


def test_unpinnable_memory_is_unsupported_and_oom_is_recorded():
    fake = FakeCopies(pin_error=RuntimeError("pin_memory is not available on mps"), oom_at=2_000_000)
    rows = device_rows("mps", CFG, copies_for=lambda d: fake, measurer_for=lambda d: FakeMeasurer(),
                       log=lambda s: None)
    status = {(r["size_bytes"], r["memory"], r["direction"]): r["status"] for r in rows}
    assert status[(1_000_000, "pageable", "h2d")] == "ok"
    assert status[(1_000_000, "pinned", "d2h")] == "unsupported"
    assert status[(2_000_000, "pageable", "h2d")] == "oom"
    assert status[(2_000_000, "pinned", "h2d")] == "unsupported"  # cannot pin: said before any allocation
    assert "cannot pin" in rows[2]["status_detail"]


def test_unstable_copy():
    row = measure_copy(FakeCopies(), FakeMeasurer(spread=0.5), direction="h2d", memory="pageable", nbytes=10**6,
                       unstable_iqr_ratio=0.1)
    assert row["status"] == "unstable" and "IQR/median" in row["status_detail"]


def test_real_copies_between_cpu_tensors():
    """The real statements and buffers, with the CPU standing in for the device."""
    copies = TorchCopies("cpu")
    m = Measurer("cpu", min_run_time_s=0.01, threads=1)
    row = measure_copy(copies, m, direction="h2d", memory="pageable", nbytes=1_000_000, unstable_iqr_ratio=10.0)
    assert row["status"] == "ok" and row["gbps"] > 0 and row["blocks"] >= 6
    row = measure_copy(copies, m, direction="d2h", memory="pinned", nbytes=1_000_000, unstable_iqr_ratio=10.0)
    if not torch.accelerator.is_available():  # a CPU-only torch cannot pin memory
        assert row["status"] == "unsupported" and "pin" in row["status_detail"]


def write_run(tmp_path) -> str:
    cfg = with_defaults({"run": "x", "transfer": {"sizes_mb": [1]}})
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"run": "x", "config": cfg, "config_hash": config_hash(cfg), "git_commit": "abc",
                                "accelbench_version": "0"}))
    return str(path)


@pytest.mark.parametrize("backend,reason", [("cpu", "host is the device"), ("cuda", "CUDA"), ("rocm", "ROCM")])
def test_cli_absent_rows(tmp_path, backend, reason):
    from accelbench.cli import main

    out = tmp_path / f"transfer_{backend}.csv"
    assert main(["transfer", "--run-file", write_run(tmp_path), "--backend", backend, "--out", str(out)]) == 0
    df = pd.read_csv(out)
    assert list(df.columns[: len(columns.TRANSFER)]) == columns.TRANSFER
    assert len(df) == 1 and df.loc[0, "status"] == "absent" and reason in df.loc[0, "status_detail"]
    assert df.loc[0, "backend"] == backend and df.loc[0, "run_id"] == "x"


def test_cli_on_a_fake_accelerator(tmp_path, monkeypatch):
    """The CLI's device loop with device_strings and the copies faked (untested on hardware)."""
    import accelbench.backend as backend
    from accelbench.cli import main

    monkeypatch.setattr(backend, "device_strings", lambda b: ["cuda:0", "cuda:1"])
    monkeypatch.setattr(transfer, "device_rows", lambda d, cfg, **k: device_rows(
        d, cfg, copies_for=lambda _: FakeCopies(), measurer_for=lambda _: FakeMeasurer(), log=lambda s: None))
    out = tmp_path / "t.csv"
    assert main(["transfer", "--run-file", write_run(tmp_path), "--backend", "cuda", "--out", str(out)]) == 0
    df = pd.read_csv(out)
    assert list(df["device"].unique()) == ["cuda:0", "cuda:1"] and len(df) == 2 * 4
    assert df["gbps"].tolist() == pytest.approx([1.0] * 8) and (df["status"] == "ok").all()
