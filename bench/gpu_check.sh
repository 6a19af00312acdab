#!/usr/bin/env bash
# The GPU check: what a session lent a GPU machine (the device tool) runs, in ONE call, in at most 6 minutes.
#
# The steps in plan() run in order, each under its own time budget (`timeout`); the budgets plus a reserve for
# packing add up to at most 360 s, so a second try still fits the 15 minutes of device time a task gets
# (a fresh machine takes minutes to start). `bash bench/gpu_check.sh --dry-run` prints every step with its
# budget and fails when the sum is over. The key numbers come first:
#   1. setup     snakemake from the carried wheels; the GPU's name
#   2. headline  bf16 and fp8 matmul TFLOP/s at n=8192, measured as the matmul stage does (bench/gpu_headline.py)
#   3. fidelity  accelbench against a bare torch.utils.benchmark loop, bf16 4096^3 and 8192^3
#                (bench/harness_fidelity.py)
#   4. pipeline  the whole pipeline at small sizes, every stage on (bench/gpu_config.yaml), then its report
#   5. summary   one line per table, stage and headline of that run (bench/gpu_summary.py)
#   6. telemetry the NVML sampler's cost: bf16 matmul with the sampler off and on (bench/telemetry_overhead.py)
# Every line a step prints that starts with "KEY " goes into summary.txt when the step ends.
#
# What comes back in $OUT (the device tool returns at most 8 files of at most 16 MiB, 2 folders deep; checked
# at the end, and by --dry-run for the list):
#   summary.txt      the KEY lines in the order they were found, one line per step (budget, time, exit status)
#   steps.log        each step's output (its last 400 lines)
#   results.tar.gz   the pipeline's results/ (CSVs, devices.json, logs, plots, report) and every step's files
#                    (steps/<name>/), packed again after each step, so a run cut short returns what it did
#   report.html      the HTML report, once written
#
# Adding to the check:
#   - a pipeline stage (registry.STAGES) runs in step 4 by itself: give it small sizes in its Stage.gpu_check;
#     gpu_summary.py lists every registry table it finds, so it shows in summary.txt too;
#   - a script: ONE line `step NAME BUDGET_S command...` in plan() (the command is a program, or a function
#     defined here and exported); it writes its files to "$STEP_OUT" and prints "KEY ..." lines for the
#     summary. Take its budget from another step: --dry-run (tests/test_bench.py) fails over 360 s.
#
# Here, once, from the repository root (the device machine cannot fetch; its python3 is 3.12 with torch,
# pandas, seaborn, jinja2, scipy, but no snakemake):
#     .venv/bin/python bench/gpu_wheels.py          # -> .gpu-wheels/ (ignored by git, ~26 MiB)
# then: device run  command="bash bench/gpu_check.sh"  carry=[".gpu-wheels"]  timeout_s=420
# accelbench itself is not installed there: it runs from this checkout (PYTHONPATH=src and an `accelbench`
# launcher on PATH); snakemake and its missing dependencies go to a scratch --target folder.
#
# A CPU stand-in (a python3 with torch and pandas but no snakemake; wheels for its Python version; budgets
# scaled, as 2 shared cores are no H200):
#     PYTHON=/path/to/python3 GPU_WHEELS=/path/to/wheels GPU_CHECK_CONFIG=bench/gpu_standin.yaml \
#       GPU_CHECK_BUDGET_SCALE=10 OUT=/tmp/gc bash bench/gpu_check.sh
set -uo pipefail

LIMIT_S=${GPU_CHECK_LIMIT_S:-360}   # the check's own time, all steps together
RESERVE_S=10                        # packing results.tar.gz and writing the summary between steps
SCALE=${GPU_CHECK_BUDGET_SCALE:-1}  # stand-ins only: every budget times this
MAX_FILES=8
MAX_MIB=16
RETURNED="summary.txt steps.log results.tar.gz report.html"

DRY_RUN=0
case "${1:-}" in
  --dry-run) DRY_RUN=1 ;;
  "") ;;
  *) echo "usage: bash bench/gpu_check.sh [--dry-run]" >&2; exit 2 ;;
esac

# ---- the plan: one line per step (name, budget in seconds, command) -------------------------------------------
plan() {
  step setup       20  setup
  step headline    25  "$PY" bench/gpu_headline.py --out "$STEPS/headline"
  step fidelity    40  fidelity
  step pipeline   230  pipeline
  step summary     10  "$PY" bench/gpu_summary.py "$WORK/results"
  step telemetry   20  telemetry
}

