"""Causal self-attention module with a positional scheme chosen by name (see registry)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from .cache import LayerKVCache
from .functional import attention
from .registry import get_scheme
from .schemes import PAIRS

__all__ = ["CausalSelfAttention", "PAIRS"]


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention: CMHA (Shao et al. 2025) or a baseline scheme.

    The positional scheme (:class:`~complexformer.attention.schemes.PositionalScheme`, by
    registered name) owns its parameters and buffers on this layer and rotates queries and
    keys or adds a score bias. For the ``cmha*`` schemes the queries and keys of each head
    are polar-rotated (eq. 1-8: phase delta * theta + b + position * omega, modulus kept) and
    then fed to fused scaled-dot-product attention; the adaptation parameters are
    ``adapt_delta`` and ``adapt_bias`` of shape (H, J) for ``cmha`` and (J,) for
    ``cmha_shared``, initialised to delta ~ N(0, 0.02^2), b = 0 (paper, §3.1.2).
    ``cmha_fixed`` holds delta = 1, b = 0 as frozen buffers.

    Args:
        d_model: model width.
        n_head: number of heads; d_model must be divisible by it.
        pos_scheme: a registered scheme name (``complexformer.attention.SCHEMES``).
        dropout: attention and residual dropout.
        omega_schedule: ``"rope"`` or ``"paper"`` (see :func:`rope_frequencies`).
        rope_base: frequency base.
        bias: whether the projections have biases.
        delta_init_std: std σ of the delta initialisation.
        delta_init: ``"paper"`` (δ ~ N(0, σ²)) or ``"rope"`` (δ = 1 + N(0, σ²)).
        pcl: create the PCL channel weights w (init 1), shape (2, J) for queries and keys.
        pcl_target: the phases :meth:`forward` returns for the PCL: ``"theta"`` (the semantic
            phases θ of eq. 2) or ``"rotated"`` (δ ⊙ θ + b + p ω).
    """

    def __init__(
        self,
        d_model: int,
        n_head: int,
        pos_scheme: str = "cmha",
        *,
        dropout: float = 0.0,
        omega_schedule: str = "rope",
        rope_base: float = 10000.0,
        bias: bool = True,
        delta_init_std: float = 0.02,
        delta_init: str = "paper",
        pcl: bool = False,
        pcl_target: str = "theta",
    ) -> None:
        super().__init__()
        if d_model % n_head:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_head ({n_head})")
        self.scheme = get_scheme(pos_scheme)
        self.n_head, self.head_dim = n_head, d_model // n_head
        self.scheme.validate(head_dim=self.head_dim, pcl=pcl)
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.proj = nn.Linear(d_model, d_model, bias=bias)
        self.resid_drop = nn.Dropout(dropout)
        self.scheme.init_attention(
            self,
            n_head=n_head,
            head_dim=self.head_dim,
            omega_schedule=omega_schedule,
            rope_base=rope_base,
            delta_init_std=delta_init_std,
            delta_init=delta_init,
        )
        if pcl_target not in ("theta", "rotated"):
            raise ValueError(f"pcl_target must be 'theta' or 'rotated', got {pcl_target!r}")
        self.pcl_target = pcl_target
        self.pcl_weight = nn.Parameter(torch.ones(2, self.head_dim // 2)) if pcl else None

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Per-head queries, keys and values before any positional rotation.

        Args:
            x: (B, T, d_model) hidden states (the input of :meth:`forward`).

        Returns:
            (q, k, v), each (B, H, T, D); used by :meth:`forward` and by analyses
            (the lab's head analysis, ``complexformer_lab.evaluation.heads``).
        """
        q, k, v = self._heads(x).unbind(0)  # each (B, H, T, D)
        return q, k, v

    def _heads(self, x: Tensor) -> Tensor:
        """(B, T, d_model) -> the (3, B, H, T, D) view of queries, keys and values."""
        b, t, _ = x.shape
        qkv = self.qkv(x).view(b, t, 3, self.n_head, self.head_dim)  # (B, T, 3, H, D)
        return qkv.permute(2, 0, 3, 1, 4)

    def forward(
        self,
        x: Tensor,
        cache: LayerKVCache | None = None,
        return_phases: bool = False,
        phase_loss: Callable[[tuple[Tensor, Tensor], Tensor], Any] | None = None,
    ) -> tuple[Tensor, Any]:
        """Attend causally.

        Args:
            x: (B, T, d_model) hidden states of the new positions.
            cache: optional layer cache; its length is the position of x[:, 0].
            return_phases: also return the (B, H, T, J) phases of queries and keys named by
                ``pcl_target`` (schemes with phases, the ``cmha*`` ones).
            phase_loss: a function of those phases and ``pcl_weight`` (the phase contrastive
                loss of the model, §3.2), evaluated here, inside the layer's forward, so that
                a sharded layer (FSDP2 gathers its parameters for its forward only) reads its
                own full ``pcl_weight``; its value is returned instead of the phases.

        Returns:
            (output (B, T, d_model), the phases, the phase loss, or None).
        """
        b, t, c = x.shape
        offset = cache.length if cache is not None else 0
        phases = None
        qkv = self._heads(x)  # (3, B, H, T, D)
        if return_phases or phase_loss is not None:
            q, k, v = qkv.unbind(0)  # each (B, H, T, D)
            q, k, phases = self.scheme.rotate_with_phases(self, q, k, offset, self.pcl_target)
        else:
            q, k = self.scheme.rotate_qk(self, qkv[:2], offset)  # each (B, H, T, D)
            v = qkv[2]
        if cache is not None:
            k, v = cache.update(k, v)
        bias = None
        if self.scheme.biases:
            bias = self.scheme.score_bias(self, t, k.shape[-2], offset)  # (H, Tq, Tk)
        y = attention(
            q,
            k,
            v,
            is_causal=True,
            q_offset=offset,
            bias=bias,
            dropout_p=self.dropout if self.training else 0.0,
        )  # (B, H, T, D)
        y = self.proj(y.transpose(1, 2).reshape(b, t, c))  # (B, T, d_model)
        if self.training and self.resid_drop.p > 0:
            y = self.resid_drop(y)
        if phase_loss is not None:
            return y, phase_loss(phases, self.pcl_weight)
        return y, phases

    def extra_repr(self) -> str:
        return f"scheme={self.scheme.name}, n_head={self.n_head}, head_dim={self.head_dim}"
