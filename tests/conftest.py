"""Fixtures the test files share (session-scoped: built once per pytest run), and the ``slow`` marker's rule.

``fixtures(name)``: a fixture results folder pushed through ``accelbench aggregate/plots/report``
(``fixture_runs.build``: two_runs, cpu_only, incomplete, empty, compared), built once per session.

Real-tool tests (markers ``container``, ``slurm``, ``browser``) are ``slow`` too, so ``bash tests/run.sh --quick``
(``-m "not slow"``) leaves them out.
"""

from __future__ import annotations

import pytest

REAL_TOOLS = ("container", "slurm", "browser")


@pytest.fixture(scope="session")
def fixtures(tmp_path_factory):
    from fixture_runs import build  # lazy: fixture_runs imports the whole package; only report tests need it

    base = tmp_path_factory.getbasetemp() / "accelbench-fixtures"
    return lambda name: build(base, name)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(item.get_closest_marker(m) for m in REAL_TOOLS) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
