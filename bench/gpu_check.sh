#!/usr/bin/env bash
# The GPU check (v2): what a session lent a GPU machine (the device tool) runs, in ONE call, in at most 6 minutes.
#
# The steps in plan() run in order, each under its own time budget; the budgets plus a reserve for packing add
# up to at most 360 s, so a second try still fits the 15 minutes of device time a task gets (a fresh machine
# takes minutes to start). Every budget has at least 30% headroom over that step's two rehearsal times in
# bench/gpu_check_rehearsal.tsv: its H200 estimate (with its basis), and the CPU stand-in's measured seconds
# against the budget times the stand-in's scale. `bash bench/gpu_check.sh --dry-run` prints every step with its
# budget, both times and both headrooms, and fails when one is under 30%, a step has no rehearsal line, or the
# sum is over 360 s (tests/test_gpu_check.py runs it).
#
# Key numbers first; steps that need only torch and the image's packages (no snakemake, no jsonschema) first:
#   device      the GPU's name, torch/CUDA versions (nvidia-smi -L)
#   headline    bf16 and fp8 matmul TFLOP/s at n=8192 (fp8 with and without use_fast_accum; bench/gpu_headline.py)
#   nvml        the sensors idle and under load: power (instant or 1 s average), SM clock, energy counter step
#   setup       snakemake + jsonschema from the carried wheels, into a clean folder (complete or not at all)
#   attention, gpt2_eager, gpt2_compiled, history
#               the stages other developers are adding, at small sizes (bench/gpu_stage.py, bench/gpu_stages.yaml):
#               a step whose stage is not in this build is recorded "not available in this build"
#   fleet       this machine as a one-node fleet: `accelbench fleet --node` on its GPUs, then the verdict
#   fidelity    accelbench against a bare torch.utils.benchmark loop (bench/harness_fidelity.py)
#   pipeline    the whole pipeline at small sizes (bench/gpu_config.yaml), --keep-going
#   report      the report from whatever the pipeline finished (aggregate, plots, report), if it wrote none
#   summary     one line per table of that run (bench/gpu_summary.py)
#   telemetry   the sampler's cost: bf16 matmul with the sampler off and on (bench/telemetry_overhead.py)
# Every line a step prints that starts with "KEY " goes into summary.txt; summary.txt starts with the key numbers
# (bf16 8192^3 TFLOP/s, attention TFLOP/s, gpt2-124m MFU, NVML readings), each "not run (why)" where it has none.
#
# A step that runs past its budget is ended by pid: it runs in its own session (setsid) whose process group gets
# SIGTERM, then SIGKILL; then every process still carrying the step's token in its environment (torchrun's ranks
# start their own sessions, so the group does not reach them) is ended by its pid, and the pids go into the
# step's log. The check goes on with the next step; summary.txt and results.tar.gz are rewritten after each step.
#
# What comes back in $OUT (the device tool returns at most 8 files of at most 16 MiB, 2 folders deep; checked
# at the end, and by --dry-run for the list):
#   summary.txt      the key numbers, the KEY lines in the order they were found, one line per step
#   steps.log        each step's output (its last 400 lines)
#   results.tar.gz   the pipeline's results/ and every step's files (steps/<name>/), packed after each step
#   report.html      the HTML report, once written
#
# Adding to the check:
#   - a pipeline stage (registry.STAGES) runs in the pipeline step by itself: give it small sizes in its
#     Stage.gpu_check; gpu_summary.py lists every registry table it finds, so it shows in summary.txt too;
#   - a script: ONE line `step NAME BUDGET_S command...` in plan() and ONE line for NAME in
#     bench/gpu_check_rehearsal.tsv (its stand-in time, measured, and its H200 estimate); --dry-run fails otherwise.
#
# Here, once, from the repository root (the device machine cannot fetch; its python3 is 3.12 with torch, pandas,
# seaborn, jinja2, scipy, pyyaml, psutil, nvidia-ml-py, but no snakemake and no jsonschema):
#     .venv/bin/python bench/gpu_wheels.py --verify python3.12    # -> .gpu-wheels/ (ignored by git, ~26 MiB)
# then: device run  command="bash bench/gpu_check.sh"  carry=[".gpu-wheels"]  timeout_s=420
#
# The CPU stand-in (docs/gpu_check.md, "Rehearsal"): a python3 with torch and pandas but no snakemake:
#     PYTHON=/path/to/python3 GPU_WHEELS=/path/to/wheels GPU_CHECK_CONFIG=bench/gpu_standin.yaml \
#       GPU_CHECK_BUDGET_SCALE=4 OUT=/tmp/gc bash bench/gpu_check.sh
# GPU_CHECK_ONLY=headline,nvml (comma-separated step names) runs those steps alone (a rerun of a few).
set -uo pipefail

