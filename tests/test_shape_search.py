"""The shape search: the method on synthetic devices with known optima (no timing, so nothing here is
flaky), its budget, the stage's loop with planted kernels, the operand pool, and the CLI on the CPU."""

from __future__ import annotations

import contextlib
import json
import math
import random

import pandas as pd
import pytest
import torch

from accelbench import backends, registry
from accelbench.measure import shape_search
from accelbench.measure.shape_search import Axis, QuantizedGemmModel, Space, coarse_indices, exhaustive, search
from accelbench.measure.timing import Measurer, summarize
from accelbench.run.config import config_hash, with_defaults
from accelbench.run.io import Checkpoint
from accelbench.stages.matmul.measure import OperandPool, Settings, Shape, TorchMatmul
from accelbench.stages.matmul_search import measure as matmul_search
from accelbench.stages.matmul_search.measure import Estimator, search_device_dtype

GRID = Space(Axis(64, 1024, 64), Axis(64, 1024, 64), Axis(64, 1024, 64))  # the CPU task's space: 4096 shapes


def scores(model):
    return lambda shape, phase: (model.tflops(*shape), {})


# ---- the method on synthetic devices ----------------------------------------------------------------


def test_axis_space_and_coarse_indices():
    assert Axis(64, 1024, 64).values[:3] == (64, 128, 192) and len(Axis(64, 1024, 64)) == 16
    assert Axis(64, 100, 64).values == (64,)  # max need not be on the step
    assert GRID.size == 4096 and GRID.largest() == (1024, 1024, 1024)
    assert coarse_indices(16, 5) == [0, 4, 8, 11, 15] and coarse_indices(16, 2) == [0, 15]
    assert coarse_indices(3, 5) == [0, 1, 2]
    assert Space.from_config({a: {"min": 32, "max": 96, "step": 32} for a in "mnk"}).size == 27


def test_finds_the_known_optimum_within_1pct_with_at_most_15pct_of_the_grid():
    """The issue's acceptance check, on the synthetic device whose optimum (896 x 1024 x 768) lies off the
    coarse grid and behind quantization dips: the coarse grid alone is 14% short of it (so the check
    fails if the local search does nothing), the search reaches it measuring 4% of the grid."""
    model = QuantizedGemmModel()
    best = exhaustive(GRID, scores(model)).best
    assert best.shape == (896, 1024, 768)
    result = search(GRID, scores(model), budget_s=1e9)
    found = model.tflops(*result.best.shape)
    assert found >= 0.99 * best.score, (result.best.shape, found, best.score)
    assert result.evaluated_shapes <= 0.15 * GRID.size, result.evaluated_shapes
    coarse = max(e.score for e in result.evaluations if e.phase == "coarse")
    assert coarse < 0.9 * best.score  # the refinement is what gets there
    assert result.best.phase == "confirm" and result.stop_reason == "converged"
    assert len({e.shape for e in result.evaluations if e.phase != "confirm"}) == result.evaluated_shapes


@pytest.mark.parametrize("units,tile,k_best", [(12, 64, 512), (24, 128, 1024), (36, 256, 768), (132, 128, 640)])
def test_other_synthetic_devices(units, tile, k_best):
    """Different quantization grids (compute units, tile sizes) and cache limits: within 1% each time."""
    model = QuantizedGemmModel(units=units, tile=tile, k_best=k_best)
    best = exhaustive(GRID, scores(model)).best.score
    result = search(GRID, scores(model), budget_s=1e9)
    assert model.tflops(*result.best.shape) >= 0.99 * best
    assert result.share <= 0.15


