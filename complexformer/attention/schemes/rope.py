"""RoPE as a positional scheme: q and k rotated by position angles (Su et al., "RoFormer")."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..polar import polar_rotate
from ..rotary import phase_dtype, rope_frequencies, rope_tables, rotate_with_tables
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

    def tables(self, attn: nn.Module, offset: int, t: int, x: Tensor) -> tuple[Tensor, Tensor]:
        """cos and sin (T, D) of positions ``offset .. offset + t - 1`` (:func:`rope_tables`).

        Computed once per layer for q and k. With integer positions (the default
        :meth:`positions`) they are views of a table kept on the layer (not a buffer: never
        saved), grown on demand and rebuilt when ``omega`` (moved with the layer) or the dtype
        change, so training steps and decoding steps compute no angles (as a minimal model's
        precomputed tables); a decoding step (T = 1) takes a row view made when the table was
        built. Under ``torch.compile`` they are computed in the graph.
        """
        pos = self.positions(attn, offset, t)
        pdt = phase_dtype(x)
        omega = attn._buffers.get("omega")  # not attn.omega: Module.__getattr__ is slow
        if omega is None:  # a subclass that keeps omega as a parameter or an attribute
            omega = attn.omega
        if not isinstance(pos, int) or torch.compiler.is_compiling():
            return rope_tables(pos, t, omega, x.device, pdt, PAIRS)
        # (omega, its version, dtype, cos, sin, one-row views of cos and sin or None)
        cached = attn.__dict__.get("_rope_table")
        if (
            cached is None
            or cached[0] is not omega  # moved or replaced with the layer
            or cached[1] != omega._version
            or cached[2] is not pdt
            or cached[3].shape[0] < pos + t
        ):
            n = max(pos + t, 2 * cached[3].shape[0] if cached is not None else 0)
            cos, sin = rope_tables(0, n, omega, omega.device, pdt, PAIRS)  # (n, D) each
            cached = [omega, omega._version, pdt, cos, sin, None]
            attn.__dict__["_rope_table"] = cached
        if t == 1:  # one view per position, made once per table in one call each
            rows = cached[5]
            if rows is None:
                rows = cached[5] = (cached[3].split(1), cached[4].split(1))  # n of (1, D)
            return rows[0][pos], rows[1][pos]
        return cached[3].narrow(0, pos, t), cached[4].narrow(0, pos, t)  # (T, D) each

    def rotate(self, attn: nn.Module, q: Tensor, k: Tensor, offset: int) -> tuple[Tensor, Tensor]:
        cos, sin = self.tables(attn, offset, q.shape[-2], q)  # (T, D) each
        return rotate_with_tables(q, cos, sin, PAIRS), rotate_with_tables(k, cos, sin, PAIRS)

    def rotate_qk(self, attn: nn.Module, qk: Tensor, offset: int) -> tuple[Tensor, Tensor]:
        """Queries and keys (2, B, H, T, D) rotated in one pass over both: the same values as
        :meth:`rotate`, half the operator calls (decoding is bound by them). A subclass
        that overrides :meth:`rotate` (CMHA's polar rotation) keeps its own."""
        if type(self).rotate is not RotaryScheme.rotate:
            return self.rotate(attn, qk[0], qk[1], offset)
        cos, sin = self.tables(attn, offset, qk.shape[-2], qk)  # (T, D) each
        q, k = rotate_with_tables(qk, cos, sin, PAIRS).unbind(0)
        return q, k

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