LIMIT_S=${GPU_CHECK_LIMIT_S:-360}   # the check's own time, all steps together
RESERVE_S=10                        # packing results.tar.gz and writing the summary between steps
HEADROOM_PCT=30                     # each budget over its rehearsal times, at least
SCALE=${GPU_CHECK_BUDGET_SCALE:-1}  # stand-ins only: every budget times this
REHEARSAL=${GPU_CHECK_REHEARSAL:-bench/gpu_check_rehearsal.tsv}
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
  step device          8  device
  step headline       30  "$PY" bench/gpu_headline.py --out "$STEPS/headline"
  step nvml           10  "$PY" bench/gpu_nvml.py
  step setup          15  setup
  step attention      20  stage attention attention
  step gpt2_eager     25  stage gpt2_eager amp
  step gpt2_compiled  40  stage gpt2_compiled amp
  step fidelity       20  fidelity
  step pipeline      130  pipeline
  step report         12  report
  step summary         5  "$PY" bench/gpu_summary.py "$WORK/results"
  step telemetry      17  telemetry
  step history         5  stage history history
  step fleet          10  fleet_check
}

# ---- the steps that are more than one command -----------------------------------------------------------------
device() {
  date -u
  nvidia-smi -L 2>/dev/null || rocm-smi --showproductname 2>/dev/null || echo "no nvidia-smi or rocm-smi"
  "$PY" -c "import sys, torch, accelbench
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no CUDA/ROCm device'
print('KEY device: python', sys.version.split()[0], '| torch', torch.__version__, '| cuda', torch.version.cuda,
      '| hip', torch.version.hip, '|', gpu, '| accelbench', accelbench.__file__)"
}

setup() {  # the wheels into a fresh folder, renamed into place only once complete and importable
  local partial="$SITE.partial"
  rm -rf "$partial"
  if compgen -G "$WHEELS/*.whl" > /dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$partial" \
      "$WHEELS"/*.whl || { rm -rf "$partial"; return 1; }
  else
    echo "no wheels in $WHEELS: snakemake and jsonschema must be importable already"
    mkdir -p "$partial"
  fi
  PYTHONPATH="$partial:$PYTHONPATH" "$PY" -c "import snakemake, jsonschema
from importlib import metadata
print('KEY setup: snakemake', metadata.version('snakemake'), '| jsonschema', metadata.version('jsonschema'))" \
    || { rm -rf "$partial"; return 1; }
  rm -rf "$SITE" && mv "$partial" "$SITE"
}

stage() {  # stage STEP CANDIDATES: a guarded stage step (bench/gpu_stage.py)
  "$PY" bench/gpu_stage.py "$1" --stage "$2" --results "$STEP_OUT/results" --pipeline-results "$WORK/results"
}

fleet_check() {  # this machine as a one-node fleet: the node check on its GPUs, then the fleet's verdict
  local folder="$STEP_OUT/fleet" rc
  accelbench fleet "$folder" --node --config-json '{"backends": ["cuda", "rocm"]}' || return 1
  accelbench fleet "$folder" 2>&1 | tee "$STEP_OUT/fleet.txt"
  rc=${PIPESTATUS[0]}
  echo "KEY fleet: exit $rc, $(tail -n 1 "$STEP_OUT/fleet.txt")"
  return "$rc"
}

telemetry() {
  local device args rc
  device=$("$PY" bench/gpu_headline.py --which-device) || return 1
  args=(--device "$device" --rounds 3 --gap-s 0.1 --min-run-time 0.1)
  if [ "$device" = cpu ]; then  # the stand-in: fewer rounds (2 shared cores are slow to share)
    args=(--device cpu --rounds 2 --gap-s 0.1 --min-run-time 0.05 --threads 1 --dtype float32 --sizes 128)
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
    args+=(--dtype bfloat16 --sizes 8192 --min-run-time 0.2)
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
    --cores all --resources bench=1 --keep-going --show-failed-logs
}

report() {  # the pipeline's report, or one built here from whatever it finished (each part on its own)
  local results="$WORK/results" rc=0
  if [ -f "$results/report.html" ]; then
    echo "KEY report: written by the pipeline"
    return 0
  fi
  [ -d "$results" ] || { echo "KEY report: not built (the pipeline wrote no results/)"; return 1; }
  accelbench aggregate --results "$results" --out-dir "$results/aggregate" --allow-incomplete || rc=1
  accelbench plots --aggregate-dir "$results/aggregate" --out-dir "$results/plots" || rc=1
  accelbench report --aggregate-dir "$results/aggregate" --plots-dir "$results/plots" \
    --captions-dir "$PWD/workflow/report" --comparison= --out "$results/report.html" || rc=1
  if [ -f "$results/report.html" ]; then
    echo "KEY report: built here from what the pipeline finished (aggregate/plots/report exit $rc)"
  else
    echo "KEY report: not built (aggregate/plots/report failed; see steps.log)"
  fi
  return "$rc"
}

