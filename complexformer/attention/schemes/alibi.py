"""ALiBi as a positional scheme: a linear distance bias per head (Press et al., "Train Short,
Test Long: Attention with Linear Biases Enables Input Length Extrapolation")."""

from __future__ import annotations

from torch import Tensor, nn

from ..alibi import alibi_bias, alibi_slopes
from .base import PositionalScheme

__all__ = ["AlibiScheme"]


class AlibiScheme(PositionalScheme):
    """Score bias −slope_h (m − n) for query m and key n; owns the (H,) buffer
    ``attn.slopes`` (not saved in checkpoints). The head analysis separates the semantic
    term q·k/√D from the bias (the default :meth:`PositionalScheme.score_variants`)."""

    name = "alibi"
    description = "ALiBi linear distance bias"
    biases = True

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
        attn.register_buffer("slopes", alibi_slopes(n_head), persistent=False)

    def score_bias(self, attn: nn.Module, t_q: int, t_k: int, offset: int) -> Tensor:
        return alibi_bias(attn.slopes, t_q, t_k, offset)  # (H, Tq, Tk)
