#!/usr/bin/env bash
# Stop only the daemons that .ci/slurm-fleet-up.sh started (listed in $BASE/run/started.pids), after cancelling
# the jobs of its cluster. PURGE=1 also deletes $BASE (config, state, logs).
set -uo pipefail
BASE=${BASE:-/tmp/slurm-fleet}
STARTED="$BASE/run/started.pids"
export SLURM_CONF="$BASE/etc/slurm.conf"

if [ -f "$STARTED" ] && grep -q '^slurmctld ' "$STARTED" && [ -f "$SLURM_CONF" ]; then
  timeout 20 scancel --user "$(id -un)" 2>/dev/null || true
  sleep 1
fi

stop() {  # name pidfile
  local name=$1 pf=$2 pid
  [ -s "$pf" ] || { echo "[fleet-teardown] $name: no pid file $pf"; return; }
  pid=$(cat "$pf")
  if ! kill -0 "$pid" 2>/dev/null; then echo "[fleet-teardown] $name ($pid) not running"; return; fi
  if [ "$(cat /proc/"$pid"/comm 2>/dev/null)" != "$name" ]; then
    echo "[fleet-teardown] $name: pid $pid is now another process; leaving it alone"; return
  fi
  kill -TERM "$pid"
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; echo "[fleet-teardown] $name ($pid) killed"
  else echo "[fleet-teardown] $name ($pid) stopped"; fi
}

if [ -f "$STARTED" ]; then
  # reverse start order: every slurmd, slurmctld, munged (only if this script's up started it)
  while read -r name pf; do [ "$name" = slurmd ] && stop slurmd "$pf"; done < "$STARTED"
  while read -r name pf; do [ "$name" = slurmctld ] && stop slurmctld "$pf"; done < "$STARTED"
  while read -r name pf; do [ "$name" = munged ] && stop munged "$pf"; done < "$STARTED"
  rm -f "$STARTED"
else
  echo "[fleet-teardown] nothing recorded in $STARTED"
fi
[ "${PURGE:-0}" = 1 ] && rm -rf "$BASE" && echo "[fleet-teardown] purged $BASE"
exit 0
