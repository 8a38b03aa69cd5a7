"""PCL on the semantic phases θ (Shao et al. 2025, §3.2) versus the rotated phases, the
reduction over layers, and δ initialised at RoPE."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from complexformer.attention import KVCache
from complexformer.losses.pcl import phase_contrastive_loss
from complexformer.models import ComplexFormerLM, GPTConfig
from complexformer.models import lm as lm_module

V, T = 37, 12


def cfg(**kw) -> GPTConfig:
    base = dict(vocab_size=V, n_layer=1, n_head=2, d_model=16, d_ff=32, max_seq_len=64, pcl=True)
    return GPTConfig(**{**base, **kw})


def pcl_of(model: ComplexFormerLM, ids: torch.Tensor, cache: KVCache | None = None):
    torch.manual_seed(123)  # the same dropout view for every call
    out = model(ids, cache=cache)
    return out.pcl_loss


def fresh(**kw) -> ComplexFormerLM:
    torch.manual_seed(0)
    return ComplexFormerLM(cfg(**kw)).double().train()


def prefilled_cache(model: ComplexFormerLM, n: int) -> KVCache:
    cache = KVCache(model.config.n_layer)
    with torch.no_grad():
        model(torch.randint(0, V, (2, n)), cache=cache)
    return cache


@pytest.mark.parametrize("target, invariant", [("theta", True), ("rotated", False)])
def test_theta_target_is_invariant_to_positions_and_adaptation(target, invariant):
    model = fresh(pcl_target=target)
    ids = torch.randint(0, V, (2, T))
    base = pcl_of(model, ids)
    shifted = pcl_of(model, ids, prefilled_cache(model, 7))  # positions 7 .. 7 + T - 1
    attn = model.blocks[0].attn
    with torch.no_grad():
        attn.adapt_delta.normal_(0.0, 1.0)
        attn.adapt_bias.normal_(0.0, 1.0)
    adapted = pcl_of(model, ids)
    if invariant:
        assert_close(shifted, base)
        assert_close(adapted, base)
    else:
        assert (shifted - base).abs() > 1e-3
        assert (adapted - base).abs() > 1e-3


def semantic_phases(model: ComplexFormerLM, ids: torch.Tensor):
    """θ = atan2 of every (j, j + J) pair of the first layer's queries and keys."""
    block = model.blocks[0]
    x = block.ln1(model.wte(ids))
    q, k, _ = block.attn.project_qkv(x)
    j = q.shape[-1] // 2
    return tuple(torch.atan2(z[..., j:], z[..., :j]).detach() for z in (q, k))


@pytest.mark.parametrize("p", [0.3, 0.5])
def test_identical_tokens_give_the_closed_form_minimum(p, monkeypatch):
    model = fresh(pcl_target="theta", pcl_dropout=p, pcl_reduce="mean")
    ids = torch.full((1, T), 5)
    seen = []

    def recording_pcl(phase, weight, tau, p, mask=None, training=True):
        view = F.dropout(phase, p, training)  # the view pcl_loss draws, recorded
        seen.append((phase.detach(), view.detach()))
        return phase_contrastive_loss(phase, view, weight, tau, mask)

    monkeypatch.setattr(lm_module, "pcl_loss", recording_pcl)
    got = pcl_of(model, ids)
    th_q, th_k = semantic_phases(model, ids)
    (ph_q, view_q), (ph_k, view_k) = seen  # queries first, then keys
    assert_close(ph_q, th_q, rtol=0, atol=0)
    assert_close(ph_k, th_k, rtol=0, atol=0)
    w = model.blocks[0].attn.pcl_weight.detach()
    tau = model.config.pcl_tau
    # Every anchor is the same phase vector θ, so sim(i, j) = s_j for every i and the loss is
    # log Σ_j exp(s_j / τ) − mean_j s_j / τ (≥ log T, by Jensen): the smallest value InfoNCE
    # can take when the anchors cannot be told apart, given the view.
    sides = []
    for th, view, wc in ((th_q, view_q, w[0]), (th_k, view_k, w[1])):
        heads = []
        for h in range(th.shape[1]):
            s = [
                sum(
                    float(wc[c]) * math.cos(th[0, h, 0, c] - view[0, h, j, c])
                    for c in range(len(wc))
                )
                for j in range(T)
            ]
            heads.append(math.log(sum(math.exp(x / tau) for x in s)) - sum(s) / (T * tau))
        sides.append(sum(heads) / len(heads))
    assert_close(got.item(), sum(sides) / 2, rtol=1e-9, atol=1e-9)
    if p == 0.5:
        # cos(θ − 2θ) = cos(θ − 0): every similarity is Σ_c w_c cos θ_c, the loss is log T.
        assert_close(got.item(), math.log(T), rtol=1e-9, atol=1e-9)
        rotated = pcl_of(fresh(pcl_target="rotated", pcl_dropout=p), ids)
        assert rotated.item() > math.log(T) + 1.0


def test_rotated_view_as_the_former_code_path_computes_it():
    model = fresh(pcl_target="rotated", pcl_reduce="sum", n_layer=2)
    ids = torch.randint(0, V, (2, T))
    summed = pcl_of(model, ids)
    mean = pcl_of(fresh(pcl_target="rotated", pcl_reduce="mean", n_layer=2), ids)
    assert_close(mean, summed / 4)


