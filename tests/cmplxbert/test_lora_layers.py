"""ComplexLoRALinear / ComplexLoRAEmbedding: init equals base, formula, merge, counts."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from complexformer.cmplxbert import (
    ComplexLoRAEmbedding,
    ComplexLoRALinear,
    merge_adapters,
    trainable_parameter_counts,
    unmerge_adapters,
)


def _crandn(*shape, seed=0, dtype=torch.complex64):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def _randomise(layer, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in (layer.lora_A, layer.lora_B, getattr(layer, "bias_c", None)):
            if p is not None:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))


def _linear(i=7, o=5, seed=0):
    torch.manual_seed(seed)
    return nn.Linear(i, o)


@pytest.mark.parametrize("init", ["zero_b", "zero_a"])
def test_lora_linear_fresh_equals_base(init):
    base = _linear()
    layer = ComplexLoRALinear(base, r=3, init=init)
    x = _crandn(2, 4, 7)
    w, b = base.weight.detach(), base.bias.detach()
    expect = torch.complex(x.real @ w.T + b, x.imag @ w.T)  # W·Re x + b + j W·Im x
    assert_close(layer(x), expect)
    xr = torch.randn(4, 7)
    y = layer(xr)  # a real input is lifted (Im = 0)
    assert y.dtype == torch.complex64
    assert_close(y.real, base(xr))
    assert torch.equal(y.imag, torch.zeros_like(y.imag))


def test_lora_linear_formula_with_scaling():
    base = _linear().double()
    layer = ComplexLoRALinear(base, r=2, alpha=6.0)
    assert layer.scaling == 3.0
    _randomise(layer)
    x = _crandn(3, 7, dtype=torch.complex128)
    a, bb = layer.complex_A, layer.complex_B
    w = base.weight.detach().to(torch.complex128) + 3.0 * a @ bb.conj().T
    bias = base.bias.detach() + torch.view_as_complex(layer.bias_c.detach())
    assert_close(layer(x), x @ w.T + bias)


def test_lora_embedding_fresh_equals_base_and_formula():
    torch.manual_seed(0)
    base = nn.Embedding(11, 6, padding_idx=0)
    layer = ComplexLoRAEmbedding(base, r=2)
    idx = torch.tensor([[0, 3, 10], [4, 4, 1]])
    y = layer(idx)
    assert y.dtype == torch.complex64
    assert_close(y.real, base(idx))
    assert torch.equal(y.imag, torch.zeros_like(y.imag))
    _randomise(layer)
    table = base.weight.detach() + layer.complex_A @ layer.complex_B.conj().T  # E + A·Bᴴ
    assert_close(layer(idx), table.detach()[idx])


@pytest.mark.parametrize("kind", ["linear", "embedding"])
def test_lora_merge_equals_unmerged_idempotent_and_unmerge_restores(kind):
    if kind == "linear":
        base = _linear()
        layer = ComplexLoRALinear(base, r=3, alpha=4.0)
        x = _crandn(2, 5, 7)
    else:
        torch.manual_seed(0)
        base = nn.Embedding(13, 6)
        layer = ComplexLoRAEmbedding(base, r=3)
        x = torch.randint(0, 13, (2, 5))
    _randomise(layer, seed=3)
    w0 = base.weight.detach().clone()
    y0 = layer(x)
    layer.merge()
    assert layer.merged and layer.merged_weight.dtype == torch.float32
    y1 = layer(x)
    assert_close(y1, y0)
    m1 = layer.merged_weight.clone()
    layer.merge()  # twice: nothing changes
    assert torch.equal(layer.merged_weight, m1)
    assert torch.equal(layer(x), y1)
    assert torch.equal(base.weight, w0)  # the frozen base is never written
    layer.unmerge()
    layer.unmerge()
    assert not layer.merged and layer.merged_weight is None
    assert torch.equal(layer(x), y0)
    assert "merged_weight" not in layer.state_dict()


def test_lora_merge_adapters_on_a_module_tree():
    torch.manual_seed(0)
    net = nn.ModuleDict(
        {"a": ComplexLoRALinear(nn.Linear(4, 4), r=2), "b": ComplexLoRALinear(nn.Linear(4, 3), r=2)}
    )
    for m in net.values():
        _randomise(m)
    x = _crandn(5, 4)
    y0 = net["b"](net["a"](x))
    merge_adapters(net)
    assert all(m.merged for m in net.values())
    assert_close(net["b"](net["a"](x)), y0)
    unmerge_adapters(net)
    assert torch.equal(net["b"](net["a"](x)), y0)


def test_lora_frozen_base_bit_identical_after_optimizer_steps():
    base = _linear()
    emb = nn.Embedding(9, 7)
    lin = ComplexLoRALinear(base, r=2)
    le = ComplexLoRAEmbedding(emb, r=2)
    snap = {k: v.clone() for k, v in [("w", base.weight), ("b", base.bias), ("e", emb.weight)]}
    a0, b0 = lin.lora_A.detach().clone(), lin.lora_B.detach().clone()
    params = [p for p in (*lin.parameters(), *le.parameters()) if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1)
    idx = torch.tensor([[1, 2, 3], [4, 5, 8]])
    for _ in range(3):
        y = lin(le(idx))
        loss = (y.abs() ** 2).mean() + y.imag.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert torch.equal(base.weight, snap["w"]) and torch.equal(base.bias, snap["b"])
    assert torch.equal(emb.weight, snap["e"])
    assert not base.weight.requires_grad and base.weight.grad is None
    assert not torch.equal(lin.lora_B, b0)  # B (zero at init) moved
    assert not torch.equal(lin.lora_A, a0)


@pytest.mark.parametrize("i,o,r,bias", [(7, 5, 3, True), (16, 4, 1, True), (5, 9, 4, False)])
def test_lora_linear_parameter_count_formula(i, o, r, bias):
    layer = ComplexLoRALinear(nn.Linear(i, o), r=r, complex_bias=bias)
    trainable, total = trainable_parameter_counts(layer)
    assert trainable == 2 * r * (i + o) + (2 * o if bias else 0)
    assert total == trainable + o * i + o
    assert all(not p.is_complex() for p in layer.parameters())
    e = ComplexLoRAEmbedding(nn.Embedding(i, o), r=r)
    assert trainable_parameter_counts(e)[0] == 2 * r * (i + o)


def test_lora_rank_zero_is_the_lifted_base():
    base = _linear()
    layer = ComplexLoRALinear(base, r=0, complex_bias=False)
    assert trainable_parameter_counts(layer)[0] == 0
    x = _crandn(3, 7)
    assert_close(layer(x), torch.complex(base(x.real), x.imag @ base.weight.detach().T))


def test_lora_layer_errors():
    with pytest.raises(ValueError, match="torch.nn.Linear.*Embedding"):
        ComplexLoRALinear(nn.Embedding(3, 4))
    with pytest.raises(ValueError, match="r must be an integer >= 0.*-1"):
        ComplexLoRALinear(nn.Linear(3, 4), r=-1)
    with pytest.raises(ValueError, match="unknown init 'zeros'.*'zero_b'"):
        ComplexLoRALinear(nn.Linear(3, 4), init="zeros")
    with pytest.raises(ValueError, match="in_features=3"):
        ComplexLoRALinear(nn.Linear(3, 4))(torch.zeros(2, 5))
    with pytest.raises(ValueError, match="int64 or int32"):
        ComplexLoRAEmbedding(nn.Embedding(3, 4))(torch.zeros(2))


def _naive(layer, z):
    """(W + s·A·Bᴴ)·z + b + b_c, written out in complex arithmetic."""
    w = layer.base_layer.weight.detach().to(torch.complex64)
    if layer.r > 0:
        w = w + layer.scaling * (
            torch.view_as_complex(layer.lora_A) @ torch.view_as_complex(layer.lora_B).conj().T
        )
    y = z @ w.T
    if layer.base_layer.bias is not None:
        y = y + layer.base_layer.bias.detach()
    if layer.bias_c is not None:
        y = y + torch.view_as_complex(layer.bias_c)
    return y


@pytest.mark.parametrize("grad", [True, False])
def test_planar_lora_linear_of_several_layers_is_the_formula(grad):
    """Q, K, V-like groups (equal and unequal ranks, a rank-0 layer, no bias): the fused planar
    forward with and without autograd equals the naive complex formula, and so do the
    adapters' gradients."""
    from complexformer.cmplxbert.planar import planar_lora_linear

    layers = [
        ComplexLoRALinear(_linear(7, 5, 0), r=3, alpha=6.0),
        ComplexLoRALinear(_linear(7, 4, 1), r=2, complex_bias=False),
        ComplexLoRALinear(nn.Linear(7, 6, bias=False), r=0, complex_bias=False),
        ComplexLoRALinear(_linear(7, 3, 2), r=3, init="zero_a"),
    ]
    for i, m in enumerate(layers):
        if m.r > 0:
            _randomise(m, seed=i)
    z = _crandn(2, 3, 7, seed=5)
    x = torch.view_as_real(z).transpose(-1, -2).contiguous()  # planar rows (2, 3, 2, 7)
    with torch.set_grad_enabled(grad):
        y = planar_lora_linear(layers, x)
        y = torch.complex(y[..., 0, :], y[..., 1, :])
    expect = torch.cat([_naive(m, z) for m in layers], -1)
    assert_close(y, expect.detach(), rtol=1e-5, atol=1e-5)
    if grad:
        params = [m.lora_A for m in layers if m.r > 0] + [m.lora_B for m in layers if m.r > 0]
        g1 = torch.autograd.grad(y.abs().sum(), params)
        g0 = torch.autograd.grad(expect.abs().sum(), params)
        for a, b in zip(g1, g0, strict=True):
            assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_cached_weights_follow_every_update():
    """Without autograd the stacked weights are cached; an in-place update of any parameter
    (an optimizer step, a load) is seen at the next call, and a call with autograd after a
    cached one still gives the adapters a gradient."""
    layer = ComplexLoRALinear(_linear(), r=2)
    _randomise(layer)
    z = _crandn(4, 7, seed=1)
    with torch.no_grad():
        layer(z)
        layer.lora_A.add_(0.5)
        layer.bias_c.mul_(-2.0)
        y = layer(z)
    assert_close(y, _naive(layer, z).detach())
    layer(z).abs().sum().backward()
    assert layer.lora_A.grad is not None and layer.lora_A.grad.abs().sum() > 0


