"""The phases a cmha scheme returns for the phase contrastive loss: θ of eq. 2 or the
rotated phases, with the same rotated queries and keys either way."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from complexformer.attention import CausalSelfAttention


@pytest.mark.parametrize("scheme", ["cmha", "cmha_shared", "cmha_fixed"])
def test_theta_and_rotated_targets_rotate_alike(scheme):
    torch.manual_seed(0)
    attn = CausalSelfAttention(16, 2, scheme).double()
    if scheme != "cmha_fixed":
        with torch.no_grad():
            attn.adapt_delta.normal_(0.0, 0.7)
            attn.adapt_bias.normal_(0.0, 0.7)
    q, k = (
        torch.randn(2, 2, 5, 8, dtype=torch.float64),
        torch.randn(2, 2, 5, 8, dtype=torch.float64),
    )
    s = attn.scheme
    ref_q, ref_k = s.rotate(attn, q, k, 3)
    tq, tk, (th_q, th_k) = s.rotate_with_phases(attn, q, k, 3, "theta")
    rq, rk, (ph_q, ph_k) = s.rotate_with_phases(attn, q, k, 3, "rotated")
    for got in (tq, rq):
        assert_close(got, ref_q)
    for got in (tk, rk):
        assert_close(got, ref_k)
    # θ: atan2 of each (j, j + J) pair, whatever the position and the adaptation
    assert_close(th_q, torch.atan2(q[..., 4:], q[..., :4]))
    assert_close(th_k, torch.atan2(k[..., 4:], k[..., :4]))
    delta, bias = s.adaptation(attn)
    pw = torch.arange(3, 8, dtype=torch.float64)[:, None] * attn.omega.double()
    assert_close(ph_q, th_q * delta.double()[..., None, :] + bias.double()[..., None, :] + pw)
    assert_close(ph_k, th_k * delta.double()[..., None, :] + pw)


def test_unknown_target_is_refused():
    attn = CausalSelfAttention(16, 2, "cmha")
    q = torch.randn(1, 2, 3, 8)
    with pytest.raises(ValueError, match="target must be one of theta, rotated, got 'phi'"):
        attn.scheme.rotate_with_phases(attn, q, q, 0, "phi")
    with pytest.raises(ValueError, match="pcl_target must be 'theta' or 'rotated', got 'x'"):
        CausalSelfAttention(16, 2, "cmha", pcl=True, pcl_target="x")
