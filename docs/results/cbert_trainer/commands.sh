# Trainer against cbert-finetune on the docstring task (docs/cmplxbert.md), one seed after the other.
py=python
python -m complexformer.cmplxbert.docstrings --out runs/cmp/data
FT="$py -m complexformer.cli cbert-finetune --base minilm --task docstrings --models cmplxbert --epochs 2 --seq-len 64 --max-train-examples 512 --threads 1 --out runs/cmp/ft --no-save-models"
$py examples/cbert_trainer.py --base minilm --data runs/cmp/data --out runs/cmp/trainer-seed0 --epochs 2 --max-len 64 --max-train-examples 512 --seed 0
$FT --seeds 0 1
$py examples/cbert_trainer.py --base minilm --data runs/cmp/data --out runs/cmp/trainer-seed1 --epochs 2 --max-len 64 --max-train-examples 512 --seed 1
$FT --seeds 0 1 2
$py examples/cbert_trainer.py --base minilm --data runs/cmp/data --out runs/cmp/trainer-seed2 --epochs 2 --max-len 64 --max-train-examples 512 --seed 2