def _naive_table(layer):
    """E + s·A·Bᴴ as a complex (num, dim) table, written out."""
    e = layer.base_layer.weight.detach().to(torch.complex128)
    if layer.r == 0:
        return e
    a = torch.view_as_complex(layer.lora_A.detach().double())
    b = torch.view_as_complex(layer.lora_B.detach().double())
    return e + layer.scaling * a @ b.conj().T


@pytest.mark.parametrize("r", [0, 3])
@pytest.mark.parametrize("grad", [True, False])
def test_lora_embedding_planar_forward_is_the_table_lookup(r, grad):
    """planar_forward (the rows CmplxBERT's embeddings use): the Re and Im rows of
    (E + s·A·Bᴴ)[idx], unmerged and merged, with and without autograd, for int64 and int32
    indices; the gradient of A's padding row is zero."""
    torch.manual_seed(1)
    layer = ComplexLoRAEmbedding(nn.Embedding(11, 6, padding_idx=2), r=r, alpha=7.5)
    if r:
        _randomise(layer, seed=4)
        assert layer.scaling == 2.5
    idx = torch.tensor([[0, 2, 10], [4, 4, 1]])
    want = _naive_table(layer)[idx]  # (2, 3, 6)
    want_rows = torch.stack((want.real, want.imag), -2)  # (2, 3, 2, 6)
    for merged in (False, True):
        if merged:
            layer.merge()
        with torch.set_grad_enabled(grad):
            for ix in (idx, idx.int()):
                rows = layer.planar_forward(ix)
                assert rows.shape == (2, 3, 2, 6) and rows.dtype == torch.float32
                assert_close(rows.double(), want_rows, atol=1e-6, rtol=1e-6)
                assert_close(layer(ix).to(torch.complex128), want, atol=1e-6, rtol=1e-6)
        layer.unmerge()
    if r and grad:
        rows = layer.planar_forward(idx)
        (
            rows * torch.randn(rows.shape, generator=torch.Generator().manual_seed(2))
        ).sum().backward()
        assert torch.equal(layer.lora_A.grad[2], torch.zeros(r, 2))  # the padding row
        assert layer.lora_A.grad[4].abs().sum() > 0 and layer.lora_B.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="^ComplexLoRAEmbedding: indices must be int64 or int32"):
        layer.planar_forward(idx.float())


