"""The scaling stage: DDP/DataParallel weak scaling, collectives, device-to-device copies, faults.

- statistics with known answers: nccl-tests' algbw/busbw, the efficiency and its interval, the loss check;
- the collective timing loop with a fake clock and a fake world, and the real torch.distributed calls in a
  one-rank gloo group;
- the NCCL, DataParallel, XLA and peer-copy paths with fake torch modules (**untested on hardware**), and
  the DataParallel rows trained for real on the CPU through a stand-in wrapper;
- the launcher with real torchrun worlds whose ranks crash or hang: status, no process left (by pid), the
  port free again;
- the stage for real on gloo (slow): one rank of world size 2 killed mid-run and one of world size 3
  stopped (a hang): their status is recorded, world size 1 and the rest are kept, no process is left;
- the cluster request (gpu=N, cpus_per_task) from a dry run, and the multi-node example by a dry run.

The end-to-end run with scaling on is tests/test_pipeline.py.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import types
from pathlib import Path

import pandas as pd
import pytest
import torch
from scipy import stats

from accelbench import backends, registry
from accelbench.backends import CpuBackend, CudaBackend
from accelbench.run import launch
from accelbench.run.config import ConfigError, check, config_hash, with_defaults
from accelbench.stages.amp import measure as amp
from accelbench.stages.common import start
from accelbench.stages.scaling import collectives as coll
from accelbench.stages.scaling import measure as scaling
from accelbench.stages.scaling import peer_copy
from accelbench.stages.scaling import rank as scaling_rank
from accelbench.stages.scaling import stats as ss
from tiny_config import TINY

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


# ---- nccl-tests' formulas ---------------------------------------------------------------------------------


def test_busbw_factors_are_nccl_tests():
    """doc/PERFORMANCE.md: all_reduce 2(n-1)/n, reduce_scatter and all_gather (n-1)/n, broadcast 1."""
    assert [ss.busbw_factor("all_reduce", n) for n in (1, 2, 4, 8)] == [0.0, 1.0, 1.5, 1.75]
    assert [ss.busbw_factor("all_gather", n) for n in (1, 2, 8)] == [0.0, 0.5, 0.875]
    assert [ss.busbw_factor("reduce_scatter", n) for n in (2, 8)] == [0.5, 0.875]
    assert [ss.busbw_factor("broadcast", n) for n in (1, 2, 8)] == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="collective: unknown 'alltoall'"):
        ss.busbw_factor("alltoall", 2)
    with pytest.raises(ValueError, match="world_size"):
        ss.busbw_factor("all_reduce", 0)


def test_algbw_and_busbw_in_gb_per_s():
    # 1 GB all-reduced by 8 ranks in 10 ms: algbw 100 GB/s, busbw 175 GB/s (the bus carries 2(n-1)/n of S)
    assert ss.algbw_gbps(1e9, 0.01) == pytest.approx(100.0)
    assert ss.busbw_gbps("all_reduce", 1e9, 0.01, 8) == pytest.approx(175.0)
    # an all_gather of S = 8 x 128 MiB chunks (S counts the whole gathered array, as nccl-tests' count*size*n)
    s = 8 * 128 * 2**20
    assert ss.busbw_gbps("all_gather", s, 0.005, 8) == pytest.approx(s / 0.005 / 1e9 * 7 / 8)
    assert math.isnan(ss.algbw_gbps(1024, 0.0))


def test_collective_sizes_round_to_whole_chunks_per_rank():
    assert ss.collective_elements("all_reduce", 1024, 3) == (256, 1024)
    assert ss.collective_elements("all_gather", 1024, 3) == (85, 1020)  # 3 chunks of 85 float32
    assert ss.collective_elements("reduce_scatter", 8, 4) == (0, 0)  # less than one element per rank
    assert ss.collective_buffer_bytes("all_gather", 1020, 3) == 1020 + 340
    assert ss.collective_buffer_bytes("broadcast", 4096, 8) == 4096
    assert ss.message_sizes(1024, 1024 * 64, 4) == [1024, 4096, 16384, 65536]
    assert ss.message_sizes(1024, 5000, 2) == [1024, 2048, 4096]
    with pytest.raises(ValueError):
        ss.message_sizes(10, 5, 2)


def test_auto_world_sizes():
    assert ss.auto_world_sizes(1) == [1]
    assert ss.auto_world_sizes(2) == [1, 2]
    assert ss.auto_world_sizes(8) == [1, 2, 4, 8]
    assert ss.auto_world_sizes(6) == [1, 2, 4, 6]


# ---- efficiency and its interval ---------------------------------------------------------------------------


def test_efficiency_is_paired_by_seed_with_a_t_interval_on_log_ratios():
    single = [100.0, 110.0, 90.0]
    world = [180.0, 209.0, 171.0]  # per seed 0.90, 0.95, 0.95 of 2x
    eff, low, high = ss.efficiency_ci(single, world, 2)
    logs = [math.log(w / (2 * s)) for s, w in zip(single, world)]
    mean = sum(logs) / 3
    sd = (sum((x - mean) ** 2 for x in logs) / 2) ** 0.5
    half = stats.t.ppf(0.975, 2) * sd / 3**0.5
    assert eff == pytest.approx(math.exp(mean))
    assert (low, high) == pytest.approx((math.exp(mean - half), math.exp(mean + half)))
    assert low < eff < 1.0 < high  # 3 seeds: the interval still reaches perfect scaling
    perfect = ss.efficiency_ci([100, 120], [400, 480], 4)
    assert perfect == pytest.approx((1.0, 1.0, 1.0))


def test_efficiency_with_one_seed_has_no_interval_and_pairs_must_match():
    eff, low, high = ss.efficiency_ci([100.0], [150.0], 2)
    assert eff == pytest.approx(0.75) and math.isnan(low) and math.isnan(high)
    assert all(math.isnan(v) for v in ss.efficiency_ci([], [], 2))
    with pytest.raises(ValueError, match="paired by seed"):
        ss.efficiency_ci([1.0, 2.0], [1.0], 2)


def test_summary_pairs_each_world_with_the_one_rank_ddp_trial_of_its_seed():
    rows = []
    for method, world, sps in (("ddp", 1, (100.0, 120.0)), ("ddp", 2, (160.0, 216.0)), ("dp", 2, (120.0, 120.0))):
        for seed, value in zip((0, 1), sps):
            rows.append(
                {
                    "method": method,
                    "workload": "mlp",
                    "mode": "fp32",
                    "world_size": world,
                    "seed": seed,
                    "devices": "",
                    "process_group": "gloo",
                    "threads_per_rank": 1,
                    "global_batch": 32 * world,
                    "samples_per_s": value,
                    "step_median_s": 32 * world / value,
                    "status": "ok",
                    "loss_max_rel_diff": 1e-7,
                    "loss_matches_single": True,
                }
            )
    rows.append(
        {
            **rows[-1],
            "seed": 2,
            "status": "error",
            "status_detail": "rank 1 failed",
            "samples_per_s": None,
            "step_median_s": None,
            "loss_matches_single": None,
        }
    )
    summary = ss.summarize(pd.DataFrame(rows)).set_index(["method", "world_size"])
    two = summary.loc[("ddp", 2)]
    assert two["scaling_efficiency"] == pytest.approx(math.sqrt(0.8 * 0.9))  # 160/200, 216/240
    step = math.sqrt(64 / 160 * 64 / 216)  # the geometric mean of the two seeds' medians
    assert two["step_median_s"] == pytest.approx(step) and two["samples_per_s"] == pytest.approx(64 / step)
    assert two["samples_per_s_per_rank"] == pytest.approx(32 / step) and two["interval_over"] == "seeds"
    assert math.isnan(two["tokens_per_s"]) and math.isnan(two["images_per_s"]) and math.isnan(two["mfu_pct"])
    assert two["trials"] == 2 and two["status"] == "ok" and bool(two["loss_matches_single"])
    assert summary.loc[("ddp", 1)]["scaling_efficiency"] == pytest.approx(1.0)
    dp = summary.loc[("dp", 2)]
    assert dp["status"] == "error" and dp["trials"] == 2 and dp["status_detail"] == "rank 1 failed"
    assert dp["scaling_efficiency"] == pytest.approx(math.sqrt(0.6 * 0.5))


def test_step_interval_is_over_seed_medians_not_pooled_steps():
    """The seed is the unit of replication: three seeds whose steps are tight within each seed but whose medians
    differ. The interval is the t-interval on the log medians (known here), far wider than what pooling the 600
    steps would give; one seed is labelled descriptive and keeps that trial's own interval over its steps."""
    medians = [0.010, 0.011, 0.0125]
    logs = [math.log(m) for m in medians]
    mean = sum(logs) / 3
    sd = (sum((x - mean) ** 2 for x in logs) / 2) ** 0.5
    half = stats.t.ppf(0.975, 2) * sd / 3**0.5
    center, low, high = ss.seed_median_ci(medians)
    assert center == pytest.approx(math.exp(mean))
    assert (low, high) == pytest.approx((math.exp(mean - half), math.exp(mean + half)))
    assert low < 0.010 and high > 0.0125  # 3 seeds, t(2): the interval spans every seed's median
    assert ss.seed_median_ci([0.02, 0.02]) == pytest.approx((0.02, 0.02, 0.02))
    one = ss.seed_median_ci([0.02])
    assert one[0] == pytest.approx(0.02) and math.isnan(one[1]) and math.isnan(one[2])
    assert all(math.isnan(v) for v in ss.seed_median_ci([]))

    rows, steps = [], []
    for seed, m in enumerate(medians):
        s_steps = [m * (1 + 0.001 * ((i % 5) - 2)) for i in range(200)]
        steps += s_steps
        median, lo, hi = ss.step_stats(s_steps)
        rows.append(
            {
                "method": "ddp",
                "workload": "gpt",
                "mode": "fp32",
                "world_size": 2,
                "seed": seed,
                "devices": "",
                "process_group": "gloo",
                "threads_per_rank": 1,
                "global_batch": 8,
                "samples_per_s": 8 / median,
                "tokens_per_s": 8 / median * 32,
                "mfu_pct": 3.0 * 0.010 / median,
                "step_median_s": median,
                "step_ci95_low_s": lo,
                "step_ci95_high_s": hi,
                "status": "ok",
                "loss_max_rel_diff": 1e-7,
                "loss_matches_single": True,
            }
        )
    pooled_low, pooled_high = ss.step_stats(steps)[1:]
    row = ss.summarize(pd.DataFrame(rows)).iloc[0]
    assert (row["step_ci95_low_s"], row["step_ci95_high_s"]) == pytest.approx((low, high), rel=2e-3)
    assert row["interval_over"] == "seeds" and row["trials"] == 3
    assert pooled_high - pooled_low < (high - low) / 10  # what pooling the steps would have claimed
    assert row["tokens_per_s"] == pytest.approx(row["samples_per_s"] * 32)
    assert row["tokens_per_s_per_rank"] == pytest.approx(row["samples_per_s"] * 16)
    assert row["mfu_pct"] == pytest.approx(3.0 * 0.010 / row["step_median_s"])
    assert math.isnan(row["images_per_s"])
    single = ss.summarize(pd.DataFrame(rows[:1])).iloc[0]
    assert single["interval_over"] == "descriptive" and single["step_median_s"] == pytest.approx(
        rows[0]["step_median_s"]
    )
    assert (single["step_ci95_low_s"], single["step_ci95_high_s"]) == (
        rows[0]["step_ci95_low_s"],
        rows[0]["step_ci95_high_s"],
    )


