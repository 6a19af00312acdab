"""The warm-up stage: cold vs warm, a fixed workload repeated until its time is stable (``measure.py``)."""

from ...columns import DEVICE, PROVENANCE, cols
from ...plugin import Compare, Figure, Headline, Hook, Resources, Section, Stage, Table

PLUGIN = Stage(
    "warmup",
    "cold vs warm: repeat a fixed workload until its time is stable",
    "device",
    entry="accelbench.stages.warmup.measure",
    tables=(
        Table(
            "warmup",
            "warmup_{backend}.csv",
            cols(PROVENANCE, DEVICE, ("iter", "iter_s", "cold_s", "warm_s", "stable_at_iter", "threads", "status")),
            extra=("n", "status_detail"),
            numeric=("iter", "iter_s", "cold_s", "warm_s", "stable_at_iter", "threads"),
            # one point per device: its last (warm) call
            identity=("device_name", "n"),
            compare=Compare(median="warm_s", last_of="iter"),
            samples="warmup_{backend}_samples.parquet",
            reports_threads=True,
            # the fleet check's figure: the warm call's time (lower is better)
            headlines=(Headline("warmup_warm_s", "warm_s", "s", higher_is_better=False),),
        ),
    ),
    figures=(Figure("warmup", ("warmup",), draw=Hook("accelbench.stages.warmup.figures:fig_warmup")),),
    sections=(Section("warmup", "Warm-up", 60, context=Hook("accelbench.stages.warmup.report:context")),),
    config_check=Hook("accelbench.stages.warmup.config_check:check"),
    fleet_check={"n": 128, "max_iters": 60, "window": 3, "rel_tol": 0.2},  # a 128^3 workload, stable in seconds
    config_key="warmup",
    warms_devices=True,
    resources=Resources(mem_mb=4000, runtime_min=15),
    method_version=1,
)
