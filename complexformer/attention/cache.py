"""Key/value cache for incremental decoding.

Keys are stored *after* their positional rotation (CMHA polar rotation or RoPE), so a cached
key never needs to be rotated again; new queries are rotated at their absolute positions
(the cache length is the position offset).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["KVCache", "LayerKVCache"]


class LayerKVCache:
    """Growing (B, H, T, D) buffers of one attention layer's rotated keys and values.

    Args:
        capacity: positions allocated at the first update (a decoding loop that knows its
            total length passes it, so the buffers are never copied to grow); they double
            beyond it.
    """

    def __init__(self, capacity: int = 16) -> None:
        self.k: Tensor | None = None
        self.v: Tensor | None = None
        self.length = 0
        self.capacity = capacity

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append (B, H, T_new, D) keys and values; return all cached keys and values."""
        t_new = k.shape[-2]
        end = self.length + t_new
        if self.k is None or end > self.k.shape[-2]:
            capacity = max(end, 2 * (self.k.shape[-2] if self.k is not None else 0), self.capacity)
            new_k = k.new_empty(*k.shape[:-2], capacity, k.shape[-1])
            new_v = v.new_empty(*v.shape[:-2], capacity, v.shape[-1])
            if self.k is not None and self.length:
                new_k[..., : self.length, :] = self.k[..., : self.length, :]
                new_v[..., : self.length, :] = self.v[..., : self.length, :]
            self.k, self.v = new_k, new_v
        # narrow() rather than slicing: the same views, without parsing an index per call
        self.k.narrow(-2, self.length, t_new).copy_(k)
        self.v.narrow(-2, self.length, t_new).copy_(v)
        self.length = end
        return self.k.narrow(-2, 0, end), self.v.narrow(-2, 0, end)


class KVCache:
    """One :class:`LayerKVCache` per layer; ``offset`` is the number of cached positions.

    Args:
        n_layer: layers.
        capacity: positions each layer allocates at once (see :class:`LayerKVCache`).
    """

    def __init__(self, n_layer: int, capacity: int = 16) -> None:
        self.layers = [LayerKVCache(capacity) for _ in range(n_layer)]

    def __getitem__(self, i: int) -> LayerKVCache:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def offset(self) -> int:
        return self.layers[0].length if self.layers else 0

    @torch.no_grad()
    def reorder(self, index: Tensor) -> None:
        """Select batch rows (e.g. to drop finished sequences)."""
        for layer in self.layers:
            if layer.k is not None:
                layer.k, layer.v = layer.k[index], layer.v[index]
