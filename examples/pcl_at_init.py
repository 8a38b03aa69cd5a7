"""The phase contrastive loss at initialisation, on random and on constant token sequences.

For the model of the ``tiny`` reproduction scale (2 layers, d_model 128, 4 heads, J = 16
pairs per head, context 128) this prints ``pcl_loss`` (the value the model adds, times ε) for
both targets (``theta``: the semantic phases θ of eq. 2 of Shao et al. 2025; ``rotated``:
δ ⊙ θ + b + p ω) and both reductions, averaged over a few seeds. The numbers are quoted in
docs/cmha.md.

Run: ``python examples/pcl_at_init.py``.
"""

from __future__ import annotations

import math

import torch

from complexformer.models import ComplexFormerLM
from complexformer_lab.reproduce.variants import get_scale

SEEDS = (0, 1, 2)
BATCH, T, VOCAB = 8, 128, 2048


def measure(target: str, reduce: str, constant: bool) -> float:
    """Mean ``pcl_loss`` over :data:`SEEDS` of a fresh model on a (BATCH, T) batch."""
    values = []
    for seed in SEEDS:
        cfg = get_scale("tiny").model_config("cmha")
        cfg = cfg.replace(vocab_size=VOCAB, pcl_target=target, pcl_reduce=reduce)
        torch.manual_seed(seed)
        model = ComplexFormerLM(cfg).train()
        if constant:
            ids = torch.randint(0, VOCAB, (BATCH, 1)).expand(BATCH, T)
        else:
            ids = torch.randint(0, VOCAB, (BATCH, T))
        with torch.no_grad():
            values.append(model(ids).pcl_loss.item())
    return sum(values) / len(values)


def main() -> None:
    print(f"log T = {math.log(T):.2f}; seeds {SEEDS}; batch {BATCH} x {T}")
    print("| target | reduce | random tokens | constant tokens |")
    print("| --- | --- | --- | --- |")
    for target, reduce in (("theta", "mean"), ("theta", "sum"), ("rotated", "mean"),
                           ("rotated", "sum")):  # fmt: skip
        r, c = measure(target, reduce, False), measure(target, reduce, True)
        print(f"| {target} | {reduce} | {r:.2f} | {c:.2f} |")


if __name__ == "__main__":
    main()
