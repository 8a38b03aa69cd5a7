"""The compat positional encodings against complextorch 2.1.1, up to long sequences."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import complexformer.compat.complextorch as cc
from complexformer import nn as cnn
from tests.compat.compat_testlib import TOL, copy_and_compare, crandn

ct = pytest.importorskip("complextorch")


@pytest.mark.parametrize("learnable", [False, True])
@pytest.mark.parametrize("offset", [0, 11])
def test_compat_rotary_equals_complextorch(learnable, offset):
    ours = cc.nn.RotaryEmbedding(16, base=500.0, learnable=learnable)
    theirs = ct.nn.RotaryEmbedding(16, base=500.0, learnable=learnable)
    assert torch.equal(ours.inv_freq.detach(), theirs.inv_freq.detach())  # same float32 bits
    x = crandn(2, 4, 32, 16)
    copy_and_compare(ours, theirs, x, offset)
    assert_close(ours(input=x), theirs(input=x), **TOL)
    q, k = ours.rotate_q_k(x, x.conj(), offset)
    q2, k2 = theirs.rotate_q_k(x, x.conj(), offset)
    assert_close(q, q2, **TOL)
    assert_close(k, k2, **TOL)
    xr = torch.randn(3, 7, 16)  # a real input is lifted to complex64 by both
    assert_close(ours(xr), theirs(xr), **TOL)


def test_compat_encodings_equal_complextorch_at_long_positions():
    # complextorch forms the angles in float32; so does the compat layer, at every position.
    # complexformer.nn's float64 angles are exact and differ from it by more than 1e-5 here.
    x = crandn(1, 3000, 8)
    ours, theirs = cc.nn.RotaryEmbedding(8), ct.nn.RotaryEmbedding(8)
    assert_close(ours(x), theirs(x), **TOL)
    assert (cnn.RotaryEmbedding(8)(x) - theirs(x)).abs().max() > 1e-5
    ours, theirs = cc.nn.SinusoidalPositionalEncoding(8), ct.nn.SinusoidalPositionalEncoding(8)
    assert_close(ours(x, 100), theirs(x, 100), **TOL)
    ours, theirs = cc.nn.CoPE(8), ct.nn.CoPE(8)
    assert_close(ours(x), theirs(x), **TOL)


@pytest.mark.parametrize("offset", [0, 5])
def test_compat_sinusoidal_equals_complextorch(offset):
    ours, theirs = cc.nn.SinusoidalPositionalEncoding(12), ct.nn.SinusoidalPositionalEncoding(12)
    x = crandn(3, 40, 12)
    assert_close(ours(x, offset), theirs(x, offset), **TOL)
    assert_close(ours(input=x), theirs(input=x), **TOL)


def test_compat_cope_equals_complextorch_with_copied_parameters():
    ours, theirs = cc.nn.CoPE(8, base=100.0), ct.nn.CoPE(8, base=100.0)
    assert sum(p.numel() for p in ours.parameters()) == 2 * 8
    copy_and_compare(ours, theirs, crandn(2, 50, 8), 3)
    assert_close(ours.phi, theirs.phi)  # the copy really moved the learned phases
    assert theirs.phi.abs().max() > 0
