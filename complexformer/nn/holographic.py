"""Holographic (interference-aware) attention, the second attention core of complextorch 2.1.1.

From "Holographic Transformers for Complex-Valued Signal Processing: Integrating Phase
Interference into Self-Attention" (arXiv:2509.19331), as implemented in the complextorch
library, version 2.1.1 (``complextorch.nn.HolographicAttention``). For a query i and a key j
with the unscaled Hermitian score s_ij = q_i . conj(k_j) and its phase dphi_ij = arg s_ij:

    sim_ij = Re s_ij / (|q_i| |k_j| + eps)
    a_ij   = softmax_j(sim_ij / temperature * exp(-softplus(alpha) |dphi_ij|))
    out_i  = sum_j a_ij e^{j dphi_ij} v_j

The gate damps keys whose phase disagrees with the query's; the values are rotated by that
phase before the sum (coherent superposition). alpha is a learnable real scalar, kept
non-negative by the softplus. The weights a are real; dropout acts on them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from complexformer.attention.functional import causal_mask

from . import functional as CF
from .utils import require_complex

__all__ = ["HolographicAttention", "holographic_attention"]


def holographic_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    alpha: Tensor,
    temperature: float,
    eps: float = 1e-6,
    *,
    bias: Tensor | None = None,
    is_causal: bool = False,
    q_offset: int = 0,
    dropout_p: float = 0.0,
) -> tuple[Tensor, Tensor]:
    """Interference-aware attention (formulas in the module docstring).

    Args:
        q: complex (..., Tq, d_k); k: complex (..., Tk, d_k); v: complex (..., Tk, d_v).
        alpha: real scalar tensor, the raw phase-discrepancy weight (softplus is applied).
        temperature: score temperature (complextorch: sqrt(d_k)).
        eps: guards the magnitude normalisation.
        bias: additive real bias broadcastable to (..., Tq, Tk) (-inf = masked), added to
            the gated logits; a row with every key masked gets zero weights.
        is_causal: mask keys after each query (queries at q_offset .., keys at 0 ..).
        q_offset: position of the first query.
        dropout_p: dropout on the real weights.

    Returns:
        (output complex (..., Tq, d_v), pre-dropout weights real (..., Tq, Tk)).
    """
    scores = q @ k.conj().transpose(-2, -1)  # (..., Tq, Tk) complex, unscaled
    dphi = scores.angle()
    q_norm = torch.linalg.vector_norm(q, dim=-1).unsqueeze(-1)  # (..., Tq, 1)
    k_norm = torch.linalg.vector_norm(k, dim=-1).unsqueeze(-2)  # (..., 1, Tk)
    sim = scores.real / (q_norm * k_norm + eps)
    gate = torch.exp(-F.softplus(alpha) * dphi.abs())
    logits = sim / temperature * gate  # (..., Tq, Tk) real
    if is_causal:
        allowed = causal_mask(q.shape[-2], k.shape[-2], q_offset, device=q.device)
        causal = torch.zeros(allowed.shape, dtype=logits.dtype, device=q.device)
        causal = causal.masked_fill_(~allowed, float("-inf"))
        bias = causal if bias is None else bias + causal
    weights = CF.masked_softmax(logits, bias)
    w = F.dropout(weights, dropout_p) if dropout_p > 0.0 else weights
    coeff = w * torch.polar(torch.ones_like(dphi), dphi)  # (..., Tq, Tk) complex
    return coeff @ v, weights


class HolographicAttention(nn.Module):
    """Holographic attention core with a learnable ``alpha`` (complextorch 2.1.1 API).

    Args:
        temperature: score temperature, typically sqrt(d_k).
        attn_dropout: dropout probability on the real attention weights.
        alpha_init: initial raw alpha (the gate uses softplus(alpha)).
        eps: guards the magnitude normalisation.

    Shapes:
        q (..., Tq, d_k), k (..., Tk, d_k), v (..., Tk, d_v) complex -> (..., Tq, d_v).
    """

    def __init__(
        self,
        temperature: float,
        attn_dropout: float = 0.1,
        alpha_init: float = 1.0,
        eps: float = 1e-6,
    ) -> None:
        super().__init__()
        if not temperature > 0:
            raise ValueError(f"HolographicAttention: temperature must be > 0, got {temperature!r}")
        if not 0.0 <= attn_dropout < 1.0:
            raise ValueError(
                f"HolographicAttention: attn_dropout must be in [0, 1), got {attn_dropout!r}"
            )
        self.temperature, self.eps, self.attn_dropout = float(temperature), float(eps), attn_dropout
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        bias: Tensor | None = None,
        is_causal: bool = False,
        q_offset: int = 0,
    ) -> tuple[Tensor, Tensor]:
        """(output, pre-dropout weights), with masks (see :func:`holographic_attention`)."""
        for name, t in (("q", q), ("k", k), ("v", v)):
            require_complex(t, name, "HolographicAttention")
        return holographic_attention(
            q,
            k,
            v,
            self.alpha.to(q.real.dtype),
            self.temperature,
            self.eps,
            bias=bias,
            is_causal=is_causal,
            q_offset=q_offset,
            dropout_p=self.attn_dropout if self.training else 0.0,
        )

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return self.attend(q, k, v)[0]

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}, attn_dropout={self.attn_dropout}, eps={self.eps}"
