"""Stage: does training scale over several devices, and what does the interconnect give?

For one backend, over world sizes 1..N (N: every device of the backend, on the CPU every granted core;
or ``scaling.world_sizes``), in this order:

1. **DDP weak scaling.** Per world size, ``torch.distributed.run`` starts one rank per device
   (``run.launch``; the rank program is ``scaling/rank.py``), on a free port, for at most
   ``scaling.timeout_s``. The ranks join the backend's process group (``Backend.collective``: nccl on
   CUDA/ROCm, gloo on the CPU, xla, xccl) and train the AMP stage's workloads (mlp, transformer, gpt, resnet:
   its data, models and trial loop, ``amp.run_trial``) under ``DistributedDataParallel`` in FP32 and in the
   backend's AMP mode, with ``amp.batch_size`` examples per rank (gpt, resnet: their section's; the global batch
   grows with the world). On the CPU the granted
   cores are split evenly over the largest world (``Backend.threads_per_rank``), so every world size gives
   each rank the same share; rows record ``threads_per_rank``. A world that hangs or loses a rank ends
   with status ``timeout`` or ``error``; what it finished before is kept, the other world sizes run, and no
   process of it is left (ended by pid; ``run.launch``).
2. **Collectives** in the same world (2 ranks or more): all_reduce, all_gather, reduce_scatter and
   broadcast for ``scaling.sizes`` (nccl-tests' -b/-e/-f), capped by memory; time, algbw, busbw
   (``collectives.py``, formulas in ``stats.py``).
3. **Loss equivalence.** This process trains every (world size, workload, seed, mode) once more without
   DDP, on one device, at the same global batch; ``loss_matches_single`` says whether the DDP loss curve
   (mean over ranks) stays within ``stats.LOSS_RTOL`` of it (a BatchNorm model's reference normalizes each
   rank's slice apart, ``per_slice``; its AMP curves are recorded, not judged: docs/scaling.md).
4. **nn.DataParallel** (the seed tutorial's single-process multi-GPU code) at every world size >= 2 where
   the backend has it (``Backend.data_parallel_support``: CUDA/ROCm with >= 2 GPUs), ``unsupported``
   elsewhere.
5. **Device-to-device copies** (``peer_copy.py``), where there are >= 2 devices.

Rows: ``scaling_<backend>_trials.csv`` (one per trial: samples/s, tokens/s (gpt) or images/s (resnet) of the
world and per rank, one rank's MFU), ``scaling_<backend>.csv`` (per method, workload, mode and world size: the
same throughput, the median step over seeds with its 95% CI over seeds (``interval_over``: the seed is the unit
of replication; ``scaling.stats``), ``scaling_efficiency`` = throughput_N / (N x throughput_1) with a CI over
seeds), ``collectives_<backend>.csv``,
``peer_copy_<backend>.csv``. ``scaling.enabled: false`` (the default) writes one ``disabled`` row per table.
The NCCL, DataParallel, XLA and peer-copy paths are **untested on hardware** (unit-tested with fakes).
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import pandas as pd

from ... import registry
from ...run import launch
from ...run.io import Checkpoint, atomic_write_csv
from ..amp import measure as amp
from ..common import add_device_stage_arguments, start
from .peer_copy import matrix_rows
from .rank import RESULT_KEY, RESULTS
from .rank import plan as rank_plan
from .stats import auto_world_sizes, loss_matches, loss_max_rel_diff, loss_tolerance, step_stats, summarize

RANK_MODULE = "accelbench.stages.scaling.rank"
TABLES = ("scaling_trials", "scaling", "collectives", "peer_copy")
# Why an AMP trial of a BatchNorm model in a world of 2 or more has no loss verdict (docs/scaling.md). Measured on
# this project's CPU (gloo, 2 ranks, one thread each, resnet small at 16x16, lr 0.003, 16 images per rank): fp32
# DDP stays within 9e-8 of the single-process reference (the BatchNorm statistics taken per rank slice, as the ranks
# do) over 10 steps, bf16 is 2.8e-3 off at step 3 and 1.8e-2 at step 5 (at 4 images per rank: 6e-2 at step 4), past
# the AMP tolerance from rounding alone. The fp32 check of the same workload and DDP code path stays.
BATCHNORM_AMP_NOTE = (
    "loss check not judged: AMP rounding amplified by BatchNorm's per-rank batch statistics "
    "exceeds the tolerance within a few steps from rounding alone; the fp32 check covers this "
    "workload's DDP path"
)
DISABLED_DETAIL = (
    "scaling.enabled is false (the default: it would lengthen the default run); "
    "set scaling: {enabled: true} in the config to measure multi-device scaling"
)


def world_sizes(backend, devices: list[str], threads: int, configured: list[int]) -> list[tuple[int, str | None]]:
    """(world size, why it cannot run or None), smallest first: ``configured`` or 1, 2, 4 ... up to every
    device (``Backend.max_world_size``)."""
    most = backend.max_world_size(devices, threads)
    sizes = sorted(set(configured)) if configured else auto_world_sizes(most)
    return [
        (
            n,
            None
            if n <= most
            else f"world size {n} needs {n} ranks; at most {most} here (one per device; "
            "on the CPU one per granted core)",
        )
        for n in sizes
    ]


def training_set(amp_cfg: dict, workload: str) -> tuple[str, str, int]:
    """(the batch's config key, the training set's config key, its size) of ``workload``: gpt and resnet have
    their own section (``amp.gpt.n_train``), mlp and transformer share ``amp.data``."""
    own = amp_cfg.get(workload) if workload in amp.training_workloads.PRESETS else None
    if isinstance(own, dict):
        batch_key = f"amp.{workload}.batch_size" if own.get("batch_size") is not None else "amp.batch_size"
        return batch_key, f"amp.{workload}.n_train", int(own["n_train"])
    return "amp.batch_size", "amp.data.n_train", int(amp_cfg["data"]["n_train"])


def throughput_columns(workload: str, amp_cfg: dict, samples_per_s: float, n: int) -> dict:
    """samples/s per rank, and tokens/s (gpt: x seq_len) or images/s (resnet), world and per rank (NaN for
    the other workloads): the world's throughput over its ``n`` ranks or devices."""
    unit = amp.training_workloads.UNIT.get(workload)
    items = samples_per_s * amp.training_workloads.items_per_example(workload, amp_cfg) if unit else math.nan
    out = {"samples_per_s_per_rank": samples_per_s / n}
    for name in ("tokens", "images"):
        world = items if unit == name else math.nan
        out.update({f"{name}_per_s": world, f"{name}_per_s_per_rank": world / n})
    return out


