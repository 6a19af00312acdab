"""The pipeline's names in one place: its stages, the tables they write, the figures, the report's sections and
every file name, collected from the stage plug-ins (``PLUGINS``) and the pipeline's own stages (``CORE``).

The Snakemake rules, ``accelbench aggregate``, the plots, the report, compare and the tests all read this
module, with no per-stage branches. Adding a stage is its package under ``stages/`` (``PLUGIN = Stage(...)`` in
its ``__init__.py``: accelbench.plugin), its captions under ``workflow/report/``, its config defaults, its tests
and one line in ``PLUGINS``.

Where a number comes from: a figure (``FIGURES``) draws one or more aggregated tables; an aggregated table
(``TABLES``) is every run's per-backend file of that table, written by its ``stage``; the stage's module
(``Stage.module``) measures it. Columns listed in a table's ``columns`` are the contract: every file has them
(``aggregate`` refuses a file that lacks one, except a column in ``added``, which files written before it
existed may lack: their rows get its default).

This module imports no backend (the backends' names are read from their classes when a file is matched or a
job planned: ``Table.pattern``, ``Stage.applies_to``), so listing the names never imports torch or psutil.
"""

from __future__ import annotations

import dataclasses
import importlib

# the shared columns, re-exported (the registry is where other modules read them: F401 is off for this file)
from .columns import ADDED_COLUMNS as _SHARED_ADDED
from .columns import (
    DEVICE,
    DEVICE_WARMUP,
    PROVENANCE,
    SAMPLE_COLUMNS,
    TELEMETRY,
    TELEMETRY_EXTRA,
    TELEMETRY_NUMERIC,
    TELEMETRY_SERIES,
    TELEMETRY_SERIES_NUMERIC,
    THROTTLE,
)
from .plugin import CompareExtra, Figure, Headline, Hook, Resources, Section, Stage, Table

# The stage plug-ins, in the order their stages run on one backend (each after the one before: never two at once).
PLUGINS: tuple[str, ...] = (
    "accelbench.stages.warmup",
    "accelbench.stages.matmul",
    "accelbench.stages.matmul_search",
    "accelbench.stages.membw",
    "accelbench.stages.transfer",
    "accelbench.stages.amp",
    "accelbench.stages.attention",
    "accelbench.stages.scaling",
    "accelbench.stages.fleet",
)

# ---------------------------------------------------------------------------------------------------------
# The pipeline's own stages, tables and figures (not plug-ins: they read every stage's tables)
# ---------------------------------------------------------------------------------------------------------

