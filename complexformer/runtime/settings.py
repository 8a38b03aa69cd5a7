"""Context managers shared by training, evaluation and benchmarks: eval mode, CPU settings."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

__all__ = ["cpu_settings", "eval_mode"]


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Put ``model`` in eval mode for the block and restore its training flag afterwards.

    Gradients are not switched off: combine with ``torch.no_grad()`` where none are needed.
    """
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


@contextlib.contextmanager
def cpu_settings(threads: int | None = None, flush_denormal: bool = False) -> Iterator[None]:
    """Set torch's intra-op threads and denormal flushing for the block, then restore them.

    Args:
        threads: ``torch.set_num_threads`` inside the block (None: leave it).
        flush_denormal: flush denormal floats to zero inside the block. On CPUs they slow some
            kernels by ~30x (the phase contrastive loss's log-softmax at tau = 0.1 makes many
            in its backward pass).
    """
    n = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    flushed = bool(flush_denormal) and torch.set_flush_denormal(True)
    try:
        yield
    finally:
        if flushed:
            torch.set_flush_denormal(False)
        if torch.get_num_threads() != n:
            torch.set_num_threads(n)
