"""The PCL kernels (ComplexFormer §3.2, after EulerFormer) against InfoNCE written out with
loops: defaults, the padding mask, the dropout view, dtypes and shapes."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from complexformer.losses.pcl import pcl_loss, phase_contrastive_loss, phase_similarity


def literal_infonce(phase, view, w, tau, mask=None) -> float:
    """mean over valid anchors (b, h, i) of -log softmax_j(Σ_c w_c cos(φ_i,c − φ'_j,c) / τ)_i,
    j over the valid positions of row b."""
    b_, h_, t_, j_ = phase.shape
    total, count = 0.0, 0
    for b in range(b_):
        valid = [t for t in range(t_) if mask is None or bool(mask[b, t])]
        for h in range(h_):
            for i in valid:
                s = {
                    j: sum(float(w[c]) * math.cos(phase[b, h, i, c] - view[b, h, j, c])
                           for c in range(j_)) / tau
                    for j in valid
                }  # fmt: skip
                top = max(s.values())
                lse = top + math.log(sum(math.exp(v - top) for v in s.values()))
                total += lse - s[i]
                count += 1
    return total / count


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    phase = 3.0 * torch.randn(2, 2, 6, 3, generator=g, dtype=torch.float64)
    w = 0.5 + torch.rand(3, generator=g, dtype=torch.float64)
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[1, 4:] = False  # right padding on the second row
    return phase, w, mask


def test_pcl_loss_defaults_view_and_mask():
    """Defaults τ = 0.1 and p = 0.5 (EulerFormer), a training-mode dropout view, padding
    excluded as anchors and as keys."""
    phase, w, mask = inputs()
    torch.manual_seed(3)
    got = pcl_loss(phase, w, mask=mask)
    torch.manual_seed(3)
    view = F.dropout(phase, 0.5, True)
    assert_close(got.item(), literal_infonce(phase, view, w, 0.1, mask), rtol=1e-10, atol=1e-10)
    default_tau = phase_contrastive_loss(phase, view, w, mask=mask)
    assert_close(default_tau.item(), literal_infonce(phase, view, w, 0.1, mask))
    off = pcl_loss(phase, w, 0.2, 0.5, mask=mask, training=False)  # no dropout: same view
    assert_close(off.item(), literal_infonce(phase, phase, w, 0.2, mask), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("tau", [0.0, -0.5])
def test_temperature_must_be_positive(tau):
    phase, w, _ = inputs()
    with pytest.raises(ValueError, match=rf"PCL temperature tau must be > 0, got {tau}"):
        phase_contrastive_loss(phase, phase, w, tau)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_phase_similarity_dtypes_and_any_leading_shape(dtype):
    """(T, J) and (B, H, T, J) inputs; computed in float32 (float64 for float64 input)."""
    g = torch.Generator().manual_seed(1)
    phase = torch.randn(5, 3, generator=g).to(dtype)
    view = torch.randn(5, 3, generator=g).to(dtype)
    w = torch.rand(3, generator=g).to(dtype)
    got = phase_similarity(phase, view, w)
    assert got.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    p, v, ww = phase.double(), view.double(), w.double()
    expect = (ww * torch.cos(p[:, None, :] - v[None, :, :])).sum(-1)  # (T, T)
    assert_close(got.double(), expect, atol=1e-5, rtol=1e-5)
    stacked = phase_similarity(phase.expand(2, 3, 5, 3), view.expand(2, 3, 5, 3), w)
    assert_close(stacked, got.expand(2, 3, 5, 5))


def test_phase_similarity_casts_every_input():
    """float32 phases with float64 weights (a float64 parameter in a float32 run): computed
    in float32, every input cast."""
    g = torch.Generator().manual_seed(2)
    phase, view = torch.randn(2, 4, 3, generator=g), torch.randn(2, 4, 3, generator=g)
    w = torch.rand(3, generator=g, dtype=torch.float64)
    got = phase_similarity(phase, view, w)
    assert got.dtype == torch.float32
    expect = w * torch.cos(phase.double()[..., :, None, :] - view.double()[..., None, :, :])
    assert_close(got.double(), expect.sum(-1), atol=1e-5, rtol=1e-5)
