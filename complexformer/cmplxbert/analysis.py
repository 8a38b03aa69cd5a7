"""Complex word-embedding analysis of a CmplxBERT model (Tamburini 2024, Figure 1).

F. Tamburini, "Complexifying BERT using LoRA adapters", CLiC-it 2024. Figure 1 of the paper
plots a random sample of the components of the complexified word-embedding matrix
E + s·A·Bᴴ in the complex plane, to show how much the imaginary part grew during the
continued MLM pre-training (a freshly complexified model has A·Bᴴ = 0, hence Im = 0).

Pure functions:

* :func:`embedding_components` - n randomly chosen components of the complex word-embedding
  matrix, computed entry by entry from the frozen real table and the adapter factors (the
  full complex table is never built);
* :func:`imaginary_energy_share` - sum |Im z|² / sum |z|²;
* :func:`imaginary_to_real` and :func:`sentence_cosine` - how far complex hidden states are
  from real ones, and how alike their sentence vectors are (the fine-tuning growth probe).

The plot of the sample in the complex plane and the ``cbert-embeddings`` report are
:mod:`complexformer_lab.cmplxbert.embeddings`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .layers import ComplexLoRAEmbedding

__all__ = [
    "embedding_components",
    "imaginary_energy_share",
    "imaginary_to_real",
    "sentence_cosine",
]


def _word_embedding_layer(model: nn.Module) -> ComplexLoRAEmbedding:
    if isinstance(model, ComplexLoRAEmbedding):
        return model
    try:
        layer = model.bert.embeddings.word_embeddings
    except AttributeError:
        layer = None
    if not isinstance(layer, ComplexLoRAEmbedding):
        raise ValueError(
            "embedding_components: expected a CmplxBert (from complexify) or a "
            f"ComplexLoRAEmbedding, got {type(model).__name__} whose "
            "bert.embeddings.word_embeddings is not a ComplexLoRAEmbedding"
        )
    return layer


@torch.no_grad()
def embedding_components(model: nn.Module, n: int = 2000, seed: int = 0) -> Tensor:
    """n randomly chosen components of the complex word-embedding matrix E + s·A·Bᴴ.

    Tamburini (2024), Figure 1: the components of the complexified word embeddings, plotted
    in the complex plane. Entry (i, k) of the matrix is E[i, k] + s·Σ_r A[i, r]·conj(B[k, r]),
    where E is the frozen real table of the wrapped ``nn.Embedding`` and A, B, s the adapter
    of the :class:`~complexformer.cmplxbert.ComplexLoRAEmbedding` (see its ``delta_weight``); only
    the sampled entries are computed.

    Args:
        model: a ``CmplxBert`` (its ``bert.embeddings.word_embeddings`` is used) or a
            :class:`~complexformer.cmplxbert.ComplexLoRAEmbedding`.
        n: number of components; sampled without replacement from the num × dim entries
            (all of them, in random order, if n is larger).
        seed: seed of the ``torch.Generator`` used for the sampling; the same seed and
            model give the same components.

    Returns:
        A complex 1-D tensor of min(n, num·dim) components (on the model's device, complex
        dtype matching the real weight).

    Raises:
        ValueError: ``n < 1`` or ``model`` has no complex LoRA word embedding.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"embedding_components: n must be an integer >= 1, got {n!r}")
    layer = _word_embedding_layer(model)
    weight = layer.base_layer.weight.detach()
    num, dim = weight.shape
    g = torch.Generator().manual_seed(int(seed))
    flat = torch.randperm(num * dim, generator=g)[: min(n, num * dim)].to(weight.device)
    rows, cols = flat // dim, flat % dim
    real = weight[rows, cols]
    z = torch.complex(real, torch.zeros_like(real))
    if layer.r > 0:
        a = layer.complex_A.detach()[rows]  # (n, r)
        b = layer.complex_B.detach()[cols]  # (n, r)
        z = z + layer.scaling * (a * b.conj()).sum(dim=-1).to(z.dtype)
    return z


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


def imaginary_energy_share(z: Tensor) -> float:
    """Share of the energy in the imaginary part: Σ|Im z|² / Σ|z|².

    Tamburini (2024), Figure 1: how far the complexified embeddings moved off the real axis.
    0 for real values (a freshly complexified model), 1 for purely imaginary ones.

    Args:
        z: a tensor of any shape (complex; a real tensor has share 0).

    Returns:
        The share as a Python float in [0, 1]; 0.0 when z is empty or all zero.
    """
    z = z.detach()
    if not z.is_complex():
        return 0.0
    im = z.imag.double().pow(2).sum()
    total = im + z.real.double().pow(2).sum()
    if total.item() == 0.0:
        return 0.0
    return float(im / total)
