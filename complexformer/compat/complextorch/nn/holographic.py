"""complextorch 2.1.1's ``HolographicAttention``: complexformer.nn's, with complextorch's checks.

The computation is :class:`complexformer.nn.HolographicAttention`'s (masks included). Only the
argument checks differ: ``attn_dropout`` may be anything in [0, 1] (complextorch builds a
``torch.nn.Dropout`` from it, and raises torch's message otherwise), where complexformer.nn
asks for [0, 1).
"""

from __future__ import annotations

from complexformer import nn as cnn

from .validation import check_dropout

__all__ = ["HolographicAttention"]


class HolographicAttention(cnn.HolographicAttention):
    """Interference-aware attention core with complextorch's signature and checks.

    Args:
        temperature: score temperature, typically sqrt(d_k).
        attn_dropout: dropout probability on the real attention weights, in [0, 1].
        alpha_init: initial raw alpha (the gate uses softplus(alpha)).
        eps: guards the magnitude normalisation.

    Raises:
        ValueError: ``attn_dropout`` outside [0, 1] (torch's message, as complextorch).
    """

    def __init__(
        self,
        temperature: float,
        attn_dropout: float = 0.1,
        alpha_init: float = 1.0,
        eps: float = 1e-6,
    ) -> None:
        p = check_dropout(attn_dropout)
        super().__init__(temperature, 0.0, alpha_init, eps)
        self.attn_dropout = p  # 1.0 is allowed here, as in torch: every weight is dropped
