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


def planar_norm(ln: LayerNorm, x: Tensor, ws: Workspace | None = None, name: str = "") -> Tensor:
    """The complex LayerNorm ``ln`` on planar rows; without autograd it overwrites x and
    writes into the workspace buffer ``name``."""
    if not torch.is_grad_enabled():
        out = None if ws is None else ws.get(name, x.shape, x)
        return CF.planar_layer_norm(x, ln.weight, ln.bias, ln.eps, ln.whiten, inplace=True, out=out)
    return CF.planar_layer_norm(x, ln.weight, ln.bias, ln.eps, ln.whiten)


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
    if ws is None:
        qs = q * scale
        qq = torch.stack((qs, torch.stack((qs[..., 1, :], -qs[..., 0, :]), -2)), 2)
        kv = heads[1:].reshape(2, b, h, t, 2 * d)  # (K; V) with [Re | Im] features
        o, _ = CF.modulus_attention(qq.flatten(-2), kv[0], kv[1], bias, dropout_p)
        return o  # (B, H, T, 2d)
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
