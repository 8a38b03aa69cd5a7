"""The complexformer.nn options that reproduce complextorch 2.1.1's arithmetic.

``angles="float32"`` on the positional encodings, ``Dropout(masks="independent")`` and
:class:`HolographicAttention` (the defaults are tested elsewhere and unchanged)."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import complexformer.nn as cnn


def _crandn(*shape):
    return torch.randn(*shape, dtype=torch.cfloat)


def test_nn_angles_option_validated_and_default_exact():
    with pytest.raises(ValueError, match="angles"):
        cnn.RotaryEmbedding(8, angles="float16")
    x = _crandn(1, 5000, 4)
    exact = cnn.RotaryEmbedding(4)(x.to(torch.complex128))
    f64 = cnn.RotaryEmbedding(4)(x)
    f32 = cnn.RotaryEmbedding(4, angles="float32")(x)
    err64 = (f64 - exact).abs().max().item()
    err32 = (f32 - exact).abs().max().item()
    assert err64 < 1e-6 < err32  # float32 angles drift with the position, float64 do not


def test_nn_dropout_masks_option():
    z = torch.full((40000,), 1 + 1j, dtype=torch.cfloat)
    shared = cnn.Dropout(0.5)(z)
    assert torch.equal(shared.real == 0, shared.imag == 0)
    indep = cnn.Dropout(0.5, masks="independent")(z)
    assert abs(((indep.real == 0) != (indep.imag == 0)).float().mean().item() - 0.5) < 0.02
    assert set(indep.real.unique().tolist()) <= {0.0, 2.0}
    with pytest.raises(ValueError, match="masks"):
        cnn.Dropout(0.1, masks="per-channel")


def test_nn_holographic_attention_equals_complextorch():
    ct = pytest.importorskip("complextorch")
    q, k, v = _crandn(2, 3, 6, 8), _crandn(2, 3, 9, 8), _crandn(2, 3, 9, 5)
    ours = cnn.HolographicAttention(8**0.5, alpha_init=0.3).eval()
    theirs = ct.nn.HolographicAttention(8**0.5, alpha_init=0.3).eval()
    assert_close(ours(q, k, v), theirs(q, k, v), rtol=1e-5, atol=1e-5)
    # masks: a padded key equals complextorch without it; causal = complextorch on prefixes
    bias = torch.zeros(9)
    bias[7:] = float("-inf")
    out, _ = ours.attend(q, k, v, bias=bias)
    assert_close(out, theirs(q, k[..., :7, :], v[..., :7, :]), rtol=1e-5, atol=1e-5)
    out, w = ours.attend(k, k, v, is_causal=True)
    assert torch.all(w.triu(1) == 0)
    for t in range(9):
        ref = theirs(k[..., : t + 1, :], k[..., : t + 1, :], v[..., : t + 1, :])
        assert_close(out[..., t, :], ref[..., t, :], rtol=1e-5, atol=1e-5)
