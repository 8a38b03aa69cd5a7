"""Invalid arguments: the compat layer raises complextorch 2.1.1's exception type and message.

Each case builds (or runs) a module with ``lib`` = complextorch or the compat package; the
installed complextorch is the reference. Where complextorch checks nothing (sizes that are not
positive), the compat layer keeps complexformer.nn's ``ValueError`` (pinned below).
"""

from __future__ import annotations

import pytest
import torch

import complexformer.compat.complextorch as cc

ct = pytest.importorskip("complextorch")


def _c(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.cfloat)


def _vit(lib, **kwargs):
    args = {"num_classes": 5, "dim": 16, "depth": 1, "heads": 2, "mlp_dim": 32} | kwargs
    image_size, patch_size = args.pop("image_size", 16), args.pop("patch_size", 4)
    return lib.models.ViT(image_size, patch_size, **args)


def _mha_rotary(lib):
    mha = lib.nn.MultiheadAttention(2, 8, 4, 4, rotary=lib.nn.RotaryEmbedding(3))
    x = _c(2, 5, 8)
    return mha(x, x, x)


#: name -> a call that raises in complextorch 2.1.1
INVALID = {
    # positional encodings: the input's last dimension is not dim
    "rotary-last-dim": lambda lib: lib.nn.RotaryEmbedding(4)(_c(3, 5)),
    "rotary-last-dim-4d": lambda lib: lib.nn.RotaryEmbedding(4)(_c(2, 2, 3, 5)),
    "rotary-real-input": lambda lib: lib.nn.RotaryEmbedding(4)(torch.randn(3, 5)),
    "rotary-rotate-q-k": lambda lib: lib.nn.RotaryEmbedding(4).rotate_q_k(_c(3, 4), _c(3, 5)),
    "sinusoidal-last-dim": lambda lib: lib.nn.SinusoidalPositionalEncoding(4)(_c(3, 5)),
    "cope-last-dim": lambda lib: lib.nn.CoPE(4)(_c(3, 5)),
    # the attention core
    "sdpa-softmax-on": lambda lib: lib.nn.ScaledDotProductAttention(1.0, softmax_on="bogus"),
    "sdpa-dropout": lambda lib: lib.nn.ScaledDotProductAttention(1.0, attn_dropout=1.5),
    "sdpa-dropout-negative": lambda lib: lib.nn.ScaledDotProductAttention(1.0, attn_dropout=-0.1),
    "holographic-dropout": lambda lib: lib.nn.HolographicAttention(2.0, attn_dropout=1.5),
    # multi-head attention
    "mha-attention": lambda lib: lib.nn.MultiheadAttention(2, 8, 4, 4, attention="flash"),
    "mha-softmax-on": lambda lib: lib.nn.MultiheadAttention(2, 8, 4, 4, softmax_on="modulus"),
    "mha-both-invalid": lambda lib: lib.nn.MultiheadAttention(
        2, 8, 4, 4, softmax_on="bogus", attention="bogus"
    ),
    "mha-dropout": lambda lib: lib.nn.MultiheadAttention(2, 8, 4, 4, dropout=1.5),
    "mha-dropout-negative": lambda lib: lib.nn.MultiheadAttention(2, 8, 4, 4, dropout=-0.1),
    "mha-holographic-dropout": lambda lib: lib.nn.MultiheadAttention(
        2, 8, 4, 4, dropout=2.0, attention="holographic"
    ),
    "mha-rotary-dim": _mha_rotary,
    # Transformer layers and model
    "encoder-layer-divisible": lambda lib: lib.nn.TransformerEncoderLayer(8, 3),
    "encoder-layer-zero-heads": lambda lib: lib.nn.TransformerEncoderLayer(8, 0),
    "encoder-layer-activation": lambda lib: lib.nn.TransformerEncoderLayer(
        8, 2, activation="bogus"
    ),
    "encoder-layer-softmax-on": lambda lib: lib.nn.TransformerEncoderLayer(
        8, 2, softmax_on="bogus"
    ),
    "encoder-layer-dropout": lambda lib: lib.nn.TransformerEncoderLayer(8, 2, dropout=1.5),
    "encoder-layer-divisible-first": lambda lib: lib.nn.TransformerEncoderLayer(
        8, 3, activation="bogus"
    ),
    "encoder-layer-softmax-before-activation": lambda lib: lib.nn.TransformerEncoderLayer(
        8, 2, activation="bogus", softmax_on="bogus"
    ),
    "decoder-layer-zero-heads": lambda lib: lib.nn.TransformerDecoderLayer(8, 0),
    "decoder-layer-activation": lambda lib: lib.nn.TransformerDecoderLayer(
        8, 2, activation="bogus"
    ),
    "transformer-divisible": lambda lib: lib.nn.Transformer(8, 3, 1, 1, 16),
    "transformer-activation": lambda lib: lib.nn.Transformer(8, 2, 1, 1, 16, activation="x"),
    "transformer-softmax-on": lambda lib: lib.nn.Transformer(8, 2, 1, 1, 16, softmax_on="x"),
    # ViT
    "vit-layer-divisible": lambda lib: lib.models.ViTLayer(8, 3, 16),
    "vit-layer-zero-heads": lambda lib: lib.models.ViTLayer(8, 0, 16),
    "vit-layer-softmax-on": lambda lib: lib.models.ViTLayer(8, 2, 16, softmax_on="bogus"),
    "vit-layer-dropout": lambda lib: lib.models.ViTLayer(8, 2, 16, dropout=1.5),
    "vit-image-patch": lambda lib: _vit(lib, image_size=17),
    "vit-image-smaller-than-patch": lambda lib: _vit(lib, image_size=4, patch_size=8),
    "vit-zero-patch": lambda lib: _vit(lib, patch_size=0),
    "vit-pos-encoding": lambda lib: _vit(lib, pos_encoding="bogus"),
    "vit-dim-heads": lambda lib: _vit(lib, dim=18, heads=4),
    "vit-zero-heads": lambda lib: _vit(lib, heads=0),
    "vit-image-before-pos-encoding": lambda lib: _vit(lib, image_size=17, pos_encoding="x"),
    "vit-pos-encoding-before-heads": lambda lib: _vit(lib, dim=18, heads=4, pos_encoding="x"),
    "vit-dropout": lambda lib: _vit(lib, dropout=1.5),
    "vit-softmax-on": lambda lib: _vit(lib, softmax_on="bogus"),
    "vit-dropout-before-softmax-on": lambda lib: _vit(lib, dropout=-1.0, softmax_on="bogus"),
}