def test_worst_status_decides_a_summary():
    assert ss.worst_status(["ok", "timeout", "ok"]) == "timeout"
    assert ss.worst_status(["ok", "error", "timeout"]) == "timeout"
    assert ss.worst_status(["ok", "nan"]) == "nan"


# ---- the loss check ------------------------------------------------------------------------------------------


def test_loss_check_window_and_tolerances():
    ref = [2.0] * 30
    assert ss.loss_max_rel_diff([2.0 + 2e-7] * 30, ref) == pytest.approx(1e-7)
    late = [2.0] * 10 + [3.0] * 20  # drift after the window does not count
    assert ss.loss_max_rel_diff(late, ref) == 0.0 and ss.loss_max_rel_diff(late, ref, steps=30) == 0.5
    assert ss.loss_max_rel_diff([2.0, float("nan")], ref) == math.inf
    assert math.isnan(ss.loss_max_rel_diff([], ref))
    assert ss.loss_tolerance("fp32") == 1e-3 and ss.loss_tolerance("amp_bf16") == ss.loss_tolerance("amp_fp16") == 1e-2
    assert ss.loss_matches(5e-4, 1e-3) is True and ss.loss_matches(2e-3, 1e-3) is False
    assert ss.loss_matches(math.nan, 1e-3) is None


AMP_CFG = with_defaults({"amp": TINY["amp"]})["amp"]


def _losses(workload, mode, seed, batch, replica=None):
    backend = backends.get("cpu")
    data = amp.make_data(workload, AMP_CFG, 0, torch)
    steps: list = []
    trial = amp.Trial("cpu", "cpu", "cpu", workload, mode, seed)
    amp.run_trial(
        trial,
        {**AMP_CFG, "batch_size": batch},
        data,
        backend.amp_policy("auto"),
        backend=backend,
        threads=1,
        steps_out=steps,
        replica=replica,
    )
    return [s["loss"] for s in steps]


@pytest.mark.parametrize("workload", ["mlp", "transformer"])
def test_the_loss_check_catches_planted_data_parallel_mistakes(workload):
    """Mistakes a broken data-parallel setup makes, emulated in one process: ranks that train on their slices
    without synchronising gradients (what DDP logs then is the mean of their losses), and every rank on the
    same slice (a process at the per-rank batch). Both fail the float32 check; the single process against
    itself passes. (Correct DDP passing it is shown by the real runs, tests/test_pipeline.py.)"""
    b = AMP_CFG["batch_size"]
    ref = _losses(workload, "fp32", 0, 2 * b)
    r0 = _losses(workload, "fp32", 0, b, amp.Replica(rank=0, world_size=2))
    r1 = _losses(workload, "fp32", 0, b, amp.Replica(rank=1, world_size=2))
    unsynced = [(x + y) / 2 for x, y in zip(r0, r1)]
    assert unsynced[0] == pytest.approx(ref[0], rel=1e-6)  # step 0: the same weights, the same global batch
    same_slice = _losses(workload, "fp32", 0, b)
    tol = ss.loss_tolerance("fp32")
    assert ss.loss_matches(ss.loss_max_rel_diff(unsynced, ref), tol) is False
    assert ss.loss_matches(ss.loss_max_rel_diff(same_slice, ref), tol) is False
    assert ss.loss_matches(ss.loss_max_rel_diff(_losses(workload, "fp32", 0, 2 * b), ref), tol) is True


def test_replica_slices_one_global_batch():
    order = amp.batch_order(64, 16, 3, seed=5, torch=torch)
    assert order.shape == (3, 16)
    # rank r of 2 takes columns [r*8, (r+1)*8) of the same seeded global order a single process uses
    seen = []
    data = amp.make_data("mlp", AMP_CFG, 0, torch)

    class Spy(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            seen.append(x.shape[0])
            return self.m(x)

    steps: list = []
    out = amp.run_trial(
        amp.Trial("cpu", "cpu", "cpu", "mlp", "fp32", 0),
        AMP_CFG,
        data,
        backends.get("cpu").amp_policy("auto"),
        backend=backends.get("cpu"),
        threads=1,
        steps_out=steps,
        replica=amp.Replica(rank=1, world_size=2, wrap=Spy, mean_loss=lambda t: 7.0),
    )
    assert seen[:3] == [AMP_CFG["batch_size"]] * 3
    assert all(s["loss"] == 7.0 for s in steps)  # the rows hold the mean over ranks
    assert out["samples_per_s"] == pytest.approx(2 * AMP_CFG["batch_size"] / out["step_median_s"])


# ---- the collective loop ----------------------------------------------------------------------------------


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class FakeWorld:
    """The ops of one rank in a world of ``n`` whose other ranks take ``other_factor`` times as long per call:
    the timed values this rank reduces are combined as torch.distributed would."""

    def __init__(self, clock, per_call_s, n=2, other_factor=1.0, fail=None):
        self.clock, self.per_call_s, self.n, self.other = clock, per_call_s, n, other_factor
        self.fail = fail
        self.calls = 0
        self.buffers_made = []

    def buffers(self, collective, count):
        self.buffers_made.append((collective, count))
        if self.fail:
            raise self.fail
        return ("buffer",)

    def call(self, collective, buffers):
        self.calls += 1
        self.clock.t += self.per_call_s

    def barrier(self):
        pass

    def reduce(self, value, op):
        others = [value * self.other] * (self.n - 1)
        if op == "max":
            return max([value, *others])
        if op == "min":
            return min([value, *others])
        return (value + sum(others)) / self.n


def test_collective_time_is_the_median_of_blocks_averaged_over_ranks():
    clock = Clock()
    world = FakeWorld(clock, 1e-3, n=2, other_factor=3.0)  # this rank 1 ms a call, the other 3 ms
    row = coll.measure_collective(
        "all_reduce",
        2**20,
        ops=world,
        sync=lambda: None,
        world_size=2,
        cap_bytes=1e12,
        min_run_time_s=0.12,
        clock=clock,
    )
    assert row["status"] == "ok"
    assert row["median_s"] == pytest.approx(2e-3)  # nccl-tests' default: the average over ranks
    assert row["algbw_gbps"] == pytest.approx(2**20 / 2e-3 / 1e9)
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 1.0) and row["busbw_factor"] == 1.0
    # blocks sized from the slowest rank's estimate (3 ms): min_run_time / 6 per block, at least 6 blocks
    assert row["calls_per_block"] == math.ceil(0.12 / 6 / 3e-3) and row["blocks"] >= 6
    assert row["repeats"] == row["blocks"] * row["calls_per_block"]
    assert world.calls == coll.WARMUP_CALLS + 1 + row["repeats"]


