"""The matmul-search stage: search (m, n, k) for the highest matmul TFLOP/s within a time budget (``measure.py``;
off by default: config matmul.search)."""

from ...columns import DEVICE, DEVICE_WARMUP, PROVENANCE, WITHIN_RUN_CI, WITHIN_RUN_CI_DESCRIBE, cols
from ...plugin import Hook, Resources, Roofline, Section, Stage, Summary, Table
from ..matmul import STATUSES

PLUGIN = Stage(
    "matmul-search",
    "search (m, n, k) for the highest matmul TFLOP/s within a time budget (matmul.search; off by default)", "device",
    entry="accelbench.stages.matmul_search.measure",
    tables=(
        Table("matmul_search", "matmul_search_{backend}.csv",
              cols(PROVENANCE, DEVICE, (
                  "dtype", "m", "n", "k", "flops", "phase", "evaluation", "threads", "median_s", "iqr_s",
                  "ci95_low_s", "ci95_high_s", *WITHIN_RUN_CI, "repeats", "tflops", "tflops_ci95_low",
                  "tflops_ci95_high", "peak_tflops", "pct_of_peak", "rel_error", "status", "best", "grid_points",
                  "evaluated_shapes",
                  "search_s", "budget_s", "stop_reason", "status_detail"), DEVICE_WARMUP),
              extra=("method", "min_run_time_s", "allow_tf32", "blocks", "input_sets", "predicted_s", "flags",
                     "peak_source", "rel_error_max"),
              numeric=("m", "n", "k", "flops", "evaluation", "threads", "median_s", "iqr_s", "ci95_low_s",
                       "ci95_high_s", "repeats", "tflops", "tflops_ci95_low", "tflops_ci95_high", "peak_tflops",
                       "pct_of_peak", "rel_error", "grid_points", "evaluated_shapes", "search_s", "budget_s",
                       "lag1_autocorr"), describe=WITHIN_RUN_CI_DESCRIBE,
              statuses=STATUSES, check=Hook("accelbench.stages.matmul_search.checks:check_search_points"),
              roofline=Roofline(points=Hook("accelbench.stages.matmul_search.roofline:points"), compute_roof=True,
                                markers={"search": ("*", "search's best shape")})),
    ),
    sections=(Section("search", "Search", 30, context=Hook("accelbench.stages.matmul_search.report:context")),),
    resources=Resources(mem_mb=16000, runtime_min=60), method_version=1, checkpoint=True,
    since_config_key="matmul.search",
    summary=Summary(context=Hook("accelbench.stages.matmul_search.summary:context"),
                    headline=Hook("accelbench.stages.matmul_search.summary:headline"), order=20),
)
