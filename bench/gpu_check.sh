#!/usr/bin/env bash
# The GPU check, prepared for a session whose task is lent a GPU machine (the device tool). In ONE run:
#   1. the harness-fidelity bench on the GPU (bf16 4096^3 and 8192^3: accelbench against a bare
#      torch.utils.benchmark loop) -- first, so the headline number exists even if step 2 runs long;
#   2. the CUDA path of the whole pipeline (bench/gpu_config.yaml: matmul up to 8192^3 in fp32, TF32,
#      bf16, fp16 and fp8, transfer, AMP with GradScaler), then the report;
#   3. the files that matter copied under $OUT (the device tool returns 8 files at most).
#
# Here, once, from the repository root (the device machine cannot fetch; its python3 is 3.12 with torch,
# pandas, seaborn, jinja2, scipy, but no snakemake):
#     .venv/bin/python bench/gpu_wheels.py          # -> .gpu-wheels/ (ignored by git, ~26 MiB)
# then: device run  command="bash bench/gpu_check.sh"  carry=[".gpu-wheels"]  timeout_s=540
#
# accelbench itself is not installed there: it runs from this checkout (PYTHONPATH=src and a small
# `accelbench` launcher on PATH); snakemake and its missing dependencies go to a scratch --target folder.
# Smoke test on a CPU machine:
#     PYTHON=/path/to/python GPU_WHEELS=dir GPU_CHECK_CONFIG=tiny.yaml OUT=/tmp/gc bash bench/gpu_check.sh
set -uo pipefail
OUT=${OUT:-/tmp/accelbench-gpu-check}
CONFIG=${GPU_CHECK_CONFIG:-bench/gpu_config.yaml}
WHEELS=${GPU_WHEELS:-.gpu-wheels}
PY=$(command -v "${PYTHON:-python3}")
WORK=$(mktemp -d)
SITE=$(mktemp -d)
mkdir -p "$OUT" "$SITE/bin"
export PYTHONUNBUFFERED=1
{
  date -u; nvidia-smi 2>&1 | head -20
  if [ -d "$WHEELS" ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl
  fi
  printf '#!/bin/sh\nexec "%s" -m accelbench.cli "$@"\n' "$PY" > "$SITE/bin/accelbench"
  chmod +x "$SITE/bin/accelbench"
} > "$OUT/setup.log" 2>&1
export PYTHONPATH="$PWD/src:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$SITE/bin:$(dirname "$PY"):$PATH"
"$PY" -c "import torch, snakemake, accelbench; print('torch', torch.__version__, 'cuda', torch.version.cuda,
  torch.cuda.is_available(), '| snakemake', snakemake.__version__, '| accelbench', accelbench.__file__)" \
  >> "$OUT/setup.log" 2>&1

# 1. fidelity on the GPU (the bare loop syncs torch.accelerator; accelbench its own device)
if "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  timeout 150 "$PY" bench/harness_fidelity.py --device cuda:0 --dtype bfloat16 --sizes 4096 8192 --threads 1 \
    --rounds 3 --gap-s 0.1 > "$OUT/fidelity.txt" 2>&1
  echo "fidelity exit $?" >> "$OUT/fidelity.txt"
else
  echo "no CUDA device: fidelity bench on the GPU not run" > "$OUT/fidelity.txt"
fi

# 2. the pipeline, CUDA path
cp "$CONFIG" "$WORK/config.yaml"
timeout 330 "$PY" -m snakemake -s "$PWD/Snakefile" --directory "$WORK" --configfile "$WORK/config.yaml" \
  --cores all --resources bench=1 --show-failed-logs > "$OUT/pipeline.log" 2>&1
echo "pipeline exit $?" >> "$OUT/pipeline.log"

# 3. what comes back: CSVs (or, if the pipeline was cut short, the checkpoints of completed points)
RUN=$(ls -d "$WORK"/results/*/ 2>/dev/null | grep -v -e /aggregate/ -e /plots/ -e /logs/ | head -1)
for f in devices.json matmul_cuda.csv amp_cuda_summary.csv transfer_cuda.csv; do
  [ -n "$RUN" ] && [ -f "$RUN/$f" ] && cp "$RUN/$f" "$OUT/"
done
if [ -n "$RUN" ] && [ ! -f "$OUT/matmul_cuda.csv" ] && [ -f "$RUN/checkpoints/matmul_cuda.jsonl" ]; then
  cp "$RUN/checkpoints/matmul_cuda.jsonl" "$OUT/"
fi
[ -f "$WORK/results/report.html" ] && cp "$WORK/results/report.html" "$OUT/"
# the headline: bf16 8192^3 as the pipeline measured it
"$PY" - "$OUT" <<'PY' >> "$OUT/fidelity.txt" 2>&1
import sys, pandas as pd, pathlib
p = pathlib.Path(sys.argv[1]) / "matmul_cuda.csv"
if p.exists():
    df = pd.read_csv(p)
    print(df[["device", "device_name", "dtype", "n", "tflops", "pct_of_peak", "status"]].to_string())
    hit = df[(df["dtype"] == "bfloat16") & (df["n"] == 8192)]
    print("bf16 8192^3 TFLOP/s (pipeline):", hit["tflops"].tolist())
else:
    print("no matmul_cuda.csv from the pipeline")
PY
rm -rf "$WORK" "$SITE"
