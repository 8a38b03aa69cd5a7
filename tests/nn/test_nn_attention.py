"""Complex MultiheadAttention: score formulas, masks, KV cache, cross-attention, shapes."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch.testing import assert_close

import complexformer.nn as cnn
from complexformer.nn import functional as CF

SCORES = ("real", "modulus", "split", "phase")


def _crandn(*shape, dtype=torch.complex128, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=g)


def _explicit(q, k, v, score, allowed=None):
    """Independent reference: weights from S = Q K^H / sqrt(d), then weights @ V."""
    s = q @ k.conj().transpose(-2, -1) / math.sqrt(q.shape[-1])
    ninf = float("-inf")

    def sm(z):
        if allowed is not None:
            z = z.masked_fill(~allowed, ninf)
        return torch.softmax(z, -1)

    if score == "real":
        w = sm(s.real)
    elif score == "modulus":
        w = sm(s.abs())
    elif score == "split":
        w = torch.complex(sm(s.real), sm(s.imag))
    else:
        w = sm(s.abs()) * s / s.abs()
    return w.to(v.dtype) @ v, w


def _mha(score="real", rotary=None, seed=0, **kw):
    torch.manual_seed(seed)
    return (
        cnn.MultiheadAttention(2, 8, 4, 3, dropout=0.0, rotary=rotary, score=score, **kw)
        .double()
        .eval()
    )


@pytest.mark.parametrize("score", SCORES)
def test_nn_sdpa_scores_equal_explicit_formulas(score):
    q, k, v = _crandn(2, 3, 5, 4, seed=1), _crandn(2, 3, 6, 4, seed=2), _crandn(2, 3, 6, 3, seed=3)
    ref, w_ref = _explicit(q, k, v, score)
    out, w = CF.scaled_dot_product_attention(q, k, v, score=score, need_weights=True)
    assert_close(out, ref)
    assert_close(w, w_ref)
    out2, none = CF.scaled_dot_product_attention(q, k, v, score=score)
    assert none is None
    assert_close(out2, ref)


def test_nn_real_score_fused_path_is_one_exact_real_sdpa():
    # softmax(Re(Q K^H)/sqrt(d)) V via the fused kernel == the explicit complex formula,
    # also with a causal mask at an offset and an additive bias.
    q, k, v = _crandn(1, 2, 3, 4, seed=4), _crandn(1, 2, 7, 4, seed=5), _crandn(1, 2, 7, 5, seed=6)
    allowed = torch.arange(7)[None, :] <= torch.arange(4, 7)[:, None]
    ref, _ = _explicit(q, k, v, "real", allowed)
    out, _ = CF.scaled_dot_product_attention(q, k, v, is_causal=True, q_offset=4)
    assert_close(out, ref)
    s = (q @ k.conj().transpose(-2, -1)).real / 2.0
    bias = torch.randn(1, 1, 3, 7, dtype=torch.float64)
    out_b, _ = CF.scaled_dot_product_attention(q, k, v, bias=bias)
    assert_close(out_b, torch.softmax(s + bias, -1).to(v.dtype) @ v)


@pytest.mark.parametrize("score", SCORES)
def test_nn_mha_module_equals_explicit_attention(score):
    mha = _mha(score)
    x, mem = _crandn(2, 5, 8, seed=7), _crandn(2, 6, 8, seed=8)
    y, w = mha(x, mem, mem, need_weights=True)
    q = mha.w_q(x).view(2, 5, 2, 4).transpose(1, 2)
    k = mha.w_k(mem).view(2, 6, 2, 4).transpose(1, 2)
    v = mha.w_v(mem).view(2, 6, 2, 3).transpose(1, 2)
    ref, w_ref = _explicit(q, k, v, score)
    assert_close(y, mha.fc(ref.transpose(1, 2).reshape(2, 5, 6)))
    assert_close(w, w_ref)
    assert_close(mha(x, mem, mem), y)  # fused / explicit paths agree
    if score in ("real", "modulus"):
        assert not w.is_complex()
        assert_close(w.sum(-1), torch.ones(2, 2, 5, dtype=torch.float64))


def test_nn_documentation_example():
    d_model, n_heads, d_head = 32, 4, 8
    rope = cnn.RotaryEmbedding(dim=d_head)
    mha = cnn.MultiheadAttention(n_heads, d_model, d_head, d_head, rotary=rope)
    x = torch.randn(2, 16, d_model, dtype=torch.cfloat)
    y = mha(x, x, x)
    assert y.shape == (2, 16, 32) and y.dtype == torch.cfloat


def test_nn_documentation_example_via_top_level_package():
    # Run in a fresh interpreter: here complexformer.nn is already imported by this module, so
    # only a subprocess shows that `import complexformer as ctorch` alone exposes ctorch.nn
    # (it needs `from . import nn` in complexformer/__init__.py).
    code = textwrap.dedent("""
        import torch
        import complexformer as ctorch
        d_model, n_heads, d_head = 32, 4, 8
        rope = ctorch.nn.RotaryEmbedding(dim=d_head)
        mha = ctorch.nn.MultiheadAttention(n_heads, d_model, d_head, d_head, rotary=rope)
        x = torch.randn(2, 16, d_model, dtype=torch.cfloat)
        y = mha(x, x, x)
        assert y.shape == (2, 16, 32) and y.dtype == torch.cfloat, (y.shape, y.dtype)
        print("ok")
    """)
    root = Path(__file__).resolve().parents[2]
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]


@pytest.mark.parametrize("score", SCORES)
def test_nn_causal_mask_blocks_the_future(score):
    mha = _mha(score, rotary=cnn.RotaryEmbedding(4))
    x = _crandn(2, 7, 8, seed=9)
    y = mha(x, x, x, is_causal=True)
    for t in range(6):
        x2 = x.clone()
        x2[:, t + 1 :] += _crandn(2, 6 - t, 8, seed=10 + t)  # perturb the future of t
        y2 = mha(x2, x2, x2, is_causal=True)
        assert_close(y2[:, : t + 1], y[:, : t + 1])
        assert not torch.allclose(y2[:, t + 1 :], y[:, t + 1 :])
    # the same with an explicit bool mask (True = not allowed) and an additive one
    future = torch.ones(7, 7, dtype=torch.bool).triu(1)
    assert_close(mha(x, x, x, attn_mask=future), y)
    additive = torch.zeros(7, 7, dtype=torch.float64).masked_fill(future, float("-inf"))
    assert_close(mha(x, x, x, attn_mask=additive), y)
    _, w = mha(x, x, x, is_causal=True, need_weights=True)
    assert (w[..., future] == 0).all()


@pytest.mark.parametrize("score", SCORES)
def test_nn_key_padding_mask(score):
    mha = _mha(score)
    x, mem = _crandn(2, 4, 8, seed=11), _crandn(2, 6, 8, seed=12)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[0, 4:] = True  # sequence 0 has 4 real keys, sequence 1 has 6
    y = mha(x, mem, mem, key_padding_mask=pad)
    assert_close(y[0:1], mha(x[0:1], mem[0:1, :4], mem[0:1, :4]))
    assert_close(y[1:2], mha(x[1:2], mem[1:2], mem[1:2]))
    mem2 = mem.clone()
    mem2[0, 4:] = _crandn(2, 8, seed=13)  # padded keys/values do not matter
    assert_close(mha(x, mem2, mem2, key_padding_mask=pad), y)
    # per-head 3-D (B * H, Tq, Tk) mask equal to the padding mask
    m3 = pad[:, None, None, :].expand(2, 2, 4, 6).reshape(4, 4, 6)
    assert_close(mha(x, mem, mem, attn_mask=m3), y)
    additive = torch.zeros(2, 6, dtype=torch.float64).masked_fill(pad, float("-inf"))
    assert_close(mha(x, mem, mem, key_padding_mask=additive), y)


def test_nn_fully_masked_rows_are_zero_not_nan():
    for score in SCORES:
        mha = _mha(score, bias=True)
        x = _crandn(1, 3, 8, seed=14)
        pad = torch.ones(1, 3, dtype=torch.bool)
        y = mha(x, x, x, key_padding_mask=pad)
        assert torch.isfinite(torch.view_as_real(y)).all()
        bias = torch.view_as_complex(mha.fc.bias.detach())
        assert_close(y, bias.expand_as(y))  # attention output 0 -> only the fc bias


@pytest.mark.parametrize("score", SCORES)
def test_nn_kv_cache_decoding_equals_full_recomputation(score):
    mha = _mha(score, rotary=cnn.RotaryEmbedding(4))
    x = _crandn(2, 9, 8, seed=15)
    full = mha(x, x, x, is_causal=True)
    cache = cnn.LayerKVCache()
    steps = [mha(x[:, :4], x[:, :4], x[:, :4], is_causal=True, cache=cache)]  # prompt
    for t in range(4, 9):
        xt = x[:, t : t + 1]
        steps.append(mha(xt, xt, xt, is_causal=True, cache=cache))
    assert cache.length == 9
    assert_close(torch.cat(steps, dim=1), full)
    # with a padding mask over all keys so far
    pad = torch.zeros(2, 9, dtype=torch.bool)
    pad[1, 0] = True
    full_p = mha(x, x, x, is_causal=True, key_padding_mask=pad)
    cache = cnn.LayerKVCache()
    outs = [
        mha(x[:, :1], x[:, :1], x[:, :1], is_causal=True, cache=cache, key_padding_mask=pad[:, :1])
    ]
    for t in range(1, 9):
        xt = x[:, t : t + 1]
        outs.append(mha(xt, xt, xt, is_causal=True, cache=cache, key_padding_mask=pad[:, : t + 1]))
    assert torch.isfinite(torch.view_as_real(outs[0])).all()
    assert_close(torch.cat(outs[1:], dim=1), full_p[:, 1:])


def test_nn_static_cache_for_cross_attention():
    mha = _mha("modulus", kdim=5, vdim=6)
    x, mk, mv = _crandn(2, 4, 8, seed=16), _crandn(2, 7, 5, seed=17), _crandn(2, 7, 6, seed=18)
    full = mha(x, mk, mv)
    assert full.shape == (2, 4, 8)
    cache = cnn.StaticKVCache()
    first = mha(x[:, :2], mk, mv, cache=cache)
    assert cache.filled
    junk_k, junk_v = torch.zeros_like(mk), torch.zeros_like(mv)
    second = mha(x[:, 2:], junk_k, junk_v, cache=cache)  # key/value ignored: cached
    assert_close(torch.cat([first, second], 1), full)


def test_nn_batch_first_false_and_dtype_preserved():
    mha = cnn.MultiheadAttention(2, 8, dropout=0.0, batch_first=False)
    x = torch.randn(5, 3, 8, dtype=torch.cfloat)  # (T, B, E)
    y = mha(x, x, x)
    assert y.shape == (5, 3, 8) and y.dtype == torch.cfloat
    mha.batch_first = True
    assert_close(mha(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1)), y.transpose(0, 1))


def test_nn_attention_dropout_is_active_only_in_training():
    mha = cnn.MultiheadAttention(2, 8, dropout=0.5)
    x = torch.randn(2, 6, 8, dtype=torch.cfloat)
    mha.eval()
    assert torch.equal(mha(x, x, x), mha(x, x, x))
    mha.train()
    torch.manual_seed(0)
    a = mha(x, x, x)
    torch.manual_seed(1)
    assert not torch.allclose(a, mha(x, x, x))


@pytest.mark.parametrize("score", SCORES)
def test_nn_zero_scores_have_finite_gradients(score):
    # an all-zero query (e.g. a zero padding embedding) gives S = 0 on its row, where |S| and
    # S/|S| are not differentiable: gradients must stay finite (|S|' and S/|S| taken as 0).
    q = _crandn(1, 2, 3, 4, seed=20)
    q[:, :, 1] = 0
    k, v = _crandn(1, 2, 5, 4, seed=21), _crandn(1, 2, 5, 4, seed=22)
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    for need_weights in (False, True):
        out, _ = CF.scaled_dot_product_attention(q, k, v, score=score, need_weights=need_weights)
        g = torch.autograd.grad(out.abs().sum(), (q, k, v))
        assert all(torch.isfinite(torch.view_as_real(t)).all() for t in g)
