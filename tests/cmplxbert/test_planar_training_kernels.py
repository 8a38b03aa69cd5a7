"""The training kernels of CmplxBERT's planar rows that keep less for backward than autograd
would (modulus attention with recomputed scores, the scalar-whitened LayerNorm, the modulus of
the head's logits) against the composed autograd formulas in float64, and the MLM loss on the
labelled tokens only against the loss over every token's logits."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from complexformer.cmplxbert.planar import (
    _ModulusAttention,
    _ScalarNorm,
    planar_modulus,
)
from complexformer.nn import functional as CF
from tests.cmplxbert.lora_testlib import batch, tiny_model

F64 = torch.float64


def _stacked(q: torch.Tensor) -> torch.Tensor:
    """[[Qr, Qi], [Qi, -Qr]] (B, H, 2, T, 2d) of [Re | Im] queries (B, H, T, 2d)."""
    d = q.shape[-1] // 2
    return torch.stack((q, torch.cat((q[..., d:], -q[..., :d]), -1)), 2)


def _padding_bias(b: int, t: int) -> torch.Tensor:
    bias = torch.zeros(b, 1, t, t, dtype=F64)
    bias[0, ..., t - 2 :] = float("-inf")  # padded keys
    bias[1, :, 1, :] = float("-inf")  # a query row with every key masked
    return bias


@pytest.mark.parametrize("p", [0.0, 0.3])
@pytest.mark.parametrize("with_bias", [False, True])
def test_modulus_attention_recomputed_equals_the_autograd_kernel(p, with_bias):
    torch.manual_seed(0)
    b, h, t, d = 2, 3, 6, 4
    q, k, v = (torch.randn(b, h, t, 2 * d, dtype=F64, requires_grad=True) for _ in range(3))
    bias = _padding_bias(b, t) if with_bias else None
    g = torch.randn(b, h, t, 2 * d, dtype=F64)
    torch.manual_seed(1)
    out = _ModulusAttention.apply(q, k, v, bias, p)
    grads = torch.autograd.grad(out, (q, k, v), g)
    torch.manual_seed(1)  # the same dropout draws
    ref, _ = CF.modulus_attention(_stacked(q), k, v, bias, p)
    grads_ref = torch.autograd.grad(ref, (q, k, v), g)
    assert_close(out, ref, atol=1e-12, rtol=1e-12)
    for got, want in zip(grads, grads_ref, strict=True):
        assert_close(got, want, atol=1e-12, rtol=1e-10)
    if with_bias:
        assert out[1, :, 1].abs().max() == 0  # the fully masked row


def test_modulus_attention_recomputed_matches_the_naive_complex_formula():
    """softmax(|Q·Kᴴ|)·V written with complex tensors, and finite gradients at S = 0."""
    torch.manual_seed(2)
    b, h, t, d = 1, 2, 5, 3
    q = torch.randn(b, h, t, 2 * d, dtype=F64)
    q[..., 0, :] = 0  # a zero query: S = 0 on its whole row
    q.requires_grad_(True)
    k, v = (torch.randn(b, h, t, 2 * d, dtype=F64, requires_grad=True) for _ in range(2))
    out = _ModulusAttention.apply(q, k, v, None, 0.0)
    qc = torch.complex(q[..., :d], q[..., d:])
    kc = torch.complex(k[..., :d], k[..., d:])
    vc = torch.complex(v[..., :d], v[..., d:])
    s = qc @ kc.conj().transpose(-2, -1)
    naive = torch.softmax(s.abs(), -1).to(vc.dtype) @ vc
    assert_close(out, torch.cat((naive.real, naive.imag), -1), atol=1e-12, rtol=1e-12)
    gq, gk, gv = torch.autograd.grad(out.square().sum(), (q, k, v))
    assert all(torch.isfinite(x).all() for x in (gq, gk, gv))
    assert gq[..., 0, :].abs().max() == 0  # |S| has no direction at 0: the gradient is 0


def test_scalar_norm_equals_the_composed_planar_layer_norm():
    torch.manual_seed(3)
    x = torch.randn(3, 4, 2, 7, dtype=F64, requires_grad=True)
    w = torch.randn(7, 2, 2, dtype=F64, requires_grad=True)
    bias = torch.randn(7, 2, dtype=F64, requires_grad=True)
    g = torch.randn(3, 4, 2, 7, dtype=F64)
    out = _ScalarNorm.apply(x, w, bias, 1e-5)
    ref = CF.planar_layer_norm(x, w, bias, 1e-5, "scalar")
    assert_close(out, ref, atol=1e-12, rtol=1e-12)
    for got, want in zip(
        torch.autograd.grad(out, (x, w, bias), g),
        torch.autograd.grad(ref, (x, w, bias), g),
        strict=True,
    ):
        assert_close(got, want, atol=1e-12, rtol=1e-10)
    assert torch.autograd.gradcheck(lambda *a: _ScalarNorm.apply(*a, 1e-5), (x, w, bias))


def test_scalar_norm_of_a_zero_row_is_finite():
    x = torch.zeros(2, 2, 5, dtype=F64, requires_grad=True)
    w = torch.randn(5, 2, 2, dtype=F64, requires_grad=True)
    bias = torch.randn(5, 2, dtype=F64, requires_grad=True)
    out = _ScalarNorm.apply(x, w, bias, 1e-5)
    assert_close(out, bias.t().expand(2, 2, 5))
    grads = torch.autograd.grad(out.square().sum(), (x, w, bias))
    assert all(torch.isfinite(t).all() for t in grads)


def test_planar_modulus_equals_complex_abs_with_a_zero_gradient_at_zero():
    torch.manual_seed(4)
    y = torch.randn(4, 2, 9, dtype=F64)
    y[0, :, 3] = 0
    y.requires_grad_(True)
    z = torch.complex(y[..., 0, :], y[..., 1, :])
    g = torch.randn(4, 9, dtype=F64)
    out = planar_modulus(y)
    assert_close(out, z.abs())
    (gy,) = torch.autograd.grad(out, y, g)
    (gref,) = torch.autograd.grad(z.abs(), y, g)
    assert_close(gy, gref)
    assert gy[0, :, 3].abs().max() == 0


@pytest.mark.parametrize("head_output", ["modulus", "real"])
def test_mlm_loss_on_labelled_tokens_equals_the_loss_over_all_logits(head_output):
    pytest.importorskip("transformers")
    from complexformer.cmplxbert import ComplexLoRAConfig, complexify
    from tests.cmplxbert.test_lora_training_forward import NO_DROPOUT, random_adapters

    hf = tiny_model("BertForMaskedLM", **NO_DROPOUT).double()
    cb = complexify(hf, ComplexLoRAConfig(r=3), head_output=head_output).train()
    params = random_adapters(cb)
    ids, mask, tt = batch()
    labels = torch.full_like(ids, -100)
    labels[0, 2], labels[1, 5], labels[2, 0] = 7, 11, 13
    full = cb(ids, attention_mask=mask, token_type_ids=tt, labels=labels)
    part = cb(ids, attention_mask=mask, token_type_ids=tt, labels=labels, return_logits=False)
    assert part.logits is None and full.logits.shape == (*ids.shape, 99)
    assert_close(part.loss, full.loss, atol=1e-12, rtol=1e-12)
    names = list(params)
    g_full = torch.autograd.grad(full.loss, [params[n] for n in names])
    g_part = torch.autograd.grad(part.loss, [params[n] for n in names])
    for name, a, b in zip(names, g_part, g_full, strict=True):
        assert_close(a, b, atol=1e-12, rtol=1e-10, msg=name)


def test_modulus_attention_on_bfloat16_inputs_computes_in_float32_both_ways():
    """Under bf16 autocast q, k, v arrive in bfloat16: the forward and the recomputation in
    backward both run in float32, equal to the float32 kernel on the rounded inputs."""
    torch.manual_seed(5)
    q, k, v = (torch.randn(2, 3, 6, 8).bfloat16().requires_grad_(True) for _ in range(3))
    g = torch.randn(2, 3, 6, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = _ModulusAttention.apply(q, k, v, None, 0.0)
    grads = torch.autograd.grad(out, (q, k, v), g)
    ref_in = [t.detach().float().requires_grad_(True) for t in (q, k, v)]
    ref = _ModulusAttention.apply(*ref_in, None, 0.0)
    ref_grads = torch.autograd.grad(ref, ref_in, g)
    assert out.dtype == torch.float32
    assert_close(out, ref)
    for got, want, t in zip(grads, ref_grads, (q, k, v), strict=True):
        assert got.dtype == torch.bfloat16 == t.dtype
        assert_close(got, want.bfloat16())


def test_bf16_autocast_training_step_of_a_complexified_bert():
    pytest.importorskip("transformers")
    from complexformer.cmplxbert import complexify

    ids, mask, _ = batch()
    labels = torch.where(
        torch.rand(ids.shape, generator=torch.Generator().manual_seed(6)) < 0.3, ids, -100
    )
    losses = {}
    for bf16 in (False, True):
        cb = complexify(tiny_model("BertForMaskedLM"), r=2).train()
        params = [p for p in cb.parameters() if p.requires_grad]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            torch.manual_seed(7)
            loss = cb(ids, attention_mask=mask, labels=labels, return_logits=False).loss
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        assert all(x is None or torch.isfinite(x).all() for x in grads)
        losses[bf16] = loss.item()
    assert abs(losses[True] - losses[False]) < 0.05 * abs(losses[False])