def test_collective_points_that_cannot_run_say_why():
    clock = Clock()
    kwargs = dict(sync=lambda: None, world_size=4, min_run_time_s=0.01, clock=clock)
    row = coll.measure_collective("all_gather", 2**20, ops=FakeWorld(clock, 1e-4), cap_bytes=2**20, **kwargs)
    assert row["status"] == "skipped_memory" and "per rank" in row["status_detail"]
    row = coll.measure_collective("reduce_scatter", 8, ops=FakeWorld(clock, 1e-4), cap_bytes=1e12, **kwargs)
    assert row["status"] == "unsupported"
    row = coll.measure_collective(
        "reduce_scatter",
        4096,
        cap_bytes=1e12,
        **kwargs,
        ops=FakeWorld(clock, 1e-4, fail=RuntimeError("reduce_scatter is not supported by ProcessGroupGloo")),
    )
    assert row["status"] == "unsupported" and "Gloo" in row["status_detail"]
    row = coll.measure_collective(
        "broadcast",
        4096,
        cap_bytes=1e12,
        **kwargs,
        ops=FakeWorld(clock, 1e-4, fail=RuntimeError("NCCL error: unhandled system error")),
    )
    assert row["status"] == "error"


def fake_dist(calls, modern=False):
    """torch.distributed as TorchCollectives uses it, recording calls (with the pre-2.13 names unless modern)."""
    d = types.SimpleNamespace(ReduceOp=types.SimpleNamespace(SUM="sum", MAX="max", MIN="min"))
    d.all_reduce = lambda t, op="sum": calls.append(("all_reduce", tuple(t.shape), op))
    d.broadcast = lambda t, src: calls.append(("broadcast", tuple(t.shape), src))
    d.all_gather_into_tensor = lambda out, inp: calls.append(
        ("all_gather_into_tensor", tuple(out.shape), tuple(inp.shape))
    )
    d.reduce_scatter_tensor = lambda out, inp: calls.append(
        ("reduce_scatter_tensor", tuple(out.shape), tuple(inp.shape))
    )
    if modern:
        d.all_gather_single = lambda out, inp: calls.append(("all_gather_single", tuple(out.shape), tuple(inp.shape)))
        d.reduce_scatter_single = lambda out, inp: calls.append(
            ("reduce_scatter_single", tuple(out.shape), tuple(inp.shape))
        )
    return d


@pytest.mark.parametrize("modern", [False, True])
def test_torch_collectives_call_the_tensor_forms(modern):
    calls = []
    ops = coll.TorchCollectives(fake_dist(calls, modern), torch, "cpu", 4)
    for name in coll_names():
        ops.call(name, ops.buffers(name, 10))
    ops.barrier()
    assert ops.reduce(2.0, "mean") == pytest.approx(0.5) and ops.reduce(2.0, "max") == 2.0
    gather = "all_gather_single" if modern else "all_gather_into_tensor"
    scatter = "reduce_scatter_single" if modern else "reduce_scatter_tensor"
    assert calls[:4] == [
        ("all_reduce", (10,), "sum"),
        (gather, (40,), (10,)),
        (scatter, (10,), (40,)),
        ("broadcast", (10,), 0),
    ]


def coll_names():
    return list(ss.COLLECTIVES)


def test_collectives_for_real_in_a_one_rank_gloo_group():
    """The real torch.distributed calls (this torch's names) in a world of one: busbw is 0 where nothing crosses
    a bus, and broadcast's factor is 1."""
    import torch.distributed as dist

    assert not dist.is_initialized()
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        ops = coll.TorchCollectives(dist, torch, "cpu", 1)
        rows = {
            c: coll.measure_collective(
                c, 4096, ops=ops, sync=lambda: None, world_size=1, cap_bytes=1e9, min_run_time_s=0.01
            )
            for c in ss.COLLECTIVES
        }
    finally:
        dist.destroy_process_group()
    assert all(r["status"] == "ok" and r["median_s"] > 0 for r in rows.values()), rows
    assert (
        rows["all_reduce"]["busbw_gbps"] == 0.0 and rows["broadcast"]["busbw_gbps"] == rows["broadcast"]["algbw_gbps"]
    )


# ---- the backends: NCCL, DataParallel, XLA, MPS with fakes (untested on hardware) ---------------------------


def fake_cuda_torch(gpus=4, peer=None, calls=None):
    calls = calls if calls is not None else []
    peer = peer or (lambda i, j: True)

    class DataParallel:
        def __init__(self, module, device_ids=None, output_device=None):
            calls.append(("DataParallel", device_ids, output_device))
            self.module = module

    t = types.SimpleNamespace(version=types.SimpleNamespace(cuda="12.8", hip=None))
    t.cuda = types.SimpleNamespace(
        is_available=lambda: True,
        device_count=lambda: gpus,
        set_device=lambda i: calls.append(("set_device", i)),
        can_device_access_peer=lambda i, j: calls.append(("can_device_access_peer", i, j)) or peer(i, j),
        synchronize=lambda d=None: calls.append(("synchronize", d)),
    )
    t.device = lambda name: ("torch.device", name)
    t.nn = types.SimpleNamespace(DataParallel=DataParallel)
    t.calls = calls
    return t


def test_cuda_ranks_use_nccl_on_their_own_gpu():
    t = fake_cuda_torch(gpus=4)
    b = CudaBackend(torch=t)
    devices = b.devices()
    assert b.collective == "nccl" and b.scaling_support() is None
    assert b.max_world_size(devices, threads=64) == 4 and b.threads_per_rank(64, 4) == 1
    device = b.rank_device(2, devices)
    assert device == "cuda:2"
    b.bind_rank(device)
    assert ("set_device", 2) in t.calls
    assert b.process_group_options(device) == {"backend": "nccl", "device_id": ("torch.device", "cuda:2")}
    assert b.ddp_options(device) == {"device_ids": [2], "output_device": 2}
    plan = scaling_rank.plan(with_defaults({"scaling": {"enabled": True}}), b, 4, 1)
    assert plan["process_group"] == "nccl" and plan["modes"] == ["fp32", "amp_fp16"]
    assert plan["global_batch"] == 4 * plan["per_rank_batch"]


def test_rocm_ranks_use_nccl_too():
    t = fake_cuda_torch(gpus=2)
    t.version.hip, t.version.cuda = "7.2", None
    b = backends.get("rocm", torch=t)
    assert b.collective == "nccl" and b.rank_device(1, b.devices()) == "cuda:1"  # RCCL, under the same name


def test_data_parallel_on_two_gpus_or_more():
    t = fake_cuda_torch(gpus=2)
    b = CudaBackend(torch=t)
    assert "at least 2 GPUs" in b.data_parallel_support(1)
    assert b.data_parallel_support(2) is None
    wrapped = b.data_parallel("model", ["cuda:0", "cuda:1"])
    assert wrapped.module == "model" and ("DataParallel", [0, 1], 0) in t.calls


def test_data_parallel_and_peer_copies_elsewhere_say_why():
    cpu = CpuBackend()
    assert "not on cpu" in cpu.data_parallel_support(4)
    assert "one device" in cpu.peer_copy_support(1)
    assert cpu.collective == "gloo" and cpu.rank_device(3, ["cpu"]) == "cpu"
    assert cpu.max_world_size(["cpu"], threads=6) == 6
    assert cpu.threads_per_rank(8, 4) == 2 and cpu.threads_per_rank(2, 4) == 1
    mps = backends.get("mps", torch=types.SimpleNamespace())
    assert "gloo" in mps.scaling_support()


