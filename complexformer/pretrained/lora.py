"""Real LoRA layer (Hu et al. 2022, "LoRA: Low-Rank Adaptation of Large Language Models").

y = W·x + b + (alpha/r)·B·(A·x) with A (r × in) Kaiming-uniform and B (out × r) zero, as in
peft, so a wrapped model starts equal to its base. Used by the CmplxBERT baselines and by the
``lora`` control of the CMHA retrofit.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["RealLoRALinear"]


class RealLoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable real low-rank update.

    Args:
        base_layer: the linear layer (frozen in place, not copied).
        r: rank (> 0).
        alpha: scale numerator (default r, i.e. scale 1).
        dropout: dropout on the adapter's input.
    """

    def __init__(
        self, base_layer: nn.Linear, r: int, alpha: float | None = None, dropout: float = 0.0
    ) -> None:
        super().__init__()
        if r < 1:
            raise ValueError(f"RealLoRALinear: r must be >= 1, got {r}")
        self.base_layer = base_layer.requires_grad_(False)
        self.r = r
        self.scaling = (alpha if alpha is not None else r) / r
        w = base_layer.weight
        self.lora_A = nn.Parameter(
            torch.empty(r, base_layer.in_features, dtype=w.dtype, device=w.device)
        )
        self.lora_B = nn.Parameter(
            torch.zeros(base_layer.out_features, r, dtype=w.dtype, device=w.device)
        )
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        """The base layer's output plus the scaled low-rank update of ``x`` (..., in)."""
        return self.base_layer(x) + self.scaling * (self.dropout(x) @ self.lora_A.T @ self.lora_B.T)
