"""complextorch 2.1.1's ``LayerNorm`` (e.g. for the ``norm=`` of the encoder/decoder stacks).

Full 2x2 whitening of (Re, Im) per token, then a per-feature 2x2 affine map that starts at
diag(1/sqrt(2), 1/sqrt(2)): :class:`complexformer.nn.LayerNorm` with ``affine_init="trabelsi"``.
The weight is stored as (*F, 2, 2), complextorch's as (2, 2, *F) (``load_complextorch_state_dict``
converts it).
"""

from __future__ import annotations

from complexformer import nn as cnn

__all__ = ["LayerNorm"]


class LayerNorm(cnn.LayerNorm):
    """Complex LayerNorm with complextorch's signature and initialisation.

    Args:
        normalized_shape: trailing dims to normalise over (int or sequence).
        eps: ridge on the covariance diagonal.
        elementwise_affine: learn the 2x2 weight and the complex bias.
    """

    def __init__(self, normalized_shape, *, eps: float = 1e-5, elementwise_affine: bool = True):
        super().__init__(
            normalized_shape,
            eps=eps,
            elementwise_affine=elementwise_affine,
            affine_init="trabelsi",
        )
