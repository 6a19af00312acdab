"""The shape of the package: no import cycle, backend kinds compared only inside the backends, imports at the
top (lazy ones say why), one registry of names that the CLI, the workflow, the report and the captions agree
with, and dead code kept out."""

from __future__ import annotations

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
                return stack[stack.index(nxt):] + [nxt]
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


KIND_COMPARISON = re.compile(r"""(==|!=)\s*["'](cpu|cuda|rocm|mps|xla|xpu)["']|["'](cpu|cuda|rocm|mps|xla|xpu)["']\s*(==|!=)"""
                             r"""|\bin\s*\(\s*["'](cpu|cuda|rocm|mps|xla|xpu)["']""")


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


def test_cli_lists_every_stage_without_importing_torch():
    code = ("import sys; from accelbench.cli import build_parser; p = build_parser('aggregate'); "
            "print('torch' in sys.modules)")
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
