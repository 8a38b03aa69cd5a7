"""complextorch 2.1.1's ``nn`` transformer, attention and position classes on complexformer.nn."""

from complexformer.nn import HolographicAttention

from .attention import ATTENTIONS, SOFTMAX_ON, MultiheadAttention
from .norm import LayerNorm
from .positional import CoPE, RotaryEmbedding, SinusoidalPositionalEncoding
from .softmax import CVSoftMax, MagSoftMax, PhaseSoftMax
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "ATTENTIONS",
    "SOFTMAX_ON",
    "CVSoftMax",
    "CoPE",
    "HolographicAttention",
    "LayerNorm",
    "MagSoftMax",
    "MultiheadAttention",
    "PhaseSoftMax",
    "RotaryEmbedding",
    "SinusoidalPositionalEncoding",
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]
