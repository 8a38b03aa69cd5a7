"""complextorch's ``nn.modules.attention.holographic``: the compat holographic attention core."""

from ...holographic import HolographicAttention

__all__ = ["HolographicAttention"]
