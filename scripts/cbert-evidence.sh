#!/usr/bin/env bash
# The CmplxBERT fine-tuning evidence of docs/cmplxbert.md: the library's start against the
# paper's, a real LoRA with as many trainable parameters and the real BERT, on the three
# offline tasks (docstrings: 5 seeds; docstring-pairs and code-tags: 3 seeds), then the
# layer-by-layer start measurement. Each finetune call is resumable (finished runs are
# skipped). Usage: scripts/cbert-evidence.sh OUT [PYTHON]   (about 50 minutes on 2 cores)
set -euo pipefail
out=${1:?usage: scripts/cbert-evidence.sh OUT [PYTHON]}
py=${2:-python}
common=(--base minilm --models cmplxbert cmplxbert-paper real-lora real
        --epochs 2 --seq-len 64 --max-train-examples 512 --threads 1)
# one process per core: the sequence task on one, the pair and token tasks on the other
"$py" -m complexformer.cli finetune "${common[@]}" --task docstrings \
    --seeds 0 1 2 3 4 --out "$out/docstrings" > "$out.docstrings.log" 2>&1 &
first=$!
"$py" -m complexformer.cli finetune "${common[@]}" --task docstring-pairs \
    --seeds 0 1 2 --out "$out/docstring-pairs" > "$out.pairs.log" 2>&1
"$py" -m complexformer.cli finetune "${common[@]}" --task code-tags \
    --seeds 0 1 2 --out "$out/code-tags" > "$out.tags.log" 2>&1
wait "$first"
"$py" -m complexformer.cli cbert-start --base minilm --out "$out/start" --threads 1
