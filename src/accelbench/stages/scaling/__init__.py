"""The scaling stage: multi-device DDP/DataParallel training over world sizes, collectives and device-to-device
copies (``measure.py``; one rank: ``rank.py``)."""

from ...columns import DEVICE, PROVENANCE, cols
from ...plugin import Figure, Hook, Resources, Section, Stage, Table

FIGURES = "accelbench.stages.scaling.figures"

# throughput in the workload's items, world and per rank (docs/scaling.md): both tables
THROUGHPUT = (
    "samples_per_s_per_rank",
    "tokens_per_s",
    "tokens_per_s_per_rank",
    "images_per_s",
    "images_per_s_per_rank",
    "mfu_pct",
)
THROUGHPUT_DESCRIBE = {
    "samples_per_s": "samples/s — the world's: global batch (world size x batch per rank) / median step time",
    "samples_per_s_per_rank": "samples/s — samples_per_s / world_size: what one rank (device) trains",
    "tokens_per_s": "tokens/s — gpt: samples_per_s x seq_len (the world's); NaN for the other workloads",
    "tokens_per_s_per_rank": "tokens/s — gpt: tokens_per_s / world_size; NaN otherwise",
    "images_per_s": "images/s — resnet: samples_per_s (the world's); NaN for the other workloads",
    "images_per_s_per_rank": "images/s — resnet: images_per_s / world_size; NaN otherwise",
    "mfu_pct": "% — one rank's model FLOPs utilisation: model_flops_per_rank_step / median step time over one "
    "device's peak for the mode's precision (Backend.peak_tflops; CPU: threads_per_rank cores), as the "
    "AMP stage computes it; gpt and resnet only (NaN where the workload has no FLOP count)",
    "trials": "seeds (trials) that finished, the n of the step-time and efficiency intervals",
}
TRIAL_DESCRIBE = {
    **THROUGHPUT_DESCRIBE,
    "step_median_s": "s — median over the trial's timed steps (after warm-up) of the slowest rank's step time",
    "step_ci95_low_s": "s — distribution-free 95% interval of that median over the trial's steps, low end: it covers "
    "step-to-step variation within this one trial only (descriptive), not between trials",
    "step_ci95_high_s": "s — high end of that interval",
    "model_flops_per_rank_step": "FLOP — one rank's training step (forward, loss, backward) of per_rank_batch "
    "examples, counted by FlopCounterMode (amp.step_flops); NaN for mlp, transformer",
    "preset": "the gpt or resnet preset (amp.gpt.preset, amp.resnet.preset); empty for mlp and transformer",
    "peak_dtype": "the precision whose peak mfu_pct is against: float32 (fp32) or the AMP dtype",
    "peak_tflops": "TFLOP/s — one device's peak for peak_dtype (on the CPU: for threads_per_rank cores)",
    "peak_source": "where peak_tflops comes from",
}
SUMMARY_DESCRIBE = {
    **THROUGHPUT_DESCRIBE,
    "step_median_s": "s — geometric mean over seeds of each seed's median step time (the seed, one trial, is the "
    "unit of replication)",
    "step_ci95_low_s": "s — 95% interval of step_median_s, low end: interval_over = seeds: Student-t on the log "
    "per-seed medians, covering the variance between seeds (trials) of this run, not between "
    "runs; descriptive (1 seed): that trial's interval over its steps",
    "step_ci95_high_s": "s — high end of that interval",
    "scaling_efficiency": "throughput_N / (N x throughput_1), geometric mean over seeds paired with the world-size-1 "
    "DDP trial of the same seed",
    "efficiency_ci95_low": "Student-t 95% interval on the log per-seed efficiencies, low end: the variance between "
    "seeds (never pooled steps); NaN with one seed",
    "efficiency_ci95_high": "high end of that interval",
    "interval_over": "what the step-time interval covers: seeds (>= 2 finished seeds: between-trial variance) or "
    "descriptive (1 seed: its steps only)",
}

