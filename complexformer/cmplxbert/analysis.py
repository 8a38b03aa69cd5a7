"""How far a CmplxBERT's hidden states are from real ones: the fine-tuning growth probe.

F. Tamburini, "Complexifying BERT using LoRA adapters", CLiC-it 2024: the complex adapters
start at zero, so the complexified model's hidden states are real at step 0 and move off the
real axis as the adapters grow. :func:`imaginary_to_real` measures how far, and
:func:`sentence_cosine` how alike the sentence vectors are (near 1: a collapse);
:func:`~complexformer.cmplxbert.finetune.finetune_one` records both (docs/cmplxbert.md,
adapter growth). The word embeddings in the complex plane (the paper's Figure 1) are the
lab's, :mod:`complexformer_lab.cmplxbert.embeddings`.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["imaginary_to_real", "sentence_cosine"]


def _masked(h: Tensor, mask: Tensor | None) -> Tensor:
    """(B, T, 1) float weights of the tokens (1 where ``mask`` is set, all ones if None)."""
    if mask is None:
        return torch.ones(h.shape[:2] + (1,), dtype=torch.float64, device=h.device)
    return mask.detach().to(device=h.device, dtype=torch.float64).unsqueeze(-1)


def imaginary_to_real(h: Tensor, mask: Tensor | None = None) -> float:
    """Σ|Im h|² / Σ|Re h|² over the tokens of hidden states (B, T, E) (0 for real h): how
    far the adapters moved the hidden states off the real axis (docs/cmplxbert.md, adapter
    growth)."""
    h = h.detach()
    if not h.is_complex():
        return 0.0
    w = _masked(h, mask)
    re = (h.real.double().pow(2) * w).sum()
    return float((h.imag.double().pow(2) * w).sum() / re.clamp(min=1e-300))


def sentence_cosine(h: Tensor, mask: Tensor | None = None) -> float:
    """Mean pairwise cosine of the sentence vectors: the masked mean of hidden states
    (B, T, E) over the tokens ([Re, Im] concatenated for complex h), averaged over the
    B·(B − 1) ordered pairs. Near 1: every sentence looks alike (a collapse); a
    pre-trained encoder keeps it low (MiniLM's last layer: about 0.1 on docstrings)."""
    h = h.detach()
    if h.is_complex():
        h = torch.cat([h.real, h.imag], -1)
    w = _masked(h, mask)
    v = (h.double() * w).sum(1) / w.sum(1).clamp(min=1)  # (B, E)
    v = torch.nn.functional.normalize(v, dim=-1)
    n = v.shape[0]
    if n < 2:
        raise ValueError(f"sentence_cosine: needs at least 2 sentences, got {n}")
    return float(((v @ v.T).sum() - (v * v).sum()) / (n * (n - 1)))
