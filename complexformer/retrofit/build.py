"""Builders: load the pre-trained base of a retrofit and turn it into the model that trains."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..pretrained import RealLoRALinear, load_causal_lm
from .config import RetrofitConfig
from .convert import to_cmha

__all__ = ["add_lora", "load_base", "prepare_model"]

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def load_base(config: RetrofitConfig) -> tuple[Any, Any]:
    """The pre-trained causal LM named by ``config.base`` and its tokenizer (eval mode, CPU)."""
    model, tokenizer, _ = load_causal_lm(
        config.base, dtype=_DTYPES[config.dtype], role="base", extra="retrofit"
    )
    return model, tokenizer


def add_lora(model: nn.Module, r: int, targets: tuple[str, ...]) -> list[str]:
    """Wrap every ``nn.Linear`` whose name ends with one of ``targets`` in a real LoRA layer.

    Returns:
        The wrapped module names.

    Raises:
        ValueError: no module matched.
    """
    names = [
        n
        for n, m in model.named_modules()
        if isinstance(m, nn.Linear) and n.rsplit(".", 1)[-1] in targets
    ]
    if not names:
        raise ValueError(f"lora_targets {list(targets)} match no nn.Linear of the model")
    for name in names:
        parent_name, _, leaf = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        setattr(parent, leaf, RealLoRALinear(getattr(parent, leaf), r))
    return names


def prepare_model(model: nn.Module, config: RetrofitConfig) -> nn.Module:
    """Convert ``model`` to CMHA (δ = 1, b = 0) and set what trains, as ``config`` says.

    For ``train="lora"`` the LoRA layers are added after the conversion, so the CMHA hooks
    stay on the original projections' outputs (LoRA's sum included).
    """
    to_cmha(model, scheme=config.scheme, gqa=config.gqa, trainable=config.trainable)
    if config.train == "lora":
        add_lora(model, config.lora_r, config.lora_targets)
    return model