def test_noisy_screening_is_corrected_by_the_confirmation():
    """Screening readings with 3% noise (a seeded generator, so the same every run): the confirmation,
    measured with less noise, keeps the result within 3% of the true optimum where the best screening
    reading alone is biased high (the winner's curse)."""
    model = QuantizedGemmModel()
    rng = random.Random(7)
    true_best = exhaustive(GRID, scores(model)).best.score

    def noisy(shape, phase):
        sigma = 0.005 if phase == "confirm" else 0.03
        return model.tflops(*shape) * (1 + sigma * rng.gauss(0, 1)), {}

    result = search(GRID, noisy, budget_s=1e9)
    assert model.tflops(*result.best.shape) >= 0.97 * true_best
    screened_max = max(e.score for e in result.evaluations if e.phase != "confirm")
    assert screened_max > model.tflops(*result.best.shape)  # the largest short reading overstates


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_budget_is_kept_and_the_search_says_it_stopped_for_it():
    """Each measurement costs its estimate on a fake clock: the search stops starting new ones so that it and
    the confirmation fit, and ends within the budget."""
    model, clock = QuantizedGemmModel(), FakeClock()
    cost = lambda shape, phase: 0.5 if phase == "confirm" else 0.2 + 1e-9 * math.prod(shape)

    def measure(shape, phase):
        clock.now += cost(shape, phase)
        return model.tflops(*shape), {}

    result = search(GRID, measure, budget_s=20.0, estimate_s=cost, clock=clock)
    assert result.stop_reason == "budget"
    assert clock.now <= 20.0 and result.elapsed_s <= 20.0
    assert any(e.phase == "confirm" for e in result.evaluations)  # the reserve left room to confirm
    assert 20 < len(result.evaluations) < 100


def test_a_shape_that_does_not_fit_is_left_out_and_smaller_ones_still_run():
    clock = FakeClock()
    model = QuantizedGemmModel()
    big = lambda shape, phase: 100.0 if math.prod(shape) > 512**3 else 0.0
    result = search(GRID, lambda s, p: (model.tflops(*s), {}), budget_s=50.0, estimate_s=big, clock=clock)
    assert result.stop_reason == "budget"
    assert all(math.prod(e.shape) <= 512**3 for e in result.evaluations)
    assert len(result.evaluations) > 20


def test_stop_ends_the_search_with_the_reason():
    calls = []

    def unsupported(shape, phase):
        calls.append(shape)
        return math.nan, {"status": "unsupported"}

    result = search(GRID, unsupported, budget_s=1e9, stop=lambda e: "unsupported: no fp8 here")
    assert result.stop_reason == "unsupported: no fp8 here" and len(calls) == 1 and result.best is None


def test_untrustworthy_points_never_win():
    """A shape whose measurement cannot be trusted (NaN score: wrong result, invalid) is never chosen."""
    model = QuantizedGemmModel()
    poisoned = (1024, 1024, 1024)
    result = search(GRID, lambda s, p: (math.nan if s == poisoned else model.tflops(*s), {}), budget_s=1e9)
    assert result.best.shape != poisoned and math.isfinite(result.best.score)


# ---- the stage's loop with planted kernels ------------------------------------------------------------


class ModelKernels:
    """TorchMatmul's interface over a synthetic device; records what it was asked."""

    def __init__(self, model=None, unsupported=None):
        self.model = model or QuantizedGemmModel(peak=1.0)
        self.unsupported = unsupported
        self.log = []
        self.reserved = []

    def support(self, dtype):
        return self.unsupported

    @contextlib.contextmanager
    def mode(self, dtype):
        yield

    def allow_tf32(self):
        return False

    def reserve(self, dtype, largest):
        self.reserved.append((dtype, largest))

    def probe(self, dtype, m):
        return 2.0 * m**3 / (self.model.tflops(m, m, m) * 1e12)

    def check(self, dtype, size):
        return 1e-7

    def time(self, dtype, size, warmup):
        s = size if isinstance(size, Shape) else Shape.square(size)
        self.log.append((s.m, s.n, s.k))
        call_s = s.flops / (self.model.tflops(s.m, s.n, s.k) * 1e12)
        return summarize([call_s] * 10, calls_per_block=5), 3

    def free(self):
        pass


def small_cfg(**kw):
    axis = {"min": 64, "max": 512, "step": 64}
    return {
        **with_defaults({"matmul": {"search": {"enabled": True, "m": axis, "n": axis, "k": axis}}})["matmul"]["search"],
        **kw,
    }


def stage_settings():
    return Settings(
        min_run_time_s=0.3,
        point_budget_s=5.0,
        unstable_iqr_ratio=0.1,
        rotate_inputs=True,
        rel_error_max={"float32": 1e-4},
        seed=0,
        threads=1,
    )


def run_stage(kernels, tmp_path, cfg=None, clock=None):
    cfg = cfg or small_cfg(budget_s=1e6)
    return search_device_dtype(
        kernels,
        dtype="float32",
        space=shape_search.Space.from_config(cfg),
        search_cfg=cfg,
        settings=stage_settings(),
        peak=(2.0, "test peak"),
        base={"device": "cpu", "config_hash": "h"},
        checkpoint=Checkpoint(tmp_path / "ck.jsonl", matmul_search.CHECKPOINT_KEY),
        config_hash="h",
        clock=clock or FakeClock(),
        log=lambda s: None,
    )


