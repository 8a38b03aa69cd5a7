"""The chunked linear + cross-entropy equals the plain head and F.cross_entropy."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from complexformer.losses.chunked_ce import chunked_linear_cross_entropy, default_chunk_rows
from complexformer.models import ComplexFormerLM, preset_config

RTOL = 1e-6


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach(), b.detach()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def _inputs(n=37, c=12, v=29, ignore=(0, 5, 36), seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, c, generator=g, dtype=torch.float64).requires_grad_()
    w = torch.randn(v, c, generator=g, dtype=torch.float64).requires_grad_()
    y = torch.randint(0, v, (n,), generator=g)
    y[list(ignore)] = -100
    return h, w, y


@pytest.mark.parametrize("chunk_rows", [1, 5, 16, 37, 100])
def test_value_and_gradients_equal_the_plain_loss(chunk_rows):
    h, w, y = _inputs()
    plain = F.cross_entropy(h @ w.t(), y, ignore_index=-100)
    gh, gw = torch.autograd.grad(plain, (h, w))
    chunked = chunked_linear_cross_entropy(h, w, y, chunk_rows=chunk_rows)
    ch, cw = torch.autograd.grad(chunked, (h, w))
    assert chunked.dtype == torch.float64
    assert _rel(chunked, plain) < RTOL
    assert _rel(ch, gh) < RTOL and _rel(cw, gw) < RTOL


def test_upstream_gradient_scales_and_all_ignored_is_nan():
    h, w, y = _inputs()
    (3.0 * chunked_linear_cross_entropy(h, w, y, chunk_rows=4)).backward()
    plain_h, plain_w = h.grad.clone(), w.grad.clone()
    h.grad = w.grad = None
    (3.0 * F.cross_entropy(h @ w.t(), y)).backward()
    assert _rel(plain_h, h.grad) < RTOL and _rel(plain_w, w.grad) < RTOL
    none = torch.full_like(y, -100)
    assert torch.isnan(chunked_linear_cross_entropy(h, w, none)).item()


def test_shapes_are_checked():
    h, w, y = _inputs()
    with pytest.raises(ValueError, match="labels must be"):
        chunked_linear_cross_entropy(h, w, y[:-1])
    with pytest.raises(ValueError, match="weight"):
        chunked_linear_cross_entropy(h, w[:, :-1], y)
    assert default_chunk_rows(50257) == (1 << 24) // 50257


@pytest.mark.parametrize("tied", [True, False])
def test_the_model_gives_the_same_loss_and_gradients_chunked(tied):
    cfg = preset_config("micro", vocab_size=97, tie_embeddings=tied, max_seq_len=24)
    torch.manual_seed(0)
    ids = torch.randint(0, 97, (3, 24))
    labels = ids.clone()
    labels[0, 5:9] = -100
    labels[2, -3:] = -100
    grads, losses = {}, {}
    for mode in ("never", "always"):
        torch.manual_seed(1)
        model = ComplexFormerLM(cfg.replace(chunked_loss=mode)).double().train()
        out = model(ids, labels=labels)
        assert (out.logits is None) == (mode == "always")
        out.loss.backward()
        losses[mode] = out.loss.detach()
        grads[mode] = {n: p.grad for n, p in model.named_parameters()}
    assert _rel(losses["always"], losses["never"]) < RTOL
    for name, g in grads["never"].items():
        assert _rel(grads["always"][name], g) < RTOL, name


def test_shifted_labels_give_the_loss_of_sliced_logits():
    torch.manual_seed(0)
    model = ComplexFormerLM(preset_config("micro", vocab_size=61, max_seq_len=16)).double()
    ids = torch.randint(0, 61, (2, 16))
    labels = ids.clone()
    labels[1, 3] = -100
    out = model(ids, labels=labels)
    logits = out.logits
    sliced = F.cross_entropy(logits[:, :-1].reshape(-1, 61), labels[:, 1:].reshape(-1))
    assert _rel(out.loss, sliced) < 1e-12


def test_auto_chunks_above_the_threshold_and_never_without_gradients(monkeypatch):
    from complexformer.models import lm

    model = ComplexFormerLM(preset_config("micro", vocab_size=50, max_seq_len=8))
    ids = torch.randint(0, 50, (2, 8))
    assert model(ids, labels=ids).logits is not None
    monkeypatch.setattr(lm, "CHUNKED_LOSS_ELEMENTS", 2 * 8 * 50)
    assert model(ids, labels=ids).logits is None
    with torch.no_grad():
        assert model(ids, labels=ids).logits is not None
    never = ComplexFormerLM(model.config.replace(chunked_loss="never"))
    assert never(ids, labels=ids).logits is not None
    with pytest.raises(ValueError, match="chunked_loss"):
        model.config.replace(chunked_loss="sometimes")