def test_xla_and_xpu_process_groups():
    imported = []
    xla = backends.get("xla", torch=torch, import_module=lambda name: imported.append(name) or types.SimpleNamespace())
    assert xla.process_group_options("xla:0") == {"backend": "xla", "init_method": "xla://"}
    xla.bind_rank("xla:0")
    assert imported == ["torch_xla.distributed.xla_backend"]
    assert xla.ddp_options("xla:0")["gradient_as_bucket_view"] is True
    xpu_calls = []
    xpu = backends.get(
        "xpu", torch=types.SimpleNamespace(xpu=types.SimpleNamespace(set_device=lambda i: xpu_calls.append(i)))
    )
    assert xpu.process_group_options("xpu:1") == {"backend": "xccl"}
    xpu.bind_rank("xpu:1")
    assert xpu_calls == [1] and xpu.ddp_options("xpu:1")["device_ids"] == [1]


def test_peer_access_through_torch_cuda():
    t = fake_cuda_torch(gpus=3, peer=lambda i, j: {i, j} != {0, 2})
    b = CudaBackend(torch=t)
    assert b.peer_copy_support(3) is None and "at least 2 GPUs" in b.peer_copy_support(1)
    assert b.can_access_peer("cuda:0", "cuda:1") and not b.can_access_peer("cuda:2", "cuda:0")
    assert ("can_device_access_peer", 2, 0) in t.calls


# ---- the copy matrix with fakes ------------------------------------------------------------------------------


class PeerFake:
    """Three GPUs, 0<->2 without peer access, 8 GiB free each."""

    name = "cuda"

    def peer_copy_support(self, n):
        return None if n >= 2 else "one device"

    def can_access_peer(self, src, dst):
        return {src, dst} != {"cuda:0", "cuda:2"}

    def free_bytes(self, device):
        return 8 * 2**30

    def is_oom(self, exc):
        return "out of memory" in str(exc)


class FakeCopies:
    def __init__(self, backend, src, dst, nbytes):
        self.nbytes = nbytes

    def statement(self, peer):
        return peer

    def globals_(self, peer):
        return {"nbytes": self.nbytes}


class FakeCopyMeasurer:
    """Direct copies at 400 GB/s, host-staged ones at 20 GB/s."""

    def measure(self, stmt, globals_):
        from accelbench.measure.timing import summarize

        t = globals_["nbytes"] / (400e9 if stmt == "on" else 20e9)
        return summarize([t] * 6, 4)


def test_copy_matrix_every_ordered_pair_peer_on_and_off():
    devices = ["cuda:0", "cuda:1", "cuda:2"]
    rows = peer_copy.matrix_rows(
        PeerFake(),
        devices,
        2**30,
        min_run_time_s=0.01,
        copies_factory=FakeCopies,
        measurer_factory=lambda s, d: FakeCopyMeasurer(),
        log=lambda *_: None,
    )
    assert len(rows) == 3 * 2 * 2
    df = pd.DataFrame(rows)
    assert set(zip(df["src"], df["dst"])) == {(s, d) for s in devices for d in devices if s != d}
    on = df[df["peer"] == "on"].set_index(["src", "dst"])
    assert (
        on.loc[("cuda:0", "cuda:2"), "status"] == "unsupported"
        and "host" in on.loc[("cuda:0", "cuda:2"), "status_detail"]
    )
    assert on.loc[("cuda:0", "cuda:1"), "gbps"] == pytest.approx(400.0)
    off = df[df["peer"] == "off"]
    assert (off["status"] == "ok").all() and off["gbps"].to_numpy() == pytest.approx([20.0] * 6)
    assert (df["size_bytes"] == 2**30).all()  # 1 GiB <= a quarter of 8 GiB free


def test_copy_matrix_size_is_capped_by_memory_and_one_device_has_none():
    class Small(PeerFake):
        def free_bytes(self, device):
            return 2**20 if device == "cuda:1" else 2**30

    rows = peer_copy.matrix_rows(
        Small(),
        ["cuda:0", "cuda:1"],
        2**30,
        min_run_time_s=0.01,
        copies_factory=FakeCopies,
        measurer_factory=lambda s, d: FakeCopyMeasurer(),
        log=lambda *_: None,
    )
    assert {r["size_bytes"] for r in rows} == {2**18}
    one = peer_copy.matrix_rows(CpuBackend(), ["cpu"], 2**20, min_run_time_s=0.01)
    assert len(one) == 1 and one[0]["status"] == "unsupported"


def test_copy_statements_move_the_data_on_real_tensors():
    """The two statements as the matrix times them, between CPU tensors (the path any device takes)."""
    copies = peer_copy.TorchPeerCopies(CpuBackend(), "cpu", "cpu", 4096)
    for peer in peer_copy.PEER_MODES:
        copies.dst.zero_()
        g = copies.globals_(peer)
        exec(copies.statement(peer), {}, g)
        assert bool((copies.dst == 1).all()), peer
    assert copies.host is not None and copies.host.numel() == 4096


# ---- DataParallel rows for real through a stand-in wrapper -------------------------------------------------------


class RecordingDataParallel(torch.nn.Module):
    """What nn.DataParallel does to the numbers on one device: nothing (it splits and gathers the batch)."""

    batches: list = []

    def __init__(self, module, devices):
        super().__init__()
        self.module, self.devices = module, devices

    def forward(self, x):
        RecordingDataParallel.batches.append(x.shape[0])
        return self.module(x)


class TwoCpus(CpuBackend):
    """The CPU pretending to be two devices that nn.DataParallel can span (the DataParallel path's plumbing)."""

    def devices(self):
        return ["cpu", "cpu"]

    def data_parallel_support(self, n_devices):
        return None

    def data_parallel(self, model, devices):
        return RecordingDataParallel(model, devices)


def write_run(tmp_path, scaling_cfg, **over) -> Path:
    cfg = with_defaults({**TINY, "scaling": scaling_cfg, **over})
    check(cfg)
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"run": "t", "config": cfg, "config_hash": config_hash(cfg), "git_commit": "abc"}))
    return path


def test_data_parallel_rows_train_the_global_batch_and_match_one_process(tmp_path):
    run_file = write_run(tmp_path, {"enabled": True, "world_sizes": [1, 2], "seeds": [0]})
    st = start("scaling", str(run_file), "cpu", 2, backend=TwoCpus())
    run = scaling.ScalingRun(st, str(run_file), str(tmp_path), log=lambda *_: None)
    RecordingDataParallel.batches = []
    rows = run.data_parallel_rows()
    run.check_losses(rows)
    assert {(r["method"], r["world_size"], r["mode"]) for r in rows} == {("dp", 2, "fp32"), ("dp", 2, "amp_bf16")}
    b = TINY["amp"]["batch_size"]
    assert set(RecordingDataParallel.batches[: TINY["amp"]["steps"]]) == {2 * b}
    for r in rows:
        assert r["status"] == "ok" and r["global_batch"] == 2 * b and r["devices"] == "cpu,cpu"
        assert r["samples_per_s"] == pytest.approx(2 * b / r["step_median_s"])
        assert r["loss_matches_single"] is True and r["loss_max_rel_diff"] < 1e-6


def test_data_parallel_rows_elsewhere_are_unsupported(tmp_path):
    run_file = write_run(tmp_path, {"enabled": True, "world_sizes": [1, 2]})
    st = start("scaling", str(run_file), "cpu", 2)
    rows = scaling.ScalingRun(st, str(run_file), str(tmp_path), log=lambda *_: None).data_parallel_rows()
    assert {r["status"] for r in rows} == {"unsupported"} and {r["world_size"] for r in rows} == {2}
    assert all("not on cpu" in r["status_detail"] for r in rows)


# gpt and resnet at sizes that train a world of 2 on the 2-core CPU in seconds (their own batch per rank, steps, lr)
SMALL_TRAINING = {"steps": 10, "warmup_steps": 2, "n_train": 128, "n_test": 16, "lr": 0.003}
SCALING_WORKLOADS_AMP = {
    **TINY["amp"],
    "gpt": {
        **SMALL_TRAINING,
        "batch_size": 4,
        "n_layers": 1,
        "d_model": 16,
        "n_heads": 2,
        "seq_len": 16,
        "vocab_size": 16,
    },
    # 32² images (the small preset's): at 16² the last two stages are 1x1, and torch 2.13's bf16 CPU convolution
    # (oneDNN, on a host with AVX-512 BF16 and AMX) returned a non-finite weight gradient in blocks.3.conv2 in 11 of
    # 150 seeded first steps of a batch of 8 (0 of 20 with ONEDNN_MAX_CPU_ISA=AVX2; 0 of 300 at 32²). The stage
    # records such a trial as status nan, correctly, but this test is about the world, not that kernel
    "resnet": {**SMALL_TRAINING, "batch_size": 16, "width": 4, "image_size": 32, "n_classes": 4},
}