def test_stage_rows_every_evaluation_with_the_best_marked(tmp_path):
    k = ModelKernels()
    rows = run_stage(k, tmp_path)
    df = pd.DataFrame(rows)
    assert set(registry.TABLES["matmul_search"].columns) - {
        "run_id",
        "host",
        "accelbench_version",
        "git_commit",
        "torch_version",
        "cuda_version",
        "hip_version",
        "container_image",
        "method_version",
        "backend",
        "device_name",
        "device_warmup_s",
        "device_warmup_calls",
        "device_warmup_status",
    } <= set(df.columns)
    assert df["best"].sum() == 1
    best = df[df["best"]].iloc[0]
    exhaustive_best = exhaustive(Space.from_config(small_cfg()), scores(k.model)).best
    assert best["phase"] == "confirm" and best["tflops"] >= 0.99 * exhaustive_best.score
    assert (df["flops"] == 2 * df["m"] * df["n"] * df["k"]).all()
    assert (df["tflops_ci95_low"] <= df["tflops"]).all() and (df["tflops"] <= df["tflops_ci95_high"]).all()
    assert list(df["evaluation"]) == list(range(len(df)))
    assert set(df["phase"]) == {"coarse", "refine", "confirm"}
    assert (df["grid_points"] == 512).all() and df["evaluated_shapes"].nunique() == 1
    assert df["stop_reason"].iloc[0] == "converged" and (df["status"] == "ok").all()
    assert (df.loc[df["phase"] == "confirm", "min_run_time_s"] == 0.3).all()
    assert (df.loc[df["phase"] != "confirm", "min_run_time_s"] == 0.05).all()
    assert k.reserved == [("float32", Shape(512, 512, 512))]  # the pool drawn once, for the largest shape


def test_stage_resumes_from_its_checkpoint_without_measuring(tmp_path):
    first = ModelKernels()
    rows = run_stage(first, tmp_path)
    again = ModelKernels()
    rows2 = run_stage(again, tmp_path)
    assert again.log == []  # every evaluation replayed from the checkpoint
    assert [(r["m"], r["n"], r["k"], r["phase"]) for r in rows] == [(r["m"], r["n"], r["k"], r["phase"]) for r in rows2]


def test_stage_stops_at_an_unsupported_dtype_with_one_row(tmp_path):
    rows = run_stage(ModelKernels(unsupported="fp8 needs compute capability >= 8.9"), tmp_path)
    assert len(rows) == 1 and rows[0]["status"] == "unsupported" and not rows[0]["best"]
    assert rows[0]["stop_reason"].startswith("unsupported: fp8 needs")


def test_estimator_errs_long_and_learns_the_overhead():
    est = Estimator({"coarse": 0.05, "refine": 0.05, "confirm": 0.3})
    assert est((64, 64, 64), "coarse") == 0.0  # nothing measured: measure the first to learn
    for rate in (1e11, 2e11, 3e11, 4e11):
        est.observe("coarse", 2e9, 2e9 / rate, wall_s=0.5)
    call = 2e9 / 1.75e11  # the lower quartile of the rates seen
    guess = est((1000, 1000, 1000), "coarse")
    assert guess > call and guess < 2.0
    assert est((1000, 1000, 1000), "confirm") > guess  # a longer measurement


# ---- the operand pool ------------------------------------------------------------------------------------


@pytest.fixture
def pooled():
    torch.set_num_threads(1)
    cpu = backends.get("cpu")
    k = TorchMatmul(
        "cpu", cpu, measurer=Measurer(cpu.synced_timer("cpu"), min_run_time_s=0.01, threads=1), reuse_operands=True
    )
    k._cache_bytes = 1024**2  # a 1 MiB "last-level cache": rotation without allocating hundreds of MiB
    return k


