"""The shape of the package: no import cycle, backend kinds compared only inside the backends, imports at the
top (lazy ones say why), one registry of names that the CLI, the workflow, the report and the captions agree
with, and dead code kept out."""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from accelbench import backends, registry

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "src" / "accelbench"
SOURCES = sorted(p for p in PKG.rglob("*.py"))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(p): p for p in SOURCES}


def imports_of(path: Path) -> set[str]:
    """Every accelbench module ``path`` imports, at any depth of the file (lazy imports count too)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "accelbench"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "accelbench":
                continue
            for alias in node.names:  # `from pkg import module` imports the module
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in MODULES else target)
    return {m for m in out if m in MODULES and m != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_import_graph_has_no_cycle():
    graph = {name: imports_of(path) for name, path in MODULES.items()}
    assert sum(map(len, graph.values())) > 40  # the graph was really read
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_cycle_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


KIND_COMPARISON = re.compile(
    r"""(==|!=)\s*["'](cpu|cuda|rocm|mps|xla|xpu)["']|["'](cpu|cuda|rocm|mps|xla|xpu)["']\s*(==|!=)"""
    r"""|\bin\s*\(\s*["'](cpu|cuda|rocm|mps|xla|xpu)["']"""
)


def test_backend_kinds_are_compared_only_inside_the_backends():
    """What differs between devices lives in accelbench.backends; no other source line compares kind names
    (the brief's check: grep -rnE '== *"(cuda|rocm|mps|xla|xpu|cpu)"' src/)."""
    offenders = []
    for path in SOURCES + sorted((REPO / "workflow").rglob("*.smk")) + [REPO / "Snakefile"]:
        if PKG / "backends" in path.parents:
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if KIND_COMPARISON.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
    assert KIND_COMPARISON.search('if backend == "cuda":') and KIND_COMPARISON.search("kind in ('cpu', 'mps')")


def test_lazy_imports_say_why():
    """Imports are at the top of each module; an import inside a function is deliberate and its line says why."""
    silent = []
    for path in SOURCES:
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)) and "#" not in lines[inner.lineno - 1]:
                        silent.append(f"{path.relative_to(REPO)}:{inner.lineno}: {lines[inner.lineno - 1].strip()}")
    assert not silent, "imports inside functions without a reason:\n" + "\n".join(silent)


def test_registry_of_backends_matches_the_schema():
    schema = yaml.safe_load((PKG / "data" / "config.schema.yaml").read_text())
    assert list(schema["definitions"]["backend"]["enum"]) == list(backends.NAMES)
    peak_keys = schema["properties"]["matmul"]["properties"]["peak_tflops"]["propertyNames"]["enum"]
    assert list(peak_keys) == list(backends.NAMES)
    assert (REPO / "workflow" / "schemas" / "config.schema.yaml").resolve() == (PKG / "data" / "config.schema.yaml")


def test_every_stage_module_has_its_cli_and_every_table_a_writer():
    for stage in registry.STAGES.values():
        module = importlib.import_module(stage.module)
        assert callable(module.add_arguments) and callable(module.cli), stage.name
        for table in stage.tables:
            assert registry.TABLES[table].stage == stage.name
    for name, table in registry.TABLES.items():
        assert table.stage in registry.STAGES, name
        if table.file:
            assert registry.table_of(table.filename("cuda")) == name
    names = [t.filename("cpu") for t in registry.TABLES.values() if t.file]
    assert len(names) == len(set(names))
    for stage in registry.DEVICE_STAGES:
        assert stage.method_version and stage.method_version >= 1, stage.name


def test_every_figure_has_one_caption_and_the_report_quotes_it():
    from accelbench.reporting.html import caption

    for fig in registry.FIGURES.values():
        path = REPO / registry.CAPTIONS_DIR / fig.caption
        assert path.is_file(), path
        lead = path.read_text().strip().split("\n\n")[0]
        text = caption(REPO / registry.CAPTIONS_DIR, fig.name)
        assert text["text"] and text["text"].split()[:3] == re.sub(r"[`*]", "", lead).split()[:3]
        assert all(t in registry.TABLES for t in fig.tables)
    from accelbench.reporting import plots

    for name in registry.FIGURES:
        assert callable(plots.drawer(name)), name
    html_src = (PKG / "reporting" / "html.py").read_text()
    assert "FIGURE_TEXT" not in html_src  # the captions are the one text


