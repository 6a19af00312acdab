"""One rank of the scaling stage's world: ``python -m accelbench.stages.scaling.rank``, started by
``torch.distributed.run`` (which sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` and the
rendezvous address), one process per device (on the CPU: per share of the granted cores).

Each rank:

1. writes its pid (``rank<r>.pid`` in ``--out-dir``), so the launching process can end it by pid;
2. binds its device (``Backend.rank_device``, ``bind_rank``) and joins the process group the backend
   names (``Backend.process_group_options``: nccl on CUDA/ROCm, gloo on the CPU, xla, xccl), with
   ``scaling.timeout_s`` as the group's timeout;
3. trains every ``scaling.workloads`` x ``scaling.seeds`` x (fp32, the backend's AMP mode) under
   ``DistributedDataParallel`` with the AMP stage's data, models and trial loop (``amp.run_trial`` with an
   ``amp.Replica``; gpt and resnet from the AMP workload registry, ``stages/amp/workloads``, with their
   generated corpus or image set): ``amp.batch_size`` examples per rank per step (gpt, resnet: their section's
   ``batch_size``, ``steps``, ``warmup_steps``, ``lr``), each rank its slice of a global batch drawn from the
   same seeded order a single process uses;
4. times every collective of ``scaling.collectives`` at every size (``collectives.measure_collective``).

Rank 0 appends one JSON line per finished trial and per collective point to ``results.jsonl``; what a
world finished before a rank failed is kept. The same entry point runs across nodes under
``srun`` + ``torchrun`` (docs/scaling.md); ``--dry-run`` prints what a rank would do, touching no device.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import timeit
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel

from ... import backends
from ...run.io import Checkpoint
from ...run.launch import write_pid_file
from ...run.provenance import read_run_info
from ..amp import measure as amp
from .collectives import TorchCollectives, measure_collective
from .stats import message_sizes

RESULTS = "results.jsonl"
RESULT_KEY = ("kind", "key")


def scaling_modes(backend, amp_cfg: dict) -> tuple[list[str], str | None]:
    """(modes, why the AMP mode cannot run here or None): FP32 and the backend's AMP mode."""
    policy = backend.amp_policy(amp_cfg["dtype"])
    return [amp.BASELINE, amp.amp_mode_name(policy.dtype)], backend.amp_support(policy)


def workload_config(amp_cfg: dict, workload: str) -> dict:
    """The AMP config a workload trains with: ``amp.*`` with the workload's own trial keys over it (gpt and
    resnet: ``amp.gpt.batch_size``, ``steps``, ``warmup_steps``, ``lr``; ``amp.measure.workload_config``). Its
    ``batch_size`` is the batch per rank."""
    return amp.workload_config(amp_cfg, workload)


def per_rank_batches(amp_cfg: dict, workloads) -> dict:
    """workload -> examples per rank per step (``amp.batch_size``, or the gpt/resnet section's own)."""
    return {w: int(workload_config(amp_cfg, w)["batch_size"]) for w in workloads}


def plan(config: dict, backend, world_size: int, threads_per_rank: int) -> dict:
    """What every rank of this world does, from the run's config alone (``--dry-run`` prints it)."""
    scfg, amp_cfg = config["scaling"], config["amp"]
    modes, amp_unsupported = scaling_modes(backend, amp_cfg)
    sizes = scfg["sizes"]
    return {
        "backend": backend.name,
        "world_size": int(world_size),
        "threads_per_rank": int(threads_per_rank),
        "process_group": backend.collective,
        "workloads": list(scfg["workloads"]),
        "seeds": list(scfg["seeds"]),
        "modes": modes,
        "amp_unsupported": amp_unsupported,
        "per_rank_batch": amp_cfg["batch_size"],
        "global_batch": amp_cfg["batch_size"] * int(world_size),
        "steps": amp_cfg["steps"],
        # per workload (gpt and resnet may set their own batch): examples per rank per step
        "per_rank_batches": per_rank_batches(amp_cfg, scfg["workloads"]),
        "collectives": list(scfg["collectives"]) if world_size > 1 else [],  # one rank moves nothing over a bus
        "sizes": message_sizes(sizes["min_bytes"], sizes["max_bytes"], sizes["factor"]),
        "timeout_s": scfg["timeout_s"],
        "min_run_time_s": scfg["min_run_time_s"],
    }


