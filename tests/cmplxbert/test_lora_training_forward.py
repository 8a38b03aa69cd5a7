"""The CmplxBERT forward as it trains (train mode, autograd on, random adapters): every adapted
linear is y = (W + s·A·Bᴴ)·x + (b + b_c) (Tamburini 2024, sec. 3.1), checked against that
formula written naively in complex arithmetic, and merged layers give the unmerged model."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.cmplxbert.lora_testlib import batch, tiny_model

pytest.importorskip("transformers")

from complexformer.cmplxbert import (  # noqa: E402
    ComplexLoRAConfig,
    complexify,
    merge_adapters,
    unmerge_adapters,
)
from complexformer.cmplxbert import layers as layers_module  # noqa: E402
from complexformer.cmplxbert import modeling as modeling_module  # noqa: E402

NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def naive_lora(layer, z: torch.Tensor) -> torch.Tensor:
    """(W + s·A·Bᴴ)·z + b + b_c for one ComplexLoRALinear, on complex z (..., in)."""
    w = layer.base_layer.weight.to(torch.complex128)
    if layer.r > 0:
        a = torch.complex(layer.lora_A[..., 0], layer.lora_A[..., 1])  # (out, r)
        b = torch.complex(layer.lora_B[..., 0], layer.lora_B[..., 1])  # (in, r)
        w = w + layer.scaling * (a @ b.conj().T)
    y = z @ w.T
    if layer.base_layer.bias is not None:
        y = y + layer.base_layer.bias
    if layer.bias_c is not None:
        y = y + torch.complex(layer.bias_c[:, 0], layer.bias_c[:, 1])
    return y


def naive_planar_lora_linear(layers, x, *, residual=None, alloc=None):
    """planar_lora_linear's contract (planar rows (..., 2, in) in and out) on the naive formula."""
    z = torch.complex(x[..., 0, :], x[..., 1, :])
    y = torch.cat([naive_lora(m, z) for m in layers], -1)
    y = torch.stack((y.real, y.imag), -2)  # (..., 2, Σ out)
    return y if residual is None else y + residual


def random_adapters(model, seed: int = 0) -> dict[str, torch.nn.Parameter]:
    """A, B and b_c of every adapted layer set to 0.2·N(0, 1) (fresh adapters have A·Bᴴ = 0)."""
    g = torch.Generator().manual_seed(seed)
    params = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("lora_A", "lora_B", "bias_c")):
                p.copy_(0.2 * torch.randn(p.shape, generator=g, dtype=p.dtype))
                params[name] = p
    return params


def training_model(kind: str = "BertForMaskedLM"):
    hf = tiny_model(kind, **NO_DROPOUT).double()
    cb = complexify(hf, ComplexLoRAConfig(r=3, alpha=6.0)).train()
    return cb, random_adapters(cb)


def run(cb, ids, mask, tt):
    out = cb(ids, attention_mask=mask, token_type_ids=tt)
    return out.last_hidden_state, out.logits


def test_training_forward_and_gradients_equal_the_naive_complex_formula(monkeypatch):
    cb, params = training_model()
    assert cb.training and all(p.requires_grad for p in params.values()) and len(params) > 30
    ids, mask, tt = batch()
    h, logits = run(cb, ids, mask, tt)
    grads = torch.autograd.grad(logits.square().mean() + h.abs().mean(), list(params.values()))
    monkeypatch.setattr(modeling_module, "planar_lora_linear", naive_planar_lora_linear)
    monkeypatch.setattr(layers_module, "planar_lora_linear", naive_planar_lora_linear)
    h_ref, logits_ref = run(cb, ids, mask, tt)
    loss_ref = logits_ref.square().mean() + h_ref.abs().mean()
    grads_ref = torch.autograd.grad(loss_ref, list(params.values()))
    assert h.is_complex() and h.imag.abs().max() > 0.1  # the adapters make it complex
    assert_close(h, h_ref, atol=1e-10, rtol=1e-10)
    assert_close(logits, logits_ref, atol=1e-10, rtol=1e-10)
    for name, got, ref in zip(params, grads, grads_ref, strict=True):
        assert_close(got, ref, atol=1e-10, rtol=1e-8, msg=name)


@pytest.mark.parametrize("kind", ["BertForMaskedLM", "BertForSequenceClassification"])
def test_merged_equals_unmerged_with_autograd_on(kind):
    cb, _ = training_model(kind)
    ids, mask, tt = batch()
    out0 = cb(ids, attention_mask=mask, token_type_ids=tt)
    merge_adapters(cb)
    out1 = cb(ids, attention_mask=mask, token_type_ids=tt)  # complex (W + s·A·Bᴴ) GEMMs
    assert out0.logits.requires_grad and out0.last_hidden_state.imag.abs().max() > 0.1
    assert_close(out1.logits, out0.logits, atol=1e-10, rtol=1e-10)
    assert_close(out1.last_hidden_state, out0.last_hidden_state, atol=1e-10, rtol=1e-10)
    unmerge_adapters(cb)
    out2 = cb(ids, attention_mask=mask, token_type_ids=tt)
    assert torch.equal(out2.logits, out0.logits)
