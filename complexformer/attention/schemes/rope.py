"""RoPE as a positional scheme: q and k rotated by position angles (Su et al., "RoFormer")."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..polar import polar_rotate
from ..rotary import apply_rope, rope_frequencies
from .base import PAIRS, PositionalScheme

__all__ = ["RotaryScheme"]


class RotaryScheme(PositionalScheme):
    """Rotary position embedding: pair j of q and k at position p is rotated by p ω_j.

    Owns the (J,) buffer ``attn.omega`` (not saved in checkpoints: it is recomputed from
    ``omega_schedule`` and ``rope_base``, see :func:`~complexformer.attention.rope_frequencies`).
    It is the case δ = 1, b = 0 of CMHA (Shao et al. 2025, eq. 8). Subclasses change the
    positions (:meth:`positions`, e.g. scaled for position interpolation) or the frequencies
    (the ``omega`` buffer in :meth:`init_attention`); :meth:`rotate` and
    :meth:`score_variants` both use them, so the KV cache and the head analysis follow.
    """

    name = "rope"
    description = "rotary position embedding"
    rotates = True

    def init_attention(
        self,
        attn: nn.Module,
        *,
        n_head: int,
        head_dim: int,
        omega_schedule: str = "rope",
        rope_base: float = 10000.0,
        delta_init_std: float = 0.02,
        delta_init: str = "paper",
    ) -> None:
        omega = rope_frequencies(head_dim, rope_base, omega_schedule)  # (J,)
        attn.register_buffer("omega", omega, persistent=False)

    def positions(self, attn: nn.Module, offset: int, t: int) -> Tensor | int:
        """The positions p of the T tokens starting at ``offset``, whose angles are p ω_j.

        Returns:
            An int offset (positions ``offset .. offset + t - 1``, the default) or a (T,)
            float tensor.
        """
        return offset

    def rotate(self, attn: nn.Module, q: Tensor, k: Tensor, offset: int) -> tuple[Tensor, Tensor]:
        pos = self.positions(attn, offset, q.shape[-2])
        return apply_rope(q, pos, attn.omega, PAIRS), apply_rope(k, pos, attn.omega, PAIRS)

    def score_variants(self, attn: nn.Module, q: Tensor, k: Tensor) -> dict[str, Tensor | None]:
        """S = rope(q)·rope(k)/√D; S_pos: the pairs' moduli rotated by position (δ = 0 of
        CMHA); S_sem = q·k/√D (ω = 0)."""
        scale = 1.0 / math.sqrt(q.shape[-1])
        omega = attn.omega
        zero = torch.zeros_like(omega)
        pos = self.positions(attn, 0, q.shape[-2])

        def dot(a: Tensor, b: Tensor) -> Tensor:
            return (a @ b.transpose(-1, -2)) * scale

        return {
            "full": dot(*self.rotate(attn, q, k, 0)),
            "no_semantic": dot(
                polar_rotate(q, zero, None, pos, omega, PAIRS),
                polar_rotate(k, zero, None, pos, omega, PAIRS),
            ),
            "no_position": dot(q, k),
        }