# ---- the steps that are more than one command -----------------------------------------------------------------
setup() {
  date -u
  nvidia-smi -L 2>/dev/null || rocm-smi --showproductname 2>/dev/null || echo "no nvidia-smi or rocm-smi"
  if compgen -G "$WHEELS/*.whl" > /dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
      "$WHEELS"/*.whl || return 1
  else
    echo "no wheels in $WHEELS: snakemake must be importable already"
  fi
  "$PY" -c "import torch, snakemake, accelbench
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no CUDA/ROCm device'
print('KEY setup: torch', torch.__version__, '| cuda', torch.version.cuda, '| hip', torch.version.hip, '|', gpu,
      '| snakemake', snakemake.__version__, '| accelbench', accelbench.__file__)"
}

telemetry() {
  local device args rc
  device=$("$PY" bench/gpu_headline.py --which-device) || return 1
  args=(--device "$device" --rounds 3 --gap-s 0.1 --min-run-time 0.1)
  if [ "$device" = cpu ]; then  # the stand-in
    args+=(--threads 1 --dtype float32 --sizes 256)
  else
    args+=(--threads 1 --dtype bfloat16 --sizes 4096 8192)
  fi
  "$PY" bench/telemetry_overhead.py "${args[@]}" | tee "$STEP_OUT/telemetry.txt"
  rc=${PIPESTATUS[0]}
  grep -E "^(one reading|sampler thread|ratio)" "$STEP_OUT/telemetry.txt" | sed "s/^/KEY telemetry $device: /"
  return "$rc"
}

fidelity() {
  local device args rc
  device=$("$PY" bench/gpu_headline.py --which-device) || return 1
  args=(--device "$device" --threads 1 --rounds 2 --gap-s 0.1)
  if [ "$device" = cpu ]; then  # the stand-in: bf16 is emulated on most CPUs
    args+=(--dtype float32 --sizes 256 --min-run-time 0.1)
  else
    args+=(--dtype bfloat16 --sizes 4096 8192)
  fi
  "$PY" bench/harness_fidelity.py "${args[@]}" | tee "$STEP_OUT/fidelity.txt"
  rc=${PIPESTATUS[0]}
  tail -n 4 "$STEP_OUT/fidelity.txt" | sed "s/^/KEY fidelity $device: /"
  return "$rc"
}

pipeline() {
  if [ -n "${GPU_CHECK_CONFIG:-}" ]; then  # a whole config of its own (the CPU stand-in)
    cp "$CONFIG" "$WORK/config.yaml"
  else  # the run-wide keys and each stage's gpu_check section (bench/gpu_config.py); JSON is YAML too
    "$PY" bench/gpu_config.py "$CONFIG" "$WORK/config.yaml" || return 2
  fi
  "$PY" -m snakemake -s "$PWD/Snakefile" --directory "$WORK" --configfile "$WORK/config.yaml" \
    --cores all --resources bench=1 --show-failed-logs
}

# ---- the machinery --------------------------------------------------------------------------------------------
TOTAL_S=0
step() {  # step NAME BUDGET_S command...: run it under its budget, keep its output, KEY lines, files
  local name=$1 budget=$2
  shift 2
  TOTAL_S=$((TOTAL_S + budget))
  if [ "$DRY_RUN" = 1 ]; then
    printf '  %-10s %4d s  %s\n' "$name" "$budget" "$*"
    return 0
  fi
  local limit=$((budget * SCALE)) dir="$STEPS/$name" t0=$SECONDS rc how
  mkdir -p "$dir"
  STEP_OUT="$dir" timeout -k 5 "$limit" bash -c '"$@"' "$name" "$@" > "$dir/output.txt" 2>&1
  rc=$?
  case $rc in
    0) how="ok" ;;
    124 | 137) how="TIMED OUT (its budget)" ;;
    *) how="FAILED (exit $rc)" ;;
  esac
  { echo "=== $name: $how in $((SECONDS - t0)) s (budget $limit s): $*"; tail -n 400 "$dir/output.txt"; } \
    >> "$OUT/steps.log"
  grep -a '^KEY ' "$dir/output.txt" | cut -c5- >> "$OUT/summary.txt"
  printf 'step %-10s %s in %d s (budget %d s)\n' "$name" "$how" "$((SECONDS - t0))" "$limit" >> "$OUT/summary.txt"
  pack
}

pack() {  # results.tar.gz and report.html from what exists now; leaner when over the size limit
  local parts=(steps) tmp="$OUT/.results.tar.gz"
  [ -d "$WORK/results" ] && parts+=(results)
  tar -czf "$tmp" -C "$WORK" --exclude=.snakemake "${parts[@]}" 2>/dev/null
  if [ "$(stat -c %s "$tmp")" -gt $(((MAX_MIB - 1) * 1048576)) ]; then
    tar -czf "$tmp" -C "$WORK" --exclude=.snakemake --exclude='*.svg' --exclude='*.png' --exclude=report.html \
      "${parts[@]}" 2>/dev/null
  fi
  mv -f "$tmp" "$OUT/results.tar.gz"
  local report="$WORK/results/report.html"
  if [ -f "$report" ] && [ "$(stat -c %s "$report")" -le $((MAX_MIB * 1048576)) ]; then
    cp -f "$report" "$OUT/report.html"
  fi
}

check_returned() {  # the device tool's limits on $OUT: files, size, depth
  local f n
  while IFS= read -r f; do  # too large: a log keeps its tail, anything else goes (said in the summary)
    case $f in
      *.log | *.txt) tail -c $(((MAX_MIB - 1) * 1048576)) "$f" > "$f.tail" && mv -f "$f.tail" "$f" ;;
      *) rm -f "$f" ;;
    esac
    echo "limits: $(basename "$f") was over $MAX_MIB MiB (log: tail kept; other: removed)" >> "$OUT/summary.txt"
  done < <(find "$OUT" -type f -size +$((MAX_MIB * 1024))k)
  n=$(find "$OUT" -type f | wc -l)
  if [ "$n" -gt "$MAX_FILES" ] || [ -n "$(find "$OUT" -mindepth 4 -type f)" ]; then
    echo "limits: $n files under \$OUT (at most $MAX_FILES, at most 2 folders deep): NOT within the limits" \
      >> "$OUT/summary.txt"
    return 1
  fi
  echo "limits: $n files under \$OUT, each <= $MAX_MIB MiB, none deeper than 2 folders" >> "$OUT/summary.txt"
}

if [ "$DRY_RUN" = 1 ]; then
  PY=${PYTHON:-python3} WORK='$WORK' STEPS='$WORK/steps'
  echo "GPU check plan (budget per step; the check stops each step at its budget):"
  plan
  total=$((TOTAL_S + RESERVE_S))
  n=$(echo "$RETURNED" | wc -w)
  echo "total: $TOTAL_S s of steps + $RESERVE_S s reserved for packing = $total s (limit $LIMIT_S s)"
  echo "returned: $RETURNED ($n files, at most $MAX_FILES; each kept <= $MAX_MIB MiB; no folders)"
  if [ "$total" -gt "$LIMIT_S" ] || [ "$n" -gt "$MAX_FILES" ]; then
    echo "NOT within the limits: trim a step's budget (or a file)" >&2
    exit 1
  fi
  echo "within the limits"
  exit 0
fi

OUT=${OUT:-/tmp/accelbench-gpu-check}
CONFIG=${GPU_CHECK_CONFIG:-bench/gpu_config.yaml}
WHEELS=${GPU_WHEELS:-.gpu-wheels}
PY=$(command -v "${PYTHON:-python3}")
WORK=$(mktemp -d)
SITE=$(mktemp -d)
STEPS="$WORK/steps"
mkdir -p "$OUT" "$WORK/bin" "$STEPS"
rm -f "$OUT/summary.txt" "$OUT/steps.log" "$OUT/results.tar.gz" "$OUT/report.html"
# the `accelbench` the rules call: this checkout's, by this python (not in $SITE/bin: pip --target --upgrade
# replaces that folder with the wheels' scripts)
printf '#!/bin/sh\nexec "%s" -m accelbench.cli "$@"\n' "$PY" > "$WORK/bin/accelbench"
chmod +x "$WORK/bin/accelbench"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$WORK/bin:$SITE/bin:$(dirname "$PY"):$PATH"
export PY WORK SITE STEPS WHEELS CONFIG OUT
export -f setup fidelity pipeline telemetry
echo "accelbench GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), checkout $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  > "$OUT/summary.txt"
started=$SECONDS
plan
echo "check: $((SECONDS - started)) s in all (limit $LIMIT_S s x scale $SCALE)" >> "$OUT/summary.txt"
check_returned
rc=$?
rm -rf "$WORK" "$SITE"
exit "$rc"