def test_throughput_columns_of_a_trial_in_the_workloads_items(tmp_path):
    """A gpt trial of a world of 2 from its (fake) timed steps: samples/s of the global batch, tokens/s (x seq_len),
    per rank (/2), and one rank's MFU: FlopCounterMode's FLOPs of one rank's step over the median step and the
    backend's peak (the AMP stage's training_columns); resnet counts images; mlp has neither, nor an MFU."""
    run_file = write_run(
        tmp_path,
        {"enabled": True, "world_sizes": [1, 2], "workloads": ["gpt", "resnet", "mlp"]},
        amp=SCALING_WORKLOADS_AMP,
    )
    st = start("scaling", str(run_file), "cpu", 2)
    run = scaling.ScalingRun(st, str(run_file), str(tmp_path), log=lambda *_: None)
    steps = [9.0, 9.0] + [0.02, 0.03, 0.025, 0.02, 0.03]  # the two warm-up steps are left out
    got = {"workload": "gpt", "mode": "fp32", "seed": 0, "global_batch": 8, "warmup_steps": 2, "step_s": steps}
    row = run.trial_timing(got, 2, 4, 1)
    assert row["step_median_s"] == pytest.approx(0.025) and row["samples_per_s"] == pytest.approx(8 / 0.025)
    assert row["tokens_per_s"] == pytest.approx(8 / 0.025 * 16) and row["tokens_per_s_per_rank"] == pytest.approx(
        4 / 0.025 * 16
    )
    assert row["samples_per_s_per_rank"] == pytest.approx(4 / 0.025) and math.isnan(row["images_per_s"])
    flops, _ = amp.step_flops("gpt", {**amp.workload_config(run.amp_cfg, "gpt"), "batch_size": 4}, 4, torch)
    assert row["model_flops_per_rank_step"] == pytest.approx(flops) and flops > 0
    peak, _ = CpuBackend().peak_tflops(st.info("cpu"), "float32", 1)
    assert row["peak_tflops"] == pytest.approx(peak) and row["peak_dtype"] == "float32" and row["preset"] == "tiny"
    assert row["mfu_pct"] == pytest.approx(100 * flops / 0.025 / 1e12 / peak)
    res = run.trial_timing({**got, "workload": "resnet", "mode": "amp_bf16", "global_batch": 32}, 2, 16, 1)
    assert res["images_per_s"] == pytest.approx(32 / 0.025) and res["images_per_s_per_rank"] == pytest.approx(
        16 / 0.025
    )
    assert math.isnan(res["tokens_per_s"]) and res["peak_dtype"] == "bfloat16" and res["mfu_pct"] > 0
    mlp = run.trial_timing({**got, "workload": "mlp"}, 2, 32, 1)
    assert math.isnan(mlp["tokens_per_s"]) and math.isnan(mlp["images_per_s"]) and math.isnan(mlp["mfu_pct"])
    # the plan: each workload's own batch per rank
    p = scaling_rank.plan(st.config, CpuBackend(), 2, 1)
    assert p["per_rank_batches"] == {"gpt": 4, "resnet": 16, "mlp": TINY["amp"]["batch_size"]}


def test_the_reference_of_a_batchnorm_model_normalizes_each_rank_slice():
    """BatchNorm takes its statistics from the batch it sees: a rank sees its slice, so the single-process
    reference runs the model on the slices apart (scaling.per_slice); a model without BatchNorm is left as is."""
    torch.manual_seed(0)
    bn = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    x = torch.randn(8, 3)
    sliced = scaling.per_slice(bn, 2, torch)
    expected = torch.cat([bn(x[:4]), bn(x[4:])])
    assert torch.allclose(sliced(x), expected) and not torch.allclose(bn(x), expected, atol=1e-3)
    plain = torch.nn.Linear(3, 4)
    assert scaling.per_slice(plain, 2, torch) is plain and scaling.per_slice(bn, 1, torch) is bn


@pytest.mark.slow
def test_gpt_and_resnet_train_in_a_gloo_world_of_2(tmp_path):
    """gpt and resnet for real: worlds 1 and 2 (gloo, one thread per rank), one seed, fp32 and bf16 AMP. The rows
    carry tokens/s or images/s (world and per rank) and one rank's MFU; the loss check passes against the one-process
    reference (resnet's BatchNorm per rank slice) and would fail against a reference that normalizes the whole
    global batch; bf16 resnet's curve is recorded, not judged; one seed makes the step interval descriptive."""
    run_file = write_run(
        tmp_path,
        {
            "enabled": True,
            "world_sizes": [1, 2],
            "workloads": ["gpt", "resnet"],
            "seeds": [0],
            "collectives": [],
            "timeout_s": 300,
        },
        amp=SCALING_WORKLOADS_AMP,
        cpu_threads=2,
    )
    st = start("scaling", str(run_file), "cpu", 2)
    run = scaling.ScalingRun(st, str(run_file), str(tmp_path), log=lambda *_: None)
    trials = run.world_rows(1, None)[0] + run.world_rows(2, None)[0]
    run.check_losses(trials)
    df = pd.DataFrame([{k: v for k, v in r.items() if k != "_losses"} for r in trials])
    assert set(zip(df["workload"], df["mode"], df["world_size"])) == {
        (w, m, n) for w in ("gpt", "resnet") for m in ("fp32", "amp_bf16") for n in (1, 2)
    }
    assert (df["status"] == "ok").all(), df[["workload", "mode", "world_size", "status_detail"]]
    gpt, res = df[df["workload"] == "gpt"], df[df["workload"] == "resnet"]
    assert (gpt["global_batch"] == 4 * gpt["world_size"]).all() and (
        res["global_batch"] == 16 * res["world_size"]
    ).all()
    assert ((gpt["tokens_per_s"] - 16 * gpt["samples_per_s"]).abs() < 1e-6 * gpt["tokens_per_s"]).all()
    assert (
        (gpt["tokens_per_s_per_rank"] * gpt["world_size"] - gpt["tokens_per_s"]).abs() < 1e-6 * gpt["tokens_per_s"]
    ).all()
    assert ((res["images_per_s"] - res["samples_per_s"]).abs() < 1e-9 * res["images_per_s"]).all()
    assert gpt["images_per_s"].isna().all() and res["tokens_per_s"].isna().all()
    mfu = 100 * df["model_flops_per_rank_step"] / df["step_median_s"] / 1e12 / df["peak_tflops"]
    assert (df["mfu_pct"] > 0).all() and ((df["mfu_pct"] - mfu).abs() < 1e-9 * mfu).all()
    judged = df[~((df["workload"] == "resnet") & (df["mode"] == "amp_bf16") & (df["world_size"] == 2))]
    assert judged["loss_matches_single"].map(bool).all(), judged[
        ["workload", "mode", "world_size", "loss_max_rel_diff"]
    ]
    unjudged = df[(df["workload"] == "resnet") & (df["mode"] == "amp_bf16") & (df["world_size"] == 2)].iloc[0]
    assert unjudged["loss_matches_single"] is None and "not judged" in unjudged["status_detail"]
    assert unjudged["loss_max_rel_diff"] >= 0
    # the same resnet world against a reference that normalizes the whole global batch: the check would fail
    ddp = next(r for r in trials if (r["workload"], r["mode"], r["world_size"]) == ("resnet", "fp32", 2))
    whole_cfg = {**amp.workload_config(run.amp_cfg, "resnet"), "batch_size": 32}
    before, whole = torch.get_num_threads(), []
    torch.set_num_threads(1)  # a rank's, as the reference runs
    try:
        amp.run_trial(
            amp.Trial("cpu", "cpu", "cpu", "resnet", "fp32", 0),
            whole_cfg,
            run.data["resnet"],
            run.policy,
            backend=run.backend,
            threads=1,
            steps_out=whole,
        )
    finally:
        torch.set_num_threads(before)
    assert ss.loss_max_rel_diff(ddp["_losses"], [s["loss"] for s in whole]) > ss.loss_tolerance("fp32")
    summary = ss.summarize(df).set_index(["workload", "mode", "world_size"])
    assert (summary["interval_over"] == "descriptive").all() and (summary["trials"] == 1).all()
    two = summary.loc[("gpt", "fp32", 2)]
    assert two["scaling_efficiency"] > 0 and math.isnan(two["efficiency_ci95_low"])
    assert two["tokens_per_s"] == pytest.approx(16 * two["samples_per_s"]) and two["mfu_pct"] > 0


