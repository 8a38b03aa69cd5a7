"""Complex MultiheadAttention: score formulas, masks, KV cache, cross-attention, shapes."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
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


@pytest.mark.parametrize("masked", [False, True])
def test_nn_modulus_attention_in_buffers_equals_the_formula(masked):
    """The inference path of CF.modulus_attention (every step in caller-supplied buffers)
    gives softmax(|S| + bias)·V and the weights of the explicit formula; it refuses autograd."""
    b, h, t_q, t_k, d = 2, 3, 4, 5, 6
    q, k, v = (
        _crandn(b, h, t_q, d, seed=31),
        _crandn(b, h, t_k, d, seed=32),
        _crandn(b, h, t_k, 3, seed=33),
    )
    s = q @ k.conj().transpose(-2, -1) / math.sqrt(d)
    bias = None
    if masked:
        bias = torch.randn(
            b, 1, t_q, t_k, dtype=torch.float64, generator=torch.Generator().manual_seed(34)
        )
        bias[0, 0, 1, :] = float("-inf")  # a row with every key masked: zero weights
        bias[1, 0, 2, :3] = float("-inf")
    z = s.abs() + (0 if bias is None else bias)
    ok = torch.isfinite(z).any(-1, keepdim=True)
    w_ref = torch.softmax(torch.where(ok, z, 0), -1) * ok
    out_ref = w_ref.to(v.dtype) @ v
    # [Re | Im] features: rows [Qr, Qi] and [Qi, -Qr] give Re S and Im S against [Kr, Ki]
    qs = q / math.sqrt(d)
    qq = torch.stack((torch.cat((qs.real, qs.imag), -1), torch.cat((qs.imag, -qs.real), -1)), 2)
    kr = torch.cat((k.real, k.imag), -1)
    vr = torch.cat((v.real, v.imag), -1)
    buffers = (
        torch.empty(b, h, 2, t_q, t_k, dtype=torch.float64),
        torch.empty(b, h, t_q, t_k, dtype=torch.float64),
        torch.empty(b, h, t_q, 6, dtype=torch.float64),
    )
    with torch.no_grad():
        out, w = CF.modulus_attention(qq, kr, vr, bias, 0.0, buffers)
    assert_close(w, w_ref)
    assert_close(torch.complex(out[..., :3], out[..., 3:]), out_ref)
    assert out.data_ptr() == buffers[2].data_ptr()
    if bias is None:  # in place (with a bias the masked softmax is a new tensor)
        assert w.data_ptr() == buffers[1].data_ptr()
    out2, w2 = CF.modulus_attention(qq, kr, vr, bias)  # the autograd path, same numbers
    assert_close(out2, out)
    assert_close(w2, w)
    with pytest.raises(ValueError, match="^modulus_attention: buffers are for inference only"):
        CF.modulus_attention(qq.requires_grad_(), kr, vr, bias, 0.0, buffers)


def test_nn_complex_softmax_each_score_with_a_bias_and_real_logits():
    """complex_softmax against the four formulas written out, with an additive bias that masks
    some keys and every key of one row (zero weights there, not NaN), for complex128,
    complex64 and real logits (lifted: Im = 0), and a zero logit (phase: weight 0)."""
    s = _crandn(2, 3, 4, 5, seed=41)
    s[0, 0, 0, 1] = 0  # S = 0: the phase weight is 0 there
    bias = torch.zeros(2, 1, 4, 5, dtype=torch.float64)
    bias[0, 0, 2, :] = float("-inf")
    bias[1, 0, 1, ::2] = float("-inf")
    ok = torch.isfinite(bias).any(-1, keepdim=True)

    def sm(z, b=None):
        z = z if b is None else z + b
        return torch.softmax(torch.where(ok, z, 0) if b is not None else z, -1) * (
            ok if b is not None else 1
        )

    def phase(z, b=None):
        a = sm(z.abs(), b)
        return torch.where(z == 0, 0, a * z / torch.where(z == 0, 1, z.abs()))

    want = {
        "real": lambda z, b=None: sm(z.real, b),
        "modulus": lambda z, b=None: sm(z.abs(), b),
        "split": lambda z, b=None: torch.complex(sm(z.real, b), sm(z.imag, b)),
        "phase": phase,
    }
    for score, f in want.items():
        for b in (None, bias):
            got = CF.complex_softmax(s, score, b)
            assert_close(got, f(s, b), msg=score)
            assert got.is_complex() == (score in ("split", "phase"))
            if b is not None:
                assert torch.isfinite(torch.view_as_real(got) if got.is_complex() else got).all()
                assert (got[0, :, 2] == 0).all()
        got32 = CF.complex_softmax(s.to(torch.complex64), score, bias.float())
        assert got32.dtype in (torch.float32, torch.complex64)
        assert_close(got32, f(s, bias).to(got32.dtype), atol=1e-6, rtol=1e-5)
        r = s.real
        got_r = CF.complex_softmax(r, score)  # a real input is lifted (Im = 0)
        assert got_r.dtype in (torch.float64, torch.complex128)
        assert_close(got_r, f(torch.complex(r, torch.zeros_like(r))))
        assert CF.complex_softmax(r.float(), score).dtype in (torch.float32, torch.complex64)
    with pytest.raises(ValueError, match="score"):
        CF.complex_softmax(s, "modulo")


@pytest.mark.parametrize("score", SCORES)
def test_nn_sdpa_causal_offsets_scale_and_bias_against_the_formula(score):
    """Every score, fused or not, with and without need_weights: causal masks at every query
    offset (one decoding query at each key position, and a block of queries), the default
    offset 0, a custom scale, and an additive bias, against S = scale·Q·Kᴴ written out."""
    b, h, t_k, d = 2, 2, 7, 4
    k, v = _crandn(b, h, t_k, d, seed=51), _crandn(b, h, t_k, 3, seed=52)
    bias = torch.randn(
        b, 1, 1, t_k, dtype=torch.float64, generator=torch.Generator().manual_seed(53)
    )

    def explicit(q, allowed, scale, add=None):
        s = q @ k.conj().transpose(-2, -1) * scale
        ninf = float("-inf")

        def sm(z):
            z = z if add is None else z + add
            return torch.softmax(z.masked_fill(~allowed, ninf), -1)

        w = {
            "real": lambda: sm(s.real),
            "modulus": lambda: sm(s.abs()),
            "split": lambda: torch.complex(sm(s.real), sm(s.imag)),
            "phase": lambda: sm(s.abs()) * s / s.abs(),
        }[score]()
        return w.to(v.dtype) @ v

    for need in (False, True):
        for t_q, off in [(1, o) for o in range(t_k)] + [(3, 2), (3, 4)]:
            q = _crandn(b, h, t_q, d, seed=54 + off)
            allowed = torch.arange(t_k)[None, :] <= torch.arange(off, off + t_q)[:, None]
            out, _ = CF.scaled_dot_product_attention(
                q, k, v, score=score, is_causal=True, q_offset=off, need_weights=need
            )
            assert_close(out, explicit(q, allowed, d**-0.5), msg=f"{t_q} {off} {need}")
        q = _crandn(b, h, 3, d, seed=60)
        first = torch.arange(t_k)[None, :] <= torch.arange(3)[:, None]  # default q_offset 0
        out, _ = CF.scaled_dot_product_attention(
            q, k, v, score=score, is_causal=True, need_weights=need
        )
        assert_close(out, explicit(q, first, d**-0.5))
        everything = torch.ones(3, t_k, dtype=torch.bool)
        out, _ = CF.scaled_dot_product_attention(
            q, k, v, score=score, scale=0.37, need_weights=need
        )
        assert_close(out, explicit(q, everything, 0.37))
        out, _ = CF.scaled_dot_product_attention(
            q, k, v, score=score, bias=bias, scale=0.37, need_weights=need
        )
        assert_close(out, explicit(q, everything, 0.37, bias))
    with pytest.raises(
        ValueError, match=r"^scaled_dot_product_attention: unknown score 'x'; allowed: 'real', "
    ):
        CF.scaled_dot_product_attention(k, k, v, score="x")


def test_nn_modulus_attention_dropout_dtype_and_buffers():
    """Dropout on the weights (the same draws as F.dropout on the formula's weights), weights
    cast to V's dtype, and the scores left in the caller's buffer."""
    b, h, t_q, t_k, f = 1, 2, 3, 4, 6
    g = torch.Generator().manual_seed(61)
    qq = torch.randn(b, h, 2, t_q, f, generator=g)
    k = torch.randn(b, h, t_k, f, generator=g)
    v = torch.randn(b, h, t_k, 5, generator=g, dtype=torch.float64)
    ri = torch.stack((qq[:, :, 0] @ k.transpose(-2, -1), qq[:, :, 1] @ k.transpose(-2, -1)), 2)
    w_ref = torch.softmax(torch.sqrt(ri[:, :, 0] ** 2 + ri[:, :, 1] ** 2), -1)
    for p in (0.3, 1.0):
        torch.manual_seed(62)
        out, w = CF.modulus_attention(qq, k, v, None, p)
        torch.manual_seed(62)
        want = F.dropout(w_ref, p).double() @ v
        assert out.dtype == torch.float64
        assert_close(w, w_ref)
        assert_close(out, want, atol=1e-5, rtol=1e-5)  # float32 weights
        assert not torch.equal(out, w_ref.double() @ v)
    buffers = (
        torch.empty(b, h, 2, t_q, t_k),
        torch.empty(b, h, t_q, t_k),
        torch.empty(b, h, t_q, 5),
    )
    with torch.no_grad():
        CF.modulus_attention(qq, k, v.float(), None, 0.0, buffers)
    assert_close(buffers[0], ri)  # (Re S, Im S) were computed in the caller's buffer
    with torch.no_grad():  # dropout in the buffers too: the draws of F.dropout
        torch.manual_seed(63)
        out, _ = CF.modulus_attention(qq, k, v.float(), None, 0.3, buffers)
    torch.manual_seed(63)
    assert_close(out, F.dropout(w_ref, 0.3) @ v.float(), atol=1e-6, rtol=1e-5)
    with pytest.raises(
        ValueError, match=r"^complex_softmax: unknown score 'modulo'; allowed: 'real'"
    ):
        CF.complex_softmax(ri, "modulo")


@pytest.mark.parametrize("score", SCORES)
def test_nn_sdpa_dropout_and_mixed_dtypes_on_the_explicit_paths(score):
    """Dropout on the weights of every explicit path: the draws of F.dropout for the real
    weights ("real", "modulus"); p = 1 drops everything, for every score. complex64 inputs
    with a float64 bias give the complex64 output."""
    q, k, v = (
        _crandn(1, 2, 3, 4, seed=71),
        _crandn(1, 2, 5, 4, seed=72),
        _crandn(1, 2, 5, 3, seed=73),
    )
    _, w = CF.scaled_dot_product_attention(q, k, v, score=score, need_weights=True)
    if score in ("real", "modulus"):
        for need in (True, False) if score == "modulus" else (True,):
            torch.manual_seed(74)
            out, _ = CF.scaled_dot_product_attention(
                q, k, v, score=score, dropout_p=0.3, need_weights=need
            )
            torch.manual_seed(74)
            assert_close(out, F.dropout(w, 0.3).to(v.dtype) @ v)
    for need in (True, False):
        out, _ = CF.scaled_dot_product_attention(
            q, k, v, score=score, dropout_p=1.0, need_weights=need
        )
        assert torch.equal(out, torch.zeros_like(out))
    bias = torch.zeros(1, 1, 3, 5, dtype=torch.float64)
    q32, k32, v32 = (t.to(torch.complex64) for t in (q, k, v))
    for need in (True, False):
        out, _ = CF.scaled_dot_product_attention(
            q32, k32, v32, score=score, bias=bias, need_weights=need
        )
        ref, _ = CF.scaled_dot_product_attention(q, k, v, score=score, bias=bias, need_weights=need)
        assert out.dtype == torch.complex64
        assert_close(out, ref.to(torch.complex64), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("score", SCORES)
def test_nn_sdpa_causal_mask_is_made_on_the_inputs_device(score, monkeypatch):
    """The explicit paths' causal mask and its bias are made on q's device: on the meta
    device (a stand-in for an accelerator) a CPU bias cannot be added to the scores, and the
    mask itself is checked where it is made (a CPU mask passed to a meta tensor's
    masked_fill_ raises no error there, while a GPU's would)."""
    made = []
    original = CF.causal_mask

    def recording_mask(*a, **kw):
        made.append(original(*a, **kw))
        return made[-1]

    monkeypatch.setattr(CF, "causal_mask", recording_mask)
    meta = torch.device("meta")
    q = torch.zeros(1, 2, 3, 4, dtype=torch.complex64, device=meta)
    k = torch.zeros(1, 2, 5, 4, dtype=torch.complex64, device=meta)
    v = torch.zeros(1, 2, 5, 6, dtype=torch.complex64, device=meta)
    for bias in (None, torch.zeros(1, 1, 3, 5, device=meta)):
        out, w = CF.scaled_dot_product_attention(
            q, k, v, score=score, is_causal=True, q_offset=1, bias=bias, need_weights=True
        )
        assert out.device == meta and out.shape == (1, 2, 3, 6)
        assert w.device == meta and w.shape == (1, 2, 3, 5)
    assert len(made) == 2 and all(m.device == meta and m.shape == (3, 5) for m in made)