def test_mean_reduction_and_loss_on_the_added_scale():
    model = fresh(n_layer=3)
    ids = torch.randint(0, V, (2, T))
    torch.manual_seed(5)
    out = model(ids, labels=ids)
    assert_close(out.loss, out.lm_loss + model.config.pcl_epsilon * out.pcl_loss)
    summed = ComplexFormerLM(model.config.replace(pcl_reduce="sum")).double().train()
    summed.load_state_dict(model.state_dict())
    assert_close(pcl_of(summed, ids), pcl_of(model, ids) * 6)


def test_theta_target_trains_the_projection_and_delta():
    model = fresh()
    ids = torch.randint(0, V, (2, T))
    out = model(ids, labels=ids)
    out.loss.backward()
    attn = model.blocks[0].attn
    assert attn.pcl_weight.grad.abs().sum() > 0
    assert attn.adapt_delta.grad.abs().sum() > 0
    assert attn.qkv.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("bad", [dict(pcl_target="phase"), dict(pcl_reduce="max"),
                                 dict(delta_init="one")])  # fmt: skip
def test_bad_values_are_refused(bad):
    key, value = next(iter(bad.items()))
    with pytest.raises(ValueError, match=rf"{key} must be one of .*'{value}'"):
        cfg(**bad)


def test_delta_init_rope_with_zero_std_is_rope():
    torch.manual_seed(0)
    cmha = ComplexFormerLM(cfg(pcl=False, n_layer=2, delta_init="rope", delta_init_std=0.0))
    rope = ComplexFormerLM(cfg(pcl=False, n_layer=2, pos_scheme="rope"))
    missing, unexpected = rope.load_state_dict(cmha.state_dict(), strict=False)
    assert not missing and all(k.endswith(("adapt_delta", "adapt_bias")) for k in unexpected)
    for name, p in cmha.named_parameters():
        if name.endswith("adapt_delta"):
            assert_close(p, torch.ones_like(p), rtol=0, atol=0)
    ids = torch.randint(0, V, (2, T))
    cmha, rope = cmha.double().eval(), rope.double().eval()
    assert_close(cmha(ids).logits, rope(ids).logits)


def test_delta_init_rope_draws_around_one():
    torch.manual_seed(0)
    paper = ComplexFormerLM(cfg(pcl=False, delta_init_std=0.1)).blocks[0].attn.adapt_delta
    torch.manual_seed(0)
    ropeinit = ComplexFormerLM(cfg(pcl=False, delta_init="rope", delta_init_std=0.1))
    assert_close(ropeinit.blocks[0].attn.adapt_delta, paper + 1.0)


def literal_infonce(phase, view, w, tau):
    """-log softmax_j(Σ_c w_c cos(φ_i,c − φ'_j,c) / τ)_i, mean over (B, H, i), from the
    (T, T, J) differences (not the cos/sin factorisation of the library)."""
    diff = phase[..., :, None, :] - view[..., None, :, :]  # (B, H, T, T, J)
    sim = (w * torch.cos(diff)).sum(-1) / tau  # (B, H, T, T)
    nll = torch.logsumexp(sim, -1) - torch.diagonal(sim, dim1=-2, dim2=-1)
    return nll.mean()


@pytest.mark.parametrize("target", ["theta", "rotated"])
def test_pcl_in_the_model_uses_a_dropout_view_of_the_returned_phases(target):
    """pcl_loss = mean over layers and q/k of InfoNCE(φ, dropout(φ)), rebuilt literally from the
    phases the blocks return and the dropout view drawn from the RNG state at that point."""
    model = fresh(pcl_target=target, n_layer=2, pcl_dropout=0.4)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("adapt_delta", "adapt_bias", "pcl_weight")):
                p.normal_(1.0, 0.5)  # non-trivial δ, b and channel weights
    ids = torch.randint(0, V, (2, T))
    seen = []

    layer_loss = model.phase_loss  # called inside each attention layer's forward

    def record(phases, weight):
        seen.append((phases, torch.get_rng_state()))  # (phases, RNG before pcl_loss)
        return layer_loss(phases, weight)

    model.phase_loss = record
    got = pcl_of(model, ids)
    del model.phase_loss
    p, tau = model.config.pcl_dropout, model.config.pcl_tau
    terms, same_view = [], []
    for blk, ((ph_q, ph_k), state) in zip(model.blocks, seen, strict=True):
        torch.set_rng_state(state)
        view_q = F.dropout(ph_q, p, True)  # queries first, then keys
        view_k = F.dropout(ph_k, p, True)
        for ph, view in ((ph_q, view_q), (ph_k, view_k)):
            dropped = view == 0
            assert 0.2 < dropped.float().mean() < 0.6  # a real second view
            assert_close(view[~dropped], ph[~dropped] / (1 - p))
        w = blk.attn.pcl_weight
        terms += [
            literal_infonce(ph_q, view_q, w[0], tau),
            literal_infonce(ph_k, view_k, w[1], tau),
        ]
        same_view += [
            literal_infonce(ph_q, ph_q, w[0], tau),
            literal_infonce(ph_k, ph_k, w[1], tau),
        ]
    assert_close(got, sum(terms) / len(terms), rtol=1e-10, atol=1e-10)
    assert (got - sum(same_view) / len(same_view)).abs() > 1.0  # identical views: another value
