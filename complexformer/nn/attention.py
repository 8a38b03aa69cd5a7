"""Complex multi-head attention with masks, a KV cache and fused real-part scores.

Scores are Hermitian, S = Q K^H / sqrt(d_k); the weights come from one of four softmaxes
(``score=``): ``"real"`` softmax(Re S) (default; exact single real SDPA call, see
:func:`complexformer.nn.functional.scaled_dot_product_attention`), ``"modulus"``
softmax(|S|) (Eilers & Jiang, "Building Blocks for a Complex-Valued Transformer
Architecture", ICASSP 2023; the CmplxBERT attention), ``"split"`` softmax(Re S) + j softmax(Im S)
(complextorch's default CVSoftMax) and ``"phase"`` softmax(|S|) S/|S|.

API: complextorch 2.1.1's ``MultiheadAttention(n_heads, d_model, d_k, d_v, dropout, rotary=)``,
plus torch.nn.MultiheadAttention's masks (``attn_mask``, ``key_padding_mask``,
``is_causal``, ``need_weights``), cross-attention and a KV cache. Unlike complextorch's module it
is the attention sub-layer only (no residual connection or LayerNorm inside; the Transformer
layers add them) and dropout acts on the attention weights, as in torch.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from . import functional as CF
from .cache import LayerKVCache, StaticKVCache
from .linear import Linear
from .positional import RotaryEmbedding
from .utils import check_choice, check_positive_int, real_dtype, require_complex

__all__ = ["MultiheadAttention"]


class MultiheadAttention(nn.Module):
    """Complex multi-head attention.

    Args:
        n_heads: number of heads H.
        d_model: complex features of the query input (and of the output).
        d_k: per-head query/key size (default d_model // n_heads).
        d_v: per-head value size (default d_k).
        dropout: dropout probability on the attention weights (training only).
        rotary: optional :class:`RotaryEmbedding` with ``dim = d_k``, applied to the per-head
            queries (at positions offset ..) and keys (at their own positions).
        score: ``"real"``, ``"modulus"``, ``"split"`` or ``"phase"``.
        bias: learnable complex biases in the four projections (complextorch: none).
        kdim, vdim: features of the key / value inputs (default d_model; cross-attention).
        batch_first: inputs are (B, T, E) (default) or (T, B, E).

    Shapes:
        query (B, Tq, d_model), key (B, Tk, kdim), value (B, Tk, vdim), complex64/complex128;
        output (B, Tq, d_model) of the query's dtype.
    """

    def __init__(
        self,
        n_heads: int,
        d_model: int,
        d_k: int | None = None,
        d_v: int | None = None,
        dropout: float = 0.1,
        rotary: RotaryEmbedding | None = None,
        score: str = "real",
        bias: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = True,
    ) -> None:
        super().__init__()
        where = "MultiheadAttention"
        self.n_heads = check_positive_int(n_heads, "n_heads", where)
        self.d_model = check_positive_int(d_model, "d_model", where)
        if d_k is None:
            if d_model % n_heads:
                raise ValueError(
                    f"{where}: d_model={d_model} is not divisible by "
                    f"n_heads={n_heads}; pass d_k explicitly"
                )
            d_k = d_model // n_heads
        self.d_k = check_positive_int(d_k, "d_k", where)
        self.d_v = check_positive_int(d_v if d_v is not None else d_k, "d_v", where)
        self.kdim = check_positive_int(kdim if kdim is not None else d_model, "kdim", where)
        self.vdim = check_positive_int(vdim if vdim is not None else d_model, "vdim", where)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"{where}: dropout must be in [0, 1), got {dropout!r}")
        self.dropout = float(dropout)
        self.score = check_choice(score, "score", CF.SCORES, where)
        if rotary is not None:
            if not isinstance(rotary, RotaryEmbedding):
                raise ValueError(
                    f"{where}: rotary must be a RotaryEmbedding or None, got "
                    f"{type(rotary).__name__}"
                )
            if rotary.dim != self.d_k:
                raise ValueError(f"{where}: rotary.dim={rotary.dim} must equal d_k={self.d_k}")
        self.rotary = rotary
        self.batch_first = batch_first
        h = self.n_heads
        self.w_q = Linear(d_model, h * self.d_k, bias=bias)
        self.w_k = Linear(self.kdim, h * self.d_k, bias=bias)
        self.w_v = Linear(self.vdim, h * self.d_v, bias=bias)
        self.fc = Linear(h * self.d_v, d_model, bias=bias)

    # ------------------------------------------------------------------ helpers

    def _heads(self, x: Tensor, d: int) -> Tensor:
        """(B, T, H * d) -> (B, H, T, d) (a view)."""
        b, t = x.shape[:2]
        return x.view(b, t, self.n_heads, d).transpose(1, 2)

    def _project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention: q, k, v from one fused complex GEMM."""
        lins = (self.w_q, self.w_k, self.w_v)
        w = torch.cat([lin.weight for lin in lins], dim=0)  # (H(2 d_k + d_v), d_model, 2)
        b = None if self.w_q.bias is None else torch.cat([lin.bias for lin in lins], dim=0)
        qkv = CF.complex_linear(x, w, b)  # (B, T, H (2 d_k + d_v))
        hk = self.n_heads * self.d_k
        q, k, v = qkv.split((hk, hk, self.n_heads * self.d_v), dim=-1)
        return self._heads(q, self.d_k), self._heads(k, self.d_k), self._heads(v, self.d_v)

    def _check_inputs(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        where = "MultiheadAttention"
        for name, t in (("query", query), ("key", key), ("value", value)):
            require_complex(t, name, where)
            if t.dim() != 3:
                raise ValueError(
                    f"{where}: {name} must be 3-D (B, T, E) (or (T, B, E) with "
                    f"batch_first=False), got shape {tuple(t.shape)}"
                )
        if not query.dtype == key.dtype == value.dtype:
            raise ValueError(
                f"{where}: query, key and value must share a dtype, got "
                f"{query.dtype}, {key.dtype}, {value.dtype}"
            )
        for name, t, e in (
            ("query", query, self.d_model),
            ("key", key, self.kdim),
            ("value", value, self.vdim),
        ):
            if t.shape[-1] != e:
                raise ValueError(
                    f"{where}: last dimension of {name} is {t.shape[-1]}, expected {e}"
                )
        if not query.shape[0] == key.shape[0] == value.shape[0]:
            raise ValueError(
                f"{where}: batch sizes differ: query {tuple(query.shape)}, key "
                f"{tuple(key.shape)}, value {tuple(value.shape)}"
            )
        if key.shape[1] != value.shape[1]:
            raise ValueError(
                f"{where}: key and value lengths differ: {key.shape[1]} vs {value.shape[1]}"
            )

    def _attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        bias: Tensor | None,
        is_causal: bool,
        q_offset: int,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        """The attention core on per-head tensors (a subclass may replace it).

        q (B, H, Tq, d_k), k (B, H, Tk, d_k), v (B, H, Tk, d_v) complex, ``bias`` additive
        real broadcastable to (B, H, Tq, Tk) -> (output (B, H, Tq, d_v), weights or None).
        """
        return CF.scaled_dot_product_attention(
            q,
            k,
            v,
            score=self.score,
            bias=bias,
            is_causal=is_causal,
            q_offset=q_offset,
            scale=1.0 / math.sqrt(self.d_k),
            dropout_p=self.dropout if self.training else 0.0,
            need_weights=need_weights,
        )

    # ------------------------------------------------------------------ forward

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        attn_mask: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
        is_causal: bool = False,
        cache: LayerKVCache | StaticKVCache | None = None,
        offset: int | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query, key, value: complex (B, Tq, d_model), (B, Tk, kdim), (B, Tk, vdim).
            attn_mask: bool (True = NOT allowed, torch.nn.MultiheadAttention convention) or
                additive real mask; (Tq, Tk), (B, Tq, Tk), (B * H, Tq, Tk) or 4-D broadcastable
                to (B, H, Tq, Tk). Tk counts cached keys too.
            key_padding_mask: (B, Tk), True at padding keys (or additive real).
            need_weights: also return the attention weights (B, H, Tq, Tk) (computed
                explicitly, without the fused kernel).
            is_causal: mask keys at positions after each query's position.
            cache: a :class:`LayerKVCache` (self-attention decoding: the new keys/values are
                appended, queries and keys sit at positions cache.length ..) or a
                :class:`StaticKVCache` (cross-attention: key/value are projected on the first
                call and reused; ``key``/``value`` are then ignored).
            offset: position of the first query (default: the cache length, else 0); used for
                the rotary phase and the causal mask.

        Returns:
            complex (B, Tq, d_model); with ``need_weights`` a tuple (output, weights).
        """
        if not self.batch_first:
            same = query is key and key is value
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
            if same:  # keep the identity that enables the fused QKV projection
                key = value = query
        self._check_inputs(query, key, value)
        static = isinstance(cache, StaticKVCache)
        growing = isinstance(cache, LayerKVCache)
        if cache is not None and not (static or growing):
            raise ValueError(
                "MultiheadAttention: cache must be a LayerKVCache, a StaticKVCache "
                f"or None, got {type(cache).__name__}"
            )
        past = cache.length if growing else 0
        q_pos = past if offset is None else offset
        reuse = static and cache.filled
        if not reuse and query is key and key is value and self.kdim == self.vdim == self.d_model:
            q, k, v = self._project_qkv(query)  # (B, H, T, d)
        else:
            q = self._heads(self.w_q(query), self.d_k)  # (B, H, Tq, d_k)
            if reuse:
                k, v = cache.k, cache.v
            else:
                k = self._heads(self.w_k(key), self.d_k)  # (B, H, Tk, d_k)
                v = self._heads(self.w_v(value), self.d_v)  # (B, H, Tk, d_v)
        if self.rotary is not None:
            q = self.rotary(q, q_pos)
            if not reuse:
                k = self.rotary(k, past)
        if growing:
            k, v = cache.update(k, v)  # all keys / values so far
        elif static and not reuse:
            cache.set(k, v)
        b, t_q, t_k = q.shape[0], q.shape[2], k.shape[2]
        bias = CF.attention_bias(
            attn_mask,
            key_padding_mask,
            batch=b,
            heads=self.n_heads,
            t_q=t_q,
            t_k=t_k,
            dtype=real_dtype(q),
        )
        out, weights = self._attend(q, k, v, bias, is_causal, q_pos, need_weights)
        out = out.transpose(1, 2).reshape(b, t_q, self.n_heads * self.d_v)
        out = self.fc(out)  # (B, Tq, d_model)
        if not self.batch_first:
            out = out.transpose(0, 1)
        return (out, weights) if need_weights else out

    def extra_repr(self) -> str:
        return (
            f"n_heads={self.n_heads}, d_model={self.d_model}, d_k={self.d_k}, "
            f"d_v={self.d_v}, score={self.score!r}, dropout={self.dropout}"
        )
