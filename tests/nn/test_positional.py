"""Complex positional encodings against their closed forms and against complextorch 2.1.1.

Closed forms (DESIGN.md, complextorch's position page), omega_k = base^(-k/d) computed here
independently in float64 with Python's math module.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

import complexformer.nn as cnn


def _omega(dim: int, base: float = 10000.0) -> torch.Tensor:
    return torch.tensor([base ** (-k / dim) for k in range(dim)], dtype=torch.float64)


def _phasor(omega: torch.Tensor, t: int, offset: int = 0, phi=None) -> torch.Tensor:
    n = torch.arange(offset, offset + t, dtype=torch.float64)[:, None]
    ang = n * omega[None, :] + (0.0 if phi is None else phi[None, :])
    return torch.polar(torch.ones_like(ang), ang)  # (T, d) complex128


def _crandn(*shape, dtype=torch.complex128, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=g)


@pytest.mark.parametrize("offset", [0, 7])
def test_nn_rotary_closed_form(offset):
    d = 8
    x = _crandn(2, 3, 5, d)
    rope = cnn.RotaryEmbedding(d, base=100.0)
    out = rope(x, offset=offset)
    assert out.shape == x.shape and out.dtype == torch.complex128
    assert_close(out, x * _phasor(_omega(d, 100.0), 5, offset), rtol=1e-6, atol=1e-6)
    q, k = rope.rotate_q_k(x, 2 * x, offset=offset)
    assert_close(q, out)
    assert_close(k, 2 * out)


def test_nn_rotary_scores_depend_only_on_relative_position():
    d, t = 8, 12
    q0, k0 = _crandn(d, seed=1), _crandn(d, seed=2)
    q = q0.expand(t, d).clone()  # the same content at every position
    k = k0.expand(t, d).clone()
    rope = cnn.RotaryEmbedding(d)
    for offset in (0, 5):
        qr, kr = rope.rotate_q_k(q, k, offset=offset)
        s = qr @ kr.conj().T  # (T, T), s[m, n] = sum_k q_k conj(k_k) e^{j w_k (m - n)}
        for delta in range(-t + 1, t):
            diag = torch.diagonal(s, offset=delta)
            assert_close(diag, diag[0].expand_as(diag), rtol=1e-10, atol=1e-10)
        expected = torch.stack(
            [
                (q0 * k0.conj() * torch.exp(1j * _omega(d) * (m - n))).sum()
                for m in range(t)
                for n in range(t)
            ]
        ).reshape(t, t)
        assert_close(s, expected, rtol=1e-9, atol=1e-9)


def test_nn_sinusoidal_closed_form():
    d = 6
    x = _crandn(2, 9, d)
    pe = cnn.SinusoidalPositionalEncoding(d)
    assert_close(pe(x), x + _phasor(_omega(d), 9), rtol=1e-6, atol=1e-6)
    assert_close(pe(x[:, 4:], offset=4), (x + _phasor(_omega(d), 9))[:, 4:], rtol=1e-6, atol=1e-6)
    assert not list(pe.parameters())


def test_nn_cope_closed_form_and_learnable():
    d = 5
    cope = cnn.CoPE(d).double()
    assert sum(p.numel() for p in cope.parameters()) == 2 * d
    assert all(p.requires_grad for p in cope.parameters())
    # at init: omega = base^(-k/d), phi = 0 -> the rotary embedding
    x = _crandn(3, 4, d)
    assert_close(cope(x), cnn.RotaryEmbedding(d)(x), rtol=1e-6, atol=1e-6)
    with torch.no_grad():
        cope.omega.copy_(torch.linspace(0.1, 1.3, d))
        cope.phi.copy_(torch.linspace(-1.0, 2.0, d))
    expected = x * _phasor(cope.omega.detach(), 4, 2, cope.phi.detach())
    assert_close(cope(x, offset=2), expected, rtol=1e-9, atol=1e-9)
    # learnable: gradients reach both omega and phi and a step changes the encoding
    loss = (cope(x, offset=1) * torch.conj(x[..., :1])).real.sum()
    loss.backward()
    assert cope.omega.grad.abs().sum() > 0 and cope.phi.grad.abs().sum() > 0
    before = cope(x).detach()
    torch.optim.SGD(cope.parameters(), lr=0.1).step()
    assert not torch.allclose(cope(x).detach(), before)


def test_nn_rotary_learnable_frequencies():
    rope = cnn.RotaryEmbedding(4, learnable=True)
    assert [n for n, _ in rope.named_parameters()] == ["inv_freq"]
    x = _crandn(1, 6, 4, dtype=torch.complex64)
    rope(x, offset=3).real.sum().backward()
    assert rope.inv_freq.grad is not None and torch.isfinite(rope.inv_freq.grad).all()
    assert not list(cnn.RotaryEmbedding(4).parameters())


def test_nn_positional_real_input_is_lifted_and_precision_kept():
    x = torch.randn(2, 5, 4)
    out = cnn.RotaryEmbedding(4)(x)
    assert out.dtype == torch.complex64
    assert_close(out, x.to(torch.complex64) * _phasor(_omega(4), 5).to(torch.complex64))
    assert cnn.SinusoidalPositionalEncoding(4)(x.double()).dtype == torch.complex128


def test_nn_rotary_large_positions_are_accurate():
    d = 4
    x = torch.ones(1, 3, d, dtype=torch.complex64)
    out = cnn.RotaryEmbedding(d)(x, offset=1_000_000)
    ref = _phasor(_omega(d), 3, 1_000_000).to(torch.complex64)
    assert_close(out[0], ref, rtol=0, atol=1e-6)


def test_nn_learned_positional_embedding():
    pe = cnn.LearnedPositionalEmbedding(10, 4)
    x = _crandn(2, 3, 4, dtype=torch.complex64)
    table = torch.view_as_complex(pe.weight.detach())
    assert_close(pe(x, offset=2).detach(), x + table[2:5])
    with pytest.raises(ValueError, match="max_len=10"):
        pe(x, offset=8)


# --------------------------------------------------------------------------- complextorch


@pytest.fixture(scope="module")
def ct():
    return pytest.importorskip("complextorch")


@pytest.mark.parametrize("learnable", [False, True])
@pytest.mark.parametrize("offset", [0, 11])
def test_nn_rotary_equals_complextorch(ct, learnable, offset):
    d = 16
    x = torch.randn(2, 4, 32, d, dtype=torch.cfloat)
    ours = cnn.RotaryEmbedding(d, base=500.0, learnable=learnable)
    theirs = ct.nn.RotaryEmbedding(d, base=500.0, learnable=learnable)
    assert_close(ours.inv_freq.detach(), theirs.inv_freq.detach(), rtol=1e-6, atol=0)
    assert_close(ours(x, offset), theirs(x, offset), rtol=1e-5, atol=1e-5)
    q, k = ours.rotate_q_k(x, x.conj(), offset)
    q2, k2 = theirs.rotate_q_k(x, x.conj(), offset)
    assert_close(q, q2, rtol=1e-5, atol=1e-5)
    assert_close(k, k2, rtol=1e-5, atol=1e-5)
    xr = torch.randn(3, 7, d)  # real input: both lift to complex64
    assert_close(ours(xr), theirs(xr), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("offset", [0, 5])
def test_nn_sinusoidal_equals_complextorch(ct, offset):
    d = 12
    x = torch.randn(3, 40, d, dtype=torch.cfloat)
    ours, theirs = cnn.SinusoidalPositionalEncoding(d), ct.nn.SinusoidalPositionalEncoding(d)
    assert_close(ours(x, offset), theirs(x, offset), rtol=1e-5, atol=1e-5)


def test_nn_cope_equals_complextorch(ct):
    d = 8
    ours, theirs = cnn.CoPE(d), ct.nn.CoPE(d)
    assert (
        sum(p.numel() for p in theirs.parameters())
        == sum(p.numel() for p in ours.parameters())
        == 2 * d
    )
    with torch.no_grad():
        for p in (ours.phi, theirs.phi):
            p.copy_(torch.arange(d) * 0.25)
    x = torch.randn(2, 10, d, dtype=torch.cfloat)
    assert_close(ours(x, 3), theirs(x, 3), rtol=1e-5, atol=1e-5)


def test_nn_frequency_schedule_matches_design():
    # omega_k = base^(-k/d) over the d complex channels (not the real-pair 2k/D schedule)
    d = 6
    rope = cnn.RotaryEmbedding(d, base=64.0)
    expected = torch.tensor([64.0 ** (-k / d) for k in range(d)])
    assert_close(rope.inv_freq, expected)
    assert math.isclose(rope.inv_freq[0].item(), 1.0)
