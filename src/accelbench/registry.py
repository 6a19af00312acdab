"""The pipeline's names in one place: its stages, the tables they write, the figures, and every file name.

The Snakemake rules, ``accelbench aggregate``, the plots, the report and the tests all read this module;
adding a stage is one ``Stage`` entry (plus its tables and figures) here, its module under ``stages/``
and a caption under ``workflow/report/``.

Where a number comes from: a figure (``FIGURES``) draws one or more aggregated tables; an aggregated
table (``TABLES``) is every run's per-backend file of that table, written by its ``stage``; the
stage's module (``Stage.module``) measures it. Columns listed in a table's ``columns`` are the README's
contract: every file has them (``aggregate`` refuses a file that lacks one, except a column in
``added``, which files written before it existed may lack: their rows get its default).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import backends

# ---------------------------------------------------------------------------------------------------------
# Columns shared by every table a stage writes
# ---------------------------------------------------------------------------------------------------------

PROVENANCE = (
    "run_id", "host", "accelbench_version", "git_commit", "torch_version", "cuda_version",
    "hip_version", "container_image", "config_hash", "method_version",
)
DEVICE = ("backend", "device", "device_name")
# How the stage warmed its device in its own process before measuring it (measure.stability).
DEVICE_WARMUP = ("device_warmup_s", "device_warmup_calls", "device_warmup_status")
# What the device was doing while a row was measured (measure.telemetry): on every matmul point, soak
# interval and AMP trial. Null where a sensor is missing, never 0.
TELEMETRY = ("clock_mhz_median", "clock_mhz_min", "power_w_median", "temp_c_max", "energy_j")
THROTTLE = ("throttled", "throttle_reasons", "telemetry_source")
TELEMETRY_EXTRA = ("telemetry_samples", "mem_clock_mhz_median", "util_pct_median", "energy_source",
                   "telemetry_start_unix_s", "telemetry_end_unix_s", "power_source", "telemetry_too_short_for")
TELEMETRY_NUMERIC = TELEMETRY
# one row per reading of a device's sensors during a stage (telemetry_<stage>_<backend>.csv)
TELEMETRY_SERIES = ("stage", "time_unix_s", "t_s", "clock_mhz", "mem_clock_mhz", "power_w", "temp_c", "util_pct",
                    "energy_j", "throttle_reasons", "telemetry_source", "status")
TELEMETRY_SERIES_NUMERIC = ("time_unix_s", "t_s", "clock_mhz", "mem_clock_mhz", "power_w", "temp_c", "util_pct",
                            "energy_j")
# Documented columns added after files without them were written, and the value such files mean.
ADDED_COLUMNS = {"method_version": 0, "device_warmup_s": None, "device_warmup_calls": None,
                 "device_warmup_status": None, "shape_name": ""}
ADDED_COLUMNS.update({c: None for c in (*TELEMETRY, *THROTTLE, "gflop_per_j", "samples_per_j", "clock_ramp")})
# Documented columns added later whose value, in files written before them, is another column's:
# a matmul file from before shapes holds square points only, so its m and k are its n.
ADDED_FROM = {"m": "n", "k": "n"}

MATMUL_STATUSES = (
    "ok", "unstable", "invalid", "wrong_result", "skipped_budget", "oom", "unsupported", "error", "absent",
)
MEMBW_STATUSES = ("ok", "unstable", "oom", "unsupported", "error", "absent")


@dataclass(frozen=True)
class Table:
    """One tidy table: written per run and backend by ``stage`` (``file``), gathered over every run by
    ``accelbench aggregate`` into ``aggregate/<name>.csv``."""

    name: str
    stage: str
    file: str | None            # per-run file name, with {backend}; None: made by aggregate itself
    columns: tuple[str, ...]    # documented: the README's contract, in order
    extra: tuple[str, ...] = ()  # written after them, beyond the contract
    numeric: tuple[str, ...] = ()  # aggregate checks these hold numbers
    # a config key that every run writing this table has (configs are stored defaults-filled): a run made
    # before the table existed lacks the key, and aggregate does not ask it for the file
    since: str | None = None

    def expected_from(self, config: dict | None) -> bool:
        """Whether a run with this (stored) config writes this table; always, when no config is given."""
        return config is None or self.since is None or self.since in config

    @property
    def all_columns(self) -> list[str]:
        return [*self.columns, *self.extra]

    def filename(self, backend: str) -> str:
        return self.file.format(backend=backend)

    @property
    def pattern(self) -> re.Pattern:
        head, _, tail = self.file.partition("{backend}")
        names = "|".join(map(re.escape, backends.NAMES))  # not any word: matmul_search_cpu.csv is no matmul file
        return re.compile(f"^{re.escape(head)}(?P<backend>{names}){re.escape(tail)}$")

    @property
    def added(self) -> dict:
        return {c: v for c, v in ADDED_COLUMNS.items() if c in self.columns}

    @property
    def added_from(self) -> dict:
        """Added columns that older files fill from another column of the same row."""
        return {c: src for c, src in ADDED_FROM.items() if c in self.columns}


def _cols(*parts) -> tuple[str, ...]:
    return tuple(c for part in parts for c in part)


TABLES: dict[str, Table] = {t.name: t for t in (
    Table("runs", "aggregate", None, (
        "run_id", "run_dir", "host", "timestamp_utc", "accelbench_version", "git_commit", "config_hash",
        "python_version", "torch_version", "cuda_version", "hip_version", "container_image", "cpu_model",
        "backends_requested", "backends_present", "threads", "complete", "config_json", "env_json",
        "packages_json", "cpu_json")),
    Table("devices", "aggregate", None, ("run_id", "host", "backend", "present", "reason", "device", "device_name")),
    Table("warmup", "warmup", "warmup_{backend}.csv",
          _cols(PROVENANCE, DEVICE, ("iter", "iter_s", "cold_s", "warm_s", "stable_at_iter", "threads", "status")),
          extra=("n", "status_detail"),
          numeric=("iter", "iter_s", "cold_s", "warm_s", "stable_at_iter", "threads")),
    Table("matmul", "matmul", "matmul_{backend}.csv",
          _cols(PROVENANCE, DEVICE, (
              "dtype", "shape_name", "m", "n", "k", "flops", "threads", "allow_tf32", "median_s", "iqr_s", "ci95_low_s", "ci95_high_s",
              "repeats", "tflops", "peak_tflops", "peak_source", "pct_of_peak", "rel_error", "rel_error_max",
              "status", "flags", "status_detail"), DEVICE_WARMUP, TELEMETRY, ("gflop_per_j",), THROTTLE,
              ("clock_ramp",)),
          extra=("blocks", "input_sets", "predicted_s", "torch_dtype", "fp8_fast_accum") + TELEMETRY_EXTRA,
          numeric=("m", "n", "k", "flops", "threads", "median_s", "iqr_s", "ci95_low_s", "ci95_high_s", "repeats",
                   "tflops", "peak_tflops", "pct_of_peak", "rel_error", "rel_error_max", "gflop_per_j")
          + TELEMETRY_NUMERIC),
    Table("matmul_soak", "matmul", "matmul_soak_{backend}.csv",
          _cols(PROVENANCE, DEVICE, ("dtype", "n", "interval", "t_s", "interval_s", "calls", "tflops"), TELEMETRY,
                ("gflop_per_j",), THROTTLE, ("clock_settled", "status")),
          extra=("status_detail",) + TELEMETRY_EXTRA,
          numeric=("n", "interval", "t_s", "interval_s", "calls", "tflops", "gflop_per_j") + TELEMETRY_NUMERIC,
          since="telemetry"),
    Table("telemetry_matmul", "matmul", "telemetry_matmul_{backend}.csv",
          _cols(PROVENANCE, DEVICE, TELEMETRY_SERIES), extra=("status_detail",), numeric=TELEMETRY_SERIES_NUMERIC,
          since="telemetry"),
    Table("matmul_search", "matmul-search", "matmul_search_{backend}.csv",
          _cols(PROVENANCE, DEVICE, (
              "dtype", "m", "n", "k", "flops", "phase", "evaluation", "threads", "median_s", "iqr_s", "ci95_low_s",
              "ci95_high_s", "repeats", "tflops", "tflops_ci95_low", "tflops_ci95_high", "peak_tflops",
              "pct_of_peak", "rel_error", "status", "best", "grid_points", "evaluated_shapes", "search_s",
              "budget_s", "stop_reason", "status_detail"), DEVICE_WARMUP),
          extra=("method", "min_run_time_s", "allow_tf32", "blocks", "input_sets", "predicted_s", "flags",
                 "peak_source", "rel_error_max"),
          numeric=("m", "n", "k", "flops", "evaluation", "threads", "median_s", "iqr_s", "ci95_low_s",
                   "ci95_high_s", "repeats", "tflops", "tflops_ci95_low", "tflops_ci95_high", "peak_tflops",
                   "pct_of_peak", "rel_error", "grid_points", "evaluated_shapes", "search_s", "budget_s")),
    Table("membw", "membw", "membw_{backend}.csv",
          _cols(PROVENANCE, DEVICE, (
              "kernel", "size_bytes", "bytes_moved", "threads", "median_s", "iqr_s", "ci95_low_s", "ci95_high_s",
              "repeats", "gbps", "gbps_ci95_low", "gbps_ci95_high", "peak_gbps", "peak_source", "pct_of_peak",
              "cache_bytes", "status"), DEVICE_WARMUP),
          extra=("blocks", "status_detail"),
          numeric=("size_bytes", "bytes_moved", "threads", "median_s", "iqr_s", "ci95_low_s", "ci95_high_s",
                   "repeats", "gbps", "gbps_ci95_low", "gbps_ci95_high", "peak_gbps", "pct_of_peak",
                   "cache_bytes")),
    Table("transfer", "transfer", "transfer_{backend}.csv",
          _cols(PROVENANCE, DEVICE, ("direction", "memory", "size_bytes", "median_s", "iqr_s", "repeats", "gbps",
                                     "status"), DEVICE_WARMUP),
          extra=("ci95_low_s", "ci95_high_s", "blocks", "status_detail"),
          numeric=("size_bytes", "median_s", "iqr_s", "repeats", "gbps")),
    Table("amp_steps", "amp", "amp_{backend}_steps.csv",
          _cols(PROVENANCE, DEVICE, ("workload", "mode", "seed", "step", "loss", "step_s", "scale", "skipped",
                                     "status"), DEVICE_WARMUP),
          extra=("warmup", "status_detail"),
          numeric=("seed", "step", "loss", "step_s", "scale")),
    Table("amp_trials", "amp", "amp_{backend}_trials.csv",
          _cols(PROVENANCE, DEVICE, (
              "workload", "mode", "seed", "amp_dtype", "step_median_s", "samples_per_s", "peak_mem_bytes",
              "mem_kind", "final_loss", "test_acc", "skipped_steps", "final_scale", "threads", "status"),
              DEVICE_WARMUP, TELEMETRY, ("samples_per_j",), THROTTLE),
          extra=("allow_tf32", "steps", "warmup_steps", "batch_size", "step_iqr_s", "first_loss", "test_loss",
                 "majority_acc", "status_detail") + TELEMETRY_EXTRA,
          numeric=("seed", "step_median_s", "samples_per_s", "peak_mem_bytes", "final_loss", "test_acc",
                   "skipped_steps", "final_scale", "threads", "samples_per_j") + TELEMETRY_NUMERIC),
    Table("amp_summary", "amp", "amp_{backend}_summary.csv",
          _cols(PROVENANCE, DEVICE, (
              "workload", "mode", "baseline", "trials", "step_s_mean", "speedup", "speedup_ci95_low",
              "speedup_ci95_high", "test_acc_mean", "acc_diff", "acc_diff_ci95_low", "acc_diff_ci95_high", "faster",
              "accuracy_parity", "verdict", "note")),
          extra=("amp_dtype", "baseline_step_s_mean", "baseline_test_acc_mean", "accuracy_tolerance", "status"),
          numeric=("trials", "step_s_mean", "speedup", "speedup_ci95_low", "speedup_ci95_high", "test_acc_mean",
                   "acc_diff", "acc_diff_ci95_low", "acc_diff_ci95_high")),
    # ---- scaling (stages/scaling.py): DDP/DataParallel weak scaling, collectives, device-to-device copies ----
    Table("scaling_trials", "scaling", "scaling_{backend}_trials.csv",
          _cols(PROVENANCE, DEVICE, (
              "method", "workload", "mode", "world_size", "seed", "devices", "process_group", "threads_per_rank",
              "global_batch", "samples_per_s", "step_median_s", "step_ci95_low_s", "step_ci95_high_s", "final_loss",
              "test_acc", "loss_max_rel_diff", "loss_tolerance", "loss_matches_single", "status")),
          extra=("per_rank_batch", "amp_dtype", "steps", "warmup_steps", "status_detail"),
          numeric=("world_size", "seed", "threads_per_rank", "global_batch", "samples_per_s", "step_median_s",
                   "step_ci95_low_s", "step_ci95_high_s", "final_loss", "test_acc", "loss_max_rel_diff",
                   "loss_tolerance"), since="scaling"),
    Table("scaling", "scaling", "scaling_{backend}.csv",
          _cols(PROVENANCE, DEVICE, (
              "method", "workload", "mode", "world_size", "devices", "process_group", "threads_per_rank", "trials",
              "samples_per_s", "step_median_s", "step_ci95_low_s", "step_ci95_high_s", "scaling_efficiency",
              "efficiency_ci95_low", "efficiency_ci95_high", "loss_matches_single", "status")),
          extra=("global_batch", "loss_max_rel_diff", "loss_tolerance", "status_detail"),
          numeric=("world_size", "threads_per_rank", "trials", "samples_per_s", "step_median_s", "step_ci95_low_s",
                   "step_ci95_high_s", "scaling_efficiency", "efficiency_ci95_low", "efficiency_ci95_high"),
          since="scaling"),
    Table("collectives", "scaling", "collectives_{backend}.csv",
          _cols(PROVENANCE, DEVICE, (
              "collective", "world_size", "devices", "process_group", "size_bytes", "dtype", "median_s", "ci95_low_s",
              "ci95_high_s", "algbw_gbps", "busbw_gbps", "busbw_factor", "repeats", "status")),
          extra=("blocks", "calls_per_block", "threads_per_rank", "status_detail"),
          numeric=("world_size", "size_bytes", "median_s", "ci95_low_s", "ci95_high_s", "algbw_gbps", "busbw_gbps",
                   "busbw_factor", "repeats"), since="scaling"),
    Table("peer_copy", "scaling", "peer_copy_{backend}.csv",
          _cols(PROVENANCE, DEVICE, ("src", "dst", "peer", "size_bytes", "median_s", "gbps", "status")),
          extra=("ci95_low_s", "ci95_high_s", "repeats", "status_detail"),
          numeric=("size_bytes", "median_s", "gbps"), since="scaling"),
    Table("telemetry_amp", "amp", "telemetry_amp_{backend}.csv",
          _cols(PROVENANCE, DEVICE, TELEMETRY_SERIES), extra=("status_detail",), numeric=TELEMETRY_SERIES_NUMERIC,
          since="telemetry"),
)}
# the tables written per run (the others are made by aggregate from run.json and devices.json)
RUN_TABLES = tuple(name for name, t in TABLES.items() if t.file)


# ---------------------------------------------------------------------------------------------------------
# Raw timing samples and point identity (accelbench compare)
# ---------------------------------------------------------------------------------------------------------

# What names one measured point of a table, besides its backend and device: two runs' rows with equal values
# here measured the same thing (``accelbench compare`` matches on them; ``device_name`` is the device model).
# A stage that adds a dimension to its points (a shape column, a mode) adds it here.
POINT_IDENTITY: dict[str, tuple[str, ...]] = {
    "warmup": ("device_name", "n"),
    "matmul": ("device_name", "dtype", "shape_name", "m", "n", "k", "allow_tf32"),
    "transfer": ("device_name", "direction", "memory", "size_bytes"),
    "membw": ("device_name", "kernel", "size_bytes"),
    "amp_trials": ("device_name", "workload", "mode", "seed"),
}

# The long table of raw timing samples (Parquet, one file per device stage and backend). One row per sample:
# ``table`` and ``point`` say which row of which results table it belongs to (``point``: the row's
# POINT_IDENTITY values other than device_name, ``col=value`` joined by ``|``); ``sample`` is its index in
# measurement order; ``sample_s`` seconds per call (a timed block's time / ``calls``; one call or training
# step when ``calls`` is 1); ``steady`` whether the row's statistic uses it (false: the warm-up stage's calls
# before it was stable, AMP's first ``amp.warmup_steps`` steps).
# Identity columns a square matmul point leaves out of its key (its shape_name is empty, its m and k are its n), so
# square points keep the keys they had before (m, n, k) shapes existed and old runs still match new ones.
SQUARE_IDENTITY = {"shape_name": None, "m": "n", "k": "n"}
SAMPLE_COLUMNS = ("run_id", "method_version", "backend", "device", "table", "point", "sample", "sample_s", "calls",
                  "steady")


@dataclass(frozen=True)
class SampleFile:
    """Where a device stage keeps the raw samples behind the rows of ``table`` (per run and backend)."""

    stage: str
    table: str
    file: str  # with {backend}

    def filename(self, backend: str) -> str:
        return self.file.format(backend=backend)


SAMPLES: dict[str, SampleFile] = {f.stage: f for f in (
    SampleFile("warmup", "warmup", "warmup_{backend}_samples.parquet"),
    SampleFile("matmul", "matmul", "matmul_{backend}_samples.parquet"),
    SampleFile("transfer", "transfer", "transfer_{backend}_samples.parquet"),
    SampleFile("membw", "membw", "membw_{backend}_samples.parquet"),
    SampleFile("amp", "amp_trials", "amp_{backend}_samples.parquet"),
)}


# ---------------------------------------------------------------------------------------------------------
# Stages
# ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stage:
    """One ``accelbench`` subcommand; for pipeline stages also one Snakemake rule (``rule``).

    ``kind``: ``run`` (once per run), ``device`` (one job per backend, measuring every device of it, in
    the backend's image), ``report`` (over every run under results/), ``tool`` (not a rule).
    ``method_version``: bumped whenever the way a device stage measures changes, so a comparison across
    runs can tell a changed method from a changed machine (as mamf-finder's ``benchmark_version``).
    """

    name: str
    module: str
    help: str
    kind: str
    tables: tuple[str, ...] = ()
    accelerators_only: bool = False
    method_version: int | None = None
    checkpoint: bool = False
    mem_mb: int = 2000
    runtime_min: int = 10
    # The stage wants every device of one node at once (several ranks, one per GPU): its job asks for
    # config cluster.gpus_per_node GPUs (SLURM --gpus=N) and one host thread per GPU (--cpus-per-task).
    whole_node: bool = False
    # a stage added later: runs whose config lacks this key (dotted path) were made before it existed and
    # are not expected to have its files
    since_config_key: str | None = None

    @property
    def rule(self) -> str:
        return self.name.replace("-", "_")

    def applies_to(self, backend: str) -> bool:
        return not self.accelerators_only or backends.is_accelerator(backend)

    def expected_in(self, config: dict | None) -> bool:
        """Whether a run with this (defaults-filled) config ran this stage (None: a current run, yes)."""
        if config is None or not self.since_config_key:
            return True
        node = config
        for part in self.since_config_key.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True


STAGES: dict[str, Stage] = {s.name: s for s in (
    Stage("run-info", "accelbench.run.runinfo",
          "check the config and write results/<run>/run.json (config, hash, commit)", "run", mem_mb=500, runtime_min=5),
    Stage("detect", "accelbench.stages.detect", "detect every backend and device; write devices.json", "run"),
    # device stages, in the order they run on one backend (each after the one before: never two at once)
    Stage("warmup", "accelbench.stages.warmup", "cold vs warm: repeat a fixed workload until its time is stable",
          "device", tables=("warmup",), method_version=1, mem_mb=4000, runtime_min=15),
    Stage("matmul", "accelbench.stages.matmul",
          "matrix-multiplication sweep over sizes x dtypes on every device of a backend", "device",
          tables=("matmul", "matmul_soak", "telemetry_matmul"), method_version=2, checkpoint=True, mem_mb=16000,
          runtime_min=60),
    Stage("matmul-search", "accelbench.stages.matmul_search",
          "search (m, n, k) for the highest matmul TFLOP/s within a time budget (matmul.search; off by default)",
          "device", tables=("matmul_search",), method_version=1, checkpoint=True, mem_mb=16000, runtime_min=60,
          since_config_key="matmul.search"),
    Stage("membw", "accelbench.stages.membw",
          "device-local memory bandwidth (copy, triad) across sizes, and the launch-latency floor", "device",
          tables=("membw",), method_version=1, mem_mb=8000, runtime_min=15, since_config_key="membw"),
    Stage("transfer", "accelbench.stages.transfer", "host<->device copy bandwidth (pageable and pinned)", "device",
          tables=("transfer",), accelerators_only=True, method_version=1, mem_mb=8000, runtime_min=15),
    Stage("amp", "accelbench.stages.amp", "AMP vs FP32 training trials", "device",
          tables=("amp_steps", "amp_trials", "amp_summary", "telemetry_amp"), method_version=2, checkpoint=True,
          mem_mb=8000,
          runtime_min=60),
    Stage("scaling", "accelbench.stages.scaling",
          "multi-device scaling: DDP/DataParallel training over world sizes, collectives, device-to-device copies",
          "device", tables=("scaling_trials", "scaling", "collectives", "peer_copy"), method_version=1,
          mem_mb=16000, runtime_min=120, whole_node=True),
    Stage("aggregate", "accelbench.reporting.aggregate", "gather every run's CSVs under results/ into tidy tables",
          "report"),
    Stage("plots", "accelbench.reporting.plots", "seaborn figures (PNG and SVG) from the aggregated tables", "report"),
    Stage("report", "accelbench.reporting.html", "one self-contained HTML report", "report"),
    Stage("container", "accelbench.run.containers", "container argv and image builds for docker/podman", "tool"),
    # a tool on the command line (exit 0/1/2: a CI gate); a rule too when the config sets compare_to
    Stage("compare", "accelbench.reporting.compare",
          "compare two runs point by point (did it get slower, and why?), or a run with published figures",
          "tool"),
)}
DEVICE_STAGES: tuple[Stage, ...] = tuple(s for s in STAGES.values() if s.kind == "device")


def method_version(stage: str) -> int:
    return STAGES[stage].method_version or 0


# What ``accelbench compare`` writes per point (results/compare/<baseline>__<candidate>.csv), README
# "Comparing runs"; the POINT_IDENTITY columns of the point's table follow them.
COMPARE_COLUMNS = (
    "baseline_run", "candidate_run", "table", "backend", "device", "device_name", "point", "label", "match",
    "baseline_status", "candidate_status", "baseline_median_s", "candidate_median_s", "baseline_samples",
    "candidate_samples", "time_ratio", "time_ratio_ci95_low", "time_ratio_ci95_high", "speed_change_pct",
    "speed_change_ci95_low_pct", "speed_change_ci95_high_pct", "min_effect_pct", "verdict", "reason",
    "provenance_diff", "method",
)
COMPARE_VERDICTS = ("slower", "faster", "same", "inconclusive")


# ---------------------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Figure:
    """One figure of the report, saved as ``plots/<name>.png`` and ``.svg``. Its text is its Snakemake
    report caption, ``workflow/report/<name>.rst`` (the one source: the HTML report shows its first
    paragraph)."""

    name: str
    tables: tuple[str, ...]
    category: str = "Plots"

    @property
    def caption(self) -> str:
        return f"{self.name}.rst"


FIGURES: dict[str, Figure] = {f.name: f for f in (
    Figure("matmul_tflops", ("matmul",)),
    Figure("matmul_pct_of_peak", ("matmul",)),
    Figure("speedup", ("matmul",)),
    Figure("warmup", ("warmup",)),
    Figure("transfer", ("transfer",)),
    Figure("amp_step_time", ("amp_trials", "amp_summary")),
    Figure("amp_loss", ("amp_steps",)),
    Figure("scaling_efficiency", ("scaling",), category="Scaling"),
    Figure("collective_busbw", ("collectives",), category="Scaling"),
    Figure("peer_copy", ("peer_copy",), category="Scaling"),
    Figure("telemetry", ("telemetry_matmul", "telemetry_amp", "matmul", "matmul_soak", "amp_trials")),
    Figure("matmul_soak", ("matmul_soak",)),
    Figure("membw", ("membw",)),
    Figure("roofline", ("matmul", "matmul_search", "membw", "amp_trials", "runs")),
)}


# ---------------------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------------------

RESULTS = "results"
RUN_FILE = "run.json"
DEVICES_FILE = "devices.json"
AGGREGATE_DIR = "aggregate"
MANIFEST = "manifest.json"
PLOTS_DIR = "plots"
REPORT_HTML = "report.html"
CAPTIONS_DIR = "workflow/report"


def stage_files(stage: Stage, backend: str, config: dict | None = None) -> list[str]:
    """The file names (in a run folder) that ``stage`` writes for ``backend`` (in a run with the stored
    ``config``: a run older than a table has no file of it; see ``Table.since``)."""
    if not stage.applies_to(backend):
        return []
    return [TABLES[t].filename(backend) for t in stage.tables if TABLES[t].expected_from(config)]


def run_files(config_backends, config: dict | None = None) -> list[str]:
    """Every per-backend file a finished run with these backends has (what the Snakefile declares); with the
    run's stored ``config``, only the stages and tables that existed when it ran (``Stage.since_config_key``,
    ``Table.since``)."""
    return [name for b in config_backends for s in DEVICE_STAGES if s.expected_in(config)
            for name in stage_files(s, b, config)]


def stage_outputs(stage: Stage) -> list[str]:
    """Every file name pattern (with {backend}) a device stage's rule declares: its tables, then its samples."""
    return [TABLES[t].file for t in stage.tables] + ([SAMPLES[stage.name].file] if stage.name in SAMPLES else [])


def sample_files(config_backends) -> list[str]:
    """The raw-sample files a finished run with these backends has: one per device stage that applies to the
    backend (``Stage.applies_to``), as ``run_files``; empty where the backend has no device here."""
    return [SAMPLES[s.name].filename(b) for b in config_backends for s in DEVICE_STAGES
            if s.name in SAMPLES and s.applies_to(b)]


COMPARE_DIR = "compare"


def compare_files(baseline: str, candidate: str) -> dict[str, str]:
    """What ``accelbench compare`` writes under results/compare/ for two run ids: the points (the documented
    table), the AMP comparison, the provenance diff, and the figure of the ratios."""
    stem = f"{COMPARE_DIR}/{baseline}__{candidate}"
    return {"points": f"{stem}.csv", "amp": f"{stem}_amp.csv", "provenance": f"{stem}_provenance.csv",
            "png": f"{stem}.png", "svg": f"{stem}.svg"}


def checkpoint_file(stage: str, backend: str) -> str:
    return f"checkpoints/{stage}_{backend}.jsonl"


def work_dir(stage: str, backend: str) -> str:
    """A stage's scratch folder in a run (the scaling stage: launcher logs, rank pid files, rank results)."""
    return f"work/{stage}_{backend}"


def log_file(stage: str, backend: str | None = None) -> str:
    return f"logs/{stage}_{backend}.log" if backend else f"logs/{stage}.log"


def table_of(filename: str) -> str | None:
    """The table a per-run file belongs to (``matmul_cuda.csv`` -> matmul), or None."""
    for name in RUN_TABLES:
        if TABLES[name].pattern.match(filename):
            return name
    return None


def previous_device_stage(stage: Stage, backend: str) -> Stage | None:
    """The device stage that runs on ``backend`` just before ``stage`` (device stages never overlap)."""
    before = [s for s in DEVICE_STAGES[: DEVICE_STAGES.index(stage)] if s.applies_to(backend)]
    return before[-1] if before else None
