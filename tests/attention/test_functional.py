"""Tests of complexformer.attention.functional against independent naive references.

The oracles here are written from the paper (Shao et al. 2025, sec. 3.1, eq. 1-9) and
DESIGN.md, not from the library: a pure-Python loop over (b, h, m, n, j) with the `math`
module, and a vectorised (Tq, Tk, J) version built on complex numbers (abs / angle), which
is differentiable and used for gradients. Everything exact is compared in float64.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from complexformer.attention.functional import (
    alibi_bias,
    alibi_slopes,
    apply_rope,
    attention,
    causal_mask,
    cmha,
    cmha_reference,
    polar_components,
    polar_rotate,
    rope_frequencies,
)

F64 = torch.float64
EXACT = {"atol": 1e-10, "rtol": 1e-12}


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _omega64(d: int, schedule: str = "rope", base: float = 10000.0) -> torch.Tensor:
    """Frequencies written from the formulas (float64), independent of rope_frequencies."""
    j = torch.arange(d // 2, dtype=F64)
    denom = d if schedule == "rope" else d / 2
    return base ** (-2.0 * j / denom)


# ----------------------------------------------------------------------------------------
# Naive references
# ----------------------------------------------------------------------------------------


def _naive_cmha_loops(q, k, v, delta, bias, omega, *, causal, q_offset, scale):
    """Eq. 1-9 literally, in pure Python floats: loops over b, h, m, n, j."""
    bsz, n_head, t_q, d = q.shape
    t_k, d_v = k.shape[2], v.shape[3]
    n_pair = d // 2
    ql, kl, vl, w = q.tolist(), k.tolist(), v.tolist(), omega.tolist()
    out = [[[[0.0] * d_v for _ in range(t_q)] for _ in range(n_head)] for _ in range(bsz)]
    for b in range(bsz):
        for h in range(n_head):
            dl = (delta[h] if delta.dim() == 2 else delta).tolist()
            bl = (bias[h] if bias.dim() == 2 else bias).tolist()
            for mi in range(t_q):
                m = q_offset + mi  # absolute query position
                scores = []
                for n in range(t_k):
                    if causal and n > m:
                        scores.append(None)
                        continue
                    s = 0.0
                    for j in range(n_pair):
                        q0, q1 = ql[b][h][mi][2 * j], ql[b][h][mi][2 * j + 1]
                        k0, k1 = kl[b][h][n][2 * j], kl[b][h][n][2 * j + 1]
                        lam_q, th_q = math.hypot(q0, q1), math.atan2(q1, q0)  # eq. 1-2
                        lam_k, th_k = math.hypot(k0, k1), math.atan2(k1, k0)
                        a_s = th_q - th_k  # eq. 5
                        d_p = (m - n) * w[j]  # eq. 6
                        adapt = dl[j] * a_s + bl[j]  # eq. 7
                        s += lam_q * lam_k * math.cos(adapt + d_p)  # eq. 8
                    scores.append(s * scale)
                mx = max(s for s in scores if s is not None)
                e = [0.0 if s is None else math.exp(s - mx) for s in scores]
                z = sum(e)
                for c in range(d_v):  # eq. 9
                    out[b][h][mi][c] = sum(e[n] / z * vl[b][h][n][c] for n in range(t_k))
    return torch.tensor(out, dtype=F64)


def _naive_mask(t_q, t_k, q_offset):
    return torch.tensor([[n <= q_offset + m for n in range(t_k)] for m in range(t_q)])


def _naive_cmha_scores(q, k, delta, bias, omega, *, q_offset, scale):
    """Vectorised eq. 1-8 via complex numbers; (B, H, Tq, Tk). Differentiable."""
    zq = torch.complex(q[..., 0::2], q[..., 1::2])
    zk = torch.complex(k[..., 0::2], k[..., 1::2])
    lam_q, th_q = zq.abs(), zq.angle()  # (B, H, Tq, J)
    lam_k, th_k = zk.abs(), zk.angle()  # (B, H, Tk, J)
    if delta.dim() == 1:
        delta, bias = delta.expand(q.shape[1], -1), bias.expand(q.shape[1], -1)
    dlt = delta[None, :, None, None, :]  # (1, H, 1, 1, J)
    bs = bias[None, :, None, None, :]
    a_s = th_q[:, :, :, None, :] - th_k[:, :, None, :, :]  # (B, H, Tq, Tk, J)
    m = torch.arange(q_offset, q_offset + q.shape[2], dtype=F64)
    n = torch.arange(k.shape[2], dtype=F64)
    d_p = (m[:, None, None] - n[None, :, None]) * omega.to(F64)  # (Tq, Tk, J)
    rot = torch.exp(1j * (dlt * a_s + bs + d_p)).real
    return scale * torch.einsum("bhmj,bhnj,bhmnj->bhmn", lam_q, lam_k, rot)


def _naive_softmax_attn(scores, v, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _naive_cmha(q, k, v, delta, bias, omega, *, causal, q_offset, scale):
    s = _naive_cmha_scores(q, k, delta, bias, omega, q_offset=q_offset, scale=scale)
    mask = _naive_mask(q.shape[2], k.shape[2], q_offset) if causal else None
    return _naive_softmax_attn(s, v, mask)


def _naive_rope(x, positions, omega):
    """x'[2j] = x[2j] cos(p w_j) - x[2j+1] sin(p w_j); x'[2j+1] = x[2j] sin + x[2j+1] cos."""
    out = torch.empty_like(x)
    for j in range(x.shape[-1] // 2):
        ang = positions.to(F64) * float(omega[j])  # (T,)
        c, s = torch.cos(ang)[:, None], torch.sin(ang)[:, None]
        x0, x1 = x[..., :, 2 * j : 2 * j + 1], x[..., :, 2 * j + 1 : 2 * j + 2]
        out[..., :, 2 * j : 2 * j + 1] = x0 * c - x1 * s
        out[..., :, 2 * j + 1 : 2 * j + 2] = x0 * s + x1 * c
    return out


def _inputs(seed, bsz, n_head, t_q, t_k, d, d_v=None, shared=False):
    g = _gen(seed)
    d_v = d if d_v is None else d_v
    q = torch.randn(bsz, n_head, t_q, d, generator=g, dtype=F64)
    k = torch.randn(bsz, n_head, t_k, d, generator=g, dtype=F64)
    v = torch.randn(bsz, n_head, t_k, d_v, generator=g, dtype=F64)
    pshape = (d // 2,) if shared else (n_head, d // 2)
    delta = torch.randn(*pshape, generator=g, dtype=F64)  # N(0, 1): far from the RoPE point
    bias = torch.randn(*pshape, generator=g, dtype=F64)
    return q, k, v, delta, bias


def test_naive_loop_reference_is_not_trivial():
    """The loop oracle must depend on delta, bias and omega (guards against a vacuous oracle)."""
    q, k, v, delta, bias = _inputs(0, 1, 2, 4, 4, 8)
    om = _omega64(8)
    kw = {"causal": True, "q_offset": 0, "scale": 8**-0.5}
    base = _naive_cmha_loops(q, k, v, delta, bias, om, **kw)
    for args in (
        (delta + 0.5, bias, om),
        (delta, bias + 0.5, om),
        (delta, bias, om * 2),
    ):
        assert (_naive_cmha_loops(q, k, v, *args, **kw) - base).abs().max() > 1e-3
    # and the two oracles agree with each other
    assert_close(_naive_cmha(q, k, v, delta, bias, om, **kw), base, **EXACT)


# ----------------------------------------------------------------------------------------
# cmha vs the naive references (forward)
# ----------------------------------------------------------------------------------------

_T_CASES = [(1, 1), (7, 7), (3, 7), (64, 64), (5, 64)]  # (Tq, Tk); q_offset = Tk - Tq


@pytest.mark.parametrize("t_q,t_k", _T_CASES)
@pytest.mark.parametrize("d", [8, 16])
@pytest.mark.parametrize("shared", [False, True], ids=["per_head", "shared"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("scale", [None, 0.37], ids=["scale_default", "scale_custom"])
def test_cmha_matches_naive_float64(t_q, t_k, d, shared, causal, scale):
    n_head = 3 if d == 8 else 4
    q, k, v, delta, bias = _inputs(t_q * 100 + t_k + d, 2, n_head, t_q, t_k, d, shared=shared)
    omega = rope_frequencies(d).to(F64)
    q_offset = t_k - t_q
    sc = 1.0 / math.sqrt(d) if scale is None else scale
    out = cmha(q, k, v, delta, bias, omega=omega, is_causal=causal, q_offset=q_offset, scale=scale)
    assert out.shape == (2, n_head, t_q, d) and out.dtype == F64
    naive = _naive_cmha(q, k, v, delta, bias, omega, causal=causal, q_offset=q_offset, scale=sc)
    assert_close(out, naive, **EXACT)
    ref = cmha_reference(
        q, k, v, delta, bias, omega=omega, is_causal=causal, q_offset=q_offset, scale=scale
    )
    assert_close(out, ref, **EXACT)
    if t_k <= 7:
        loops = _naive_cmha_loops(
            q, k, v, delta, bias, omega, causal=causal, q_offset=q_offset, scale=sc
        )
        assert_close(out, loops, **EXACT)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("shared", [False, True])
def test_cmha_q_offset_equals_suffix_of_full_sequence(causal, shared):
    """Queries at the last Tq positions (KV-cache decoding) == the last rows of the full run."""
    t, t_q, d = 24, 5, 16
    q, k, v, delta, bias = _inputs(11, 2, 3, t, t, d, shared=shared)
    omega = rope_frequencies(d).to(F64)
    full = cmha(q, k, v, delta, bias, omega=omega, is_causal=causal)
    tail = cmha(q[:, :, -t_q:], k, v, delta, bias, omega=omega, is_causal=causal, q_offset=t - t_q)
    assert_close(tail, full[:, :, -t_q:], **EXACT)
    # and q_offset matters: a wrong offset gives a different result
    wrong = cmha(q[:, :, -t_q:], k, v, delta, bias, omega=omega, is_causal=causal, q_offset=0)
    assert (wrong - full[:, :, -t_q:]).abs().max() > 1e-3


def test_cmha_paper_schedule_matches_naive():
    q, k, v, delta, bias = _inputs(5, 1, 2, 9, 9, 8)
    omega = rope_frequencies(8, schedule="paper").to(F64)
    assert_close(omega, _omega64(8, "paper"), atol=1e-7, rtol=1e-6)
    out = cmha(q, k, v, delta, bias, omega=omega)
    naive = _naive_cmha_loops(q, k, v, delta, bias, omega, causal=True, q_offset=0, scale=8**-0.5)
    assert_close(out, naive, **EXACT)


def test_cmha_heads_use_their_own_parameters():
    """Per-head delta/bias: changing head 1's parameters changes only head 1's output."""
    q, k, v, delta, bias = _inputs(6, 1, 3, 6, 6, 8)
    omega = rope_frequencies(8).to(F64)
    out = cmha(q, k, v, delta, bias, omega=omega)
    delta2, bias2 = delta.clone(), bias.clone()
    delta2[1] += 0.7
    bias2[1] -= 0.4
    out2 = cmha(q, k, v, delta2, bias2, omega=omega)
    assert_close(out2[:, [0, 2]], out[:, [0, 2]], atol=0, rtol=0)
    assert (out2[:, 1] - out[:, 1]).abs().max() > 1e-3


# ----------------------------------------------------------------------------------------
# Gradients
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("t_q,t_k", [(7, 7), (3, 7), (64, 64), (5, 64)])
@pytest.mark.parametrize("shared", [False, True], ids=["per_head", "shared"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_cmha_gradients_match_naive(t_q, t_k, shared, causal):
    d, n_head = 8, 3
    tensors = _inputs(t_q + 31 * t_k, 2, n_head, t_q, t_k, d, d_v=6, shared=shared)
    omega = rope_frequencies(d).to(F64)
    q_offset, scale = t_k - t_q, 0.41
    w = torch.randn(2, n_head, t_q, 6, generator=_gen(99), dtype=F64)

    def grads(fn):
        leaves = [t.clone().requires_grad_(True) for t in tensors]
        out = fn(*leaves)
        return out, torch.autograd.grad((out * w).sum(), leaves)

    out, g_lib = grads(
        lambda q, k, v, dl, b: cmha(
            q, k, v, dl, b, omega=omega, is_causal=causal, q_offset=q_offset, scale=scale
        )
    )
    out_n, g_naive = grads(
        lambda q, k, v, dl, b: _naive_cmha(
            q, k, v, dl, b, omega, causal=causal, q_offset=q_offset, scale=scale
        )
    )
    assert_close(out, out_n, **EXACT)
    for name, ga, gb in zip(("q", "k", "v", "delta", "bias"), g_lib, g_naive, strict=True):
        assert ga.shape == gb.shape, name
        assert gb.abs().max() > 1e-6, f"naive gradient for {name} vanishes: weak test"
        assert_close(ga, gb, **EXACT, msg=lambda m, name=name: f"grad {name}: {m}")


def test_cmha_gradcheck_finite_differences():
    q, k, v, delta, bias = _inputs(3, 1, 2, 4, 5, 4)
    omega = rope_frequencies(4).to(F64)
    leaves = tuple(t.requires_grad_(True) for t in (q, k, v, delta, bias))
    assert torch.autograd.gradcheck(
        lambda *a: cmha(*a, omega=omega, q_offset=1), leaves, eps=1e-6, atol=1e-7
    )


# ----------------------------------------------------------------------------------------
# Frequencies
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 8, 16, 64])
def test_rope_frequencies_closed_form(d):
    for schedule in ("rope", "paper"):
        om = rope_frequencies(d, schedule=schedule)
        assert om.shape == (d // 2,) and om.dtype == torch.float32
        denom = d if schedule == "rope" else d / 2
        expect = torch.tensor([10000.0 ** (-2 * j / denom) for j in range(d // 2)])
        assert_close(om, expect, atol=0, rtol=1e-6)
    om_b = rope_frequencies(d, base=500.0)
    assert_close(
        om_b, torch.tensor([500.0 ** (-2 * j / d) for j in range(d // 2)]), rtol=1e-6, atol=0
    )


def test_rope_frequencies_explicit_values():
    s = 10000.0
    assert_close(
        rope_frequencies(8, schedule="rope"),
        torch.tensor([1.0, s**-0.25, s**-0.5, s**-0.75]),
        atol=0,
        rtol=1e-6,
    )
    assert_close(
        rope_frequencies(8, schedule="paper"),
        torch.tensor([1.0, s**-0.5, s**-1.0, s**-1.5]),
        atol=0,
        rtol=1e-6,
    )


@pytest.mark.parametrize("bad", [7, 0, -4])
def test_rope_frequencies_bad_head_dim(bad):
    with pytest.raises(ValueError, match=str(bad)):
        rope_frequencies(bad)


def test_rope_frequencies_bad_schedule():
    with pytest.raises(ValueError, match="linear"):
        rope_frequencies(8, schedule="linear")


# ----------------------------------------------------------------------------------------
# RoPE equivalence (delta = 1, b = 0)
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("positions", ["int", "tensor"])
def test_polar_rotate_identity_adaptation_is_rope(positions):
    d, t = 16, 11
    x = torch.randn(2, 3, t, d, generator=_gen(21), dtype=F64)
    omega = rope_frequencies(d).to(F64)
    pos_t = torch.arange(5, 5 + t)
    pos = 5 if positions == "int" else pos_t
    expect = _naive_rope(x, pos_t, omega)
    ones, zeros = torch.ones(3, d // 2, dtype=F64), torch.zeros(3, d // 2, dtype=F64)
    assert_close(polar_rotate(x, ones, zeros, pos, omega), expect, **EXACT)
    assert_close(polar_rotate(x, None, None, pos, omega), expect, **EXACT)
    assert_close(apply_rope(x, pos, omega), expect, **EXACT)
    # the rotation is not the identity (guards a vacuous comparison)
    assert (expect - x).abs().max() > 1e-2


def test_apply_rope_float32_positions_computed_in_float32():
    d, t = 8, 300
    x = torch.randn(1, 1, t, d, generator=_gen(22))
    omega = rope_frequencies(d)
    expect = _naive_rope(x.double(), torch.arange(t), omega.double())
    assert_close(apply_rope(x, 0, omega).double(), expect, atol=1e-4, rtol=0)


def test_cmha_identity_adaptation_is_rope_attention():
    bsz, n_head, t, d = 2, 3, 13, 16
    q, k, v, _, _ = _inputs(23, bsz, n_head, t, t, d)
    omega = rope_frequencies(d).to(F64)
    ones, zeros = torch.ones(n_head, d // 2, dtype=F64), torch.zeros(n_head, d // 2, dtype=F64)
    out = cmha(q, k, v, ones, zeros, omega=omega)
    pos = torch.arange(t)
    scores = _naive_rope(q, pos, omega) @ _naive_rope(k, pos, omega).transpose(-1, -2)
    expect = _naive_softmax_attn(scores / math.sqrt(d), v, _naive_mask(t, t, 0))
    assert_close(out, expect, **EXACT)
    # shared (J,) form too, and with a KV-cache offset
    out_tail = cmha(q[:, :, -4:], k, v, ones[0], zeros[0], omega=omega, q_offset=t - 4)
    assert_close(out_tail, expect[:, :, -4:], **EXACT)


# ----------------------------------------------------------------------------------------
# polar_components
# ----------------------------------------------------------------------------------------


def test_polar_components_formula():
    d, t, n_head = 8, 6, 2
    x = torch.randn(3, n_head, t, d, generator=_gen(31), dtype=F64)
    delta = torch.randn(n_head, d // 2, generator=_gen(32), dtype=F64)
    bias = torch.randn(n_head, d // 2, generator=_gen(33), dtype=F64)
    omega = rope_frequencies(d).to(F64)
    lam, phase = polar_components(x, delta, bias, 4, omega)
    lam_e = torch.empty(3, n_head, t, d // 2, dtype=F64)
    ph_e = torch.empty_like(lam_e)
    xl = x.tolist()
    for b in range(3):
        for h in range(n_head):
            for m in range(t):
                for j in range(d // 2):
                    x0, x1 = xl[b][h][m][2 * j], xl[b][h][m][2 * j + 1]
                    lam_e[b, h, m, j] = math.hypot(x0, x1)
                    ph_e[b, h, m, j] = (
                        float(delta[h, j]) * math.atan2(x1, x0)
                        + float(bias[h, j])
                        + (4 + m) * float(omega[j])
                    )
    assert_close(lam, lam_e, **EXACT)
    assert_close(phase, ph_e, **EXACT)


def test_polar_components_phase_float32_for_bf16():
    d = 16
    x = torch.randn(1, 2, 40, d, generator=_gen(34)).bfloat16()
    delta, bias = torch.randn(2, d // 2), torch.randn(2, d // 2)
    omega = rope_frequencies(d)
    lam, phase = polar_components(x, delta, bias, 1000, omega)
    assert lam.dtype == torch.float32 and phase.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        lam_a, phase_a = polar_components(x, delta, bias, 1000, omega)
    assert lam_a.dtype == torch.float32 and phase_a.dtype == torch.float32
    # the phase is the float32 value of the formula on the bf16 inputs (positions ~1000:
    # bf16 has a spacing of 4-8 there, so a bf16 phase would be off by radians)
    xd = x.double()
    ph_e = (
        delta.double().unsqueeze(-2) * torch.atan2(xd[..., 1::2], xd[..., 0::2])
        + bias.double().unsqueeze(-2)
        + torch.arange(1000, 1040, dtype=F64)[:, None] * omega.double()
    )
    assert_close(phase_a.double(), ph_e, atol=2e-3, rtol=0)


# ----------------------------------------------------------------------------------------
# Relative position invariance
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("shift", [1, 37, 1000])
def test_scores_invariant_under_position_shift(shift):
    d, t, n_head = 16, 10, 3
    q, k, _, delta, bias = _inputs(41, 2, n_head, t, t, d)
    omega = rope_frequencies(d).to(F64)
    pos = torch.arange(t)

    def cmha_scores(p_q, p_k):
        qr = polar_rotate(q, delta, bias, p_q, omega)
        kr = polar_rotate(k, delta, None, p_k, omega)
        return qr @ kr.transpose(-1, -2)

    def rope_scores(p_q, p_k):
        return apply_rope(q, p_q, omega) @ apply_rope(k, p_k, omega).transpose(-1, -2)

    s0 = cmha_scores(pos, pos)
    assert_close(
        s0 / math.sqrt(d),
        _naive_cmha_scores(q, k, delta, bias, omega, q_offset=0, scale=1 / math.sqrt(d)),
        **EXACT,
    )
    assert_close(cmha_scores(pos + shift, pos + shift), s0, atol=1e-9, rtol=0)
    assert_close(cmha_scores(shift, shift), s0, atol=1e-9, rtol=0)  # int-offset form
    r0 = rope_scores(pos, pos)
    assert_close(rope_scores(pos + shift, pos + shift), r0, atol=1e-9, rtol=0)
    assert_close(rope_scores(shift, shift), r0, atol=1e-9, rtol=0)
    # non-vacuous: shifting only the queries changes the scores
    assert (cmha_scores(pos + shift, pos) - s0).abs().max() > 1e-3
    assert (rope_scores(pos + shift, pos) - r0).abs().max() > 1e-3


# ----------------------------------------------------------------------------------------
# Zero pairs / zero vectors
# ----------------------------------------------------------------------------------------


def test_zero_pairs_finite_outputs_and_gradients():
    d, t, n_head = 8, 6, 2
    q, k, v, delta, bias = _inputs(51, 1, n_head, t, t, d)
    q[0, 0, 1, 2:4] = 0.0  # one pair
    q[0, 1, 3, :] = 0.0  # whole vector
    k[0, 0, 2, 0:2] = 0.0
    k[0, 1, 0, :] = 0.0
    k[0, 0, 4, 4:6] = 0.0
    omega = rope_frequencies(d).to(F64)
    leaves = [t_.clone().requires_grad_(True) for t_ in (q, k, v, delta, bias)]
    out = cmha(*leaves, omega=omega, q_offset=0)
    assert torch.isfinite(out).all()
    # forward still equals the literal formula (a zero pair contributes 0 to the score)
    loops = _naive_cmha_loops(q, k, v, delta, bias, omega, causal=True, q_offset=0, scale=d**-0.5)
    assert_close(out.detach(), loops, **EXACT)
    # a zero query attends uniformly over its causal window
    assert_close(out[0, 1, 3].detach(), v[0, 1, :4].mean(0), **EXACT)
    w = torch.randn(out.shape, generator=_gen(52), dtype=F64)
    grads = torch.autograd.grad((out * w).sum(), leaves)
    for name, g in zip(("q", "k", "v", "delta", "bias"), grads, strict=True):
        assert torch.isfinite(g).all(), name
    # polar_rotate alone
    x = q.clone().requires_grad_(True)
    dl, b = delta.clone().requires_grad_(True), bias.clone().requires_grad_(True)
    xr = polar_rotate(x, dl, b, 0, omega)
    assert torch.isfinite(xr).all()
    assert (xr[0, 1, 3] == 0).all() and (xr[0, 0, 1, 2:4] == 0).all()
    gx, gd, gb = torch.autograd.grad((xr * torch.randn_like(xr)).sum(), (x, dl, b))
    assert torch.isfinite(gx).all() and torch.isfinite(gd).all() and torch.isfinite(gb).all()


def test_zero_input_float32_and_all_zero():
    d = 8
    z = torch.zeros(1, 2, 5, d, requires_grad=True)
    delta = torch.randn(2, d // 2, requires_grad=True)
    bias = torch.randn(2, d // 2, requires_grad=True)
    v = torch.randn(1, 2, 5, 3)
    out = cmha(z, z, v, delta, bias, omega=rope_frequencies(d))
    assert torch.isfinite(out).all()
    gz, gd, gb = torch.autograd.grad(out.sum(), (z, delta, bias))
    for g in (gz, gd, gb):
        assert torch.isfinite(g).all()


# ----------------------------------------------------------------------------------------
# Branch cut (documented behaviour, eq. 2: theta in (-pi, pi])
# ----------------------------------------------------------------------------------------


def test_branch_cut_jump_for_non_unit_delta():
    omega = torch.ones(1, dtype=F64)
    k = torch.tensor([1.0, 0.0], dtype=F64).view(1, 1, 1, 2)
    eps = 1e-9
    q_above = torch.tensor([-1.0, eps], dtype=F64).view(1, 1, 1, 2)  # theta ~ +pi
    q_below = torch.tensor([-1.0, -eps], dtype=F64).view(1, 1, 1, 2)  # theta ~ -pi
    delta = torch.tensor([0.5], dtype=F64)

    def score(qx):
        qr = polar_rotate(qx, delta, None, 0, omega)
        kr = polar_rotate(k, delta, None, 0, omega)
        return float((qr * kr).sum())

    # cos(0.5 * pi) = 0 either way, so use a bias to see the jump: cos(+-pi/2 + b)
    b = torch.tensor([0.3], dtype=F64)

    def score_b(qx):
        qr = polar_rotate(qx, delta, b, 0, omega)
        kr = polar_rotate(k, delta, None, 0, omega)
        return float((qr * kr).sum())

    assert score(q_above) == pytest.approx(0.0, abs=1e-8)
    assert score_b(q_above) == pytest.approx(math.cos(math.pi / 2 + 0.3), abs=1e-8)
    assert score_b(q_below) == pytest.approx(math.cos(-math.pi / 2 + 0.3), abs=1e-8)
    # delta = 1 (RoPE) has no jump
    one = torch.ones(1, dtype=F64)
    s_a = (polar_rotate(q_above, one, None, 0, omega) * k).sum()
    s_b = (polar_rotate(q_below, one, None, 0, omega) * k).sum()
    assert float(s_a) == pytest.approx(float(s_b), abs=1e-8)


# ----------------------------------------------------------------------------------------
# bf16 autocast
# ----------------------------------------------------------------------------------------


def test_cmha_bf16_autocast_close_to_float32():
    bsz, n_head, t, d = 1, 2, 512, 32
    g = _gen(61)
    q, k, v = (torch.randn(bsz, n_head, t, d, generator=g).bfloat16() for _ in range(3))
    delta = torch.randn(n_head, d // 2, generator=g)  # fp32 parameters, as in a module
    bias = torch.randn(n_head, d // 2, generator=g)
    omega = rope_frequencies(d)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = cmha(q, k, v, delta, bias, omega=omega)
    assert out.shape == (bsz, n_head, t, d)
    assert torch.isfinite(out).all()
    # float32 reference on the same (bf16-rounded) inputs, so only compute error is measured.
    ref = cmha(q.float(), k.float(), v.float(), delta, bias, omega=omega)
    # Tolerance: outputs are convex combinations of N(0, 1) values (|out| <~ 3). The rotated
    # q', k' are stored in bf16 (relative error 2^-9 ~ 2e-3), giving score errors of a few
    # 1e-3 and output errors of the same order, plus the final bf16 rounding of the output
    # (~2^-9 * 3 ~ 6e-3). Observed max error ~6e-3; 2e-2 leaves margin while still failing if
    # the phase were computed in bf16 (positions up to 511 have bf16 spacing 2-4 rad, which
    # scrambles the rotation and gives O(0.3) errors, checked below).
    assert_close(out.float(), ref, atol=2e-2, rtol=0)

    # Negative control: the same computation with bf16 phases misses this tolerance.
    def rot_bf16(x, dl, b):
        re, im = x[..., 0::2], x[..., 1::2]
        ph = torch.atan2(im, re) * dl.bfloat16().unsqueeze(-2)
        if b is not None:
            ph = ph + b.bfloat16().unsqueeze(-2)
        ph = ph + torch.arange(t).bfloat16()[:, None] * omega.bfloat16()
        lam = torch.sqrt(re * re + im * im)
        return torch.stack((lam * torch.cos(ph), lam * torch.sin(ph)), -1).flatten(-2)

    bad = F.scaled_dot_product_attention(
        rot_bf16(q, delta, bias), rot_bf16(k, delta, None), v, is_causal=True
    )
    assert (bad.float() - ref).abs().max() > 5e-2


# ----------------------------------------------------------------------------------------
# Shapes and bad inputs
# ----------------------------------------------------------------------------------------


def test_cmha_shapes_tq_ne_tk_and_dv_ne_d():
    q, k, v, delta, bias = _inputs(71, 2, 4, 3, 9, 8, d_v=5)
    omega = rope_frequencies(8).to(F64)
    out = cmha(q, k, v, delta, bias, omega=omega, q_offset=6)
    assert out.shape == (2, 4, 3, 5)
    naive = _naive_cmha(q, k, v, delta, bias, omega, causal=True, q_offset=6, scale=8**-0.5)
    assert_close(out, naive, **EXACT)
    out_nc = cmha(q, k, v, delta, bias, omega=omega, is_causal=False, q_offset=2)
    assert out_nc.shape == (2, 4, 3, 5)


def test_cmha_odd_head_dim_raises():
    q = torch.randn(1, 2, 4, 7)
    delta = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="7"):
        cmha(q, q, q, delta, delta, omega=torch.ones(3))


@pytest.mark.parametrize("bad_shape", [(3, 4), (2, 3), (5,), (1, 2, 4)])
@pytest.mark.parametrize("which", ["delta", "bias"])
def test_cmha_bad_parameter_shape_raises(bad_shape, which):
    q = torch.randn(1, 2, 4, 8)
    good = torch.zeros(2, 4)
    bad = torch.zeros(*bad_shape)
    args = (bad, good) if which == "delta" else (good, bad)
    with pytest.raises(ValueError, match=rf"{which}.*{re.escape(str(bad_shape))}"):
        cmha(q, q, q, *args, omega=torch.ones(4))


def test_polar_rotate_odd_dim_raises():
    with pytest.raises(ValueError, match="7"):
        polar_rotate(torch.randn(2, 7), None, None, 0, torch.ones(3))
    with pytest.raises(ValueError, match="7"):
        apply_rope(torch.randn(2, 7), 0, torch.ones(3))


# ----------------------------------------------------------------------------------------
# Masks, ALiBi and plain attention
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("t_q,t_k,off", [(4, 4, 0), (3, 8, 5), (1, 6, 5), (2, 5, 1)])
def test_causal_mask_with_offset(t_q, t_k, off):
    m = causal_mask(t_q, t_k, off)
    assert m.dtype == torch.bool and m.shape == (t_q, t_k)
    assert torch.equal(m, _naive_mask(t_q, t_k, off))


def test_alibi_slopes_closed_form():
    assert_close(
        alibi_slopes(8), torch.tensor([2.0 ** (-8 * i / 8) for i in range(1, 9)]), atol=0, rtol=0
    )
    for n in (1, 2, 4, 16):
        expect = torch.tensor([2.0 ** (-8 * i / n) for i in range(1, n + 1)])
        assert_close(alibi_slopes(n), expect, atol=0, rtol=1e-6)
    # non power of two (Press et al. reference code): 4 slopes for n=4, then every other of n=8
    expect6 = torch.tensor([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3])
    assert_close(alibi_slopes(6), expect6, atol=0, rtol=1e-6)


@pytest.mark.parametrize("t_q,t_k,off", [(5, 5, 0), (3, 8, 5)])
def test_alibi_bias_formula(t_q, t_k, off):
    slopes = alibi_slopes(4)
    b = alibi_bias(slopes, t_q, t_k, q_offset=off)
    assert b.shape == (4, t_q, t_k)
    for h in range(4):
        for m in range(t_q):
            for n in range(t_k):
                assert float(b[h, m, n]) == pytest.approx(
                    -float(slopes[h]) * ((off + m) - n), rel=1e-6, abs=1e-12
                )


@pytest.mark.parametrize("t_q,t_k", [(6, 6), (1, 6), (3, 9)])
@pytest.mark.parametrize("causal", [True, False])
def test_attention_with_alibi_matches_naive(t_q, t_k, causal):
    n_head, d = 4, 8
    g = _gen(81)
    q = torch.randn(2, n_head, t_q, d, generator=g, dtype=F64)
    k = torch.randn(2, n_head, t_k, d, generator=g, dtype=F64)
    v = torch.randn(2, n_head, t_k, 5, generator=g, dtype=F64)
    off = t_k - t_q
    bias = alibi_bias(alibi_slopes(n_head), t_q, t_k, q_offset=off)
    out = attention(q, k, v, is_causal=causal, q_offset=off, bias=bias)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d) + bias.to(F64)
    mask = _naive_mask(t_q, t_k, off) if causal else None
    expect = _naive_softmax_attn(scores, v, mask)
    assert_close(out, expect, **EXACT)
    no_bias = attention(q, k, v, is_causal=causal, q_offset=off)
    assert (no_bias - out).abs().max() > 1e-3  # the bias is actually applied


@pytest.mark.parametrize("t_q,t_k,off", [(6, 6, 0), (1, 1, 0), (1, 7, 6), (3, 7, 4), (3, 7, 1)])
@pytest.mark.parametrize("causal", [True, False])
def test_attention_plain_matches_naive(t_q, t_k, off, causal):
    g = _gen(91)
    q = torch.randn(1, 2, t_q, 8, generator=g, dtype=F64)
    k = torch.randn(1, 2, t_k, 8, generator=g, dtype=F64)
    v = torch.randn(1, 2, t_k, 3, generator=g, dtype=F64)
    out = attention(q, k, v, is_causal=causal, q_offset=off, scale=0.5)
    mask = _naive_mask(t_q, t_k, off) if causal else None
    assert_close(out, _naive_softmax_attn(q @ k.transpose(-1, -2) * 0.5, v, mask), **EXACT)


def test_rope_frequencies_are_the_float64_formula_rounded_once():
    # computed in float64 and rounded to float32 once (a float32 power is off by an ulp for
    # some j at D = 64 and 128)
    for d in (8, 64, 128):
        for schedule, denom in (("rope", d), ("paper", d // 2)):
            want = torch.tensor([10000.0 ** (-2 * j / denom) for j in range(d // 2)], dtype=F64)
            assert torch.equal(rope_frequencies(d, schedule=schedule), want.float())


def test_rope_frequencies_base_and_messages():
    for bad in (0, 0.0, -2.0):
        with pytest.raises(ValueError, match=rf"^rope base must be > 0, got {bad!r}$"):
            rope_frequencies(8, base=bad)
    assert_close(rope_frequencies(4, base=0.5), torch.tensor([1.0, 2**0.5]), atol=0, rtol=1e-6)
    with pytest.raises(ValueError, match=r"^unknown omega schedule 'x'; known: rope, paper$"):
        rope_frequencies(8, schedule="x")


def test_rope_tensors_stay_on_the_requested_device():
    # the meta device stands in for an accelerator: a tensor made on the CPU instead would
    # not mix with it
    meta = torch.device("meta")
    om = rope_frequencies(8, device=meta)
    assert om.device == meta and om.dtype == torch.float32 and om.shape == (4,)
    x = torch.zeros(2, 5, 8, device=meta)
    for positions in (3, torch.arange(5)):
        for omega in (om, rope_frequencies(8)):  # omega is moved to x's device
            for layout in ("interleaved", "halves"):
                out = apply_rope(x, positions, omega, layout)
                assert out.device == meta and out.shape == x.shape


def test_as_positions_is_a_float_tensor_of_the_requested_dtype():
    from complexformer.attention.rotary import as_positions

    for dt in (torch.float32, F64):
        p = as_positions(3, 4, torch.device("cpu"), dt)
        assert p.dtype == dt and p.tolist() == [3.0, 4.0, 5.0, 6.0]
        q = as_positions(torch.tensor([[7, 1, 2]]), 3, torch.device("cpu"), dt)
        assert q.dtype == dt and q.tolist() == [[7.0, 1.0, 2.0]]
        assert as_positions(2, 3, torch.device("meta"), dt).device.type == "meta"
        assert as_positions(torch.arange(3), 3, torch.device("meta"), dt).device.type == "meta"
    x = torch.randn(1, 3, 8, generator=_gen(61))
    om = rope_frequencies(8)
    for bad in (2.5, [0, 1, 2], torch.tensor(4)):
        with pytest.raises(
            ValueError, match=r"^positions must be an int offset or a \(\.\.\., T\)"
        ):
            apply_rope(x, bad, om)


def test_apply_rope_shapes_dtypes_and_batched_positions():
    d, t = 8, 5
    om = rope_frequencies(d).to(F64)
    x = torch.randn(2, 3, t, d, generator=_gen(62), dtype=F64)
    # 3-D and 5-D inputs: T is the second last dimension whatever the rank
    assert_close(apply_rope(x[0], 4, om), apply_rope(x, 4, om)[0], **EXACT)
    assert_close(apply_rope(x[None], 4, om)[0], apply_rope(x, 4, om), **EXACT)
    # per-row positions (B, 1, T): each batch row rotated by its own positions
    pos = torch.tensor([[0, 1, 2, 3, 4], [9, 7, 5, 3, 1]])
    got = apply_rope(x, pos[:, None, :], om)
    for b in range(2):
        assert_close(got[b], _naive_rope(x[b], pos[b], om), **EXACT)
    # half-precision inputs: rotated in float32, returned in their own dtype
    xb = x.bfloat16()
    for layout in ("interleaved", "halves"):
        out = apply_rope(xb, 3, om.float(), layout)
        assert out.dtype == torch.bfloat16
        assert torch.equal(out, apply_rope(xb.float(), 3, om.float(), layout).bfloat16())
    # float32 input: the angles are float32 even for float64 frequencies
    x32 = x.float()
    assert torch.equal(apply_rope(x32, 5000, om), apply_rope(x32, 5000, om.float()))
    assert not torch.equal(apply_rope(x32, 5000, om), apply_rope(x, 5000, om).float())
    with pytest.raises(ValueError, match="^the last dimension of x must be even, got 7$"):
        apply_rope(torch.zeros(1, 4, 5, 7), 0, om)


def test_polar_angles_values_zero_pairs_and_defaults():
    from complexformer.attention.polar import polar_angles

    # pairs on the axes, a zero pair, a generic one: (re, im) interleaved
    x = torch.tensor([[0.0, 2.0, -3.0, 0.0, 0.0, 0.0, 3.0, -4.0]], dtype=F64, requires_grad=True)
    lam, theta = polar_angles(x)  # default layout: interleaved
    assert_close(lam, torch.tensor([[2.0, 3.0, 0.0, 5.0]], dtype=F64), **EXACT)
    want = torch.tensor([[math.pi / 2, math.pi, 0.0, math.atan2(-4.0, 3.0)]], dtype=F64)
    assert_close(theta, want, **EXACT)
    # a zero pair has zero gradients for both (no 0/0); the others are d|z| and d arg z
    (gl,) = torch.autograd.grad(lam.sum(), x, retain_graph=True)
    (gt,) = torch.autograd.grad(theta.sum(), x)
    assert_close(gl, torch.tensor([[0.0, 1.0, -1.0, 0.0, 0.0, 0.0, 0.6, -0.8]], dtype=F64), **EXACT)
    want_gt = [-0.5, 0.0, 0.0, -1 / 3, 0.0, 0.0, 4 / 25, 3 / 25]
    assert_close(gt, torch.tensor([want_gt], dtype=F64), **EXACT)
    with pytest.raises(ValueError, match="^the last dimension of x must be even, got 7$"):
        polar_angles(torch.zeros(2, 4, 5, 7))
    lam5, _ = polar_angles(torch.ones(2, 4, 5, 8))  # an odd T is fine
    assert lam5.shape == (2, 4, 5, 4)
    # half precision in either layout: float32 results, the float32 values of the formula
    xb = torch.randn(2, 5, 8, generator=_gen(71)).bfloat16()
    for layout in ("interleaved", "halves"):
        lb, tb = polar_angles(xb, layout)
        assert lb.dtype == tb.dtype == torch.float32
        l32, t32 = polar_angles(xb.float(), layout)
        assert torch.equal(lb, l32) and torch.equal(tb, t32)


def test_polar_from_components_default_layout_and_dtype():
    from complexformer.attention.polar import polar_from_components

    lam = torch.tensor([[2.0, 1.0]])
    phase = torch.tensor([[0.0, math.pi / 2]])
    out = polar_from_components(lam, phase, torch.bfloat16)
    assert out.dtype == torch.bfloat16
    assert_close(out.float(), torch.tensor([[2.0, 0.0, 0.0, 1.0]]), atol=1e-6, rtol=0)
    assert_close(
        polar_from_components(lam, phase, torch.float32, "halves"),
        torch.tensor([[2.0, 0.0, 0.0, 1.0]])[:, [0, 2, 1, 3]],
        atol=1e-6,
        rtol=0,
    )


def _plain_rotation(x, delta, bias, positions, omega):
    """l·(cos A, sin A), A = δ·atan2(x_im, x_re) + b + p·ω, interleaved pairs (float64)."""
    re, im = x[..., 0::2], x[..., 1::2]
    theta = torch.atan2(im, re)
    if delta is not None:
        theta = theta * (delta[..., None, :] if isinstance(delta, torch.Tensor) else delta)
    if bias is not None:
        theta = theta + bias[..., None, :]
    phase = theta + positions[..., :, None].to(F64) * omega
    lam = torch.sqrt(re * re + im * im)
    return torch.stack((lam * torch.cos(phase), lam * torch.sin(phase)), -1).flatten(-2)


def test_polar_rotate_scalar_delta_shapes_and_positions():
    # (B, H, T, D) with B, H, T, D all different; 3-D input; per-row positions
    d = 8
    x = torch.randn(2, 6, 5, d, generator=_gen(72), dtype=F64)
    bias = torch.randn(6, d // 2, generator=_gen(73), dtype=F64)
    om = rope_frequencies(d).to(F64)
    pos = torch.arange(3, 8)
    for dl in (0.7, 2, None):
        want = _plain_rotation(x, dl, bias, pos, om)
        assert_close(polar_rotate(x, dl, bias, 3, om), want, **EXACT)
        lam, phase = polar_components(x, dl, bias, 3, om)
        assert_close(polar_from_components_ref(lam, phase), want, **EXACT)
    x3 = x[0]  # (H, T, D): T is the second last dimension
    assert_close(
        polar_rotate(x3, 0.7, bias, 3, om), _plain_rotation(x3, 0.7, bias, pos, om), **EXACT
    )
    assert_close(polar_rotate(x3, 0.7, bias, pos, om), polar_rotate(x3, 0.7, bias, 3, om), **EXACT)
    lam3, ph3 = polar_components(x3, 0.7, bias, 3, om)
    assert lam3.shape == ph3.shape == (6, 5, d // 2)
    rows = torch.tensor([[0, 1, 2, 3, 4], [9, 7, 5, 3, 1]])  # (B, 1, T) per batch row
    got = polar_rotate(x, 0.7, bias, rows[:, None, :], om)
    _, ph_rows = polar_components(x, 0.7, bias, rows[:, None, :], om)
    for b in range(2):
        assert_close(got[b], _plain_rotation(x[b], 0.7, bias, rows[b], om), **EXACT)
        _, ph_b = polar_components(x[b], 0.7, bias, rows[b], om)
        assert_close(ph_rows[b], ph_b, **EXACT)
    with pytest.raises(ValueError, match="^the last dimension of x must be even, got 7$"):
        polar_rotate(torch.zeros(2, 4, 5, 7), None, None, 0, rope_frequencies(6))


def polar_from_components_ref(lam, phase):
    return torch.stack((lam * torch.cos(phase), lam * torch.sin(phase)), -1).flatten(-2)


def test_polar_rotate_float32_casts_every_parameter_first():
    # float32 x with float64 δ, b, ω: everything is computed in float32, exactly as with
    # float32 parameters (values, and the gradients of x, δ and b)
    d = 8
    g = _gen(74)
    x = torch.randn(2, 3, 40, d, generator=g)
    w = torch.randn(2, 3, 40, d, generator=g)
    delta = 1 + 0.3 * torch.randn(3, d // 2, generator=g, dtype=F64)
    bias = torch.randn(3, d // 2, generator=g, dtype=F64)
    om = rope_frequencies(d).to(F64)

    def run(dl, b, o):
        leaves = [
            x.clone().requires_grad_(),
            dl.clone().requires_grad_(),
            b.clone().requires_grad_(),
        ]
        out = polar_rotate(leaves[0], leaves[1], leaves[2], 1000, o)
        return out, torch.autograd.grad((out * w).sum(), leaves)

    out64, g64 = run(delta, bias, om)
    out32, g32 = run(delta.float(), bias.float(), om.float())
    assert out64.dtype == torch.float32
    assert torch.equal(out64, out32)
    assert g64[1].dtype == g64[2].dtype == F64
    for a, b in zip(g64, g32, strict=True):
        assert torch.equal(a, b.to(a.dtype))
    lam, phase = polar_components(x, delta, bias, 1000, om)
    lam32, phase32 = polar_components(x, delta.float(), bias.float(), 1000, om.float())
    assert phase.dtype == torch.float32 and torch.equal(phase, phase32) and torch.equal(lam, lam32)
    # bf16 x: the backward computes in float32 too
    xb = x.bfloat16()
    wb = w.bfloat16()
    leaves = [xb.clone().requires_grad_(), delta.float().requires_grad_()]
    (polar_rotate(leaves[0], leaves[1], None, 0, om) * wb).sum().backward()
    ref = [xb.float().requires_grad_(), delta.float().requires_grad_()]
    (polar_rotate(ref[0], ref[1], None, 0, om) * wb.float()).sum().backward()
    assert leaves[0].grad.dtype == torch.bfloat16
    assert torch.equal(leaves[0].grad, ref[0].grad.bfloat16())
    assert torch.equal(leaves[1].grad, ref[1].grad)


def test_polar_rotate_gradients_with_some_parameters_absent_or_frozen():
    d = 8
    g = _gen(75)
    x = torch.randn(2, 3, 6, d, generator=g, dtype=F64)
    w = torch.randn(2, 3, 6, d, generator=g, dtype=F64)
    delta = torch.randn(3, d // 2, generator=g, dtype=F64)
    bias = torch.randn(3, d // 2, generator=g, dtype=F64)
    om = rope_frequencies(d).to(F64)
    pos = torch.arange(6)
    for dl, b, train in (
        (None, None, ()),
        (delta, None, ("delta",)),
        (None, bias, ("bias",)),
        (delta, bias, ("delta",)),
        (delta, bias, ("bias",)),
        (delta, bias, ()),
    ):
        args = {"delta": dl, "bias": b}
        leaves = {k: v.clone().requires_grad_(k in train) for k, v in args.items() if v is not None}
        xs = x.clone().requires_grad_()
        out = polar_rotate(xs, leaves.get("delta"), leaves.get("bias"), 0, om)
        want_leaves = {
            k: v.clone().requires_grad_(k in train) for k, v in args.items() if v is not None
        }
        xr = x.clone().requires_grad_()
        ref = _plain_rotation(xr, want_leaves.get("delta"), want_leaves.get("bias"), pos, om)
        assert_close(out, ref, **EXACT)
        (out * w).sum().backward()
        (ref * w).sum().backward()
        assert_close(xs.grad, xr.grad, atol=1e-10, rtol=1e-10)
        for k in leaves:
            if k in train:
                assert_close(leaves[k].grad, want_leaves[k].grad, atol=1e-10, rtol=1e-10)
            else:
                assert leaves[k].grad is None


def test_polar_tensors_stay_on_the_requested_device():
    meta = torch.device("meta")
    x = torch.zeros(2, 3, 5, 8, device=meta)
    dl = torch.ones(3, 4, device=meta)
    for omega in (rope_frequencies(8), rope_frequencies(8, device=meta)):
        for positions in (0, torch.arange(5)):
            lam, phase = polar_components(x, dl, dl, positions, omega)
            assert lam.device == phase.device == meta
            assert polar_rotate(x, dl, dl, positions, omega).device == meta
            assert polar_rotate(x, 0.5, None, positions, omega).device == meta
    # a float δ becomes a (J,) tensor on x's device (kept for the backward)
    xg = x.clone().requires_grad_()
    saved = polar_rotate(xg, 0.5, None, 0, rope_frequencies(8)).grad_fn.saved_tensors
    assert saved[1].device == meta and saved[1].shape == (4,) and saved[1].dtype == torch.float32