# ---- the machinery --------------------------------------------------------------------------------------------
TOTAL_S=0
PLAN_BAD=0
step() {  # step NAME BUDGET_S command...: run it under its budget, keep its output, KEY lines, files
  local name=$1 budget=$2
  shift 2
  TOTAL_S=$((TOTAL_S + budget))
  if [ "$DRY_RUN" = 1 ]; then
    plan_line "$name" "$budget" "$*"
    return 0
  fi
  local limit=$((budget * SCALE)) dir="$STEPS/$name" t0=$SECONDS rc how
  mkdir -p "$dir"
  if [ -n "${GPU_CHECK_ONLY:-}" ] && [[ ",$GPU_CHECK_ONLY," != *",$name,"* ]]; then
    printf 'step %-13s skipped (not in GPU_CHECK_ONLY)\n' "$name" >> "$WORK/steps.txt"
    return 0
  fi
  run_limited "$name" "$limit" "$dir" "$@"
  rc=$?
  case $rc in
    0) how="ok" ;;
    124) how="TIMED OUT (its budget; ended by pid: $(cat "$dir/ended_pids" 2>/dev/null | tr '\n' ' '))" ;;
    *) how="FAILED (exit $rc)" ;;
  esac
  { echo "=== $name: $how in $((SECONDS - t0)) s (budget $limit s): $*"; tail -n 400 "$dir/output.txt"; } \
    >> "$OUT/steps.log"
  grep -a '^KEY ' "$dir/output.txt" | cut -c5- >> "$WORK/keys.txt"
  printf 'step %-13s %s in %d s (budget %d s)\n' "$name" "$how" "$((SECONDS - t0))" "$limit" >> "$WORK/steps.txt"
  echo "$how" > "$dir/status"
  write_summary
  pack
}

run_limited() {  # run_limited NAME LIMIT_S DIR command...: 124 when it ran past LIMIT_S (then ended by pid)
  local name=$1 limit=$2 dir=$3 token pid deadline timed_out=0 rc
  shift 3
  token="$name-$$-$RANDOM"
  # its own session: its process group is its own, and nothing it starts can stop the check (setsid(1), else
  # the same system call from Python, which every step needs anyway)
  local new_session=(setsid)
  command -v setsid > /dev/null || \
    new_session=("${PY:-python3}" -c 'import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])')
  STEP_OUT="$dir" ACCELBENCH_GPU_CHECK_STEP="$token" "${new_session[@]}" bash -c '"$@"' "$name" "$@" \
    > "$dir/output.txt" 2>&1 &
  pid=$!
  echo "$pid" > "$dir/pid"
  deadline=$((SECONDS + limit))
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then timed_out=1; break; fi
    sleep 0.2
  done
  if [ "$timed_out" = 1 ]; then
    kill -TERM -- "-$pid" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.3; done
    kill -KILL -- "-$pid" 2>/dev/null
    echo "$pid(group)" >> "$dir/ended_pids"
  fi
  wait "$pid" 2>/dev/null
  rc=$?
  end_strays "$token" "$dir"  # ranks in sessions of their own (torchrun), daemons: by pid, even after a clean exit
  [ "$timed_out" = 1 ] && return 124
  return "$rc"
}

strays() {  # the pids whose environment carries the step's token (the check's own shell never does)
  grep -lzx -- "ACCELBENCH_GPU_CHECK_STEP=$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | grep -vx "$$"
}

end_strays() {  # end_strays TOKEN DIR: SIGTERM, then SIGKILL, each stray by its pid; the pids to DIR/ended_pids
  local pids p
  pids=$(strays "$1")
  [ -z "$pids" ] && return 0
  echo "$pids" | tr '\n' ' ' | sed 's/^/strays (by pid): /' >> "$2/output.txt"
  for p in $pids; do kill -TERM "$p" 2>/dev/null; echo "$p" >> "$2/ended_pids"; done
  sleep 1
  for p in $(strays "$1"); do kill -KILL "$p" 2>/dev/null; done
}

key_number() {  # key_number LABEL STEP REGEX: the step's first KEY line matching REGEX, else "not run (why)"
  local label=$1 name=$2 regex=$3 line status
  if grep -qa "^KEY $name: not available in this build" "$STEPS/$name/output.txt" 2>/dev/null; then
    echo "  $label: not run (step $name: its stage is not available in this build)"
    return
  fi
  line=$(grep -a '^KEY ' "$STEPS/$name/output.txt" 2>/dev/null | cut -c5- | grep -E -m1 -- "$regex")
  if [ -n "$line" ]; then
    echo "  $label: $line"
  elif [ -f "$STEPS/$name/status" ]; then
    echo "  $label: not run (step $name: $(cat "$STEPS/$name/status"), no such reading)"
  else
    echo "  $label: not run (step $name has not run)"
  fi
}

