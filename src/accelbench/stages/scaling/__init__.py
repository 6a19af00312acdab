"""The scaling stage: multi-device DDP/DataParallel training over world sizes, collectives and device-to-device
copies (``measure.py``; one rank: ``rank.py``)."""

from ...columns import DEVICE, PROVENANCE, cols
from ...plugin import Figure, Hook, Resources, Section, Stage, Table

FIGURES = "accelbench.stages.scaling.figures"

PLUGIN = Stage(
    "scaling",
    "multi-device scaling: DDP/DataParallel training over world sizes, collectives, device-to-device copies",
    "device", entry="accelbench.stages.scaling.measure",
    tables=(
        Table("scaling_trials", "scaling_{backend}_trials.csv",
              cols(PROVENANCE, DEVICE, (
                  "method", "workload", "mode", "world_size", "seed", "devices", "process_group", "threads_per_rank",
                  "global_batch", "samples_per_s", "step_median_s", "step_ci95_low_s", "step_ci95_high_s",
                  "final_loss", "test_acc", "loss_max_rel_diff", "loss_tolerance", "loss_matches_single", "status")),
              extra=("per_rank_batch", "amp_dtype", "steps", "warmup_steps", "status_detail"),
              numeric=("world_size", "seed", "threads_per_rank", "global_batch", "samples_per_s", "step_median_s",
                       "step_ci95_low_s", "step_ci95_high_s", "final_loss", "test_acc", "loss_max_rel_diff",
                       "loss_tolerance"), since="scaling"),
        Table("scaling", "scaling_{backend}.csv",
              cols(PROVENANCE, DEVICE, (
                  "method", "workload", "mode", "world_size", "devices", "process_group", "threads_per_rank",
                  "trials", "samples_per_s", "step_median_s", "step_ci95_low_s", "step_ci95_high_s",
                  "scaling_efficiency", "efficiency_ci95_low", "efficiency_ci95_high", "loss_matches_single",
                  "status")),
              extra=("global_batch", "loss_max_rel_diff", "loss_tolerance", "status_detail"),
              numeric=("world_size", "threads_per_rank", "trials", "samples_per_s", "step_median_s",
                       "step_ci95_low_s", "step_ci95_high_s", "scaling_efficiency", "efficiency_ci95_low",
                       "efficiency_ci95_high"),
              since="scaling"),
        Table("collectives", "collectives_{backend}.csv",
              cols(PROVENANCE, DEVICE, (
                  "collective", "world_size", "devices", "process_group", "size_bytes", "dtype", "median_s",
                  "ci95_low_s", "ci95_high_s", "algbw_gbps", "busbw_gbps", "busbw_factor", "repeats", "status")),
              # scope: world, or (a world across nodes) intra_node / inter_node, nccl-tests' NCCL_TESTS_SPLIT
              extra=("blocks", "calls_per_block", "threads_per_rank", "status_detail", "scope"),
              numeric=("world_size", "size_bytes", "median_s", "ci95_low_s", "ci95_high_s", "algbw_gbps",
                       "busbw_gbps", "busbw_factor", "repeats"), since="scaling"),
        Table("peer_copy", "peer_copy_{backend}.csv",
              cols(PROVENANCE, DEVICE, ("src", "dst", "peer", "size_bytes", "median_s", "gbps", "status")),
              extra=("ci95_low_s", "ci95_high_s", "repeats", "status_detail"),
              numeric=("size_bytes", "median_s", "gbps"), since="scaling"),
    ),
    figures=(
        Figure("scaling_efficiency", ("scaling",), draw=Hook(f"{FIGURES}:fig_scaling_efficiency"), category="Scaling"),
        Figure("collective_busbw", ("collectives",), draw=Hook(f"{FIGURES}:fig_collective_busbw"), category="Scaling"),
        Figure("peer_copy", ("peer_copy",), draw=Hook(f"{FIGURES}:fig_peer_copy"), category="Scaling"),
    ),
    sections=(Section("scaling", "Scaling", 90, context=Hook("accelbench.stages.scaling.report:context")),),
    config_check=Hook("accelbench.stages.scaling.config_check:check"),
    # the GPU check (one GPU): DDP at world size 1 over NCCL (DataParallel and peer copies say unsupported)
    gpu_check={"enabled": True, "world_sizes": [], "workloads": ["mlp"], "seeds": [0, 1],
               "sizes": {"min_bytes": 1024, "max_bytes": 268435456, "factor": 16}, "timeout_s": 60},
    config_key="scaling", resources=Resources(mem_mb=16000, runtime_min=120, whole_node=True), method_version=1,
)
