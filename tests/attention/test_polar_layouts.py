"""The "halves" pair layout and the compiled path of the polar rotation."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from complexformer.attention import (
    apply_rope,
    cmha,
    cmha_reference,
    polar_components,
    polar_from_components,
    polar_rotate,
    rope_frequencies,
)


def to_interleaved(x: torch.Tensor) -> torch.Tensor:
    """(x[j], x[j+J]) pairs -> (x[2j], x[2j+1]) pairs, by explicit index permutation."""
    j = x.shape[-1] // 2
    perm = [i // 2 + (i % 2) * j for i in range(2 * j)]
    return x[..., perm]


def inputs(seed=0, b=2, h=3, t=11, d=8):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, h, t, d, generator=g, dtype=torch.float64) for _ in range(3))
    delta = torch.randn(h, d // 2, generator=g, dtype=torch.float64)
    bias = torch.randn(h, d // 2, generator=g, dtype=torch.float64)
    return q, k, v, delta, bias, rope_frequencies(d).double()


def test_halves_is_a_permutation_of_interleaved():
    q, k, v, delta, bias, om = inputs()
    half = cmha(q, k, v, delta, bias, omega=om, layout="halves", q_offset=0)
    inter = cmha(to_interleaved(q), to_interleaved(k), v, delta, bias, omega=om)
    assert_close(half, inter, atol=1e-12, rtol=0)
    assert_close(
        half, cmha_reference(q, k, v, delta, bias, omega=om, layout="halves"), atol=1e-10, rtol=0
    )
    rot = polar_rotate(q, delta, bias, 3, om, layout="halves")
    assert_close(to_interleaved(rot), polar_rotate(to_interleaved(q), delta, bias, 3, om))
    rope = apply_rope(q, 5, om, layout="halves")
    assert_close(to_interleaved(rope), apply_rope(to_interleaved(q), 5, om))


@pytest.mark.parametrize("layout", ["interleaved", "halves"])
def test_analytic_backward_matches_autograd(layout):
    q, _, _, delta, bias, om = inputs(seed=1, t=300)  # several T-chunks are not needed here
    q[0, 0, 0, :] = 0.0  # a zero vector: finite gradients
    w = torch.randn_like(q)
    leaves = [t.clone().requires_grad_() for t in (q, delta, bias)]
    (polar_rotate(leaves[0], leaves[1], leaves[2], 7, om, layout) * w).sum().backward()
    ref = [t.clone().requires_grad_() for t in (q, delta, bias)]
    lam, ph = polar_components(ref[0], ref[1], ref[2], 7, om, layout)
    (polar_from_components(lam, ph, q.dtype, layout) * w).sum().backward()
    for a, b in zip(leaves, ref, strict=True):
        assert torch.isfinite(a.grad).all()
        mask = torch.ones_like(a.grad, dtype=torch.bool)
        if a.shape == q.shape:  # at the zero vector the two choose different subgradients
            mask[0, 0, 0, :] = False
        assert_close(a.grad[mask], b.grad[mask], atol=1e-10, rtol=1e-10)


def test_chunked_rotation_equals_unchunked(monkeypatch):
    import complexformer.attention.polar as polar_mod

    q, _, _, delta, bias, om = inputs(seed=2, t=64)
    q.requires_grad_()
    out1 = polar_rotate(q, delta, bias, 0, om)
    (g1,) = torch.autograd.grad(out1.sum(), q)
    monkeypatch.setattr(polar_mod, "_CHUNK_ELEMS_CPU", 100)  # many chunks of a few rows
    out2 = polar_rotate(q, delta, bias, 0, om)
    (g2,) = torch.autograd.grad(out2.sum(), q)
    assert_close(out1, out2, atol=0, rtol=0)
    assert_close(g1, g2, atol=0, rtol=0)


def test_unknown_layout():
    q, _, _, delta, bias, om = inputs()
    with pytest.raises(ValueError, match="unknown pair layout 'pairs'; known: interleaved, halves"):
        polar_rotate(q, delta, bias, 0, om, layout="pairs")


@pytest.mark.slow
def test_compiled_cmha_matches_eager():
    q, k, v, delta, bias, om = (t.float() for t in inputs(seed=3, t=32, d=16))
    leaves = [t.clone().requires_grad_() for t in (q, k, v, delta, bias)]

    def f(q, k, v, d, b):
        return cmha(q, k, v, d, b, omega=om, layout="halves")

    eager = f(*leaves)
    grads = torch.autograd.grad(eager.sum(), leaves)
    compiled = torch.compile(f)(*leaves)
    cgrads = torch.autograd.grad(compiled.sum(), leaves)
    assert_close(compiled, eager, atol=1e-5, rtol=1e-5)
    for a, b in zip(cgrads, grads, strict=True):
        assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_bad_positions_and_scalar_delta():
    q, k, v, delta, bias, om = inputs(t=5)
    with pytest.raises(ValueError, match="positions has 4 entries .* T = 5"):
        polar_rotate(q, delta, bias, torch.arange(4), om)
    with pytest.raises(ValueError, match="positions has 4 entries .* T = 5"):
        apply_rope(q, torch.arange(4), om)
    with pytest.raises(ValueError, match="delta must be a tensor of shape"):
        cmha(q, k, v, 1.0, bias, omega=om)
    # a tensor of the right length works, and equals the int offset form
    assert_close(
        polar_rotate(q, delta, bias, torch.arange(3, 8), om), polar_rotate(q, delta, bias, 3, om)
    )


@pytest.mark.parametrize("layout", ["interleaved", "halves"])
def test_delta_and_bias_gradients_sum_over_every_t_chunk(layout):
    """dL/dδ and dL/db sum over all positions: with T spanning several chunks of the analytic
    backward (the real chunk size, not a patched one), they equal autograd of the plain
    formula l·(cos A, sin A), A = δ·atan2(x_im, x_re) + b + p·ω (eq. 1-4, 7), in float64."""
    import complexformer.attention.polar as polar_mod

    b, h, d = 1, 2, 4
    t = 3 * polar_mod._CHUNK_ELEMS_CPU // (b * h * d) + 5  # three full chunks and a short one
    g = torch.Generator().manual_seed(7)
    x = torch.randn(b, h, t, d, generator=g, dtype=torch.float64)
    delta = 1.0 + 0.5 * torch.randn(h, d // 2, generator=g, dtype=torch.float64)
    bias = torch.randn(h, d // 2, generator=g, dtype=torch.float64)
    om = rope_frequencies(d).double()
    w = torch.randn(b, h, t, d, generator=g, dtype=torch.float64)
    assert len(polar_mod._t_chunks(x)) == 4
    leaves = [z.clone().requires_grad_() for z in (delta, bias)]
    (polar_rotate(x, leaves[0], leaves[1], 0, om, layout) * w).sum().backward()
    ref = [z.clone().requires_grad_() for z in (delta, bias)]
    xi = to_interleaved(x) if layout == "halves" else x
    re, im = xi[..., 0::2], xi[..., 1::2]  # (B, H, T, J)
    pos = torch.arange(t, dtype=torch.float64)[:, None]
    phase = ref[0][:, None, :] * torch.atan2(im, re) + ref[1][:, None, :] + pos * om
    lam = torch.sqrt(re * re + im * im)
    out = torch.stack((lam * torch.cos(phase), lam * torch.sin(phase)), -1).flatten(-2)
    wi = to_interleaved(w) if layout == "halves" else w
    (out * wi).sum().backward()
    assert_close(leaves[0].grad, ref[0].grad, atol=1e-8, rtol=1e-9)
    assert_close(leaves[1].grad, ref[1].grad, atol=1e-8, rtol=1e-9)


def _plain_polar(x, delta, bias, t0, om, layout):
    """l·(cos A, sin A) with A = δ·atan2(im, re) + b + p·ω, pairs split by hand (float64)."""
    j = x.shape[-1] // 2
    if layout == "halves":
        re, im = x[..., :j], x[..., j:]
    else:
        re, im = x[..., 0::2], x[..., 1::2]
    pos = torch.arange(t0, t0 + x.shape[-2], dtype=torch.float64)[:, None]
    theta = torch.atan2(im, re)
    if delta is not None:
        theta = theta * (delta[..., None, :] if isinstance(delta, torch.Tensor) else delta)
    if bias is not None:
        theta = theta + bias[..., None, :]
    phase = theta + pos * om
    lam = torch.sqrt(re * re + im * im)
    c, s = lam * torch.cos(phase), lam * torch.sin(phase)
    if layout == "halves":
        return torch.cat((c, s), -1)
    return torch.stack((c, s), -1).flatten(-2)


@pytest.mark.parametrize("layout", ["interleaved", "halves"])
def test_traced_path_is_the_plain_formula(layout, monkeypatch):
    """The branch that torch.compile traces (taken here by making is_compiling() true in eager
    mode): values and gradients equal the formula written out, for tensor, float and absent
    δ and b, like the analytic path."""
    q, _, _, delta, bias, om = inputs(seed=5, t=7)
    w = torch.randn(q.shape, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    cases = [(delta, bias), (0.7, bias), (None, None), (delta, None)]
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    for d, b in cases:
        leaves = [t.clone().requires_grad_() for t in (q, d, b) if isinstance(t, torch.Tensor)]
        args = iter(leaves[1:])
        dd = next(args) if isinstance(d, torch.Tensor) else d
        bb = next(args) if isinstance(b, torch.Tensor) else b
        out = polar_rotate(leaves[0], dd, bb, 3, om, layout)
        assert out.dtype == torch.float64 and out.shape == q.shape
        got = torch.autograd.grad((out * w).sum(), leaves)
        ref_leaves = [t.clone().requires_grad_() for t in leaves]
        args = iter(ref_leaves[1:])
        rd = next(args) if isinstance(d, torch.Tensor) else d
        rb = next(args) if isinstance(b, torch.Tensor) else b
        ref = _plain_polar(ref_leaves[0], rd, rb, 3, om, layout)
        want = torch.autograd.grad((ref * w).sum(), ref_leaves)
        assert_close(out, ref, atol=1e-12, rtol=0)
        for a, e in zip(got, want, strict=True):
            assert_close(a, e, atol=1e-10, rtol=1e-10)
    # float32 input: computed in float32, returned as float32; bf16 input stays bf16
    out32 = polar_rotate(q.float(), delta.float(), bias.float(), 3, om.float(), layout)
    assert out32.dtype == torch.float32
    assert_close(out32.double(), _plain_polar(q, delta, bias, 3, om, layout), atol=1e-5, rtol=0)
    assert polar_rotate(q.bfloat16(), delta, bias, 3, om, layout).dtype == torch.bfloat16


def test_join_pairs_stacks_other_dtypes():
    """The interleaving for dtypes torch.complex does not take (bf16, half): x[2j] = re[j],
    x[2j+1] = im[j] (the eager float32 / float64 path builds the same through complex)."""
    from complexformer.attention.rotary import join_pairs

    re = torch.arange(6.0).view(2, 3)
    im = -torch.arange(6.0).view(2, 3) - 10
    want = torch.tensor([[0.0, -10, 1, -11, 2, -12], [3, -13, 4, -14, 5, -15]])
    for dt in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
        got = join_pairs(re.to(dt), im.to(dt), "interleaved")
        assert got.dtype == dt
        assert_close(got.double(), want.double(), atol=0, rtol=0)
    assert_close(join_pairs(re, im, "halves"), torch.cat((re, im), -1), atol=0, rtol=0)


def test_t_chunks_cover_t_in_bounded_steps():
    import complexformer.attention.polar as polar_mod

    n = polar_mod._CHUNK_ELEMS_CPU  # 2**17 on CPU
    rows = n // 384  # 384 elements per row
    big = torch.zeros(1).expand(2, 3, rows + 100, 64)
    assert polar_mod._t_chunks(big) == [(0, rows), (rows, rows + 100)]
    wide = torch.zeros(1).expand(1, 1, 3, 2 * n)  # a row above the budget: one row per chunk
    assert polar_mod._t_chunks(wide) == [(0, 1), (1, 2), (2, 3)]
    assert polar_mod._t_chunks(torch.zeros(1, 5, 8)) == [(0, 5)]
    assert polar_mod._t_chunks(torch.zeros(1, 1, 8)) == [(0, 1)]
    assert polar_mod._t_chunks(torch.zeros(2, 0, 8)) == []
    # off the CPU (no cache blocking, fewer launches) the budget is _CHUNK_ELEMS
    rows = polar_mod._CHUNK_ELEMS // 384
    meta = torch.empty(2, 3, rows + 100, 64, device="meta")
    assert polar_mod._t_chunks(meta) == [(0, rows), (rows, rows + 100)]
