#!/usr/bin/env bash
# Lint, as CI will run it: ruff (lint and format; rules in pyproject.toml [tool.ruff]) on the Python, snakefmt on
# the Snakefile and workflow/, and `snakemake --lint`, where one finding is explained and allowed (below).
# Tools: pip install -e '.[lint]' (ruff and snakefmt, their minor versions pinned: rules and style move between them).
#
# tests/run.sh runs this first, before pytest (and so does CI). Never `ruff check --unsafe-fixes` on the whole
# tree: E712's "fix" turns pandas masks `s == True` into truthiness tests. A `# noqa` that carries a reason must
# be a plain comment instead (RUF100's fix drops the whole comment, reason included).
#
# snakemake --lint's one allowed finding:
#   "Specify a conda environment or container for each rule": the device rules run in the backend's image
#   (container.runtime docker/podman: `accelbench container exec`; apptainer: the rule's `container:`) or on the
#   host by choice (container.runtime none, the default: the host's own torch is what is measured); the report
#   and bookkeeping rules need only this package. A conda environment would pin a second torch beside the one
#   being benchmarked (docs/contributing.md).
# Any other finding fails.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in ruff snakefmt snakemake; do
  command -v "$tool" >/dev/null || { echo "lint: $tool not found (pip install -e '.[lint]')" >&2; exit 2; }
done
ALLOWED="Specify a conda environment or container for each rule."
ruff check src tests bench docs/make_screenshot.py
ruff format --check src tests bench docs/make_screenshot.py
snakefmt --check Snakefile workflow
out=$(snakemake --lint --cores 1 2>&1) || true
findings=$(printf '%s\n' "$out" | sed -n 's/^    \* \(.*\):$/\1/p' | sort -u)
other=$(printf '%s\n' "$findings" | grep -vxF "$ALLOWED" | grep -v '^$' || true)
if [ -n "$other" ]; then
  printf '%s\n' "$out" >&2
  echo "snakemake --lint: findings other than the explained one:" >&2
  printf '  %s\n' "$other" >&2
  exit 1
fi
if ! printf '%s\n' "$out" | grep -q "Lints for rule\|Congratulations"; then
  printf '%s\n' "$out" >&2
  echo "snakemake --lint did not run" >&2
  exit 1
fi
echo "lint: ruff, ruff format, snakefmt and snakemake --lint clean (allowed: '$ALLOWED')"
