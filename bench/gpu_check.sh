#!/usr/bin/env bash
# The GPU check, prepared for a session whose task is lent a GPU machine (the device tool): in ONE run,
# the CUDA path of the whole pipeline (bench/gpu_config.yaml: matmul up to bf16 8192^3, transfer, AMP),
# and the harness-fidelity bench on the GPU. What matters comes back under $OUT (8 files at most).
#
#   here, once (the device machine cannot fetch; its python3 is 3.12 with torch, pandas, seaborn, jinja2):
#     pip download --python-version 3.12 --only-binary=:all: -d .gpu-wheels 'snakemake>=9,<10' jsonschema
#     echo /.gpu-wheels/ >> .git/info/exclude
#   then: device run  command="bash bench/gpu_check.sh"  carry=[".gpu-wheels"]  timeout_s=540
#
# Smoke test on a CPU machine: GPU_CHECK_CONFIG=tiny.yaml OUT=/tmp/gc bash bench/gpu_check.sh
set -uo pipefail
OUT=${OUT:-/tmp/accelbench-gpu-check}
CONFIG=${GPU_CHECK_CONFIG:-bench/gpu_config.yaml}
WORK=$(mktemp -d)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
{
  date -u; nvidia-smi 2>&1 | head -20
  if [ -d .gpu-wheels ]; then $PY -m pip install -q --no-index --find-links .gpu-wheels 'snakemake>=9,<10' jsonschema; fi
  $PY -m pip install -q --no-deps --no-build-isolation -e . || $PY -m pip install -q --no-deps -e .
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
} > "$OUT/setup.log" 2>&1
BIN=$(dirname "$(command -v $PY)")
export PATH="$BIN:$PATH"

cp "$CONFIG" "$WORK/config.yaml"
timeout 420 $PY -m snakemake -s "$PWD/Snakefile" --directory "$WORK" --configfile "$WORK/config.yaml" \
  --cores all --resources bench=1 --show-failed-logs > "$OUT/pipeline.log" 2>&1
echo "pipeline exit $?" >> "$OUT/pipeline.log"

RUN=$(ls -d "$WORK"/results/*/ 2>/dev/null | grep -v -e aggregate -e plots -e logs | head -1)
for f in devices.json matmul_cuda.csv amp_cuda_summary.csv transfer_cuda.csv; do
  [ -n "$RUN" ] && [ -f "$RUN/$f" ] && cp "$RUN/$f" "$OUT/"
done
[ -f "$WORK/results/report.html" ] && cp "$WORK/results/report.html" "$OUT/"

if $PY -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  timeout 120 $PY bench/harness_fidelity.py --device cuda:0 --dtype bfloat16 --sizes 4096 8192 --threads 1 --rounds 3 --gap-s 0.1 \
    > "$OUT/fidelity.txt" 2>&1
else
  echo "no CUDA device: fidelity bench on the GPU not run" > "$OUT/fidelity.txt"
fi
# the headline: bf16 8192^3 as the pipeline measured it
$PY - "$OUT" <<'PY' >> "$OUT/fidelity.txt" 2>&1
import sys, pandas as pd, pathlib
p = pathlib.Path(sys.argv[1]) / "matmul_cuda.csv"
if p.exists():
    df = pd.read_csv(p)
    print(df[["device", "device_name", "dtype", "n", "tflops", "pct_of_peak", "status"]].to_string())
    hit = df[(df["dtype"] == "bfloat16") & (df["n"] == 8192)]
    print("bf16 8192^3 TFLOP/s:", hit["tflops"].tolist())
PY
rm -rf "$WORK"
