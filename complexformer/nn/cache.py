"""Key/value caches for incremental decoding with complex attention.

Self-attention uses :class:`complexformer.attention.cache.LayerKVCache` unchanged (its growing
buffers are dtype-agnostic, so they hold complex (B, H, T, d) keys and values): keys are
stored AFTER their rotary rotation, and the cache length is the position offset of the next
queries. Cross-attention keys/values come from a fixed memory, so they are projected once and
kept in a :class:`StaticKVCache`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from complexformer.attention.cache import LayerKVCache

__all__ = ["DecoderCache", "LayerKVCache", "StaticKVCache"]


class StaticKVCache:
    """Projected (and rotated) cross-attention keys / values (B, H, Tk, d), set once."""

    def __init__(self) -> None:
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    @property
    def filled(self) -> bool:
        return self.k is not None

    def set(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        self.k, self.v = k, v
        return k, v


class DecoderCache:
    """Per-layer caches of a :class:`~complexformer.nn.TransformerDecoder`.

    ``self_attn[i]`` grows by the new target positions at every step; ``cross_attn[i]`` holds
    the memory's keys/values after the first step. ``offset`` = number of decoded positions.
    """

    def __init__(self, num_layers: int) -> None:
        self.self_attn = [LayerKVCache() for _ in range(num_layers)]
        self.cross_attn = [StaticKVCache() for _ in range(num_layers)]

    def __len__(self) -> int:
        return len(self.self_attn)

    @property
    def offset(self) -> int:
        return self.self_attn[0].length if self.self_attn else 0

    @torch.no_grad()
    def reorder(self, index: Tensor) -> None:
        """Select batch rows (beam search, dropping finished sequences)."""
        for c in self.self_attn:
            if c.k is not None:
                c.k, c.v = c.k[index], c.v[index]
        for c in self.cross_attn:
            if c.k is not None:
                c.k, c.v = c.k[index], c.v[index]
