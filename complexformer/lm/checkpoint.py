"""The language model of a training checkpoint: its configuration and its weights."""

from __future__ import annotations

import torch

from ..models.config import GPTConfig
from ..models.lm import ComplexFormerLM
from ..training.checkpoint import Checkpoint

__all__ = ["checkpoint_config", "model_from_checkpoint"]


def checkpoint_config(ckpt: Checkpoint) -> GPTConfig:
    """The :class:`~complexformer.models.GPTConfig` recorded in ``ckpt``."""
    return GPTConfig.from_dict(ckpt.state["model_config"])


def model_from_checkpoint(ckpt: Checkpoint, device: str | torch.device = "cpu") -> ComplexFormerLM:
    """A :class:`~complexformer.models.ComplexFormerLM` with the checkpoint's weights."""
    model = ComplexFormerLM(checkpoint_config(ckpt))
    ckpt.load_model_into(model, device)
    return model.to(device)
