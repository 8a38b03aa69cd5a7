"""Adding a positional scheme is one class plus its registration.

Three toy schemes are defined here and registered only for this module: one rotates every
pair of q and k by the same angle per position, one adds a recency bias to the scores, one
is RoPE at scaled positions (the worked example of docs/positional_schemes.md). The LM
trains with them, decodes with a KV cache, and the head analysis separates their terms;
their scores are checked against the literal formulas.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from complexformer.attention import (
    SCHEMES,
    KVCache,
    PositionalScheme,
    RotaryScheme,
    apply_rope,
    causal_mask,
    registered_scheme,
    rope_frequencies,
)
from complexformer.attention.schemes import PAIRS
from complexformer.models import ComplexFormerLM, GPTConfig
from complexformer_lab.evaluation.heads import (
    attention_probabilities,
    head_score_measures,
    score_variants,
)

V = 29
ANGLE = 0.3  # radians per position
SLOPE = 0.25  # bias per position of distance


class SameAngleRotation(PositionalScheme):
    """Toy: pair j of q and k at position p rotated by p * ANGLE, for every j."""

    name = "toy_rotation"
    description = "toy: one rotation angle per position"
    rotates = True

    def rotate(self, attn, q, k, offset):
        omega = torch.full((q.shape[-1] // 2,), ANGLE, dtype=torch.float64)  # (J,)
        return apply_rope(q, offset, omega, PAIRS), apply_rope(k, offset, omega, PAIRS)


class RecencyBias(PositionalScheme):
    """Toy: score bias -SLOPE * (m - n) for query m and key n, the same for every head."""

    name = "toy_recency"
    description = "toy: linear recency bias"
    biases = True

    def score_bias(self, attn, t_q, t_k, offset):
        m = torch.arange(offset, offset + t_q, dtype=torch.float32)[:, None]
        n = torch.arange(t_k, dtype=torch.float32)[None, :]
        return (-SLOPE * (m - n)).expand(attn.n_head, t_q, t_k)  # (H, Tq, Tk)


class HalfSpeedRope(RotaryScheme):
    """Toy from docs/positional_schemes.md: RoPE with positions scaled by 1/2 (position
    interpolation); only the positions change, the cache and the analysis follow."""

    name = "toy_half_rope"
    description = "toy: RoPE at half the position"

    def positions(self, attn, offset, t):
        return torch.arange(offset, offset + t, dtype=torch.float64) * 0.5


TOYS = ("toy_rotation", "toy_recency", "toy_half_rope")


@pytest.fixture(scope="module", autouse=True)
def toys():
    with (
        registered_scheme(SameAngleRotation()),
        registered_scheme(RecencyBias()),
        registered_scheme(HalfSpeedRope()),
    ):
        yield
    assert not set(TOYS) & set(SCHEMES)  # unregistered afterwards


def make(scheme: str, dtype=torch.float64, seed: int = 0) -> ComplexFormerLM:
    torch.manual_seed(seed)
    cfg = GPTConfig(
        vocab_size=V, n_layer=2, n_head=2, d_model=16, d_ff=32, max_seq_len=64, pos_scheme=scheme
    )
    return ComplexFormerLM(cfg).to(dtype).eval()


def literal_scores(scheme: str, q: torch.Tensor, k: torch.Tensor) -> dict[str, torch.Tensor]:
    """S, S_pos (semantic term removed), S_sem (positional term removed) from the formulas."""
    t, d = q.shape[-2], q.shape[-1]
    j = d // 2
    dist = (torch.arange(t)[:, None] - torch.arange(t)[None, :]).to(q.dtype)  # (T, T) m - n
    qk = q @ k.transpose(-1, -2) / math.sqrt(d)
    if scheme == "toy_recency":
        bias = (-SLOPE * dist).expand_as(qk)
        return {"full": qk + bias, "no_semantic": bias, "no_position": qk}
    # rotation by (m - n) * w_j: one angle for every pair, or RoPE's frequencies at p / 2
    w = torch.full((j,), ANGLE, dtype=q.dtype)
    if scheme == "toy_half_rope":
        w = 0.5 * rope_frequencies(d).to(q.dtype)
    lq = torch.hypot(q[..., :j], q[..., j:])  # pairs (x[j], x[j + J])
    lk = torch.hypot(k[..., :j], k[..., j:])
    tq = torch.atan2(q[..., j:], q[..., :j])
    tk = torch.atan2(k[..., j:], k[..., :j])
    mod = lq.unsqueeze(-2) * lk.unsqueeze(-3)  # (B, H, T, T, J)
    rel = dist[..., None] * w  # (T, T, J)
    full = (mod * torch.cos(tq.unsqueeze(-2) - tk.unsqueeze(-3) + rel)).sum(-1) / math.sqrt(d)
    no_sem = (mod * torch.cos(rel)).sum(-1) / math.sqrt(d)
    return {"full": full, "no_semantic": no_sem, "no_position": qk}


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
def test_head_analysis_separates_the_toy_terms(scheme):
    model = make(scheme)
    attn = model.blocks[0].attn
    assert model.scheme.score_terms == (
        ("semantic", "bias") if scheme == "toy_recency" else ("semantic", "positional")
    )
    torch.manual_seed(1)
    q, k = torch.randn(2, 2, 2, 9, 8, dtype=torch.float64).unbind(0)
    got, want = score_variants(attn, q, k), literal_scores(scheme, q, k)
    for key in want:
        assert_close(got[key], want[key], msg=key)
    x = torch.randint(0, V, (3, 16))
    meas = head_score_measures(model, x)
    for row in meas["semantic_share"]:
        assert all(v is not None and 0.0 <= v <= 1.0 for v in row), meas["semantic_share"]


@pytest.mark.parametrize("scheme", TOYS)
def test_attention_probabilities_are_the_literal_ones(scheme):
    model = make(scheme)
    x = torch.randint(0, V, (1, 12))
    probs = attention_probabilities(model, x, layers=[0])[0]
    h = model.blocks[0].ln1(model.wte(x))  # layer 0's input (pre-norm, no absolute positions)
    q, k, _ = model.blocks[0].attn.project_qkv(h)
    s = literal_scores(scheme, q, k)["full"]
    mask = causal_mask(12, 12)
    assert_close(probs, torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1))
