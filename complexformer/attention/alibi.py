"""ALiBi: linear distance biases per head (Press et al., "Train Short, Test Long")."""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["alibi_bias", "alibi_slopes"]


def alibi_slopes(n_head: int) -> Tensor:
    """ALiBi head slopes (Press et al., "Train Short, Test Long"), geometric in 2^(-8/n)."""
    if n_head <= 0:
        raise ValueError(f"n_head must be positive, got {n_head}")

    def pow2(n: int) -> list[float]:
        start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n_head).is_integer():
        slopes = pow2(n_head)
    else:
        closest = 2 ** math.floor(math.log2(n_head))
        slopes = pow2(closest) + pow2(2 * closest)[0::2][: n_head - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(slopes: Tensor, t_q: int, t_k: int, q_offset: int = 0) -> Tensor:
    """Additive ALiBi bias (H, Tq, Tk): -slope_h * (m - n) for query m and key n."""
    qpos = torch.arange(q_offset, q_offset + t_q, device=slopes.device, dtype=torch.float32)
    kpos = torch.arange(t_k, device=slopes.device, dtype=torch.float32)
    dist = qpos.unsqueeze(1) - kpos.unsqueeze(0)  # (Tq, Tk)
    return -slopes.float().view(-1, 1, 1) * dist
