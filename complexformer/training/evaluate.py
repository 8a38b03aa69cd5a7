"""Validation loss and perplexity over consecutive blocks of a token array (DDP-aware)."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..data import EvalBlocks
from ..runtime import eval_mode
from .dist import all_reduce_sum

__all__ = ["evaluate_perplexity"]


@torch.no_grad()
def evaluate_perplexity(
    model: nn.Module,
    tokens: np.ndarray,
    block_size: int | None = None,
    batch_size: int = 8,
    max_blocks: int | None = None,
    device: str | torch.device | None = None,
    *,
    bf16: bool = False,
    rank: int = 0,
    world_size: int = 1,
) -> dict[str, float | int]:
    """Mean next-token negative log-likelihood and perplexity on ``tokens``.

    The array is cut into consecutive non-overlapping blocks of ``block_size + 1`` tokens
    (:class:`~complexformer.data.EvalBlocks`): each block is fed whole (``block_size + 1``
    tokens = the model's ``max_seq_len`` by default) and its ``block_size`` next-token
    predictions are scored, so every token but the first of the array (and an incomplete
    tail) is predicted exactly once. Under DDP each rank scores its share of the blocks and
    the NLL sums and token counts are all-reduced before dividing.

    Args:
        model: a language model whose ``model(ids)`` returns an object with ``.logits``
            (B, T, V) (e.g. :class:`~complexformer.models.ComplexFormerLM`).
        tokens: the flat token array (N,).
        block_size: predictions per block; default ``model.config.max_seq_len - 1``.
        batch_size: blocks per forward pass.
        max_blocks: evaluate only the first this many blocks (None: all).
        device: where to run; default the device of the model's parameters.
        bf16: forward under bfloat16 autocast (the loss is computed in float32).
        rank: this process's rank (DDP).
        world_size: number of processes (DDP).

    Returns:
        ``{"loss": mean NLL in nats, "ppl": exp(loss), "tokens": scored tokens,
        "blocks": blocks}`` (totals over all ranks).

    Raises:
        ValueError: fewer than ``block_size + 1`` tokens (nothing to score).
    """
    if block_size is None:
        block_size = int(model.config.max_seq_len) - 1
    if device is None:
        device = next(model.parameters()).device
    device = torch.device(device)
    blocks = EvalBlocks(
        tokens, block_size, batch_size, max_blocks=max_blocks, rank=rank, world_size=world_size
    )
    if blocks.n_blocks == 0:
        raise ValueError(
            f"cannot evaluate: {len(tokens)} tokens do not fill one block of "
            f"block_size + 1 = {block_size + 1} tokens"
        )
    nll = torch.zeros((), dtype=torch.float64, device=device)
    count = torch.zeros((), dtype=torch.float64, device=device)
    autocast = (
        torch.autocast(device_type=device.type, dtype=torch.bfloat16)
        if bf16
        else contextlib.nullcontext()
    )
    with eval_mode(model):
        for batch in blocks:  # (b, block_size + 1)
            batch = batch.to(device)
            with autocast:
                logits = model(batch).logits  # (b, T + 1, V)
            targets = batch[:, 1:]
            loss = F.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                targets.reshape(-1),
                reduction="sum",
            )
            nll += loss.double()
            count += targets.numel()
    totals = all_reduce_sum(torch.stack([nll, count]))
    total_nll, total_count = float(totals[0]), int(round(float(totals[1])))
    mean = total_nll / total_count
    return {
        "loss": mean,
        "ppl": math.exp(min(mean, 700.0)),
        "tokens": total_count,
        "blocks": blocks.n_blocks,
    }
