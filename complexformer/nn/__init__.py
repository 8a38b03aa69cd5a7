"""Complex-valued layers: ``import complexformer as ctorch; ctorch.nn.MultiheadAttention(...)``.

Complex tensors (complex64 / complex128) at module boundaries, REAL parameters inside (a
trailing dimension of 2 holds (Re, Im)), so DDP/NCCL, AMP's GradScaler, optimizers and
safetensors work unchanged. The API follows complextorch 2.1.1's transformer and position
pages; on top of it: attention masks, a KV cache, fused real-part attention, four score
softmaxes, pre/post-norm Transformer layers. See docs/complex_layers.md.
"""

from . import functional, init
from .activation import CGELU, Cardioid, ComplexSoftmax, CReLU, ModReLU, ZReLU, get_activation
from .attention import MultiheadAttention
from .cache import DecoderCache, LayerKVCache, StaticKVCache
from .dropout import Dropout
from .holographic import HolographicAttention
from .linear import Embedding, Linear
from .norm import LayerNorm, RMSNorm
from .positional import (
    CoPE,
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
)
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "CGELU",
    "Cardioid",
    "CoPE",
    "ComplexSoftmax",
    "CReLU",
    "DecoderCache",
    "Dropout",
    "Embedding",
    "HolographicAttention",
    "LayerKVCache",
    "LayerNorm",
    "LearnedPositionalEmbedding",
    "Linear",
    "ModReLU",
    "MultiheadAttention",
    "RMSNorm",
    "RotaryEmbedding",
    "SinusoidalPositionalEncoding",
    "StaticKVCache",
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "ZReLU",
    "functional",
    "get_activation",
    "init",
]
