"""Activation checkpointing per transformer block (``TrainConfig.activation_checkpointing``).

Each block's ``forward`` keeps only its inputs during the forward pass and is run again in
the backward pass to rebuild its activations (``torch.utils.checkpoint.checkpoint`` without
re-entrance, the RNG state saved and restored so that dropout draws the same masks): the
gradients are those of the plain model, and the peak memory of a step holds one block's
activations instead of all of them, at the price of a second forward pass of every block.

The block's ``forward`` is replaced on the instance, so its parameters keep their names (a
checkpoint is the same with and without it) and FSDP2's hooks, which run around the call of
the block, gather its parameters before the recomputation as before the first pass.
"""

from __future__ import annotations

import functools
from typing import Any

from torch import nn
from torch.utils.checkpoint import checkpoint

__all__ = ["checkpoint_blocks"]


def _checkpointed(forward: Any, *args: Any, **kwargs: Any) -> Any:
    return checkpoint(forward, *args, use_reentrant=False, **kwargs)


def checkpoint_blocks(blocks: list[nn.Module]) -> int:
    """Make each of ``blocks`` recompute its activations in the backward pass.

    Returns:
        The number of blocks changed (a block already changed is left as it is).
    """
    n = 0
    for block in blocks:
        if getattr(block, "_activation_checkpointed", False):
            continue
        block.forward = functools.partial(_checkpointed, block.forward)
        block._activation_checkpointed = True
        n += 1
    return n
