"""Checkpoint and seed compatibility of the positional schemes as objects.

The schemes used to be names tested in if-chains of the attention module and the LM. These
tests write that former code path out (the kernels it called, in its order) and check that
the scheme objects give bitwise the same initial parameters, logits, losses and gradients,
and the same parameter and buffer names (so saved models load unchanged).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

from complexformer.attention import (
    alibi_bias,
    alibi_slopes,
    apply_rope,
    attention,
    polar_components,
    polar_from_components,
    polar_rotate,
    rope_frequencies,
)
from complexformer.losses.pcl import pcl_loss
from complexformer.models import ComplexFormerLM, GPTConfig

V = 61
BUILTIN = ("cmha", "cmha_shared", "cmha_fixed", "rope", "learned", "sinusoidal", "alibi", "nope")
POLAR = {"cmha": "head", "cmha_shared": "shared", "cmha_fixed": "fixed"}
CASES = [(s, False) for s in BUILTIN] + [(s, True) for s in POLAR]


def config(scheme: str, pcl: bool = False, **kw) -> GPTConfig:
    base = dict(vocab_size=V, n_layer=2, n_head=2, d_model=16, d_ff=32, max_seq_len=64)
    if pcl:  # the former code path: PCL on the rotated phases, summed over layers
        base.update(pcl_target="rotated", pcl_reduce="sum")
    return GPTConfig(**{**base, "pos_scheme": scheme, "pcl": pcl, **kw})


def former_init(cfg: GPTConfig) -> dict[str, torch.Tensor]:
    """The parameters the former constructor drew after ``torch.manual_seed(0)``, in its
    order: modules created (each Linear's default init draws), δ ~ N(0, σ²) right after a
    layer's projections, then every Linear/Embedding re-drawn N(0, init_std²) in module
    order, then the residual projections with std init_std / sqrt(2 L)."""
    torch.manual_seed(0)
    c, h, d = cfg.d_model, cfg.n_head, cfg.head_dim
    wte = nn.Embedding(cfg.vocab_size, c)
    wpe = nn.Embedding(cfg.max_seq_len, c) if cfg.pos_scheme == "learned" else None
    layers = []
    for _ in range(cfg.n_layer):
        qkv, proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        adapt = POLAR.get(cfg.pos_scheme)
        delta = None
        if adapt in ("head", "shared"):
            delta = torch.randn((h, d // 2) if adapt == "head" else (d // 2,)) * cfg.delta_init_std
        layers.append((qkv, proj, delta, nn.Linear(c, cfg.d_ff), nn.Linear(cfg.d_ff, c)))
    lm_head = nn.Linear(c, cfg.vocab_size, bias=False)
    with torch.no_grad():
        for emb in (wte, wpe):
            if emb is not None:
                emb.weight.normal_(0.0, cfg.init_std)
        for qkv, proj, _, fc, mproj in layers:
            for lin in (qkv, proj, fc, mproj):
                lin.weight.normal_(0.0, cfg.init_std)
                lin.bias.zero_()
        lm_head.weight.normal_(0.0, cfg.init_std)
        for _, proj, _, _, mproj in layers:
            for lin in (proj, mproj):
                lin.weight.normal_(0.0, cfg.init_std / math.sqrt(2 * cfg.n_layer))
    out = {"wte.weight": wte.weight}
    if wpe is not None:
        out["wpe.weight"] = wpe.weight
    for i, (qkv, proj, delta, fc, mproj) in enumerate(layers):
        p = f"blocks.{i}."
        out |= {p + "attn.qkv.weight": qkv.weight, p + "attn.qkv.bias": qkv.bias}
        out |= {p + "attn.proj.weight": proj.weight, p + "attn.proj.bias": proj.bias}
        if delta is not None:
            out |= {p + "attn.adapt_delta": delta, p + "attn.adapt_bias": torch.zeros_like(delta)}
        out |= {p + "mlp.fc.weight": fc.weight, p + "mlp.fc.bias": fc.bias}
        out |= {p + "mlp.proj.weight": mproj.weight, p + "mlp.proj.bias": mproj.bias}
    return {k: v.detach() for k, v in out.items()}


def former_sinusoidal(positions: torch.Tensor, dim: int) -> torch.Tensor:
    i = torch.arange(0, dim, 2, dtype=torch.float32)
    ang = positions.float().unsqueeze(-1) / (10000.0 ** (i / dim))
    return torch.stack((torch.sin(ang), torch.cos(ang)), dim=-1).flatten(-2)[..., :dim]


def former_forward(model: ComplexFormerLM, ids: torch.Tensor, labels: torch.Tensor):
    """The former forward pass, scheme names tested inline; returns (loss, logits)."""
    cfg = model.config
    name, adapt = cfg.pos_scheme, POLAR.get(cfg.pos_scheme)
    t, h, d = ids.shape[1], cfg.n_head, cfg.head_dim
    omega = rope_frequencies(d, cfg.rope_base, cfg.omega_schedule)
    x = model.wte(ids)
    if name == "sinusoidal":
        x = x * math.sqrt(cfg.d_model)
    if name in ("learned", "sinusoidal"):
        pos = torch.arange(t)
        pe = model.wpe(pos) if name == "learned" else former_sinusoidal(pos, cfg.d_model)
        x = x + pe.to(x.dtype)
    pcl_total = None
    for block in model.blocks:
        attn = block.attn
        a_in = block.ln1(x)
        qkv = attn.qkv(a_in).view(*a_in.shape[:2], 3, h, d)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, H, T, D)
        if adapt == "fixed":
            delta, bias = torch.ones(d // 2), torch.zeros(d // 2)
        elif adapt is not None:
            delta, bias = attn.adapt_delta, attn.adapt_bias
        phases = None
        if adapt is not None and cfg.pcl:
            lq, pq = polar_components(q, delta, bias, 0, omega, "halves")
            lk, pk = polar_components(k, delta, None, 0, omega, "halves")
            q, k = (
                polar_from_components(lq, pq, q.dtype, "halves"),
                polar_from_components(lk, pk, k.dtype, "halves"),
            )
            phases = (pq, pk)
        elif adapt is not None:
            q = polar_rotate(q, delta, bias, 0, omega, "halves")
            k = polar_rotate(k, delta, None, 0, omega, "halves")
        elif name == "rope":
            q, k = apply_rope(q, 0, omega, "halves"), apply_rope(k, 0, omega, "halves")
        sbias = alibi_bias(alibi_slopes(h), t, t, 0) if name == "alibi" else None
        y = attention(q, k, v, is_causal=True, q_offset=0, bias=sbias)
        x = x + attn.proj(y.transpose(1, 2).reshape(a_in.shape))
        x = x + block.mlp(block.ln2(x))
        if phases is not None:
            w = attn.pcl_weight
            lq = pcl_loss(phases[0], w[0], cfg.pcl_tau, cfg.pcl_dropout, training=True)
            lk = pcl_loss(phases[1], w[1], cfg.pcl_tau, cfg.pcl_dropout, training=True)
            pcl_total = lq + lk if pcl_total is None else pcl_total + lq + lk
    logits = model.lm_head(model.ln_f(x))
    # the loss as the model takes it: labels shifted, the last position ignored (the sliced
    # logits of earlier versions give the same value up to float rounding of the mean)
    targets = F.pad(labels[:, 1:], (0, 1), value=-100)
    loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
    if pcl_total is not None:
        loss = loss + cfg.pcl_epsilon * pcl_total
    return loss, logits


@pytest.mark.parametrize("scheme, pcl", CASES)
def test_seeded_initialisation_is_the_former_one(scheme, pcl):
    cfg = config(scheme, pcl)
    expected = former_init(cfg)
    torch.manual_seed(0)
    model = ComplexFormerLM(cfg)
    got = dict(model.named_parameters())
    for name, value in expected.items():
        assert_close(got[name].detach(), value, atol=0, rtol=0, msg=name)


@pytest.mark.parametrize("scheme, pcl", CASES)
def test_loss_and_gradients_bitwise_equal_to_former_code_path(scheme, pcl):
    torch.manual_seed(0)
    model = ComplexFormerLM(config(scheme, pcl)).train()
    with torch.no_grad():  # non-trivial adaptation: b != 0, δ far from its init
        for name, p in model.named_parameters():
            if name.endswith(("adapt_delta", "adapt_bias")):
                p.normal_(0.0, 0.7)
    ids = torch.randint(0, V, (2, 20))
    torch.manual_seed(1)
    out = model(ids, labels=ids)
    out.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    torch.manual_seed(1)
    loss, logits = former_forward(model, ids, ids)
    loss.backward()
    assert_close(out.logits, logits, atol=0, rtol=0)
    assert_close(out.loss, loss, atol=0, rtol=0)
    for n, p in model.named_parameters():
        assert_close(grads[n], p.grad, atol=0, rtol=0, msg=n)


def test_state_dict_and_buffer_names():
    def names(scheme, pcl=False):
        m = ComplexFormerLM(config(scheme, pcl))
        keys = {k.removeprefix("blocks.0.") for k in m.state_dict() if not k.startswith("blocks.1")}
        bufs = {k.removeprefix("blocks.0.") for k, _ in m.named_buffers() if "blocks.1" not in k}
        return keys, bufs

    common = {
        "wte.weight", "lm_head.weight", "ln_f.weight", "ln_f.bias",
        "ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias",
        "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
        "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight", "mlp.proj.bias",
    }  # fmt: skip
    adapt = {"attn.adapt_delta", "attn.adapt_bias"}
    expect = {
        "cmha": (common | adapt, {"attn.omega"}),
        "cmha_shared": (common | adapt, {"attn.omega"}),
        "cmha_fixed": (common, {"attn.omega"} | adapt),  # frozen, not saved
        "rope": (common, {"attn.omega"}),
        "learned": (common | {"wpe.weight"}, set()),
        "sinusoidal": (common, set()),
        "alibi": (common, {"attn.slopes"}),
        "nope": (common, set()),
    }
    for scheme, want in expect.items():
        assert names(scheme) == want, scheme
    keys, _ = names("cmha", pcl=True)
    assert keys == common | adapt | {"attn.pcl_weight"}
