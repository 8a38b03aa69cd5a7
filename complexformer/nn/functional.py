"""Pure kernels of the complex-valued layers (no parameters are owned here).

Complex tensors (complex64 / complex128) in and out; learnable quantities arrive as REAL
tensors with a trailing dimension of 2 for (Re, Im) (``weight[..., 0]`` is the real part),
which the kernels view as complex (:func:`torch.view_as_complex`, no copy). Modules in this
package own those real parameters and call these kernels.

References:
    C. Trabelsi et al., "Deep Complex Networks", ICLR 2018 (complex initialisation, 2x2
    covariance whitening, modReLU/zReLU/CReLU discussion).
    M. Arjovsky, A. Shah, Y. Bengio, "Unitary Evolution Recurrent Neural Networks", ICML 2016
    (modReLU).
    N. Guberman, "On Complex Valued Convolutional Neural Networks", 2016 (zReLU).
    P. Virtue, S. Yu, M. Lustig, "Better than Real: Complex-valued Neural Nets for MRI
    Fingerprinting", ICIP 2017 (cardioid).
    F. Eilers, X. Jiang, "Building Blocks for a Complex-Valued Transformer Architecture",
    ICASSP 2023 (softmax of |Q K^H| and the other score-to-weight choices).
    J. Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", 2021.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from complexformer.attention.functional import attention as _real_sdpa
from complexformer.attention.functional import causal_mask

from .utils import (
    as_complex_interleaved,
    as_real_interleaved,
    check_choice,
    lift_complex,
    real_dtype,
)

__all__ = [
    "SCORES",
    "WHITEN_MODES",
    "affine_2x2",
    "attention_bias",
    "cardioid",
    "cgelu",
    "complex_dropout",
    "complex_embedding",
    "complex_linear",
    "complex_softmax",
    "crelu",
    "inverse_frequencies",
    "layer_norm",
    "lift_complex",
    "masked_softmax",
    "modrelu",
    "modulus_attention",
    "planar_layer_norm",
    "position_phasor",
    "rms_norm",
    "scaled_dot_product_attention",
    "zrelu",
]

SCORES = ("real", "modulus", "split", "phase")
WHITEN_MODES = ("full", "scalar")


# --------------------------------------------------------------------------- linear maps


def complex_linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = x W^T + b for complex x, W stored as a real (out, in, 2) tensor.

    One complex GEMM (torch's cgemm/zgemm: on CPU it measured ~1.8x faster than the
    equivalent single real GEMM with a (2out, 2in) block weight); autograd flows into the
    real parameter through :func:`torch.view_as_complex`.

    Args:
        x: complex (..., in).
        weight: real (out, in, 2).
        bias: real (out, 2) or None.

    Returns:
        complex (..., out).
    """
    w = torch.view_as_complex(weight)  # (out, in) complex view
    b = torch.view_as_complex(bias) if bias is not None else None
    return F.linear(x, w, b)


