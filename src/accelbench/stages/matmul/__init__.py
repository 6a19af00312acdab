"""The matmul stage: a matrix-multiplication sweep over sizes x dtypes (and named shapes) on every device of a
backend, with a soak and the device's telemetry (``measure.py``, ``soak.py``)."""

from ...columns import (
    DEVICE,
    DEVICE_WARMUP,
    FAILURES,
    PROVENANCE,
    TELEMETRY,
    TELEMETRY_EXTRA,
    TELEMETRY_NUMERIC,
    TELEMETRY_SERIES,
    TELEMETRY_SERIES_NUMERIC,
    THROTTLE,
    WITHIN_RUN_CI,
    WITHIN_RUN_CI_DESCRIBE,
    cols,
)
from ...plugin import (
    Compare,
    Figure,
    Headline,
    Hook,
    Resources,
    Roofline,
    Section,
    Stage,
    Summary,
    Sweep,
    Table,
    Windows,
)

STATUSES = ("ok", "unstable", "invalid", "wrong_result", "skipped_budget", *FAILURES)
FIGURES = "accelbench.stages.matmul.figures"

PLUGIN = Stage(
    "matmul",
    "matrix-multiplication sweep over sizes x dtypes on every device of a backend",
    "device",
    entry="accelbench.stages.matmul.measure",
    tables=(
        Table(
            "matmul",
            "matmul_{backend}.csv",
            cols(
                PROVENANCE,
                DEVICE,
                (
                    "dtype",
                    "shape_name",
                    "m",
                    "n",
                    "k",
                    "flops",
                    "threads",
                    "allow_tf32",
                    "median_s",
                    "iqr_s",
                    "ci95_low_s",
                    "ci95_high_s",
                    *WITHIN_RUN_CI,
                    "repeats",
                    "tflops",
                    "peak_tflops",
                    "peak_source",
                    "pct_of_peak",
                    "rel_error",
                    "rel_error_max",
                    "status",
                    "flags",
                    "status_detail",
                ),
                DEVICE_WARMUP,
                TELEMETRY,
                ("gflop_per_j",),
                THROTTLE,
                ("clock_ramp",),
            ),
            extra=("blocks", "input_sets", "predicted_s", "torch_dtype", "fp8_fast_accum") + TELEMETRY_EXTRA,
            numeric=(
                "m",
                "n",
                "k",
                "flops",
                "threads",
                "median_s",
                "iqr_s",
                "ci95_low_s",
                "ci95_high_s",
                "repeats",
                "tflops",
                "peak_tflops",
                "pct_of_peak",
                "rel_error",
                "rel_error_max",
                "gflop_per_j",
                "lag1_autocorr",
            )
            + TELEMETRY_NUMERIC,
            statuses=STATUSES,
            describe=WITHIN_RUN_CI_DESCRIBE,
            identity=("device_name", "dtype", "shape_name", "m", "n", "k", "allow_tf32"),
            # a square point leaves out its empty shape_name and its m and k (its n), so square points keep the
            # keys they had before (m, n, k) shapes existed and old runs still match new ones
            identity_fill={"shape_name": None, "m": "n", "k": "n"},
            compare=Compare(
                median="median_s", ci=("ci95_low_s", "ci95_high_s"), sweep=Sweep("n", "matrix size n", panel="dtype")
            ),
            samples="matmul_{backend}_samples.parquet",
            added_defaults={"shape_name": "", "gflop_per_j": None, "clock_ramp": None},
            # a matmul file from before shapes holds square points only, so its m and k are its n
            added_from={"m": "n", "k": "n"},
            check=Hook("accelbench.stages.matmul.checks:check_matmul_points"),
            reports_threads=True,
            roofline=Roofline(
                points=Hook("accelbench.stages.matmul.roofline:points"),
                compute_roof=True,
                markers={"square": ("o", "square sweep n×n×n"), "shape": ("s", "matmul.shapes")},
            ),
            windows=Windows("matmul", "matmul point", "matmul points", "#4c72b0", "{dtype} n={n}"),
            gpu_summary=Hook("accelbench.stages.matmul.gpu_summary:lines"),
            # the fleet check's figure: each dtype's best TFLOP/s over the sizes
            headlines=(Headline("matmul_tflops", "tflops", "TFLOP/s", per=("dtype",)),),
        ),
        Table(
            "matmul_soak",
            "matmul_soak_{backend}.csv",
            cols(
                PROVENANCE,
                DEVICE,
                ("dtype", "n", "interval", "t_s", "interval_s", "calls", "tflops"),
                TELEMETRY,
                ("gflop_per_j",),
                THROTTLE,
                ("clock_settled", "status"),
            ),
            extra=("status_detail",) + TELEMETRY_EXTRA,
            numeric=("n", "interval", "t_s", "interval_s", "calls", "tflops", "gflop_per_j") + TELEMETRY_NUMERIC,
            since="telemetry",
            added_defaults={"gflop_per_j": None},
            windows=Windows("soak", "soak interval", "soak intervals", "#8172b3", "soak {dtype} n={n}", soak=True),
        ),
        Table(
            "telemetry_matmul",
            "telemetry_matmul_{backend}.csv",
            cols(PROVENANCE, DEVICE, TELEMETRY_SERIES),
            extra=("status_detail",),
            numeric=TELEMETRY_SERIES_NUMERIC,
            since="telemetry",
            telemetry_series=True,
        ),
    ),
    figures=(
        Figure("matmul_tflops", ("matmul",), draw=Hook(f"{FIGURES}:fig_matmul_tflops")),
        Figure("matmul_pct_of_peak", ("matmul",), draw=Hook(f"{FIGURES}:fig_matmul_pct_of_peak")),
        Figure("speedup", ("matmul",), draw=Hook(f"{FIGURES}:fig_speedup")),
        Figure("matmul_soak", ("matmul_soak",), draw=Hook(f"{FIGURES}:fig_matmul_soak")),
    ),
    sections=(
        Section("matmul", "Matmul", 10),
        Section(
            "shapes",
            "Shapes",
            20,
            context=Hook("accelbench.stages.matmul.report:shapes_context"),
            template="shapes.html.j2",
        ),
        Section(
            "points",
            "All points",
            110,
            context=Hook("accelbench.stages.matmul.report:points_context"),
            template="points.html.j2",
        ),
    ),
    config_check=Hook("accelbench.stages.matmul.config_check:check"),
    references=Hook("accelbench.stages.matmul.references:run_lines"),  # compare --against references
    gpu_check={  # the GPU check's section (bench/gpu_config.py: one GPU, the whole pipeline in about four minutes)
        "sizes": [4096, 8192],
        "dtypes": ["tf32", "bfloat16", "float8_e4m3fn"],
        "min_run_time_s": 0.2,
        "point_budget_s": 10.0,
        "soak_s": 4,  # telemetry: hold bf16 8192^3 for 4 s, boost vs sustained clock
        "soak_interval_s": 1.0,
        "shapes": [  # a transformer layer's GEMMs (8192 tokens, d_model 4096, MLP 16384)
            {"name": "mlp_up", "m": 8192, "n": 16384, "k": 4096},
        ],
        # where Hopper's best shapes lie (mamf-finder's H100 SXM best: 2048 x 2048 x 13312)
        "search": {
            "enabled": True,
            "dtypes": ["bfloat16"],
            "m": {"min": 1024, "max": 8192, "step": 512},
            "n": {"min": 1024, "max": 8192, "step": 512},
            "k": {"min": 1024, "max": 16384, "step": 1024},
            "budget_s": 10.0,
        },  # the 60 s search is bench/search_quality.py's
    },
    # the fleet node check (accelbench fleet-node): two square sizes, two dtypes, no shapes, search or soak;
    # seconds on a CPU node (a GPU fleet sets fleet.check.matmul.sizes to e.g. [8192])
    fleet_check={
        "sizes": [128, 256],
        "dtypes": ["float32", "bfloat16"],
        "min_run_time_s": 0.1,
        "point_budget_s": 2.0,
        "fp8": False,
        "rotate_inputs": False,
        "shapes": [],
        "soak_s": 0,
        "search": {"enabled": False},
    },
    config_key="matmul",
    peak_overrides=True,
    resources=Resources(mem_mb=16000, runtime_min=60),
    method_version=2,
    checkpoint=True,
    summary=Summary(
        context=Hook("accelbench.stages.matmul.summary:context"),
        headline=Hook("accelbench.stages.matmul.summary:headline"),
        order=10,
    ),
)