def has_batchnorm(model, torch) -> bool:
    return any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules())


def per_slice(model, n: int, torch):
    """The single-process reference of an ``n``-rank world for a model whose output depends on the batch it is
    in (BatchNorm: each rank normalizes its own slice with that slice's statistics, there being no SyncBatchNorm
    on gloo/CPU): the model run on the ``n`` equal slices of the global batch apart, the outputs concatenated.
    The mean loss over the global batch is then the mean of the slices' mean losses, as DDP averages the ranks'
    gradients. Other models (no BatchNorm, or one rank) are returned as they are."""
    if n <= 1 or not has_batchnorm(model, torch):
        return model

    class PerSlice(torch.nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

        def forward(self, x):
            return torch.cat([self.module(part) for part in x.chunk(n)], 0)

    return PerSlice(model)


def placeholder_rows(st, status: str, detail: str) -> dict:
    """One row per table saying why nothing was measured (disabled, absent, unsupported); it names the
    backend's first device where there is one (an absent backend has none)."""
    device = st.devices[0] if st.devices else ""
    row = {
        **st.prov,
        "backend": st.backend.name,
        "device": device,
        "device_name": st.info(device)["name"] if device else "",
        "status": status,
        "status_detail": detail,
    }
    return {t: [dict(row)] for t in TABLES}


class ScalingRun:
    """Everything the stage measures on one backend (see the module doc)."""

    def __init__(self, st, run_file: str, out_dir: str, log=print):
        self.st, self.backend, self.log = st, st.backend, log
        self.run_file = run_file
        self.cfg, self.amp_cfg = st.config["scaling"], st.config["amp"]
        self.out_dir = Path(out_dir)
        self.work = self.out_dir / registry.work_dir("scaling", self.backend.name)
        self.devices = list(st.devices)
        self.first = self.devices[0]
        self.base = {
            **st.prov,
            "backend": self.backend.name,
            "device": self.first,
            "device_name": st.info(self.first)["name"],
        }
        self.plan = world_sizes(self.backend, self.devices, st.threads, self.cfg["world_sizes"])
        # a multi-node world (scaling.nodes > 1): nodes x ranks_per_node ranks through srun, in place of a one-node
        # world of that size
        self.multi_node = None
        if self.cfg["nodes"] > 1:
            self.multi_node = self.cfg["nodes"] * self.cfg["ranks_per_node"]
            why = (
                None
                if shutil.which("srun")
                else (
                    f"scaling.nodes = {self.cfg['nodes']} starts its world through "
                    "SLURM's srun, which is not on PATH here"
                )
            )
            self.plan = [(n, w) for n, w in self.plan if n != self.multi_node] + [(self.multi_node, why)]
        local = [n for n, _ in self.plan if n != self.multi_node] or [1]
        self.threads_per_rank = self.backend.threads_per_rank(st.threads, max(local))
        self.data = {}

    @property
    def policy(self):
        """The backend's AMP policy for ``amp.dtype`` (the AMP mode's dtype; the MFU's peak precision)."""
        return self.backend.amp_policy(self.amp_cfg["dtype"])

    # ---- the world sizes -------------------------------------------------------------------------
    def launch_world(self, n: int) -> tuple[launch.LaunchResult, dict]:
        """Start the ranks of world size ``n`` (one retry on a port taken in between); their results."""
        work = self.work / f"ws{n}"
        args = [
            "--run-file",
            str(self.run_file),
            "--backend",
            self.backend.name,
            "--out-dir",
            str(work),
            "--threads-per-rank",
            str(self.threads_per_rank),
        ]
        env = {
            **os.environ,
            "OMP_NUM_THREADS": str(self.threads_per_rank),
            "MKL_NUM_THREADS": str(self.threads_per_rank),
            "PYTHONUNBUFFERED": "1",
        }
        for attempt in range(2):
            shutil.rmtree(work, ignore_errors=True)  # no pid or result of an earlier attempt may count
            work.mkdir(parents=True)
            port = launch.free_port()
            job = f"accelbench-scaling-{os.getpid()}-{port}"
            if n == self.multi_node:
                argv = launch.srun_torchrun_argv(
                    self.cfg["nodes"],
                    self.cfg["ranks_per_node"],
                    port,
                    RANK_MODULE,
                    args,
                    rdzv_id=job,
                    time_min=math.ceil(self.cfg["timeout_s"] / 60) + 1,
                )
            else:
                argv = launch.torchrun_argv(n, port, RANK_MODULE, args)
            result = launch.launch(
                argv, env=env, timeout_s=self.cfg["timeout_s"], log_path=work / "launcher.log", pid_dir=work, port=port
            )
            if n == self.multi_node:  # every node's launcher and ranks end with the world, not SLURM's KillWait later
                left = launch.end_slurm_job(job)
                if left:
                    result.leftover = [*result.leftover, -1]
                    result.detail = f"{result.detail}; SLURM job {job} still running: {left}".lstrip("; ")
            rows = Checkpoint(work / RESULTS, RESULT_KEY).rows if (work / RESULTS).exists() else {}
            taken = "address already in use" in (work / "launcher.log").read_text(errors="replace").lower()
            if not (result.status == "error" and taken and not rows and attempt == 0):
                break
            self.log(f"scaling world {n}: port {port} was taken meanwhile; once more on another")
        self.log(
            f"scaling world {n}: {result.status} in {result.seconds:.1f} s (port {port}, pids "
            f"{result.pids}, left running: {result.leftover or 'none'}, port free again: {result.port_free})"
            + (f": {result.detail}" if result.detail else "")
        )
        return result, {tuple(k): v for k, v in rows.items()}

    def world_rows(self, n: int, why: str | None) -> tuple[list[dict], list[dict]]:
        """Trial rows and collective rows of world size ``n``."""
        p = rank_plan(self.st.config, self.backend, n, self.threads_per_rank)
        for workload in p["workloads"]:
            batch_key, n_train_key, n_train = training_set(self.amp_cfg, workload)
            if why is None and p["per_rank_batches"][workload] * n > n_train:
                why = (
                    f"global batch {p['per_rank_batches'][workload] * n} (world size {n} x {batch_key}) exceeds "
                    f"{n_train_key} ({n_train})"
                )
        status, detail, results, devices = ("unsupported", why, {}, "")
        if why is None:
            result, results = self.launch_world(n)
            status, detail = result.status, result.detail
            if result.leftover:
                detail = f"{detail}; processes left running: {result.leftover}".lstrip("; ")
            world = results.get(("world", "world"), {})
            devices = ",".join(world.get("devices", []))
        common = {
            **self.base,
            "world_size": n,
            "devices": devices,
            "process_group": p["process_group"],
            "threads_per_rank": self.threads_per_rank,
        }
        trials = []
        for workload in p["workloads"]:
            for seed in p["seeds"]:
                for mode in p["modes"]:
                    got = results.get(("trial", f"{workload}/{mode}/{seed}"))
                    batch = p["per_rank_batches"][workload]
                    row = {
                        **common,
                        "method": "ddp",
                        "workload": workload,
                        "mode": mode,
                        "seed": seed,
                        "global_batch": batch * n,
                        "per_rank_batch": batch,
                        "loss_tolerance": loss_tolerance(mode),
                    }
                    if got is None:
                        row.update(
                            status=status if status != "ok" else "error",
                            status_detail=detail or "rank 0 wrote no result for this trial",
                        )
                    else:
                        row.update(self.trial_timing(got, n, batch, self.threads_per_rank))
                        row.update(
                            status=got["status"],
                            status_detail=got.get("status_detail", ""),
                            final_loss=got.get("final_loss"),
                            test_acc=got.get("test_acc"),
                            amp_dtype=got.get("amp_dtype"),
                            _losses=got.get("losses", []),
                        )
                    trials.append(row)
        collectives = []
        for collective in p["collectives"]:
            for size in p["sizes"]:
                got = results.get(("collective", f"{collective}/{size}"))
                if got is None:
                    got = {
                        "collective": collective,
                        "size_bytes": size,
                        "dtype": "float32",
                        "status": status if status != "ok" else "error",
                        "status_detail": detail or "rank 0 wrote no result for this point",
                    }
                collectives.append(
                    {**common, "scope": "world", **{k: v for k, v in got.items() if k not in ("kind", "key")}}
                )
        # a world across nodes with several ranks each: the same points within a node and across nodes (rank.py
        # split_groups, nccl-tests' NCCL_TESTS_SPLIT); their world_size is the sub-group's
        for (kind, key), got in sorted(results.items()):
            if kind == "collective" and key.split("/")[0] in ("intra_node", "inter_node"):
                collectives.append({**common, **{k: v for k, v in got.items() if k not in ("kind", "key")}})
        return trials, collectives

    def trial_timing(self, got: dict, n: int, per_rank_batch: int, threads: int) -> dict:
        """One trial's numbers from its timed steps (after the warm-up; each the slowest rank's): the median step
        with its distribution-free 95% interval over those steps (within this trial: ``step_stats``); samples/s
        of the global batch, and per rank (over the ``n`` ranks or devices); tokens/s (gpt) or images/s
        (resnet), world and per rank; one rank's MFU where the workload's FLOPs are counted (``rank_mfu``)."""
        timed = list(got.get("step_s", []))[int(got.get("warmup_steps", 0)) :]
        median, low, high = step_stats(timed)
        gb = got.get("global_batch", math.nan)
        sps = gb / median if median > 0 else math.nan
        return {
            "step_median_s": median,
            "step_ci95_low_s": low,
            "step_ci95_high_s": high,
            "samples_per_s": sps,
            "steps": len(got.get("step_s", [])),
            "warmup_steps": got.get("warmup_steps"),
            **throughput_columns(got["workload"], self.amp_cfg, sps, n),
            **self.rank_mfu(got["workload"], got["mode"], per_rank_batch, median, threads),
        }

    def rank_mfu(self, workload: str, mode: str, per_rank_batch: int, median_s: float, threads: int) -> dict:
        """One rank's MFU as the AMP stage computes a trial's (``amp.training_columns``): the FLOPs of one rank's
        step of ``per_rank_batch`` examples (FlopCounterMode on the meta device, ``amp.step_flops``) over the
        median step time (the slowest rank's: every rank waits for it), against the peak of one device of the
        backend for the mode's precision (``Backend.peak_tflops``; on the CPU for ``threads`` cores, a rank's
        share). NaN for workloads without a FLOP count (mlp, transformer)."""
        wl_cfg = {**amp.workload_config(self.amp_cfg, workload), "batch_size": per_rank_batch}
        counted, _ = amp.step_flops(workload, wl_cfg, per_rank_batch, self.backend.torch)
        row = {"mode": mode, "model_tflops_per_s": counted / median_s / 1e12 if median_s > 0 else math.nan}
        cols = amp.training_columns(
            row, self.backend, self.st.info(self.first), self.policy, threads, math.nan, self.amp_cfg, workload
        )
        return {
            "model_flops_per_rank_step": counted,
            "preset": cols["preset"],
            "peak_dtype": cols["peak_dtype"],
            "peak_tflops": cols["peak_tflops"],
            "peak_source": cols["peak_source"],
            "mfu_pct": cols["mfu_pct"],
        }

    # ---- in this process: the single-process reference and nn.DataParallel ------------------------
    def local_trial(self, n: int, workload: str, mode: str, seed: int, devices: list[str] | None = None) -> dict:
        """One trial in this process at global batch ``n`` x ``amp.batch_size``: plain (``devices`` None,
        on the first device) or under ``nn.DataParallel`` over ``devices``."""
        wl_cfg = amp.workload_config(self.amp_cfg, workload)
        cfg = {**wl_cfg, "batch_size": int(wl_cfg["batch_size"]) * n}
        if workload not in self.data:
            self.data[workload] = amp.make_data(
                workload, self.amp_cfg, self.st.config.get("seed", 0), self.backend.torch
            )
        trial = amp.Trial(self.backend.name, self.first, self.base["device_name"], workload, mode, seed)
        if devices:
            replica = amp.Replica(wrap=lambda m: self.backend.data_parallel(m, devices))
        else:  # the reference: a model with BatchNorm normalizes each rank's slice apart, as the ranks do
            replica = amp.Replica(wrap=lambda m: per_slice(m, n, self.backend.torch))
        policy = self.policy
        steps: list = []
        # the reference runs at a rank's thread count: the kernels' summation order (which changes with the
        # threads) is then the ranks', and a model whose loss amplifies rounding fast (resnet at a small batch
        # per rank: 1e-6 apart at step 1, 0.3 by step 8 between 1 and 2 threads) still compares
        torch = self.backend.torch
        threads = self.threads_per_rank if not devices else self.st.threads
        before = torch.get_num_threads()
        torch.set_num_threads(max(1, threads))
        try:
            out = amp.run_trial_safely(
                trial,
                cfg,
                self.data[workload],
                policy,
                backend=self.backend,
                threads=threads,
                steps_out=steps,
                replica=replica,
            )
        finally:
            torch.set_num_threads(before)
        out["losses"] = [s["loss"] for s in steps]
        out["step_s"] = [s["step_s"] for s in steps]
        return out

    def check_losses(self, trials: list[dict]) -> None:
        """``loss_matches_single`` for every finished trial (DDP and DataParallel): its loss curve against a
        single process at the same global batch (computed once per world size, workload, mode, seed)."""
        refs: dict = {}
        for row in trials:
            if row.get("status") != "ok" or "_losses" not in row:
                continue
            key = (row["world_size"], row["workload"], row["mode"], row["seed"])
            if key not in refs:
                refs[key] = self.local_trial(*key)
                self.log(
                    f"scaling reference (one process, global batch {key[0]} x the batch per rank) "
                    f"{key[1]} {key[2]} seed={key[3]}: {refs[key]['status']}"
                )
            ref = refs[key]
            if ref.get("status") != "ok":
                row.update(
                    loss_max_rel_diff=math.nan,
                    loss_matches_single=None,
                    status_detail=(row.get("status_detail") or "") + f" reference run: {ref.get('status_detail')}",
                )
                continue
            diff = loss_max_rel_diff(row["_losses"], ref["losses"])
            if row["world_size"] > 1 and row["mode"] != amp.BASELINE and self.batch_dependent(row["workload"]):
                # recorded, not judged: rounding to 8 bits, amplified by BatchNorm's small-batch statistics
                row.update(
                    loss_max_rel_diff=diff,
                    loss_matches_single=None,
                    status_detail=((row.get("status_detail") or "") + " " + BATCHNORM_AMP_NOTE).strip(),
                )
                continue
            row.update(loss_max_rel_diff=diff, loss_matches_single=loss_matches(diff, row["loss_tolerance"]))

    def batch_dependent(self, workload: str) -> bool:
        """Whether ``workload``'s model has BatchNorm (built on the meta device: no memory, no compute)."""
        torch = self.backend.torch
        with torch.device("meta"):
            return has_batchnorm(amp.WORKLOADS[workload](amp.workload_config(self.amp_cfg, workload), torch), torch)

    def data_parallel_rows(self) -> list[dict]:
        rows = []
        p1 = rank_plan(self.st.config, self.backend, 1, self.threads_per_rank)
        for n, why in self.plan:
            if n < 2:
                continue
            devices = self.devices[:n]
            why = why or self.backend.data_parallel_support(len(devices))
            common = {
                **self.base,
                "method": "dp",
                "world_size": n,
                "devices": "" if why else ",".join(devices),
                "process_group": "",
                "threads_per_rank": self.st.threads,
            }
            for workload in p1["workloads"]:
                batch = p1["per_rank_batches"][workload]
                common = {**common, "per_rank_batch": batch, "global_batch": batch * n}
                for mode in p1["modes"]:
                    if why:
                        rows.append(
                            {
                                **common,
                                "workload": workload,
                                "mode": mode,
                                "seed": math.nan,
                                "loss_tolerance": loss_tolerance(mode),
                                "status": "unsupported",
                                "status_detail": why,
                            }
                        )
                        continue
                    for seed in p1["seeds"]:
                        row = {
                            **common,
                            "workload": workload,
                            "mode": mode,
                            "seed": seed,
                            "loss_tolerance": loss_tolerance(mode),
                        }
                        if mode != amp.BASELINE and p1["amp_unsupported"]:
                            rows.append({**row, "status": "unsupported", "status_detail": p1["amp_unsupported"]})
                            continue
                        out = self.local_trial(n, workload, mode, seed, devices=devices)
                        got = {
                            **out,
                            "workload": workload,
                            "mode": mode,
                            "seed": seed,
                            "global_batch": common["global_batch"],
                            "warmup_steps": amp.workload_config(self.amp_cfg, workload)["warmup_steps"],
                        }
                        row.update(self.trial_timing(got, n, batch, self.st.threads))
                        row.update(
                            status=out["status"],
                            status_detail=out.get("status_detail", ""),
                            final_loss=out.get("final_loss"),
                            test_acc=out.get("test_acc"),
                            amp_dtype=out.get("amp_dtype"),
                            _losses=out["losses"],
                        )
                        self.log(f"scaling DataParallel {n} GPUs {workload} {mode} seed={seed}: {row['status']}")
                        rows.append(row)
        return rows

    # ---- all of it ---------------------------------------------------------------------------------
    def run(self) -> dict:
        trials, collectives = [], []
        self.log(
            f"scaling {self.backend.name}: world sizes {[n for n, _ in self.plan]}, "
            f"{self.threads_per_rank} thread(s) per rank, process group {self.backend.collective}"
        )
        for n, why in self.plan:
            t, c = self.world_rows(n, why)
            trials += t
            collectives += c
        trials += self.data_parallel_rows()
        self.check_losses(trials)
        copies = matrix_rows(
            self.backend,
            self.devices,
            self.cfg["sizes"]["max_bytes"],
            min_run_time_s=self.cfg["min_run_time_s"],
            log=self.log,
        )
        df = pd.DataFrame([{k: v for k, v in r.items() if k != "_losses"} for r in trials])
        summary = summarize(df)
        for k, v in self.base.items():
            summary[k] = v
        return {
            "scaling_trials": df,
            "scaling": summary,
            "collectives": pd.DataFrame(collectives),
            "peer_copy": pd.DataFrame([{**self.base, **r, "device": r.get("src") or self.first} for r in copies]),
        }


def write(out_dir: str, backend: str, tables: dict) -> None:
    for name in TABLES:
        spec = registry.TABLES[name]
        rows = tables[name]
        df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)
        atomic_write_csv(f"{out_dir}/{spec.filename(backend)}", df, columns=spec.all_columns)


def add_arguments(p) -> None:
    add_device_stage_arguments(p)


def cli(args) -> int:
    st = start("scaling", args.run_file, args.backend, args.threads)
    cfg = st.config["scaling"]
    if not cfg["enabled"]:
        tables = placeholder_rows(st, "disabled", DISABLED_DETAIL)
    elif not st.devices:
        tables = placeholder_rows(st, "absent", st.absent_reason)
    elif st.backend.scaling_support():
        tables = placeholder_rows(st, "unsupported", st.backend.scaling_support())
    else:
        tables = ScalingRun(st, args.run_file, args.out_dir).run()
    write(args.out_dir, st.backend.name, tables)
    summary = tables["scaling"]
    summary = summary if isinstance(summary, pd.DataFrame) else pd.DataFrame(summary)
    for r in summary.to_dict("records"):
        print(
            f"scaling {r.get('method', '')} {r.get('workload', '')} {r.get('mode', '')} "
            f"world={r.get('world_size', '')}: {r['status']} efficiency={r.get('scaling_efficiency', math.nan)}"
        )
    return 0
