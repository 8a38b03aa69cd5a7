"""Bad inputs raise a clear ValueError naming the bad value and what is allowed."""

from __future__ import annotations

import pytest
import torch

import complexformer.nn as cnn
from complexformer.models.vit import ViT


@pytest.mark.parametrize(
    "make",
    [cnn.RotaryEmbedding, cnn.SinusoidalPositionalEncoding, cnn.CoPE],
    ids=["rotary", "sinusoidal", "cope"],
)
def test_nn_positional_wrong_last_dimension(make):
    pe = make(8)
    x = torch.randn(2, 5, 7, dtype=torch.cfloat)
    with pytest.raises(ValueError, match=r"last dimension of the input is 7, expected dim=8"):
        pe(x)
    with pytest.raises(
        ValueError,
        match=r"must be a complex .* or real floating tensor, got "
        r"dtype torch.int64",
    ):
        pe(torch.ones(2, 5, 8, dtype=torch.long))
    with pytest.raises(ValueError, match=r"offset must be a non-negative int, got -1"):
        pe(torch.randn(2, 5, 8, dtype=torch.cfloat), offset=-1)


def test_nn_real_tensor_where_complex_is_required():
    x = torch.randn(2, 4, 8)
    mha = cnn.MultiheadAttention(2, 8)
    with pytest.raises(
        ValueError,
        match=r"query must be a complex tensor .* got dtype "
        r"torch.float32",
    ):
        mha(x, x, x)
    for act in (cnn.CGELU(), cnn.ModReLU(), cnn.ZReLU(), cnn.Cardioid(), cnn.Dropout(0.1)):
        with pytest.raises(ValueError, match=r"complex tensor .* got dtype torch.float32"):
            act(x)


def test_nn_mask_of_the_wrong_shape():
    mha = cnn.MultiheadAttention(2, 8)
    x = torch.randn(3, 4, 8, dtype=torch.cfloat)
    with pytest.raises(ValueError, match=r"attn_mask has shape \(4, 5\); allowed: \(4, 4\)"):
        mha(x, x, x, attn_mask=torch.zeros(4, 5, dtype=torch.bool))
    with pytest.raises(
        ValueError,
        match=r"attn_mask has shape \(5, 4, 4\); allowed: .*"
        r"\(3, 4, 4\), \(6, 4, 4\)",
    ):
        mha(x, x, x, attn_mask=torch.zeros(5, 4, 4, dtype=torch.bool))
    with pytest.raises(
        ValueError,
        match=r"key_padding_mask has shape \(3, 5\); allowed: .*"
        r"\(3, 4\)",
    ):
        mha(x, x, x, key_padding_mask=torch.zeros(3, 5, dtype=torch.bool))
    with pytest.raises(
        ValueError,
        match=r"attn_mask must be a bool tensor .* got dtype "
        r"torch.int64",
    ):
        mha(x, x, x, attn_mask=torch.zeros(4, 4, dtype=torch.long))


def test_nn_bad_configuration_values():
    with pytest.raises(
        ValueError,
        match=r"unknown score 'softmax'; allowed: 'real', "
        r"'modulus', 'split', 'phase'",
    ):
        cnn.MultiheadAttention(2, 8, score="softmax")
    with pytest.raises(ValueError, match=r"rotary.dim=8 must equal d_k=4"):
        cnn.MultiheadAttention(2, 8, rotary=cnn.RotaryEmbedding(8))
    with pytest.raises(ValueError, match=r"unknown whiten 'zca'; allowed: 'full', 'scalar'"):
        cnn.LayerNorm(8, whiten="zca")
    with pytest.raises(ValueError, match=r"unknown pos_encoding 'alibi'"):
        cnn.Transformer(8, 2, 1, 1, 16, pos_encoding="alibi")
    with pytest.raises(ValueError, match=r"d_model=10 is not divisible by nhead=4"):
        cnn.TransformerEncoderLayer(10, 4)
    with pytest.raises(ValueError, match=r"unknown activation 'swish'"):
        cnn.TransformerEncoderLayer(8, 2, activation="swish")
    with pytest.raises(
        ValueError,
        match=r"unknown pos_encoding 'cope'; allowed: 'learned', "
        r"'sinusoidal', 'rotary'",
    ):
        ViT(8, 4, pos_encoding="cope")
    with pytest.raises(ValueError, match=r"image_size=8 is not divisible by patch_size=3"):
        ViT(8, 3)


def test_nn_wrong_input_shapes():
    mha = cnn.MultiheadAttention(2, 8)
    x = torch.randn(3, 4, 8, dtype=torch.cfloat)
    with pytest.raises(ValueError, match=r"last dimension of key is 6, expected 8"):
        mha(x, x[..., :6], x)
    with pytest.raises(ValueError, match=r"key and value lengths differ: 4 vs 3"):
        mha(x, x, x[:, :3])
    with pytest.raises(
        ValueError,
        match=r"Linear: last dimension of the input is 5, expected "
        r"in_features=4",
    ):
        cnn.Linear(4, 2)(torch.randn(2, 5, dtype=torch.cfloat))
    with pytest.raises(ValueError, match=r"normalized_shape=\(8,\)"):
        cnn.LayerNorm(8)(torch.randn(2, 6, dtype=torch.cfloat))
    vit = ViT(8, 4, in_channels=1, num_classes=2, dim=8, depth=1, heads=2)
    with pytest.raises(
        ValueError,
        match=r"images must have shape \(B, 1, 8, 8\), got "
        r"\(2, 3, 8, 8\)",
    ):
        vit(torch.randn(2, 3, 8, 8))
