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
    It is the case δ = 1, b = 0 of CMHA (Shao et al. 2025, eq. 8).
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
    ) -> None:
        omega = rope_frequencies(head_dim, rope_base, omega_schedule)  # (J,)
        attn.register_buffer("omega", omega, persistent=False)

    def rotate(self, attn: nn.Module, q: Tensor, k: Tensor, offset: int) -> tuple[Tensor, Tensor]:
        return apply_rope(q, offset, attn.omega, PAIRS), apply_rope(k, offset, attn.omega, PAIRS)

    def score_variants(self, attn: nn.Module, q: Tensor, k: Tensor) -> dict[str, Tensor | None]:
        """S = rope(q)·rope(k)/√D; S_pos: the moduli rotated by position (δ = 0 of CMHA);
        S_sem = q·k/√D (ω = 0)."""
        scale = 1.0 / math.sqrt(q.shape[-1])
        omega = attn.omega
        zero = torch.zeros_like(omega)

        def dot(a: Tensor, b: Tensor) -> Tensor:
            return (a @ b.transpose(-1, -2)) * scale

        return {
            "full": dot(*self.rotate(attn, q, k, 0)),
            "no_semantic": dot(
                polar_rotate(q, zero, None, 0, omega, PAIRS),
                polar_rotate(k, zero, None, 0, omega, PAIRS),
            ),
            "no_position": dot(q, k),
        }
