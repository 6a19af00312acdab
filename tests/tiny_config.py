"""A tiny but complete config for tests that run the real pipeline (seconds per stage on 2 cores)."""

TINY = {
    "run": "tiny",
    "backends": ["cpu"],
    "cpu_threads": 1,
    "seed": 0,
    "warmup": {"n": 64, "max_iters": 30, "window": 3, "rel_tol": 0.5},
    "matmul": {
        "sizes": [64, 128],
        "dtypes": ["float32", "bfloat16"],
        "min_run_time_s": 0.05,
        "point_budget_s": 2.0,
        # fp8 off: torch's CPU fp8 product is emulated (about 10 s a point here, a third of a tiny run's matmul
        # job); tests/test_pipeline.py switches it on, so the whole DAG still measures it once
        "fp8": False,
        "shapes": [{"m": 64, "n": 96, "k": 32, "name": "qkv"}],
        # a 2 x 2 x 2 grid: coarse grid, compass search and confirmation all run, in seconds
        "search": {
            "enabled": True,
            "dtypes": ["float32"],
            "m": {"min": 32, "max": 64, "step": 32},
            "n": {"min": 32, "max": 64, "step": 32},
            "k": {"min": 32, "max": 64, "step": 32},
            "budget_s": 15.0,
            "min_run_time_s": 0.01,
            "coarse_points": 2,
            "starts": 1,
            "confirm": 2,
        },
    },
    "membw": {"min_kb": 64, "max_mb": 1, "min_run_time_s": 0.02},
    "transfer": {"sizes_mb": [1]},
    "amp": {
        "workloads": ["mlp", "transformer"],
        "seeds": [0, 1],
        "steps": 12,
        "warmup_steps": 2,
        "batch_size": 32,
        "data": {"n_train": 256, "n_test": 128, "n_features": 16, "n_classes": 4},
        "mlp": {"hidden": 32, "layers": 2},
        "transformer": {"d_model": 16, "n_heads": 2, "ff": 32, "seq_len": 4, "layers": 1},
    },
}

# The scaling stage switched on (it is off by default), sized for 2 cores: gloo world sizes 1 and 2 (one
# thread per rank; needs cpu_threads >= 2), the mlp workload, two seeds for an efficiency interval, the four
# collectives at 1 KiB, 32 KiB and 1 MiB. tests/test_pipeline.py runs the whole DAG with it.
SCALING_ON = {
    "enabled": True,
    "world_sizes": [1, 2],
    "workloads": ["mlp"],
    "seeds": [0, 1],
    "collectives": ["all_reduce", "all_gather", "reduce_scatter", "broadcast"],
    "sizes": {"min_bytes": 1024, "max_bytes": 1048576, "factor": 32},
    "timeout_s": 300,
    "min_run_time_s": 0.02,
}

# Smaller still, for tests that make several whole runs (tests/test_ab.py: four runs of an interleaved A/B): float32
# matmul at two sizes without the search, one AMP workload and seed, the host attention sweep cut to one point
# per kernel. Every stage still runs (each job's floor is its process start, about 3 s here).
AB_TINY = {
    **TINY,
    "matmul": {"sizes": [64, 128], "dtypes": ["float32"], "fp8": False, "min_run_time_s": 0.05, "point_budget_s": 2.0},
    "amp": {**TINY["amp"], "workloads": ["mlp"], "seeds": [0]},
    "attention": {
        "host": {
            "kernels": ["math"],
            "dtypes": ["float32"],
            "fp8": False,
            "modes": ["forward"],
            "batch": 1,
            "heads": 2,
            "seq_lens": [64],
            "head_dims": [64],
            "causal": [False],
            "min_run_time_s": 0.02,
        }
    },
}

# The smallest whole config, for tests that check where each stage runs (in an image, as a cluster job), not what it
# measures: AB_TINY's sweeps with float32 matmul at one size, the search kept on (switched off it writes no row).
PLACEMENT_TINY = {
    **AB_TINY,
    "matmul": {**AB_TINY["matmul"], "sizes": [64], "search": TINY["matmul"]["search"]},
}
