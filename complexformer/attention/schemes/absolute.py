"""Absolute position embeddings added to the tokens: learned (GPT-2) and sinusoidal.

Learned: a trainable table ``wpe`` of ``max_seq_len`` rows (Radford et al., GPT-2), which is
also the longest sequence such a model can run. Sinusoidal: the fixed encoding of Vaswani et
al., "Attention Is All You Need" (sec. 3.4), added to token embeddings scaled by √d_model.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from .base import PositionalScheme

__all__ = ["LearnedPositions", "SinusoidalPositions", "sinusoidal_embedding"]


def sinusoidal_embedding(positions: Tensor, dim: int) -> Tensor:
    """Vaswani et al. absolute encoding: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos."""
    i = torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32)
    ang = positions.float().unsqueeze(-1) / (10000.0 ** (i / dim))  # (T, ceil(d/2))
    pe = torch.stack((torch.sin(ang), torch.cos(ang)), dim=-1).flatten(-2)  # (T, 2*ceil(d/2))
    return pe[..., :dim]


def _positions(x: Tensor, offset: int) -> Tensor:
    return torch.arange(offset, offset + x.shape[1], device=x.device)  # (T,)


class LearnedPositions(PositionalScheme):
    """Learned absolute positions (GPT-2 style): owns the model's ``wpe`` table
    (max_seq_len × d_model), so sequences cannot be longer than ``max_seq_len``."""

    name = "learned"
    description = "learned absolute positions (GPT-2)"
    embeds_tokens = True

    def init_model(self, model: nn.Module, config: Any) -> None:
        model.wpe = nn.Embedding(config.max_seq_len, config.d_model)

    def embed(self, model: nn.Module, x: Tensor, offset: int) -> Tensor:
        return x + model.wpe(_positions(x, offset)).to(x.dtype)  # (B, T, C)

    def max_length(self, config: Any) -> int | None:
        return int(config.max_seq_len)


class SinusoidalPositions(PositionalScheme):
    """Fixed sinusoidal absolute positions (Vaswani et al.); no parameters, any length."""

    name = "sinusoidal"
    description = "sinusoidal absolute positions"
    embeds_tokens = True

    def embed(self, model: nn.Module, x: Tensor, offset: int) -> Tensor:
        # Vaswani et al. (sec. 3.4) scale the token embeddings by sqrt(d_model) before adding
        # the unit-amplitude encoding; without it the position signal is ~50x the token
        # signal at the 0.02 init and the model trains far worse.
        d_model = x.shape[-1]
        x = x * math.sqrt(d_model)
        return x + sinusoidal_embedding(_positions(x, offset), d_model).to(x.dtype)  # (B, T, C)
