"""compat MultiheadAttention against complextorch 2.1.1: every score, rotary, holographic."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import complexformer.compat.complextorch as cc
import complexformer.nn as cnn
from complexformer.compat.complextorch import load_complextorch_state_dict
from tests.compat.compat_testlib import TOL, copy_and_compare, crandn, perturb

ct = pytest.importorskip("complextorch")

# (complextorch kwargs, compat kwargs): every softmax complextorch's attention can run
VARIANTS = {
    "split": ({}, {}),
    "split-explicit": (
        {"SoftMaxClass": ct.nn.CVSoftMax, "softmax_on": "complex"},
        {"SoftMaxClass": cc.nn.CVSoftMax, "softmax_on": "complex"},
    ),
    "phase": ({"SoftMaxClass": ct.nn.PhaseSoftMax}, {"SoftMaxClass": cc.nn.PhaseSoftMax}),
    "real": ({"softmax_on": "real"}, {"softmax_on": "real"}),
    "holographic": ({"attention": "holographic"}, {"attention": "holographic"}),
}
ROTARY = {
    "none": lambda mod: None,
    "rotary": lambda mod: mod.nn.RotaryEmbedding(8),
    "learnable": lambda mod: mod.nn.RotaryEmbedding(8, base=100.0, learnable=True),
}


def _pair(variant: str, rotary: str = "none", dropout: float = 0.1):
    kw_t, kw_o = VARIANTS[variant]
    theirs = ct.nn.MultiheadAttention(4, 32, 8, 8, dropout, rotary=ROTARY[rotary](ct), **kw_t)
    ours = cc.nn.MultiheadAttention(4, 32, 8, 8, dropout, rotary=ROTARY[rotary](cc), **kw_o)
    return ours, theirs


def test_compat_seed_page_example_equals_complextorch():
    # the example of complextorch's positional-encoding page, with each library
    outputs = []
    for ctorch in (cc, ct):
        torch.manual_seed(0)
        d_model, n_heads, d_head = 32, 4, 8
        rope = ctorch.nn.RotaryEmbedding(dim=d_head)
        mha = ctorch.nn.MultiheadAttention(n_heads, d_model, d_head, d_head, rotary=rope)
        torch.manual_seed(1)
        x = torch.randn(2, 16, d_model, dtype=torch.cfloat)  # (batch, length, d_model)
        y = mha(x, x, x)
        assert y.shape == (2, 16, 32) and y.dtype == torch.complex64
        outputs.append((mha, x))
    (ours, x), (theirs, _) = outputs
    copy_and_compare(ours, theirs, x, x, x)


def test_compat_differs_from_the_modern_defaults():
    # what the drop-in fixes: complexformer.nn's MultiheadAttention (score="real", no residual
    # or LayerNorm inside) computes something else with the same projection weights
    ours, theirs = _pair("split", "rotary")
    copy_and_compare(ours, theirs, *(3 * (crandn(2, 16, 32),)))
    modern = cnn.MultiheadAttention(4, 32, 8, 8, rotary=cnn.RotaryEmbedding(8)).eval()
    modern.load_state_dict(ours.state_dict(), strict=False)
    x = crandn(2, 16, 32)
    with torch.no_grad():
        assert (modern(x, x, x) - theirs(x, x, x)).abs().max() > 0.1


@pytest.mark.parametrize("rotary", sorted(ROTARY))
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_compat_mha_equals_complextorch(variant, rotary):
    ours, theirs = _pair(variant, rotary)
    x = crandn(2, 12, 32)
    copy_and_compare(ours, theirs, x, x, x)
    if rotary == "none":  # cross-attention: other key/value length, distinct tensors
        ours, theirs = _pair(variant, rotary)
        q, kv = crandn(3, 5, 32), crandn(3, 9, 32)
        copy_and_compare(ours, theirs, q, kv, 2 * kv)


def test_compat_holographic_alpha_is_copied():
    ours, theirs = _pair("holographic")
    perturb(theirs, 1.0)
    load_complextorch_state_dict(ours, theirs)
    assert_close(ours.attention.alpha, theirs.attention.alpha)


@pytest.mark.parametrize("variant", ["split", "phase", "real", "holographic"])
def test_compat_key_padding_mask_equals_complextorch_on_the_unpadded_keys(variant):
    # complextorch has no masks; masking the last keys must equal complextorch without them
    ours, theirs = _pair(variant)
    perturb(theirs)
    load_complextorch_state_dict(ours, theirs)
    ours.eval(), theirs.eval()
    q, kv = crandn(2, 6, 32), crandn(2, 10, 32)
    pad = torch.zeros(2, 10, dtype=torch.bool)
    pad[:, 7:] = True
    with torch.no_grad():
        out = ours(q, kv, kv, key_padding_mask=pad)
        assert_close(out, theirs(q, kv[:, :7], kv[:, :7]), **TOL)
        assert (out - theirs(q, kv, kv)).abs().max() > 1e-3  # the mask does act


def test_compat_magsoftmax_runs_where_complextorch_raises():
    # complextorch 2.1.1 accepts SoftMaxClass=MagSoftMax but its complex Dropout then takes
    # .imag of the real weights and raises; the compat layer computes softmax(|S|) V. The
    # reference is complextorch's forward written out with its own modules.
    theirs = ct.nn.MultiheadAttention(4, 32, 8, 8, SoftMaxClass=ct.nn.MagSoftMax).eval()
    x = crandn(2, 9, 32)
    with pytest.raises(RuntimeError, match="imag"):
        theirs(x, x, x)
    ours = cc.nn.MultiheadAttention(4, 32, 8, 8, SoftMaxClass=cc.nn.MagSoftMax).eval()
    perturb(theirs)
    load_complextorch_state_dict(ours, theirs)

    def heads(t):
        return t.view(2, 9, 4, 8).transpose(1, 2)

    with torch.no_grad():
        q, k, v = heads(theirs.w_q(x)), heads(theirs.w_k(x)), heads(theirs.w_v(x))
        s = torch.matmul(q / 8**0.5, k.conj().transpose(-2, -1))
        a = ct.nn.MagSoftMax(dim=-1)(s).to(v.dtype) @ v
        ref = theirs.layer_norm(theirs.fc(a.transpose(1, 2).reshape(2, 9, 32)) + x)
        assert_close(ours(x, x, x), ref, **TOL)


@pytest.mark.filterwarnings("ignore:Implicit dimension choice")
def test_compat_softmax_modules_equal_complextorch():
    s = crandn(3, 4, 5)
    for name in ("CVSoftMax", "PhaseSoftMax", "MagSoftMax"):
        for dim in (-1, 1, None):
            ours, theirs = getattr(cc.nn, name)(dim=dim), getattr(ct.nn, name)(dim=dim)
            assert_close(ours(s), theirs(s), **TOL)


def test_compat_mha_errors_name_the_bad_value():
    with pytest.raises(ValueError, match="softmax_on must be 'complex' or 'real', got 'modulus'"):
        cc.nn.MultiheadAttention(4, 32, 8, 8, softmax_on="modulus")
    with pytest.raises(ValueError, match="attention must be .*'flash'"):
        cc.nn.MultiheadAttention(4, 32, 8, 8, attention="flash")
    # complextorch takes any SoftMaxClass (test_sdpa.py runs a custom one against it) and
    # ignores it when softmax_on="real"; so does the compat layer
    cc.nn.MultiheadAttention(4, 32, 8, 8, SoftMaxClass=torch.nn.Softmax)
    cc.nn.MultiheadAttention(4, 32, 8, 8, SoftMaxClass=torch.nn.Softmax, softmax_on="real")
