"""complextorch's ``nn.modules.layernorm``: the compat LayerNorm."""

from ..norm import LayerNorm

__all__ = ["LayerNorm"]