PLUGIN = Stage(
    "scaling",
    "multi-device scaling: DDP/DataParallel training over world sizes, collectives, device-to-device copies",
    "device",
    entry="accelbench.stages.scaling.measure",
    tables=(
        Table(
            "scaling_trials",
            "scaling_{backend}_trials.csv",
            cols(
                PROVENANCE,
                DEVICE,
                (
                    "method",
                    "workload",
                    "mode",
                    "world_size",
                    "seed",
                    "devices",
                    "process_group",
                    "threads_per_rank",
                    "global_batch",
                    "samples_per_s",
                    "step_median_s",
                    "step_ci95_low_s",
                    "step_ci95_high_s",
                    "final_loss",
                    "test_acc",
                    "loss_max_rel_diff",
                    "loss_tolerance",
                    "loss_matches_single",
                    "status",
                ),
            ),
            extra=(
                "per_rank_batch",
                "amp_dtype",
                "steps",
                "warmup_steps",
                "status_detail",
                *THROUGHPUT,
                "model_flops_per_rank_step",
                "preset",
                "peak_dtype",
                "peak_tflops",
                "peak_source",
            ),
            numeric=(
                "world_size",
                "seed",
                "threads_per_rank",
                "global_batch",
                "samples_per_s",
                "step_median_s",
                "step_ci95_low_s",
                "step_ci95_high_s",
                "final_loss",
                "test_acc",
                "loss_max_rel_diff",
                "loss_tolerance",
            ),
            describe=TRIAL_DESCRIBE,
            since="scaling",
        ),
        Table(
            "scaling",
            "scaling_{backend}.csv",
            cols(
                PROVENANCE,
                DEVICE,
                (
                    "method",
                    "workload",
                    "mode",
                    "world_size",
                    "devices",
                    "process_group",
                    "threads_per_rank",
                    "trials",
                    "samples_per_s",
                    "step_median_s",
                    "step_ci95_low_s",
                    "step_ci95_high_s",
                    "scaling_efficiency",
                    "efficiency_ci95_low",
                    "efficiency_ci95_high",
                    "loss_matches_single",
                    "status",
                ),
            ),
            extra=(
                "global_batch",
                "loss_max_rel_diff",
                "loss_tolerance",
                "status_detail",
                "interval_over",
                *THROUGHPUT,
            ),
            numeric=(
                "world_size",
                "threads_per_rank",
                "trials",
                "samples_per_s",
                "step_median_s",
                "step_ci95_low_s",
                "step_ci95_high_s",
                "scaling_efficiency",
                "efficiency_ci95_low",
                "efficiency_ci95_high",
            ),
            describe=SUMMARY_DESCRIBE,
            since="scaling",
        ),
        Table(
            "collectives",
            "collectives_{backend}.csv",
            cols(
                PROVENANCE,
                DEVICE,
                (
                    "collective",
                    "world_size",
                    "devices",
                    "process_group",
                    "size_bytes",
                    "dtype",
                    "median_s",
                    "ci95_low_s",
                    "ci95_high_s",
                    "algbw_gbps",
                    "busbw_gbps",
                    "busbw_factor",
                    "repeats",
                    "status",
                ),
            ),
            # scope: world, or (a world across nodes) intra_node / inter_node, nccl-tests' NCCL_TESTS_SPLIT
            extra=("blocks", "calls_per_block", "threads_per_rank", "status_detail", "scope"),
            numeric=(
                "world_size",
                "size_bytes",
                "median_s",
                "ci95_low_s",
                "ci95_high_s",
                "algbw_gbps",
                "busbw_gbps",
                "busbw_factor",
                "repeats",
            ),
            since="scaling",
        ),
        Table(
            "peer_copy",
            "peer_copy_{backend}.csv",
            cols(PROVENANCE, DEVICE, ("src", "dst", "peer", "size_bytes", "median_s", "gbps", "status")),
            extra=("ci95_low_s", "ci95_high_s", "repeats", "status_detail"),
            numeric=("size_bytes", "median_s", "gbps"),
            since="scaling",
        ),
    ),
    figures=(
        Figure("scaling_efficiency", ("scaling",), draw=Hook(f"{FIGURES}:fig_scaling_efficiency"), category="Scaling"),
        Figure("collective_busbw", ("collectives",), draw=Hook(f"{FIGURES}:fig_collective_busbw"), category="Scaling"),
        Figure("peer_copy", ("peer_copy",), draw=Hook(f"{FIGURES}:fig_peer_copy"), category="Scaling"),
    ),
    sections=(Section("scaling", "Scaling", 90, context=Hook("accelbench.stages.scaling.report:context")),),
    config_check=Hook("accelbench.stages.scaling.config_check:check"),
    # the GPU check (one GPU): DDP at world size 1 over NCCL (DataParallel and peer copies say unsupported)
    gpu_check={
        "enabled": True,
        "world_sizes": [],
        "workloads": ["mlp"],
        "seeds": [0, 1],
        "sizes": {"min_bytes": 1024, "max_bytes": 268435456, "factor": 16},
        "timeout_s": 60,
    },
    config_key="scaling",
    resources=Resources(mem_mb=16000, runtime_min=120, whole_node=True),
    method_version=1,
)
