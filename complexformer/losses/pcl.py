"""Phase contrastive loss (PCL) of ComplexFormer §3.2, following EulerFormer (Tian et al.,
"EulerFormer: Sequential User Behavior Modeling with Complex Vector Attention", SIGIR 2024).

For the rotated phases phi (B, H, T, J) of one layer's queries (or keys) and a second view
phi' = dropout(phi, p):

    sim(i, j) = sum_c w_c cos(phi_i,c - phi'_j,c)
    L = mean_i  -log softmax_j(sim(i, .) / tau)_i

The positive of position i is the same position in the other view; the negatives are the other
positions of the same sequence (and head); padded positions are excluded as keys and as anchors.
Since cos(a - b) = cos a cos b + sin a sin b, the (T, T) similarity is one matmul of
[w cos phi, w sin phi] with [cos phi', sin phi'], never a (T, T, J) tensor.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["phase_contrastive_loss", "phase_similarity", "pcl_loss"]


def phase_similarity(phase: Tensor, phase_view: Tensor, weight: Tensor) -> Tensor:
    """sim(i, j) = sum_c w_c cos(phase_i,c - phase_view_j,c).

    Args:
        phase: (..., T, J) phases of the anchors.
        phase_view: (..., T, J) phases of the second view.
        weight: (J,) channel weights w.

    Returns:
        (..., T, T) similarities, computed in float32 (float64 for float64 input).
    """
    dt = torch.float64 if phase.dtype == torch.float64 else torch.float32
    phase, phase_view, weight = phase.to(dt), phase_view.to(dt), weight.to(dt)
    a = torch.cat((weight * torch.cos(phase), weight * torch.sin(phase)), dim=-1)  # (..., T, 2J)
    b = torch.cat((torch.cos(phase_view), torch.sin(phase_view)), dim=-1)  # (..., T, 2J)
    return a @ b.transpose(-1, -2)  # (..., T, T)


def phase_contrastive_loss(
    phase: Tensor,
    phase_view: Tensor,
    weight: Tensor,
    tau: float = 0.1,
    mask: Tensor | None = None,
) -> Tensor:
    """InfoNCE over positions between two views of the phases (ComplexFormer §3.2).

    Args:
        phase: (B, H, T, J) anchor phases.
        phase_view: (B, H, T, J) second view (e.g. ``dropout(phase)``).
        weight: (J,) learnable channel weights.
        tau: temperature.
        mask: optional (B, T) bool, True for real tokens; padding is excluded.

    Returns:
        Scalar mean over the valid anchors of every batch row and head.
    """
    if tau <= 0:
        raise ValueError(f"PCL temperature tau must be > 0, got {tau}")
    logits = phase_similarity(phase, phase_view, weight) / tau  # (B, H, T, T)
    if mask is not None:
        logits = logits.masked_fill(~mask[:, None, None, :], float("-inf"))
    logp = F.log_softmax(logits, dim=-1)
    nll = -torch.diagonal(logp, dim1=-2, dim2=-1)  # (B, H, T)
    if mask is None:
        return nll.mean()
    valid = mask[:, None, :].expand_as(nll)
    return nll[valid].mean()


def pcl_loss(
    phase: Tensor,
    weight: Tensor,
    tau: float = 0.1,
    p: float = 0.5,
    mask: Tensor | None = None,
    training: bool = True,
) -> Tensor:
    """PCL with the second view made by dropout (p = 0.5 in EulerFormer)."""
    return phase_contrastive_loss(phase, F.dropout(phase, p, training), weight, tau, mask)