CORE_TABLES = (
    Table(
        "runs",
        None,
        (
            "run_id",
            "run_dir",
            "host",
            "timestamp_utc",
            "accelbench_version",
            "git_commit",
            "config_hash",
            "python_version",
            "torch_version",
            "cuda_version",
            "hip_version",
            "container_image",
            "cpu_model",
            "backends_requested",
            "backends_present",
            "threads",
            "complete",
            "config_json",
            "env_json",
            "packages_json",
            "cpu_json",
        ),
        stage="aggregate",
    ),
    Table(
        "devices", None, ("run_id", "host", "backend", "present", "reason", "device", "device_name"), stage="aggregate"
    ),
    # every stored run of every point's series (accelbench history's store, read by aggregate): the History section
    Table(
        "history",
        None,
        (
            "series",
            "label",
            "table",
            "host",
            "device_name",
            "config_hash",
            "backend",
            "device",
            "point",
            "run_index",
            "run_id",
            "timestamp_utc",
            "median_s",
            "segment",
            "segment_median_s",
            "change_point",
            "step_pct",
            "changes",
            "verdict",
            "lower_is_better",
            "in_focus",
        ),
        stage="aggregate",
        describe={
            "series": "text — host|device model|config hash|table|backend|device|point",
            "run_index": "count — the run's place in its series (0: the first run)",
            "median_s": "s — the run's median for the point (the run is the unit)",
            "segment": "count — which level of the series (0: the first; a change point starts the next)",
            "segment_median_s": "s — the median of the segment's run medians",
            "change_point": "bool — this run starts a new level (ruptures PELT on log run medians)",
            "step_pct": "% — the new level over the one before, minus 1 (+: more time)",
            "changes": "text — image, versions, commit that differ from the run before a change point",
            "verdict": "same/slower/faster — the latest level against the one before (min_effect)",
            "in_focus": "bool — the run is in the report in full (the rest are history only)",
        },
    ),
)
CORE_BEFORE = (
    Stage(
        "run-info",
        "check the config and write results/<run>/run.json (config, hash, commit)",
        "run",
        entry="accelbench.run.runinfo",
        resources=Resources(mem_mb=500, runtime_min=5),
    ),
    Stage("detect", "detect every backend and device; write devices.json", "run", entry="accelbench.stages.detect"),
)
CORE_AFTER = (
    Stage(
        "aggregate",
        "gather every run's CSVs under results/ into tidy tables",
        "report",
        entry="accelbench.reporting.aggregate",
    ),
    Stage(
        "plots",
        "seaborn figures (PNG and SVG) from the aggregated tables",
        "report",
        entry="accelbench.reporting.plots",
    ),
    Stage("report", "one self-contained HTML report", "report", entry="accelbench.reporting.html"),
    Stage("container", "container argv and image builds for docker/podman", "tool", entry="accelbench.run.containers"),
    # a tool on the command line (exit 0/1/2: a CI gate); a rule too when the config sets compare_to
    # a rule once per run (``history add`` of the finished run, before aggregate), and a tool on the command line
    Stage(
        "history",
        "every finished run in one store: each point's series over runs and its change points",
        "run",
        entry="accelbench.reporting.history",
        resources=Resources(mem_mb=1000, runtime_min=5),
    ),
    Stage(
        "compare",
        "compare two groups of runs point by point (did it get slower, and why?), or a run with published figures",
        "tool",
        entry="accelbench.reporting.compare",
    ),
    Stage(
        "ab",
        "interleaved A/B: a baseline and a candidate as R fresh runs each, alternately, then compared as groups",
        "tool",
        entry="accelbench.run.ab",
    ),
)
# Figures over several stages' tables (the device's telemetry over the run; the roofline of every ceiling).
CORE_FIGURES = (
    # its tables: the sampler's readings and the windows they cover (Table.telemetry_series, Table.windows)
    Figure("telemetry", (), draw=Hook("accelbench.reporting.plots:fig_telemetry")),
    # its tables: those declaring a Table.roofline and what their points need (filled in by _collect)
    Figure("roofline", (), draw=Hook("accelbench.reporting.plots:fig_roofline")),
    Figure("history", ("history",), draw=Hook("accelbench.reporting.history_report:fig_history")),
)

# Report sections over several stages' tables (their templates: reporting/templates/sections/).
CORE_SECTIONS = (
    Section(
        "roofline",
        "Roofline",
        50,
        context=Hook("accelbench.reporting.html:roofline_context"),
        template="templates/sections/roofline.html.j2",
        package="accelbench.reporting",
    ),
    Section(
        "telemetry",
        "Telemetry",
        100,
        context=Hook("accelbench.reporting.html:telemetry_context"),
        template="templates/sections/telemetry.html.j2",
        package="accelbench.reporting",
    ),
    Section(
        "history",
        "History",
        105,
        context=Hook("accelbench.reporting.history_report:history_context"),
        template="templates/sections/history.html.j2",
        package="accelbench.reporting",
    ),
)


# the keys of compare_files that are compare's own (a stage's compare extra may not take one)
COMPARE_CORE_FILES = ("points", "provenance", "png", "svg")