class Rank:
    """This process's place in the world and what it reduces over the others."""

    def __init__(self, backend, device: str, rank: int, world_size: int, threads: int, local_devices: list[str]):
        self.backend, self.device = backend, device
        self.local_devices = local_devices  # the device of every rank on this node, local-rank order
        self.rank, self.world, self.threads = rank, world_size, threads
        self.sync = backend.synchronizer(device)

    def mean_loss(self, loss) -> float:
        t = loss.detach().float().reshape(1).clone()
        dist.all_reduce(t)
        return float(t.item()) / self.world

    def slowest(self, values: list[float]) -> list[float]:
        """Per step, the slowest rank's time (DDP steps wait for every rank's gradients)."""
        if not values:
            return []
        t = torch.tensor(values, dtype=torch.float32, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return [float(v) for v in t.cpu()]

    def wrap(self, model):
        return DistributedDataParallel(model, **self.backend.ddp_options(self.device))

    def devices(self) -> list[str]:
        """Every rank's device as ``host:device`` (rank order)."""
        out: list = [None] * self.world
        try:
            dist.all_gather_object(out, f"{os.uname().nodename}:{self.device}")
        except Exception:  # a backend without object collectives: say what this rank knows
            out = [self.device] * self.world
        return [str(d) for d in out]


def train(rank: Rank, config: dict, p: dict, results: Checkpoint | None, log=print) -> None:
    """Every DDP trial of the plan; rank 0 records each one as it finishes."""
    amp_cfg = config["amp"]
    backend = rank.backend
    policy = backend.amp_policy(amp_cfg["dtype"])
    replica = amp.Replica(rank=rank.rank, world_size=rank.world, wrap=rank.wrap, mean_loss=rank.mean_loss)
    for workload in p["workloads"]:
        # every rank draws the same data set (fixed by the config's seed) and trains on its slice of each global
        # batch (amp.batch_order): the ranks' slices together are what one process would see
        data = amp.make_data(workload, amp_cfg, config.get("seed", 0), torch)
        wl_cfg = workload_config(amp_cfg, workload)
        batch = p["per_rank_batches"][workload]
        for seed in p["seeds"]:
            for mode in p["modes"]:
                key = f"{workload}/{mode}/{seed}"
                base = {
                    "kind": "trial",
                    "key": key,
                    "workload": workload,
                    "mode": mode,
                    "seed": seed,
                    "world_size": rank.world,
                    "per_rank_batch": batch,
                    "global_batch": batch * rank.world,
                    "threads_per_rank": rank.threads,
                    "warmup_steps": wl_cfg["warmup_steps"],
                }
                if mode != amp.BASELINE and p["amp_unsupported"]:
                    row = {
                        **base,
                        "status": "unsupported",
                        "status_detail": p["amp_unsupported"],
                        "step_s": [],
                        "losses": [],
                    }
                else:
                    trial = amp.Trial(backend.name, rank.device, rank.device, workload, mode, seed)
                    steps: list = []
                    out = amp.run_trial(
                        trial,
                        wl_cfg,
                        data,
                        policy,
                        backend=backend,
                        threads=rank.threads,
                        steps_out=steps,
                        replica=replica,
                    )
                    row = {
                        **base,
                        "step_s": rank.slowest([s["step_s"] for s in steps]),
                        "losses": [s["loss"] for s in steps],
                        "status": out["status"],
                        "status_detail": out["status_detail"],
                        "final_loss": out["final_loss"],
                        "test_acc": out["test_acc"],
                        "amp_dtype": out["amp_dtype"],
                    }
                if results is not None:
                    results.add(row)
                log(f"rank {rank.rank}/{rank.world} {key}: {row['status']}")


SCOPES = ("world", "intra_node", "inter_node")


def split_groups(world: int, local_world: int) -> dict[str, list[list[int]]]:
    """nccl-tests' NCCL_TESTS_SPLIT for a world of ``world // local_world`` nodes: the ranks of each node
    (``intra_node``: node n holds ranks n*L .. n*L+L-1, as torch.distributed.run numbers them) and the ranks of one
    local index across the nodes (``inter_node``); a split is left out where its groups would be single ranks or
    the whole world (one node, or one rank per node: there the world is the inter-node measurement)."""
    L = max(1, int(local_world))
    if world <= 1 or world % L or world <= L or L < 2:
        return {}
    nodes = world // L
    return {
        "intra_node": [[n * L + i for i in range(L)] for n in range(nodes)],
        "inter_node": [[n * L + i for n in range(nodes)] for i in range(L)],
    }


def collectives(rank: Rank, p: dict, results: Checkpoint | None, log=print) -> None:
    """Every collective x size of the plan under one memory cap shared by all ranks: over the world, and where the
    world spans nodes with several ranks each, over each node's ranks and over one rank per node (``scope``)."""
    backend = rank.backend
    ops = TorchCollectives(dist, torch, rank.device, rank.world)
    sharing = max(1, rank.local_devices.count(rank.device))  # the CPU's ranks share its memory
    cap = ops.reduce(backend.free_bytes(rank.device) / 2 / sharing, "min")
    scoped = [("world", ops)]
    if p["collectives"]:
        for scope, lists in split_groups(rank.world, len(rank.local_devices)).items():
            mine, _ = dist.new_subgroups_by_enumeration(lists)  # every rank makes every group, in one order
            members = next(m for m in lists if rank.rank in m)
            scoped.append((scope, TorchCollectives(dist, torch, rank.device, len(members), group=mine, src=members[0])))
    for scope, ops in scoped:
        for collective in p["collectives"]:
            for size in p["sizes"]:
                _one_collective(rank, p, results, log, ops, scope, collective, size, cap)


def _one_collective(rank, p, results, log, ops, scope, collective, size, cap) -> None:
    """One point of the plan in one scope; rank 0 records it."""
    row = measure_collective(
        collective,
        size,
        ops=ops,
        sync=rank.sync,
        world_size=ops.world,
        cap_bytes=cap,
        min_run_time_s=p["min_run_time_s"],
    )
    key = f"{collective}/{size}" if scope == "world" else f"{scope}/{collective}/{size}"
    row.update(kind="collective", key=key, requested_bytes=size, threads_per_rank=rank.threads, scope=scope)
    if results is not None:
        results.add(row)
    log(
        f"rank {rank.rank}/{rank.world} {scope} {collective} {row['size_bytes']} B: {row['status']} "
        f"busbw {row['busbw_gbps']:.3g} GB/s"
    )


def _env_int(name: str, default: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None:
        if default is None:
            raise SystemExit(
                f"accelbench.stages.scaling.rank: {name} is not set: start this module with torch.distributed.run"
            )
        return default
    return int(value)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m accelbench.stages.scaling.rank", description=__doc__.splitlines()[0])
    p.add_argument("--run-file", required=True, help="results/<run>/run.json (its config says what to train and time)")
    p.add_argument("--backend", required=True, choices=backends.NAMES)
    p.add_argument("--out-dir", required=True, help="where the ranks write their pids and rank 0 results.jsonl")
    p.add_argument("--threads-per-rank", type=int, default=0, help="torch threads per rank (0: the backend's default)")
    p.add_argument("--dry-run", action="store_true", help="print the plan of this rank and exit; no device, no group")
    return p


@record
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    config = read_run_info(args.run_file)["config"]
    backend = backends.get(args.backend)
    world, rank_id = _env_int("WORLD_SIZE", 1 if args.dry_run else None), _env_int("RANK", 0)
    local_rank, local_world = _env_int("LOCAL_RANK", 0), _env_int("LOCAL_WORLD_SIZE", world)
    threads = args.threads_per_rank or backend.threads_per_rank(os.cpu_count() or 1, local_world)
    p = plan(config, backend, world, threads)
    if args.dry_run:
        print(json.dumps({**p, "rank": rank_id, "local_rank": local_rank, "local_world_size": local_world}, indent=1))
        return 0
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_pid_file(out, rank_id)
    torch.set_num_threads(threads)
    visible = backend.devices()
    local_devices = [backend.rank_device(i, visible) for i in range(local_world)]
    device = local_devices[local_rank]
    backend.bind_rank(device)
    dist.init_process_group(**backend.process_group_options(device), timeout=timedelta(seconds=p["timeout_s"]))
    try:
        rank = Rank(backend, device, rank_id, world, threads, local_devices)
        results = Checkpoint(out / RESULTS, RESULT_KEY) if rank_id == 0 else None
        started = timeit.default_timer()
        devices = rank.devices()
        if results is not None:
            results.add(
                {
                    "kind": "world",
                    "key": "world",
                    "devices": devices,
                    "process_group": p["process_group"],
                    "threads_per_rank": threads,
                }
            )
        train(rank, config, p, results)
        collectives(rank, p, results)
        print(f"rank {rank_id}/{world}: done in {timeit.default_timer() - started:.1f} s", flush=True)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
