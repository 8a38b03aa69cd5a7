"""complextorch's ``nn.modules.position``: the compat positional encodings."""

from ..positional import CoPE, RotaryEmbedding, SinusoidalPositionalEncoding

__all__ = ["CoPE", "RotaryEmbedding", "SinusoidalPositionalEncoding"]
