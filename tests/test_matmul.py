"""The matmul sweep: pure rules, planted faults through injectable kernels, the real CPU path, the CLI."""

from __future__ import annotations

import contextlib
import json
import math
import types

import numpy as np
import pandas as pd
import pytest
import torch

from accelbench import backends, registry
from accelbench.backends.cpu import cpu_llc_bytes
from accelbench.measure.failures import failure_status
from accelbench.measure.timing import Measurer, TimingStats, summarize
from accelbench.run.config import config_hash, with_defaults
from accelbench.run.io import Checkpoint
from accelbench.stages.matmul import measure as matmul
from accelbench.stages.matmul.measure import (
    Settings,
    TorchMatmul,
    classify,
    measure_point,
    plan_dtypes,
    point_flags,
    predict_call_s,
    predict_point_s,
    rotation_sets,
    sweep,
)

MM_DEFAULTS = with_defaults({})["matmul"]


def settings(**kw) -> Settings:
    base = dict(
        min_run_time_s=0.1,
        point_budget_s=3.0,
        unstable_iqr_ratio=0.1,
        rotate_inputs=True,
        rel_error_max=dict(MM_DEFAULTS["rel_error_max"]),
        seed=0,
        threads=1,
    )
    base.update(kw)
    return Settings(**base)


def steady(median_s: float, spread: float = 0.0) -> TimingStats:
    """Stats of 10 blocks around ``median_s`` with relative spread ``spread``."""
    return summarize([median_s * (1 + spread * (i - 4.5) / 4.5) for i in range(10)], calls_per_block=5)


class FakeKernels:
    """Stands in for TorchMatmul: every piece can be planted per (dtype, n)."""

    def __init__(
        self, *, call_s=lambda dtype, n: 1e-9 * n**3, rel_error=1e-7, stats=None, raise_at=None, unsupported=None
    ):
        self.call_s = call_s
        self.rel_error = rel_error
        self.stats = stats
        self.raise_at = raise_at or {}
        self.unsupported = unsupported or {}
        self.log = []
        self.freed = 0

    def support(self, dtype):
        return self.unsupported.get(dtype)

    @contextlib.contextmanager
    def mode(self, dtype):
        yield

    def allow_tf32(self):
        return False

    def probe(self, dtype, m):
        self.log.append(("probe", dtype, m))
        return self.call_s(dtype, m)

    def check(self, dtype, n):
        self.log.append(("check", dtype, n))
        exc = self.raise_at.get((dtype, n))
        if exc is not None:
            raise exc
        return self.rel_error(dtype, n) if callable(self.rel_error) else self.rel_error

    def time(self, dtype, n, warmup):
        self.log.append(("time", dtype, n))
        stats = self.stats(dtype, n) if self.stats else steady(self.call_s(dtype, n))
        return stats, 4

    def free(self):
        self.freed += 1

    def measured(self):
        return [(d, n) for kind, d, n in self.log if kind == "time"]


# ---- pure rules ---------------------------------------------------------------------------------


def test_plan_dtypes_adds_tf32_on_cuda_only_and_fp8_when_asked():
    cfg = {"dtypes": ["float32", "bfloat16"], "tf32": True, "fp8": True}
    cuda, cpu, rocm = backends.get("cuda"), backends.get("cpu"), backends.get("rocm")
    assert plan_dtypes(cuda, cfg) == ["float32", "tf32", "bfloat16", "float8_e4m3fn"]
    assert plan_dtypes(cuda, {**cfg, "tf32": False}) == ["float32", "bfloat16", "float8_e4m3fn"]
    assert plan_dtypes(cpu, cfg) == ["float32", "bfloat16", "float8_e4m3fn"]
    assert plan_dtypes(rocm, {**cfg, "fp8": False}) == ["float32", "bfloat16"]
    assert plan_dtypes(cuda, {**cfg, "dtypes": ["bfloat16"]}) == ["bfloat16", "float8_e4m3fn"]


@pytest.mark.parametrize(
    "backend,dtype,cap,arch,supported",
    [
        ("cuda", "float8_e4m3fn", (9, 0), None, True),
        ("cuda", "float8_e4m3fn", (8, 9), None, True),
        ("cuda", "float8_e4m3fn", (8, 0), None, False),
        ("rocm", "float8_e4m3fn", None, "gfx942", True),
        ("rocm", "float8_e4m3fn", None, "gfx90a", False),
        ("mps", "float8_e4m3fn", None, None, False),
        ("xla", "float8_e4m3fn", None, None, False),
        ("cuda", "tf32", (8, 0), None, True),
        ("cuda", "tf32", (7, 0), None, False),
        ("cpu", "tf32", None, None, False),
        ("rocm", "tf32", None, "gfx942", False),
        ("cpu", "bfloat16", None, None, True),
    ],
)
def test_dtype_support(backend, dtype, cap, arch, supported):
    """Backend.dtype_support(dtype, info): the device facts come from its device_info."""
    info = {}
    if cap is not None:
        info["compute_capability"] = f"{cap[0]}.{cap[1]}"
    if arch is not None:
        info["gcn_arch_name"] = f"{arch}:sramecc+:xnack-"
    reason = backends.get(backend, torch=torch).dtype_support(dtype, info)
    assert (reason is None) is supported
    if not supported:
        assert isinstance(reason, str) and "\n" not in reason and len(reason) > 10