def test_world_sizes_beyond_the_devices_are_unsupported():
    plan = scaling.world_sizes(CpuBackend(), ["cpu"], threads=2, configured=[4, 1, 2])
    assert plan == [(1, None), (2, None), (4, plan[2][1])] and "at most 2" in plan[2][1]
    assert [
        n
        for n, _ in scaling.world_sizes(
            CudaBackend(torch=fake_cuda_torch(6)), [f"cuda:{i}" for i in range(6)], threads=1, configured=[]
        )
    ] == [1, 2, 4, 6]


def test_disabled_and_absent_write_one_row_per_table(tmp_path):
    run_file = write_run(tmp_path, {"enabled": False})
    from accelbench.cli import main

    assert (
        main(["scaling", "--run-file", str(run_file), "--backend", "cpu", "--threads", "1", "--out-dir", str(tmp_path)])
        == 0
    )
    for table in registry.STAGES["scaling"].tables:
        df = pd.read_csv(tmp_path / registry.TABLES[table].filename("cpu"))
        assert list(df.columns) == registry.TABLES[table].all_columns
        assert len(df) == 1 and df["status"][0] == "disabled" and "scaling: {enabled: true}" in df["status_detail"][0]
    run_file = write_run(tmp_path, {"enabled": True}, backends=["cpu", "cuda"])
    assert (
        main(
            ["scaling", "--run-file", str(run_file), "--backend", "cuda", "--threads", "1", "--out-dir", str(tmp_path)]
        )
        == 0
    )
    df = pd.read_csv(tmp_path / "scaling_cuda.csv")
    assert df["status"].tolist() == ["absent"]


# ---- config --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config,key,allowed",
    [
        ({"scaling": {"world_sizes": [2, 4]}}, "scaling.world_sizes", "includes 1"),
        ({"scaling": {"world_sizes": [1, 0]}}, "scaling.world_sizes[1]", ">= 1"),
        ({"scaling": {"world_sizes": [1, 1]}}, "scaling.world_sizes", "duplicate"),
        ({"scaling": {"world_sizes": [1, 64]}}, "scaling.world_sizes", "up to 32"),
        ({"scaling": {"workloads": ["bert"]}}, "scaling.workloads[0]", "mlp, transformer, gpt, resnet"),
        ({"scaling": {"workloads": ["gpt", "gpt"]}}, "scaling.workloads", "duplicate"),
        (
            {"scaling": {"enabled": True, "workloads": ["gpt"]}, "amp": {"gpt": {"batch_size": "max"}}},
            "amp.gpt.batch_size",
            "a positive integer, or null",
        ),
        (
            {"scaling": {"world_sizes": [1, 64], "workloads": ["resnet"]}, "amp": {"resnet": {"batch_size": 16}}},
            "scaling.world_sizes",
            "exceeds amp.resnet.n_train (512); allowed: world sizes up to 32",
        ),
        (
            {"scaling": {"collectives": ["alltoall"]}},
            "scaling.collectives[0]",
            "all_reduce, all_gather, reduce_scatter, broadcast",
        ),
        ({"scaling": {"sizes": {"min_bytes": 4096, "max_bytes": 1024}}}, "scaling.sizes.min_bytes", "1 .. 1024"),
        ({"scaling": {"sizes": {"factor": 1}}}, "scaling.sizes.factor", ">= 2"),
        ({"scaling": {"timeout_s": 0}}, "scaling.timeout_s", "> 0"),
        ({"scaling": {"seeds": []}}, "scaling.seeds", "empty"),
        ({"scaling": {"enabled": "yes"}}, "scaling.enabled", "boolean"),
        ({"scaling": {"world_size": [1]}}, "scaling: unknown key(s) 'world_size'", "world_sizes"),
        ({"cluster": {"gpus_per_node": 0}}, "cluster.gpus_per_node", ">= 1"),
    ],
)
def test_bad_scaling_config_names_the_key(config, key, allowed):
    with pytest.raises(ConfigError) as info:
        check(config)
    message = str(info.value)
    assert message.startswith(key) and allowed in message and "\n" not in message, message


# ---- the launcher with real torchrun worlds -------------------------------------------------------------------

FAULT_RANK = """
import os, sys, time
from accelbench.run.launch import write_pid_file
rank = int(os.environ["RANK"])
write_pid_file(sys.argv[1], rank)
mode = sys.argv[2]
if mode == "crash" and rank == 1:
    raise RuntimeError("rank 1 planted failure")
if mode == "hang":
    time.sleep(600)  # every rank blocked, as in a collective a peer never joins
time.sleep(0.3)
"""


def run_fault_world(tmp_path, mode, timeout_s=60.0):
    (tmp_path / "fault_rank.py").write_text(FAULT_RANK)
    port = launch.free_port()
    work = tmp_path / mode
    work.mkdir()
    argv = launch.torchrun_argv(2, port, "fault_rank", [str(work), mode])
    env = {
        **os.environ,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "OMP_NUM_THREADS": "1",
    }
    return launch.launch(
        argv, env=env, timeout_s=timeout_s, log_path=work / "launcher.log", pid_dir=work, port=port
    ), work


@pytest.mark.slow
@pytest.mark.parametrize("mode,status", [("ok", "ok"), ("crash", "error"), ("hang", "timeout")])
def test_launcher_ends_every_rank_and_frees_the_port(tmp_path, mode, status):
    """Not flaky under load: the hang sleeps 600 s against a 12 s timeout, the others finish in a second or two
    after torch.distributed.run's start (a few seconds on a loaded 2-core machine, well inside 60 s)."""
    result, work = run_fault_world(tmp_path, mode, timeout_s=12.0 if mode == "hang" else 90.0)
    assert result.status == status, (result, (work / "launcher.log").read_text()[-2000:])
    rank_pids = launch.read_pid_files(work)
    assert len(rank_pids) == 2 and len(set(rank_pids)) == 2 and os.getpid() not in rank_pids
    assert set(rank_pids) <= set(result.pids)
    assert not any(launch.pid_alive(p) for p in result.pids), result
    assert result.leftover == [] and result.port_free and launch.port_is_free(result.port)
    if mode == "crash":
        assert "planted failure" in result.detail, result.detail
    if mode == "hang":
        assert 12.0 <= result.seconds < 40 and "scaling.timeout_s" in result.detail


def test_port_checks_see_a_listening_socket():
    with socket.socket() as s:
        s.bind((launch.HOST, 0))
        s.listen()
        port = s.getsockname()[1]
        assert not launch.port_is_free(port)
    assert launch.port_is_free(port)
    picked = launch.free_port()
    assert launch.port_is_free(picked)


def test_failure_detail_from_a_torchrun_log():
    log = """[rank1]: Traceback (most recent call last):
[rank1]:   File "x.py", line 3, in <module>
[rank1]: RuntimeError: Connection closed by peer [127.0.0.1]:1234
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_05:00:00
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 4242)
"""
    assert launch.failure_detail(log, 1) == (
        "rank 1 failed: exitcode -9 (pid: 4242); first error: RuntimeError: Connection closed by peer [127.0.0.1]:1234"
    )
    signal_only = "\n".join(line for line in log.splitlines() if "Error" not in line)
    assert launch.failure_detail(signal_only, 1) == "rank 1 failed: exitcode -9 (pid: 4242)"
    assert launch.failure_detail("", 2) == "torch.distributed.run exited with 2"


# ---- the stage for real: a rank killed, a rank hung ----------------------------------------------------------------


def wait_for(predicate, timeout_s, what):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def trial_lines(results: Path) -> int:
    if not results.exists():
        return 0
    return sum('"kind": "trial"' in line for line in results.read_text().splitlines())


