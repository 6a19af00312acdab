"""The transfer stage: host<->device copy bandwidth, pageable and pinned (``measure.py``)."""

from ...columns import DEVICE, DEVICE_WARMUP, PROVENANCE, WITHIN_RUN_CI, WITHIN_RUN_CI_DESCRIBE, cols
from ...plugin import Compare, Figure, Headline, Hook, Resources, Section, Stage, Table

PLUGIN = Stage(
    "transfer",
    "host<->device copy bandwidth (pageable and pinned)",
    "device",
    entry="accelbench.stages.transfer.measure",
    tables=(
        Table(
            "transfer",
            "transfer_{backend}.csv",
            cols(
                PROVENANCE,
                DEVICE,
                ("direction", "memory", "size_bytes", "median_s", "iqr_s", "repeats", "gbps", "status"),
                DEVICE_WARMUP,
            ),
            extra=("ci95_low_s", "ci95_high_s", *WITHIN_RUN_CI, "blocks", "status_detail"),
            describe=WITHIN_RUN_CI_DESCRIBE,
            numeric=("size_bytes", "median_s", "iqr_s", "repeats", "gbps"),
            identity=("device_name", "direction", "memory", "size_bytes"),
            # the stage always times with one host thread
            compare=Compare(median="median_s", fixed={"threads": "1"}),
            samples="transfer_{backend}_samples.parquet",
            gpu_summary=Hook("accelbench.stages.transfer.gpu_summary:lines"),
            # the fleet check's figure: GB/s of the largest copy, per direction and host memory kind
            headlines=(Headline("transfer_gbps", "gbps", "GB/s", per=("direction", "memory"), at_max="size_bytes"),),
        ),
    ),
    figures=(Figure("transfer", ("transfer",), draw=Hook("accelbench.stages.transfer.figures:fig_transfer")),),
    sections=(Section("transfer", "Transfer", 70, context=Hook("accelbench.stages.transfer.report:context")),),
    gpu_check={"sizes_mb": [64], "min_run_time_s": 0.1},  # the GPU check's section (bench/gpu_config.py)
    fleet_check={"sizes_mb": [64], "min_run_time_s": 0.1},  # one 64 MB copy each way
    config_key="transfer",
    resources=Resources(mem_mb=8000, runtime_min=15),
    method_version=1,
    accelerators_only=True,
)
