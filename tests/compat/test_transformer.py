"""compat Transformer and its layers against complextorch 2.1.1."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import complexformer.compat.complextorch as cc
from complexformer.compat.complextorch import load_complextorch_state_dict
from tests.compat.compat_testlib import TOL, copy_and_compare, crandn, perturb, real_numel

ct = pytest.importorskip("complextorch")


@pytest.mark.parametrize("activation", ["gelu", "relu"])
@pytest.mark.parametrize("softmax_on", ["complex", "real"])
def test_compat_transformer_equals_complextorch(softmax_on, activation):
    args = dict(
        d_model=32,
        nhead=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=48,
        activation=activation,
        softmax_on=softmax_on,
    )
    ours, theirs = cc.nn.Transformer(**args), ct.nn.Transformer(**args)
    copy_and_compare(ours, theirs, crandn(2, 11, 32), crandn(2, 7, 32))


def test_compat_transformer_defaults_and_sequence_first():
    ours, theirs = cc.nn.Transformer(), ct.nn.Transformer()  # d_model 512, 6 + 6 layers
    assert real_numel(ours) == real_numel(theirs)  # the same parameters, stored as reals
    args = dict(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1)
    ours = cc.nn.Transformer(**args, dim_feedforward=24, batch_first=False)
    theirs = ct.nn.Transformer(**args, dim_feedforward=24, batch_first=False)
    copy_and_compare(ours, theirs, crandn(9, 2, 16), crandn(4, 2, 16))  # (L, B, E)


@pytest.mark.parametrize("softmax_on", ["complex", "real"])
def test_compat_layers_and_stacks_equal_complextorch(softmax_on):
    kw = dict(dim_feedforward=40, layer_norm_eps=1e-4, softmax_on=softmax_on)
    src, mem = crandn(2, 8, 24), crandn(2, 5, 24)
    copy_and_compare(
        cc.nn.TransformerEncoderLayer(24, 3, **kw), ct.nn.TransformerEncoderLayer(24, 3, **kw), src
    )
    copy_and_compare(
        cc.nn.TransformerDecoderLayer(24, 3, **kw),
        ct.nn.TransformerDecoderLayer(24, 3, **kw),
        src,
        mem,
    )
    norm_o, norm_t = cc.nn.LayerNorm(24, eps=1e-4), ct.nn.LayerNorm(24, eps=1e-4)
    ours = cc.nn.TransformerEncoder(cc.nn.TransformerEncoderLayer(24, 3, **kw), 3, norm_o)
    theirs = ct.nn.TransformerEncoder(ct.nn.TransformerEncoderLayer(24, 3, **kw), 3, norm_t)
    copy_and_compare(ours, theirs, src)
    ours = cc.nn.TransformerDecoder(cc.nn.TransformerDecoderLayer(24, 3, **kw), 2)
    theirs = ct.nn.TransformerDecoder(ct.nn.TransformerDecoderLayer(24, 3, **kw), 2)
    copy_and_compare(ours, theirs, src, mem)


def _loaded(**args):
    ours, theirs = cc.nn.Transformer(**args), ct.nn.Transformer(**args)
    perturb(theirs)
    load_complextorch_state_dict(ours, theirs)
    return ours.eval(), theirs.eval()


def test_compat_transformer_masks_equal_complextorch_on_the_unmasked_part():
    # complextorch has no masks. Padding the source and masking the padding must give
    # complextorch's output on the unpadded source. With one decoder layer, a causal target
    # mask must give, at each position t, complextorch's output on the target prefix 0..t (with
    # more layers the prefix run is not causal inside, so it is no reference).
    kw = dict(d_model=16, nhead=2, num_encoder_layers=2, dim_feedforward=24)
    ours, theirs = _loaded(**kw, num_decoder_layers=2)
    src, tgt = crandn(2, 10, 16), crandn(2, 5, 16)
    pad = torch.zeros(2, 10, dtype=torch.bool)
    pad[:, 6:] = True
    with torch.no_grad():
        out = ours(src, tgt, src_key_padding_mask=pad, memory_key_padding_mask=pad)
        assert_close(out, theirs(src[:, :6], tgt), **TOL)
        assert (out - theirs(src, tgt)).abs().max() > 1e-3  # the masks do act
    ours, theirs = _loaded(**kw, num_decoder_layers=1)
    with torch.no_grad():
        causal = ours(src, tgt, tgt_is_causal=True)
        for t in range(5):
            assert_close(causal[:, t], theirs(src, tgt[:, : t + 1])[:, t], **TOL)


def test_compat_transformer_errors_name_the_bad_value():
    with pytest.raises(ValueError, match="Unknown activation 'tanh'; expected 'gelu' or 'relu'"):
        cc.nn.Transformer(32, 4, 1, 1, 64, activation="tanh")
    with pytest.raises(ValueError, match="d_model \\(30\\) must be divisible by nhead \\(4\\)"):
        cc.nn.TransformerEncoderLayer(30, 4)
    with pytest.raises(ValueError, match="softmax_on must be 'complex' or 'real', got 'phase'"):
        cc.nn.TransformerEncoderLayer(32, 4, softmax_on="phase")
