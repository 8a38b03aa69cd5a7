#!/usr/bin/env bash
# More CUDA checks (about 5 minutes on one H200): fused AdamW and activation checkpointing
# against the default update, and prepare at 10 / 64 / 256 MB. Results go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/cuda-checks}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 COMPLEXFORMER_CACHE=/tmp/cf-cache
CF="python3 -m complexformer.cli"
echo "=== fused AdamW and activation checkpointing on CUDA ($(date +%T))"
for v in "fused_adamw=false" "fused_adamw=true" "fused_adamw=true activation_checkpointing=true"; do
  n=$(echo $v | tr ' =' '__')
  timeout 100 $CF train --preset tiny --data stdlib --out /tmp/r-$n --max-steps 60 --batch-size 16 --eval-every 60 --device cuda --bf16 --sample-tokens 0 --set $v log_every=20 2>&1 | grep -E "^step|done:" | tee $OUT/train_$n.txt
done
echo "=== prepare at 16/64/256 MB ($(date +%T))"
timeout 330 python3 -m benchmarks.data --small-mb 10 --medium-mb 64 --large-mb 256 --json $OUT/data_256.json 2>&1 | tail -14
echo "done $(date +%T)"
