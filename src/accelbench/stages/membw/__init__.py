"""The membw stage: device-local memory bandwidth (copy, triad) across sizes, and the launch-latency floor
(``measure.py``)."""

from ...columns import DEVICE, DEVICE_WARMUP, FAILURES, PROVENANCE, WITHIN_RUN_CI, WITHIN_RUN_CI_DESCRIBE, cols
from ...plugin import Compare, Figure, Headline, Hook, Resources, Roofline, Section, Stage, Table

STATUSES = ("ok", "unstable", *FAILURES)
# the kernels (column ``kernel``): STREAM's copy and triad across sizes, and the launch-latency floor
KERNELS = ("copy", "triad")
LAUNCH = "launch"

PLUGIN = Stage(
    "membw",
    "device-local memory bandwidth (copy, triad) across sizes, and the launch-latency floor",
    "device",
    entry="accelbench.stages.membw.measure",
    tables=(
        Table(
            "membw",
            "membw_{backend}.csv",
            cols(
                PROVENANCE,
                DEVICE,
                (
                    "kernel",
                    "size_bytes",
                    "bytes_moved",
                    "threads",
                    "median_s",
                    "iqr_s",
                    "ci95_low_s",
                    "ci95_high_s",
                    *WITHIN_RUN_CI,
                    "repeats",
                    "gbps",
                    "gbps_ci95_low",
                    "gbps_ci95_high",
                    "peak_gbps",
                    "peak_source",
                    "pct_of_peak",
                    "cache_bytes",
                    "status",
                ),
                DEVICE_WARMUP,
            ),
            extra=("blocks", "status_detail"),
            numeric=(
                "size_bytes",
                "bytes_moved",
                "threads",
                "median_s",
                "iqr_s",
                "ci95_low_s",
                "ci95_high_s",
                "repeats",
                "gbps",
                "gbps_ci95_low",
                "gbps_ci95_high",
                "peak_gbps",
                "pct_of_peak",
                "cache_bytes",
                "lag1_autocorr",
            ),
            statuses=STATUSES,
            describe=WITHIN_RUN_CI_DESCRIBE,
            identity=("device_name", "kernel", "size_bytes"),
            compare=Compare(median="median_s", ci=("ci95_low_s", "ci95_high_s")),
            samples="membw_{backend}_samples.parquet",
            check=Hook("accelbench.stages.membw.checks:check_membw_points"),
            roofline=Roofline(memory_roof=Hook("accelbench.stages.membw.roofline:device_roofs")),
            # the fleet check's figure: copy and triad GB/s at the largest array (memory, not a cache)
            headlines=(
                Headline("membw_gbps", "gbps", "GB/s", per=("kernel",), where={"kernel": KERNELS}, at_max="size_bytes"),
            ),
        ),
    ),
    figures=(Figure("membw", ("membw",), draw=Hook("accelbench.stages.membw.figures:fig_membw")),),
    sections=(Section("membw", "Memory", 40, context=Hook("accelbench.stages.membw.report:context")),),
    config_check=Hook("accelbench.stages.membw.config_check:check"),
    gpu_check={
        "max_mb": 512,
        "llc_factor": 64,
    },  # the GPU check: up to 512 MiB per array, far past the 60 MB L2, in HBM
    fleet_check={"min_kb": 64, "max_mb": 16, "size_factor": 16, "min_run_time_s": 0.05},  # 64 KiB, 1 and 16 MiB
    config_key="membw",
    resources=Resources(mem_mb=8000, runtime_min=15),
    method_version=1,
    since_config_key="membw",
)