def _collect(plugin_names: tuple[str, ...] = PLUGINS):
    """STAGES, TABLES, FIGURES and SECTIONS from the plug-ins (and the core's own), in run and page order (each
    stage's compare extras with their package filled in)."""
    plugins = [importlib.import_module(name).PLUGIN for name in plugin_names]
    stages, tables, figures, sections = {}, {t.name: t for t in CORE_TABLES}, {}, {}
    for name, plugin in zip(plugin_names, plugins):
        for t in plugin.tables:
            if t.name in tables:
                raise ValueError(f"{name}: table {t.name!r} is declared twice")
            tables[t.name] = dataclasses.replace(t, stage=plugin.name)
        for f in plugin.figures:
            figures[f.name] = f
        for s in plugin.sections:
            sections[s.name] = dataclasses.replace(s, package=name)
    roofline = tuple(dict.fromkeys(n for name, t in tables.items() if t.roofline for n in (name, *t.roofline.needs)))
    telemetry = (*(n for n, t in tables.items() if t.telemetry_series), *(n for n, t in tables.items() if t.windows))
    inputs = {"roofline": roofline, "telemetry": telemetry}
    for f in CORE_FIGURES:
        figures[f.name] = dataclasses.replace(f, tables=inputs[f.name]) if f.name in inputs else f
    for s in CORE_SECTIONS:
        sections[s.name] = s
    packages = {plugin.name: name for name, plugin in zip(plugin_names, plugins)}
    extras = set(COMPARE_CORE_FILES)
    for plugin in (*CORE_BEFORE, *plugins, *CORE_AFTER):
        for x in plugin.compare_extras:
            if x.key in extras:
                raise ValueError(
                    f"{packages.get(plugin.name, plugin.name)}: compare extra {x.key!r} is taken (compare's own files: "
                    f"{', '.join(COMPARE_CORE_FILES)}; and the extras declared before it)"
                )
            extras.add(x.key)
        stages[plugin.name] = dataclasses.replace(
            plugin,
            tables=tuple(t.name if isinstance(t, Table) else t for t in plugin.tables),
            compare_extras=tuple(
                dataclasses.replace(x, package=packages.get(plugin.name, x.package)) for x in plugin.compare_extras
            ),
        )
    return stages, tables, figures, dict(sorted(sections.items(), key=lambda kv: kv[1].order))


STAGES, TABLES, FIGURES, SECTIONS = _collect()
# Every stage's own comparisons of two runs (Stage.compare_extras: accelbench compare writes each one's file, the
# report renders each one's card), in stage order; and the stages' lines against published figures (--against).
COMPARE_EXTRAS: tuple[CompareExtra, ...] = tuple(x for s in STAGES.values() for x in s.compare_extras)
REFERENCES: tuple[Hook, ...] = tuple(s.references for s in STAGES.values() if s.references)
DEVICE_STAGES: tuple[Stage, ...] = tuple(s for s in STAGES.values() if s.kind == "device")
# the stage whose config warms every device before it is measured, and the one whose peak_tflops overrides peaks
WARMUP: Stage = next(s for s in DEVICE_STAGES if s.warms_devices)
PEAK_OVERRIDES: Stage = next(s for s in DEVICE_STAGES if s.peak_overrides)
# Every table's headlines (Table.headlines: one number per device, the fleet check's figures), in stage order.
HEADLINES: tuple[tuple[str, Headline], ...] = tuple((name, h) for name, t in TABLES.items() for h in t.headlines)
# The device stages the fleet node check runs (those whose tables declare a headline), in run order, and each one's
# small config section for it (Stage.fleet_check).
FLEET_STAGES: tuple[Stage, ...] = tuple(s for s in DEVICE_STAGES if any(TABLES[t].headlines for t in s.tables))
FLEET_CHECK: dict[str, dict] = {s.config_key: s.fleet_check for s in STAGES.values() if s.config_key and s.fleet_check}
# the tables written per run (the others are made by aggregate from run.json and devices.json)
RUN_TABLES = tuple(name for name, t in TABLES.items() if t.file)
# Documented columns added after files without them were written, and the value such files mean (every table's).
ADDED_COLUMNS = {**_SHARED_ADDED, **{c: v for t in TABLES.values() for c, v in t.added_defaults.items()}}


@dataclasses.dataclass(frozen=True)
class SampleFile:
    """Where a device stage keeps the raw samples behind the rows of ``table`` (per run and backend)."""

    stage: str
    table: str
    file: str  # with {backend}

    def filename(self, backend: str) -> str:
        return self.file.format(backend=backend)


