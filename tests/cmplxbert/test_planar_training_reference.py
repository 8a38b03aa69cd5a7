"""CmplxBERT's planar training kernels and LoRA training path against their formulas written
with complex float64 tensors (and the gradients by autograd of those composed ops).

Covered: softmax(|s·Q·Kᴴ| + bias)·V from the planar (B, T, 2, 3, H, d) projections with and
without autograd and a workspace; the complex LayerNorm on planar rows in every branch of
planar_norm; the scalar-whitened norm with only some of its inputs trainable; |z| of planar
rows; and the LoRA training path (adapter dropout, rank-zero, frozen and merged layers, the
input width, the device of every column, rows with one to three leading dimensions).
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from complexformer.cmplxbert import planar
from complexformer.cmplxbert.planar import Workspace, _ScalarNorm
from complexformer.nn import LayerNorm

F64 = torch.float64
C128 = torch.complex128


# --------------------------------------------------------------------- modulus attention


def _qkv(b=2, t=5, h=3, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, t, 2, 3, h, d, dtype=F64, generator=g)


def _key_bias(b, t):
    bias = torch.zeros(b, 1, 1, t, dtype=F64)
    bias[0, ..., t - 2 :] = float("-inf")  # the last two keys of the first sequence are padding
    bias[1, ..., 0] = -0.7  # a finite bias
    return bias


def _naive_attention(qkv, bias, scale):
    """softmax(|s·Q·Kᴴ| + bias)·V with complex tensors: (B, H, T, 2d) [Re | Im]."""
    z = torch.complex(qkv[:, :, 0], qkv[:, :, 1]).permute(2, 0, 3, 1, 4)  # (3, B, H, T, d)
    q, k, v = z[0], z[1], z[2]
    s = (scale * q) @ k.conj().transpose(-2, -1)
    logits = s.abs() if bias is None else s.abs() + bias
    o = torch.softmax(logits, -1).to(C128) @ v
    return torch.cat((o.real, o.imag), -1)


@pytest.mark.parametrize("with_bias", [False, True])
def test_modulus_attention_without_autograd_equals_the_complex_formula(with_bias):
    b, t, h, d = 2, 5, 3, 4
    qkv = _qkv(b, t, h, d)
    bias = _key_bias(b, t) if with_bias else None
    scale = 1.0 / math.sqrt(d)
    want = _naive_attention(qkv, bias, scale)
    ws = Workspace()
    for name in ("att_q", "att_kv", "big", "att_w"):  # dirty, oversized buffers
        ws._bufs[name] = torch.full((4096,), 7.0, dtype=F64)
    with torch.no_grad():
        got_fresh = planar.modulus_attention(qkv, bias, scale, 0.0)
        got_ws = planar.modulus_attention(qkv, bias, scale, 0.0, ws)
    assert got_fresh.shape == (b, h, t, 2 * d)
    assert_close(got_fresh, want, atol=1e-12, rtol=1e-12)
    assert_close(got_ws, want, atol=1e-12, rtol=1e-12)
    assert set(ws._bufs) == {"att_q", "att_kv", "big", "att_w"}  # no other buffer made
    assert got_ws.data_ptr() == ws._bufs["att_q"].data_ptr()  # the output in the workspace


@pytest.mark.parametrize("with_bias", [False, True])
def test_modulus_attention_with_autograd_equals_the_complex_formula(with_bias):
    b, t, h, d = 2, 5, 3, 4
    qkv = _qkv(b, t, h, d, seed=1).requires_grad_(True)
    bias = _key_bias(b, t) if with_bias else None
    scale = 0.37
    g = torch.randn(b, h, t, 2 * d, dtype=F64, generator=torch.Generator().manual_seed(2))
    got = planar.modulus_attention(qkv, bias, scale, 0.0)
    want = _naive_attention(qkv, bias, scale)
    assert_close(got, want, atol=1e-12, rtol=1e-12)
    (g_got,) = torch.autograd.grad(got, qkv, g)
    (g_want,) = torch.autograd.grad(want, qkv, g)
    assert_close(g_got, g_want, atol=1e-12, rtol=1e-10)


def test_modulus_attention_dropout_scales_the_kept_weights():
    """p > 0 with autograd: the output is (a ⊙ mask / (1 - p))·V for the mask drawn, and the
    gradients follow the same mask."""
    b, t, h, d, p = 2, 6, 2, 3, 0.4
    qkv = _qkv(b, t, h, d, seed=3).requires_grad_(True)
    g = torch.randn(b, h, t, 2 * d, dtype=F64, generator=torch.Generator().manual_seed(4))
    torch.manual_seed(5)
    got = planar.modulus_attention(qkv, None, 0.5, p)
    torch.manual_seed(5)  # the same draw: bernoulli(1 - p) of the (B, H, T, T) weights
    keep = torch.empty(b, h, t, t, dtype=F64).bernoulli_(1.0 - p)
    assert 0 < keep.sum() < keep.numel()
    z = torch.complex(qkv[:, :, 0], qkv[:, :, 1]).permute(2, 0, 3, 1, 4)
    s = (0.5 * z[0]) @ z[1].conj().transpose(-2, -1)
    w = torch.softmax(s.abs(), -1) * keep / (1.0 - p)
    o = w.to(C128) @ z[2]
    want = torch.cat((o.real, o.imag), -1)
    assert_close(got, want, atol=1e-12, rtol=1e-12)
    (g_got,) = torch.autograd.grad(got, qkv, g)
    (g_want,) = torch.autograd.grad(want, qkv, g)
    assert_close(g_got, g_want, atol=1e-12, rtol=1e-10)


# --------------------------------------------------------------------------- LayerNorm


def _naive_norm(x, weight, bias, eps, whiten):
    """The complex LayerNorm of planar rows x (..., 2, F) written out: centre, whiten
    (scalar: by sqrt(E|z - mean|² + eps); full: the inverse square root of the 2x2
    covariance + eps·I), then the per-feature 2x2 map and bias."""
    z = torch.complex(x[..., 0, :], x[..., 1, :])
    c = z - z.mean(-1, keepdim=True)
    if whiten == "scalar":
        c = c / torch.sqrt((c.abs() ** 2).mean(-1, keepdim=True) + eps)
        re, im = c.real, c.imag
    else:
        cr, ci = c.real, c.imag
        vrr = (cr * cr).mean(-1, keepdim=True) + eps
        vii = (ci * ci).mean(-1, keepdim=True) + eps
        vri = (cr * ci).mean(-1, keepdim=True)
        cov = torch.stack((torch.cat((vrr, vri), -1), torch.cat((vri, vii), -1)), -2)
        ev, u = torch.linalg.eigh(cov)  # (..., 2), (..., 2, 2)
        inv_sqrt = u @ torch.diag_embed(ev.rsqrt()) @ u.transpose(-2, -1)
        y = (inv_sqrt @ torch.stack((cr, ci), -2)).unbind(-2)
        re, im = y
    if weight is not None:
        re, im = (
            weight[:, 0, 0] * re + weight[:, 0, 1] * im,
            weight[:, 1, 0] * re + weight[:, 1, 1] * im,
        )
    if bias is not None:
        re, im = re + bias[:, 0], im + bias[:, 1]
    return torch.stack((re, im), -2)


def _norm(whiten="scalar", affine=True, n=7, seed=0):
    ln = LayerNorm(n, eps=1e-3, elementwise_affine=affine, whiten=whiten).double()
    if affine:
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            ln.weight.copy_(torch.randn(ln.weight.shape, generator=g, dtype=F64))
            ln.bias.copy_(torch.randn(ln.bias.shape, generator=g, dtype=F64))
    return ln


def _rows(shape=(3, 4, 2, 7), seed=1):
    return torch.randn(shape, dtype=F64, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("whiten", ["scalar", "full"])
@pytest.mark.parametrize("affine", [True, False])
def test_planar_norm_with_autograd_equals_the_complex_formula(whiten, affine):
    ln = _norm(whiten, affine)
    x = _rows().requires_grad_(True)
    got = planar.planar_norm(ln, x)
    want = _naive_norm(x, ln.weight, ln.bias, ln.eps, whiten)
    assert_close(got, want, atol=1e-12, rtol=1e-10)
    g = _rows(seed=2)
    params = [x] + [p for p in (ln.weight, ln.bias) if p is not None]
    for a, b in zip(
        torch.autograd.grad(got, params, g), torch.autograd.grad(want, params, g), strict=True
    ):
        assert_close(a, b, atol=1e-10, rtol=1e-8)


def test_planar_norm_with_weights_of_another_dtype_casts_them():
    """float32 affine parameters on float64 rows (the fallback of planar_norm)."""
    ln = _norm("scalar")
    ln32 = _norm("scalar").float()
    x = _rows().requires_grad_(True)
    got = planar.planar_norm(ln32, x)
    assert got.dtype == F64
    want = _naive_norm(x, ln32.weight.double(), ln32.bias.double(), ln.eps, "scalar")
    assert_close(got, want, atol=1e-6, rtol=1e-6)
    (gx,) = torch.autograd.grad(got.square().sum(), x)
    (gx_want,) = torch.autograd.grad(want.square().sum(), x)
    assert_close(gx, gx_want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("whiten", ["scalar", "full"])
def test_planar_norm_without_autograd_writes_into_the_workspace(whiten):
    ln = _norm(whiten)
    x = _rows()
    want = _naive_norm(x, ln.weight, ln.bias, ln.eps, whiten)
    ws = Workspace()
    ws._bufs["hidden"] = torch.full((4096,), 7.0, dtype=F64)
    with torch.no_grad():
        got = planar.planar_norm(ln, x.clone(), ws, "hidden")
        assert_close(got, want, atol=1e-12, rtol=1e-10)
        assert got.data_ptr() == ws._bufs["hidden"].data_ptr()  # the buffer named
        got2 = planar.planar_norm(ln, x.clone())  # no workspace
        assert_close(got2, want, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("shape", [(3, 4, 2, 7), (5, 2, 7), (2, 1, 3, 2, 7)])
@pytest.mark.parametrize("trainable", [(0,), (1,), (2,), (0, 2), (1, 2)])
def test_scalar_norm_gives_each_trainable_input_its_gradient(trainable, shape):
    """Only some of x, W, b require a gradient: each of them gets the composed formula's
    (rows with one, two or three leading dimensions)."""
    ln = _norm("scalar")
    x = _rows(shape)
    ins = [x, ln.weight.detach().clone(), ln.bias.detach().clone()]
    for i in trainable:
        ins[i].requires_grad_(True)
    got = _ScalarNorm.apply(*ins, ln.eps)
    want = _naive_norm(*ins, ln.eps, "scalar")
    assert_close(got, want, atol=1e-12, rtol=1e-10)
    g = _rows(shape, seed=3)
    picked = [ins[i] for i in trainable]
    for a, b in zip(
        torch.autograd.grad(got, picked, g), torch.autograd.grad(want, picked, g), strict=True
    ):
        assert_close(a, b, atol=1e-10, rtol=1e-8)


# ----------------------------------------------------------------------------- modulus


def test_planar_modulus_of_rows_with_leading_dimensions():
    y = torch.randn(2, 3, 2, 5, dtype=F64, generator=torch.Generator().manual_seed(6))
    y[1, 2, :, 4] = 0
    y.requires_grad_(True)
    z = torch.complex(y[..., 0, :], y[..., 1, :])
    g = torch.randn(2, 3, 5, dtype=F64, generator=torch.Generator().manual_seed(7))
    got = planar.planar_modulus(y)
    assert_close(got, z.abs(), atol=1e-14, rtol=1e-14)
    (gy,) = torch.autograd.grad(got, y, g)
    want = torch.stack((z.real, z.imag), -2) * (g / z.abs()).unsqueeze(-2)
    want[1, 2, :, 4] = 0
    assert_close(gy, want, atol=1e-14, rtol=1e-12)


# ------------------------------------------------------------------ LoRA training path


def _lora_layers(specs, n_in=6, dtype=F64):
    """ComplexLoRALinear layers from (out, r, alpha, dropout, base bias, complex bias) specs,
    with random adapters and complex biases."""
    from complexformer.cmplxbert import ComplexLoRALinear

    layers = []
    for i, (out, r, alpha, p, bias, cbias) in enumerate(specs):
        torch.manual_seed(40 + i)
        m = ComplexLoRALinear(
            torch.nn.Linear(n_in, out, bias=bias), r=r, alpha=alpha, dropout=p, complex_bias=cbias
        ).to(dtype)
        g = torch.Generator().manual_seed(50 + i)
        with torch.no_grad():
            for q in (m.lora_A, m.lora_B, m.bias_c):
                if q is not None:
                    q.copy_(0.3 * torch.randn(q.shape, generator=g, dtype=F64))
        layers.append(m)
    return layers


def _naive_lora(m, z, scale, zin=None):
    """W·z + s·A·Bᴴ·zin + b + b_c in complex float64 (zin: the adapter's input, default z),
    with the scale s written out."""
    y = z @ m.base_layer.weight.to(C128).T
    if m.r > 0:
        a = torch.view_as_complex(m.lora_A.to(F64))
        b = torch.view_as_complex(m.lora_B.to(F64))
        y = y + scale * ((z if zin is None else zin) @ (a @ b.conj().T).T)
    if m.base_layer.bias is not None:
        y = y + m.base_layer.bias.to(F64)
    if m.bias_c is not None:
        y = y + torch.view_as_complex(m.bias_c.to(F64))
    return y


def _cplx(n_in=6, seed=60, shape=(2, 3)):
    return torch.randn(*shape, n_in, dtype=C128, generator=torch.Generator().manual_seed(seed))


def _planar_rows(z):
    return torch.stack((z.real, z.imag), -2)


def _trainable(layers):
    return [q for m in layers for q in (m.lora_A, m.lora_B, m.bias_c) if q is not None]


@pytest.mark.parametrize("grad", [True, False])
def test_lora_training_dropout_draws_one_mask_per_layer_with_dropout(grad):
    """Training with adapter dropout: each adapted layer with p > 0 sees its own mask (drawn
    in layer order, one per complex entry), a layer with p = 0 sees x; with a residual."""
    specs = [(4, 2, 3.0, 0.5, True, True), (3, 1, 0.5, 0.0, False, True)]
    specs += [(2, 0, 1.0, 0.0, True, True), (5, 3, 4.5, 0.3, True, False)]
    layers = [m.train() for m in _lora_layers(specs)]
    z = _cplx()
    x = _planar_rows(z)
    res = torch.randn(2, 3, 2, 14, dtype=F64, generator=torch.Generator().manual_seed(61))
    torch.manual_seed(9)
    with torch.set_grad_enabled(grad):
        y = planar.planar_lora_linear(layers, x, residual=res)
    torch.manual_seed(9)
    masks = {}
    for i, (_, r, _, p, _, _) in enumerate(specs):
        if r > 0 and p > 0:
            masks[i] = torch.empty(2, 3, 1, 6, dtype=F64).bernoulli_(1.0 - p).div_(1.0 - p)
    want = []
    for i, (m, spec) in enumerate(zip(layers, specs, strict=True)):
        zin = z * masks[i][..., 0, :] if i in masks else z
        want.append(_naive_lora(m, z, spec[2] / max(spec[1], 1), zin))
    want = _planar_rows(torch.cat(want, -1)) + res
    assert all(not torch.equal(q, torch.ones_like(q)) for q in masks.values())
    assert_close(y, want, atol=1e-12, rtol=1e-12)
    if grad:
        params = _trainable(layers)
        g = torch.randn(y.shape, dtype=F64, generator=torch.Generator().manual_seed(62))
        for a, b in zip(
            torch.autograd.grad(y, params, g),
            torch.autograd.grad(want, params, g),
            strict=True,
        ):
            assert_close(a, b, atol=1e-12, rtol=1e-10)


def test_lora_training_of_rank_zero_layers_only():
    """Under autograd, layers without adapters: W·x + b + b_c, and b_c's gradient."""
    layers = _lora_layers([(4, 0, 1.0, 0.0, True, True), (3, 0, 1.0, 0.0, False, True)])
    z = _cplx(seed=63)
    y = planar.planar_lora_linear(layers, _planar_rows(z))
    want = _planar_rows(torch.cat([_naive_lora(m, z, 0.0) for m in layers], -1))
    assert_close(y, want, atol=1e-12, rtol=1e-12)
    params = _trainable(layers)
    for a, b in zip(
        torch.autograd.grad(y.square().sum(), params),
        torch.autograd.grad(want.square().sum(), params),
        strict=True,
    ):
        assert_close(a, b, atol=1e-12, rtol=1e-10)


def test_lora_training_weights_of_frozen_layers_follow_the_scale_and_the_dtype():
    """Frozen layers under autograd keep their stacked weights; a new scale or input dtype
    builds them again."""
    layers = _lora_layers([(4, 2, 3.0, 0.0, True, True), (3, 1, 1.0, 0.0, True, False)])
    for q in (q for m in layers for q in m.parameters()):
        q.requires_grad_(False)
    z = _cplx(seed=64)
    x = _planar_rows(z).requires_grad_(True)
    y0 = planar.planar_lora_linear(layers, x)
    layers[0].scaling = 0.25
    layers[1].scaling = -2.0
    y1 = planar.planar_lora_linear(layers, x)
    want = _planar_rows(torch.cat([_naive_lora(m, z, m.scaling) for m in layers], -1))
    assert not torch.allclose(y0, y1)
    assert_close(y1, want, atol=1e-12, rtol=1e-12)
    y32 = planar.planar_lora_linear(layers, x.float())
    assert y32.dtype == torch.float32
    assert_close(y32, want.float(), atol=1e-5, rtol=1e-5)


def test_lora_training_of_merged_layers_adds_the_residual():
    from complexformer.cmplxbert import merge_adapters

    layers = _lora_layers([(4, 2, 3.0, 0.0, True, True), (3, 1, 1.0, 0.0, False, True)])
    z = _cplx(seed=65)
    want = _planar_rows(torch.cat([_naive_lora(m, z, m.scaling) for m in layers], -1))
    res = torch.randn(want.shape, dtype=F64, generator=torch.Generator().manual_seed(66))
    for m in layers:
        merge_adapters(m)
    y = planar.planar_lora_linear(layers, _planar_rows(z), residual=res)
    assert_close(y, want + res, atol=1e-12, rtol=1e-12)
    assert_close(planar.planar_lora_linear(layers, _planar_rows(z)), want, atol=1e-12, rtol=1e-12)


def test_lora_training_refuses_a_wrong_input_width():
    layers = _lora_layers([(4, 2, 3.0, 0.0, True, True), (3, 1, 1.0, 0.0, True, True)], n_in=6)
    x = torch.zeros(2, 2, 5, dtype=F64)
    msg = "last dimension of the input is 5, expected in_features=6"
    with pytest.raises(ValueError, match=msg):
        planar.planar_lora_linear(layers, x)


def test_lora_training_dropout_of_exactly_two_adapted_layers():
    """Two adapted layers with adapter dropout give two groups of adapter columns, both kept."""
    specs = [(4, 2, 3.0, 0.5, True, True), (3, 3, 1.5, 0.25, False, True)]
    layers = [m.train() for m in _lora_layers(specs)]
    z = _cplx(seed=67)
    torch.manual_seed(11)
    y = planar.planar_lora_linear(layers, _planar_rows(z))
    torch.manual_seed(11)
    masks = [torch.empty(2, 3, 1, 6, dtype=F64).bernoulli_(1 - s[3]).div_(1 - s[3]) for s in specs]
    want = [
        _naive_lora(m, z, s[2] / s[1], z * k[..., 0, :])
        for m, s, k in zip(layers, specs, masks, strict=True)
    ]
    assert_close(y, _planar_rows(torch.cat(want, -1)), atol=1e-12, rtol=1e-12)


def test_lora_training_on_the_meta_device_keeps_every_column_there():
    """Under autograd the bias columns are made on the input's device (shape inference on
    the meta device mixes no CPU tensor in)."""
    from complexformer.cmplxbert import ComplexLoRALinear

    layers = [
        ComplexLoRALinear(torch.nn.Linear(6, n, device="meta"), r=r, alpha=2.0)
        for n, r in ((4, 2), (3, 1))
    ]
    x = torch.empty(2, 3, 2, 6, device="meta", requires_grad=True)
    y = planar.planar_lora_linear(layers, x)
    assert y.device.type == "meta" and y.shape == (2, 3, 2, 7) and y.requires_grad
    cols = planar.planar_lora_cols(layers, x)
    assert cols.device.type == "meta" and cols.shape == (2, 3, 2, 2 * 3 + 2)


@pytest.mark.parametrize("shape", [(5,), (2, 2, 3)])
def test_lora_merged_layers_on_rows_with_one_or_three_leading_dimensions(shape):
    from complexformer.cmplxbert import merge_adapters

    layers = _lora_layers([(4, 2, 3.0, 0.0, True, True), (3, 1, 1.0, 0.0, False, True)])
    z = _cplx(seed=68, shape=shape)
    want = _planar_rows(torch.cat([_naive_lora(m, z, m.scaling) for m in layers], -1))
    for m in layers:
        merge_adapters(m)
    y = planar.planar_lora_linear(layers, _planar_rows(z))
    assert y.shape == (*shape, 2, 7)
    assert_close(y, want, atol=1e-12, rtol=1e-12)
