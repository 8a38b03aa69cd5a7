"""load_complextorch_state_dict: the name and layout mapping, and its errors."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import complexformer.compat.complextorch as cc
from tests.compat.compat_testlib import TOL, crandn, perturb

ct = pytest.importorskip("complextorch")


def test_compat_weights_layouts():
    theirs = perturb(ct.nn.MultiheadAttention(2, 8, 4, 4))
    ours = cc.nn.MultiheadAttention(2, 8, 4, 4)
    cc.load_complextorch_state_dict(ours, theirs.state_dict())  # a state dict works too
    assert_close(ours.w_q.complex_weight, theirs.w_q.linear.weight)
    assert_close(ours.fc.complex_weight, theirs.fc.linear.weight)
    w, b = theirs.layer_norm.weight, theirs.layer_norm.bias  # (2, 2, F), (2, F)
    for f in (0, 5):
        assert_close(ours.layer_norm.weight[f], w[:, :, f])  # our (F, 2, 2): row = output
        assert_close(ours.layer_norm.bias[f], b[:, f])


def test_compat_weights_patch_conv_becomes_the_patch_linear():
    args = dict(image_size=8, patch_size=4, in_channels=2, num_classes=3, dim=8, depth=1, heads=2)
    theirs, ours = perturb(ct.models.ViT(**args)), cc.models.ViT(**args)
    sd = cc.complextorch_state_dict(ours, theirs)
    conv = theirs.patch_embed.conv.weight  # (dim, C, P, P) complex
    assert_close(torch.view_as_complex(sd["patch_embed.weight"]), conv.reshape(8, -1))
    assert_close(torch.view_as_complex(sd["pos_embed.weight"]), theirs.pos_embed[0])
    assert set(sd) == set(ours.state_dict())


def test_compat_weights_errors_name_the_parameter():
    theirs = ct.nn.MultiheadAttention(2, 8, 4, 4)
    with pytest.raises(ValueError, match="'w_q.linear.weight' of shape \\(8, 8\\) does not fit"):
        cc.load_complextorch_state_dict(cc.nn.MultiheadAttention(2, 8, 3, 4), theirs)
    holo = ct.nn.MultiheadAttention(2, 8, 4, 4, attention="holographic")
    with pytest.raises(ValueError, match="'attention.alpha' has no counterpart"):
        cc.load_complextorch_state_dict(cc.nn.MultiheadAttention(2, 8, 4, 4), holo)
    partial = {k: v for k, v in theirs.state_dict().items() if "fc" not in k}
    with pytest.raises(RuntimeError, match="fc.weight"):
        cc.load_complextorch_state_dict(cc.nn.MultiheadAttention(2, 8, 4, 4), partial)
    ours = cc.nn.MultiheadAttention(2, 8, 4, 4)
    missing = cc.load_complextorch_state_dict(ours, partial, strict=False).missing_keys
    assert missing == ["fc.weight"]


def test_compat_weights_roundtrip_through_our_state_dict():
    # after the copy, the compat module's own state dict reloads into a fresh twin
    theirs = perturb(ct.nn.TransformerEncoderLayer(8, 2, 16))
    ours, again = cc.nn.TransformerEncoderLayer(8, 2, 16), cc.nn.TransformerEncoderLayer(8, 2, 16)
    cc.load_complextorch_state_dict(ours, theirs)
    again.load_state_dict(ours.state_dict())
    x = crandn(2, 5, 8)
    with torch.no_grad():
        assert_close(again.eval()(x), theirs.eval()(x), **TOL)


def test_compat_layernorm_equals_complextorch_at_init_and_after_the_copy():
    x = crandn(4, 6, 10)
    ours, theirs = cc.nn.LayerNorm(10, eps=1e-4), ct.nn.LayerNorm(10, eps=1e-4)
    assert_close(ours(x), theirs(x), **TOL)  # the same initial affine, diag(1/sqrt 2)
    cc.load_complextorch_state_dict(ours, perturb(theirs, 0.5))
    assert_close(ours(x), theirs(x), **TOL)


def test_compat_dropout_masks_are_independent_as_complextorch():
    # complextorch's Dropout drops Re and Im separately; so do the compat blocks' dropouts
    mha = cc.nn.MultiheadAttention(2, 8, 4, 4, dropout=0.5)
    z = torch.ones(20000, dtype=torch.cfloat) * (1 + 1j)
    y = mha.proj_dropout(z)
    only_one = ((y.real == 0) != (y.imag == 0)).float().mean().item()
    assert abs(only_one - 0.5) < 0.03  # P(exactly one part dropped) = 2 p (1 - p) = 0.5
