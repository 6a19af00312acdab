"""The AMP stage: AMP vs FP32 training trials and their verdict (``measure.py``, ``stats.py``)."""

from ...columns import (DEVICE, DEVICE_WARMUP, PROVENANCE, TELEMETRY, TELEMETRY_EXTRA, TELEMETRY_NUMERIC,
                        TELEMETRY_SERIES, TELEMETRY_SERIES_NUMERIC, THROTTLE, cols)
from ...plugin import Compare, Figure, Hook, Resources, Roofline, Section, Stage, Summary, Table, Windows

FIGURES = "accelbench.stages.amp.figures"
CHECK = Hook("accelbench.stages.amp.checks:check_amp_points")

PLUGIN = Stage(
    "amp", "AMP vs FP32 training trials", "device", entry="accelbench.stages.amp.measure",
    tables=(
        Table("amp_steps", "amp_{backend}_steps.csv",
              cols(PROVENANCE, DEVICE, ("workload", "mode", "seed", "step", "loss", "step_s", "scale", "skipped",
                                        "status"), DEVICE_WARMUP),
              extra=("warmup", "status_detail"),
              numeric=("seed", "step", "loss", "step_s", "scale")),
        Table("amp_trials", "amp_{backend}_trials.csv",
              cols(PROVENANCE, DEVICE, (
                  "workload", "mode", "seed", "amp_dtype", "step_median_s", "samples_per_s", "peak_mem_bytes",
                  "mem_kind", "final_loss", "test_acc", "skipped_steps", "final_scale", "threads", "status"),
                  DEVICE_WARMUP, TELEMETRY, ("samples_per_j",), THROTTLE),
              extra=("allow_tf32", "steps", "warmup_steps", "batch_size", "step_iqr_s", "first_loss", "test_loss",
                     "majority_acc", "status_detail") + TELEMETRY_EXTRA,
              numeric=("seed", "step_median_s", "samples_per_s", "peak_mem_bytes", "final_loss", "test_acc",
                       "skipped_steps", "final_scale", "threads", "samples_per_j") + TELEMETRY_NUMERIC,
              identity=("device_name", "workload", "mode", "seed"), compare=Compare(median="step_median_s"),
              samples="amp_{backend}_samples.parquet", added_defaults={"samples_per_j": None}, check=CHECK,
              roofline=Roofline(points=Hook("accelbench.stages.amp.roofline:points"), needs=("runs",),
                                markers={"amp": ("^", "AMP / FP32 training step (GEMMs)")}),
              windows=Windows("amp", "AMP trial", "AMP trials", "#55a868", "{workload} {mode} seed {seed}")),
        Table("amp_summary", "amp_{backend}_summary.csv",
              cols(PROVENANCE, DEVICE, (
                  "workload", "mode", "baseline", "trials", "step_s_mean", "speedup", "speedup_ci95_low",
                  "speedup_ci95_high", "test_acc_mean", "acc_diff", "acc_diff_ci95_low", "acc_diff_ci95_high",
                  "faster", "accuracy_parity", "verdict", "note")),
              extra=("amp_dtype", "baseline_step_s_mean", "baseline_test_acc_mean", "accuracy_tolerance", "status"),
              numeric=("trials", "step_s_mean", "speedup", "speedup_ci95_low", "speedup_ci95_high", "test_acc_mean",
                       "acc_diff", "acc_diff_ci95_low", "acc_diff_ci95_high"), check=CHECK),
        Table("telemetry_amp", "telemetry_amp_{backend}.csv",
              cols(PROVENANCE, DEVICE, TELEMETRY_SERIES), extra=("status_detail",), numeric=TELEMETRY_SERIES_NUMERIC,
              since="telemetry", telemetry_series=True),
    ),
    figures=(
        Figure("amp_step_time", ("amp_trials", "amp_summary"), draw=Hook(f"{FIGURES}:fig_amp_step_time")),
        Figure("amp_loss", ("amp_steps",), draw=Hook(f"{FIGURES}:fig_amp_loss")),
    ),
    sections=(Section("amp", "AMP", 80, context=Hook("accelbench.stages.amp.report:context")),),
    config_check=Hook("accelbench.stages.amp.config_check:check"),
    # the GPU check: 2 seeds, the fewest that give the speedup an interval; 40 steps of which 5 untimed
    gpu_check={"workloads": ["mlp", "transformer"], "seeds": [0, 1], "steps": 20, "warmup_steps": 3,
               "batch_size": 1024, "mlp": {"hidden": 4096, "layers": 4},
               "transformer": {"d_model": 512, "n_heads": 8, "ff": 2048, "seq_len": 128, "layers": 2}},
    config_key="amp", resources=Resources(mem_mb=8000, runtime_min=60), method_version=2, checkpoint=True,
    summary=Summary(context=Hook("accelbench.stages.amp.summary:context"),
                    headline=Hook("accelbench.stages.amp.summary:headline"), order=40),
)
