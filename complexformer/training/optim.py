"""AdamW with weight-decay parameter groups, and the warm-up + cosine learning-rate schedule."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from .config import TrainConfig

__all__ = [
    "NO_DECAY_NAMES",
    "build_optimizer",
    "build_scheduler",
    "decay_split",
    "lr_at",
    "lr_factor",
    "param_groups",
    "use_fused_adamw",
]

NO_DECAY_NAMES = frozenset({"adapt_delta", "adapt_bias", "pcl_weight"})


def decay_split(model: nn.Module) -> tuple[list[str], list[str]]:
    """Names of the trainable parameters that get weight decay, and of those that do not.

    The rule: a parameter is decayed **iff it is the 2-D ``weight`` matrix of an
    ``nn.Linear``** and is not also an embedding. Everything else is not decayed: biases,
    LayerNorm weights and biases, token/position embeddings (a tied output projection
    shares the token embedding, so it is an embedding and is not decayed), the CMHA
    adaptation parameters ``adapt_delta``/``adapt_bias`` (they set phase scales and
    offsets; decay would pull delta towards 0, i.e. towards ignoring the semantic angle)
    and the PCL channel weights ``pcl_weight``.

    Each parameter appears once (``named_parameters`` skips tied duplicates, keeping the
    first name, e.g. ``wte.weight``). Frozen parameters are left out of both lists.

    Args:
        model: the model.

    Returns:
        ``(decay_names, no_decay_names)``.
    """
    linear_weights = {
        id(m.weight) for m in model.modules() if isinstance(m, nn.Linear) and m.weight.dim() == 2
    }
    embeddings = {
        id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()
    }
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        leaf = name.rsplit(".", 1)[-1]
        if id(p) in linear_weights and id(p) not in embeddings and leaf not in NO_DECAY_NAMES:
            decay.append(name)
        else:
            no_decay.append(name)
    return decay, no_decay


def param_groups(
    model: nn.Module, weight_decay: float, lr_scale: Callable[[str], float] | None = None
) -> list[dict[str, Any]]:
    """AdamW parameter groups ``decay`` and ``no_decay`` following :func:`decay_split`.

    Args:
        model: the model.
        weight_decay: the decay of the ``decay`` group (the other group has 0).
        lr_scale: a parameter's learning-rate multiplier from its name (None: 1 for all);
            parameters with another multiplier than 1 form groups of their own, named
            ``decay@0.3`` etc., whose ``lr_scale`` the optimizer applies to the lr.

    Returns:
        Dicts with ``params``, ``weight_decay``, ``name`` and ``lr_scale`` (empty groups
        omitted).
    """
    decay, no_decay = decay_split(model)
    params = dict(model.named_parameters())
    groups: dict[tuple[str, float], list[nn.Parameter]] = {}
    for kind, names in (("decay", decay), ("no_decay", no_decay)):
        for n in names:
            scale = 1.0 if lr_scale is None else float(lr_scale(n))
            groups.setdefault((kind, scale), []).append(params[n])
    return [
        {
            "name": kind if scale == 1.0 else f"{kind}@{scale:g}",
            "params": ps,
            "weight_decay": weight_decay if kind == "decay" else 0.0,
            "lr_scale": scale,
        }
        for (kind, scale), ps in groups.items()
    ]


def build_optimizer(
    model: nn.Module, cfg: TrainConfig, lr_scale: Callable[[str], float] | None = None
) -> torch.optim.AdamW:
    """``torch.optim.AdamW`` over :func:`param_groups` with the config's lr (times each
    group's ``lr_scale``), betas, eps and decay; fused where :func:`use_fused_adamw` says."""
    groups = param_groups(model, cfg.weight_decay, lr_scale)
    for g in groups:
        g["lr"] = cfg.lr * g["lr_scale"]
    device = next((p.device for g in groups for p in g["params"]), torch.device("cpu"))
    fused = True if use_fused_adamw(cfg.fused_adamw, device) else None
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, fused=fused)


def use_fused_adamw(setting: bool | str, device: torch.device) -> bool:
    """Whether AdamW runs fused: ``setting`` is ``TrainConfig.fused_adamw``.

    ``"auto"`` means on CUDA only: there the fused kernel is the anchors' default, while on
    a CPU it rounds differently from the multi-tensor update (measured: losses within
    ~2e-9 after 50 steps of a small MLP, not bit for bit), so ``"auto"`` keeps CPU runs
    bit-identical to those of earlier versions. ``True`` on a device without the kernel
    raises ``torch.optim.AdamW``'s own error.
    """
    if setting == "auto":
        return device.type == "cuda"
    return bool(setting)


def lr_factor(
    step: int, max_steps: int, warmup_steps: int, min_lr_ratio: float, schedule: str = "cosine"
) -> float:
    """Multiplier of the peak learning rate for the update with 0-based index ``step``.

    Linear warm-up ``(step + 1) / warmup_steps`` for ``step < warmup_steps`` (so the first
    update already moves), then a cosine (or, with ``schedule="linear"``, a straight line)
    from 1 at ``step = warmup_steps`` down to ``min_lr_ratio`` at the last update
    ``step = max_steps - 1`` (held there beyond).

    Args:
        step: 0-based update index.
        max_steps: total number of updates.
        warmup_steps: number of warm-up updates (0 for none).
        min_lr_ratio: final multiplier.
        schedule: ``"cosine"`` or ``"linear"``.
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    span = max(1, max_steps - 1 - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    if schedule == "linear":
        return 1.0 - (1.0 - min_lr_ratio) * progress
    if schedule != "cosine":
        raise ValueError(f"schedule must be 'cosine' or 'linear', got {schedule!r}")
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def lr_at(step: int, cfg: TrainConfig) -> float:
    """The learning rate of the update with 0-based index ``step`` under ``cfg``."""
    return cfg.lr * lr_factor(
        step, cfg.max_steps, cfg.warmup_steps(), cfg.min_lr_ratio, cfg.schedule
    )


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: TrainConfig) -> LambdaLR:
    """A ``LambdaLR`` applying :func:`lr_factor`; call ``scheduler.step()`` after each update.

    Its ``state_dict`` is JSON-serialisable (the lambda is a plain function, stored as None).
    """
    max_steps, warmup, ratio = cfg.max_steps, cfg.warmup_steps(), cfg.min_lr_ratio
    schedule = cfg.schedule

    def factor(step: int) -> float:
        return lr_factor(step, max_steps, warmup, ratio, schedule)

    return LambdaLR(optimizer, factor)
