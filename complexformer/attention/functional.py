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

from .alibi import alibi_bias, alibi_slopes
from .polar import polar_components, polar_from_components, polar_rotate
from .rotary import LAYOUTS, apply_rope, check_layout, rope_frequencies

__all__ = [
    "LAYOUTS",
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
]


def causal_mask(t_q: int, t_k: int, q_offset: int = 0, device=None) -> Tensor:
    """Boolean (Tq, Tk) mask, True where query q_offset + i may attend key n (n <= q_offset + i)."""
    qpos = torch.arange(q_offset, q_offset + t_q, device=device)
    kpos = torch.arange(t_k, device=device)
    return kpos.unsqueeze(0) <= qpos.unsqueeze(1)


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
    mask is the plain lower triangle (Tq == Tk, q_offset == 0) the fused causal kernel is used;
    a single query that sees every key (a KV-cache decoding step) needs no mask at all.

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
    # One query at or after the last key (a decoding step) may attend every key: no mask.
    sees_all = t_q == 1 and q_offset + 1 >= t_k
    if bias is None and (not is_causal or sees_all or (t_q == t_k and q_offset == 0)):
        return F.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout_p, is_causal=is_causal and t_q > 1, scale=scale
        )
    mask = None
    if is_causal:
        mask = causal_mask(t_q, t_k, q_offset, device=q.device)
    if bias is not None:
        bias = bias.to(q.dtype)
        mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)


def _check_cmha_inputs(q: Tensor, k: Tensor, v: Tensor, delta: Tensor, bias: Tensor) -> None:
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        shapes = ", ".join(str(tuple(t.shape)) for t in (q, k, v))
        raise ValueError(f"q, k, v must be (B, H, T, D); got {shapes}")
    d = q.shape[-1]
    if d % 2:
        raise ValueError(f"head dimension must be even for CMHA, got {d}")
    j, h = d // 2, q.shape[1]
    for name, p in (("delta", delta), ("bias", bias)):
        if p is not None and not isinstance(p, Tensor):
            raise ValueError(f"{name} must be a tensor of shape (H, J) or (J,), got {p!r}")
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
    check_layout(layout)
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
