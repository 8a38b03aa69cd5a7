"""Pure attention kernels on (B, H, T, D) tensors.

The centre of this file is CMHA, the complex multi-head attention of Shao et al., "ComplexFormer:
Disruptively Advancing Transformer Inference Ability via Head-Specific Complex Vector Attention"
(2025), eq. 1-9. For head i with J = D/2 interleaved pairs (x[2j], x[2j+1]):

    Score_mn = scale * sum_j lq_mj lk_nj cos(delta_j (tq_mj - tk_nj) + b_j + (m - n) w_j)

With A_mj = delta_j tq_mj + b_j + m w_j and B_nj = delta_j tk_nj + n w_j the cosine of a
difference factorises, cos(A - B) = cos A cos B + sin A sin B, so the score is the ordinary dot
product of q' = [lq cos A, lq sin A] and k' = [lk cos B, lk sin B]. CMHA is therefore an
elementwise "polar rotation" of q and k followed by standard scaled-dot-product attention
(`torch.nn.functional.scaled_dot_product_attention`), with no (T, T, J) tensor. The literal
form is kept as `cmha_reference` for tests.

Branch cut: the phase is atan2(x[2j+1], x[2j]) in (-pi, pi], so for delta != 1 the score jumps
where a pair crosses the negative real axis. That is the paper's definition and is kept here.

Numerics: phases, positions * omega and the cos/sin are computed in float32 (or float64 when
the input is float64), also under bf16/fp16 autocast; a zero pair gives modulus 0, phase 0 and
finite (zero) gradients.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "attention",
    "causal_mask",
    "cmha",
    "cmha_reference",
    "polar_components",
    "polar_from_components",
    "polar_rotate",
    "rope_frequencies",
    "LAYOUTS",
]

_SCHEDULES = ("rope", "paper")


def rope_frequencies(
    head_dim: int, base: float = 10000.0, schedule: str = "rope", device=None
) -> Tensor:
    """Rotation frequencies omega_j, j = 0 .. J-1, J = head_dim // 2 (paper eq. 6).

    Args:
        head_dim: the head dimension D; must be a positive even integer.
        base: the frequency base (10000 in RoPE and the paper).
        schedule: ``"rope"`` for omega_j = base^(-2j/D), the RoPE schedule of Su et al.
            (so that CMHA with delta = 1, b = 0 is RoPE exactly); ``"paper"`` for the literal
            formula of eq. 6, omega_j = base^(-2j/(D/2)).
        device: device of the returned tensor.

    Returns:
        A float32 tensor of shape (J,).
    """
    if not isinstance(head_dim, int) or head_dim <= 0 or head_dim % 2:
        raise ValueError(f"head_dim must be a positive even integer, got {head_dim!r}")
    if schedule not in _SCHEDULES:
        raise ValueError(f"unknown omega schedule {schedule!r}; known: {', '.join(_SCHEDULES)}")
    if not base > 0:
        raise ValueError(f"rope base must be > 0, got {base!r}")
    j = torch.arange(head_dim // 2, dtype=torch.float64, device=device)
    denom = head_dim if schedule == "rope" else head_dim // 2
    return (base ** (-2.0 * j / denom)).to(torch.float32)


def _phase_dtype(x: Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _as_positions(positions, length: int, device, dtype) -> Tensor:
    """Positions as a float tensor broadcastable to (..., T)."""
    if isinstance(positions, int):
        return torch.arange(positions, positions + length, device=device, dtype=dtype)
    return positions.to(device=device, dtype=dtype)


LAYOUTS = ("interleaved", "halves")


def _check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"unknown pair layout {layout!r}; known: {', '.join(LAYOUTS)}")


def _split_pairs(x: Tensor, dtype: torch.dtype, layout: str) -> tuple[Tensor, Tensor]:
    """The two members of each pair as (re, im), each (..., T, J), in ``dtype``.

    ``"interleaved"`` is the paper's pairs (x[2j], x[2j+1]), ``"halves"`` pairs (x[j], x[j+J]).
    Both are returned as contiguous copies: on CPU several elementwise kernels (atan2 and
    hypot in particular) run an order of magnitude slower on strided views.
    """
    j = x.shape[-1] // 2
    if layout == "halves":
        both = x.to(dtype).unflatten(-1, (2, j)).movedim(-2, 0)  # (2, ..., T, J)
    else:
        both = x.to(dtype).unflatten(-1, (j, 2)).movedim(-1, 0)  # (2, ..., T, J)
    both = both.contiguous()  # atan2 / hypot vectorise only on contiguous memory
    return both[0], both[1]


def _join_pairs(re: Tensor, im: Tensor, layout: str) -> Tensor:
    """Inverse of :func:`_split_pairs`: (..., J) twice -> (..., 2J).

    Interleaving goes through ``torch.complex`` when eager, whose copy is several times faster
    on CPU than ``torch.stack(..., dim=-1)``; under ``torch.compile`` the stack is used, which
    inductor fuses with its producers.
    """
    if layout == "halves":
        return torch.cat((re, im), dim=-1)
    if torch.compiler.is_compiling() or re.dtype not in (torch.float32, torch.float64):
        return torch.stack((re, im), dim=-1).flatten(-2)
    return torch.view_as_real(torch.complex(re, im)).flatten(-2)


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
    if x.shape[-1] % 2:
        raise ValueError(f"the last dimension of x must be even, got {x.shape[-1]}")
    _check_layout(layout)
    pdt = _phase_dtype(x)
    re, im = _split_pairs(x, pdt, layout)  # (..., T, J) each
    r2 = re * re + im * im
    nz = r2 > 0
    # Zero pairs get modulus 0 and phase 0 with zero gradients instead of 0/0.
    re_s = torch.where(nz, re, torch.ones_like(re))
    im_s = torch.where(nz, im, torch.zeros_like(im))
    lam = torch.where(nz, torch.sqrt(re_s * re_s + im_s * im_s), torch.zeros_like(re))
    theta = torch.atan2(im_s, re_s)
    if delta is not None:
        if isinstance(delta, Tensor):
            delta = delta.to(pdt).unsqueeze(-2)  # (..., 1, J): broadcast over T
        theta = theta * delta
    if bias is not None:
        theta = theta + bias.to(pdt).unsqueeze(-2)
    pos = _as_positions(positions, x.shape[-2], x.device, pdt)
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
        pdt = _phase_dtype(x)
        d = delta.to(pdt).unsqueeze(-2) if delta is not None else None  # (..., 1, J)
        b = bias.to(pdt).unsqueeze(-2) if bias is not None else None
        out = torch.empty_like(x)
        for t0, t1 in _t_chunks(x):
            re, im = _split_pairs(x[..., t0:t1, :], pdt, layout)  # (..., t, J) each
            lam = torch.hypot(re, im)  # eq. 1
            theta = torch.atan2(im, re)  # eq. 2; atan2(0, 0) = 0
            del re, im
            pw = pos[..., t0:t1, None] * omega.to(pdt)  # (..., t, J)
            phase = _rotated_phase(theta, d, b, pw)
            rot_re, rot_im = torch.cos(phase).mul_(lam), phase.sin_().mul_(lam)
            out[..., t0:t1, :] = _join_pairs(rot_re, rot_im, layout)  # (..., t, D)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, delta, bias, pos, omega = ctx.saved_tensors
        layout = ctx.layout
        pdt = _phase_dtype(x)
        d = delta.to(pdt).unsqueeze(-2) if delta is not None else None
        b = bias.to(pdt).unsqueeze(-2) if bias is not None else None
        want_d = d is not None and ctx.needs_input_grad[1]
        want_b = b is not None and ctx.needs_input_grad[2]
        gx = torch.empty_like(x)
        g_delta = torch.zeros_like(d) if want_d else None
        g_bias = torch.zeros_like(b) if want_b else None
        for t0, t1 in _t_chunks(x):
            re, im = _split_pairs(x[..., t0:t1, :], pdt, layout)
            lam = torch.hypot(re, im)
            theta = torch.atan2(im, re)
            del re, im
            u, v = torch.cos(theta), torch.sin(theta)
            pw = pos[..., t0:t1, None] * omega.to(pdt)
            phase = _rotated_phase(theta.clone() if want_d else theta, d, b, pw)
            cos_a, sin_a = torch.cos(phase), phase.sin_()
            g_c, g_s = _split_pairs(grad[..., t0:t1, :], pdt, layout)
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
            gx[..., t0:t1, :] = _join_pairs(g_re, g_im, layout)  # (..., t, D)
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
    _check_layout(layout)
    if torch.compiler.is_compiling():
        lam, phase = polar_components(x, delta, bias, positions, omega, layout)
        return polar_from_components(lam, phase, x.dtype, layout)
    pdt = _phase_dtype(x)
    if delta is not None and not isinstance(delta, Tensor):
        delta = torch.full((x.shape[-1] // 2,), float(delta), device=x.device, dtype=pdt)
    pos = _as_positions(positions, x.shape[-2], x.device, pdt)
    return _PolarRotate.apply(x, delta, bias, pos, omega.to(x.device), layout)


def polar_from_components(
    lam: Tensor, phase: Tensor, dtype: torch.dtype, layout: str = "interleaved"
) -> Tensor:
    """Pairs (lam cos phase, lam sin phase): (..., T, J) twice -> (..., T, 2J) in ``dtype``."""
    return _join_pairs(lam * torch.cos(phase), lam * torch.sin(phase), layout).to(dtype)


def apply_rope(
    x: Tensor, positions: Tensor | int, omega: Tensor, layout: str = "interleaved"
) -> Tensor:
    """Rotary position embedding (Su et al., "RoFormer").

    With interleaved pairs: x'[2j] = x[2j] cos(p w_j) - x[2j+1] sin(p w_j),
    x'[2j+1] = x[2j] sin(p w_j) + x[2j+1] cos(p w_j); ``layout="halves"`` pairs x[j] with
    x[j+J] instead (the "rotate-half" form).

    Args:
        x: real tensor (..., T, D), D even.
        positions: (T,) positions or an int offset.
        omega: (J,) frequencies.
        layout: ``"interleaved"`` or ``"halves"``.

    Returns:
        The rotated tensor, same shape and dtype as ``x``; angles are computed in float32.
    """
    if x.shape[-1] % 2:
        raise ValueError(f"the last dimension of x must be even, got {x.shape[-1]}")
    _check_layout(layout)
    pdt = _phase_dtype(x)
    pos = _as_positions(positions, x.shape[-2], x.device, pdt)
    ang = pos.unsqueeze(-1) * omega.to(device=x.device, dtype=pdt)  # (..., T, J)
    cos, sin = torch.cos(ang), torch.sin(ang)
    if layout == "halves":
        re, im = _split_pairs(x, pdt, layout)
    else:  # strided views: cheap for multiplications
        xf = x.to(pdt)
        re, im = xf[..., 0::2], xf[..., 1::2]
    return _join_pairs(re * cos - im * sin, re * sin + im * cos, layout).to(x.dtype)


def causal_mask(t_q: int, t_k: int, q_offset: int = 0, device=None) -> Tensor:
    """Boolean (Tq, Tk) mask, True where query q_offset + i may attend key n (n <= q_offset + i)."""
    qpos = torch.arange(q_offset, q_offset + t_q, device=device)
    kpos = torch.arange(t_k, device=device)
    return kpos.unsqueeze(0) <= qpos.unsqueeze(1)


def alibi_slopes(n_head: int) -> Tensor:
    """ALiBi head slopes (Press et al., "Train Short, Test Long"), geometric in 2^(-8/n)."""
    if n_head <= 0:
        raise ValueError(f"n_head must be positive, got {n_head}")

    def pow2(n: int) -> list[float]:
        start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n_head).is_integer():
        slopes = pow2(n_head)
    else:
        closest = 2 ** math.floor(math.log2(n_head))
        slopes = pow2(closest) + pow2(2 * closest)[0::2][: n_head - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(slopes: Tensor, t_q: int, t_k: int, q_offset: int = 0) -> Tensor:
    """Additive ALiBi bias (H, Tq, Tk): -slope_h * (m - n) for query m and key n."""
    qpos = torch.arange(q_offset, q_offset + t_q, device=slopes.device, dtype=torch.float32)
    kpos = torch.arange(t_k, device=slopes.device, dtype=torch.float32)
    dist = qpos.unsqueeze(1) - kpos.unsqueeze(0)  # (Tq, Tk)
    return -slopes.float().view(-1, 1, 1) * dist


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    is_causal: bool = True,
    q_offset: int = 0,
    scale: float | None = None,
    bias: Tensor | None = None,
    dropout_p: float = 0.0,
) -> Tensor:
    """Scaled-dot-product attention with a causal mask aligned to absolute positions.

    Queries are at positions q_offset .. q_offset + Tq - 1 and keys at 0 .. Tk - 1. When the
    mask is the plain lower triangle (Tq == Tk, q_offset == 0) the fused causal kernel is used.

    Args:
        q: (B, H, Tq, D); k: (B, H, Tk, D); v: (B, H, Tk, Dv).
        is_causal: mask keys after each query's position.
        q_offset: absolute position of the first query.
        scale: score scale; defaults to 1/sqrt(D).
        bias: optional additive float bias broadcastable to (B, H, Tq, Tk).
        dropout_p: attention dropout probability.

    Returns:
        (B, H, Tq, Dv).
    """
    t_q, t_k = q.shape[-2], k.shape[-2]
    if bias is None and (not is_causal or (t_q == t_k and q_offset == 0)):
        return F.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout_p, is_causal=is_causal and t_q > 1, scale=scale
        )
    mask = None
    if is_causal:
        mask = causal_mask(t_q, t_k, q_offset, device=q.device)
    if bias is not None:
        bias = bias.to(q.dtype)
        mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale
    )


def _check_cmha_inputs(q: Tensor, k: Tensor, v: Tensor, delta: Tensor, bias: Tensor) -> None:
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        shapes = ", ".join(str(tuple(t.shape)) for t in (q, k, v))
        raise ValueError(f"q, k, v must be (B, H, T, D); got {shapes}")
    d = q.shape[-1]
    if d % 2:
        raise ValueError(f"head dimension must be even for CMHA, got {d}")
    j, h = d // 2, q.shape[1]
    for name, p in (("delta", delta), ("bias", bias)):
        if p is not None and tuple(p.shape) not in ((h, j), (j,)):
            raise ValueError(
                f"{name} must be (H, J) = ({h}, {j}) or (J,) = ({j},), got {tuple(p.shape)}"
            )


def cmha(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    delta: Tensor,
    bias: Tensor,
    *,
    omega: Tensor,
    is_causal: bool = True,
    q_offset: int = 0,
    scale: float | None = None,
    layout: str = "interleaved",
) -> Tensor:
    """Complex multi-head attention (Shao et al. 2025, eq. 1-9) as fused attention.

    Rotates q (positions q_offset ..) and k (positions 0 ..) with :func:`polar_rotate` and
    calls scaled-dot-product attention; memory is O(T), never (T, T, J).

    Args:
        q: (B, H, Tq, D) real queries; k: (B, H, Tk, D) real keys; v: (B, H, Tk, Dv).
        delta: (H, J) per-head (CMHA) or (J,) shared (EulerFormer-MHA) adaptation scales.
        bias: same shape as ``delta``, adaptation bias (eq. 7).
        omega: (J,) frequencies, see :func:`rope_frequencies`.
        is_causal: causal mask on absolute positions.
        q_offset: position of the first query (KV-cache decoding).
        scale: score scale, default 1/sqrt(D).
        layout: ``"interleaved"`` pairs (q[2j], q[2j+1]) as in the paper, or ``"halves"``
            pairs (q[j], q[j+J]).

    Returns:
        (B, H, Tq, Dv).
    """
    _check_cmha_inputs(q, k, v, delta, bias)
    qr = polar_rotate(q, delta, bias, q_offset, omega, layout)
    kr = polar_rotate(k, delta, None, 0, omega, layout)
    return attention(qr, kr, v, is_causal=is_causal, q_offset=q_offset, scale=scale)


def cmha_reference(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    delta: Tensor,
    bias: Tensor,
    *,
    omega: Tensor,
    is_causal: bool = True,
    q_offset: int = 0,
    scale: float | None = None,
    layout: str = "interleaved",
) -> Tensor:
    """Literal eq. 1-9 with the (B, H, Tq, Tk, J) tensor; for tests only (see :func:`cmha`)."""
    _check_cmha_inputs(q, k, v, delta, bias)
    _check_layout(layout)
    if layout == "halves":  # (q[j], q[j+J]) -> interleaved pairs
        q, k = (t.unflatten(-1, (2, t.shape[-1] // 2)).transpose(-1, -2) for t in (q, k))
        q, k = q.flatten(-2), k.flatten(-2)  # (B, H, T, J, 2) -> (B, H, T, D)
    d = q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    lq = torch.sqrt(q[..., 0::2] ** 2 + q[..., 1::2] ** 2)  # eq. 1, (B, H, Tq, J)
    tq = torch.atan2(q[..., 1::2], q[..., 0::2])  # eq. 2
    lk = torch.sqrt(k[..., 0::2] ** 2 + k[..., 1::2] ** 2)  # (B, H, Tk, J)
    tk = torch.atan2(k[..., 1::2], k[..., 0::2])
    as_mn = tq.unsqueeze(-2) - tk.unsqueeze(-3)  # eq. 5, (B, H, Tq, Tk, J)
    if delta.dim() == 2:  # (H, J) -> (H, 1, 1, J)
        delta, bias = delta[:, None, None, :], bias[:, None, None, :]
    adapt = delta * as_mn + bias  # eq. 7
    m = torch.arange(q_offset, q_offset + q.shape[-2], device=q.device, dtype=q.dtype)
    n = torch.arange(k.shape[-2], device=q.device, dtype=q.dtype)
    dp = (m[:, None] - n[None, :]).unsqueeze(-1) * omega.to(q.dtype)  # eq. 6, (Tq, Tk, J)
    score = (lq.unsqueeze(-2) * lk.unsqueeze(-3) * torch.cos(adapt + dp)).sum(-1) * scale  # eq. 8
    if is_causal:
        allowed = causal_mask(q.shape[-2], k.shape[-2], q_offset, q.device)
        score = score.masked_fill(~allowed, float("-inf"))
    return torch.softmax(score, dim=-1) @ v  # eq. 9