def test_every_subcommand_formats_its_help():
    """``accelbench STAGE --help`` of every stage: argparse %-formats each help text, so a lone percent sign (an
    f-string's ``{x:.0%}``) breaks the help of that command only when someone asks for it."""
    from accelbench.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        text = p.format_help()
        assert name in text and "usage:" in text, name


def test_cli_lists_every_stage_without_importing_torch():
    code = (
        "import sys; from accelbench.cli import build_parser; p = build_parser('aggregate'); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
    proc = subprocess.run([sys.executable, "-m", "accelbench", "--help"], capture_output=True, text=True, check=True)
    for name in registry.STAGES:
        assert name in proc.stdout


@pytest.mark.parametrize("name", ["pct_of_peak", "is_above_peak"])
def test_dead_peak_helpers_are_gone(name):
    from accelbench.backends import peaks

    assert not hasattr(peaks, name)


def test_dead_code_is_gone():
    from accelbench.measure import timing
    from accelbench.reporting import aggregate
    from accelbench.run import io

    assert not hasattr(timing, "stats_of_measurement") and not hasattr(timing.TimingStats, "as_dict")
    assert not hasattr(io.Checkpoint, "all")
    assert not hasattr(aggregate.Problems, "rel") and not hasattr(aggregate.Problems, "root")
    for old in ("backend", "summary", "amp_summary", "stage", "devices"):  # columns.py is back: the shared columns
        assert not (PKG / f"{old}.py").exists(), old


# ---- the plug-in architecture (issue 20) ---------------------------------------------------------------------


def test_registry_imports_no_backend():
    """Listing the names (the CLI, the Snakefile, the docs) never imports torch, psutil or a backend module: the
    backends' names are read from their classes only when a file is matched or a job planned."""
    code = (
        "import sys, accelbench.registry as r; assert r.STAGES and r.TABLES; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'psutil', 'pandas') "
        "or m.startswith('accelbench.backends')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", out


def test_measure_imports_nothing_upward():
    """measure/ is the statistics and timing layer: it imports no stage, no reporting and no run module."""
    upward = ("accelbench.stages", "accelbench.reporting", "accelbench.run")
    offenders = [
        f"{name} imports {dep}"
        for name, path in MODULES.items()
        if name.startswith("accelbench.measure")
        for dep in imports_of(path)
        if dep.startswith(upward)
    ]
    assert not offenders, "\n".join(offenders)
    assert any(name.startswith("accelbench.measure.") for name in MODULES)  # the layer was really read


def test_every_stage_plugin_is_declared_light_and_collected():
    """Each plug-in module declares PLUGIN with the standard library and the plug-in API only, and the registry
    has each of its tables, figures and sections."""
    from accelbench import plugin

    light = {"accelbench.plugin", "accelbench.columns"}
    for name in registry.PLUGINS:
        module = importlib.import_module(name)
        assert isinstance(module.PLUGIN, plugin.Stage), name
        deps = imports_of(MODULES[name])
        assert deps <= light | set(registry.PLUGINS), (name, deps - light)
        stage = registry.STAGES[module.PLUGIN.name]
        assert [t.name for t in module.PLUGIN.tables] == list(stage.tables)
        assert all(registry.TABLES[t.name].stage == stage.name for t in module.PLUGIN.tables)
        assert all(f.name in registry.FIGURES for f in module.PLUGIN.figures)
        for s in module.PLUGIN.sections:
            assert registry.SECTIONS[s.name].package == name
            assert (PKG.parent / name.replace(".", "/") / s.template).is_file(), (name, s.template)
    orders = [s.order for s in registry.SECTIONS.values()]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)


def test_declared_roles_live_in_their_stage_package():
    """A table's GPU-check summary lines (Table.gpu_summary) and its comparison sweep (Compare.sweep) are declared
    by its stage: the hook is in the stage's own package and loads, the sweep's column is one of the table's."""
    hooks = {n: t.gpu_summary for n, t in registry.TABLES.items() if t.gpu_summary}
    assert len(hooks) >= 3  # matmul, amp_summary, transfer
    for name, hook in hooks.items():
        package = registry.STAGES[registry.TABLES[name].stage].module.rpartition(".")[0]
        assert hook.module.startswith(package + "."), (name, hook.target)
        assert callable(hook.load()), name
    sweeps = {n: t for n, t in registry.TABLES.items() if t.compare and t.compare.sweep}
    assert sweeps
    for name, t in sweeps.items():
        assert t.compare.sweep.x in t.identity and t.compare.sweep.panel in (None, *t.identity), name


def test_compare_extras_and_references_live_in_their_stage_package():
    """A stage's own comparison (Stage.compare_extras) and its lines against published figures (Stage.references)
    are in its package: the hooks load, the card's template is a file there, and compare_files names a file per
    extra key beside the points."""
    assert registry.COMPARE_EXTRAS and registry.REFERENCES
    for stage in registry.STAGES.values():
        package = stage.module.rpartition(".")[0]
        for x in stage.compare_extras:
            assert x.package == package and x in registry.COMPARE_EXTRAS, (stage.name, x.key)
            for hook in (x.build, x.lines, x.context):
                assert hook.module.startswith(package + ".") and callable(hook.load()), hook.target
            assert (PKG.parent / package.replace(".", "/") / x.template).is_file(), x.include
        if stage.references:
            assert stage.references.module.startswith(package + ".") and callable(stage.references.load())
    files = registry.compare_files("a", "b")
    keys = [x.key for x in registry.COMPARE_EXTRAS]
    assert len(set(keys)) == len(keys) and not set(keys) & set(registry.COMPARE_CORE_FILES)
    assert {k: files[k] for k in keys} == {k: f"{registry.COMPARE_DIR}/a__b_{k}.csv" for k in keys}
    assert list(files) == ["points", *keys, "provenance", "png", "svg"]


def test_a_compare_extra_is_collected_with_its_package_and_a_taken_key_is_refused(tmp_path, monkeypatch):
    pkg = tmp_path / "planted_extra"
    pkg.mkdir()
    body = (
        "from accelbench.plugin import CompareExtra, Hook, Stage\n"
        "X = CompareExtra('{key}', build=Hook('planted_extra.c:build'), lines=Hook('planted_extra.c:lines'),\n"
        "                 context=Hook('planted_extra.c:context'), template='c.html.j2')\n"
        "PLUGIN = Stage('planted-extra', 'a planted stage', 'device', entry='planted_extra.measure',\n"
        "               compare_extras=(X,))\n"
    )
    (pkg / "__init__.py").write_text(body.format(key="planted"))
    monkeypatch.syspath_prepend(str(tmp_path))
    stages = registry._collect((*registry.PLUGINS, "planted_extra"))[0]
    (x,) = stages["planted-extra"].compare_extras
    assert x.package == "planted_extra" and x.include == "planted_extra/c.html.j2"
    for taken in ("provenance", registry.COMPARE_EXTRAS[0].key):
        (pkg / "__init__.py").write_text(body.format(key=taken))
        sys.modules.pop("planted_extra", None)
        with pytest.raises(ValueError, match=f"planted_extra: compare extra '{taken}' is taken"):
            registry._collect((*registry.PLUGINS, "planted_extra"))


def test_compare_covers_every_table_that_declares_it():
    from accelbench.reporting import compare

    declared = [n for n, t in registry.TABLES.items() if t.compare is not None and t.samples]
    assert list(compare.COMPARED_TABLES) == declared and "membw" in declared
    for name in declared:
        t = registry.TABLES[name]
        assert t.compare.median in t.all_columns and set(t.identity) <= set(t.all_columns), name


# Where a stage's or table's name may appear besides its own package: places that read several stages' tables
# and are not plug-ins. Issue 20 shrank it to nothing; a file not listed here that names a stage or table fails
# the test, and a new entry needs its reason.
CROSS_STAGE_READERS: dict[str, str] = {}
# a plug-in may read another's config or tables it is built on (these edges are declared here, in one place)
PLUGIN_USES = {
    "accelbench.stages.matmul_search": {"matmul"},
    "accelbench.stages.scaling": {"amp"},
    "accelbench.stages.amp": {"warmup"},
}


def stage_and_table_names() -> dict[str, str]:
    """Every plug-in stage's name (and rule name) and every one of its tables' names -> its plug-in package."""
    names = {}
    for stage in registry.DEVICE_STAGES:
        package = next(p for p in registry.PLUGINS if stage.module.startswith(p + "."))
        for n in (stage.name, stage.rule, *stage.tables):
            names[n] = package
    return names


def name_offenders(files, names: dict[str, str], allowed=CROSS_STAGE_READERS, root: Path = REPO) -> list[str]:
    alternatives = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    pattern = re.compile(rf"""(?<![\w.])["']({alternatives})["']""")
    out = []
    for path in files:
        rel = str(path.relative_to(root))
        if rel in allowed or not path.is_file():
            continue
        for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for m in pattern.finditer(line):
                owner = names[m.group(1)]
                own_dir = "src/" + owner.replace(".", "/") + "/"
                if rel.startswith(own_dir):
                    continue
                user = next((p for p in PLUGIN_USES if rel.startswith("src/" + p.replace(".", "/") + "/")), None)
                if user and m.group(1) in PLUGIN_USES[user]:
                    continue
                out.append(f"{rel}:{i}: {m.group(1)!r}: {line.strip()[:100]}")
    return out


def test_no_stage_or_table_name_outside_its_own_package():
    """A stage is one plug-in: its name and its tables' names appear in its own package (and its tests), not in
    the rules, the profiles, the reporting or another stage (scan: src, workflow, Snakefile, profiles, bench)."""
    files = sorted(
        [
            *PKG.rglob("*.py"),
            *PKG.rglob("*.j2"),
            *(REPO / "workflow").rglob("*.smk"),
            REPO / "Snakefile",
            *(REPO / "profiles").rglob("*"),
            *(REPO / "bench").rglob("*"),
        ]
    )
    names = stage_and_table_names()
    assert {"membw", "amp_trials", "matmul_search"} <= set(names)
    offenders = name_offenders(files, names)
    assert not offenders, "\n".join(offenders)
    for rel in CROSS_STAGE_READERS:
        assert (REPO / rel).is_file(), f"stale entry: {rel}"


def test_name_scan_finds_a_planted_name(tmp_path):
    names = stage_and_table_names()
    (tmp_path / "workflow").mkdir()
    planted = tmp_path / "workflow" / "x.smk"
    planted.write_text('x = registry.TABLES["membw"]\n')
    assert name_offenders([planted], names, root=tmp_path) == [
        "workflow/x.smk:1: 'membw': " + planted.read_text().strip()
    ]
    own = tmp_path / "src" / "accelbench" / "stages" / "membw" / "x.py"
    own.parent.mkdir(parents=True)
    own.write_text(planted.read_text())
    assert not name_offenders([own], names, root=tmp_path)  # in its own package


def test_a_new_plugin_is_collected_from_its_package_alone(tmp_path, monkeypatch):
    """The proof of the plug-in architecture at the registry: a package with only PLUGIN in its __init__ gives a
    stage (after the others, in PLUGINS order), its tables (with their stage), its figure and its section."""
    pkg = tmp_path / "planted_stage"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from accelbench.columns import DEVICE, PROVENANCE, cols\n"
        "from accelbench.plugin import Compare, Figure, Hook, Resources, Section, Stage, Table\n"
        "PLUGIN = Stage('planted', 'a planted stage', 'device', entry='planted_stage.measure',\n"
        "    tables=(Table('planted', 'planted_{backend}.csv', cols(PROVENANCE, DEVICE, ('x_s', 'status')),\n"
        "                  identity=('device_name',), compare=Compare(median='x_s'),\n"
        "                  samples='planted_{backend}_samples.parquet'),),\n"
        "    figures=(Figure('planted', ('planted',), draw=Hook('planted_stage.figures:draw')),),\n"
        "    sections=(Section('planted', 'Planted', 115),), resources=Resources(mem_mb=123), method_version=1)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    stages, tables, figures, sections = registry._collect((*registry.PLUGINS, "planted_stage"))
    names = list(stages)
    last = importlib.import_module(registry.PLUGINS[-1]).PLUGIN.name  # the plug-in listed last
    assert names.index("planted") == names.index(last) + 1 < names.index("aggregate")
    assert stages["planted"].tables == ("planted",) and stages["planted"].mem_mb == 123
    assert tables["planted"].stage == "planted" and tables["planted"].pattern.match("planted_xpu.csv")
    assert "planted" in figures and sections["planted"].package == "planted_stage"
    assert list(sections)[-1] == "planted"  # order 115: after every other section
    assert set(registry.STAGES) < set(stages)