#: name -> a call that complextorch 2.1.1 accepts although it looks invalid; so does the compat
ACCEPTED = {
    "mha-dropout-one": lambda lib: lib.nn.MultiheadAttention(2, 8, 4, 4, dropout=1.0),
    "sdpa-dropout-one": lambda lib: lib.nn.ScaledDotProductAttention(1.0, attn_dropout=1.0),
    "holographic-dropout-one": lambda lib: lib.nn.HolographicAttention(1.0, attn_dropout=1.0),
    "vit-dropout-one": lambda lib: _vit(lib, dropout=1.0),
    "mha-holographic-ignores-softmax-on": lambda lib: lib.nn.MultiheadAttention(
        2, 8, 4, 4, softmax_on="bogus", attention="holographic"
    ),
    "mha-rotary-dim-unused": lambda lib: lib.nn.MultiheadAttention(
        2, 8, 4, 4, rotary=lib.nn.RotaryEmbedding(3)
    ),
    "mha-any-softmax-class": lambda lib: lib.nn.MultiheadAttention(
        2, 8, 4, 4, SoftMaxClass=torch.nn.Softmax
    ),
    "decoder-layer-not-divisible": lambda lib: lib.nn.TransformerDecoderLayer(8, 3, 16),
}

#: name -> a call complextorch 2.1.1 accepts (it checks nothing there) and the compat layer
#: rejects with complexformer.nn's ValueError: sizes that are not positive
STRICTER = {
    "rotary-zero-dim": lambda lib: lib.nn.RotaryEmbedding(0),
    "mha-zero-heads": lambda lib: lib.nn.MultiheadAttention(0, 8, 4, 4),
    "encoder-zero-layers": lambda lib: lib.nn.TransformerEncoder(
        lib.nn.TransformerEncoderLayer(8, 2, 16), 0
    ),
    "vit-zero-in-channels": lambda lib: _vit(lib, in_channels=0),
}


def _raised(call, lib) -> tuple[type[BaseException], str] | None:
    torch.manual_seed(0)
    try:
        call(lib)
    except Exception as e:  # noqa: BLE001 (the exception itself is what is compared)
        return type(e), str(e)
    return None


@pytest.mark.parametrize("case", sorted(INVALID))
def test_compat_raises_complextorch_type_and_message(case):
    theirs = _raised(INVALID[case], ct)
    assert theirs is not None, f"complextorch accepts {case}: not a reference case"
    assert _raised(INVALID[case], cc) == theirs


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_compat_accepts_what_complextorch_accepts(case):
    assert _raised(ACCEPTED[case], ct) is None
    assert _raised(ACCEPTED[case], cc) is None


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors")  # complextorch's
@pytest.mark.parametrize("case", sorted(STRICTER))
def test_compat_rejects_sizes_complextorch_does_not_check(case):
    assert _raised(STRICTER[case], ct) is None
    error = _raised(STRICTER[case], cc)
    assert error is not None and error[0] is ValueError
    assert "must be a positive integer" in error[1]