def test_fp8_unsupported_without_scaled_mm():
    no_scaled_mm = types.SimpleNamespace()  # a torch build without torch._scaled_mm
    reason = backends.get("cuda", torch=no_scaled_mm).dtype_support("float8_e4m3fn", {"compute_capability": "9.0"})
    assert "_scaled_mm" in reason


def test_unknown_dtype_is_refused_with_the_allowed_ones():
    reason = backends.get("cpu").dtype_support("int4", {})
    assert "int4" in reason and "float32" in reason


@pytest.mark.parametrize(
    "flags,status",
    [
        ([], "ok"),
        (["unstable"], "unstable"),
        (["unstable", "wrong_result"], "wrong_result"),
        (["wrong_result", "invalid", "unstable"], "invalid"),
        (["invalid", "skipped_budget"], "skipped_budget"),
        (["oom"], "oom"),
        (["error", "oom"], "error"),
    ],
)
def test_classify_precedence(flags, status):
    assert classify(flags) == status


def test_point_flags_lists_every_condition():
    stats = steady(1.0, spread=0.5)
    flags, why = point_flags(
        tflops=2.0, peak_tflops=1.0, rel_error=0.5, rel_error_max=1e-4, stats=stats, unstable_iqr_ratio=0.1
    )
    assert flags == ["invalid", "wrong_result", "unstable"]
    assert len(why) == 3 and "200%" in why[0]
    flags, _ = point_flags(
        tflops=0.5,
        peak_tflops=None,
        rel_error=float("nan"),
        rel_error_max=1e-4,
        stats=steady(1.0),
        unstable_iqr_ratio=0.1,
    )
    assert flags == ["wrong_result"]  # no peak: never invalid; NaN error: wrong


def test_predict_from_previous_size_does_not_probe():
    def probe(m):
        raise AssertionError("must not probe")

    call, basis = predict_call_s(2048, (1024, 0.02), probe)
    assert call == pytest.approx(0.16) and "1024" in basis


def test_predict_grows_probe_until_compute_bound():
    calls = []

    def probe(m):  # 10 us launch overhead + 1 ns per flop-ish unit
        calls.append(m)
        return 1e-5 + 1e-11 * m**3

    call, basis = predict_call_s(16384, None, probe)
    assert calls == [128, 256, 512, 1024]  # 1024: 1e-5 + 0.0107 s >= 10 ms
    assert call == pytest.approx((1e-5 + 1e-11 * 1024**3) * 16**3)
    calls.clear()
    # a tiny previous point (overhead-bound) is not extrapolated; the probe starts above its size
    predict_call_s(16384, (2048, 1e-4), probe)
    assert calls == [4096]
    calls.clear()
    # the probe never goes past n
    predict_call_s(300, None, probe)
    assert calls == [128, 256, 300]


def test_predict_point_includes_warmup_blocks_and_check():
    assert predict_point_s(1.0, 0.3) == pytest.approx(2 + 1 + 6 + 1)
    assert predict_point_s(1e-6, 0.3) == pytest.approx(0.05 + 1e-6 + 0.3 + 1e-6, rel=1e-3)


def test_rotation_sets():
    mib = 1024**2
    assert rotation_sets(32 * 1024, 32 * mib, 20 * 1024 * mib) == 2048
    assert rotation_sets(32 * mib, 32 * mib, 20 * 1024 * mib) == 2
    assert rotation_sets(1024 * mib, 50 * mib, 10 * 1024 * mib) == 2
    assert rotation_sets(1024 * mib, 50 * mib, 3 * 1024 * mib) == 1  # memory: 40% of 3 GiB holds one pair
    assert rotation_sets(32 * 1024, 32 * mib, 20 * 1024 * mib, rotate=False) == 1


# ---- planted faults -----------------------------------------------------------------------------

PEAK = (1.0, "test peak")


def test_above_peak_is_invalid():
    k = FakeKernels(stats=lambda d, n: steady(1e-6))  # 2*512^3 / 1e-6 s = 268 TFLOP/s
    row = measure_point(k, dtype="float32", n=512, settings=settings(), peak=PEAK)
    assert row["status"] == "invalid" and "invalid" in row["flags"]
    assert row["pct_of_peak"] > 100
    assert row["tflops"] == pytest.approx(2 * 512**3 / 1e-6 / 1e12)


