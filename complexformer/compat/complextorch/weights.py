"""Copy a complextorch 2.1.1 module's weights into its ``complexformer.compat.complextorch`` twin.

The compat modules have complextorch's module tree (the same attribute names), so a
complextorch parameter name maps to ours by one rule, and its value by its layout:

* ``<path>.linear.weight`` / ``.bias`` (complextorch's ``Linear`` wraps ``torch.nn.Linear``)
  and ``<path>.conv.weight`` / ``.bias`` (the ViT's patch ``Conv2d``) -> ``<path>.weight`` /
  ``.bias``;
* a name that is a module of ours with a ``weight`` (the ViT's ``pos_embed``) -> ``.weight``;
* complex tensors -> their real view (..., 2), reshaped to our parameter's shape (the patch
  convolution's (dim, C, P, P) kernel becomes the (dim, C * P * P) patch ``Linear``);
* LayerNorm affines: complextorch's (2, 2, *F) weight and (2, *F) bias -> our (*F, 2, 2) and
  (*F, 2) (the same 2x2 matrix per feature, row = output component);
* real tensors (CoPE's omega and phi, a learnable rotary ``inv_freq``, holographic ``alpha``)
  are copied as they are.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor, nn

from complexformer import nn as cnn

__all__ = ["complextorch_state_dict", "load_complextorch_state_dict"]

_WRAPPERS = ("linear", "conv")


def _our_name(key: str, ours: Mapping[str, Tensor]) -> str:
    parts = key.split(".")
    if len(parts) >= 2 and parts[-2] in _WRAPPERS and parts[-1] in ("weight", "bias"):
        parts = parts[:-2] + parts[-1:]
    name = ".".join(parts)
    if name not in ours and f"{name}.weight" in ours:
        name = f"{name}.weight"
    return name


def _owner(module: nn.Module, name: str) -> nn.Module:
    path = name.rpartition(".")[0]
    return module.get_submodule(path) if path else module


def complextorch_state_dict(
    module: nn.Module, source: nn.Module | Mapping[str, Tensor]
) -> dict[str, Tensor]:
    """complextorch's weights (a module or its state dict) as a state dict of ``module``.

    Args:
        module: a ``complexformer.compat.complextorch`` module built with the same arguments.
        source: the complextorch module, or its ``state_dict()``.

    Returns:
        ``{name: tensor}`` in ``module``'s names, shapes and dtypes.

    Raises:
        ValueError: a complextorch entry with no counterpart in ``module``, or of a size that
            does not fit it (naming both).
    """
    sd = source.state_dict() if isinstance(source, nn.Module) else dict(source)
    ours = module.state_dict()
    out: dict[str, Tensor] = {}
    for key, value in sd.items():
        name = _our_name(key, ours)
        if name not in ours:
            raise ValueError(
                f"complextorch parameter {key!r} has no counterpart in "
                f"{type(module).__name__} (looked for {name!r}); build the module with the "
                "same arguments as the complextorch one"
            )
        target = ours[name]
        value = value.detach()
        leaf = name.rpartition(".")[2]
        if isinstance(_owner(module, name), cnn.LayerNorm) and leaf in ("weight", "bias"):
            value = value.movedim(0, -1) if leaf == "bias" else value.movedim((0, 1), (-2, -1))
        elif value.is_complex():
            value = torch.view_as_real(value)
        if value.numel() != target.numel():
            raise ValueError(
                f"complextorch parameter {key!r} of shape {tuple(sd[key].shape)} does not fit "
                f"{name!r} of shape {tuple(target.shape)}"
            )
        out[name] = value.reshape(target.shape).to(target.dtype).clone()
    return out


def load_complextorch_state_dict(
    module: nn.Module, source: nn.Module | Mapping[str, Tensor], strict: bool = True
):
    """Copy complextorch's weights into ``module`` (see the module docstring for the mapping).

    Args:
        module: the ``complexformer.compat.complextorch`` twin of the complextorch module.
        source: the complextorch module or its ``state_dict()``.
        strict: every parameter of ``module`` must be given (``torch.nn.Module.load_state_dict``).

    Returns:
        The result of ``module.load_state_dict`` (missing and unexpected keys).
    """
    return module.load_state_dict(complextorch_state_dict(module, source), strict=strict)
