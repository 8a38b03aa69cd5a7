"""complextorch 2.1.1's encoder/decoder layers, stacks and ``Transformer``.

Post-norm throughout, as in complextorch: each attention sub-layer is the complextorch
:class:`MultiheadAttention` block (residual and LayerNorm with eps 1e-6 inside); the feed-forward
sub-block is

    ffn(x) = LayerNorm(Dropout(linear2(activation(linear1(x)))) + x)   (eps = layer_norm_eps)

with no dropout in the hidden layer. The stacks are :class:`complexformer.nn.TransformerEncoder`
and :class:`complexformer.nn.TransformerDecoder` (deep copies, no final norm by default), and
the ``Transformer`` has no final norms, as complextorch's. Masks are complexformer.nn extras.
"""

from __future__ import annotations

from torch import Tensor, nn

from complexformer import nn as cnn

from .attention import MultiheadAttention
from .norm import LayerNorm

__all__ = [
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]

_ACTIVATIONS = {"gelu": cnn.CGELU, "relu": cnn.CReLU}


def _activation(name: str) -> nn.Module:
    if name not in _ACTIVATIONS:
        raise ValueError(f"Unknown activation {name!r}; expected 'gelu' or 'relu'")
    return _ACTIVATIONS[name]()


class _FFNBlock(nn.Module):
    """Linear -> activation -> Linear, then dropout, residual and LayerNorm."""

    def __init__(
        self, d_model: int, dim_feedforward: int, activation: str, dropout: float, eps: float
    ) -> None:
        super().__init__()
        self.linear1 = cnn.Linear(d_model, dim_feedforward)
        self.linear2 = cnn.Linear(dim_feedforward, d_model)
        self.activation = _activation(activation)
        self.norm = LayerNorm(d_model, eps=eps)
        self.dropout = cnn.Dropout(dropout, masks="independent")

    def forward(self, x: Tensor) -> Tensor:
        out = self.linear2(self.activation(self.linear1(x)))  # (B, L, d_model)
        return self.norm(self.dropout(out) + x)


class TransformerEncoderLayer(nn.Module):
    """Self-attention block + feed-forward block (complextorch ``TransformerEncoderLayer``).

    Args:
        d_model: complex width; nhead: heads (d_head = d_model // nhead).
        dim_feedforward: FFN width.
        dropout: dropout on the attention weights and on each sub-block's output.
        activation: ``"gelu"`` (split GELU) or ``"relu"`` (split ReLU).
        layer_norm_eps: eps of the FFN's LayerNorm (the attention's is 1e-6).
        batch_first: (B, L, E) inputs (default) or (L, B, E).
        softmax_on: ``"complex"`` (split softmax) or ``"real"``.
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = True,
        softmax_on: str = "complex",
    ) -> None:
        super().__init__()
        if d_model % nhead != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by nhead ({nhead})")
        self.batch_first = batch_first
        d_head = d_model // nhead
        self.self_attn = MultiheadAttention(
            nhead, d_model, d_head, d_head, dropout=dropout, softmax_on=softmax_on
        )
        self.ffn = _FFNBlock(d_model, dim_feedforward, activation, dropout, layer_norm_eps)
        self.d_model, self.nhead = d_model, nhead

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        """src complex (B, L, d_model) (or (L, B, d_model)) -> the same shape."""
        x = src if self.batch_first else src.transpose(0, 1)
        x = self.self_attn(
            x, x, x, attn_mask=src_mask, key_padding_mask=src_key_padding_mask, is_causal=is_causal
        )
        x = self.ffn(x)
        return x if self.batch_first else x.transpose(0, 1)


class TransformerDecoderLayer(nn.Module):
    """Self-attention block + cross-attention block + feed-forward block.

    Arguments as :class:`TransformerEncoderLayer`. The self-attention is not causal unless
    ``tgt_is_causal`` (or a ``tgt_mask``) is given, as in complextorch, which has no masks.
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = True,
        softmax_on: str = "complex",
    ) -> None:
        super().__init__()
        self.batch_first = batch_first
        d_head = d_model // nhead
        self.self_attn = MultiheadAttention(
            nhead, d_model, d_head, d_head, dropout=dropout, softmax_on=softmax_on
        )
        self.cross_attn = MultiheadAttention(
            nhead, d_model, d_head, d_head, dropout=dropout, softmax_on=softmax_on
        )
        self.ffn = _FFNBlock(d_model, dim_feedforward, activation, dropout, layer_norm_eps)

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
        cache: tuple[cnn.LayerKVCache, cnn.StaticKVCache] | None = None,
    ) -> Tensor:
        """tgt (B, Lt, d_model), memory (B, Lm, d_model) complex -> (B, Lt, d_model)."""
        x = tgt if self.batch_first else tgt.transpose(0, 1)
        m = memory if self.batch_first else memory.transpose(0, 1)
        c_self, c_cross = cache if cache is not None else (None, None)
        x = self.self_attn(
            x,
            x,
            x,
            attn_mask=tgt_mask,
            key_padding_mask=tgt_key_padding_mask,
            is_causal=tgt_is_causal,
            cache=c_self,
        )
        x = self.cross_attn(
            x,
            m,
            m,
            attn_mask=memory_mask,
            key_padding_mask=memory_key_padding_mask,
            is_causal=memory_is_causal,
            cache=c_cross,
        )
        x = self.ffn(x)
        return x if self.batch_first else x.transpose(0, 1)


class TransformerEncoder(cnn.TransformerEncoder):
    """Stack of ``num_layers`` deep copies of ``encoder_layer`` and an optional final norm."""


class TransformerDecoder(cnn.TransformerDecoder):
    """Stack of ``num_layers`` deep copies of ``decoder_layer`` and an optional final norm."""


class Transformer(nn.Module):
    """complextorch's encoder-decoder ``Transformer`` (no positional encoding, no final norms).

    Args:
        d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward, dropout,
        activation, layer_norm_eps, batch_first, softmax_on: as complextorch 2.1.1 (see
            :class:`TransformerEncoderLayer`).

    Shapes:
        src (B, S, d_model), tgt (B, T, d_model) complex -> (B, T, d_model) complex.
    """

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = True,
        softmax_on: str = "complex",
    ) -> None:
        super().__init__()
        args = (
            d_model,
            nhead,
            dim_feedforward,
            dropout,
            activation,
            layer_norm_eps,
            batch_first,
            softmax_on,
        )
        self.encoder = TransformerEncoder(TransformerEncoderLayer(*args), num_encoder_layers)
        self.decoder = TransformerDecoder(TransformerDecoderLayer(*args), num_decoder_layers)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        src_is_causal: bool = False,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """Encode ``src``, decode ``tgt`` against the encoder output (masks: extras)."""
        memory = self.encoder(src, src_mask, src_key_padding_mask, src_is_causal)
        return self.decoder(
            tgt,
            memory,
            tgt_mask,
            memory_mask,
            tgt_key_padding_mask,
            memory_key_padding_mask,
            tgt_is_causal,
            memory_is_causal,
        )