def test_above_a_nominal_cpu_peak_is_flagged_not_invalid():
    k = FakeKernels(stats=lambda d, n: steady(1e-6))
    row = measure_point(k, dtype="float32", n=512, settings=settings(), peak=(1.0, "current clock", False))
    assert row["status"] == "ok" and row["flags"] == "above_nominal_peak"
    assert "nominal" in row["status_detail"] and row["pct_of_peak"] > 100


def test_peak_bound_from_device_info(monkeypatch):
    import accelbench.backends.peaks as peaks

    monkeypatch.setattr(peaks, "cpu_peak", lambda info, dt, th: (2.0, "formula"))
    monkeypatch.setattr(peaks, "gpu_peak", lambda info, dt: (3.0, "table"))
    cpu, cuda = backends.get("cpu"), backends.get("cuda")
    assert matmul.peak_safe(cpu, {"clock_is_max": False}, "float32", 2, {}) == (2.0, "formula", False)
    assert matmul.peak_safe(cpu, {"clock_is_max": True}, "float32", 2, {})[2] is True
    overridden = matmul.peak_safe(cpu, {"clock_is_max": False}, "float32", 2, {"cpu": {"float32": 5.0}})
    assert overridden[0] == 5.0 and "peak_tflops" in overridden[1] and overridden[2] is True
    assert matmul.peak_safe(cuda, {}, "float32", 1, {}) == (3.0, "table", True)

    def broken(*a):
        raise KeyError("flags")

    monkeypatch.setattr(peaks, "cpu_peak", broken)
    peak, source, _ = matmul.peak_safe(cpu, {}, "float32", 2, {})
    assert peak is None and "unknown" in source


def test_wrong_result_is_flagged():
    k = FakeKernels(rel_error=0.2)
    row = measure_point(k, dtype="float32", n=256, settings=settings(), peak=(1e6, "huge"))
    assert row["status"] == "wrong_result"
    assert row["rel_error"] == 0.2 and row["rel_error_max"] == MM_DEFAULTS["rel_error_max"]["float32"]
    assert "rel_error" in row["status_detail"]


def test_wrong_result_within_bf16_threshold_is_ok():
    k = FakeKernels(rel_error=1e-2)
    assert measure_point(k, dtype="bfloat16", n=256, settings=settings(), peak=(1e6, "x"))["status"] == "ok"
    assert measure_point(k, dtype="float32", n=256, settings=settings(), peak=(1e6, "x"))["status"] == "wrong_result"


def test_invalid_and_wrong_both_listed():
    k = FakeKernels(rel_error=1.0, stats=lambda d, n: steady(1e-9, spread=0.5))
    row = measure_point(k, dtype="float16", n=128, settings=settings(), peak=PEAK)
    assert row["status"] == "invalid"
    assert row["flags"].split(";") == ["invalid", "wrong_result", "unstable"]


def test_unstable_point():
    k = FakeKernels(stats=lambda d, n: steady(0.01, spread=0.5))
    row = measure_point(k, dtype="float32", n=128, settings=settings(), peak=(1e6, "x"))
    assert row["status"] == "unstable" and row["flags"] == "unstable"
    assert not math.isnan(row["median_s"])


def test_ok_point_fills_every_measured_column():
    k = FakeKernels()
    row = measure_point(k, dtype="float32", n=256, settings=settings(), peak=(1e6, "table"))
    assert row["status"] == "ok" and row["flags"] == "" and row["status_detail"] == ""
    assert row["flops"] == 2 * 256**3 and row["repeats"] == 50 and row["blocks"] == 10
    assert row["input_sets"] == 4 and row["peak_source"] == "table"
    assert row["ci95_low_s"] <= row["median_s"] <= row["ci95_high_s"]
    assert row["pct_of_peak"] == pytest.approx(100 * row["tflops"] / 1e6)
    # 10 blocks: too few for batch means, so the interval is labelled descriptive; the blocks rise steadily
    assert row["ci_method"] == "descriptive" and row["lag1_autocorr"] > 0.5


def test_a_point_with_many_blocks_gets_a_batch_means_interval():
    """60 blocks with a slow drift: batch means, wider than the order-statistic interval that ignores the order."""
    from accelbench.measure import blocks

    times = [1e-3 * (1 + 0.05 * np.sin(i / 6)) for i in range(60)]
    k = FakeKernels(stats=lambda d, n: summarize(times, calls_per_block=1))
    row = measure_point(k, dtype="float32", n=256, settings=settings(), peak=(1e6, "table"))
    assert row["ci_method"] == "batch_means" and row["lag1_autocorr"] > 0.9
    lo, hi = blocks.order_statistic_ci(times)
    assert row["ci95_low_s"] < lo and row["ci95_high_s"] > hi
    fail = measure_point(
        FakeKernels(unsupported={"float32": "no"}), dtype="float32", n=256, settings=settings(), peak=(1e6, "table")
    )
    assert fail["ci_method"] == "" and math.isnan(fail["lag1_autocorr"])


