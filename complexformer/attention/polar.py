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


_CHUNK_ELEMS = 1 << 20  # elements of x per chunk of the polar rotation (bounds temporaries)
# On CPU smaller chunks keep each chunk's chain of elementwise passes in a core's L2 cache
# (temporaries of 64k floats, 256 KiB): the rotation of q and k at (1, 8, 1024, 64) took
# 7.7 ms against 9.0-9.7 ms with 2**20 (2**18: 8.5-9.1, 2**16: 7.8-7.9, 2**15: 8.6).
_CHUNK_ELEMS_CPU = 1 << 17


def _t_chunks(x: Tensor) -> list[tuple[int, int]]:
    """Ranges over the T dimension of x (..., T, D) with about _CHUNK_ELEMS elements each
    (_CHUNK_ELEMS_CPU on CPU)."""
    t = x.shape[-2]
    per_row = max(1, x.numel() // max(t, 1))
    budget = _CHUNK_ELEMS_CPU if x.device.type == "cpu" else _CHUNK_ELEMS
    step = max(1, budget // per_row)
    return [(i, min(i + step, t)) for i in range(0, t, step)]


_CONTIGUOUS = torch.contiguous_format


def _chunks(x: Tensor) -> list[tuple[int, int]]:
    """:func:`_t_chunks` when eager; one chunk under ``torch.compile`` (which fuses) or T = 0."""
    if torch.compiler.is_compiling() or x.shape[-2] == 0:
        return [(0, x.shape[-2])]
    return _t_chunks(x)


def _pair_views(x: Tensor, dtype: torch.dtype, layout: str) -> tuple[Tensor, Tensor]:
    """The two members of each pair as views (no copy when ``x`` has ``dtype``): enough for
    products and sums, which run at full speed on strided memory (unlike atan2)."""
    x = x if x.dtype == dtype else x.to(dtype)
    if layout == "halves":
        return x.chunk(2, dim=-1)  # (..., T, J) each
    return x.unflatten(-1, (x.shape[-1] // 2, 2)).unbind(-1)


class _PolarRotate(torch.autograd.Function):
    """polar_rotate with an analytic backward free of transcendental functions.

    Forward keeps x, the output y = (l cos A, l sin A) (which the attention that follows
    saves anyway; a float32 copy for half-precision x), 1/l² (half the size of x; recomputing
    it in the backward cost three passes over the pairs) and, when δ needs a gradient, the
    phases theta. With upstream gradients (g_c, g_s) of y, s = g_c y_c + g_s y_s = l dL/dl
    and c = g_s y_c - g_c y_s = dL/dA, so

        dL/dx_re = (s x_re - δ c x_im) / l²,   dL/dx_im = (s x_im + δ c x_re) / l²,
        dL/dδ = sum c theta,                    dL/db = sum c,

    from the chain rule through l = |x| and A = δ atan2(x_im, x_re) + b + p ω (eq. 1-2, 7).
    Backward is products only: no atan2, hypot, cos or sin are recomputed, nor a division. A
    zero pair (l = 0, so y = 0 and s = c = 0) gets a zero gradient. Both passes run over
    chunks of T so that their temporaries stay small (one chunk under ``torch.compile``,
    which fuses them).
    """

    @staticmethod
    def forward(ctx, x, delta, bias, pos, omega, layout):
        pdt = phase_dtype(x)
        d = delta.to(pdt).unsqueeze(-2) if delta is not None else None  # (..., 1, J)
        b = bias.to(pdt).unsqueeze(-2) if bias is not None else None
        keep_theta = delta is not None and ctx.needs_input_grad[1]
        chunks, fused = _chunks(x), torch.compiler.is_compiling()
        # y in the phase dtype: the output itself, or (half-precision x) a float32 copy;
        # eager writes it in place (no join), compiled joins (inductor fuses the join)
        out = None if fused else torch.empty_like(x, dtype=pdt, memory_format=_CONTIGUOUS)
        thetas, inv_r2 = [], []
        for t0, t1 in chunks:
            re, im = split_pairs(x[..., t0:t1, :], pdt, layout)  # (..., t, J) each, contiguous
            r2 = torch.addcmul(re * re, im, im)  # l²
            lam = r2.sqrt()  # eq. 1
            # 1/l² for the backward, at least the smallest normal l² (a zero pair has s = c = 0)
            inv_r2.append(r2.clamp_min_(torch.finfo(pdt).tiny).reciprocal_())
            theta = torch.atan2(im, re)  # eq. 2; atan2(0, 0) = 0
            del re, im
            if keep_theta:  # kept for dL/dδ
                thetas.append(theta)
            pw = pos[..., t0:t1, None] * omega.to(pdt)  # (..., t, J)
            if b is not None:
                pw = pw + b  # (..., t, J): b + p * omega
            if d is not None:  # delta * theta + b + p * omega, one fused op
                phase = torch.addcmul(pw, theta, d)
            else:
                phase = theta.add_(pw) if not keep_theta else theta + pw
            if fused:  # one chunk
                out = join_pairs(torch.cos(phase) * lam, torch.sin(phase) * lam, layout)
                continue
            y_c, y_s = _pair_views(out[..., t0:t1, :], pdt, layout)  # written in place
            torch.mul(torch.cos(phase), lam, out=y_c)
            torch.mul(phase.sin_(), lam, out=y_s)
        theta_all = None
        if keep_theta:
            theta_all = thetas[0] if len(thetas) == 1 else torch.cat(thetas, dim=-2)
        inv_all = inv_r2[0] if len(inv_r2) == 1 else torch.cat(inv_r2, dim=-2)
        ctx.save_for_backward(x, delta, bias, out, theta_all, inv_all)
        ctx.layout = layout
        return out if out.dtype == x.dtype else out.to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        x, delta, bias, out, theta_all, inv_all = ctx.saved_tensors
        layout = ctx.layout
        pdt = phase_dtype(x)
        d = delta.to(pdt).unsqueeze(-2) if delta is not None else None
        want_d = d is not None and ctx.needs_input_grad[1]
        want_b = bias is not None and ctx.needs_input_grad[2]
        g_delta = torch.zeros_like(d) if want_d else None
        g_bias = torch.zeros_like(bias.to(pdt).unsqueeze(-2)) if want_b else None
        fused = torch.compiler.is_compiling()
        gx = None if fused else torch.empty_like(x, dtype=pdt, memory_format=_CONTIGUOUS)
        for t0, t1 in _chunks(x):
            re, im = _pair_views(x[..., t0:t1, :], pdt, layout)  # (..., t, J) each
            y_c, y_s = _pair_views(out[..., t0:t1, :], pdt, layout)
            g_c, g_s = _pair_views(grad[..., t0:t1, :], pdt, layout)
            s = torch.mul(g_c, y_c).addcmul_(g_s, y_s)  # l dL/dl
            c = torch.mul(g_s, y_c).addcmul_(g_c, y_s, value=-1.0)  # dL/dA
            del y_c, y_s, g_c, g_s
            if want_b:
                g_bias += c.sum_to_size(g_bias.shape)
            if want_d:
                g_delta += (c * theta_all[..., t0:t1, :]).sum_to_size(g_delta.shape)
            inv = inv_all[..., t0:t1, :]  # 1/l², kept from the forward
            s = s.mul_(inv)
            c = c.mul_(inv).mul_(d) if d is not None else c.mul_(inv)
            if fused:  # one chunk
                gx = join_pairs(s * re - c * im, s * im + c * re, layout)
                continue
            g_re, g_im = _pair_views(gx[..., t0:t1, :], pdt, layout)  # written in place
            torch.mul(s, re, out=g_re).addcmul_(c, im, value=-1.0)
            torch.mul(s, im, out=g_im).addcmul_(c, re)
        gx = gx if gx.dtype == x.dtype else gx.to(x.dtype)
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
    The backward pass is analytic and free of transcendental functions (it keeps x, the
    output, 1/l² and, for δ's gradient, the phases; see ``_PolarRotate``); under ``torch.compile``
    the same function is traced as one chunk and fused.

    Args:
        x: real tensor (..., T, D).
        delta, bias, positions, omega, layout: see :func:`polar_components`.

    Returns:
        A tensor of the shape and dtype of ``x``.
    """
    if x.shape[-1] % 2:
        raise ValueError(f"the last dimension of x must be even, got {x.shape[-1]}")
    check_layout(layout)
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