def complex_embedding(idx: Tensor, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Complex embedding lookup: integer (...) -> complex (..., dim); weight real (num, dim, 2)."""
    num, dim = weight.shape[0], weight.shape[1]
    out = F.embedding(idx, weight.reshape(num, 2 * dim), padding_idx=padding_idx)  # (..., 2dim)
    return torch.view_as_complex(out.unflatten(-1, (dim, 2)))


# --------------------------------------------------------------------------- normalisation


def affine_2x2(yr: Tensor, yi: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    """Per-feature real 2x2 map of (Re, Im) plus a complex bias; returns the complex result.

    ``weight`` is real (*F, 2, 2) (row = output component), ``bias`` real (*F, 2), where *F is
    the normalised shape (the trailing dims of ``yr``).
    """
    if weight is not None:
        w = weight.to(yr.dtype)
        yr, yi = (
            yr * w[..., 0, 0] + yi * w[..., 0, 1],
            yr * w[..., 1, 0] + yi * w[..., 1, 1],
        )
    if bias is not None:
        b = bias.to(yr.dtype)
        yr, yi = yr + b[..., 0], yi + b[..., 1]
    return torch.complex(yr, yi)


def _affine_2x2_interleaved(
    y: Tensor, weight: Tensor | None, bias: Tensor | None, inplace: bool = False
) -> Tensor:
    """:func:`affine_2x2` on the interleaved real view y (..., *F, 2); returns complex.

    ``inplace`` overwrites y (only where no gradient is recorded).
    """
    if weight is not None:
        w = weight.to(y.dtype)
        wd = torch.diagonal(w, dim1=-2, dim2=-1)  # (*F, 2): (w_rr, w_ii)
        wo = torch.diagonal(w.flip(-1), dim1=-2, dim2=-1)  # (*F, 2): (w_ri, w_ir)
        yf = y.flip(-1)  # (Im, Re)
        dst = {"out": y} if inplace else {}
        out = (
            torch.mul(y, wd, **dst)
            if bias is None
            else torch.addcmul(bias.to(y.dtype), y, wd, **dst)
        )
        out = out.addcmul_(yf, wo)  # Re += w_ri Im, Im += w_ir Re
    elif bias is not None:
        out = y + bias.to(y.dtype)
    else:
        out = y
    return torch.view_as_complex(out)


def layer_norm(
    x: Tensor,
    normalized_shape: tuple[int, ...],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    whiten: str = "full",
) -> Tensor:
    """Complex layer normalisation over the trailing ``normalized_shape`` dims.

    ``whiten="full"`` (Trabelsi et al. 2018, sec. 3.5, applied per token): centre, then
    multiply (Re, Im) by V^(-1/2), V the 2x2 covariance of (Re, Im) over the features plus
    eps * I. With s = sqrt(det V) and t = sqrt(tr V + 2 s) the inverse square root is
    closed-form, V^(-1/2) = [[V_ii + s, -V_ri], [-V_ri, V_rr + s]] / (s t), so the output has
    (up to eps) the identity covariance. On a real input (Im = 0) V = diag(var + eps, eps)
    is diagonal and V^(-1/2) = diag(1/sqrt(var + eps), 1/sqrt(eps)): the real part is
    exactly torch.nn.LayerNorm's (x - mean)/sqrt(var + eps) and Im stays 0. It is however
    discontinuous there: an imaginary part of any size >> sqrt(eps) is rescaled to unit
    variance, so a nearly-zero Im (e.g. right after the first update of a complexified real
    model) is amplified by up to 1/sqrt(eps).

    ``whiten="scalar"``: centre and divide by sqrt(E|z - mean|^2 + eps) (the total variance
    of Re and Im). Phase-preserving, continuous in Im, never amplifies a small Im relative to
    Re, and also equal to torch.nn.LayerNorm on a real input; E|y|^2 = 1 instead of the
    per-component unit variance of full whitening.

    Args:
        x: complex (..., *normalized_shape).
        normalized_shape: the trailing dims to normalise over.
        weight: real (*normalized_shape, 2, 2) affine matrix or None.
        bias: real (*normalized_shape, 2) or None.
        eps: ridge added to the covariance diagonal (full) or to the total variance (scalar).
        whiten: ``"full"`` or ``"scalar"``.

    Returns:
        complex tensor of the shape of ``x``.
    """
    check_choice(whiten, "whiten", WHITEN_MODES, "layer_norm")
    dims = tuple(range(-len(normalized_shape), 0))
    if whiten == "scalar":  # on the interleaved (..., *F, 2) real view: few full passes
        xv = torch.view_as_real(x)
        rdims = tuple(d - 1 for d in dims)  # the features in the real view
        c = xv - xv.mean(rdims, keepdim=True)  # (..., *F, 2) centred (Re, Im)
        n = math.prod(normalized_shape)
        var = (c * c).sum(rdims + (-1,), keepdim=True) / n  # E|z - mean|^2: (..., 1..., 1)
        inv = torch.rsqrt(var + eps)
        inplace = not torch.is_grad_enabled()  # inference: no fresh (..., *F, 2) buffers
        return _affine_2x2_interleaved(c.mul_(inv) if inplace else c * inv, weight, bias, inplace)
    xr, xi = x.real, x.imag
    cr = xr - xr.mean(dims, keepdim=True)  # (..., *F)
    ci = xi - xi.mean(dims, keepdim=True)
    vrr = (cr * cr).mean(dims, keepdim=True) + eps
    vii = (ci * ci).mean(dims, keepdim=True) + eps
    vri = (cr * ci).mean(dims, keepdim=True)
    det = (vrr * vii - vri * vri).clamp_min(eps * eps)  # >= eps * tr V - eps^2 analytically
    s = torch.sqrt(det)
    t = torch.sqrt(vrr + vii + 2.0 * s)
    inv = 1.0 / (s * t)
    p, q, r = (vii + s) * inv, -vri * inv, (vrr + s) * inv  # V^(-1/2) = [[p, q], [q, r]]
    return affine_2x2(p * cr + q * ci, q * cr + r * ci, weight, bias)


def planar_layer_norm(
    x: Tensor,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    whiten: str = "full",
    *,
    inplace: bool = False,
    out: Tensor | None = None,
) -> Tensor:
    """:func:`layer_norm` over the last dim of PLANAR ROWS: real x (..., 2, F) holding Re in
    ``x[..., 0, :]`` and Im in ``x[..., 1, :]``; returns the same layout.

    The same arithmetic as :func:`layer_norm` (centre Re and Im, whiten, per-feature 2x2
    affine), with no complex <-> real conversion. ``inplace`` may overwrite x (only where no
    gradient is recorded); ``out`` (..., 2, F), possibly a strided view, receives the result
    (likewise only without autograd).

    Args:
        x: real (..., 2, F).
        weight: real (F, 2, 2) affine matrix or None.
        bias: real (F, 2) or None.
        eps, whiten: as :func:`layer_norm`.
    """
    check_choice(whiten, "whiten", WHITEN_MODES, "planar_layer_norm")
    n = x.shape[-1]
    grad = torch.is_grad_enabled()
    c = x.sub_(x.mean(-1, keepdim=True)) if inplace else x - x.mean(-1, keepdim=True)
    if whiten == "scalar":
        if grad:
            var = (c * c).sum((-2, -1), keepdim=True) / n  # E|z - mean|^2: (..., 1, 1)
        else:  # one read pass over contiguous rows, no (..., 2, F) temporary
            rows = torch.linalg.vector_norm(c, dim=-1, keepdim=True)  # (..., 2, 1)
            var = rows.square_().sum(-2, keepdim=True).div_(n)
        inv = torch.rsqrt(var + eps)  # (..., 1, 1)
        y = c.mul_(inv) if inplace else c * inv
    else:
        cr, ci = c[..., 0, :], c[..., 1, :]
        vrr = (cr * cr).mean(-1, keepdim=True) + eps
        vii = (ci * ci).mean(-1, keepdim=True) + eps
        vri = (cr * ci).mean(-1, keepdim=True)
        det = (vrr * vii - vri * vri).clamp_min(eps * eps)
        s = torch.sqrt(det)
        t = torch.sqrt(vrr + vii + 2.0 * s)
        inv = 1.0 / (s * t)
        p, q, r = (vii + s) * inv, -vri * inv, (vrr + s) * inv
        y = torch.stack((p * cr + q * ci, q * cr + r * ci), -2)
    if weight is None and bias is None:
        return y if out is None else out.copy_(y)
    w = None if weight is None else weight.to(y.dtype)
    b = None if bias is None else bias.to(y.dtype).t().contiguous()  # (2, F)
    if out is None and torch.is_grad_enabled():
        if w is not None:
            wd = torch.diagonal(w, dim1=-2, dim2=-1).t()  # (2, F): (w_rr, w_ii)
            wo = torch.diagonal(w.flip(-1), dim1=-2, dim2=-1).t()  # (2, F): (w_ri, w_ir)
            y = y * wd + y.flip(-2) * wo
        return y if b is None else y + b
    if out is None:
        out = torch.empty(y.shape, dtype=y.dtype, device=y.device)
    if w is None:
        return torch.add(y, b, out=out)
    wt = w.reshape(-1, 4).t().contiguous()  # (4, F): w_rr, w_ri, w_ir, w_ii
    wd = wt[0::3]  # (2, F): (w_rr, w_ii)
    if b is None:
        torch.mul(y, wd, out=out)
    else:
        torch.addcmul(b, y, wd, out=out)
    out[..., 0, :].addcmul_(y[..., 1, :], wt[1])  # + w_ri Im
    out[..., 1, :].addcmul_(y[..., 0, :], wt[2])  # + w_ir Re
    return out


def rms_norm(
    x: Tensor, normalized_shape: tuple[int, ...], weight: Tensor | None = None, eps: float = 1e-6
) -> Tensor:
    """z / sqrt(mean |z|^2 + eps) over the trailing dims, then a per-feature 2x2 map of (Re, Im).

    Phase-preserving before the affine map; on a real input with ``weight = diag(w, w)`` it
    equals torch.nn.RMSNorm(weight=w) (Zhang & Sennrich, "Root Mean Square Layer
    Normalization", 2019).
    """
    dims = tuple(range(-len(normalized_shape), 0))
    xr, xi = x.real, x.imag
    inv = torch.rsqrt((xr * xr + xi * xi).mean(dims, keepdim=True) + eps)
    return affine_2x2(xr * inv, xi * inv, weight, None)


# --------------------------------------------------------------------------- activations


def cgelu(x: Tensor, approximate: str = "none") -> Tensor:
    """Split GELU: GELU(Re z) + j GELU(Im z) (one kernel on the (..., 2) real view)."""
    return torch.view_as_complex(F.gelu(torch.view_as_real(x), approximate=approximate))


def crelu(x: Tensor) -> Tensor:
    """Split ReLU (CReLU of Trabelsi et al. 2018): ReLU(Re z) + j ReLU(Im z)."""
    return torch.view_as_complex(F.relu(torch.view_as_real(x)))


def _safe_modulus(x: Tensor) -> tuple[Tensor, Tensor]:
    """(|z| with 1 where z == 0, nonzero mask); gradients stay finite at z = 0."""
    xr = torch.view_as_real(x)
    r2 = (xr * xr).sum(-1)
    nz = r2 > 0
    return torch.sqrt(torch.where(nz, r2, torch.ones_like(r2))), nz


def modrelu(x: Tensor, bias: Tensor | float) -> Tensor:
    """modReLU (Arjovsky et al. 2016, eq. 8): ReLU(|z| + b) z/|z|.

    At z = 0 the output and its gradient are 0 (the phase z/|z| is undefined there; no NaN).
    ``bias`` is real, broadcastable to ``x`` (per feature or a scalar).
    """
    r, nz = _safe_modulus(x)
    scale = torch.where(nz, torch.relu(r + bias) / r, torch.zeros_like(r))
    return x * scale


def zrelu(x: Tensor) -> Tensor:
    """zReLU (Guberman 2016): z where arg z is in [0, pi/2] (Re z >= 0 and Im z >= 0), else 0."""
    keep = (x.real >= 0) & (x.imag >= 0)
    return x * keep


def cardioid(x: Tensor) -> Tensor:
    """Cardioid (Virtue et al. 2017): (1 + cos(arg z)) z / 2; arg 0 := 0, finite gradient."""
    r, nz = _safe_modulus(x)
    cos = torch.where(nz, x.real / r, torch.ones_like(r))
    return x * (0.5 * (1.0 + cos))


def complex_dropout(
    x: Tensor, p: float, training: bool = True, independent: bool = False
) -> Tensor:
    """Dropout with ONE Bernoulli mask shared by Re and Im (Trabelsi et al. 2018).

    A kept entry keeps its phase; surviving entries are scaled by 1/(1 - p). With
    ``independent`` Re and Im get independent masks (complextorch 2.1.1's ``Dropout``).
    """
    if not training or p == 0.0:
        return x
    if p >= 1.0:
        return x * 0
    if independent:
        return torch.view_as_complex(F.dropout(torch.view_as_real(x), p, True))
    mask = torch.empty(x.shape, dtype=real_dtype(x), device=x.device).bernoulli_(1.0 - p)
    return x * mask.div_(1.0 - p)


# --------------------------------------------------------------------------- positions


def inverse_frequencies(
    dim: int,
    base: float = 10000.0,
    dtype: torch.dtype = torch.float32,
    device=None,
    compute_dtype: torch.dtype = torch.float64,
) -> Tensor:
    """omega_k = base^(-k/dim), k = 0 .. dim-1: one frequency per complex channel.

    Computed in ``compute_dtype`` (float64 by default; float32 is complextorch 2.1.1's
    arithmetic) and cast to ``dtype``.
    """
    k = torch.arange(0, dim, dtype=compute_dtype, device=device)
    return (1.0 / (base ** (k / dim))).to(dtype)


def position_phasor(
    omega: Tensor,
    length: int,
    offset: int = 0,
    phase: Tensor | None = None,
    dtype: torch.dtype = torch.complex64,
    angle_dtype: torch.dtype = torch.float64,
) -> Tensor:
    """e^{j (omega_k n + phase_k)} for n = offset .. offset + length - 1: complex (length, dim).

    Angles are formed in ``angle_dtype``: float64 by default (exact positions, no float32
    round-off at large n), float32 as complextorch 2.1.1 does. The phasor is returned in
    ``dtype``; gradients flow into ``omega`` and ``phase``.
    """
    pos = torch.arange(offset, offset + length, device=omega.device, dtype=angle_dtype)
    ang = pos[:, None] * omega.to(angle_dtype)[None, :]  # (T, dim)
    if phase is not None:
        ang = ang + phase.to(angle_dtype)
    rdt = torch.float64 if dtype == torch.complex128 else torch.float32
    return torch.complex(torch.cos(ang).to(rdt), torch.sin(ang).to(rdt))


# --------------------------------------------------------------------------- attention


def _mask_to_bias(mask: Tensor, dtype: torch.dtype, name: str) -> Tensor:
    """bool (True = masked out) -> additive 0 / -inf; real floating -> itself (additive)."""
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(
            mask, float("-inf")
        )
    if mask.is_floating_point():
        return mask.to(dtype)
    raise ValueError(
        f"{name} must be a bool tensor (True = masked out) or a real floating additive mask, "
        f"got dtype {mask.dtype}"
    )


def attention_bias(
    attn_mask: Tensor | None,
    key_padding_mask: Tensor | None,
    *,
    batch: int,
    heads: int,
    t_q: int,
    t_k: int,
    dtype: torch.dtype = torch.float32,
) -> Tensor | None:
    """Merge ``attn_mask`` and ``key_padding_mask`` into one additive real bias.

    Conventions follow :class:`torch.nn.MultiheadAttention`: a bool mask is True where
    attention is NOT allowed; a floating mask is added to the (scaled) scores.

    Args:
        attn_mask: (Tq, Tk), (B, Tq, Tk), (B * H, Tq, Tk), or 4-D broadcastable to
            (B, H, Tq, Tk); or None.
        key_padding_mask: (B, Tk), True at padding keys; or None.
        batch, heads, t_q, t_k: the attention sizes.
        dtype: dtype of the returned bias.

    Returns:
        None, or a real bias broadcastable to (B, H, Tq, Tk) (with its last two dims full).

    Raises:
        ValueError: a mask of the wrong shape or dtype, naming the shapes allowed.
    """
    bias = None
    if attn_mask is not None:
        shape = tuple(attn_mask.shape)
        allowed = (
            f"allowed: ({t_q}, {t_k}), ({batch}, {t_q}, {t_k}), ({batch * heads}, {t_q}, {t_k}) "
            f"or 4-D broadcastable to ({batch}, {heads}, {t_q}, {t_k})"
        )
        if attn_mask.dim() not in (2, 3, 4) or shape[-2:] != (t_q, t_k):
            raise ValueError(f"attn_mask has shape {shape}; {allowed}")
        m = attn_mask
        if m.dim() == 2:
            m = m[None, None]
        elif m.dim() == 3:
            if shape[0] == batch * heads:
                m = m.reshape(batch, heads, t_q, t_k)
            elif shape[0] in (batch, 1):
                m = m[:, None]
            else:
                raise ValueError(f"attn_mask has shape {shape}; {allowed}")
        elif shape[0] not in (1, batch) or shape[1] not in (1, heads):
            raise ValueError(f"attn_mask has shape {shape}; {allowed}")
        bias = _mask_to_bias(m, dtype, "attn_mask")
    if key_padding_mask is not None:
        shape = tuple(key_padding_mask.shape)
        if shape != (batch, t_k):
            raise ValueError(
                f"key_padding_mask has shape {shape}; allowed: (batch, key length) = "
                f"({batch}, {t_k})"
            )
        kp = _mask_to_bias(key_padding_mask, dtype, "key_padding_mask")[:, None, None, :]
        bias = kp if bias is None else bias + kp
    if bias is not None and bias.shape[-2] != t_q:
        bias = bias.expand(*bias.shape[:-2], t_q, t_k)
    return bias


def _masked_softmax(z: Tensor, bias: Tensor | None) -> Tensor:
    """softmax(z + bias) over the last dim; a row with every key masked gives zeros, not NaN."""
    if bias is None:
        return torch.softmax(z, dim=-1)
    z = z + bias
    ok = torch.isfinite(z).any(-1, keepdim=True)  # rows with at least one key
    z = torch.where(ok, z, torch.zeros_like(z))
    return torch.softmax(z, dim=-1) * ok


def masked_softmax(z: Tensor, bias: Tensor | None = None) -> Tensor:
    """softmax(z + bias) over the last dim (bias additive, -inf = masked); a row with every
    key masked gives zeros, not NaN."""
    return _masked_softmax(z, bias)


class _Modulus(torch.autograd.Function):
    """|z| from stacked (Re, Im) in dim -3: (..., 2, M, N) -> (..., M, N).

    The gradient (Re, Im)/|z| is taken as 0 where z == 0 (no NaN, like torch.abs on complex).
    """

    @staticmethod
    def forward(ctx, ri: Tensor) -> Tensor:
        m = torch.hypot(ri.select(-3, 0), ri.select(-3, 1))
        ctx.save_for_backward(ri, m)
        return m

    @staticmethod
    def backward(ctx, g: Tensor) -> Tensor:
        ri, m = ctx.saved_tensors
        return ri * (g * _reciprocal_or_zero(m)).unsqueeze(-3)


def _reciprocal_or_zero(m: Tensor) -> Tensor:
    """1/m where m > 0, 0 where m == 0 (m >= 0)."""
    return torch.where(m > 0, m, torch.full_like(m, float("inf"))).reciprocal_()


class _SafeReciprocal(torch.autograd.Function):
    """1/m for m > 0 and 0 for m == 0 (m >= 0), with the gradient -1/m^2 (0 at m == 0)."""

    @staticmethod
    def forward(ctx, m: Tensor) -> Tensor:
        r = _reciprocal_or_zero(m)
        ctx.save_for_backward(r)
        return r

    @staticmethod
    def backward(ctx, g: Tensor) -> Tensor:
        (r,) = ctx.saved_tensors
        return -g * r * r


def _polar_weights(ri: Tensor, bias: Tensor | None, phase: bool) -> tuple[Tensor, Tensor | None]:
    """softmax(|S|) from stacked (Re S, Im S) (..., 2, M, N); with ``phase`` also the scale
    softmax(|S|)/|S| (0 where S = 0) such that the phase weights are ri * scale."""
    m = _Modulus.apply(ri)  # (..., M, N)
    a = _masked_softmax(m, bias)
    return a, (a * _SafeReciprocal.apply(m) if phase else None)


def modulus_attention(
    qq: Tensor,
    k: Tensor,
    v: Tensor,
    bias: Tensor | None = None,
    dropout_p: float = 0.0,
    buffers: tuple[Tensor, Tensor, Tensor] | None = None,
) -> tuple[Tensor, Tensor]:
    """softmax(|S| + bias)·V, the modulus score of complex attention (Eilers & Jiang 2023), on
    real features, in any feature layout.

    The caller supplies the stacked, scaled queries: ``qq[..., 0, :, :]`` · kᵀ must give Re S and
    ``qq[..., 1, :, :]`` · kᵀ Im S (for interleaved (re, im) features, the rows of q and of -j·q;
    for [Re | Im] features, [Qr, Qi] and [Qi, -Qr]). Re S and Im S come from ONE batched GEMM;
    the real weights multiply the real features of V (e.g. [Vr, Vi]) in one more.

    Args:
        qq: real (B, H, 2, Tq, F) stacked scaled queries.
        k: real (B, H, Tk, F) keys.
        v: real (B, H, Tk, Fv) values.
        bias: additive bias broadcastable to (B, H, Tq, Tk) (-inf = masked; a row with every
            key masked gets zero weights).
        dropout_p: dropout on the weights.
        buffers: without autograd only: preallocated contiguous (scores (B, H, 2, Tq, Tk),
            weights (B, H, Tq, Tk), output (B, H, Tq, Fv)) into which every step is computed in
            place (no fresh T x T tensors; |S| as sqrt(Re² + Im²)). The output buffer may share
            memory with ``qq`` (written only after the scores).

    Returns:
        (output (B, H, Tq, Fv), the pre-dropout weights (B, H, Tq, Tk)).
    """
    b, h, _, t_q, f = qq.shape
    t_k = k.shape[-2]
    if buffers is None:
        ri = (qq.flatten(-3, -2) @ k.transpose(-2, -1)).unflatten(-2, (2, t_q))  # (.., 2, Tq, Tk)
        a, _ = _polar_weights(ri, bias, phase=False)  # softmax(|S| + bias)
        w = F.dropout(a, dropout_p) if dropout_p > 0.0 else a
        return w.to(v.dtype) @ v, a
    if torch.is_grad_enabled():
        raise ValueError("modulus_attention: buffers are for inference only (no autograd)")
    scores, weights, out = buffers
    ri = torch.bmm(
        qq.reshape(b * h, 2 * t_q, f),
        k.reshape(b * h, t_k, f).transpose(1, 2),
        out=scores.view(b * h, 2 * t_q, t_k),
    ).view(b, h, 2, t_q, t_k)
    re, im = ri[:, :, 0], ri[:, :, 1]
    a = torch.mul(re, re, out=weights)  # |S| = sqrt(Re² + Im²)
    a.addcmul_(im, im).sqrt_()
    if bias is None:
        torch.softmax(a, -1, out=a)
    else:
        a = _masked_softmax(a, bias)
    w = F.dropout(a, dropout_p) if dropout_p > 0.0 else a
    o = torch.bmm(
        w.reshape(b * h, t_q, t_k),
        v.reshape(b * h, t_k, v.shape[-1]),
        out=out.view(b * h, t_q, v.shape[-1]),
    )
    return o.view(b, h, t_q, v.shape[-1]), a


def complex_softmax(logits: Tensor, score: str, bias: Tensor | None = None) -> Tensor:
    """Attention weights from scaled complex scores S = Q K^H / sqrt(d) over the last dim.

    * ``"real"``: softmax(Re S) (real weights).
    * ``"modulus"``: softmax(|S|) (real weights; Eilers & Jiang 2023, the CmplxBERT choice).
    * ``"split"``: softmax(Re S) + j softmax(Im S) (complex weights; complextorch's CVSoftMax).
    * ``"phase"``: softmax(|S|) * S/|S| (complex weights, phase-preserving; 0 where S = 0).

    ``bias`` (additive, -inf = masked) is added to each real logit before its softmax. A row
    whose keys are all masked gets all-zero weights (as torch's SDPA), not NaN.
    """
    check_choice(score, "score", SCORES, "complex_softmax")
    if not logits.is_complex():
        logits = logits.to(torch.complex128 if logits.dtype == torch.float64 else torch.complex64)
    re, im = logits.real, logits.imag
    if score == "real":
        return _masked_softmax(re, bias)
    if score == "split":
        return torch.complex(_masked_softmax(re, bias), _masked_softmax(im, bias))
    ri = torch.stack([re, im], dim=-3)  # (..., 2, M, N)
    a, sc = _polar_weights(ri, bias, phase=score == "phase")
    if sc is None:
        return a
    return torch.complex(re * sc, im * sc)


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    score: str = "real",
    bias: Tensor | None = None,
    is_causal: bool = False,
    q_offset: int = 0,
    scale: float | None = None,
    dropout_p: float = 0.0,
    need_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Complex scaled-dot-product attention with Hermitian scores S = scale * Q K^H.

    ``score="real"`` without ``need_weights`` is exact and fused: Re(q . conj k) =
    Re q . Re k + Im q . Im k, so softmax(Re S) is the ordinary real attention of the
    (re, im)-interleaved real views of q and k (2 d_k real features, ``scale`` passed
    explicitly), and the real weights multiply Re V and Im V alike, so V's interleaved real
    view (2 d_v features) is the value tensor: ONE call of
    :func:`complexformer.attention.functional.attention` (torch SDPA: flash / memory-efficient
    kernels, O(T) memory, no T x T complex tensor, no copies). ``score="split"`` is fused
    too: Im(q . conj k) = Re((-j q) . conj k), so softmax(Re S) V + j softmax(Im S) V is two
    such calls (the two softmaxes then get independent dropout masks). ``"modulus"`` and
    ``"phase"`` (and ``need_weights``) are computed explicitly with :func:`complex_softmax`.

    Args:
        q: complex (B, H, Tq, d_k); k: complex (B, H, Tk, d_k); v: complex (B, H, Tk, d_v).
        score: ``"real"``, ``"modulus"``, ``"split"`` or ``"phase"``.
        bias: additive real bias broadcastable to (B, H, Tq, Tk) (see :func:`attention_bias`).
        is_causal: mask keys after each query; queries sit at positions q_offset ..
            q_offset + Tq - 1 and keys at 0 .. Tk - 1 (KV-cache decoding).
        q_offset: absolute position of the first query.
        scale: score scale; default 1/sqrt(d_k).
        dropout_p: dropout on the attention weights (real weights: torch's dropout; "phase":
            one mask for Re and Im of a weight; "split": one mask per real softmax).
        need_weights: also return the (pre-dropout) attention weights (B, H, Tq, Tk): real for
            ``"real"``/``"modulus"``, complex for ``"split"``/``"phase"``.

    Returns:
        (output complex (B, H, Tq, d_v), weights or None).
    """
    check_choice(score, "score", SCORES, "scaled_dot_product_attention")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if is_causal and q.shape[-2] == 1 and q_offset >= k.shape[-2] - 1:
        is_causal = False  # one decoding query at or after the last key sees every key
    if score in ("real", "split") and not need_weights:
        kr, vr = as_real_interleaved(k), as_real_interleaved(v)  # (B, H, Tk, 2 d_k / 2 d_v)

        def fused(qq: Tensor) -> Tensor:  # softmax(Re(qq K^H) scale + bias) V: one real SDPA
            out = _real_sdpa(
                as_real_interleaved(qq),
                kr,
                vr,
                is_causal=is_causal,
                q_offset=q_offset,
                scale=scale,
                bias=bias,
                dropout_p=dropout_p,
            )
            return as_complex_interleaved(out)  # (B, H, Tq, d_v)

        out = fused(q)
        if score == "split":  # Im(q conj k) = Re((-j q) conj k): softmax(Im S) V is fused too
            out = out + 1j * fused(-1j * q)
        return out, None
    t_q, t_k = q.shape[-2], k.shape[-2]
    kr, vr = as_real_interleaved(k), as_real_interleaved(v)
    kt = kr.transpose(-2, -1)  # (B, H, 2 d_k, Tk)
    if is_causal:
        allowed = causal_mask(t_q, t_k, q_offset, device=q.device)
        causal = torch.zeros(allowed.shape, dtype=kr.dtype, device=q.device)
        causal = causal.masked_fill_(~allowed, float("-inf"))
        bias = causal if bias is None else bias + causal
    drop = (lambda w: F.dropout(w, dropout_p)) if dropout_p > 0.0 else (lambda w: w)
    if score == "real":  # only Re S is needed: one real GEMM on 2 d_k features
        weights = _masked_softmax((as_real_interleaved(q) * scale) @ kt, bias)  # (B, H, Tq, Tk)
        return as_complex_interleaved(drop(weights).to(vr.dtype) @ vr), (
            weights if need_weights else None
        )
    # Re S and Im S = Re((-j q) conj k) from ONE real GEMM of the stacked [q; -j q] with k
    qs = torch.view_as_real(q) * scale  # (B, H, Tq, d_k, 2): scaled (Re q, Im q)
    rot = torch.stack((qs[..., 1], -qs[..., 0]), -1)  # -j q = Im q - j Re q, scaled
    qq = torch.stack([qs, rot], dim=-4).flatten(-2)  # (B, H, 2, Tq, 2d_k)
    if score == "modulus":  # real weights: (Re V, Im V) in one real GEMM
        out, a = modulus_attention(qq, kr, vr, bias, dropout_p)
        return as_complex_interleaved(out), (a if need_weights else None)
    ri = (qq.flatten(-3, -2) @ kt).unflatten(-2, (2, t_q))  # (B, H, 2, Tq, Tk)
    bias2 = None if bias is None else bias.unsqueeze(-3)  # broadcast over (Re, Im)
    if score == "split":  # two real softmaxes, two independent dropout masks
        w = _masked_softmax(ri, bias2)  # (B, H, 2, Tq, Tk)
        weights = torch.complex(w[..., 0, :, :], w[..., 1, :, :]) if need_weights else None
        w = drop(w)
    else:
        a, sc = _polar_weights(ri, bias, phase=True)
        # phase: a S/|S| = (a/|S|) (Re S + j Im S); one dropout mask for both parts
        weights = (
            torch.complex(ri[..., 0, :, :] * sc, ri[..., 1, :, :] * sc) if need_weights else None
        )
        w = ri * drop(sc).unsqueeze(-3)  # (B, H, 2, Tq, Tk)
    # complex weights (w_re + j w_im) V = w_re V + j (w_im V): ONE real GEMM on stacked rows
    o = (w.to(vr.dtype).flatten(-3, -2) @ vr).unflatten(-2, (2, t_q))  # (B, H, 2, Tq, 2d_v)
    out = as_complex_interleaved(o[..., 0, :, :]) + 1j * as_complex_interleaved(o[..., 1, :, :])
    return out, (weights if need_weights else None)
