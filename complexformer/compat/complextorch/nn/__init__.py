"""complextorch 2.1.1's ``nn`` transformer, attention and position classes on complexformer.nn.

The classes are also importable from complextorch's module paths, e.g.
``complexformer.compat.complextorch.nn.modules.position.RotaryEmbedding`` (see ``modules``).
"""

from . import modules as modules  # complextorch's module paths (nn.modules.position, ...)
from .attention import MultiheadAttention, ScaledDotProductAttention
from .holographic import HolographicAttention
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
    "CVSoftMax",
    "CoPE",
    "HolographicAttention",
    "LayerNorm",
    "MagSoftMax",
    "MultiheadAttention",
    "PhaseSoftMax",
    "RotaryEmbedding",
    "ScaledDotProductAttention",
    "SinusoidalPositionalEncoding",
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]
