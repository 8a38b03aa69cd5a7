"""A token split stored as several memory-mapped shard files, read as one flat array.

``prepare`` (:mod:`complexformer.data.prepare`) cuts each split's flat token stream into shards
of at most ``shard_tokens`` tokens: shard ``k`` holds tokens ``[k * S, (k + 1) * S)`` of the
stream, so the shards' concatenation is the stream whatever ``S`` is.
:class:`ShardedTokens` maps them and answers ``len()`` and integer-array indexing the way the
samplers (:mod:`complexformer.data.blocks`) index a flat ``np.memmap``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .tokens import open_tokens

__all__ = ["ShardWriter", "ShardedTokens", "open_shards"]


class ShardedTokens:
    """Several flat token files as one read-only 1-D array of ``sum(len(shard))`` tokens.

    Supports ``len``, ``shape``, ``size``, ``dtype``, integer and slice indexing (step 1) and
    indexing by an integer array of any shape (the result has that shape), which is what
    :func:`~complexformer.data.blocks.gather_blocks` does.

    Args:
        shards: the 1-D token arrays (memmaps), in stream order.
    """

    ndim = 1

    def __init__(self, shards: Sequence[np.ndarray]) -> None:
        if not shards:
            raise ValueError("ShardedTokens needs at least one shard")
        self.shards = list(shards)
        self.dtype = self.shards[0].dtype
        sizes = np.array([len(s) for s in self.shards], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(sizes)])  # (K + 1,)

    def __len__(self) -> int:
        return int(self.starts[-1])

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    @property
    def size(self) -> int:
        return len(self)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.concatenate([np.asarray(s) for s in self.shards])
        return out if dtype is None else out.astype(dtype)

    def __getitem__(self, key: Any) -> Any:
        n = len(self)
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step != 1:
                return np.asarray(self)[key]
            return self[np.arange(start, max(start, stop), dtype=np.int64)]
        if np.isscalar(key):
            i = int(key)
            if not -n <= i < n:
                raise IndexError(f"index {i} out of range for {n} tokens")
            return self[np.array([i % n])][0]
        idx = np.asarray(key, dtype=np.int64)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"token index out of range for {n} tokens")
        flat = np.where(idx < 0, idx + n, idx).reshape(-1)
        shard = np.searchsorted(self.starts, flat, side="right") - 1  # (M,)
        out = np.empty(flat.shape, dtype=self.dtype)
        for k in np.unique(shard):
            sel = shard == k
            out[sel] = self.shards[k][flat[sel] - self.starts[k]]
        return out.reshape(idx.shape)

    def __repr__(self) -> str:
        return f"ShardedTokens(n_tokens={len(self)}, shards={len(self.shards)}, dtype={self.dtype})"


def open_shards(paths: Sequence[str | os.PathLike], dtype: np.dtype | str) -> np.ndarray | Any:
    """Memory-map shard files as one flat token array.

    Args:
        paths: the shard files in stream order.
        dtype: their dtype (``uint16`` or ``uint32``, little-endian).

    Returns:
        The plain ``np.memmap`` of a single shard, else a :class:`ShardedTokens`.
    """
    arrays = [open_tokens(p, dtype) for p in paths]
    if len(arrays) == 1:
        return arrays[0]
    return ShardedTokens(arrays)


class ShardWriter:
    """Append token arrays to ``<directory>/<prefix>-00000.bin``, ``-00001.bin``, ...,
    starting a new shard every ``shard_tokens`` tokens exactly.

    Args:
        directory: where the shards go (it exists).
        prefix: the file-name prefix, e.g. ``"train"``.
        dtype: the token dtype.
        shard_tokens: the most tokens in one shard (>= 1).

    Attributes:
        shards: ``[(file name, n_tokens), ...]`` written so far (after :meth:`close`).
    """

    def __init__(
        self, directory: str | os.PathLike, prefix: str, dtype: np.dtype, shard_tokens: int
    ) -> None:
        if int(shard_tokens) != shard_tokens or shard_tokens < 1:
            raise ValueError(f"shard_tokens must be a positive integer, got {shard_tokens!r}")
        self.directory, self.prefix = os.fspath(directory), prefix
        self.dtype, self.shard_tokens = np.dtype(dtype), int(shard_tokens)
        self.shards: list[tuple[str, int]] = []
        self._file: Any = None
        self._in_shard = 0

    def _open_next(self) -> None:
        self._close_current()
        name = f"{self.prefix}-{len(self.shards):05d}.bin"
        self._file = open(os.path.join(self.directory, name), "xb")  # noqa: SIM115
        self.shards.append((name, 0))
        self._in_shard = 0

    def _close_current(self) -> None:
        if self._file is not None:
            self._file.close()
            self.shards[-1] = (self.shards[-1][0], self._in_shard)
            self._file = None

    def write(self, tokens: np.ndarray) -> None:
        """Append a 1-D token array (converted to the writer's dtype)."""
        tokens = np.ascontiguousarray(tokens, dtype=self.dtype)
        pos = 0
        while pos < len(tokens):
            if self._file is None or self._in_shard == self.shard_tokens:
                self._open_next()
            take = min(len(tokens) - pos, self.shard_tokens - self._in_shard)
            self._file.write(memoryview(tokens[pos : pos + take]))
            self._in_shard += take
            pos += take

    def close(self) -> list[tuple[str, int]]:
        """Close the last shard; an empty stream still gets one empty shard. Returns
        :attr:`shards`."""
        if not self.shards:
            self._open_next()
        self._close_current()
        return self.shards
