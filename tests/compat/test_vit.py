"""compat ViT against complextorch 2.1.1's models.ViT, for every positional encoding."""

from __future__ import annotations

import pytest
import torch

import complexformer.compat.complextorch as cc
from tests.compat.compat_testlib import copy_and_compare, crandn, real_numel

ct = pytest.importorskip("complextorch")


@pytest.mark.parametrize("softmax_on", ["complex", "real"])
@pytest.mark.parametrize("pos_encoding", ["learned", "sinusoidal", "rotary"])
def test_compat_vit_equals_complextorch(pos_encoding, softmax_on):
    args = dict(
        image_size=16,
        patch_size=4,
        in_channels=3,
        num_classes=10,
        dim=32,
        depth=2,
        heads=4,
        mlp_dim=48,
        softmax_on=softmax_on,
        pos_encoding=pos_encoding,
    )
    ours, theirs = cc.models.ViT(**args), ct.models.ViT(**args)
    copy_and_compare(ours, theirs, crandn(2, 3, 16, 16))


def test_compat_vit_features_and_default_sizes():
    args = dict(image_size=8, patch_size=2, num_classes=0, dim=16, depth=1, heads=2, mlp_dim=8)
    ours, theirs = cc.models.ViT(**args), ct.models.ViT(**args)
    copy_and_compare(ours, theirs, crandn(3, 1, 8, 8))  # (B, dim) class-token features
    ours, theirs = cc.models.vit_t(32, 8, num_classes=5), ct.models.vit_t(32, 8, num_classes=5)
    assert real_numel(ours) == real_numel(theirs)


def test_compat_vit_layer_equals_complextorch():
    rope_o, rope_t = cc.nn.RotaryEmbedding(8), ct.nn.RotaryEmbedding(8)
    ours = cc.models.ViTLayer(32, 4, 64, rotary=rope_o)
    theirs = ct.models.ViTLayer(32, 4, 64, rotary=rope_t)
    copy_and_compare(ours, theirs, crandn(2, 17, 32))


def test_compat_vit_errors_name_the_bad_value():
    with pytest.raises(ValueError, match="pos_encoding"):
        cc.models.ViT(16, 4, dim=32, depth=1, heads=4, pos_encoding="cope")
    with pytest.raises(ValueError, match="softmax_on must be 'complex' or 'real', got 'split'"):
        cc.models.ViT(16, 4, dim=32, depth=1, heads=4, softmax_on="split")
    with pytest.raises(
        ValueError, match=r"image_size \(15\) must be divisible by patch_size \(4\)"
    ):
        cc.models.ViT(15, 4, dim=32, depth=1, heads=4)
    assert torch.is_complex(cc.models.ViT(8, 4, dim=8, depth=1, heads=2)(crandn(1, 1, 8, 8)))
