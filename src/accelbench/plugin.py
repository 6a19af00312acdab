"""What a stage declares about itself: the plug-in API (``registry.PLUGINS`` lists the plug-ins).

A stage is a package ``accelbench/stages/<name>/``. Its ``__init__.py`` holds ``PLUGIN = Stage(...)``, a
declaration that imports only this module and ``accelbench.columns`` (the standard library only); its
measuring code (``measure.py``), figure drawers, section context builder and template partial are sibling
files of that package, reached through ``Hook`` strings, so reading every declaration (the CLI listing its
subcommands, the Snakefile, the docs) never imports torch, pandas, matplotlib or a backend.

The registry collects the declarations into ``STAGES``, ``TABLES``, ``FIGURES``, ``SECTIONS`` and
``COMPARE_EXTRAS``; the rules, aggregate, plots, report, compare, profiles and tests read those, with no
per-stage branches.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field

from . import columns as C


@dataclass(frozen=True)
class Hook:
    """A lazy reference ``"package.module:attribute"``: ``load()`` imports the module then and returns it."""

    target: str

    def load(self):
        module, _, attr = self.target.partition(":")
        obj = importlib.import_module(module)
        return getattr(obj, attr) if attr else obj

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]


@dataclass(frozen=True)
class Sweep:
    """How the comparison figure (``accelbench compare``) draws a table's compared points: against the identity
    column ``x`` (a log2 axis labelled ``label``), one panel per value of ``panel`` (titled with the table's name and
    the value). The points of a table without one share a panel, one labelled row each."""

    x: str
    label: str
    panel: str | None = None


@dataclass(frozen=True)
class Compare:
    """What ``accelbench compare`` (and history) matches on for a table: its point identity is the table's
    ``identity``; ``median`` the column with the point's time (lower is better when ``lower_is_better``)."""

    median: str = "median_s"
    lower_is_better: bool = True
    ci: tuple[str, str] | None = None
    last_of: str | None = None  # one point per device: its last row by this column (the warm-up's warm call)
    fixed: dict = field(default_factory=dict)  # provenance values the stage always has (transfer: threads 1)
    sweep: Sweep | None = None  # its points in the comparison figure: against a column, a panel per value


@dataclass(frozen=True)
class Roofline:
    """How a table takes part in the roofline (``reporting.roofline``, the figure and the report's section).

    ``points(df, tables) -> list[dict]``: its points, each with the row's ``run_id``, ``backend``, ``device`` and
    ``device_name`` and ``kind``, ``point`` (a label), ``dtype`` (the dtype of its products, which picks the
    compute roof), ``m``, ``n``, ``k`` (NaN where not one product), ``flops``, ``bytes`` (the least traffic),
    ``time_s`` and ``launches`` (kernel launches per timed call, for the launch-bound verdict); ``markers``: its
    kinds -> (matplotlib marker, legend label); ``compute_roof``: its rows' ``peak_tflops`` (else its best trusted
    ``tflops``) per (run_id, device, dtype) are the compute roofs; ``memory_roof``: ``device_roofs(df)`` -> a
    frame per (run_id, device) with ``bandwidth_gbps``, ``bandwidth_source`` and ``launch_s`` (the memory roof and
    the launch floor); ``needs``: other tables its ``points`` read (``runs``: the runs' configs)."""

    points: Hook | None = None
    markers: dict = field(default_factory=dict)
    compute_roof: bool = False
    memory_roof: Hook | None = None
    needs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Windows:
    """A table whose rows are windows of time the telemetry sampler covered (``telemetry_start_unix_s`` to
    ``telemetry_end_unix_s``): the telemetry figure shades them and the report counts the throttled ones.
    ``kind`` names them on the time line, ``one``/``many`` in text, ``color`` their shade; ``what`` says which
    window a row is, formatted with its columns (``"{dtype} n={n}"``); ``soak``: the rows are the intervals of
    one point held for a while (the report sets its boost reading against its sustained one)."""

    kind: str
    one: str
    many: str
    color: str
    what: str
    soak: bool = False


@dataclass(frozen=True)
class Headline:
    """One number a table gives per device (and per value of each ``per`` column): how fast the device is, in
    one figure. The fleet check (``accelbench fleet``) holds each device's and node's headline against the fleet's
    median and a stored baseline, so it reads the headlines from here and names no stage.

    ``name``: the metric's name in the fleet table (``<name>:<per values>``); ``column``: the table's column that
    holds it, in ``unit``; ``higher_is_better``; ``where``: column -> the values a row must have (empty: any);
    the trusted rows (``columns.TRUSTED``, where the table has a status) of one device reduce to their best value
    (``max`` when higher is better, else ``min``): the best size of a sweep."""

    name: str
    column: str
    unit: str
    higher_is_better: bool = True
    per: tuple[str, ...] = ()
    where: dict = field(default_factory=dict)
    # take the row with the largest value of this column instead of the best one (membw: the largest array, in
    # memory rather than a cache; transfer: the largest copy)
    at_max: str | None = None

    @property
    def best(self) -> str:
        return "max" if self.higher_is_better else "min"


