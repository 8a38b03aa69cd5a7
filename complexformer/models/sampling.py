"""Next-token sampling: temperature, top-k and nucleus (top-p) filtering (pure functions)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["check_sampling_args", "filter_logits", "sample_next"]


def check_sampling_args(temperature: float, top_p: float, top_k: int) -> None:
    """Raise ValueError naming the bad value and what is allowed."""
    if not (temperature >= 0 and math.isfinite(temperature)):
        raise ValueError(f"temperature must be >= 0 and finite (0 means greedy), got {temperature}")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if not isinstance(top_k, int) or top_k < 0:
        raise ValueError(f"top_k must be an integer >= 0 (0 disables it), got {top_k!r}")


def filter_logits(logits: Tensor, top_k: int = 0, top_p: float = 1.0) -> Tensor:
    """Set logits outside the top-k and outside the nucleus of mass top_p to -inf.

    The nucleus is the smallest set of most likely tokens whose probability reaches top_p
    (Holtzman et al., "The Curious Case of Neural Text Degeneration"); the most likely token
    is always kept.

    Args:
        logits: (B, V) (already divided by the temperature).
        top_k: keep the k largest (0: all).
        top_p: nucleus mass (1: all).
    """
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, idx = torch.sort(logits, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        # mass strictly before each token; a token is dropped once that reaches top_p
        before = torch.cumsum(probs, dim=-1) - probs
        drop_sorted = before >= top_p
        drop_sorted[..., 0] = False
        drop = torch.zeros_like(drop_sorted).scatter(-1, idx, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def sample_next(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Pick next tokens (B,) from (B, V) logits; temperature 0 is greedy (argmax)."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = filter_logits(logits.float() / temperature, top_k, top_p)
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
