"""Adding a positional scheme is one class plus its registration.

The three toy schemes of :mod:`tests.attention.toy_schemes_testlib` are registered only for
this module: the LM trains with them, decodes with a KV cache, and each scheme's score
variants (what the head analysis separates) are checked against the literal formulas.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from complexformer.attention import SCHEMES, KVCache
from tests.attention.toy_schemes_testlib import TOYS, V, literal_scores, make, registered_toys


@pytest.fixture(scope="module", autouse=True)
def toys():
    with registered_toys():
        yield
    assert not set(TOYS) & set(SCHEMES)  # unregistered afterwards


@pytest.mark.parametrize("scheme", TOYS)
def test_training_forward_backward(scheme):
    torch.manual_seed(0)
    model = make(scheme, dtype=torch.float32).train()
    x = torch.randint(0, V, (4, 24))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(100):
        out = model(x, labels=x)
        opt.zero_grad()
        out.loss.backward()
        for name, p in model.named_parameters():
            assert torch.isfinite(p.grad).all(), name
        opt.step()
        losses.append(out.loss.item())
    assert losses[0] > math.log(V) - 0.5 and losses[-1] < 0.25 * losses[0], losses[::10]


@pytest.mark.parametrize("scheme", TOYS)
def test_kv_cache_equals_full_recompute(scheme):
    model = make(scheme)
    x = torch.randint(0, V, (2, 20))
    full = model(x).logits
    cache = KVCache(model.config.n_layer)
    steps = [model(x[:, :4], cache=cache).logits]
    for t in range(4, 20):
        steps.append(model(x[:, t : t + 1], cache=cache).logits)
    assert_close(torch.cat(steps, dim=1), full, atol=1e-10, rtol=0)
    prompt = x[:, :3]
    a = model.generate(prompt, 10, temperature=0.0, use_cache=True)
    b = model.generate(prompt, 10, temperature=0.0, use_cache=False)
    assert torch.equal(a, b)


def test_positions_matter():
    """The toys change the model: without them the logits differ (NoPE with equal weights)."""
    for scheme in TOYS:
        model, nope = make(scheme), make("nope")
        x = torch.randint(0, V, (1, 12))
        assert not torch.allclose(model(x).logits, nope(x).logits)


@pytest.mark.parametrize("scheme", TOYS)
def test_score_variants_separate_the_toy_terms(scheme):
    model = make(scheme)
    attn = model.blocks[0].attn
    assert model.scheme.score_terms == (
        ("semantic", "bias") if scheme == "toy_recency" else ("semantic", "positional")
    )
    torch.manual_seed(1)
    q, k = torch.randn(2, 2, 2, 9, 8, dtype=torch.float64).unbind(0)
    got, want = model.scheme.score_variants(attn, q, k), literal_scores(scheme, q, k)
    for key in want:
        assert_close(got[key], want[key], msg=key)
