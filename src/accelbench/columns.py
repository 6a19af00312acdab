"""The documented columns of every CSV the pipeline writes (README, "Where results land").

One definition used by the stages that write the files, the aggregation that checks them, and
the tests. A file missing any of its documented columns is reported as corrupt by ``aggregate``.
"""

PROVENANCE = [
    "run_id", "host", "accelbench_version", "git_commit", "torch_version", "cuda_version",
    "hip_version", "container_image", "config_hash",
]
DEVICE = ["backend", "device", "device_name"]

MATMUL = PROVENANCE + DEVICE + [
    "dtype", "n", "flops", "threads", "allow_tf32", "median_s", "iqr_s", "ci95_low_s", "ci95_high_s",
    "repeats", "tflops", "peak_tflops", "peak_source", "pct_of_peak", "rel_error", "rel_error_max",
    "status", "flags", "status_detail",
]
WARMUP = PROVENANCE + DEVICE + ["iter", "iter_s", "cold_s", "warm_s", "stable_at_iter", "threads", "status"]
TRANSFER = PROVENANCE + DEVICE + [
    "direction", "memory", "size_bytes", "median_s", "iqr_s", "repeats", "gbps", "status",
]
AMP_STEPS = PROVENANCE + DEVICE + ["workload", "mode", "seed", "step", "loss", "step_s", "scale", "skipped", "status"]
AMP_TRIALS = PROVENANCE + DEVICE + [
    "workload", "mode", "seed", "amp_dtype", "step_median_s", "samples_per_s", "peak_mem_bytes", "mem_kind",
    "final_loss", "test_acc", "skipped_steps", "final_scale", "threads", "status",
]
AMP_SUMMARY = PROVENANCE + DEVICE + [
    "workload", "mode", "baseline", "trials", "step_s_mean", "speedup", "speedup_ci95_low", "speedup_ci95_high",
    "test_acc_mean", "acc_diff", "acc_diff_ci95_low", "acc_diff_ci95_high", "faster", "accuracy_parity",
    "verdict", "note",
]

# file stem pattern -> documented columns
BY_KIND = {
    "matmul": MATMUL,
    "warmup": WARMUP,
    "transfer": TRANSFER,
    "amp_steps": AMP_STEPS,
    "amp_trials": AMP_TRIALS,
    "amp_summary": AMP_SUMMARY,
}

MATMUL_STATUSES = (
    "ok", "unstable", "invalid", "wrong_result", "skipped_budget", "oom", "unsupported", "error", "absent",
)
