"""Complex Transformer encoder/decoder (torch.nn.Transformer API on complex tensors).

Layers follow Vaswani et al. 2017 with complex sub-layers (Eilers & Jiang, "Building Blocks
for a Complex-Valued Transformer Architecture", ICASSP 2023): multi-head attention with
Hermitian scores, a two-layer complex FFN (split GELU by default), complex LayerNorm, and
residual connections, in post-norm (default, as torch) or pre-norm (``norm_first=True``)
order. Masks follow torch.nn.Transformer (bool True = NOT allowed, or additive); the
``*_is_causal`` flags switch the causal mask on (they are not mere hints as in torch).

Positional encodings plug in by name or as a module (``pos_encoding=``): ``"rotary"``
(relative; a :class:`RotaryEmbedding` on the per-head queries/keys of every SELF-attention;
cross-attention gets none since query and memory positions are not aligned),
``"sinusoidal"``, ``"cope"`` or ``"learned"`` (absolute; applied to the src and tgt inputs,
with the decoding offset), or any module called as ``module(x, offset=...)``.
"""

from __future__ import annotations

import copy

from torch import Tensor, nn

from .activation import get_activation
from .attention import MultiheadAttention
from .cache import DecoderCache, LayerKVCache, StaticKVCache
from .dropout import Dropout
from .linear import Linear
from .norm import LayerNorm
from .positional import (
    CoPE,
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
)
from .utils import check_positive_int

__all__ = [
    "POS_ENCODINGS",
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]

POS_ENCODINGS = (None, "rotary", "sinusoidal", "cope", "learned")


def _head_dim(d_model: int, nhead: int, where: str) -> int:
    check_positive_int(d_model, "d_model", where)
    check_positive_int(nhead, "nhead", where)
    if d_model % nhead:
        raise ValueError(f"{where}: d_model={d_model} is not divisible by nhead={nhead}")
    return d_model // nhead


