"""The AMP stage: AMP vs FP32 training trials and their verdict (``measure.py``, ``stats.py``)."""

from ...columns import (
    DEVICE,
    DEVICE_WARMUP,
    PROVENANCE,
    TELEMETRY,
    TELEMETRY_EXTRA,
    TELEMETRY_NUMERIC,
    TELEMETRY_SERIES,
    TELEMETRY_SERIES_NUMERIC,
    THROTTLE,
    cols,
)
from ...plugin import (
    Compare,
    CompareExtra,
    Figure,
    Hook,
    Resources,
    Roofline,
    Section,
    Stage,
    Summary,
    Table,
    Windows,
)

FIGURES = "accelbench.stages.amp.figures"
# the training columns of a trial (docs/training.md): throughput, FLOPs, MFU, compile time, the loss floor
TRAINING_DESCRIBE = {
    "preset": "the gpt or resnet preset the trial's sizes start from (amp.gpt.preset, amp.resnet.preset); "
    "empty for mlp and transformer",
    "batch_search": "fixed: the configured batch; max: the largest batch that trained 2 steps without running out "
    "of memory (bisected; the compiled modes train their eager mode's)",
    "step_ci95_low_s": "s — 95% interval of the median step time, low end, over the trial's timed steps in time "
    "order (step_ci_method says how); it covers step-to-step variation within this one run, not "
    "run-to-run variation",
    "step_ci95_high_s": "s — high end of that interval",
    "step_ci_method": "batch_means (10 consecutive batches of steps, sectioning around the median: accounts for the "
    "steps' autocorrelation; from 50 timed steps on) or descriptive (fewer steps: the "
    "order-statistic interval, which takes the steps as exchangeable)",
    "step_lag1_autocorr": "lag-1 autocorrelation of the log step times of the timed steps, in order",
    "tokens_per_s": "tokens/s — gpt: batch x seq_len / median step time (all ranks under DDP); NaN otherwise",
    "images_per_s": "images/s — resnet: batch / median step time; NaN otherwise",
    "model_flops_per_step": "FLOP — one training step's forward, loss and backward counted by "
    "torch.utils.flop_counter.FlopCounterMode (on the meta device; optimizer not counted); "
    "gpt and resnet only",
    "analytic_flops_per_step": "FLOP — the closed form: gpt (6N + 12·L·H·Q·T) x tokens (PaLM appendix B, nanoGPT "
    "estimate_mfu); resnet 3 x 2 x multiply-accumulates per image x batch",
    "model_tflops_per_s": "TFLOP/s — model_flops_per_step / median step time",
    "peak_dtype": "the precision whose peak mfu_pct is against: float32 (fp32), tf32, or the AMP dtype",
    "peak_tflops": "TFLOP/s — the backend's peak for peak_dtype (datasheet table, or the CPU's computed peak)",
    "peak_source": "where peak_tflops comes from",
    "mfu_pct": "% — model FLOPs utilisation: 100 x model_tflops_per_s / peak_tflops",
    "compile_s": "s — compiled modes: the first step's time less the median step time (dynamo tracing and inductor "
    "code generation for the forward and backward); NaN for eager modes",
    "loss_floor_nats": "nats/token — gpt: the entropy rate of the Markov chain the corpus is drawn from, the "
    "lowest reachable mean loss; NaN otherwise",
}
TRAINING_COLUMNS = (
    "preset",
    "batch_search",
    "step_ci95_low_s",
    "step_ci95_high_s",
    "step_ci_method",
    "step_lag1_autocorr",
    "tokens_per_s",
    "images_per_s",
    "model_flops_per_step",
    "analytic_flops_per_step",
    "model_tflops_per_s",
    "peak_dtype",
    "peak_tflops",
    "peak_source",
    "mfu_pct",
    "compile_s",
    "loss_floor_nats",
)

CHECK = Hook("accelbench.stages.amp.checks:check_amp_points")

