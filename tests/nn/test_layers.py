"""Complex Linear / Embedding / init / LayerNorm / RMSNorm / activations / Dropout."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import complexformer.nn as cnn
from complexformer.models.vit import ViT


def _crandn(*shape, dtype=torch.complex128, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=g)


# --------------------------------------------------------------------------- linear / init


def test_nn_linear_matches_complex_matmul_and_lifts_real():
    lin = cnn.Linear(5, 3).double()
    with torch.no_grad():
        lin.bias.normal_()
    x = _crandn(2, 4, 5)
    w = lin.weight[..., 0] + 1j * lin.weight[..., 1]
    b = lin.bias[..., 0] + 1j * lin.bias[..., 1]
    assert_close(lin(x), x @ w.T + b)
    xr = torch.randn(4, 5, dtype=torch.float64)
    assert_close(lin(xr), xr.to(torch.complex128) @ w.T + b)
    assert lin.weight.dtype == torch.float64 and lin.weight.shape == (3, 5, 2)


@pytest.mark.parametrize("kind", ["glorot", "he"])
def test_nn_trabelsi_init_statistics(kind):
    torch.manual_seed(0)
    fan_in, fan_out = 300, 200
    w = cnn.Linear(fan_in, fan_out, init=kind).complex_weight.detach().to(torch.complex128)
    sigma = 1 / math.sqrt(fan_in + fan_out) if kind == "glorot" else 1 / math.sqrt(fan_in)
    # Var(W) = E|W|^2 = 2 sigma^2: Glorot 2/(fan_in + fan_out), He 2/fan_in
    assert abs((w.abs() ** 2).mean().item() / (2 * sigma**2) - 1) < 0.02
    # Rayleigh modulus: mean sigma sqrt(pi/2), P(|W| < sigma) = 1 - exp(-1/2)
    assert abs(w.abs().mean().item() / (sigma * math.sqrt(math.pi / 2)) - 1) < 0.02
    assert abs((w.abs() < sigma).double().mean().item() - (1 - math.exp(-0.5))) < 0.01
    # uniform phase: E e^{j theta} = 0, and the phases spread over (-pi, pi]
    assert (w / w.abs()).mean().abs().item() < 0.01
    hist = torch.histc(torch.angle(w).flatten(), bins=8, min=-math.pi, max=math.pi)
    assert (hist / hist.sum() - 1 / 8).abs().max() < 0.01


def test_nn_embedding():
    emb = cnn.Embedding(10, 4, padding_idx=0)
    idx = torch.tensor([[0, 3, 9], [3, 3, 1]])
    out = emb(idx)
    assert out.shape == (2, 3, 4) and out.dtype == torch.complex64
    assert_close(out, emb.complex_weight[idx])
    assert (out[0, 0] == 0).all()
    out.abs().sum().backward()
    assert (emb.weight.grad[0] == 0).all() and emb.weight.grad[3].abs().sum() > 0


# --------------------------------------------------------------------------- norms


def _cov2(z: torch.Tensor) -> torch.Tensor:
    """Per-token 2x2 covariance of (Re, Im) over the last dim: (..., 2, 2)."""
    re, im = z.real - z.real.mean(-1, keepdim=True), z.imag - z.imag.mean(-1, keepdim=True)
    c = torch.stack(
        [
            torch.stack([(re * re).mean(-1), (re * im).mean(-1)], -1),
            torch.stack([(im * re).mean(-1), (im * im).mean(-1)], -1),
        ],
        -2,
    )
    return c


def test_nn_layernorm_full_whitening_gives_identity_covariance():
    g = torch.Generator().manual_seed(0)
    re = 3.0 * torch.randn(4, 6, 256, dtype=torch.float64, generator=g) + 2.0
    im = 0.7 * re + 0.2 * torch.randn(4, 6, 256, dtype=torch.float64, generator=g) - 1.0
    x = torch.complex(re, im)  # strongly correlated, unequal variances, non-zero mean
    ln = cnn.LayerNorm(256, eps=1e-9, elementwise_affine=False).double()
    y = ln(x)
    eye = torch.eye(2, dtype=torch.float64).expand(4, 6, 2, 2)
    assert_close(_cov2(y), eye, rtol=0, atol=1e-6)
    assert_close(y.mean(-1), torch.zeros(4, 6, dtype=torch.complex128), rtol=0, atol=1e-9)
    # the identity affine init leaves it unchanged; the Trabelsi init scales by 1/sqrt(2)
    assert_close(cnn.LayerNorm(256, eps=1e-9).double()(x), y)
    trab = cnn.LayerNorm(256, eps=1e-9, affine_init="trabelsi").double()
    assert_close(_cov2(trab(x)), eye / 2, rtol=0, atol=1e-6)


@pytest.mark.parametrize("whiten", ["full", "scalar"])
def test_nn_layernorm_equals_torch_layernorm_on_real_input(whiten):
    torch.manual_seed(0)
    ref = torch.nn.LayerNorm(16)
    with torch.no_grad():
        ref.weight.normal_()
        ref.bias.normal_()
    ours = cnn.LayerNorm.from_real(ref, whiten=whiten)
    x = 3 * torch.randn(2, 5, 16) + 1
    y = ours(x)  # real input lifted (Im = 0)
    assert y.dtype == torch.complex64
    assert_close(y.real, ref(x), rtol=1e-5, atol=1e-5)
    assert (y.imag == 0).all()
    # ... also as a complex tensor with Im = 0, and at the default init (identity affine)
    assert_close(ours(x.to(torch.complex64)).real, ref(x), rtol=1e-5, atol=1e-5)
    plain = cnn.LayerNorm(16, whiten=whiten)
    assert_close(plain(x).real, F.layer_norm(x, (16,)), rtol=1e-5, atol=1e-5)


def test_nn_layernorm_scalar_mode_does_not_amplify_a_small_imaginary_part():
    torch.manual_seed(0)
    re = torch.randn(8, 64, dtype=torch.float64)
    x = torch.complex(re, 3e-2 * torch.randn(8, 64, dtype=torch.float64))
    scalar = cnn.LayerNorm(64, whiten="scalar").double()(x)
    full = cnn.LayerNorm(64, whiten="full").double()(x)
    assert scalar.imag.std() < 0.05  # stays ~3e-2 relative to Re, as in the input
    assert full.imag.std() > 0.9  # full whitening blows it up to ~unit variance (the trap)


def test_nn_rmsnorm():
    torch.manual_seed(0)
    x = torch.randn(3, 8)
    assert_close(cnn.RMSNorm(8)(x).real, torch.nn.RMSNorm(8, eps=1e-6)(x), rtol=1e-5, atol=1e-5)
    z = _crandn(3, 8)
    y = cnn.RMSNorm(8).double()(z)
    assert_close(y, z / z.abs().pow(2).mean(-1, keepdim=True).add(1e-6).sqrt())


# --------------------------------------------------------------------------- activations


def test_nn_activations_closed_forms():
    z = _crandn(4, 7)
    assert_close(cnn.CGELU()(z), torch.complex(F.gelu(z.real), F.gelu(z.imag)))
    assert_close(cnn.CReLU()(z), torch.complex(F.relu(z.real), F.relu(z.imag)))
    m = cnn.ModReLU(7, bias=-0.3).double()
    assert_close(m(z), torch.relu(z.abs() - 0.3) * z / z.abs())
    ang = torch.angle(z)
    assert_close(cnn.ZReLU()(z), z * ((ang >= 0) & (ang <= math.pi / 2)))
    assert_close(cnn.Cardioid()(z), 0.5 * (1 + torch.cos(ang)) * z)


def test_nn_activations_equal_complextorch():
    ct = pytest.importorskip("complextorch")
    z = torch.randn(5, 6, dtype=torch.cfloat)
    assert_close(cnn.CGELU()(z), ct.nn.CGELU()(z))
    assert_close(cnn.ZReLU()(z), ct.nn.zReLU()(z))
    assert_close(cnn.Cardioid()(z), ct.nn.CVCardiod()(z))
    assert_close(cnn.ModReLU(bias=-0.2)(z), ct.nn.modReLU(bias=-0.2)(z))


@pytest.mark.parametrize("bias", [-0.1, 0.5])
def test_nn_modrelu_and_cardioid_finite_gradient_at_zero(bias):
    z = torch.tensor([0j, 1 + 1j, -0.05 + 0j, 0j], dtype=torch.complex128, requires_grad=True)
    m = cnn.ModReLU(bias=bias).double()
    out = m(z)
    assert out[0] == 0
    (out.abs() ** 2 + out.real).sum().backward()
    assert torch.isfinite(torch.view_as_real(z.grad)).all()
    assert torch.isfinite(m.bias.grad).all()
    z.grad = None
    cnn.Cardioid()(z).real.sum().backward()
    assert torch.isfinite(torch.view_as_real(z.grad)).all()


def test_nn_complex_softmax_choices():
    s = _crandn(2, 5)
    sm = torch.softmax
    assert_close(cnn.ComplexSoftmax("real")(s), sm(s.real, -1))
    assert_close(cnn.ComplexSoftmax("modulus")(s), sm(s.abs(), -1))
    assert_close(cnn.ComplexSoftmax("split")(s), torch.complex(sm(s.real, -1), sm(s.imag, -1)))
    assert_close(cnn.ComplexSoftmax("phase")(s), sm(s.abs(), -1) * s / s.abs())


# --------------------------------------------------------------------------- dropout


def test_nn_dropout_shares_the_mask_between_re_and_im():
    torch.manual_seed(0)
    z = _crandn(64, 64, dtype=torch.complex64) + (1 + 1j)
    drop = cnn.Dropout(0.3)
    y = drop(z)
    dropped_re, dropped_im = y.real == 0, y.imag == 0
    assert torch.equal(dropped_re, dropped_im)
    frac = dropped_re.float().mean().item()
    assert 0.25 < frac < 0.35
    kept = ~dropped_re
    assert_close(y[kept], z[kept] / 0.7)  # phase kept, modulus scaled by 1/(1 - p)
    drop.eval()
    assert torch.equal(drop(z), z)


# --------------------------------------------------------------------------- parameters


def test_nn_no_parameter_or_buffer_is_complex():
    rope = cnn.RotaryEmbedding(8, learnable=True)
    modules = [
        cnn.Linear(4, 3),
        cnn.Embedding(5, 4),
        cnn.LayerNorm(4),
        cnn.RMSNorm(4),
        cnn.ModReLU(4),
        cnn.CoPE(4),
        rope,
        cnn.SinusoidalPositionalEncoding(4),
        cnn.LearnedPositionalEmbedding(6, 4),
        cnn.MultiheadAttention(2, 16, 8, 8, rotary=rope, bias=True),
        cnn.Transformer(16, 2, 1, 1, 32, pos_encoding="cope"),
        cnn.Transformer(16, 2, 1, 1, 32, pos_encoding="rotary"),
        ViT(8, 4, 1, 3, dim=16, depth=1, heads=2),
        ViT(8, 4, 1, 3, dim=16, depth=1, heads=2, pos_encoding="rotary"),
    ]
    for m in modules:
        params = list(m.named_parameters())
        assert params or isinstance(m, cnn.SinusoidalPositionalEncoding)
        for name, p in params:
            assert not p.is_complex(), f"{type(m).__name__}.{name} is complex"
            assert p.dtype == torch.float32
        for name, b in m.named_buffers():
            assert not b.is_complex(), f"{type(m).__name__}.{name} is complex"
