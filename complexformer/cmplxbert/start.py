"""The sign-preserving start of a modulus-score CmplxBERT.

Tamburini 2024 initialises every adapter to zero, so that the complexified model is the real
one at step 0 with real-part scores; with the paper's modulus scores softmax(|Q·Kᴴ|/√d) it
is not: the keys a pre-trained head avoids (large negative q·k) become the most attended,
and the sentence vectors collapse (docs/cmplxbert.md, "Why the paper's start forgets"). This
module builds a start that keeps the pre-trained attention with the same architecture and
the same parameters, by choosing the initial values of the complex biases.

Attention. With imaginary parts a·u on the query and key complex biases of a head (u a unit
vector of the head's d features, a > 0) and real hidden states (as at step 0),
Q = q + j·a·u and K = k + j·a·u, so

    S′ = Q·Kᴴ = q·k + a² + j·a·u·(k − q),
    |S′| = sqrt((q·k + a²)² + a²·(u·(k − q))²).

Where s = q·k + a² > 0, 0 ≤ |S′| − s ≤ a²·(u·(k − q))² / (2s): the modulus is the real
score plus a² (the same for every key of a query, which the softmax ignores) plus a small
non-negative error. The error is small when u is a direction along which q and k have
little energy: u is the eigenvector of the smallest eigenvalue of E[q·qᵀ] + E[k·kᵀ], the
head's query and key second moments over calibration tokens (:func:`offset_directions`).
The calibration needs no data: random token sequences through the real model give
directions as good as real sentences (measured in docs/cmplxbert.md). The amplitude is
a² = C·√d, i.e. a shift of C in the softmax's logits (``start_offset``, default 8).

Heads. A modulus head |z| of real logits z is |z + c| = z + c for any real c > max(−z):
a shift the softmax and the cross-entropy ignore. :func:`head_offset` bounds |z| from the
layer's weights and a bound on its input's norm, and the start puts c (plus a margin of 1)
into the real part of the head's complex bias, so the heads start as the real ones.

The paper's start (``start="paper"``) leaves every complex bias at zero.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = [
    "CALIBRATION_SEED",
    "attention_offset_error_bound",
    "calibration_ids",
    "head_offset",
    "layer_norm_bound",
    "offset_directions",
    "set_attention_offsets",
]

#: Seed of the random calibration sequences (fixed, so that a start is reproducible).
CALIBRATION_SEED = 0


def calibration_ids(
    vocab_size: int,
    max_positions: int,
    n: int = 32,
    length: int = 128,
    exclude: tuple[int, ...] = (),
    seed: int = CALIBRATION_SEED,
) -> Tensor:
    """(n, length) random token ids for the data-free calibration.

    Tokens are drawn uniformly from the vocabulary without the ids in ``exclude`` (padding);
    sequences are as long as ``length`` and the model's positions allow.
    """
    length = max(2, min(length, max_positions))
    g = torch.Generator().manual_seed(seed)
    keep = torch.ones(vocab_size, dtype=torch.bool)
    for i in exclude:
        if i is not None and 0 <= i < vocab_size:
            keep[i] = False
    pool = keep.nonzero().squeeze(1)
    return pool[torch.randint(len(pool), (n, length), generator=g)]


@torch.no_grad()
def offset_directions(bert: nn.Module, input_ids: Tensor, attention_mask: Tensor | None = None):
    """Per layer, per head, the unit vector u of least query + key energy.

    Args:
        bert: the real Hugging Face ``BertModel`` (its hidden states are the layers' inputs).
        input_ids: (B, T) calibration tokens.
        attention_mask: (B, T) 1 for tokens, 0 for padding (None: all tokens).

    Returns:
        a list with one (H, d) tensor per encoder layer: row h is the eigenvector of the
        smallest eigenvalue of E[q·qᵀ] + E[k·kᵀ] over the calibration tokens (float64
        eigendecomposition), in the dtype of the query weight.
    """
    was_training = bert.training
    bert.eval()
    try:
        out = bert(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    finally:
        bert.train(was_training)
    keep = (
        torch.ones_like(input_ids, dtype=torch.bool)
        if attention_mask is None
        else attention_mask.bool()
    )
    dirs = []
    for i, layer in enumerate(bert.encoder.layer):
        sa = layer.attention.self
        h = sa.num_attention_heads
        x = out.hidden_states[i][keep].double()  # (N, E): the layer's input tokens
        q = nn.functional.linear(x, sa.query.weight.double(), sa.query.bias.double())
        k = nn.functional.linear(x, sa.key.weight.double(), sa.key.bias.double())
        q, k = q.view(len(x), h, -1).transpose(0, 1), k.view(len(x), h, -1).transpose(0, 1)
        m = (q.transpose(1, 2) @ q + k.transpose(1, 2) @ k) / len(x)  # (H, d, d)
        _, vecs = torch.linalg.eigh(m)
        dirs.append(vecs[:, :, 0].to(sa.query.weight.dtype))  # (H, d)
    return dirs


@torch.no_grad()
def set_attention_offsets(self_attention: nn.Module, u: Tensor, offset: float) -> None:
    """Put j·a·u into the query and key complex biases of a ``CmplxSelfAttention``.

    Args:
        self_attention: the layer (its ``query`` and ``key`` have complex biases).
        u: (H, d) unit vectors, one per head.
        offset: C, so that a² = C·√d (a shift of C in the softmax's logits).
    """
    h, d = u.shape
    a = math.sqrt(offset * math.sqrt(d))
    for lin in (self_attention.query, self_attention.key):
        if lin.bias_c is None:
            raise ValueError(
                "start='keep' with modulus scores needs complex biases on the attention "
                "query and key: keep complex_bias=True and put both 'query' and 'key' in "
                "target_modules, or choose start='paper'"
            )
        lin.bias_c[:, 1] = (a * u).reshape(-1).to(lin.bias_c.dtype)


def attention_offset_error_bound(q: Tensor, k: Tensor, u: Tensor, a: float) -> Tensor:
    """The bound of the module docstring: a²·(u·(k − q))² / (2(q·k + a²)), elementwise.

    Args:
        q: (..., Tq, d) real queries; k: (..., Tk, d) real keys; u: (..., d) unit vector
            (broadcast over the positions); a: the amplitude.

    Returns:
        (..., Tq, Tk) bound on |S′| − (q·k + a²); ``inf`` where q·k + a² ≤ 0 (no bound).
    """
    s = q @ k.transpose(-1, -2) + a * a
    uq = (q * u.unsqueeze(-2)).sum(-1)  # (..., Tq)
    uk = (k * u.unsqueeze(-2)).sum(-1)  # (..., Tk)
    delta = uk.unsqueeze(-2) - uq.unsqueeze(-1)
    bound = a * a * delta.square() / (2 * s.clamp(min=torch.finfo(s.dtype).tiny))
    return torch.where(s > 0, bound, torch.full_like(bound, math.inf))


def layer_norm_bound(norm: nn.Module) -> float:
    """A bound on the norm of a real LayerNorm's output: √E·max|γ| + ‖β‖ (the normalised
    vector has norm ≤ √E)."""
    w, b = norm.weight, norm.bias
    e = w.numel()
    bound = math.sqrt(e) * float(w.detach().abs().max())
    return bound + (float(b.detach().norm()) if b is not None else 0.0)


@torch.no_grad()
def head_offset(linear: nn.Linear, input_bound: float, margin: float = 1.0) -> float:
    """c with |z_i| < c for every output z_i = W_i·x + b_i of ``linear`` and ‖x‖ ≤
    ``input_bound``: max_i(‖W_i‖·bound + |b_i|) + margin."""
    w = linear.weight.detach().double()
    z = w.norm(dim=1) * input_bound
    if linear.bias is not None:
        z = z + linear.bias.detach().double().abs()
    return float(z.max()) + margin
