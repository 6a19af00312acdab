#!/usr/bin/env bash
# Install the system packages the real-tool tests use (idempotent; root + apt).
set -euo pipefail
cd "$(dirname "$0")/.."
for s in .ci/setup-podman.sh .ci/setup-browser.sh; do
  [ -f "$s" ] && bash "$s"
done
# SLURM is installed and started by tests/test_slurm.py itself (.ci/slurm-up.sh), and torn down after; the
# multi-node cluster of tests/test_fleet_slurm.py likewise (.ci/slurm-fleet-up.sh, .ci/slurm-fleet-down.sh).
