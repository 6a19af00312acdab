"""The docs site: the generated pages match the code, the site builds with ``mkdocs build --strict``, and the README
stays a front page.

``python -m accelbench.docs`` writes docs/reference/columns.md (from the registry's tables), docs/reference/config.md
(from the config schema) and the README's stage table (from the registry's stages); ``--check`` fails while one is
stale. The checks here run it on the checkout, and on a copy where a page, the registry or the schema was changed, so
a stale page is seen to fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from accelbench import docs, registry
from accelbench.run import config as cfg

REPO = Path(__file__).resolve().parents[1]
README_LIMIT_BYTES = 12 * 1024


def copy_generated(tmp_path: Path) -> Path:
    """A root holding what ``accelbench.docs`` reads and writes: README.md and docs/reference/."""
    (tmp_path / "docs").mkdir()
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    shutil.copytree(REPO / "docs" / "reference", tmp_path / "docs" / "reference")
    return tmp_path


def test_generated_pages_are_current():
    proc = subprocess.run(
        [sys.executable, "-m", "accelbench.docs", "--check"], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_check_fails_on_a_stale_page_and_writing_fixes_it(tmp_path, capsys):
    root = copy_generated(tmp_path)
    page = root / docs.COLUMNS_PAGE
    page.write_text(page.read_text().replace("`tflops`", "`tflops_renamed`", 1))
    assert docs.main(["--check", "--root", str(root)]) == 1
    assert str(docs.COLUMNS_PAGE) in capsys.readouterr().err
    assert docs.main(["--root", str(root)]) == 0
    assert docs.main(["--check", "--root", str(root)]) == 0
    assert page.read_text() == (REPO / docs.COLUMNS_PAGE).read_text()


def test_check_fails_when_the_registry_changes(tmp_path, monkeypatch):
    root = copy_generated(tmp_path)
    assert docs.main(["--check", "--root", str(root)]) == 0
    name, table = next((n, t) for n, t in registry.TABLES.items() if t.file)
    monkeypatch.setitem(registry.TABLES, name, replace(table, extra=(*table.extra, "a_new_column_s")))
    assert docs.main(["--check", "--root", str(root)]) == 1
    docs.main(["--root", str(root)])
    text = (root / docs.COLUMNS_PAGE).read_text()
    assert f"### {name}\n" in text and "| `a_new_column_s` | extra |" in text


def test_check_fails_when_a_stage_changes(tmp_path, monkeypatch):
    root = copy_generated(tmp_path)
    name, stage = next(iter(registry.STAGES.items()))
    monkeypatch.setitem(registry.STAGES, name, replace(stage, help="a new help <line>"))
    assert docs.main(["--check", "--root", str(root)]) == 1
    docs.main(["--root", str(root)])
    assert "| a new help &lt;line&gt; |" in (root / "README.md").read_text()


def test_check_fails_when_the_schema_changes(tmp_path, monkeypatch):
    root = copy_generated(tmp_path)
    schema = cfg.load_schema()
    schema["properties"]["seed"] = {**schema["properties"]["seed"], "default": 7, "description": "the seed"}
    monkeypatch.setattr(cfg, "load_schema", lambda path=None: schema)
    assert docs.main(["--check", "--root", str(root)]) == 1
    docs.main(["--root", str(root)])
    assert "| `seed` | integer | ≥ 0 | `7` | the seed |" in (root / docs.CONFIG_PAGE).read_text()


def test_columns_page_lists_every_documented_and_extra_column():
    text = (REPO / docs.COLUMNS_PAGE).read_text()
    sections = dict(re.findall(r"^### (\w+)\n(.*?)(?=^### |\Z)", text, re.DOTALL | re.MULTILINE))
    assert set(sections) == set(registry.TABLES)
    shared = [*registry.PROVENANCE, *registry.DEVICE]
    for name, table in registry.TABLES.items():
        rows = re.findall(r"^\| `(\w+)` \| (documented|extra)", sections[name], re.MULTILINE)
        listed = [c for c, _ in rows]
        cols = list(table.columns)
        if cols[: len(shared)] == shared:
            cols = cols[len(shared) :]
            assert "Starts with the provenance and device columns." in sections[name]
        assert listed == [*cols, *table.extra], name
        assert [k for _, k in rows] == ["documented"] * len(cols) + ["extra"] * len(table.extra), name
    for name, identity in registry.POINT_IDENTITY.items():
        assert "point identity" in sections[name] and all(f"`{c}`" in sections[name] for c in identity), name


def test_config_page_lists_every_schema_key_with_its_default():
    text = (REPO / docs.CONFIG_PAGE).read_text()
    rows = dict(re.findall(r"^\| `([\w.]+)` \|(.*)$", text, re.MULTILINE))
    schema = cfg.load_schema()

    def walk(node, prefix=""):
        for name, sub in (node.get("properties") or {}).items():
            sub = docs._resolve(schema, sub)
            yield f"{prefix}{name}", sub
            if sub.get("type") == "object" and sub.get("properties"):
                yield from walk(sub, f"{prefix}{name}.")

    keys = dict(walk(schema))
    assert set(rows) == set(keys)
    for key, node in keys.items():
        if "default" in node and not node.get("properties"):
            assert f"`{json.dumps(node['default'])}`" in rows[key], key
        for value in node.get("enum", ()):
            assert f"`{value}`" in rows[key], (key, value)


def test_mkdocs_build_strict(tmp_path):
    mkdocs = shutil.which("mkdocs") or str(Path(sys.executable).parent / "mkdocs")
    if not Path(mkdocs).exists():
        pytest.fail("mkdocs is missing: pip install -e '.[docs]'")
    proc = subprocess.run(
        [mkdocs, "build", "--strict", "-d", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").exists()
    for page in ("measurements", "reference/columns", "reference/config"):
        assert (tmp_path / "site" / page / "index.html").exists(), page


def test_every_page_is_in_the_nav():
    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]

    def files(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for item in node:
                yield from files(item)
        elif isinstance(node, dict):
            for value in node.values():
                yield from files(value)

    listed = set(files(nav))
    pages = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    assert pages == listed


def test_readme_is_a_front_page():
    readme = (REPO / "README.md").read_bytes()
    assert len(readme) <= README_LIMIT_BYTES, len(readme)
    text = readme.decode()
    # the two quick-start commands, exactly as the tests and CI run them
    assert (
        "python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 -e . && "
        'PATH="$PWD/.venv/bin:$PATH" snakemake --cores 4'
    ) in text
    assert "\nbash tests/run.sh\n" in text
    # the screenshot is a file under docs/, small, and a PNG
    shot = re.search(r"!\[[^\]]*\]\((docs/[^)]+\.png)\)", text).group(1)
    data = (REPO / shot).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and 10_000 < len(data) < 300_000
    # every stage in the table, and every link into docs/ resolves
    for stage in registry.STAGES:
        assert f"| `{stage}` | `accelbench {stage}` |" in text, stage
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (REPO / link).exists(), link


def test_user_pages_say_nothing_of_a_particular_machine():
    """Dated figures and notes about the machine they were taken on belong to the measurements page."""
    machine_words = re.compile(r"this (VM|machine|session)|on this \d-core", re.IGNORECASE)
    for page in (REPO / "docs").rglob("*.md"):
        if page.name == "measurements.md":
            continue
        hits = [line for line in page.read_text().splitlines() if machine_words.search(line)]
        assert not hits, (page.name, hits[:3])
        dated = [
            line
            for line in page.read_text().splitlines()
            if re.search(r"\b20\d\d-\d\d-\d\d\b", line)
            and "measurements.md" not in line
            and not re.search(r"commit|read 20|\(20\d\d-\d\d-\d\d\)|, 20\d\d-\d\d-\d\d", line)
        ]
        assert not dated, (page.name, dated[:3])


def test_measurements_each_have_a_date_a_machine_and_a_command():
    text = (REPO / "docs" / "measurements.md").read_text()
    entries = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    assert len(entries) >= 10
    for entry in entries:
        title = entry.splitlines()[0]
        assert re.search(r"^- \*\*Date\*\*: 20\d\d-\d\d-\d\d", entry, re.MULTILINE), title
        assert re.search(r"^- \*\*Machine\*\*: \S", entry, re.MULTILINE), title
        assert re.search(r"^- \*\*Command\*\*: .*`", entry, re.MULTILINE), title


@pytest.mark.browser
def test_screenshot_script_shoots_a_report(tmp_path):
    """docs/make_screenshot.py (the README's picture) opens a report in headless Chromium and saves a small PNG."""
    missing = [p for p in ("chromium", "chromedriver") if not shutil.which(p)]
    if missing:
        msg = f"needs {', '.join(missing)}: run bash .ci/setup-browser.sh"
        if os.environ.get("ACCELBENCH_REQUIRE_BROWSER") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    from fixture_runs import build

    report = build(tmp_path / "fixtures", "cpu_only")["report"]
    out = tmp_path / "shot.png"
    proc = subprocess.run(
        [sys.executable, str(REPO / "docs" / "make_screenshot.py"), "--report", str(report), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and 10_000 < len(data) < 300_000
    from PIL import Image

    with Image.open(out) as image:
        assert image.size == (1366, 800) and image.mode == "P"