@pytest.mark.parametrize("ranks", [(2, 2, 2), (3, 0, 1)])
def test_planar_lora_linear_inference_with_residual_and_a_buffer(ranks):
    """Without autograd (one extended GEMM, adapters added in place): equal ranks (built
    together) and unequal ones, a residual added, the base GEMM written into a caller's
    buffer; equals the naive complex formula plus the residual, and the autograd path."""
    from complexformer.cmplxbert.planar import planar_lora_linear

    layers = [
        ComplexLoRALinear(_linear(6, o, s), r=r, alpha=2.0 * (r or 1), complex_bias=s != 1)
        for s, (o, r) in enumerate(zip((5, 4, 3), ranks, strict=True))
    ]
    for i, m in enumerate(layers):
        if m.r:
            _randomise(m, seed=10 + i)
    z = _crandn(3, 2, 6, seed=7)
    x = torch.view_as_real(z).transpose(-1, -2).contiguous()  # (3, 2, 2, 6)
    res = torch.randn(3, 2, 2, 12, generator=torch.Generator().manual_seed(8))
    expect = torch.cat([_naive(m, z) for m in layers], -1).detach()
    want = torch.stack((expect.real, expect.imag), -2) + res
    used = []

    def alloc(shape):
        used.append(shape)
        return torch.empty(shape)

    with torch.no_grad():
        y = planar_lora_linear(layers, x, residual=res.clone(), alloc=alloc)
        y0 = planar_lora_linear(layers, x)
    assert_close(y, want, rtol=1e-5, atol=1e-5)
    assert_close(y0, want - res, rtol=1e-5, atol=1e-5)
    assert used == [(12, 12 + 2 * sum(ranks))]  # 2·tokens rows, Σ out + 2R columns
    y1 = planar_lora_linear(layers, x, residual=res)  # with autograd
    assert_close(y1, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="expected in_features=6"):
        planar_lora_linear(layers, x[..., :5])