def test_pool_pairs_are_disjoint_aligned_views_of_the_right_shape(pooled):
    pool = OperandPool(pooled, "float32")
    pairs = pool.pairs(Shape(48, 80, 40), 5)
    assert len(pairs) == 5
    spans = []
    for a, b in pairs:
        assert a.shape == (48, 40) and b.shape == (40, 80) and a.is_contiguous() and b.is_contiguous()
        for t in (a, b):
            start = t.storage_offset()
            assert start % OperandPool.ALIGN == 0
            spans.append((start, start + t.numel()))
    spans.sort()
    assert all(e1 <= s2 for (_, e1), (s2, _) in zip(spans, spans[1:]))  # no two operands overlap
    assert pool.elements >= OperandPool.MARGIN * 2 * 1024**2 / 4  # spans twice the cache


def test_pool_fp8_b_is_column_major_and_the_pool_grows(pooled):
    pool = OperandPool(pooled, "float8_e4m3fn")
    ((a, b),) = pool.pairs(Shape(32, 48, 16), 1)
    assert b.shape == (16, 48) and b.stride() == (1, 16) and a.dtype == torch.float8_e4m3fn
    before = pool.elements
    big = Shape(1024, 1024, 1024)
    pairs = pool.pairs(big, 2)
    assert pool.elements > before and len(pairs) == 2


def test_pooled_time_rotates_and_checks_a_shape(pooled):
    shape = Shape(64, 96, 32)
    stats, sets = pooled.time("float32", shape, warmup=2)
    assert sets > 1 and stats.blocks >= 6 and stats.median_s > 0
    assert pooled.check("float32", shape) < 1e-5


# ---- the CLI on the CPU ----------------------------------------------------------------------------------


def write_run(tmp_path, search_cfg: dict) -> str:
    cfg = with_defaults({"run": "t", "matmul": {"min_run_time_s": 0.02, "search": search_cfg}})
    path = tmp_path / "run.json"
    path.write_text(
        json.dumps(
            {"run": "t", "config": cfg, "config_hash": config_hash(cfg), "git_commit": "abc", "accelbench_version": "0"}
        )
    )
    return str(path)


def cli(*argv) -> int:
    from accelbench.cli import main

    return main(["matmul-search", *argv])


@pytest.fixture
def small_llc(monkeypatch):
    monkeypatch.setattr(backends.CpuBackend, "cache_bytes", lambda self, device, info=None: 1024**2)


def test_cli_off_writes_the_header_only(tmp_path):
    run = write_run(tmp_path, {"enabled": False})
    assert cli("--run-file", run, "--backend", "cpu", "--threads", "1", "--out-dir", str(tmp_path)) == 0
    df = pd.read_csv(tmp_path / "matmul_search_cpu.csv")
    assert df.empty and list(df.columns) == registry.TABLES["matmul_search"].all_columns


def test_cli_searches_on_the_cpu(tmp_path, small_llc):
    axis = {"min": 32, "max": 64, "step": 32}
    run = write_run(
        tmp_path,
        {
            "enabled": True,
            "m": axis,
            "n": axis,
            "k": axis,
            "budget_s": 20.0,
            "min_run_time_s": 0.01,
            "coarse_points": 2,
            "confirm": 2,
        },
    )
    assert cli("--run-file", run, "--backend", "cpu", "--threads", "1", "--out-dir", str(tmp_path)) == 0
    df = pd.read_csv(tmp_path / "matmul_search_cpu.csv")
    assert list(df.columns[: len(registry.TABLES["matmul_search"].columns)]) == list(
        registry.TABLES["matmul_search"].columns
    )
    assert (df["run_id"] == "t").all() and (
        df["method_version"] == registry.STAGES["matmul-search"].method_version
    ).all()
    assert len(df[df["phase"] == "coarse"]) == 8 and (df["grid_points"] == 8).all()
    best = df[df["best"]]
    assert len(best) == 1 and best["phase"].iloc[0] == "confirm" and best["tflops"].iloc[0] > 0
    assert (df["search_s"] <= 20.0 + 5).all()  # the budget (plus the last measurement's overrun at most)
    assert (df["rel_error"] < 1e-4).all() and (df["input_sets"] > 1).all()


def test_cli_absent_backend_writes_one_row(tmp_path):
    run = write_run(tmp_path, {"enabled": True})
    assert cli("--run-file", run, "--backend", "cuda", "--threads", "1", "--out-dir", str(tmp_path)) == 0
    df = pd.read_csv(tmp_path / "matmul_search_cuda.csv")
    assert len(df) == 1 and df.loc[0, "status"] == "absent"