def test_unsupported_reason_and_unsupported_exception():
    k = FakeKernels(unsupported={"float8_e4m3fn": "no fp8 here"})
    row = measure_point(k, dtype="float8_e4m3fn", n=64, settings=settings(), peak=PEAK)
    assert (row["status"], row["status_detail"]) == ("unsupported", "no fp8 here")
    assert k.log == []  # nothing ran
    k = FakeKernels(raise_at={("bfloat16", 64): RuntimeError("\"addmm_impl_cpu_\" not implemented for 'BFloat16'")})
    row = measure_point(k, dtype="bfloat16", n=64, settings=settings(), peak=PEAK)
    assert row["status"] == "unsupported" and "not implemented" in row["status_detail"]


def test_skipped_budget_runs_nothing_but_the_probe():
    k = FakeKernels(call_s=lambda d, n: 0.5 * (n / 128) ** 3)  # a slow dtype: 0.5 s at n=128
    row = measure_point(k, dtype="bfloat16", n=256, settings=settings(point_budget_s=3.0), peak=PEAK)
    assert row["status"] == "skipped_budget"
    assert row["predicted_s"] > 3.0 and "point_budget_s" in row["status_detail"]
    assert [x[0] for x in k.log] == ["probe"]
    assert math.isnan(row["tflops"])


