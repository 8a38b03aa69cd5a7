"""to_cmha on small random Llama, Mistral and Qwen2 models: exact at conversion, the paper's
score after perturbing δ and b, relative-position invariance, cache == recompute."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from complexformer.retrofit import cmha_modules, set_trainable, to_cmha
from tests.retrofit.retrofit_testlib import FAMILIES, tiny_model

pytest.importorskip("transformers")

IDS = torch.randint(0, 320, (2, 24), generator=torch.Generator().manual_seed(1))


def _perturb(model, seed: int = 0, scale: float = 0.5) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, attn in cmha_modules(model):
            attn.cmha_delta.add_(scale * torch.randn(attn.cmha_delta.shape, generator=g))
            attn.cmha_bias.add_(scale * torch.randn(attn.cmha_bias.shape, generator=g))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("kv_heads", [2, 4])
@pytest.mark.parametrize("gqa", ["group", "query"])
def test_converted_logits_equal_the_original(family, attn, kv_heads, gqa):
    model = tiny_model(family, kv_heads, attn=attn)
    with torch.no_grad():
        ref = model(IDS).logits
        ref_prefix = model(IDS[:, :10]).logits
    to_cmha(model, gqa=gqa)
    with torch.no_grad():
        assert_close(model(IDS).logits, ref, atol=1e-5, rtol=0)
        # KV cache at a position offset (continued generation) equals the original's recompute
        first = model(IDS[:, :10], use_cache=True)
        second = model(IDS[:, 10:], past_key_values=first.past_key_values, use_cache=True)
    assert_close(first.logits, ref_prefix, atol=1e-5, rtol=0)
    assert_close(second.logits, ref[:, 10:], atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_generate_returns_the_same_tokens(family):
    model = tiny_model(family, 2)
    prompt = IDS[:1, :6]
    kw = dict(max_new_tokens=12, do_sample=False, attention_mask=torch.ones_like(prompt))
    ref = model.generate(prompt, **kw)
    to_cmha(model)
    assert torch.equal(model.generate(prompt, **kw), ref)
    assert torch.equal(model.generate(prompt, use_cache=False, **kw), ref)


def _paper_attention(model, layer: int, ids: torch.Tensor, delta=None, bias=None) -> torch.Tensor:
    """softmax of eq. 8 written naively from the layer's own projections: (B, H, T, T).

    ``delta`` and ``bias`` default to the layer's parameters (pass float64 leaves to
    differentiate the reference)."""
    inner = model.model
    attn = inner.layers[layer].self_attn
    with torch.no_grad():
        hidden = model(ids, output_hidden_states=True).hidden_states[layer]
        x = inner.layers[layer].input_layernorm(hidden)
        q = F.linear(x, attn.q_proj.weight, attn.q_proj.bias)  # no hooks: the raw projections
        k = F.linear(x, attn.k_proj.weight, attn.k_proj.bias)
    b, t, _ = x.shape
    d = attn.head_dim
    h, kv = q.shape[-1] // d, k.shape[-1] // d
    j = d // 2
    q = q.view(b, t, h, d).double()
    k = k.view(b, t, kv, d).double().repeat_interleave(h // kv, dim=2)  # (B, T, H, D)
    lq, tq = torch.hypot(q[..., :j], q[..., j:]), torch.atan2(q[..., j:], q[..., :j])
    lk, tk = torch.hypot(k[..., :j], k[..., j:]), torch.atan2(k[..., j:], k[..., :j])
    omega = inner.rotary_emb.inv_freq.double()  # (J,)
    delta = attn.cmha_delta.detach().double() if delta is None else delta
    bias = attn.cmha_bias.detach().double() if bias is None else bias
    shape = attn._cmha_shape
    if delta.dim() == 1:
        delta, bias = delta.expand(h, j), bias.expand(h, j)
    elif shape["gqa"] == "group":
        delta = delta.repeat_interleave(h // kv, dim=0)
    rows = []
    for hh in range(h):
        for m in range(t):
            for n in range(t):
                a_s = tq[:, m, hh] - tk[:, n, hh]  # (B, J), eq. 5
                phase = delta[hh] * a_s + bias[hh] + (m - n) * omega  # eq. 6-7
                rows.append((lq[:, m, hh] * lk[:, n, hh] * torch.cos(phase)).sum(-1))  # eq. 8
    scores = torch.stack(rows, -1).view(b, h, t, t) / math.sqrt(d)
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    return scores.masked_fill(~mask, float("-inf")).softmax(-1)


@pytest.mark.parametrize(
    "family,kv_heads,scheme,gqa",
    [
        ("llama", 2, "cmha", "group"),
        ("llama", 2, "cmha", "query"),
        ("qwen2", 4, "cmha", "group"),
        ("mistral", 2, "cmha_shared", "group"),
    ],
)
def test_perturbed_scores_follow_eq8(family, kv_heads, scheme, gqa):
    model = tiny_model(family, kv_heads, attn="eager")
    to_cmha(model, scheme=scheme, gqa=gqa)
    _perturb(model, seed=3)
    ids = IDS[:, :9]
    with torch.no_grad():
        got = model(ids, output_attentions=True).attentions
    for layer in range(len(got)):
        assert_close(got[layer].double(), _paper_attention(model, layer, ids), atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("gqa", ["group", "query"])
def test_perturbed_model_is_relative_position_invariant(family, gqa):
    model = tiny_model(family, 2)
    to_cmha(model, gqa=gqa)
    _perturb(model, seed=5)
    pos = torch.arange(IDS.shape[1]).expand(IDS.shape[0], -1)
    with torch.no_grad():
        base = model(IDS, position_ids=pos).logits
        shifted = model(IDS, position_ids=pos + 37).logits
        plain = tiny_model(family, 2)
        plain_logits = plain(IDS).logits
    assert_close(shifted, base, atol=2e-5, rtol=0)
    assert (base - plain_logits).abs().max() > 1e-3  # the perturbation did change the model


def test_perturbed_cache_equals_recompute():
    model = tiny_model("llama", 2)
    to_cmha(model)
    _perturb(model, seed=7)
    with torch.no_grad():
        full = model(IDS).logits
        first = model(IDS[:, :15], use_cache=True)
        rest = model(IDS[:, 15:], past_key_values=first.past_key_values).logits
    assert_close(rest, full[:, 15:], atol=1e-5, rtol=0)


def test_bf16_model_is_exact_at_conversion():
    model = tiny_model("llama", 2).to(torch.bfloat16)
    with torch.no_grad():
        ref = model(IDS).logits.float()
    to_cmha(model)
    assert model.model.layers[0].self_attn.cmha_delta.dtype == torch.float32
    with torch.no_grad():
        out = model(IDS).logits
    assert out.dtype == torch.bfloat16
    assert_close(out.float(), ref, atol=1e-2, rtol=0)


def test_trainable_defaults_and_parameter_counts():
    model = tiny_model("llama", 2)
    to_cmha(model)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert names and all(n.endswith(("self_attn.cmha_delta", "self_attn.cmha_bias")) for n in names)
    # group: δ per KV head (2 x 8), b per query head (4 x 8), per layer
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == 2 * (2 * 8 + 4 * 8)
    norms = set_trainable(model, "norms")
    assert len(norms) == 2 and all(n.endswith("input_layernorm.weight") for n in norms)
    both = set_trainable(model, "adaptation+norms")
    assert set(both) == set(names) | set(norms)
    query = to_cmha(tiny_model("llama", 2), gqa="query")
    assert query.model.layers[0].self_attn.cmha_delta.shape == (4, 8)
    shared = to_cmha(tiny_model("llama", 2), scheme="cmha_shared")
    assert shared.model.layers[0].self_attn.cmha_delta.shape == (8,)
    assert to_cmha(tiny_model("llama", 2), trainable=None).model.embed_tokens.weight.requires_grad


def test_query_mode_grows_the_cache_by_the_group_size():
    group = to_cmha(tiny_model("llama", 2), gqa="group")
    query = to_cmha(tiny_model("llama", 2), gqa="query")
    with torch.no_grad():
        kg = group(IDS, use_cache=True).past_key_values.layers[0].keys
        kq = query(IDS, use_cache=True).past_key_values.layers[0].keys
    assert kg.shape[1] == 2 and kq.shape[1] == 4


def test_gradients_reach_delta_and_bias_and_are_finite_at_zero_pairs():
    model = tiny_model("llama", 2)
    to_cmha(model)
    _perturb(model, seed=1, scale=0.1)
    attn = model.model.layers[0].self_attn
    with torch.no_grad():  # zero query and key projections of layer 0: λ = 0 pairs everywhere
        attn.q_proj.weight.zero_()
        attn.k_proj.weight.zero_()
    out = model(IDS, labels=IDS)
    out.loss.backward()
    for _, a in cmha_modules(model):
        assert torch.isfinite(a.cmha_delta.grad).all() and torch.isfinite(a.cmha_bias.grad).all()
    layer1 = model.model.layers[1].self_attn
    assert layer1.cmha_delta.grad.abs().sum() > 0 and layer1.cmha_bias.grad.abs().sum() > 0
    assert torch.isfinite(out.logits).all()


@pytest.mark.parametrize("gqa", ["group", "query"])
def test_delta_and_bias_gradients_match_the_paper_formula(gqa):
    model = tiny_model("llama", 2, attn="eager")
    to_cmha(model, gqa=gqa)
    _perturb(model, seed=4, scale=0.3)
    attn = model.model.layers[0].self_attn
    ids = IDS[:1, :8]
    weights = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(0))
    (model(ids, output_attentions=True).attentions[0] * weights).sum().backward()
    delta = attn.cmha_delta.detach().double().requires_grad_()
    bias = attn.cmha_bias.detach().double().requires_grad_()
    ref = _paper_attention(model, 0, ids, delta, bias)
    (ref * weights.double()).sum().backward()
    assert delta.grad.abs().max() > 1e-4 and bias.grad.abs().max() > 1e-4
    assert_close(attn.cmha_delta.grad.double(), delta.grad, atol=1e-5, rtol=1e-4)
    assert_close(attn.cmha_bias.grad.double(), bias.grad, atol=1e-5, rtol=1e-4)


def test_unsupported_models_and_options_are_refused():
    import transformers

    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2))
    with pytest.raises(ValueError, match="GPT2LMHeadModel.*LlamaAttention"):
        to_cmha(gpt2)
    with pytest.raises(ValueError, match="unknown retrofit scheme 'rope'.*cmha, cmha_shared"):
        to_cmha(tiny_model("llama"), scheme="rope")
    with pytest.raises(ValueError, match="unknown gqa mode 'kv'"):
        to_cmha(tiny_model("llama"), gqa="kv")
    with pytest.raises(ValueError, match="unknown trainable='some'"):
        to_cmha(tiny_model("llama"), trainable="some")
    model = to_cmha(tiny_model("llama"))
    with pytest.raises(ValueError, match="converted already"):
        to_cmha(model)
    odd = tiny_model("llama")
    odd.config.rope_parameters = {"rope_type": "mrope", "rope_theta": 10000.0}
    with pytest.raises(ValueError, match="RoPE type 'mrope'.*not handled"):
        to_cmha(odd)
    partial = tiny_model("llama")
    partial.config.partial_rotary_factor = 0.5
    with pytest.raises(ValueError, match="partial_rotary_factor=0.5"):
        to_cmha(partial)


def test_llama3_scaled_frequencies_are_exact():
    rope = {
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    }
    model = tiny_model("llama", 2, rope_parameters=rope)
    with torch.no_grad():
        ref = model(IDS).logits
    to_cmha(model)
    with torch.no_grad():
        assert_close(model(IDS).logits, ref, atol=1e-5, rtol=0)
