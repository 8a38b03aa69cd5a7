"""compat ScaledDotProductAttention against complextorch 2.1.1's, on random complex inputs.

complextorch's attention core takes no masks; the compat one does (an extra), so a masked run
is compared with complextorch run on the keys the mask leaves (padded keys, causal prefixes).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.testing import assert_close

import complexformer.compat.complextorch as cc
from tests.compat.compat_testlib import TOL, crandn

ct = pytest.importorskip("complextorch")


class SplitReal(nn.Module):
    """A softmax class of neither library: softmax(Re z) as complex weights."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return torch.softmax(z.real, self.dim).to(z.dtype)


# variant -> (complextorch kwargs, compat kwargs)
VARIANTS = {
    "default": ({}, {}),
    "cvsoftmax": ({"SoftMaxClass": ct.nn.CVSoftMax}, {"SoftMaxClass": cc.nn.CVSoftMax}),
    "complextorch-class": ({"SoftMaxClass": ct.nn.CVSoftMax}, {"SoftMaxClass": ct.nn.CVSoftMax}),
    "phase": ({"SoftMaxClass": ct.nn.PhaseSoftMax}, {"SoftMaxClass": cc.nn.PhaseSoftMax}),
    "real": ({"softmax_on": "real"}, {"softmax_on": "real"}),
    "custom-class": ({"SoftMaxClass": SplitReal}, {"SoftMaxClass": SplitReal}),
}
MASKABLE = ("default", "phase", "real")
# (q shape, k shape): per-head 4-D, 3-D, 2-D, 5-D and broadcast leading dimensions
SHAPES = {
    "4d": ((2, 3, 5, 4), (2, 3, 7, 4)),
    "3d": ((3, 5, 4), (3, 7, 4)),
    "2d": ((5, 4), (7, 4)),
    "5d": ((2, 2, 3, 5, 4), (2, 2, 3, 7, 4)),
    "broadcast": ((2, 3, 5, 4), (3, 7, 4)),
}


def _pair(variant: str, temperature: float = 2.0, attn_dropout: float = 0.1):
    kw_t, kw_o = VARIANTS[variant]
    theirs = ct.nn.ScaledDotProductAttention(temperature, attn_dropout, **kw_t).eval()
    ours = cc.nn.ScaledDotProductAttention(temperature, attn_dropout, **kw_o).eval()
    return ours, theirs


def _qkv(q_shape, k_shape, d_v: int = 6):
    return crandn(*q_shape), crandn(*k_shape), crandn(*k_shape[:-1], d_v)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_compat_sdpa_equals_complextorch(variant, shape):
    ours, theirs = _pair(variant)
    q, k, v = _qkv(*SHAPES[shape])
    out = ours(q, k, v)
    assert out.dtype == torch.complex64
    assert_close(out, theirs(q, k, v), **TOL)


@pytest.mark.parametrize("temperature", [0.5, 1.0, 8**0.5])
def test_compat_sdpa_temperature_equals_complextorch(temperature):
    ours, theirs = _pair("default", temperature)
    q, k, v = _qkv(*SHAPES["4d"])
    assert_close(ours(q, k, v), theirs(q, k, v), **TOL)


def test_compat_sdpa_modulus_is_softmax_of_the_modulus():
    # complextorch's own core raises with MagSoftMax (its complex Dropout takes the imaginary
    # part of the real weights); the compat core computes softmax(|S|) V
    ours = cc.nn.ScaledDotProductAttention(2.0, SoftMaxClass=cc.nn.MagSoftMax).eval()
    q, k, v = _qkv(*SHAPES["4d"])
    scores = torch.matmul(q / 2.0, k.conj().transpose(-2, -1))
    ref = ct.nn.MagSoftMax(dim=-1)(scores).to(v.dtype) @ v
    assert_close(ours(q, k, v), ref, **TOL)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_compat_sdpa_weights_equal_complextorch_softmax(variant):
    ours, theirs = _pair(variant)
    q, k, v = _qkv(*SHAPES["4d"])
    _, weights = ours.attend(q, k, v, need_weights=True)
    scores = torch.matmul(q / theirs.temperature, k.conj().transpose(-2, -1))
    ref = theirs.softmax(scores.real if theirs.softmax_on == "real" else scores)
    assert_close(weights.to(ref.dtype), ref, **TOL)


