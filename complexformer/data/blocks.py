"""Fixed-length token blocks: a seeded, resumable, DDP-shardable random sampler for training and
a deterministic consecutive-block iterator for evaluation.

A block is ``block_size + 1`` consecutive tokens: inputs ``block[:-1]`` and next-token targets
``block[1:]`` (see :func:`inputs_targets`).

Training (:class:`BlockSampler`): the batch of step ``s`` is a pure function of
``(seed, s)``. A *global* batch of ``world_size * batch_size`` offsets is drawn uniformly from
``[0, N - block_size - 1]`` with a generator seeded by ``SeedSequence((seed, s))``; rank ``r``
takes rows ``r * batch_size`` to ``(r + 1) * batch_size - 1``. So W ranks with per-rank batch b
see exactly the blocks of one process with batch W * b, and resuming needs only the step (the
state dict stores it; there is no hidden generator state).

Evaluation (:class:`EvalBlocks`): block ``i`` is ``tokens[i * T : i * T + T + 1]`` for
``i = 0 .. (N - 1) // T - 1`` (T = block_size): consecutive, non-overlapping inputs whose targets
cover every token but the first exactly once, except the final ``(N - 1) % T`` tokens, which do
not fill a block and are dropped. Optionally capped at ``max_blocks`` and sharded over ranks
(block ``i`` goes to rank ``i % world_size``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = ["BlockSampler", "EvalBlocks", "gather_blocks", "inputs_targets"]


def _check_positive(name: str, value: int) -> int:
    if int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _check_rank(rank: int, world_size: int) -> tuple[int, int]:
    world_size = _check_positive("world_size", world_size)
    if int(rank) != rank or not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank!r}")
    return int(rank), world_size


def gather_blocks(tokens: np.ndarray, starts: np.ndarray, length: int) -> Tensor:
    """Copy ``tokens[start : start + length]`` for each start into an int64 tensor.

    Args:
        tokens: the flat token array (N,) (may be a ``np.memmap``).
        starts: block start offsets (B,).
        length: block length L.

    Returns:
        An int64 tensor (B, L).
    """
    idx = np.asarray(starts, dtype=np.int64)[:, None] + np.arange(length, dtype=np.int64)
    return torch.from_numpy(np.asarray(tokens[idx], dtype=np.int64))  # (B, L)


def inputs_targets(blocks: Tensor) -> tuple[Tensor, Tensor]:
    """Split blocks into inputs and next-token targets.

    Args:
        blocks: (B, T + 1) token ids.

    Returns:
        ``(inputs, targets)``, both (B, T): ``blocks[:, :-1]`` and ``blocks[:, 1:]``.
    """
    return blocks[:, :-1], blocks[:, 1:]


class BlockSampler:
    """Random fixed-length training blocks; the batch of a step is a pure function of (seed, step).

    Iterating yields the batches of steps ``step, step + 1, ...`` and advances ``step``;
    :meth:`batch` returns any step's batch without touching the state.

    Args:
        tokens: the flat token array (N,), N >= block_size + 1.
        block_size: T, the model's context length; blocks hold T + 1 tokens.
        batch_size: per-rank batch size b.
        seed: the sampling seed (a non-negative integer).
        rank: this process's rank r in [0, world_size).
        world_size: number of data-parallel processes W; the global batch is W * b.
        step: the first step to yield when iterating.

    Raises:
        ValueError: invalid sizes, rank, seed, or fewer than block_size + 1 tokens.
    """

    def __init__(
        self,
        tokens: np.ndarray,
        block_size: int,
        batch_size: int,
        *,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        step: int = 0,
    ) -> None:
        self.tokens = tokens
        self.block_size = _check_positive("block_size", block_size)
        self.batch_size = _check_positive("batch_size", batch_size)
        self.rank, self.world_size = _check_rank(rank, world_size)
        if int(seed) != seed or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.seed = int(seed)
        if len(tokens) < self.block_size + 1:
            raise ValueError(
                f"need at least block_size + 1 = {self.block_size + 1} tokens to sample a "
                f"block, got {len(tokens)}; use a smaller block_size or a larger corpus"
            )
        if step < 0:
            raise ValueError(f"step must be non-negative, got {step}")
        self.step = int(step)

    @property
    def global_batch_size(self) -> int:
        """World size times the per-rank batch size."""
        return self.world_size * self.batch_size

    def global_offsets(self, step: int) -> np.ndarray:
        """Block start offsets of the whole global batch of ``step``.

        Args:
            step: the training step (non-negative).

        Returns:
            int64 array (W * b,) of offsets in ``[0, N - block_size - 1]``.
        """
        if step < 0:
            raise ValueError(f"step must be non-negative, got {step}")
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence((self.seed, step))))
        high = len(self.tokens) - self.block_size  # exclusive: start + T + 1 <= N
        return rng.integers(0, high, size=self.global_batch_size, dtype=np.int64)

    def offsets(self, step: int) -> np.ndarray:
        """This rank's block start offsets of ``step``: (b,) int64."""
        lo = self.rank * self.batch_size
        return self.global_offsets(step)[lo : lo + self.batch_size]

    def batch(self, step: int) -> Tensor:
        """This rank's batch of ``step``.

        Args:
            step: the training step.

        Returns:
            int64 tensor (b, block_size + 1); see :func:`inputs_targets`.
        """
        return gather_blocks(self.tokens, self.offsets(step), self.block_size + 1)

    def __iter__(self) -> Iterator[Tensor]:
        return self

    def __next__(self) -> Tensor:
        out = self.batch(self.step)  # (b, T + 1)
        self.step += 1
        return out

    def state_dict(self) -> dict[str, Any]:
        """The resumable state: the next step, plus the settings that define the stream."""
        return {
            "step": self.step,
            "seed": self.seed,
            "block_size": self.block_size,
            "global_batch_size": self.global_batch_size,
            "n_tokens": len(self.tokens),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`; the next batch is the one of ``state["step"]``.

        The world size may differ from the saved run as long as the global batch size is the
        same (the global stream of blocks is then identical).

        Args:
            state: a dict from :meth:`state_dict`.

        Raises:
            ValueError: block size, global batch size or token count differ from the saved
                ones (the stream would silently change).
        """
        for key, mine in (
            ("block_size", self.block_size),
            ("global_batch_size", self.global_batch_size),
            ("n_tokens", len(self.tokens)),
        ):
            if key in state and state[key] != mine:
                raise ValueError(
                    f"sampler state has {key}={state[key]} but this sampler has {mine}; "
                    f"resuming would change the data stream"
                )
        self.seed = int(state.get("seed", self.seed))
        self.step = int(state["step"])

    def __repr__(self) -> str:
        return (
            f"BlockSampler(n_tokens={len(self.tokens)}, block_size={self.block_size}, "
            f"batch_size={self.batch_size}, seed={self.seed}, rank={self.rank}/"
            f"{self.world_size}, step={self.step})"
        )


class EvalBlocks:
    """Consecutive non-overlapping evaluation blocks over a whole split, in fixed order.

    Args:
        tokens: the flat token array (N,).
        block_size: T; blocks hold T + 1 tokens and start every T tokens.
        batch_size: blocks per yielded batch (the last batch may be smaller).
        max_blocks: cap on the number of blocks (the first ones are kept); None for all.
        rank: this process's rank; it gets blocks ``rank, rank + W, ...``.
        world_size: number of processes W.
    """

    def __init__(
        self,
        tokens: np.ndarray,
        block_size: int,
        batch_size: int,
        *,
        max_blocks: int | None = None,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self.tokens = tokens
        self.block_size = _check_positive("block_size", block_size)
        self.batch_size = _check_positive("batch_size", batch_size)
        self.rank, self.world_size = _check_rank(rank, world_size)
        n = max(0, (len(tokens) - 1) // self.block_size)
        if max_blocks is not None:
            if max_blocks < 0:
                raise ValueError(f"max_blocks must be non-negative or None, got {max_blocks}")
            n = min(n, int(max_blocks))
        self.n_blocks = n  # over all ranks
        self._mine = np.arange(self.rank, n, self.world_size, dtype=np.int64)  # block indices

    @property
    def n_rank_blocks(self) -> int:
        """Number of blocks this rank evaluates."""
        return len(self._mine)

    @property
    def n_targets(self) -> int:
        """Number of predicted tokens on this rank (blocks times block_size)."""
        return self.n_rank_blocks * self.block_size

    def __len__(self) -> int:
        """Number of batches this rank yields."""
        return -(-self.n_rank_blocks // self.batch_size)

    def __iter__(self) -> Iterator[Tensor]:
        """Yield int64 tensors (<= batch_size, block_size + 1) in block order."""
        for i in range(0, self.n_rank_blocks, self.batch_size):
            starts = self._mine[i : i + self.batch_size] * self.block_size
            yield gather_blocks(self.tokens, starts, self.block_size + 1)