@dataclass(frozen=True)
class Table:
    """One tidy table: written per run and backend by its stage (``file``, with ``{backend}``), gathered over
    every run by ``accelbench aggregate`` into ``aggregate/<name>.csv``.

    ``columns``: the documented contract, in order (aggregate refuses a file without one, except an ``added``
    column, which files written before it existed may lack: their rows get its default); ``extra`` is written
    after them; ``numeric`` must hold numbers; ``statuses`` the allowed values of ``status`` (empty: any);
    ``identity``: the columns besides backend and device that name one measured point (two runs' rows with
    equal values measured the same thing); ``identity_fill``: identity columns a row leaves out of its key when
    empty or equal to the named column (a square matmul point's m and k are its n); ``describe``: a column's
    "unit — meaning" for the docs; ``samples``: its raw-samples Parquet file (with ``{backend}``) or None;
    ``since``: a config key every run writing this table has (a run made before the table existed lacks it).
    ``stage`` is filled in by the registry.
    """

    name: str
    file: str | None
    columns: tuple[str, ...]
    extra: tuple[str, ...] = ()
    numeric: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    identity: tuple[str, ...] = ()
    identity_fill: dict = field(default_factory=dict)
    describe: dict = field(default_factory=dict)
    compare: Compare | None = None
    samples: str | None = None
    since: str | None = None
    added_defaults: dict = field(default_factory=dict)  # this table's own added columns and their defaults
    added_from: dict = field(default_factory=dict)  # added columns that older files fill from another column
    # aggregate's completeness check of one file: check(df, table, config, path, problems, run_id)
    check: Hook | None = None
    roofline: Roofline | None = None  # its part in the roofline (points, compute or memory roofs)
    windows: Windows | None = None  # its rows are windows the telemetry sampler covered
    telemetry_series: bool = False  # its rows are the sampler's readings (the telemetry figure's lines)
    reports_threads: bool = False  # its threads column is the run's thread count (the runs table shows it)
    headlines: tuple[Headline, ...] = ()  # its one-number-per-device figures (the fleet check reads them)
    # its lines in the GPU check's summary (bench/gpu_summary.py, after the file's row count): lines(df, num) -> [str],
    # ``num(x, fmt=".4g")`` formats a number ("nan", "?" where not one); df is one run's file, not all absent
    gpu_summary: Hook | None = None
    stage: str = ""

    def expected_from(self, config: dict | None) -> bool:
        """Whether a run with this (stored) config writes this table; always, when no config is given."""
        return config is None or self.since is None or self.since in config

    @property
    def all_columns(self) -> list[str]:
        return [*self.columns, *self.extra]

    def filename(self, backend: str) -> str:
        return self.file.format(backend=backend)

    def samples_filename(self, backend: str) -> str:
        return self.samples.format(backend=backend)

    @property
    def pattern(self) -> re.Pattern:
        from .backends import NAMES  # lazy: the names come from the backend classes, read when a file is matched

        head, _, tail = self.file.partition("{backend}")
        names = "|".join(map(re.escape, NAMES))  # not any word: matmul_search_cpu.csv is no matmul file
        return re.compile(f"^{re.escape(head)}(?P<backend>{names}){re.escape(tail)}$")

    @property
    def added(self) -> dict:
        """Documented columns added after files without them were written, and the value such files mean."""
        known = {**C.ADDED_COLUMNS, **self.added_defaults}
        return {c: v for c, v in known.items() if c in self.columns}


@dataclass(frozen=True)
class Figure:
    """One figure of the report, saved as ``plots/<name>.png`` and ``.svg``; ``draw(plt, sns, tables, series)``
    returns a matplotlib figure. Its text is its Snakemake report caption, ``workflow/report/<name>.rst``."""

    name: str
    tables: tuple[str, ...]
    draw: Hook | None = None
    category: str = "Plots"

    @property
    def caption(self) -> str:
        return f"{self.name}.rst"


@dataclass(frozen=True)
class Section:
    """One section of the HTML report: ``context(tables, series, ctx) -> dict`` builds the template's variables
    (merged into the report's context); ``template`` a Jinja file in the plug-in's package, included as
    ``<package>/<template>``. The nav lists the sections by ``order``."""

    name: str
    title: str
    order: int
    context: Hook | None = None
    template: str = "section.html.j2"
    package: str = ""  # filled in by the registry: the plug-in package the template lives in

    @property
    def include(self) -> str:
        """The template's name for the report's Jinja loader."""
        return f"{self.package}/{self.template}"


