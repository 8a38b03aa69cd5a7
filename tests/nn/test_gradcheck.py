"""torch.autograd.gradcheck of the complex layers in complex128, w.r.t. inputs AND parameters.

Parameters are passed to gradcheck as explicit inputs through torch.func.functional_call, so
the (real) parameter gradients are checked too; complex inputs are checked by gradcheck's
Wirtinger-derivative test.
"""

from __future__ import annotations

import pytest
import torch
from torch.autograd import gradcheck
from torch.func import functional_call

import complexformer.nn as cnn
from complexformer.models.vit import ViT


def _crandn(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=torch.complex128, generator=g)


def _check(
    module: torch.nn.Module, *inputs, fast: bool = False, with_params: bool = True, **kwargs
) -> None:
    """gradcheck w.r.t. inputs and parameters; ``fast`` uses gradcheck's random-projection
    mode (one random direction per input), ``with_params=False`` the inputs only."""
    module = module.double().eval()
    named = [(n, p) for n, p in module.named_parameters() if p.requires_grad and with_params]
    names = [n for n, _ in named]
    params = [p.detach().clone().requires_grad_(True) for _, p in named]
    inputs = [
        x.detach().clone().requires_grad_(x.is_floating_point() or x.is_complex()) for x in inputs
    ]
    n_in = len(inputs)

    def f(*args):
        state = dict(zip(names, args[n_in:], strict=True))
        return functional_call(module, state, tuple(args[:n_in]), kwargs)

    assert gradcheck(f, (*inputs, *params), eps=1e-6, atol=1e-5, rtol=1e-4, fast_mode=fast)


@pytest.mark.parametrize(
    "make",
    [
        lambda: cnn.Linear(3, 2),
        lambda: cnn.LayerNorm(4, whiten="full"),
        lambda: cnn.LayerNorm(4, whiten="scalar"),
        lambda: cnn.RMSNorm(4),
        lambda: cnn.CGELU(),
        lambda: cnn.CReLU(),
        lambda: cnn.ModReLU(4, bias=-0.2),
        lambda: cnn.ZReLU(),
        lambda: cnn.Cardioid(),
        lambda: cnn.RotaryEmbedding(4, learnable=True),
        lambda: cnn.SinusoidalPositionalEncoding(4),
        lambda: cnn.CoPE(4),
    ],
    ids=[
        "linear",
        "ln_full",
        "ln_scalar",
        "rmsnorm",
        "cgelu",
        "crelu",
        "modrelu",
        "zrelu",
        "cardioid",
        "rotary",
        "sinusoidal",
        "cope",
    ],
)
def test_nn_gradcheck_layers(make):
    module = make()
    x = _crandn(2, 3, 4 if not isinstance(module, cnn.Linear) else 3, seed=1)
    if isinstance(module, cnn.LayerNorm):
        with torch.no_grad():  # a generic affine map and bias, not the identity
            module.weight.normal_()
            module.bias.normal_()
    _check(module, x)


@pytest.mark.parametrize("score", ["real", "modulus", "split", "phase"])
def test_nn_gradcheck_multihead_attention(score):
    torch.manual_seed(0)
    mha = cnn.MultiheadAttention(
        2, 4, 2, 3, dropout=0.0, score=score, bias=True, rotary=cnn.RotaryEmbedding(2)
    )
    x, mem = _crandn(1, 3, 4, seed=2), _crandn(1, 4, 4, seed=3)
    pad = torch.tensor([[False, False, False, True]])
    # full Jacobian w.r.t. the inputs; random projections w.r.t. inputs and parameters
    _check(mha, x, x, x, is_causal=True, with_params=False)
    _check(mha, x, mem, mem, key_padding_mask=pad, with_params=False)
    _check(mha, x, x, x, is_causal=True, fast=True)
    _check(mha, x, mem, mem, key_padding_mask=pad, fast=True)


def test_nn_gradcheck_transformer_layers():
    torch.manual_seed(0)
    enc = cnn.TransformerEncoderLayer(
        4, 2, 6, dropout=0.0, norm_first=True, rotary=cnn.RotaryEmbedding(2)
    )
    x = _crandn(1, 3, 4, seed=4)
    _check(enc, x, is_causal=True, with_params=False)
    _check(enc, x, is_causal=True, fast=True)
    dec = cnn.TransformerDecoderLayer(4, 2, 6, dropout=0.0, score="modulus", whiten="scalar")
    tgt, mem = _crandn(1, 2, 4, seed=5), _crandn(1, 3, 4, seed=6)
    _check(dec, tgt, mem, tgt_is_causal=True, with_params=False)
    _check(dec, tgt, mem, tgt_is_causal=True, fast=True)


def test_nn_gradcheck_vit_input():
    torch.manual_seed(0)
    vit = (
        ViT(
            4,
            2,
            in_channels=1,
            num_classes=2,
            dim=4,
            depth=1,
            heads=2,
            mlp_dim=4,
            pos_encoding="rotary",
        )
        .double()
        .eval()
    )
    x = _crandn(1, 1, 4, 4, seed=7).requires_grad_(True)
    assert gradcheck(vit, (x,), eps=1e-6, atol=1e-5, rtol=1e-4)
