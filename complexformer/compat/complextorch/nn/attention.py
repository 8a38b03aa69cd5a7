"""complextorch 2.1.1's ``MultiheadAttention``: a whole attention sub-block.

complextorch's module is projections, attention, output dropout, a residual connection from the
query input and a LayerNorm (eps 1e-6), all inside:

    out = LayerNorm(query + Dropout(fc(Attention(w_q query, w_k key, w_v value))))

This class is :class:`complexformer.nn.MultiheadAttention` (the attention sub-layer, fused
kernels) with that residual and LayerNorm added, and complextorch's arguments translated:
``softmax_on="complex"`` uses ``SoftMaxClass`` (``CVSoftMax`` -> ``score="split"``, the
default; ``PhaseSoftMax`` -> ``"phase"``; ``MagSoftMax`` -> ``"modulus"``), ``"real"`` is
``score="real"``; ``attention="holographic"`` swaps in
:class:`complexformer.nn.HolographicAttention`. The projections have no bias, as there.
"""

from __future__ import annotations

from torch import Tensor

from complexformer import nn as cnn

from .norm import LayerNorm
from .softmax import CVSoftMax, score_of

__all__ = ["ATTENTIONS", "SOFTMAX_ON", "MultiheadAttention", "translate_score"]

SOFTMAX_ON = ("complex", "real")
ATTENTIONS = ("scaled_dot_product", "holographic")


def translate_score(softmax_on: str, softmax_class=CVSoftMax) -> str:
    """complextorch's (``softmax_on``, ``SoftMaxClass``) -> complexformer.nn's ``score``."""
    if softmax_on not in SOFTMAX_ON:
        raise ValueError(f"softmax_on must be 'complex' or 'real', got {softmax_on!r}")
    return "real" if softmax_on == "real" else score_of(softmax_class)


class MultiheadAttention(cnn.MultiheadAttention):
    """complextorch's complex multi-head attention block (residual and LayerNorm inside).

    Args:
        n_heads: heads H.
        d_model: complex features of query, key, value and output.
        d_k: per-head query/key size; d_v: per-head value size.
        dropout: dropout on the attention weights and on the projected output.
        SoftMaxClass: ``CVSoftMax`` (default), ``PhaseSoftMax`` or ``MagSoftMax`` (of this
            package or of complextorch); used when ``softmax_on="complex"``.
        softmax_on: ``"complex"`` (``SoftMaxClass`` on the complex scores) or ``"real"``
            (softmax of Re S).
        rotary: a :class:`RotaryEmbedding` with ``dim=d_k`` for the per-head queries and keys.
        attention: ``"scaled_dot_product"`` or ``"holographic"`` (then ``SoftMaxClass`` and
            ``softmax_on`` are unused).

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
        if attention not in ATTENTIONS:
            raise ValueError(
                f"attention must be 'scaled_dot_product' or 'holographic'; got {attention!r}"
            )
        if attention == "holographic":
            score = "real"  # unused: the holographic core replaces the score softmax
        else:
            score = translate_score(softmax_on, SoftMaxClass)
        super().__init__(n_heads, d_model, d_k, d_v, dropout=dropout, rotary=rotary, score=score)
        self.softmax_on, self.attention_kind = softmax_on, attention
        self.attention: cnn.HolographicAttention | None = None
        if attention == "holographic":
            self.attention = cnn.HolographicAttention(d_k**0.5, attn_dropout=dropout)
        self.proj_dropout = cnn.Dropout(dropout, masks="independent")  # complextorch's Dropout
        self.layer_norm = LayerNorm(d_model, eps=1e-6)

    def _attend(self, q, k, v, bias, is_causal, q_offset, need_weights):
        if self.attention is None:
            return super()._attend(q, k, v, bias, is_causal, q_offset, need_weights)
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