@dataclass(frozen=True)
class CompareExtra:
    """A stage's own comparison of two runs, beside the point-by-point one (``accelbench compare``, the report's
    "Compared with" section): what a per-point ratio of times cannot say, as AMP's speedup over FP32 and accuracy
    difference of each run and how they changed.

    ``build(base_run, cand_run, any_device_model) -> DataFrame``: the comparison of the first run of each side
    (``reporting.compare.Run``: its ``tables`` by name, ``devices``, ``info``; ``any_device_model``: match points
    across device models), written to ``results/compare/<baseline>__<candidate>_<key>.csv``; ``lines(df) ->
    [str]``: its lines in the CLI's text (``df`` read back from that file: it may be empty); ``context(df) ->
    [dict]``: the rows of its card, ``template``: a Jinja partial in the plug-in's package that renders the card in
    the report's "Compared with" section, with the variables ``extra`` (``extra.rows``: the rows) and
    ``comparison`` (the section's: ``baseline``, ``candidate``)."""

    key: str
    build: Hook
    lines: Hook
    context: Hook
    template: str
    package: str = ""  # filled in by the registry: the plug-in package the template lives in

    @property
    def include(self) -> str:
        """The template's name for the report's Jinja loader."""
        return f"{self.package}/{self.template}"


@dataclass(frozen=True)
class Summary:
    """A stage's part of the report's summary (at the top of the page): ``context(tables, series, ctx) -> dict``
    its variables (merged into the report's context in ``order``, before the sections'; a later part may refine
    an earlier one's, as the search fills its best shapes into the matmul table); ``headline(ctx, device) ->
    [(rank, clause)]``: its clauses of the device's one-sentence headline (``device``: a series row), sorted by
    rank over every stage."""

    context: Hook
    headline: Hook | None = None
    order: int = 50


@dataclass(frozen=True)
class Resources:
    """What a stage's job asks for. ``gpu``: one device of the backend when the backend class says it is an
    accelerator (profiles never name backends); ``whole_node``: every device of a node (config
    cluster.gpus_per_node GPUs and one host thread per GPU)."""

    mem_mb: int = 2000
    runtime_min: int = 10
    gpu: bool = True
    whole_node: bool = False


@dataclass(frozen=True)
class Stage:
    """One ``accelbench`` subcommand; for pipeline stages also one Snakemake rule (``rule``).

    ``kind``: ``run`` (once per run), ``device`` (one job per backend, measuring every device of it, in the
    backend's image), ``report`` (over every run under results/), ``tool`` (not a rule). ``entry``: the module
    with ``add_arguments(parser)`` and ``cli(args)`` (a module path or a Hook). ``method_version``: bumped
    whenever the way a device stage measures changes, so a comparison across runs can tell a changed method
    from a changed machine. ``since_config_key``: runs whose config lacks this dotted key were made before the
    stage existed. ``defaults``/``schema``: the stage's config section ``config[config_key]``. ``gpu_check``:
    the stage's small config section for bench/gpu_check.sh. After collection (``registry.STAGES``),
    ``tables`` holds the tables' names (their declarations are in ``registry.TABLES``).
    """

    name: str
    help: str
    kind: str
    entry: str | Hook
    tables: tuple = ()
    figures: tuple[Figure, ...] = ()
    sections: tuple[Section, ...] = ()
    config_key: str | None = None
    defaults: dict = field(default_factory=dict)
    schema: dict = field(default_factory=dict)
    resources: Resources = Resources()
    method_version: int | None = None
    accelerators_only: bool = False
    checkpoint: bool = False
    since_config_key: str | None = None
    gpu_check: dict = field(default_factory=dict)
    # the stage's small config section for the fleet node check (accelbench fleet-node): a short check of every
    # node at once, sized for seconds on a CPU node (config fleet.check overrides it, e.g. GPU-sized points)
    fleet_check: dict = field(default_factory=dict)
    # the stage's rules between config keys a schema cannot say: check(config) on the defaults-filled config,
    # raising run.config.ConfigError with one line naming the key (run.config.check_cross_keys calls it)
    config_check: Hook | None = None
    # roles a stage can play for the others: its config warms every device before any stage measures it
    # (stages.common.StageContext.warm); its config's peak_tflops overrides the devices' compute peaks (detect)
    warms_devices: bool = False
    peak_overrides: bool = False
    summary: Summary | None = None  # its part of the report's summary (top of the page)
    compare_extras: tuple[CompareExtra, ...] = ()  # its own comparisons of two runs (accelbench compare, report)
    # ``accelbench compare --against references``: lines(run) -> [str], how one run (reporting.compare.Run) compares
    # with the published figures the stage ships (a line saying there is none where no device and dtype has one)
    references: Hook | None = None

    @property
    def module(self) -> str:
        return self.entry.module if isinstance(self.entry, Hook) else self.entry

    @property
    def rule(self) -> str:
        return self.name.replace("-", "_")

    @property
    def mem_mb(self) -> int:
        return self.resources.mem_mb

    @property
    def runtime_min(self) -> int:
        return self.resources.runtime_min

    @property
    def whole_node(self) -> bool:
        return self.resources.whole_node

    def applies_to(self, backend: str) -> bool:
        from .backends import is_accelerator  # lazy: asked of the backend classes only when a job is planned

        return not self.accelerators_only or is_accelerator(backend)

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