def test_oom_at_one_point_leaves_the_others_measured(tmp_path):
    k = FakeKernels(raise_at={("float32", 128): torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")})
    ck = Checkpoint(tmp_path / "ck.jsonl", ("device", "dtype", "n"))
    rows = sweep(
        ["cpu"],
        ["float32", "bfloat16"],
        [256, 64, 128],
        settings(),
        kernels_for=lambda d: k,
        device_row=lambda d: {"device": d, "config_hash": "h"},
        peak_for=lambda d, dt: (1e6, "x"),
        checkpoint=ck,
        config_hash="h",
        log=lambda s: None,
    )
    status = {(r["dtype"], r["n"]): r["status"] for r in rows}
    assert status == {
        ("float32", 64): "ok",
        ("float32", 128): "oom",
        ("float32", 256): "ok",
        ("bfloat16", 64): "ok",
        ("bfloat16", 128): "ok",
        ("bfloat16", 256): "ok",
    }
    assert k.freed == 1
    assert [r["n"] for r in rows][:3] == [64, 128, 256]  # ascending per dtype
    assert len(ck.rows) == 6  # every point, the failed one too, is checkpointed


def test_cpu_allocation_failure_is_oom_and_other_errors_are_error():
    assert failure_status(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried")) == "oom"
    assert failure_status(RuntimeError("MPS backend out of memory")) == "oom"
    assert failure_status(ValueError("boom")) == "error"
    assert failure_status(torch.OutOfMemoryError("allocator said no"), backends.get("cuda")) == "oom"
    assert failure_status(RuntimeError("allocator said no")) == "error"
    k = FakeKernels(raise_at={("float32", 64): ValueError("boom\nsecond line")})
    row = measure_point(k, dtype="float32", n=64, settings=settings(), peak=PEAK)
    assert row["status"] == "error" and row["status_detail"] == "ValueError: boom second line"


def test_device_that_cannot_be_set_up_records_error_rows(tmp_path):
    def broken(device):
        raise RuntimeError("driver went away")

    rows = sweep(
        ["cuda:0"],
        ["float32"],
        [64, 128],
        settings(),
        kernels_for=broken,
        device_row=lambda d: {"device": d},
        peak_for=lambda d, dt: (None, "none"),
        checkpoint=Checkpoint(tmp_path / "c.jsonl", ("device", "dtype", "n")),
        config_hash="h",
        log=lambda s: None,
    )
    assert [r["status"] for r in rows] == ["error", "error"]
    assert "driver went away" in rows[0]["status_detail"]


def test_checkpoint_resume_skips_completed_points(tmp_path):
    path = tmp_path / "ck.jsonl"
    ck = Checkpoint(path, ("device", "dtype", "n"))
    done = {
        "device": "cpu",
        "dtype": "float32",
        "n": 64,
        "config_hash": "h",
        "status": "ok",
        "median_s": 0.5,
        "tflops": 1.0,
        "status_detail": "",
    }
    stale = {**done, "n": 128, "config_hash": "older-config"}
    ck.add(done)
    ck.add(stale)
    k = FakeKernels()
    rows = sweep(
        ["cpu"],
        ["float32"],
        [64, 128],
        settings(point_budget_s=100.0),
        kernels_for=lambda d: k,
        device_row=lambda d: {"device": d, "config_hash": "h"},
        peak_for=lambda d, dt: (1e6, "x"),
        checkpoint=Checkpoint(path, ("device", "dtype", "n")),
        config_hash="h",
        log=lambda s: None,
    )
    assert k.measured() == [("float32", 128)]  # 64 came from the checkpoint; 128's row was another config's
    assert rows[0]["median_s"] == 0.5
    # the resumed point seeds the next prediction: 0.5 s at 64 -> 4 s per call at 128 -> no probe
    assert ("probe", "float32", 128) not in k.log
    # a rerun measures nothing
    k2 = FakeKernels()
    sweep(
        ["cpu"],
        ["float32"],
        [64, 128],
        settings(point_budget_s=100.0),
        kernels_for=lambda d: k2,
        device_row=lambda d: {"device": d, "config_hash": "h"},
        peak_for=lambda d, dt: (1e6, "x"),
        checkpoint=Checkpoint(path, ("device", "dtype", "n")),
        config_hash="h",
        log=lambda s: None,
    )
    assert k2.log == []


# ---- the real CPU kernels -----------------------------------------------------------------------


@pytest.fixture
def cpu_kernels():
    torch.set_num_threads(1)
    cpu = backends.get("cpu")
    return TorchMatmul("cpu", cpu, measurer=Measurer(cpu.synced_timer("cpu"), min_run_time_s=0.01, threads=1), seed=0)


def test_check_measures_real_error(cpu_kernels, monkeypatch):
    assert cpu_kernels.check("float32", 96) < 1e-5
    e_bf16 = cpu_kernels.check("bfloat16", 96)
    assert 1e-4 < e_bf16 < MM_DEFAULTS["rel_error_max"]["bfloat16"]  # bf16 output rounding, nowhere near 0
    # a kernel returning garbage is caught
    monkeypatch.setattr(cpu_kernels, "product", lambda dtype, a, b: torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype))
    assert cpu_kernels.check("float32", 96) == pytest.approx(1.0)


def test_check_inputs_are_never_zero_and_reproducible(cpu_kernels):
    torch.manual_seed(cpu_kernels._seed("check", "float32", 32))
    a, b = cpu_kernels._pair("float32", 32)
    assert (a != 0).float().mean() > 0.99 and a.std() > 0.5
    assert cpu_kernels.check("float32", 32) == cpu_kernels.check("float32", 32)


def test_time_rotates_inputs(cpu_kernels, small_llc):
    stats, sets = cpu_kernels.time("float32", 64, warmup=2)
    assert sets > 1 and stats.median_s > 0 and stats.blocks >= 6
    cpu_kernels.rotate = False
    _, sets = cpu_kernels.time("float32", 64, warmup=2)
    assert sets == 1


def test_rotating_statement_cycles_through_pairs(cpu_kernels):
    stmt, g = cpu_kernels._statement("float32", 8, rotating=True)
    assert "next(A)" in stmt and "next(B)" in stmt and "out=C" in stmt
    stmt, g = cpu_kernels._statement("float8_e4m3fn", 16, rotating=False)
    assert "sa, sb" in stmt


def test_xla_statement_cuts_the_graph_after_every_product(cpu_kernels):
    """On XLA the lazy graph must be cut after each product, or only the last one would run (the
    statement logic, run on the CPU with a counting stand-in for torch_xla.sync; untested on hardware)."""
    cuts = []
    cpu_kernels.cut = lambda: cuts.append(1)
    stmt, g = cpu_kernels._statement("float32", 16, rotating=False)
    assert stmt.endswith("; cut()")
    a, b = cpu_kernels._pair("float32", 16)
    g.update(a=a, b=b)
    calls = []
    g["op"] = lambda x, y, out: calls.append(1)
    cpu_kernels.measurer.warm_up(stmt, g, calls=7)
    assert len(cuts) == len(calls) == 7


def test_fp32_mode_is_strict_and_tf32_mode_is_restored(cpu_kernels, monkeypatch):
    from accelbench.backends.base import fp32_precision_api

    new_api = fp32_precision_api(torch)  # torch >= 2.9: read the fp32_precision settings (legacy reads raise inside)

    def strict():
        if new_api:
            return torch.backends.cuda.matmul.fp32_precision == "ieee" == torch.backends.mkldnn.matmul.fp32_precision
        return torch.get_float32_matmul_precision() == "highest" and torch.backends.cuda.matmul.allow_tf32 is False

    def tf32_on():
        if new_api:
            return torch.backends.cuda.matmul.fp32_precision == "tf32" == torch.backends.cudnn.conv.fp32_precision
        return torch.backends.cuda.matmul.allow_tf32 is True and torch.backends.cudnn.allow_tf32 is True

    before = (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32)
    torch.set_float32_matmul_precision("high")  # what a user's script may have set: must not leak in
    try:
        with cpu_kernels.mode("float32") as tf32:
            assert strict() and tf32 is False
        assert torch.get_float32_matmul_precision() == "high"
        with cpu_kernels.mode("tf32") as tf32:  # no TF32 off NVIDIA CUDA: strict kept, recorded False
            assert tf32 is False and cpu_kernels.allow_tf32() is False
            assert strict()
        # the flag logic of the CUDA and ROCm backends, not a GPU: their device scope is a no-op here
        cuda, rocm = backends.get("cuda"), backends.get("rocm")
        for b in (cuda, rocm):
            monkeypatch.setattr(b, "device_scope", lambda device: contextlib.nullcontext())
        cuda_side = TorchMatmul("cuda:0", cuda, measurer=cpu_kernels.measurer, info={})
        with cuda_side.mode("tf32"):
            assert cuda_side.allow_tf32() is True and tf32_on()
        assert cuda_side.allow_tf32() is False
        with cuda_side.mode("float32"):
            assert cuda_side.allow_tf32() is False and strict()
        rocm_side = TorchMatmul("cuda:0", rocm, measurer=cpu_kernels.measurer, info={})
        with rocm_side.mode("tf32"):
            assert rocm_side.allow_tf32() is False and strict()
    finally:
        torch.set_float32_matmul_precision(before[0])
        torch.backends.cuda.matmul.allow_tf32 = before[1]
    assert (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32) == before


def test_cpu_llc_bytes_reads_sysfs(tmp_path):
    for i, (level, kind, size) in enumerate(
        [(1, "Data", "32K"), (1, "Instruction", "32K"), (2, "Unified", "1024K"), (3, "Unified", "32768K")]
    ):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    assert cpu_llc_bytes(str(tmp_path)) == 32 * 1024**2
    assert cpu_llc_bytes(str(tmp_path / "missing")) is None


def test_fake_cuda_kernels_ask_capability_and_l2():
    """TorchMatmul's device facts come from the backend's device_info, here with a fake torch (untested on
    hardware): capability and L2 on CUDA, architecture and Infinity Cache on ROCm."""
    props = types.SimpleNamespace(
        name="Fake GPU",
        major=8,
        minor=6,
        multi_processor_count=84,
        total_memory=24 * 1024**3,
        L2_cache_size=50 * 1024**2,
        gcnArchName="gfx942:sramecc+:xnack-",
    )
    asked = []
    fake_cuda = types.SimpleNamespace(get_device_properties=lambda i: asked.append(i) or props)
    fake = types.SimpleNamespace(cuda=fake_cuda, _scaled_mm=object(), float8_e4m3fnuz="fnuz")
    cuda = backends.get("cuda", torch=fake)
    k = TorchMatmul("cuda:1", cuda, measurer=None)
    assert asked == [1]  # the device's own index
    assert cuda.capability(k.info) == (8, 6) and k.cache_bytes() == 50 * 1024**2
    assert "8.9" in k.support("float8_e4m3fn") and k.support("tf32") is None
    rocm = backends.get("rocm", torch=fake)
    r = TorchMatmul("cuda:0", rocm, measurer=None)
    assert rocm.arch(r.info) == "gfx942" and r.cache_bytes() == 256 * 1024**2  # Infinity Cache counted
    assert r.support("float8_e4m3fn") is None and r.support("tf32") is not None
    # gfx942 multiplies fp8 only as float8_e4m3fnuz: supported in that encoding, not in OCP e4m3fn
    assert r.torch_dtype("float8_e4m3fn") == "float8_e4m3fnuz" and k.torch_dtype("float8_e4m3fn") == "float8_e4m3fn"


# ---- the CLI end to end on the CPU ---------------------------------------------------------------


def write_run(tmp_path, matmul_cfg: dict) -> str:
    cfg = with_defaults({"run": "t", "matmul": matmul_cfg})
    path = tmp_path / "run.json"
    path.write_text(
        json.dumps(
            {"run": "t", "config": cfg, "config_hash": config_hash(cfg), "git_commit": "abc", "accelbench_version": "0"}
        )
    )
    return str(path)


def run_cli(*argv) -> int:
    from accelbench.cli import main

    return main(["matmul", *argv])


@pytest.fixture
def small_llc(monkeypatch):
    """A 1 MiB last-level cache: inputs still rotate, but a tiny point does not have to fill twice a
    server's L3 (hundreds of MiB) with input pairs first."""
    monkeypatch.setattr(backends.CpuBackend, "cache_bytes", lambda self, device, info=None: 1024**2)


def test_cli_end_to_end_on_cpu(tmp_path, capsys, small_llc):
    run = write_run(
        tmp_path, {"sizes": [64, 128], "dtypes": ["float32", "bfloat16"], "min_run_time_s": 0.02, "fp8": True}
    )
    out, ck = tmp_path / "matmul_cpu.csv", tmp_path / "ck" / "matmul_cpu.jsonl"
    assert (
        run_cli(
            "--run-file", run, "--backend", "cpu", "--threads", "1", "--checkpoint", str(ck), "--out-dir", str(tmp_path)
        )
        == 0
    )
    df = pd.read_csv(out, keep_default_na=False, na_values=[""])
    assert set(registry.TABLES["matmul"].columns) <= set(df.columns)
    assert list(df.columns[: len(list(registry.TABLES["matmul"].columns))]) == list(registry.TABLES["matmul"].columns)
    assert len(df) == 2 * 3  # float32, bfloat16, float8_e4m3fn (fp8: true) x 2 sizes
    assert set(df["status"]) <= set(registry.TABLES["matmul"].statuses)
    f32 = df[df.dtype == "float32"]
    assert (f32["tflops"] > 0).all() and (f32["threads"] == 1).all()
    assert (f32["rel_error"] < 1e-4).all() and (f32["allow_tf32"].astype(str) == "False").all()
    assert (f32["flops"] == 2 * f32["n"] ** 3).all()
    assert (f32["repeats"] >= 6).all() and (f32["run_id"] == "t").all() and (f32["git_commit"] == "abc").all()
    assert (df["device"] == "cpu").all() and df["device_name"].str.len().min() > 0
    assert (f32["input_sets"] > 1).all()
    assert dict(zip(df["dtype"], df["torch_dtype"])) == {
        "float32": "float32",
        "bfloat16": "bfloat16",
        "float8_e4m3fn": "float8_e4m3fn",
    }
    assert (df["method_version"] == registry.STAGES["matmul"].method_version).all()
    # a rerun with the checkpoint measures nothing and writes the same numbers
    assert ck.exists()
    capsys.readouterr()
    assert (
        run_cli(
            "--run-file", run, "--backend", "cpu", "--threads", "1", "--checkpoint", str(ck), "--out-dir", str(tmp_path)
        )
        == 0
    )
    assert capsys.readouterr().out.count("from checkpoint") == 6
    again = pd.read_csv(out, keep_default_na=False, na_values=[""])
    pd.testing.assert_series_equal(again["median_s"], df["median_s"])


def test_cli_absent_backend_writes_one_row(tmp_path):
    run = write_run(tmp_path, {"sizes": [64]})
    out = tmp_path / registry.TABLES["matmul"].filename("cuda")
    assert run_cli("--run-file", run, "--backend", "cuda", "--threads", "1", "--out-dir", str(tmp_path)) == 0
    df = pd.read_csv(out)
    assert len(df) == 1 and df.loc[0, "status"] == "absent" and df.loc[0, "backend"] == "cuda"
    assert df.loc[0, "flags"] == "absent" and "CUDA" in df.loc[0, "status_detail"]
    assert df.loc[0, "method_version"] == registry.STAGES["matmul"].method_version


def test_cli_rejects_negative_threads(tmp_path, capsys):
    run = write_run(tmp_path, {"sizes": [64]})
    assert run_cli("--run-file", run, "--backend", "cpu", "--threads", "-1", "--out-dir", str(tmp_path)) == 2
    assert not (tmp_path / "matmul_cpu.csv").exists()
    err = capsys.readouterr().err.strip()
    assert "--threads" in err and "allowed" in err and "\n" not in err


def run_info_file(tmp_path, cfg: dict) -> str:
    from accelbench.cli import main

    path = str(tmp_path / "run.json")
    assert main(["run-info", "--config-json", json.dumps(cfg), "--run", "t", "--out", path]) == 0
    return path


def test_cli_warms_the_device_first_and_records_it_and_the_method_version(tmp_path, capsys, small_llc):
    cfg = {
        "run": "t",
        "warmup": {"n": 16, "max_iters": 30, "window": 3, "rel_tol": 0.5},
        "matmul": {
            "sizes": [16, 32],
            "dtypes": ["float32"],
            "min_run_time_s": 0.002,
            "fp8": False,
            "tf32": False,
            "unstable_iqr_ratio": 10.0,
        },
    }
    run = run_info_file(tmp_path, cfg)
    assert run_cli("--run-file", run, "--backend", "cpu", "--threads", "1", "--out-dir", str(tmp_path)) == 0
    out = capsys.readouterr().out
    df = pd.read_csv(tmp_path / registry.TABLES["matmul"].filename("cpu"))
    assert len(df) == 2 and (df["status"] == "ok").all()
    assert (df["device_warmup_s"] > 0).all() and df["device_warmup_s"].nunique() == 1  # once per device
    assert df["device_warmup_status"].isin(["ok", "unstable"]).all() and (df["device_warmup_calls"] >= 3).all()
    assert "warm-up" in out and out.index("warm-up") < out.index("n=16")  # warmed before the first point
    assert (df["method_version"] == registry.STAGES["matmul"].method_version).all()


# ---- shapes: (m, n, k) products ----------------------------------------------------------------------


def test_shape_flops_cube_edge_and_order():
    from accelbench.stages.matmul.measure import Shape, as_shape, plan_points

    s = Shape(4096, 12288, 4096, "qkv")
    assert s.flops == 2 * 4096 * 12288 * 4096 and not s.is_square and str(s) == "4096x12288x4096"
    assert s.cube_edge == pytest.approx((4096 * 12288 * 4096) ** (1 / 3))
    assert as_shape(64) == Shape(64, 64, 64) and as_shape(s) is s
    points = plan_points([512, 256], [Shape(64, 512, 64, "b"), Shape(8, 8, 8, "a")])
    assert [(p.n, p.name) for p in points] == [(256, ""), (512, ""), (8, "a"), (512, "b")]


def test_measure_point_of_a_shape_gives_m_n_k_and_2mnk():
    sizes = []

    class ShapeKernels(FakeKernels):
        def time(self, dtype, size, warmup):
            sizes.append(size)
            return steady(1e-3), 3

    row = measure_point(
        ShapeKernels(), dtype="float32", n=96, m=64, k=32, shape_name="qkv", settings=settings(), peak=(1e6, "x")
    )
    assert (row["m"], row["n"], row["k"], row["shape_name"]) == (64, 96, 32, "qkv")
    assert row["flops"] == 2 * 64 * 96 * 32 and row["tflops"] == pytest.approx(2 * 64 * 96 * 32 / 1e-3 / 1e12)
    assert sizes == [matmul.Shape(64, 96, 32, "qkv")]  # the kernels get the shape, not a square n
    square = measure_point(FakeKernels(), dtype="float32", n=64, settings=settings(), peak=(1e6, "x"))
    assert (square["m"], square["k"], square["shape_name"]) == (64, 64, "")


def test_predict_scales_a_shape_by_its_flops():
    call, basis = predict_call_s(matmul.Shape(1024, 4096, 256).cube_edge, (1024, 0.02), lambda m: 1 / 0)
    assert call == pytest.approx(0.02)  # 1024 x 4096 x 256 = 1024^3 flops
    probes = []
    predict_call_s(100.5, None, lambda m: probes.append(m) or 1e-6)
    assert probes == [101] and all(isinstance(m, int) for m in probes)  # probes are whole squares


def test_sweep_measures_shapes_after_the_squares_and_checkpoints_them(tmp_path):
    from accelbench.stages.matmul.measure import CHECKPOINT_KEY, Shape

    k = FakeKernels()
    ck = Checkpoint(tmp_path / "ck.jsonl", CHECKPOINT_KEY)
    shapes = [Shape(64, 64, 64, "cube"), Shape(32, 128, 16, "thin")]
    rows = sweep(
        ["cpu"],
        ["float32"],
        [64, 128],
        settings(),
        kernels_for=lambda d: k,
        device_row=lambda d: {"device": d, "config_hash": "h"},
        peak_for=lambda d, dt: (1e6, "x"),
        checkpoint=ck,
        config_hash="h",
        log=lambda s: None,
        shapes=shapes,
    )
    assert [(r["shape_name"], r["m"], r["n"], r["k"]) for r in rows] == [
        ("", 64, 64, 64),
        ("", 128, 128, 128),
        ("thin", 32, 128, 16),
        ("cube", 64, 64, 64),
    ]
    assert len(ck.rows) == 4  # a named 64^3 shape and the square 64 are two points
    k2 = FakeKernels()
    sweep(
        ["cpu"],
        ["float32"],
        [64, 128],
        settings(),
        kernels_for=lambda d: k2,
        device_row=lambda d: {"device": d, "config_hash": "h"},
        peak_for=lambda d, dt: (1e6, "x"),
        checkpoint=Checkpoint(tmp_path / "ck.jsonl", CHECKPOINT_KEY),
        config_hash="h",
        log=lambda s: None,
        shapes=shapes,
    )
    assert k2.log == []


def test_real_cpu_kernels_on_a_shape(cpu_kernels, small_llc):
    from accelbench.stages.matmul.measure import Shape

    shape = Shape(48, 80, 24)
    assert cpu_kernels.check("float32", shape) < 1e-5
    stats, sets = cpu_kernels.time("float32", shape, warmup=2)
    assert stats.blocks >= 6 and sets == rotation_sets((48 * 24 + 24 * 80) * 4, 1024**2, cpu_kernels.free_bytes())
    a, b = cpu_kernels._pair("float8_e4m3fn", shape)
    assert a.shape == (48, 24) and b.shape == (24, 80) and b.stride() == (1, 24)


def test_cli_measures_configured_shapes(tmp_path, small_llc):
    run = write_run(
        tmp_path,
        {
            "sizes": [32],
            "dtypes": ["float32"],
            "min_run_time_s": 0.01,
            "fp8": False,
            "shapes": [{"m": 16, "n": 48, "k": 32, "name": "proj"}, {"m": 8, "n": 8, "k": 8}],
        },
    )
    assert run_cli("--run-file", run, "--backend", "cpu", "--threads", "1", "--out-dir", str(tmp_path)) == 0
    df = pd.read_csv(tmp_path / "matmul_cpu.csv", keep_default_na=False)
    assert list(df["shape_name"]) == ["", "8x8x8", "proj"]
    proj = df[df["shape_name"] == "proj"].iloc[0]
    assert (proj["m"], proj["n"], proj["k"], proj["flops"]) == (16, 48, 32, 2 * 16 * 48 * 32)
    assert proj["status"] in ("ok", "unstable") and float(proj["rel_error"]) < 1e-4
