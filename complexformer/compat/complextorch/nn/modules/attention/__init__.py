"""complextorch's ``nn.modules.attention``: the compat attention core and multi-head block."""

from ...attention import MultiheadAttention, ScaledDotProductAttention
from . import holographic as holographic  # complextorch's attention.holographic

__all__ = ["MultiheadAttention", "ScaledDotProductAttention"]
