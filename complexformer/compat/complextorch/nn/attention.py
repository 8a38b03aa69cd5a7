"""complextorch 2.1.1's ``ScaledDotProductAttention`` and ``MultiheadAttention``.

``ScaledDotProductAttention(temperature, attn_dropout, SoftMaxClass, softmax_on)`` is the
attention core, softmax(Q K^H / temperature) V on tensors (..., L, d). With complextorch's
softmaxes it runs the kernels of :func:`complexformer.nn.functional.scaled_dot_product_attention`
(``softmax_on="complex"`` with ``CVSoftMax`` -> ``score="split"``, the default; ``PhaseSoftMax``
-> ``"phase"``; ``MagSoftMax`` -> ``"modulus"``; ``softmax_on="real"`` -> ``"real"``). Any other
``SoftMaxClass`` is applied as complextorch applies it, to the complex scores, without masks.

complextorch's ``MultiheadAttention`` is a whole attention sub-block: projections, the core,
output dropout, a residual connection from the query input and a LayerNorm (eps 1e-6):

    out = LayerNorm(query + Dropout(fc(Attention(w_q query, w_k key, w_v value))))

The compat class is :class:`complexformer.nn.MultiheadAttention` (the attention sub-layer) with
that residual and LayerNorm added and the core in ``self.attention``, as there: a
:class:`ScaledDotProductAttention`, or :class:`HolographicAttention` with
``attention="holographic"``. The projections have no bias, as there. Invalid arguments raise
complextorch's exceptions and messages (see the ``validation`` module); a ``rotary`` whose
``dim`` is not ``d_k`` fails at the first forward, as in complextorch.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from complexformer import nn as cnn
from complexformer.nn import functional as CF

from .holographic import HolographicAttention
from .norm import LayerNorm
from .softmax import CVSoftMax, known_score, score_of
from .validation import (
    ATTENTIONS,
    SOFTMAX_ON,
    check_attention,
    check_dropout,
    check_softmax_on,
)

__all__ = [
    "ATTENTIONS",
    "SOFTMAX_ON",
    "MultiheadAttention",
    "ScaledDotProductAttention",
    "translate_score",
]


def translate_score(softmax_on: str, softmax_class=CVSoftMax) -> str:
    """complextorch's (``softmax_on``, ``SoftMaxClass``) -> complexformer.nn's ``score``.

    Raises:
        ValueError: an unknown ``softmax_on`` (complextorch's message) or a softmax class that
            is none of complextorch's three.
    """
    check_softmax_on(softmax_on)
    return "real" if softmax_on == "real" else score_of(softmax_class)


def _mask_bias(attn_mask: Tensor, dtype: torch.dtype) -> Tensor:
    """bool (True = masked out) -> additive 0 / -inf; a real floating mask is added as it is."""
    if attn_mask.dtype == torch.bool:
        bias = torch.zeros(attn_mask.shape, dtype=dtype, device=attn_mask.device)
        return bias.masked_fill_(attn_mask, float("-inf"))
    if attn_mask.is_floating_point():
        return attn_mask.to(dtype)
    raise ValueError(
        "ScaledDotProductAttention: attn_mask must be a bool tensor (True = masked out) or a "
        f"real floating additive mask, got dtype {attn_mask.dtype}"
    )


class ScaledDotProductAttention(nn.Module):
    """Complex scaled dot-product attention, softmax(Q K^H / temperature) V (complextorch API).

    Args:
        temperature: the score divisor t, typically sqrt(d_k).
        attn_dropout: dropout probability on the attention weights, in [0, 1] (complextorch's
            ``Dropout``: independent masks for the real and imaginary parts of complex weights).
        SoftMaxClass: the softmax of the complex scores when ``softmax_on="complex"``:
            ``CVSoftMax`` (default), ``PhaseSoftMax`` or ``MagSoftMax`` (this package's or
            complextorch's) run the fused kernels; any other class is built as
            ``SoftMaxClass(dim=-1)`` and applied to the complex scores.
        softmax_on: ``"complex"`` (``SoftMaxClass`` on the complex scores) or ``"real"``
            (softmax of Re S, real weights).

    Raises:
        ValueError: ``softmax_on`` not ``"complex"`` or ``"real"``, or ``attn_dropout`` outside
            [0, 1], with complextorch's messages.

    Shapes:
        q (..., Lq, d_k), k (..., Lk, d_k), v (..., Lk, d_v) complex, leading dimensions
        broadcast -> (..., Lq, d_v).
    """

    def __init__(
        self,
        temperature: float,
        attn_dropout: float = 0.1,
        SoftMaxClass=CVSoftMax,  # noqa: N803 (complextorch's argument name)
        softmax_on: str = "complex",
    ) -> None:
        super().__init__()
        check_softmax_on(softmax_on)
        self.temperature = temperature
        self.dropout = cnn.Dropout(check_dropout(attn_dropout), masks="independent")
        self.softmax_on = softmax_on
        if softmax_on == "complex":
            self.softmax = SoftMaxClass(dim=-1)
            #: complexformer.nn score of the softmax; None: applied as it is (no fused kernel)
            self.score: str | None = known_score(SoftMaxClass)
        else:
            self.softmax = nn.Softmax(dim=-1)
            self.score = "real"

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        bias: Tensor | None = None,
        is_causal: bool = False,
        q_offset: int = 0,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """The attention with masks: (output, pre-dropout weights or None).

        Args:
            q: complex (..., Lq, d_k); k: complex (..., Lk, d_k); v: complex (..., Lk, d_v).
            bias: additive real bias broadcastable to (..., Lq, Lk) (-inf = masked).
            is_causal: mask keys after each query (queries at q_offset .., keys at 0 ..).
            q_offset: position of the first query.
            need_weights: also return the attention weights (..., Lq, Lk).

        Returns:
            (output complex (..., Lq, d_v), weights or None).

        Raises:
            ValueError: a mask with a ``SoftMaxClass`` other than complextorch's three.
        """
        if self.score is None:
            if bias is not None or is_causal:
                raise ValueError(
                    "ScaledDotProductAttention: masks need SoftMaxClass CVSoftMax, PhaseSoftMax "
                    f"or MagSoftMax, got {type(self.softmax).__name__}"
                )
            scores = torch.matmul(q / self.temperature, k.conj().transpose(-2, -1))
            weights = self.softmax(scores)  # complextorch's computation, step by step
            return torch.matmul(self.dropout(weights), v), (weights if need_weights else None)
        t_q, t_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
        lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        folded = not (q.dim() == k.dim() == v.dim() == 4 and q.shape[:-2] == k.shape[:-2])
        if folded:  # the kernels take (B, H, L, d): fold any leading dimensions into B

            def fold(t: Tensor) -> Tensor:  # (*lead, L, d) -> (N, 1, L, d)
                return t.expand(*lead, *t.shape[-2:]).reshape(-1, 1, *t.shape[-2:])

            q, k, v = fold(q), fold(k), fold(v)
            if bias is not None:
                bias = bias.expand(*lead, t_q, t_k).reshape(-1, 1, t_q, t_k)
        out, weights = CF.scaled_dot_product_attention(
            q,
            k,
            v,
            score=self.score,
            bias=bias,
            is_causal=is_causal,
            q_offset=q_offset,
            scale=1.0 / self.temperature,
            dropout_p=self.dropout.p if self.training else 0.0,
            need_weights=need_weights,
        )
        if folded:
            out = out.reshape(*lead, t_q, d_v)
            weights = None if weights is None else weights.reshape(*lead, t_q, t_k)
        return out, weights

    def forward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        """softmax(Q K^H / temperature) V: complex (..., Lq, d_v).

        Args:
            q: complex query (..., Lq, d_k).
            k: complex key (..., Lk, d_k).
            v: complex value (..., Lk, d_v).
            attn_mask: a complexformer.nn extra (complextorch has no masks): bool (True = not
                allowed) or additive real, broadcastable to (..., Lq, Lk).
            is_causal: a complexformer.nn extra: mask keys after each query.

        Returns:
            The complex attention output (..., Lq, d_v).
        """
        bias = None if attn_mask is None else _mask_bias(attn_mask, q.real.dtype)
        return self.attend(q, k, v, bias, is_causal)[0]

    def extra_repr(self) -> str:
        return (
            f"temperature={self.temperature}, softmax_on={self.softmax_on!r}, score={self.score!r}"
        )


class MultiheadAttention(cnn.MultiheadAttention):
    """complextorch's complex multi-head attention block (residual and LayerNorm inside).

    Args:
        n_heads: heads H.
        d_model: complex features of query, key, value and output.
        d_k: per-head query/key size.
        d_v: per-head value size.
        dropout: dropout on the attention weights and on the projected output, in [0, 1].
        SoftMaxClass: ``CVSoftMax`` (default), ``PhaseSoftMax`` or ``MagSoftMax`` (of this
            package or of complextorch), or any softmax class (then applied step by step, as
            in complextorch); used when ``softmax_on="complex"``.
        softmax_on: ``"complex"`` (``SoftMaxClass`` on the complex scores) or ``"real"``
            (softmax of Re S).
        rotary: a :class:`RotaryEmbedding` with ``dim=d_k`` for the per-head queries and keys.
        attention: ``"scaled_dot_product"`` or ``"holographic"`` (then ``SoftMaxClass`` and
            ``softmax_on`` are unused).

    Raises:
        ValueError: an unknown ``attention`` or ``softmax_on`` or a ``dropout`` outside [0, 1]
            (complextorch's messages); sizes that are not positive (complexformer.nn's).

    Shapes:
        query (B, Lq, d_model), key and value (B, Lk, d_model) complex -> (B, Lq, d_model).
    """

    def __init__(
        self,
        n_heads: int,
        d_model: int,
        d_k: int,
        d_v: int,
        dropout: float = 0.1,
        SoftMaxClass=CVSoftMax,  # noqa: N803 (complextorch's argument name)
        softmax_on: str = "complex",
        rotary: cnn.RotaryEmbedding | None = None,
        attention: str = "scaled_dot_product",
    ) -> None:
        check_attention(attention)
        # complextorch checks a rotary's dim only when it rotates (at the first forward)
        late_rotary = isinstance(rotary, cnn.RotaryEmbedding) and rotary.dim != d_k
        # the core (self.attention) computes the attention, so the parent's score and dropout
        # are placeholders
        super().__init__(
            n_heads,
            d_model,
            d_k,
            d_v,
            dropout=0.0,
            rotary=None if late_rotary else rotary,
            score="real",
        )
        if late_rotary:
            self.rotary = rotary
        self.softmax_on, self.attention_kind = softmax_on, attention
        self.attention: ScaledDotProductAttention | HolographicAttention
        if attention == "holographic":
            self.attention = HolographicAttention(d_k**0.5, attn_dropout=dropout)
        else:
            self.attention = ScaledDotProductAttention(
                d_k**0.5, dropout, SoftMaxClass=SoftMaxClass, softmax_on=softmax_on
            )
            self.score = self.attention.score or "custom"
        self.dropout = float(dropout)
        self.proj_dropout = cnn.Dropout(dropout, masks="independent")  # complextorch's Dropout
        self.layer_norm = LayerNorm(d_model, eps=1e-6)

    def _attend(self, q, k, v, bias, is_causal, q_offset, need_weights):
        if isinstance(self.attention, ScaledDotProductAttention):
            return self.attention.attend(q, k, v, bias, is_causal, q_offset, need_weights)
        out, weights = self.attention.attend(q, k, v, bias, is_causal, q_offset)
        return out, (weights if need_weights else None)

    def forward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        attn_mask: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
        cache: cnn.LayerKVCache | cnn.StaticKVCache | None = None,
    ) -> Tensor:
        """LayerNorm(q + Dropout(attention)): complex (B, Lq, d_model).

        ``attn_mask``, ``key_padding_mask``, ``is_causal`` and ``cache`` are complexformer.nn
        extras (complextorch has no masks): see :meth:`complexformer.nn.MultiheadAttention.forward`.
        """
        out = super().forward(
            q,
            k,
            v,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            is_causal=is_causal,
            cache=cache,
        )  # (B, Lq, d_model)
        return self.layer_norm(q + self.proj_dropout(out))

    def extra_repr(self) -> str:
        return super().extra_repr() + f", attention={self.attention_kind!r}"