@pytest.mark.slow
def test_a_killed_and_a_hung_rank_end_only_their_world(tmp_path):
    """World sizes 1, 2, 3 on gloo (3 granted threads, one per rank). In world 2, rank 1 is SIGKILLed once
    rank 0 has recorded its first trial; in world 3, rank 2 is SIGSTOPped the same way (it hangs: its peers
    wait in their next all-reduce). World 2 ends at once with ``error``, world 3 after scaling.timeout_s with
    ``timeout``; the trials finished before are kept, world 1 is complete, no process of either world is left
    (by pid) and their ports are free.

    Not flaky under load: a normal world of these tiny trials takes a few seconds (about 10 on a loaded
    2-core machine) against a 45 s timeout, and the faults are triggered by the ranks' own progress, not
    by a clock."""
    run_file = write_run(
        tmp_path,
        {
            "enabled": True,
            "world_sizes": [1, 2, 3],
            "seeds": [0, 1],
            "timeout_s": 45,
            "collectives": ["all_reduce"],
            "min_run_time_s": 0.02,
            "sizes": {"min_bytes": 1024, "max_bytes": 4096, "factor": 4},
        },
        amp={**TINY["amp"], "workloads": ["mlp"], "steps": 60, "warmup_steps": 2},
    )
    out = tmp_path / "run"
    out.mkdir()
    proc = subprocess.Popen(
        [
            str(BIN / "accelbench"),
            "scaling",
            "--run-file",
            str(run_file),
            "--backend",
            "cpu",
            "--threads",
            "3",
            "--out-dir",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"},
    )
    work = out / registry.work_dir("scaling", "cpu")
    faults = {2: (1, signal.SIGKILL), 3: (2, signal.SIGSTOP)}
    pids = {}
    try:
        for world, (rank, sig) in faults.items():
            ws = work / f"ws{world}"
            wait_for(lambda ws=ws: trial_lines(ws / scaling_rank.RESULTS) >= 1, 240, f"a trial of world {world}")
            pid = int((ws / f"rank{rank}.pid").read_text())
            pids[world] = launch.read_pid_files(ws)
            os.kill(pid, sig)
        output, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output
    trials = pd.read_csv(out / "scaling_cpu_trials.csv")
    ddp = trials[trials["method"] == "ddp"]
    by_world = dict(iter(ddp.groupby("world_size")))
    assert (by_world[1]["status"] == "ok").all() and len(by_world[1]) == 4
    for world, status in ((2, "error"), (3, "timeout")):
        g = by_world[world]
        assert len(g) == 4 and (g["status"] == "ok").sum() >= 1, g[["seed", "mode", "status"]]
        assert set(g["status"]) == {"ok", status}, g[["seed", "mode", "status", "status_detail"]]
        assert len(pids[world]) == world
        assert not any(launch.pid_alive(p) for p in pids[world]), (world, pids[world])
    assert "scaling.timeout_s" in by_world[3][by_world[3]["status"] == "timeout"]["status_detail"].iloc[0]
    collectives = pd.read_csv(out / "collectives_cpu.csv")
    assert set(collectives[collectives["world_size"] == 2]["status"]) == {"error"}
    assert set(collectives[collectives["world_size"] == 3]["status"]) == {"timeout"}
    summary = pd.read_csv(out / "scaling_cpu.csv")
    ddp_summary = summary[summary["method"] == "ddp"].set_index(["world_size", "mode"])
    assert ddp_summary.loc[(1, "fp32"), "status"] == "ok"
    assert ddp_summary.loc[(2, "fp32"), "status"] in ("ok", "error")
    for line in output.splitlines():
        if line.startswith("scaling world "):
            assert "left running: none" in line and "port free again: True" in line, line


# ---- the cluster request and the multi-node example ------------------------------------------------------------


def test_the_scaling_job_asks_for_every_gpu_of_a_node(tmp_path):
    """SLURM dry run (with --cores, so threads are not capped at the dry run's single core): the cuda scaling job
    asks for cluster.gpus_per_node GPUs and as many CPUs, every other cuda job for one; the plugin's own
    sbatch line says --gpus=h100:4 --cpus-per-task=4."""
    import yaml

    from test_profiles import PROFILES, dry_run_jobs, sbatch_line, snakemake

    (tmp_path / "config.yaml").write_text(
        yaml.safe_dump({**TINY, "backends": ["cpu", "cuda"], "cluster": {"gpu_model": "h100", "gpus_per_node": 4}})
    )
    proc = snakemake(
        tmp_path,
        "-n",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--configfile",
        str(tmp_path / "config.yaml"),
        "--profile",
        str(PROFILES / "slurm"),
        "--cores",
        "16",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = dry_run_jobs(proc.stdout + proc.stderr)
    cuda = [j for j in jobs if j["backend"] == "cuda"]
    assert {j["rule"] for j in cuda} == {s.rule for s in registry.DEVICE_STAGES}
    for job in cuda:
        n = 4 if job["rule"] == "scaling" else 1
        assert job["resources"]["gpu"] == n and job["threads"] == n, job
        line = sbatch_line(job)
        assert f" --gpus=h100:{n}" in line and f"--cpus-per-task={n}" in line, line
    cpu_scaling = next(j for j in jobs if j["rule"] == "scaling" and j["backend"] == "cpu")
    assert "gpu" not in cpu_scaling["resources"] and cpu_scaling["resources"]["slurm_extra"] == "--exclusive"


def test_multinode_example_passes_a_dry_run(tmp_path):
    run_file = write_run(tmp_path, {"enabled": True})
    env = {
        **os.environ,
        "ACCELBENCH_DRY_RUN": "1",
        "SLURM_NNODES": "2",
        "SLURM_JOB_ID": "77",
        "GPUS_PER_NODE": "8",
        "HEAD_NODE": "gpu001",
    }
    proc = subprocess.run(
        ["bash", str(REPO / "bench" / "multinode_scaling.sbatch"), str(run_file), "cuda"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    argv = proc.stdout.split()
    assert argv[:3] == ["srun", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    torchrun = argv[argv.index("torch.distributed.run") + 1 :]
    from torch.distributed.run import get_args_parser

    parsed = get_args_parser().parse_args(torchrun)
    assert parsed.nnodes == "2" and parsed.nproc_per_node == "8" and parsed.rdzv_endpoint == "gpu001:29500"
    assert parsed.module and parsed.training_script == "accelbench.stages.scaling.rank"
    rank_args = parsed.training_script_args
    # the rank program accepts its arguments and, as rank 9 of 16, plans the configured work without a device
    env = {**os.environ, "WORLD_SIZE": "16", "RANK": "9", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "8"}
    dry = subprocess.run(
        [sys.executable, "-m", "accelbench.stages.scaling.rank", *rank_args, "--dry-run"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["world_size"] == 16 and plan["rank"] == 9 and plan["process_group"] == "nccl"
    assert plan["global_batch"] == 16 * TINY["amp"]["batch_size"] and plan["collectives"] == list(ss.COLLECTIVES)


# ---- the report and the figures ---------------------------------------------------------------------------------


def svg_words(path: Path) -> str:
    import xml.etree.ElementTree as ET

    return " ".join(t.strip() for t in ET.parse(path).getroot().itertext() if t.strip())


def test_report_says_how_to_turn_scaling_on_when_it_was_off(fixtures):
    built = fixtures("cpu_only")
    html = built["report"].read_text()
    section = html[
        html.index('<section id="scaling">') : html.index("</section>", html.index('<section id="scaling">'))
    ]
    assert 'id="scaling-off"' in section and "scaling: {enabled: true}" in section and "off by default" in section
    assert "scaling.enabled is false" in svg_words(built["plots"] / "scaling_efficiency.svg")


def test_report_scaling_section_shows_the_measured_rows(fixtures):
    from accelbench.reporting import tables as S

    built = fixtures("two_runs")
    html = built["report"].read_text()
    assert 'id="scaling-off"' not in html and '<a href="#scaling">' in html
    summary = pd.read_csv(built["aggregate"] / "scaling.csv")
    measured = summary[(summary["status"] == "ok") & (summary["method"] == "ddp")]
    assert len(measured) == 2 * 2 * 5 + 2  # cpu: mlp and gpt x 2 modes x 5 worlds; cuda: mlp x 2 modes x world 1
    for _, r in measured.iterrows():
        cell = (
            f'data-run="{r["run_id"]}" data-device="{r["device"]}" data-method="ddp" '
            f'data-workload="{r["workload"]}" data-mode="{r["mode"]}" '
            f'data-world="{int(r["world_size"])}" data-efficiency="{r["scaling_efficiency"]}"'
        )
        assert cell in html, cell
    section = html[html.index('<section id="scaling">') : html.index('<section id="telemetry">')]
    assert 'data-run="laptop-cpu"' not in section and "laptop-cpu · cpu: disabled" in section  # its scaling was off
    gpt = measured[measured["workload"] == "gpt"]
    assert (gpt["tokens_per_s"] == gpt["samples_per_s"] * 32).all() and (gpt["interval_over"] == "seeds").all()
    table = section[section.index('id="scaling-table"') :]
    for _, r in gpt.iterrows():  # the gpt rows: tokens/s of the world and of one rank, one rank's MFU
        row = table[
            table.index(
                f'data-run="{r["run_id"]}" data-device="{r["device"]}" data-method="ddp" '
                f'data-workload="gpt" data-mode="{r["mode"]}" data-world="{int(r["world_size"])}"'
            ) :
        ]
        row = row[: row.index("</tr>")]
        cells = [c.split(">", 1)[-1] for c in row.split("</td>")]
        world, per_rank = (
            f"{S.fmt_num(r['tokens_per_s'])} tokens/s",
            f"{S.fmt_num(r['tokens_per_s_per_rank'])} tokens/s",
        )
        assert "gpt" in cells and world in cells and per_rank in cells and "seeds" in cells, cells
        assert f"{S.fmt_num(r['mfu_pct'])}%" in cells, cells
    assert "CI over" in section and "variance between trials" in section
    eff = svg_words(built["plots"] / "scaling_efficiency.svg")
    assert "scaling efficiency" in eff and "world size (ranks)" in eff and "nn.DataParallel" not in eff
    assert "gpt: global throughput" in eff and "tokens/s (95% CI over seeds)" in eff
    bus = svg_words(built["plots"] / "collective_busbw.svg")
    assert "busbw GB/s" in bus and "all_reduce" in bus and "16 ranks" in bus
    assert "need a backend with 2 devices" in svg_words(built["plots"] / "peer_copy.svg")


def test_peer_copy_heatmap_draws_the_matrix():
    import matplotlib.pyplot as plt

    from accelbench.reporting import plots
    from accelbench.stages.scaling.figures import fig_peer_copy

    rows = [
        {
            "run_id": "r",
            "backend": "cuda",
            "src": f"cuda:{i}",
            "dst": f"cuda:{j}",
            "peer": peer,
            "gbps": (350.0 if peer == "on" else 21.0) + i,
            "status": "ok",
        }
        for i in range(3)
        for j in range(3)
        if i != j
        for peer in ("on", "off")
    ]
    plt_, sns = plots._setup()
    fig = fig_peer_copy(plt_, sns, {"peer_copy": pd.DataFrame(rows)}, None)
    words = " ".join(t.get_text() for t in fig.findobj(match=lambda o: hasattr(o, "get_text")))
    assert "peer access on" in words and "off (host-staged)" in words and "cuda:2" in words
    assert "352" in words and "21" in words  # the cells carry their GB/s
    plt.close("all")


STOPPED_STAGE = """
import os, sys
from pathlib import Path
from accelbench.run import launch
tmp = Path(sys.argv[1])
port = launch.free_port()
argv = launch.torchrun_argv(2, port, "fault_rank", [str(tmp / "hang"), "hang"])
(tmp / "hang").mkdir()
env = {**os.environ, "PYTHONPATH": f"{tmp}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
try:
    launch.launch(argv, env=env, timeout_s=300, log_path=tmp / "hang" / "launcher.log", pid_dir=tmp / "hang", port=port)
except launch.Stopped as exc:
    print("stopped:", exc, flush=True)
    sys.exit(143)
"""


@pytest.mark.slow
def test_a_stopped_stage_takes_its_ranks_with_it(tmp_path):
    """SIGTERM to the process running a world (a scheduler cancelling the job) ends every rank first: torchrun
    starts them in sessions of their own, so nothing else would."""
    (tmp_path / "fault_rank.py").write_text(FAULT_RANK)
    proc = subprocess.Popen(
        [sys.executable, "-c", STOPPED_STAGE, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    pids = wait_for(
        lambda: len(launch.read_pid_files(tmp_path / "hang")) == 2 and launch.read_pid_files(tmp_path / "hang"),
        120,
        "two ranks",
    )
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "stopped: stopped by signal 15" in out, out
    assert not any(launch.pid_alive(p) for p in pids), pids


def test_srun_world_runs_one_torchrun_per_node_with_c10d_at_the_first_node(tmp_path):
    """scaling.nodes > 1: srun's task script finds the allocation's first node and its address with scontrol and
    starts torch.distributed.run there with c10d rendezvous; every value is an argument, none is in the script
    (tested here with a fake scontrol and python; the real cluster run is tests/test_fleet_slurm.py)."""
    from torch.distributed.run import get_args_parser

    from accelbench.run import launch

    argv = launch.srun_torchrun_argv(
        2,
        4,
        29511,
        "accelbench.stages.scaling.rank",
        ["--backend", "cpu"],
        rdzv_id="accelbench-scaling-1-29511",
        time_min=3,
        python="python-x",
    )
    assert argv[0] == "srun" and "--nodes=2" in argv and "--ntasks-per-node=1" in argv
    assert "--kill-on-bad-exit=1" in argv and "--time=3" in argv
    script = argv[argv.index("-c") + 1]
    assert script == launch.SRUN_TASK and "29511" not in script and "python-x" not in script
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(
        '#!/bin/sh\nif [ "$2" = hostnames ]; then printf "gpu007\\ngpu008\\n"; '
        'else echo "NodeName=$3 Arch=x86_64 NodeAddr=10.0.0.7 NodeHostName=$3"; fi\n'
    )
    (bin_dir / "python-x").write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "gpu[007-008]"}
    task = argv[argv.index("bash") :]
    proc = subprocess.run(task, capture_output=True, text=True, env=env, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout.splitlines()
    assert printed[:2] == ["-m", "torch.distributed.run"]
    parsed = get_args_parser().parse_args(printed[2:])
    assert parsed.nnodes == "2" and parsed.nproc_per_node == "4" and parsed.rdzv_backend == "c10d"
    assert parsed.rdzv_endpoint == "10.0.0.7:29511" and parsed.rdzv_id == "accelbench-scaling-1-29511"
    assert parsed.max_restarts == 0 and parsed.training_script == "accelbench.stages.scaling.rank"
    assert parsed.training_script_args == ["--backend", "cpu"]


def test_multi_node_world_without_srun_is_unsupported(tmp_path, monkeypatch):
    """scaling.nodes 2 where srun is not on PATH: that world is unsupported with the reason, before any launch."""
    import shutil as _shutil

    from accelbench.stages.scaling import measure

    monkeypatch.setattr(measure.shutil, "which", lambda name: None if name == "srun" else _shutil.which(name))

    from accelbench import backends as B

    st = type("St", (), {})()
    st.backend = B.get("cpu")
    st.config = {"scaling": {"nodes": 2, "ranks_per_node": 1, "world_sizes": [1]}, "amp": {}}
    st.prov, st.devices, st.threads = {}, ["cpu"], 1
    st.info = lambda device: {"name": "cpu"}
    run = measure.ScalingRun(st, str(tmp_path / "run.json"), str(tmp_path))
    assert [n for n, _ in run.plan] == [1, 2] and run.multi_node == 2
    assert run.plan[1][1] and "srun" in run.plan[1][1] and run.plan[0][1] is None


def test_split_groups_as_nccl_tests_split():
    """NCCL_TESTS_SPLIT: a world of nodes x local ranks gives each node's ranks (intra) and one local index across
    the nodes (inter); no split on one node or with one rank per node (the world is the inter-node measurement)."""
    from accelbench.stages.scaling.rank import split_groups

    assert split_groups(8, 4) == {
        "intra_node": [[0, 1, 2, 3], [4, 5, 6, 7]],
        "inter_node": [[0, 4], [1, 5], [2, 6], [3, 7]],
    }
    assert split_groups(6, 2)["inter_node"] == [[0, 2, 4], [1, 3, 5]]
    assert split_groups(4, 4) == {} and split_groups(2, 1) == {} and split_groups(1, 1) == {}
    assert split_groups(6, 4) == {}  # uneven nodes: torchrun would not number them so


def test_collectives_in_a_sub_group_pass_the_group_and_its_first_rank():
    from accelbench.stages.scaling.collectives import TorchCollectives

    calls = []

    class FakeDist:
        class ReduceOp:
            MAX, MIN, SUM = "max", "min", "sum"

        def all_reduce(self, t, op=None, group=None):
            calls.append(("all_reduce", group))

        def broadcast(self, t, src, group=None):
            calls.append(("broadcast", src, group))

        def all_gather_single(self, out, inp, group=None):
            calls.append(("all_gather", group))

        def reduce_scatter_single(self, out, inp, group=None):
            calls.append(("reduce_scatter", group))

    ops = TorchCollectives(FakeDist(), torch, "cpu", 2, group="g1", src=4)
    for c in ("all_reduce", "broadcast", "all_gather", "reduce_scatter"):
        ops.call(c, ops.buffers(c, 4))
    ops.barrier()
    ops.reduce(1.0, "max")
    assert calls == [
        ("all_reduce", "g1"),
        ("broadcast", 4, "g1"),
        ("all_gather", "g1"),
        ("reduce_scatter", "g1"),
        ("all_reduce", "g1"),
        ("all_reduce", "g1"),
    ]
