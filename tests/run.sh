#!/usr/bin/env bash
# Set up everything the test suite needs, then run it. The README's test command and CI's.
#   bash tests/run.sh            # all tests, real Podman, SLURM and Chromium included (needs root + apt)
#   bash tests/run.sh -k config  # extra arguments go to pytest
#   bash tests/run.sh --quick    # the inner loop: everything but the slow tests (-m "not slow": the real
#                                # pipeline, the subprocess benchmarks and the real-tool tests); no system tools;
#                                # two pytest-xdist workers (add -n 0 for one process, -n auto for every core)
set -euo pipefail
QUICK=0
if [ "${1:-}" = "--quick" ]; then
  QUICK=1
  shift
fi
cd "$(dirname "$0")/.."
ROOT=$PWD

# 1. Python: a venv with the CPU build of torch (taken from the local wheel cache where present)
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install -q torch==2.13.0 -e '.[test,slurm,kubernetes,docs,lint]'
export PATH="$ROOT/.venv/bin:$PATH"

# 1b. Lint first (seconds): ruff, ruff format, snakefmt, snakemake --lint (.ci/lint.sh says what is allowed)
bash .ci/lint.sh

# 2. System tools for the real-tool tests: Podman (containers), SLURM (cluster), Chromium (report)
if [ "$QUICK" = 1 ]; then
  # two workers (CI's core count): 5.5 min -> 3.4 min (docs/measurements.md); the full suite, whose slow tests
  # judge real timings, stays in one process
  exec python -m pytest -ra -m "not slow" -n 2 "$@"
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  bash .ci/setup-system.sh
  # the tools are installed now: a missing one must fail its tests, not skip them
  export ACCELBENCH_REQUIRE_BROWSER=1
else
  echo "tests/run.sh: not root or no apt-get: the container, SLURM and browser tests need podman, slurm and chromium installed" >&2
fi

# 3. The docs site (also built by tests/test_docs.py; here first, so a broken page fails fast)
SITE=$(mktemp -d)
NO_MKDOCS_2_WARNING=1 mkdocs build --strict --quiet -d "$SITE"
rm -rf "$SITE"

# 4. The tests
exec python -m pytest -ra "$@"