@pytest.mark.parametrize("variant", MASKABLE)
@pytest.mark.parametrize("additive", [False, True], ids=["bool", "additive"])
def test_compat_sdpa_padding_mask_equals_complextorch_on_kept_keys(variant, additive):
    ours, theirs = _pair(variant)
    q, k, v = _qkv(*SHAPES["4d"])
    keep = 4  # keys 4.. are padding
    mask = torch.zeros(q.shape[-2], k.shape[-2], dtype=torch.bool)
    mask[:, keep:] = True
    if additive:
        mask = torch.zeros(mask.shape).masked_fill(mask, float("-inf"))
    out = ours(q, k, v, attn_mask=mask)
    assert_close(out, theirs(q, k[..., :keep, :], v[..., :keep, :]), **TOL)


@pytest.mark.parametrize("variant", MASKABLE)
def test_compat_sdpa_per_batch_mask_equals_complextorch_on_kept_keys(variant):
    ours, theirs = _pair(variant)
    q, k, v = _qkv(*SHAPES["3d"])
    lengths = (7, 3, 5)  # keys kept per batch entry
    mask = torch.arange(k.shape[-2])[None, None, :] >= torch.tensor(lengths)[:, None, None]
    out = ours(q, k, v, attn_mask=mask)  # (3, 1, 7) broadcasts over the queries
    for b, n in enumerate(lengths):
        assert_close(out[b], theirs(q[b], k[b, :n], v[b, :n]), **TOL)


@pytest.mark.parametrize("variant", MASKABLE)
def test_compat_sdpa_causal_equals_complextorch_on_prefixes(variant):
    ours, theirs = _pair(variant)
    q, k, v = _qkv((2, 3, 6, 4), (2, 3, 6, 4))
    out = ours(q, k, v, is_causal=True)
    for i in range(q.shape[-2]):
        ref = theirs(q[..., i : i + 1, :], k[..., : i + 1, :], v[..., : i + 1, :])
        assert_close(out[..., i : i + 1, :], ref, **TOL)


def test_compat_sdpa_custom_softmax_class_takes_no_mask():
    ours, _ = _pair("custom-class")
    q, k, v = _qkv(*SHAPES["4d"])
    with pytest.raises(ValueError, match="masks need SoftMaxClass CVSoftMax"):
        ours(q, k, v, is_causal=True)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_compat_sdpa_dropout_one_drops_everything_as_complextorch(variant):
    ours, theirs = _pair(variant, attn_dropout=1.0)
    ours.train()
    theirs.train()
    q, k, v = _qkv(*SHAPES["4d"])
    out = ours(q, k, v)
    assert_close(out, theirs(q, k, v))
    assert out.abs().max() == 0


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_compat_sdpa_attributes_are_complextorch_s(variant):
    ours, theirs = _pair(variant)
    assert ours.temperature == theirs.temperature
    assert ours.softmax_on == theirs.softmax_on
    assert type(ours.softmax).__name__ == type(theirs.softmax).__name__
    assert list(ours.state_dict()) == list(theirs.state_dict()) == []


@pytest.mark.parametrize("attention", ["scaled_dot_product", "holographic"])
def test_compat_mha_core_is_complextorch_s(attention):
    ours = cc.nn.MultiheadAttention(4, 32, 8, 8, attention=attention, softmax_on="real")
    theirs = ct.nn.MultiheadAttention(4, 32, 8, 8, attention=attention, softmax_on="real")
    assert type(ours.attention).__name__ == type(theirs.attention).__name__
    assert ours.attention.temperature == theirs.attention.temperature == 8**0.5


def test_compat_mha_custom_softmax_class_equals_complextorch():
    theirs = ct.nn.MultiheadAttention(4, 32, 8, 8, SoftMaxClass=SplitReal).eval()
    ours = cc.nn.MultiheadAttention(4, 32, 8, 8, SoftMaxClass=SplitReal).eval()
    cc.load_complextorch_state_dict(ours, theirs)
    x = crandn(2, 9, 32)
    with torch.no_grad():
        assert_close(ours(x, x, x), theirs(x, x, x), **TOL)
