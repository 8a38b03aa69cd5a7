"""Planar rows: the layout in which CmplxBERT's encoder keeps its complex hidden states.

A complex (..., n) tensor is held as a REAL (..., 2, n) one, the Re row then the Im row of each
token. A real map W acts on both rows alike, so a (complex-input) linear is ONE real GEMM on the
(2·tokens, n) matrix (F. Tamburini, "Complexifying BERT using LoRA adapters", CLiC-it 2024,
sec. 3.1: W·x = W·Re x + j W·Im x), and split activations and the complex LayerNorm work on the
rows in place. This module holds the conversions, dropout with one mask per complex entry, the
complex LayerNorm on rows, the modulus-score attention on [Re | Im] head features, and the
per-forward scratch :class:`Workspace` that the layers of one forward without autograd share.
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch import Tensor

from complexformer.nn import LayerNorm
from complexformer.nn import functional as CF

__all__ = [
    "Workspace",
    "modulus_attention",
    "planar_add_real",
    "planar_dropout",
    "planar_lora_cols",
    "planar_lora_linear",
    "planar_modulus",
    "planar_norm",
    "to_complex",
    "to_planar",
    "workspace_alloc",
]


def to_planar(z: Tensor) -> Tensor:
    """complex (..., n) -> planar rows: real (..., 2, n), the Re row then the Im row."""
    return torch.view_as_real(CF.lift_complex(z, "input", "CmplxBert")).transpose(-1, -2)


def to_complex(x: Tensor) -> Tensor:
    """planar rows (..., 2, n) -> complex (..., n)."""
    return torch.complex(x[..., 0, :], x[..., 1, :])


class _PlanarModulus(torch.autograd.Function):
    """|z| of planar rows (..., 2, n) -> (..., n), with the gradient (Re z, Im z)·g/|z| (0 at
    z = 0, like torch.abs on complex). Only the input is kept for backward; |z| is recomputed
    there (the vocabulary logits of an MLM head are the largest activations of a step)."""

    @staticmethod
    def forward(ctx, y: Tensor) -> Tensor:
        ctx.save_for_backward(y)
        return torch.hypot(y.select(-2, 0), y.select(-2, 1))

    @staticmethod
    def backward(ctx, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        m = torch.hypot(y.select(-2, 0), y.select(-2, 1))
        s = torch.where(m > 0, g / m, torch.zeros_like(m))
        return y * s.unsqueeze(-2)


def planar_modulus(y: Tensor) -> Tensor:
    """|z| (..., n) of planar rows y (..., 2, n), with a finite gradient at z = 0."""
    return _PlanarModulus.apply(y)


class _ScalarNorm(torch.autograd.Function):
    """:func:`complexformer.nn.functional.planar_layer_norm` with ``whiten="scalar"`` and a
    2x2 affine (weight (F, 2, 2), bias (F, 2), both in x's dtype) on planar rows (..., 2, F),
    keeping only the whitened rows y and 1/σ for backward (autograd of the composed ops
    would keep the centred rows, y and a flipped copy of y).

    y = (x - mean) / sqrt(E|x - mean|² + eps), out = W_f·(y_re, y_im) + b_f; backward:
    dy = W_fᵀ·dout, d(x - mean) = (dy - y·Σ(dy ⊙ y)/F)/σ, dx = that minus its mean over F.
    """

    @staticmethod
    def _diagonals(weight: Tensor) -> tuple[Tensor, Tensor]:
        """(w_rr, w_ii) and (w_ri, w_ir) of the (F, 2, 2) weight, each (2, F)."""
        wd = torch.diagonal(weight, dim1=-2, dim2=-1).t()
        return wd, torch.diagonal(weight.flip(-1), dim1=-2, dim2=-1).t()

    @staticmethod
    def forward(ctx, x, weight, bias, eps: float):
        n = x.shape[-1]
        c = x - x.mean(-1, keepdim=True)
        inv = torch.rsqrt((c * c).sum((-2, -1), keepdim=True) / n + eps)  # (..., 1, 1)
        y = c.mul_(inv)
        wd, wo = _ScalarNorm._diagonals(weight)
        out = torch.addcmul(bias.t(), y, wd).addcmul_(y.flip(-2), wo)
        ctx.save_for_backward(y, inv, weight)
        return out

    @staticmethod
    def backward(ctx, g):
        y, inv, weight = ctx.saved_tensors
        n = y.shape[-1]
        lead = tuple(range(g.dim() - 2))
        gw = gb = gx = None
        if ctx.needs_input_grad[1]:
            gd, go = (g * y).sum(lead), (g * y.flip(-2)).sum(lead)  # (2, F) each
            gw = torch.stack((torch.stack((gd[0], go[0]), -1), torch.stack((go[1], gd[1]), -1)), 1)
        if ctx.needs_input_grad[2]:
            gb = g.sum(lead).t()
        if ctx.needs_input_grad[0]:
            wd, wo = _ScalarNorm._diagonals(weight)
            gy = (g * wo).flip(-2).addcmul_(g, wd)  # Wᵀ·dout per feature
            gc = gy.sub_(y * ((gy * y).sum((-2, -1), keepdim=True) / n)).mul_(inv)
            gx = gc.sub_(gc.mean(-1, keepdim=True))
        return gx, gw, gb, None


def planar_norm(ln: LayerNorm, x: Tensor, ws: Workspace | None = None, name: str = "") -> Tensor:
    """The complex LayerNorm ``ln`` on planar rows; without autograd it overwrites x and
    writes into the workspace buffer ``name``."""
    if not torch.is_grad_enabled():
        out = None if ws is None else ws.get(name, x.shape, x)
        return CF.planar_layer_norm(x, ln.weight, ln.bias, ln.eps, ln.whiten, inplace=True, out=out)
    w, b = ln.weight, ln.bias
    if ln.whiten == "scalar" and w is not None and b is not None and w.dtype == b.dtype == x.dtype:
        return _ScalarNorm.apply(x, w, b, ln.eps)
    return CF.planar_layer_norm(x, w, b, ln.eps, ln.whiten)


class Workspace:
    """Scratch buffers that the layers of ONE forward without autograd share, by name, so
    that each layer does not allocate (and page-fault in) fresh multi-MB tensors. Lives for
    one :meth:`CmplxBert.forward` call (no memory is kept, no state shared between calls or
    threads); a buffer is reused only once its previous content is dead. In a layer, "big"
    holds in turn the Q/K/V projections, the attention scores, the attention output and the
    FFN intermediate (each dead before the next is written); "hidden" the layer output."""

    def __init__(self) -> None:
        self._bufs: dict[str, Tensor] = {}

    def get(self, name: str, shape, like: Tensor) -> Tensor:
        """An uninitialised ``shape`` tensor of like's dtype and device (one forward uses
        one device)."""
        n = math.prod(shape)
        b = self._bufs.get(name)
        if b is None or b.numel() < n or b.dtype is not like.dtype:
            b = self._bufs[name] = like.new_empty(n)
        return b.narrow(0, 0, n).view(shape)

    def alloc(self, name: str, like: Tensor):
        """A function shape -> :meth:`get` (name, shape, like)."""
        return lambda shape: self.get(name, shape, like)


def workspace_alloc(ws: Workspace | None, name: str, like: Tensor):
    """``ws.alloc(name, like)``, or None without a workspace."""
    return None if ws is None else ws.alloc(name, like)


def planar_dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """:func:`complexformer.nn.functional.complex_dropout` on planar rows (..., 2, n): ONE
    mask per complex entry, shared by its Re and Im rows."""
    if not training or p == 0.0:
        return x
    if p >= 1.0:
        return x * 0
    mask = torch.empty(x.shape[:-2] + (1, x.shape[-1]), dtype=x.dtype, device=x.device)
    return x * mask.bernoulli_(1.0 - p).div_(1.0 - p)


def planar_add_real(delta: Tensor | None, e: Tensor) -> Tensor:
    """Planar rows (..., 2, n) of e + delta, e real (..., n) (Re only), delta planar or None."""
    if delta is None:
        return torch.stack((e, torch.zeros_like(e)), -2)
    if torch.is_grad_enabled():
        return torch.stack((delta[..., 0, :] + e, delta[..., 1, :]), -2)
    delta[..., 0, :] += e
    return delta


class _ModulusAttention(torch.autograd.Function):
    """softmax(|S| + bias)·V for [Re | Im] head features, S = Q·Kᴴ (q already scaled), as
    :func:`complexformer.nn.functional.modulus_attention` computes it, but keeping only q, k,
    v and the dropout mask (as bools) for backward: the (B, H, 2, T, T) scores, their modulus
    and the weights are recomputed there (one more score GEMM) instead of living from the
    forward to the backward of every layer. Half-precision inputs (autocast) are computed in
    float32 both ways, so the recomputed weights are the forward's.

    Backward, with a = softmax(|S| + bias), w = a ⊙ mask/(1 - p), o = w·V:
    dV = wᵀ·dO, da = (dO·Vᵀ) ⊙ mask/(1 - p), d|S| = a ⊙ (da - Σ_k da ⊙ a),
    d(Re S, Im S) = (Re S, Im S) ⊙ d|S|/|S| (0 where S = 0), then the two score GEMMs.
    """

    @staticmethod
    def _scores(q: Tensor, k: Tensor, bias: Tensor | None):
        """The stacked queries [[Qr, Qi]; [Qi, -Qr]] (B, H, 2T, 2d), (Re S; Im S)
        (B, H, 2, T, Tk), |S| and the weights."""
        d = q.shape[-1] // 2
        qq = torch.cat((q, torch.cat((q[..., d:], -q[..., :d]), -1)), -2)
        ri = (qq @ k.transpose(-2, -1)).unflatten(-2, (2, q.shape[-2]))
        m = torch.hypot(ri.select(-3, 0), ri.select(-3, 1))
        return qq, ri, m, CF.masked_softmax(m, bias)

    @staticmethod
    def _compute_dtype(q: Tensor, k: Tensor, v: Tensor) -> torch.dtype:
        """float32 for half-precision inputs (as autocast computes a softmax), else their
        common dtype."""
        dt = torch.promote_types(torch.promote_types(q.dtype, k.dtype), v.dtype)
        return torch.float32 if dt in (torch.float16, torch.bfloat16) else dt

    @staticmethod
    def forward(ctx, q, k, v, bias, p: float):
        dt = _ModulusAttention._compute_dtype(q, k, v)
        kind = q.device.type
        autocast = torch.is_autocast_enabled(kind) if kind in ("cpu", "cuda") else False
        with torch.autocast(kind, enabled=False) if autocast else contextlib.nullcontext():
            b = None if bias is None else bias.to(dt)
            _, _, _, a = _ModulusAttention._scores(q.to(dt), k.to(dt), b)
            keep = None
            if p > 0.0:  # the draw and the scaling of torch's CPU dropout
                noise = torch.empty_like(a).bernoulli_(1.0 - p)
                keep = noise != 0
                a = a * noise.div_(1.0 - p)
            out = a @ v.to(dt)
        ctx.p = p
        ctx.save_for_backward(q, k, v, bias, keep)
        return out

    @staticmethod
    def backward(ctx, g):
        q0, k0, v0, bias, keep = ctx.saved_tensors
        dt = _ModulusAttention._compute_dtype(q0, k0, v0)
        q, k, v, g = q0.to(dt), k0.to(dt), v0.to(dt), g.to(dt)
        bias = None if bias is None else bias.to(dt)
        qq, ri, m, a = _ModulusAttention._scores(q, k, bias)
        ga = g @ v.transpose(-2, -1)  # d(weights after dropout)
        w = a
        if keep is not None:
            scale = keep.to(a.dtype).div_(1.0 - ctx.p)
            w = a * scale
            ga = ga.mul_(scale)
        gv = w.transpose(-2, -1) @ g
        gm = a * (ga - (ga * a).sum(-1, keepdim=True))  # through the softmax
        gm = torch.where(m > 0, gm / m, torch.zeros_like(gm))  # through |S|
        gri = (ri * gm.unsqueeze(-3)).flatten(-3, -2)  # (B, H, 2T, Tk)
        u = gri @ k  # d(stacked queries): (B, H, 2T, 2d)
        t, d = q.shape[-2], q.shape[-1] // 2
        ur, ui = u[..., :t, :], u[..., t:, :]
        gq = ur + torch.cat((-ui[..., d:], ui[..., :d]), -1)  # the second block is [Qi, -Qr]
        gk = gri.transpose(-2, -1) @ qq
        return gq.to(q0.dtype), gk.to(k0.dtype), gv.to(v0.dtype), None, None


def modulus_attention(
    qkv: Tensor, bias: Tensor | None, scale: float, dropout_p: float, ws: Workspace | None = None
) -> Tensor:
    """softmax(|Q·Kᴴ|·scale + bias)·V from the planar (B, T, 2, 3, H, d) projections:
    (B, H, T, 2d) with [Re | Im] of each head's output (Eilers & Jiang 2023; Tamburini 2024,
    sec. 3.3).

    With [Re | Im] head features, Re(Q·Kᴴ) = [Qr, Qi]·[Kr, Ki]ᵀ and Im(Q·Kᴴ) =
    [Qi, -Qr]·[Kr, Ki]ᵀ: the stacked, scaled queries go to
    :func:`complexformer.nn.functional.modulus_attention` (one batched GEMM for Re S and Im S,
    one for the weights times [Vr, Vi]). With a workspace (no autograd) the stacked queries,
    the keys and values, the scores, the weights and the output live in its buffers and every
    T x T step runs in place.
    """
    b, t, _, _, h, d = qkv.shape
    heads = qkv.permute(3, 0, 4, 1, 2, 5)  # (3, B, H, T, 2, d): a view
    q = heads[0]
    if ws is None and not torch.is_grad_enabled():
        ws = Workspace()
    if ws is None:  # autograd: the T x T temporaries are recomputed in backward
        qs = (q * scale).flatten(-2)  # (B, H, T, 2d): [Qr | Qi], scaled
        kv = heads[1:].reshape(2, b, h, t, 2 * d)  # (K; V) with [Re | Im] features
        return _ModulusAttention.apply(qs, kv[0], kv[1], bias, dropout_p)  # (B, H, T, 2d)
    qq = ws.get("att_q", (b, h, 2, t, 2, d), qkv)  # the stacked, scaled queries
    torch.mul(q, scale, out=qq[:, :, 0])
    torch.mul(q[..., 1, :], scale, out=qq[:, :, 1, :, 0])
    torch.mul(q[..., 0, :], -scale, out=qq[:, :, 1, :, 1])
    kv = ws.get("att_kv", (2, b, h, t, 2, d), qkv)
    kv.copy_(heads[1:])
    kv = kv.view(2, b, h, t, 2 * d)
    buffers = (
        ws.get("big", (b, h, 2, t, t), qkv),  # (Re S; Im S)
        ws.get("att_w", (b, h, t, t), qkv),  # the weights
        ws.get("att_q", (b, h, t, 2 * d), qkv),  # the output (the queries are dead by then)
    )
    o, _ = CF.modulus_attention(qq.view(b, h, 2, t, 2 * d), kv[0], kv[1], bias, dropout_p, buffers)
    return o


# --------------------------------------------------------------------------- LoRA linears
# One formula, (W + s·A·Bᴴ)·x + b + b_c on planar rows (Tamburini 2024, sec. 3.1), for one
# ComplexLoRALinear (its complex forward) or several on the same input (Q, K and V). The
# layers are read by attribute (base_layer, lora_A, lora_B, bias_c, r, scaling, dropout), so
# this module does not import :mod:`.layers`.


def _adapter_dropout(m) -> bool:
    return m.training and m.dropout > 0.0 and m.r > 0


def _params(layers, names: tuple[str, ...]) -> list:
    """The named parameters of the LoRA linears ``layers`` ("weight" and "bias" are the base
    layer's), read from the module dicts directly: this runs on every call."""
    out = []
    for m in layers:
        bp, mp = m._modules["base_layer"]._parameters, m._parameters
        out += [bp[n] if n in ("weight", "bias") else mp[n] for n in names]
    return out


def _cached(layers, kind: str, params: list, extra: tuple, build):
    """The one cache policy of the stacked weights that :func:`planar_lora_linear` builds.

    A value is kept (on the first layer, per ``kind`` and group of layers) only while no
    gradient can flow into it: without autograd, or with every parameter frozen; it is keyed
    on the storage, in-place version and device of every parameter it is built from (plus
    ``extra``), so an optimizer step or a load rebuilds it. With a trainable parameter under
    autograd nothing is kept (a kept value would carry no graph).
    """
    if torch.is_grad_enabled() and any(p is not None and p.requires_grad for p in params):
        layers[0].__dict__.get("_planar_cache", {}).pop(kind, None)
        return build()
    key = (
        tuple(id(m) for m in layers),
        tuple(None if p is None else (p.data_ptr(), p._version, p.device) for p in params),
        *extra,
    )
    store = layers[0].__dict__.setdefault("_planar_cache", {})
    hit = store.get(kind)
    if hit is not None and hit[0] == key:
        return hit[1]
    value = build()
    store[kind] = (key, value)
    return value


def _planar_bias(m, w: Tensor) -> Tensor:
    """[b + Re b_c | Im b_c] (out, 2) of the LoRA linear ``m``, in ``w``'s dtype and device
    (zeros where the base bias or the complex bias is absent)."""
    out = w.shape[0]
    b = m.base_layer.bias
    bre = w.new_zeros(out) if b is None else b.to(w.dtype)
    bim = w.new_zeros(out)
    if m.bias_c is not None:
        bc = m.bias_c.to(w.dtype)
        bre, bim = bre + bc[:, 0], bc[:, 1]
    return torch.stack((bre, bim), 1)


def _planar_weights(layers, rdt: torch.dtype) -> tuple[Tensor, Tensor]:
    """(W, Wa) of :func:`planar_lora_linear`: the stacked real base weights (out, in) and the
    adapter + bias block (out, 2R + 2) = [s·Re A | s·Im A | b + Re b_c | Im b_c], each layer's
    A in its own slot of the R = Σ r adapter columns (zeros elsewhere); see :func:`_cached`."""
    params = _params(layers, ("weight", "bias", "lora_A", "bias_c"))
    extra = (rdt, tuple(m.scaling for m in layers))
    return _cached(layers, "autograd", params, extra, lambda: _build_planar_weights(layers, rdt))


def _build_planar_weights(layers, rdt: torch.dtype) -> tuple[Tensor, Tensor]:
    big_r = sum(m.r for m in layers)
    ws, was, off = [], [], 0
    for m in layers:
        w = m.base_layer.weight.to(rdt)
        out = w.shape[0]
        ws.append(w)
        parts = []
        if big_r > 0:
            if m.r > 0:
                a = m.lora_A.to(rdt) * m.scaling  # (out, r, 2)
                z1, z2 = w.new_zeros(out, off), w.new_zeros(out, big_r - off - m.r)
                parts += [torch.cat((z1, a[..., 0], z2), 1), torch.cat((z1, a[..., 1], z2), 1)]
            else:
                parts += [w.new_zeros(out, 2 * big_r)]
        parts.append(_planar_bias(m, w))
        was.append(torch.cat(parts, 1))
        off += m.r
    w = torch.cat(ws, 0) if len(ws) > 1 else ws[0]
    wa = torch.cat(was, 0) if len(was) > 1 else was[0]
    return w, wa


def planar_lora_cols(layers, x: Tensor) -> Tensor:
    """The adapter and bias columns of planar rows x (..., 2, in): (..., 2, 2R + 2).

    With t = Bᴴ·x (each layer's r columns, its own adapter-dropout mask), the Re row is
    [Re t | -Im t | 1 | 0] and the Im row [Im t | Re t | 0 | 1], so that against
    [s·Re A | s·Im A | b_re | b_im] they give Re(s·A·t) + b_re and Im(s·A·t) + b_im.
    Bᴴ·x of every layer (without dropout) is ONE small GEMM of the token rows [Re x | Im x]
    with [[Re B, -Im B], [Im B, Re B]].
    """
    lead, rdt = x.shape[:-2], x.dtype
    adapted = [m for m in layers if m.r > 0]
    e = torch.eye(2, dtype=rdt, device=x.device).expand(lead + (2, 2))
    if not adapted:
        return e
    if any(_adapter_dropout(m) for m in adapted):  # independent masks: one GEMM each
        groups = [([m], planar_dropout(x, m.dropout, True)) for m in adapted]
    else:
        groups = [(adapted, x)]
    trs, tis = [], []
    for ms, xx in groups:
        b = torch.cat([m.lora_B for m in ms], 1) if len(ms) > 1 else ms[0].lora_B
        br, bi = b[..., 0].to(rdt), b[..., 1].to(rdt)  # (in, R)
        bmat = torch.cat((torch.cat((br, -bi), 1), torch.cat((bi, br), 1)), 0)  # (2 in, 2R)
        t = xx.flatten(-2) @ bmat  # the tokens' [Re t | Im t] (x·conj B): (..., 2R)
        trs.append(t[..., : br.shape[1]])
        tis.append(t[..., br.shape[1] :])
    tr = torch.cat(trs, -1) if len(trs) > 1 else trs[0]
    ti = torch.cat(tis, -1) if len(tis) > 1 else tis[0]
    re = torch.cat((tr, -ti), -1)
    im = torch.cat((ti, tr), -1)
    return torch.cat((torch.stack((re, im), -2), e), -1)  # (..., 2, 2R + 2)


def planar_lora_linear(layers, x: Tensor, *, residual: Tensor | None = None, alloc=None) -> Tensor:
    """Several :class:`ComplexLoRALinear` on the same planar-rows input x (..., 2, in),
    concatenated: (..., 2, Σ out) (+ ``residual`` (..., 2, Σ out)).

    Unmerged layers, (W + s·A·Bᴴ)·x + b + b_c: the real base weight W acts on the Re and Im
    rows alike, so the base part is ONE real GEMM of the (2·tokens, in) rows of x (never
    copied or concatenated), and the adapter and biases add a K = 2r + 2 product.

    * With autograd: the adapter columns (:func:`planar_lora_cols`) times
      [s·Re A | s·Im A | b_re | b_im] (plus the residual), into which the base GEMM
      accumulates (only these small columns are saved for the adapters' gradient).
    * Without (:func:`_planar_inference`): the base GEMM also yields Bᴴ·x in 2R extra
      output columns, then the adapter product accumulates in place.

    Both ways compute the same formula; the stacked weights they need are kept by one policy
    (:func:`_cached`). Merged layers (complex W) run their complex forward. ``alloc``: without
    autograd, a function (shape -> uninitialised tensor of x's dtype and device) that
    supplies the base GEMM's output buffer (a caller's reusable scratch space).
    """
    layers = list(layers)
    n_in = x.shape[-1]
    if any(m.merged for m in layers):
        z = torch.complex(x[..., 0, :], x[..., 1, :])
        y = torch.cat([torch.view_as_real(m(z)).transpose(-1, -2) for m in layers], -1)
        return y if residual is None else y + residual
    for m in layers:
        if m.in_features != n_in:
            raise ValueError(
                f"ComplexLoRALinear: last dimension of the input is {n_in}, "
                f"expected in_features={m.in_features}"
            )
    if not torch.is_grad_enabled() and not any(_adapter_dropout(m) for m in layers):
        y = _planar_inference(layers, x, alloc)
        return y if residual is None else y.add_(residual)
    rdt = x.dtype
    w, wa = _planar_weights(layers, rdt)
    cols = planar_lora_cols(layers, x)
    lead = x.shape[:-2]
    n_out = w.shape[0]
    x2 = x.reshape(-1, n_in)  # (2·tokens, in): a view of contiguous rows
    c2 = cols.reshape(-1, cols.shape[-1])
    if residual is not None:
        acc = torch.addmm(residual.reshape(-1, n_out), c2, wa.t())
    else:
        acc = c2 @ wa.t()
    if torch.is_grad_enabled():
        y = torch.addmm(acc, x2, w.t())
    else:  # in place: the GEMM accumulates into the small product (beta = 1)
        y = acc.addmm_(x2, w.t())
    return y.view(lead + (2, n_out))


def _ext_weights(layers, rdt: torch.dtype, device) -> tuple[Tensor, list, Tensor]:
    """The inference weights of :func:`_planar_inference`: the extended base weight
    [W; (Re B)ᵀ; (Im B)ᵀ] (Σ out + 2R, in), per layer (first output, last output, first
    adapter column, r, [s·Re A | s·Im A | b_re | b_im] (out, 2r + 2)), and the (2, 1, 2)
    identity of the bias columns; see :func:`_cached`."""
    params = _params(layers, ("weight", "bias", "lora_A", "lora_B", "bias_c"))
    extra = (rdt, device, tuple(m.scaling for m in layers))
    return _cached(
        layers, "inference", params, extra, lambda: _build_ext_weights(layers, rdt, device)
    )


def _build_ext_weights(layers, rdt: torch.dtype, device) -> tuple[Tensor, list, Tensor]:
    ws, brs, bis, blocks = [], [], [], []
    o0 = off = 0
    for m in layers:
        w = m.base_layer.weight.to(rdt)
        out = w.shape[0]
        ws.append(w)
        parts = []
        if m.r > 0:
            b = m.lora_B.to(rdt)
            brs.append(b[..., 0].t())
            bis.append(b[..., 1].t())
            a = m.lora_A.to(rdt) * m.scaling  # (out, r, 2)
            parts += [a[..., 0], a[..., 1]]
        parts.append(_planar_bias(m, w))
        blocks.append((o0, o0 + out, off, m.r, torch.cat(parts, 1).t().contiguous()))
        o0 += out
        off += m.r
    w = torch.cat(ws + brs + bis, 0).contiguous() if len(ws) + len(brs) > 1 else ws[0]
    eye = torch.eye(2, dtype=rdt, device=device)[:, None]  # (2, 1, 2)
    return w, blocks, eye


def _planar_inference(layers, x: Tensor, alloc=None) -> Tensor:
    """:func:`planar_lora_linear` without autograd and adapter dropout, on planar rows.

    ONE GEMM of the rows of x with [W; (Re B)ᵀ; (Im B)ᵀ] gives the base outputs and, in 2R
    extra columns, x_c·Re B and x_c·Im B of both rows c, hence t = Bᴴ·x (Re t = Re x·Re B +
    Im x·Im B, Im t = Im x·Re B - Re x·Im B); then per layer a K = 2r + 2 GEMM of the
    adapter columns [Re t | -Im t | 1 | 0] (Re row), [Im t | Re t | 0 | 1] (Im row) with
    [s·Re A | s·Im A | b_re | b_im] accumulates the adapter and the biases in place. The
    result is a view (row stride Σ out + 2R) of that GEMM's output.
    """
    n_in = x.shape[-1]
    w, blocks, eye = _ext_weights(layers, x.dtype, x.device)
    x2 = x.reshape(-1, n_in)  # (2·tokens, in)
    n_ext = w.shape[0]
    if alloc is None:
        ye = x2 @ w.t()  # (2·tokens, Σ out + 2R)
    else:
        ye = torch.mm(x2, w.t(), out=alloc((x2.shape[0], n_ext)))
    n_out = blocks[-1][1]
    big_r = (n_ext - n_out) // 2
    y2 = ye.narrow(1, 0, n_out)
    y3 = ye.view(-1, 2, n_ext)  # (tokens, 2, ·)
    n_tok = y3.shape[0]
    groups = [blocks] if len({blk[3] for blk in blocks}) == 1 else [[blk] for blk in blocks]
    for group in groups:  # the adapter columns of layers of equal rank, built together
        r, n = group[0][3], len(group)
        cols = ye.new_empty(n_tok, 2, n, 2 * r + 2)
        if r > 0:
            off = n_out + group[0][2]
            u0, u1 = y3.narrow(2, off, n * r).view(n_tok, 2, n, r).unbind(1)  # x_c·Re B
            v0, v1 = y3.narrow(2, off + big_r, n * r).view(n_tok, 2, n, r).unbind(1)  # ·Im B
            c0, c1 = cols.unbind(1)
            tr, ti = c0.narrow(2, 0, r), c1.narrow(2, 0, r)
            torch.add(u0, v1, out=tr)  # Re t
            torch.sub(u1, v0, out=ti)  # Im t
            torch.neg(ti, out=c0.narrow(2, r, r))
            c1.narrow(2, r, r).copy_(tr)
        cols.narrow(3, 2 * r, 2).copy_(eye)
        for j, (o0, o1, _, _, wa) in enumerate(group):
            y2.narrow(1, o0, o1 - o0).addmm_(cols.select(2, j).reshape(2 * n_tok, -1), wa)
    return y2.view(x.shape[:-1] + (n_out,))
