"""The polar rotation of CMHA (Shao et al. 2025, eq. 1-4 and 7) in factorised form.

Each pair of features is read as a complex number l e^(i theta); its phase becomes
A = delta * theta + b + p * omega and the pair is written back as (l cos A, l sin A), so that
the dot product of a rotated query and key is the CMHA score of eq. 8. See
:mod:`complexformer.attention.functional` for the factorisation and the numerics.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .rotary import as_positions, check_layout, join_pairs, phase_dtype, split_pairs

__all__ = ["polar_angles", "polar_components", "polar_from_components", "polar_rotate"]


def polar_angles(x: Tensor, layout: str = "interleaved") -> tuple[Tensor, Tensor]:
    """Modulus λ and semantic phase θ of each complex pair of ``x`` (eq. 1-2).

    θ is the phase before the adaptation δ, b and the position term of eq. 7; it is what the
    phase contrastive loss regularises (§3.2, "phase representations θ_{m,i}").

    Args:
        x: real tensor (..., T, D), D even.
        layout: ``"interleaved"`` or ``"halves"`` (see :func:`polar_components`).

    Returns:
        (λ, θ), both (..., T, J) in float32 (float64 for float64 input), θ in (−π, π]; a zero
        pair has λ = 0 and θ = 0 with zero gradients (instead of 0/0).
    """
    if x.shape[-1] % 2:
        raise ValueError(f"the last dimension of x must be even, got {x.shape[-1]}")
    check_layout(layout)
    pdt = phase_dtype(x)
    re, im = split_pairs(x, pdt, layout)  # (..., T, J) each
    r2 = re * re + im * im
    nz = r2 > 0
    # Zero pairs get modulus 0 and phase 0 with zero gradients instead of 0/0.
    re_s = torch.where(nz, re, torch.ones_like(re))
    im_s = torch.where(nz, im, torch.zeros_like(im))
    lam = torch.where(nz, torch.sqrt(re_s * re_s + im_s * im_s), torch.zeros_like(re))
    return lam, torch.atan2(im_s, re_s)


def polar_components(
    x: Tensor,
    delta: Tensor | float | None,
    bias: Tensor | None,
    positions: Tensor | int,
    omega: Tensor,
    layout: str = "interleaved",
) -> tuple[Tensor, Tensor]:
    """Modulus and rotated phase of each complex pair of ``x`` (eq. 1-2 and 7).

    Args:
        x: real tensor (..., T, D), D even; pairs are (x[2j], x[2j+1]).
        delta: adaptation scale broadcastable to (..., J) over the leading dims of ``x``
            (e.g. (H, J) per head or (J,) shared), a float, or None for 1.
        bias: adaptation bias of the same shapes as ``delta``, or None for 0. Only the query
            side carries it (eq. 7 adds b once to the phase difference).
        positions: (T,) (or broadcastable (..., T)) absolute positions, or an int offset t0
            meaning positions t0 .. t0 + T - 1.
        omega: (J,) rotation frequencies.
        layout: ``"interleaved"``: pairs (x[2j], x[2j+1]) as in the paper; ``"halves"``:
            pairs (x[j], x[j+J]), a fixed permutation of the features that is faster on CPU
            (use it where the features come from a learned projection).

    Returns:
        (modulus, phase), both (..., T, J) in float32 (float64 for float64 input), with
        phase = delta * atan2(x[2j+1], x[2j]) + bias + position * omega.
    """
    lam, theta = polar_angles(x, layout)
    pdt = theta.dtype
    if delta is not None:
        if isinstance(delta, Tensor):
            delta = delta.to(pdt).unsqueeze(-2)  # (..., 1, J): broadcast over T
        theta = theta * delta
    if bias is not None:
        theta = theta + bias.to(pdt).unsqueeze(-2)
    pos = as_positions(positions, x.shape[-2], x.device, pdt)
    phase = theta + pos.unsqueeze(-1) * omega.to(device=x.device, dtype=pdt)  # (..., T, J)
    return lam, phase


_CHUNK_ELEMS = 1 << 18  # elements of x per chunk of the polar rotation (bounds temporaries)


def _t_chunks(x: Tensor) -> list[tuple[int, int]]:
    """Ranges over the T dimension of x (..., T, D) with about _CHUNK_ELEMS elements each."""
    t = x.shape[-2]
    per_row = max(1, x.numel() // max(t, 1))
    step = max(1, _CHUNK_ELEMS // per_row)
    return [(i, min(i + step, t)) for i in range(0, t, step)]


def _rotated_phase(theta: Tensor, d: Tensor | None, b: Tensor | None, pw: Tensor) -> Tensor:
    """delta * theta + b + p * omega (``theta`` is overwritten)."""
    if d is not None:
        theta = theta.mul_(d)
    if b is not None:
        theta = theta.add_(b)
    return theta.add_(pw)


class _PolarRotate(torch.autograd.Function):
    """polar_rotate with an analytic backward that recomputes from x (saves memory and ops).

    With u = cos(theta), v = sin(theta), upstream grads (g_c, g_s) for (l cos A, l sin A):
    g_l = g_c cos A + g_s sin A and G = g_s cos A - g_c sin A (= dL/dA / l), so
    dL/dx_re = g_l u - delta v G, dL/dx_im = g_l v + delta u G, dL/d(delta) = l G theta and
    dL/db = l G: no division by the modulus, finite at zero pairs (taken along theta = 0).
    Both passes run over chunks of T so that their temporaries stay small.
    """

    @staticmethod
    def forward(ctx, x, delta, bias, pos, omega, layout):
        ctx.save_for_backward(x, delta, bias, pos, omega)
        ctx.layout = layout
        pdt = phase_dtype(x)
        d = delta.to(pdt).unsqueeze(-2) if delta is not None else None  # (..., 1, J)
        b = bias.to(pdt).unsqueeze(-2) if bias is not None else None
        out = torch.empty_like(x)
        for t0, t1 in _t_chunks(x):
            re, im = split_pairs(x[..., t0:t1, :], pdt, layout)  # (..., t, J) each
            lam = torch.hypot(re, im)  # eq. 1
            theta = torch.atan2(im, re)  # eq. 2; atan2(0, 0) = 0
            del re, im
            pw = pos[..., t0:t1, None] * omega.to(pdt)  # (..., t, J)
            phase = _rotated_phase(theta, d, b, pw)
            rot_re, rot_im = torch.cos(phase).mul_(lam), phase.sin_().mul_(lam)
            out[..., t0:t1, :] = join_pairs(rot_re, rot_im, layout)  # (..., t, D)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, delta, bias, pos, omega = ctx.saved_tensors
        layout = ctx.layout
        pdt = phase_dtype(x)
        d = delta.to(pdt).unsqueeze(-2) if delta is not None else None
        b = bias.to(pdt).unsqueeze(-2) if bias is not None else None
        want_d = d is not None and ctx.needs_input_grad[1]
        want_b = b is not None and ctx.needs_input_grad[2]
        gx = torch.empty_like(x)
        g_delta = torch.zeros_like(d) if want_d else None
        g_bias = torch.zeros_like(b) if want_b else None
        for t0, t1 in _t_chunks(x):
            re, im = split_pairs(x[..., t0:t1, :], pdt, layout)
            lam = torch.hypot(re, im)
            theta = torch.atan2(im, re)
            del re, im
            u, v = torch.cos(theta), torch.sin(theta)
            pw = pos[..., t0:t1, None] * omega.to(pdt)
            phase = _rotated_phase(theta.clone() if want_d else theta, d, b, pw)
            cos_a, sin_a = torch.cos(phase), phase.sin_()
            g_c, g_s = split_pairs(grad[..., t0:t1, :], pdt, layout)
            g_l = torch.mul(g_c, cos_a).addcmul_(g_s, sin_a)
            big_g = torch.mul(g_s, cos_a).addcmul_(g_c, sin_a, value=-1.0)
            del cos_a, sin_a, g_c
            if want_d or want_b:
                lam_g = lam.mul_(big_g)
                if want_b:
                    g_bias += lam_g.sum_to_size(g_bias.shape)
                if want_d:
                    g_delta += lam_g.mul_(theta).sum_to_size(g_delta.shape)
            dg = big_g.mul_(d) if d is not None else big_g
            g_re = torch.mul(g_l, u).addcmul_(dg, v, value=-1.0)
            g_im = g_l.mul_(v).addcmul_(dg, u)
            gx[..., t0:t1, :] = join_pairs(g_re, g_im, layout)  # (..., t, D)
        if want_d:
            g_delta = g_delta.reshape(delta.shape).to(delta.dtype)
        if want_b:
            g_bias = g_bias.reshape(bias.shape).to(bias.dtype)
        return gx, g_delta, g_bias, None, None, None


def polar_rotate(
    x: Tensor,
    delta: Tensor | float | None,
    bias: Tensor | None,
    positions: Tensor | int,
    omega: Tensor,
    layout: str = "interleaved",
) -> Tensor:
    """Per-pair Euler transform plus adaptive rotation (eq. 1-4, 7), in factorised form.

    Returns x' with x'[2j] = l_j cos A_j and x'[2j+1] = l_j sin A_j, where l_j is the pair's
    modulus and A_j = delta_j * theta_j + b_j + p * omega_j its rotated phase, so that
    q'_m . k'_n = sum_j lq lk cos(delta (tq - tk) + b + (m - n) omega) is the CMHA score
    of eq. 8 (before scaling). With delta = 1 and b = 0 this is RoPE (Su et al.) exactly.
    When eager, the backward pass is analytic and recomputes the polar form from x (only x
    is kept for it); under ``torch.compile`` the plain formula is traced and fused.

    Args:
        x: real tensor (..., T, D).
        delta, bias, positions, omega, layout: see :func:`polar_components`.

    Returns:
        A tensor of the shape and dtype of ``x``.
    """
    if x.shape[-1] % 2:
        raise ValueError(f"the last dimension of x must be even, got {x.shape[-1]}")
    check_layout(layout)
    if torch.compiler.is_compiling():
        lam, phase = polar_components(x, delta, bias, positions, omega, layout)
        return polar_from_components(lam, phase, x.dtype, layout)
    pdt = phase_dtype(x)
    if delta is not None and not isinstance(delta, Tensor):
        delta = torch.full((x.shape[-1] // 2,), float(delta), device=x.device, dtype=pdt)
    pos = as_positions(positions, x.shape[-2], x.device, pdt)
    return _PolarRotate.apply(x, delta, bias, pos, omega.to(x.device), layout)


def polar_from_components(
    lam: Tensor, phase: Tensor, dtype: torch.dtype, layout: str = "interleaved"
) -> Tensor:
    """Pairs (lam cos phase, lam sin phase): (..., T, J) twice -> (..., T, 2J) in ``dtype``."""
    return join_pairs(lam * torch.cos(phase), lam * torch.sin(phase), layout).to(dtype)