class _FeedForward(nn.Module):
    """Linear(d_model, d_ff) -> activation -> dropout -> Linear(d_ff, d_model)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation, bias: bool) -> None:
        super().__init__()
        self.linear1 = Linear(d_model, d_ff, bias=bias)
        self.activation = get_activation(activation)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(d_ff, d_model, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class TransformerEncoderLayer(nn.Module):
    """Self-attention + FFN, each with residual, dropout and complex LayerNorm.

    Args:
        d_model: complex model width; nhead: heads (d_head = d_model // nhead).
        dim_feedforward: FFN width.
        dropout: dropout on attention weights, residual branches and the FFN hidden layer.
        activation: ``"gelu"`` (split GELU), ``"relu"``, ``"modrelu"``, ``"zrelu"``,
            ``"cardioid"`` or a module.
        layer_norm_eps: LayerNorm eps.
        batch_first: (B, T, E) inputs (default) or (T, B, E).
        norm_first: pre-norm instead of post-norm.
        score: attention score softmax (see :class:`MultiheadAttention`).
        rotary: optional :class:`RotaryEmbedding` (dim = d_head) for the self-attention.
        whiten: LayerNorm whitening, ``"full"`` or ``"scalar"``.
        bias: biases in the attention projections and the FFN.
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | nn.Module = "gelu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = True,
        norm_first: bool = False,
        score: str = "real",
        rotary: RotaryEmbedding | None = None,
        whiten: str = "full",
        bias: bool = True,
    ) -> None:
        super().__init__()
        d_head = _head_dim(d_model, nhead, "TransformerEncoderLayer")
        self.self_attn = MultiheadAttention(
            nhead, d_model, d_head, d_head, dropout=dropout, rotary=rotary, score=score, bias=bias
        )
        self.ffn = _FeedForward(d_model, dim_feedforward, dropout, activation, bias)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, whiten=whiten)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, whiten=whiten)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.batch_first, self.norm_first = batch_first, norm_first

    def _sa(self, x: Tensor, mask, kpm, is_causal: bool) -> Tensor:
        y = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=kpm, is_causal=is_causal)
        return self.dropout1(y)

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        """src: complex (B, T, d_model) -> complex (B, T, d_model)."""
        x = src if self.batch_first else src.transpose(0, 1)
        if self.norm_first:
            x = x + self._sa(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:
            x = self.norm1(x + self._sa(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self.dropout2(self.ffn(x)))
        return x if self.batch_first else x.transpose(0, 1)


class TransformerDecoderLayer(nn.Module):
    """Masked self-attention + cross-attention + FFN (arguments as the encoder layer).

    The rotary embedding (if any) is used by the self-attention only.
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | nn.Module = "gelu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = True,
        norm_first: bool = False,
        score: str = "real",
        rotary: RotaryEmbedding | None = None,
        whiten: str = "full",
        bias: bool = True,
    ) -> None:
        super().__init__()
        d_head = _head_dim(d_model, nhead, "TransformerDecoderLayer")
        self.self_attn = MultiheadAttention(
            nhead, d_model, d_head, d_head, dropout=dropout, rotary=rotary, score=score, bias=bias
        )
        self.cross_attn = MultiheadAttention(
            nhead, d_model, d_head, d_head, dropout=dropout, score=score, bias=bias
        )
        self.ffn = _FeedForward(d_model, dim_feedforward, dropout, activation, bias)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, whiten=whiten)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, whiten=whiten)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, whiten=whiten)
        self.dropout1, self.dropout2, self.dropout3 = (Dropout(dropout) for _ in range(3))
        self.batch_first, self.norm_first = batch_first, norm_first

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
        cache: tuple[LayerKVCache, StaticKVCache] | None = None,
    ) -> Tensor:
        """tgt (B, Tq, d_model), memory (B, Tm, d_model) complex -> (B, Tq, d_model).

        ``cache = (self_cache, cross_cache)`` for incremental decoding: ``tgt`` holds only the
        new positions, the masks' key dimension counts all positions so far.
        """
        x = tgt if self.batch_first else tgt.transpose(0, 1)
        m = memory if self.batch_first else memory.transpose(0, 1)
        c_self, c_cross = cache if cache is not None else (None, None)

        def sa(y: Tensor) -> Tensor:
            return self.dropout1(
                self.self_attn(
                    y,
                    y,
                    y,
                    attn_mask=tgt_mask,
                    key_padding_mask=tgt_key_padding_mask,
                    is_causal=tgt_is_causal,
                    cache=c_self,
                )
            )

        def ca(y: Tensor) -> Tensor:
            return self.dropout2(
                self.cross_attn(
                    y,
                    m,
                    m,
                    attn_mask=memory_mask,
                    key_padding_mask=memory_key_padding_mask,
                    is_causal=memory_is_causal,
                    cache=c_cross,
                )
            )

        if self.norm_first:
            x = x + sa(self.norm1(x))
            x = x + ca(self.norm2(x))
            x = x + self.dropout3(self.ffn(self.norm3(x)))
        else:
            x = self.norm1(x + sa(x))
            x = self.norm2(x + ca(x))
            x = self.norm3(x + self.dropout3(self.ffn(x)))
        return x if self.batch_first else x.transpose(0, 1)


def _clones(layer: nn.Module, n: int) -> nn.ModuleList:
    check_positive_int(n, "num_layers", "Transformer")
    return nn.ModuleList(copy.deepcopy(layer) for _ in range(n))


class TransformerEncoder(nn.Module):
    """A stack of ``num_layers`` deep copies of ``encoder_layer`` and an optional final norm."""

    def __init__(
        self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm: nn.Module | None = None
    ) -> None:
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(
        self,
        src: Tensor,
        mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        x = src
        for layer in self.layers:
            x = layer(x, mask, src_key_padding_mask, is_causal)
        return self.norm(x) if self.norm is not None else x


class TransformerDecoder(nn.Module):
    """A stack of ``num_layers`` deep copies of ``decoder_layer`` and an optional final norm."""

    def __init__(
        self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: nn.Module | None = None
    ) -> None:
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def new_cache(self) -> DecoderCache:
        return DecoderCache(self.num_layers)

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
        cache: DecoderCache | None = None,
    ) -> Tensor:
        if cache is not None and len(cache) != self.num_layers:
            raise ValueError(
                f"TransformerDecoder: cache has {len(cache)} layers, expected {self.num_layers}"
            )
        x = tgt
        for i, layer in enumerate(self.layers):
            c = (cache.self_attn[i], cache.cross_attn[i]) if cache is not None else None
            x = layer(
                x,
                memory,
                tgt_mask,
                memory_mask,
                tgt_key_padding_mask,
                memory_key_padding_mask,
                tgt_is_causal,
                memory_is_causal,
                cache=c,
            )
        return self.norm(x) if self.norm is not None else x


class Transformer(nn.Module):
    """Complex encoder-decoder Transformer (torch.nn.Transformer / complextorch API).

    Args:
        d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward, dropout,
        activation, layer_norm_eps, batch_first, norm_first, score, whiten, bias: as in
            torch.nn.Transformer / :class:`TransformerEncoderLayer`.
        pos_encoding: None, ``"rotary"``, ``"sinusoidal"``, ``"cope"``, ``"learned"`` or a
            module ``f(x, offset=0)`` applied to both src and tgt.
        max_len: number of positions of ``pos_encoding="learned"``.

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
        activation: str | nn.Module = "gelu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = True,
        norm_first: bool = False,
        score: str = "real",
        pos_encoding: str | nn.Module | None = None,
        whiten: str = "full",
        bias: bool = True,
        max_len: int | None = None,
    ) -> None:
        super().__init__()
        d_head = _head_dim(d_model, nhead, "Transformer")
        rotary = None
        self.src_pos: nn.Module | None = None
        self.tgt_pos: nn.Module | None = None
        if isinstance(pos_encoding, nn.Module):
            self.src_pos = self.tgt_pos = pos_encoding
        elif pos_encoding == "rotary":
            rotary = RotaryEmbedding(d_head)
        elif pos_encoding == "sinusoidal":
            self.src_pos, self.tgt_pos = (
                SinusoidalPositionalEncoding(d_model),
                SinusoidalPositionalEncoding(d_model),
            )
        elif pos_encoding == "cope":
            self.src_pos, self.tgt_pos = CoPE(d_model), CoPE(d_model)
        elif pos_encoding == "learned":
            if max_len is None:
                raise ValueError("Transformer: pos_encoding='learned' needs max_len")
            self.src_pos = LearnedPositionalEmbedding(max_len, d_model)
            self.tgt_pos = LearnedPositionalEmbedding(max_len, d_model)
        elif pos_encoding is not None:
            raise ValueError(
                f"Transformer: unknown pos_encoding {pos_encoding!r}; allowed: "
                f"{', '.join(map(repr, POS_ENCODINGS))} or an nn.Module"
            )
        kw = dict(
            dim_feedforward=dim_feedforward,
            dropout=dropout,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            batch_first=True,
            norm_first=norm_first,
            score=score,
            rotary=rotary,
            whiten=whiten,
            bias=bias,
        )
        self.encoder = TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **kw),
            num_encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, whiten=whiten),
        )
        self.decoder = TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **kw),
            num_decoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, whiten=whiten),
        )
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def new_cache(self) -> DecoderCache:
        """An empty :class:`DecoderCache` for :meth:`decode`."""
        return self.decoder.new_cache()

    def encode(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        src_is_causal: bool = False,
    ) -> Tensor:
        """Encoder output ("memory"), (B, S, d_model), batch-first like ``src``."""
        x = src if self.batch_first else src.transpose(0, 1)
        if self.src_pos is not None:
            x = self.src_pos(x, offset=0)
        mem = self.encoder(x, src_mask, src_key_padding_mask, src_is_causal)
        return mem if self.batch_first else mem.transpose(0, 1)

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        """Decoder pass; with ``cache`` only the new target positions are given and computed."""
        x = tgt if self.batch_first else tgt.transpose(0, 1)
        m = memory if self.batch_first else memory.transpose(0, 1)
        if self.tgt_pos is not None:
            x = self.tgt_pos(x, offset=cache.offset if cache is not None else 0)
        y = self.decoder(
            x,
            m,
            tgt_mask,
            memory_mask,
            tgt_key_padding_mask,
            memory_key_padding_mask,
            tgt_is_causal,
            memory_is_causal,
            cache,
        )
        return y if self.batch_first else y.transpose(0, 1)

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
        memory = self.encode(src, src_mask, src_key_padding_mask, src_is_causal)
        return self.decode(
            tgt,
            memory,
            tgt_mask,
            memory_mask,
            tgt_key_padding_mask,
            memory_key_padding_mask,
            tgt_is_causal,
            memory_is_causal,
        )