# the raw-samples file of each device stage that keeps one (its table's ``samples``); one per stage
SAMPLES: dict[str, SampleFile] = {t.stage: SampleFile(t.stage, t.name, t.samples) for t in TABLES.values() if t.samples}
# What names one measured point of a table, besides its backend and device (``accelbench compare`` matches on it).
POINT_IDENTITY: dict[str, tuple[str, ...]] = {name: t.identity for name, t in TABLES.items() if t.identity}
# the tables accelbench compare matches point by point, in stage order
COMPARED_TABLES: tuple[str, ...] = tuple(name for name, t in TABLES.items() if t.compare and t.samples)


def method_version(stage: str) -> int:
    return STAGES[stage].method_version or 0


# What ``accelbench compare`` writes per point (results/compare/<baseline>__<candidate>.csv), README
# "Comparing runs"; the POINT_IDENTITY columns of the point's table follow them.
COMPARE_COLUMNS = (
    "baseline_run",
    "candidate_run",
    "table",
    "backend",
    "device",
    "device_name",
    "point",
    "label",
    "match",
    "baseline_status",
    "candidate_status",
    "baseline_median_s",
    "candidate_median_s",
    "baseline_samples",
    "candidate_samples",
    "time_ratio",
    "time_ratio_ci95_low",
    "time_ratio_ci95_high",
    "speed_change_pct",
    "speed_change_ci95_low_pct",
    "speed_change_ci95_high_pct",
    "min_effect_pct",
    "verdict",
    "reason",
    "provenance_diff",
    "method",
    # the run as the unit (measure.runstats): runs per side in the statistics, their spread and its source, the test
    "baseline_runs",
    "candidate_runs",
    "spread_log_sd",
    "spread_source",
    "t_df",
    "p_value",
    "tost_p",
)
COMPARE_VERDICTS = ("slower", "faster", "same", "inconclusive")
COMPARE_SPREAD_SOURCES = ("groups", "history", "none")  # where a point's between-run spread came from


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
HISTORY_FILE = "history.duckdb"  # results/history.duckdb: every finished run (accelbench history)
HISTORY_TABLE = "history"
HISTORY_RECEIPT = "history.json"  # in the run folder: what ``history add`` stored of it (the rule's output)
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
    return [
        name
        for b in config_backends
        for s in DEVICE_STAGES
        if s.expected_in(config)
        for name in stage_files(s, b, config)
    ]


def stage_outputs(stage: Stage) -> list[str]:
    """Every file name pattern (with {backend}) a device stage's rule declares: its tables, then its samples."""
    return [TABLES[t].file for t in stage.tables] + ([SAMPLES[stage.name].file] if stage.name in SAMPLES else [])


def sample_files(config_backends) -> list[str]:
    """The raw-sample files a finished run with these backends has: one per device stage that applies to the
    backend (``Stage.applies_to``), as ``run_files``; empty where the backend has no device here."""
    return [
        SAMPLES[s.name].filename(b)
        for b in config_backends
        for s in DEVICE_STAGES
        if s.name in SAMPLES and s.applies_to(b)
    ]


COMPARE_DIR = "compare"


def compare_extra_file(stem: str, key: str) -> str:
    """A compare extra's file beside the points file ``<stem>.csv``: ``<stem>_<key>.csv``."""
    return f"{stem}_{key}.csv"


def compare_files(baseline: str, candidate: str) -> dict[str, str]:
    """What ``accelbench compare`` writes under results/compare/ for two run ids: the points (the documented
    table), each stage's own comparison (``COMPARE_EXTRAS``, by its key), the provenance diff, and the figure of
    the ratios."""
    stem = f"{COMPARE_DIR}/{baseline}__{candidate}"
    return {
        "points": f"{stem}.csv",
        **{x.key: compare_extra_file(stem, x.key) for x in COMPARE_EXTRAS},
        "provenance": compare_extra_file(stem, "provenance"),
        "png": f"{stem}.png",
        "svg": f"{stem}.svg",
    }


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