write_summary() {  # summary.txt: the key numbers, every KEY line, every step's line
  {
    cat "$WORK/head.txt"
    echo "key numbers:"
    key_number "bf16 8192^3 TFLOP/s" headline "bfloat16 .*n=8192: "
    key_number "attention TFLOP/s" attention "tflops[a-z_]* [0-9]"
    key_number "gpt2-124m MFU (eager)" gpt2_eager "mfu[a-z_]* [0-9]"
    key_number "gpt2-124m MFU (compiled)" gpt2_compiled "mfu[a-z_]* [0-9]"
    key_number "NVML readings" nvml "^nvml [^ ]+ under "
    key_number "NVML power source" nvml "^nvml [^ ]+: source .*power source"
    echo
    cat "$WORK/keys.txt"
    echo
    cat "$WORK/steps.txt"
  } > "$OUT/summary.txt.tmp" && mv -f "$OUT/summary.txt.tmp" "$OUT/summary.txt"
}

plan_line() {  # plan_line NAME BUDGET COMMAND: --dry-run's line, with the rehearsal times and the headroom
  local name=$1 budget=$2 cmd=$3 row standin scale gpu pct_gpu pct_standin
  row=$(awk -F'\t' -v n="$name" '$1 == n {print $2, $3, $4; exit}' "$REHEARSAL" 2>/dev/null)
  if [ -z "$row" ]; then
    printf '  %-13s %4d s  rehearsal: NONE in %s  %s\n' "$name" "$budget" "$REHEARSAL" "$cmd"
    PLAN_BAD=1
    return
  fi
  read -r standin scale gpu <<< "$row"
  # headroom over the H200 estimate at the budget itself, over the stand-in at the budget x the stand-in's scale
  pct_gpu=$(awk -v b="$budget" -v t="$gpu" 'BEGIN {printf "%d", (t > 0 ? (b / t - 1) * 100 : -100)}')
  pct_standin=$(awk -v b="$budget" -v s="$scale" -v t="$standin" \
    'BEGIN {printf "%d", (t > 0 ? (b * s / t - 1) * 100 : (t == 0 ? 999 : -100))}')
  printf '  %-13s %4d s  H200 est. %5.1f s: headroom %4d%%; stand-in %5.1f s at x%s: headroom %4d%%  %s\n' \
    "$name" "$budget" "$gpu" "$pct_gpu" "$standin" "$scale" "$pct_standin" "$cmd"
  if [ "$pct_gpu" -lt "$HEADROOM_PCT" ] || [ "$pct_standin" -lt "$HEADROOM_PCT" ]; then PLAN_BAD=1; fi
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

# tests/test_gpu_check.py sources this file for its functions alone
if [ "${GPU_CHECK_SOURCE_ONLY:-0}" = 1 ]; then return 0 2>/dev/null || exit 0; fi

if [ "$DRY_RUN" = 1 ]; then
  PY=${PYTHON:-python3} WORK='$WORK' STEPS='$WORK/steps'
  echo "GPU check plan (budget per step; the check ends each step at its budget; headroom over the H200 estimate and"
  echo "over the CPU stand-in's measured time at its budget scale, both from $REHEARSAL):"
  plan
  total=$((TOTAL_S + RESERVE_S))
  n=$(echo "$RETURNED" | wc -w)
  echo "total: $TOTAL_S s of steps + $RESERVE_S s reserved for packing = $total s (limit $LIMIT_S s)"
  echo "returned: $RETURNED ($n files, at most $MAX_FILES; each kept <= $MAX_MIB MiB; no folders)"
  if [ "$total" -gt "$LIMIT_S" ] || [ "$n" -gt "$MAX_FILES" ] || [ "$PLAN_BAD" = 1 ]; then
    echo "NOT within the limits: trim a step's budget (or a file), or give each step >= $HEADROOM_PCT% headroom" >&2
    exit 1
  fi
  echo "within the limits (every step >= $HEADROOM_PCT% headroom)"
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
export -f device setup stage fidelity pipeline report telemetry fleet_check
echo "accelbench GPU check v2, $(date -u +%Y-%m-%dT%H:%M:%SZ), checkout $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  > "$WORK/head.txt"
: > "$WORK/keys.txt"
: > "$WORK/steps.txt"
write_summary
started=$SECONDS
plan
echo "check: $((SECONDS - started)) s in all (limit $LIMIT_S s x scale $SCALE)" >> "$WORK/steps.txt"
write_summary
check_returned
rc=$?
rm -rf "$WORK" "$SITE"
exit "$rc"
