"""Real LoRA (Hu et al. 2022, "LoRA: Low-Rank Adaptation of Large Language Models"): the
baseline the CmplxBERT-LoRA paper compares against, with about as many trainable parameters.

y = W·x + b + (alpha/r)·B·(A·x) with A (r × in) Kaiming-uniform and B (out × r) zero, as in
peft, so a wrapped model starts equal to its base.
"""

from __future__ import annotations

from torch import nn

from ..pretrained import RealLoRALinear
from .config import target_matches

__all__ = ["RealLoRALinear", "add_real_lora"]


def add_real_lora(
    model: nn.Module, r: int, target_modules, alpha: float | None = None, dropout: float = 0.0
) -> list[str]:
    """Freeze ``model`` and replace every targeted ``nn.Linear`` by a :class:`RealLoRALinear`.

    Args:
        model: e.g. a ``BertForSequenceClassification`` (changed in place).
        r: rank.
        target_modules: module-name suffixes or a full-match regex (as ComplexLoRAConfig).
        alpha: scale numerator.
        dropout: adapter dropout.

    Returns:
        The names of the wrapped layers.

    Raises:
        ValueError: nothing matched.
    """
    model.requires_grad_(False)
    names = [
        n
        for n, m in model.named_modules()
        if isinstance(m, nn.Linear) and target_matches(target_modules, n)
    ]
    if not names:
        raise ValueError(f"add_real_lora: target_modules {target_modules!r} match no Linear")
    for name in names:
        parent_name, _, leaf = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, leaf, RealLoRALinear(getattr(parent, leaf), r, alpha, dropout))
    return names