PLUGIN = Stage(
    "amp",
    "AMP vs FP32 training trials",
    "device",
    entry="accelbench.stages.amp.measure",
    tables=(
        Table(
            "amp_steps",
            "amp_{backend}_steps.csv",
            cols(
                PROVENANCE,
                DEVICE,
                ("workload", "mode", "seed", "step", "loss", "step_s", "scale", "skipped", "status"),
                DEVICE_WARMUP,
            ),
            extra=("warmup", "status_detail"),
            numeric=("seed", "step", "loss", "step_s", "scale"),
        ),
        Table(
            "amp_trials",
            "amp_{backend}_trials.csv",
            cols(
                PROVENANCE,
                DEVICE,
                (
                    "workload",
                    "mode",
                    "seed",
                    "amp_dtype",
                    "step_median_s",
                    "samples_per_s",
                    "peak_mem_bytes",
                    "mem_kind",
                    "final_loss",
                    "test_acc",
                    "skipped_steps",
                    "final_scale",
                    "threads",
                    "status",
                ),
                DEVICE_WARMUP,
                TELEMETRY,
                ("samples_per_j",),
                THROTTLE,
            ),
            extra=(
                "allow_tf32",
                "steps",
                "warmup_steps",
                "batch_size",
                "step_iqr_s",
                "first_loss",
                "test_loss",
                "majority_acc",
                "status_detail",
            )
            + TELEMETRY_EXTRA
            + TRAINING_COLUMNS,
            numeric=(
                "seed",
                "step_median_s",
                "samples_per_s",
                "peak_mem_bytes",
                "final_loss",
                "test_acc",
                "skipped_steps",
                "final_scale",
                "threads",
                "samples_per_j",
            )
            + TELEMETRY_NUMERIC,
            describe=TRAINING_DESCRIBE,
            identity=("device_name", "workload", "mode", "seed"),
            compare=Compare(median="step_median_s"),
            samples="amp_{backend}_samples.parquet",
            added_defaults={"samples_per_j": None},
            check=CHECK,
            roofline=Roofline(
                points=Hook("accelbench.stages.amp.roofline:points"),
                needs=("runs",),
                markers={"amp": ("^", "AMP / FP32 training step (GEMMs)")},
            ),
            windows=Windows("amp", "AMP trial", "AMP trials", "#55a868", "{workload} {mode} seed {seed}"),
        ),
        Table(
            "amp_summary",
            "amp_{backend}_summary.csv",
            cols(
                PROVENANCE,
                DEVICE,
                (
                    "workload",
                    "mode",
                    "baseline",
                    "trials",
                    "step_s_mean",
                    "speedup",
                    "speedup_ci95_low",
                    "speedup_ci95_high",
                    "test_acc_mean",
                    "acc_diff",
                    "acc_diff_ci95_low",
                    "acc_diff_ci95_high",
                    "faster",
                    "accuracy_parity",
                    "verdict",
                    "note",
                ),
            ),
            extra=(
                "amp_dtype",
                "baseline_step_s_mean",
                "baseline_test_acc_mean",
                "accuracy_tolerance",
                "status",
                "speedup_ci_method",
            ),
            describe={
                "speedup_ci95_low": "95% interval of the speedup, low end: Student t on the log ratios of the "
                "seed pairs of this one process (modes interleaved within a seed)",
                "speedup_ci95_high": "high end of that interval",
                "speedup_ci_method": "descriptive: the seed pairs share one process, so the interval "
                "covers seed-to-seed variation within this run, not run to run; "
                "empty without an interval (one seed pair)",
            },
            numeric=(
                "trials",
                "step_s_mean",
                "speedup",
                "speedup_ci95_low",
                "speedup_ci95_high",
                "test_acc_mean",
                "acc_diff",
                "acc_diff_ci95_low",
                "acc_diff_ci95_high",
            ),
            check=CHECK,
            gpu_summary=Hook("accelbench.stages.amp.gpu_summary:lines"),
        ),
        Table(
            "telemetry_amp",
            "telemetry_amp_{backend}.csv",
            cols(PROVENANCE, DEVICE, TELEMETRY_SERIES),
            extra=("status_detail",),
            numeric=TELEMETRY_SERIES_NUMERIC,
            since="telemetry",
            telemetry_series=True,
        ),
    ),
    figures=(
        Figure("amp_step_time", ("amp_trials", "amp_summary"), draw=Hook(f"{FIGURES}:fig_amp_step_time")),
        Figure("amp_loss", ("amp_steps",), draw=Hook(f"{FIGURES}:fig_amp_loss")),
        Figure("training_throughput", ("amp_trials",), draw=Hook(f"{FIGURES}:fig_training_throughput")),
        Figure("training_loss", ("amp_steps", "amp_trials"), draw=Hook(f"{FIGURES}:fig_training_loss")),
    ),
    sections=(
        Section("amp", "AMP", 80, context=Hook("accelbench.stages.amp.report:context")),
        Section(
            "training",
            "Training",
            81,
            context=Hook("accelbench.stages.amp.training_report:context"),
            template="training.html.j2",
        ),
    ),
    config_check=Hook("accelbench.stages.amp.config_check:check"),
    # compare's AMP file, <baseline>__<candidate>_amp.csv, and its card in the report's "Compared with" section
    compare_extras=(
        CompareExtra(
            "amp",
            build=Hook("accelbench.stages.amp.compare:comparison"),
            lines=Hook("accelbench.stages.amp.compare:lines"),
            context=Hook("accelbench.stages.amp.compare:context"),
            template="compare.html.j2",
        ),
    ),
    # the GPU check: 2 seeds, the fewest that give the speedup an interval; 40 steps of which 5 untimed
    gpu_check={
        "workloads": ["mlp", "transformer"],
        "seeds": [0, 1],
        "steps": 20,
        "warmup_steps": 3,
        "batch_size": 1024,
        "mlp": {"hidden": 4096, "layers": 4},
        "transformer": {"d_model": 512, "n_heads": 8, "ff": 2048, "seq_len": 128, "layers": 2},
    },
    config_key="amp",
    resources=Resources(mem_mb=8000, runtime_min=60),
    method_version=2,
    checkpoint=True,
    summary=Summary(
        context=Hook("accelbench.stages.amp.summary:context"),
        headline=Hook("accelbench.stages.amp.summary:headline"),
        order=40,
    ),
)
