"""Helpers of the complextorch drop-in tests: perturb complextorch's weights, copy them into the
compat twin, run both in eval mode and measure the largest difference."""

from __future__ import annotations

import torch
from torch import nn
from torch.testing import assert_close

from complexformer.compat.complextorch import load_complextorch_state_dict

TOL = {"rtol": 1e-5, "atol": 1e-5}


def crandn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.cfloat)


def real_numel(module: nn.Module) -> int:
    """Number of real numbers in the parameters (a complex entry counts twice)."""
    return sum(p.numel() * (2 if p.is_complex() else 1) for p in module.parameters())


def perturb(module: nn.Module, scale: float = 0.1) -> nn.Module:
    """Add noise to every parameter, so that no layout (LayerNorm's 2x2, biases) stays trivial."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(scale * torch.randn_like(p))
    return module


def copy_and_compare(ours: nn.Module, theirs: nn.Module, *inputs, **kwargs) -> float:
    """Copy ``theirs``'s (perturbed) weights into ``ours``; assert equal outputs in eval mode.

    Returns the largest absolute difference (for the record).
    """
    perturb(theirs)
    load_complextorch_state_dict(ours, theirs)
    ours.eval()
    theirs.eval()
    with torch.no_grad():
        a, b = ours(*inputs, **kwargs), theirs(*inputs, **kwargs)
    assert a.shape == b.shape and a.dtype == b.dtype
    assert_close(a, b, **TOL)
    return (a - b).abs().max().item()
