#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one short run (about 6 minutes on one H200): bf16
# training of the tiny preset, the attention benchmark (eager and compiled) on CUDA, a sharded
# run under torchrun with NCCL stopped by SIGTERM and resumed, and `prepare`'s throughput with
# 1 and 2 workers on a machine with idle cores. Results go to $OUT (default /tmp/cuda-checks).
# Run from the repository root with a Python that has torch (CUDA), tokenizers, safetensors
# and tqdm: `bash scripts/cuda-checks.sh`.
set -uo pipefail
OUT=${OUT:-/tmp/cuda-checks}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 COMPLEXFORMER_CACHE=/tmp/cf-cache
PY=${PY:-python3}
CF="$PY -m complexformer.cli"
step() { echo; echo "=== $1 ($(date +%T))"; }

step "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"

step "1. train --preset tiny on CUDA with --bf16 (300 steps)"
timeout 200 $CF train --preset tiny --data stdlib --out /tmp/r-bf16 --max-steps 300 \
    --batch-size 16 --eval-every 100 --save-every 100 --device cuda --bf16 --sample-tokens 40 \
    2>&1 | grep -v "it/s\]" | tail -12 | tee "$OUT/train_bf16.txt"

step "2. sharded run under torchrun (NCCL, 1 GPU): SIGTERM at a step, then --resume"
ARGS="--preset tiny --data stdlib --out /tmp/r-shard --max-steps 120 --batch-size 16"
ARGS="$ARGS --eval-every 60 --save-every 1000 --device cuda --bf16 --shard --sample-tokens 0"
$PY -m torch.distributed.run --nproc_per_node 1 -m complexformer.cli train $ARGS \
    > "$OUT/shard_first.txt" 2>&1 &
PID=$!
for _ in $(seq 1 120); do
    grep -qE '"step": (2[0-9]|[3-9][0-9]),' /tmp/r-shard/metrics.jsonl 2>/dev/null && break
    sleep 1
done
pkill -TERM -P $PID || true  # the workers, as a scheduler's SIGTERM reaches them
wait $PID
echo "first attempt exit code: $?" | tee -a "$OUT/shard_first.txt"
tail -4 "$OUT/shard_first.txt"
timeout 150 $PY -m torch.distributed.run --nproc_per_node 1 -m complexformer.cli train $ARGS \
    --resume 2>&1 | tail -4 | tee "$OUT/shard_resume.txt"
grep -c '"stopped"\|"event"' /tmp/r-shard/metrics.jsonl || true

step "3. attention benchmark on CUDA (eager and compiled)"
timeout 180 $PY -m benchmarks.attention --device cuda --seq-lens 1024 4096 \
    --out-json "$OUT/attention_cuda.json" 2>&1 | tail -14

step "4. prepare: 1 and 2 workers on idle cores"
timeout 200 $PY -m benchmarks.data --small-mb 2 --medium-mb 16 --large-mb 64 \
    --json "$OUT/data_16cores.json" 2>&1 | tail -12
echo; echo "done $(date +%T)"
