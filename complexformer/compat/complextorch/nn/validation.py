"""complextorch 2.1.1's checks of invalid arguments, with its exception types and messages.

The compat classes run these before handing the arguments to :mod:`complexformer.nn`, so that
code written against complextorch (and its tests, which match on the messages) sees the same
errors. Each check reproduces one complextorch rule in complextorch's words:

* ``softmax_on`` must be ``"complex"`` or ``"real"`` (``ScaledDotProductAttention``);
* ``attention`` must be ``"scaled_dot_product"`` or ``"holographic"``
  (``MultiheadAttention``);
* a dropout probability must lie in [0, 1]: complextorch builds ``torch.nn.Dropout``, so the
  message is torch's;
* a positional encoding's input must have ``dim`` features in its last dimension.

Sizes that complextorch accepts without a check (zero or negative widths, heads, layers) keep
complexformer.nn's own ``ValueError``.
"""

from __future__ import annotations

from torch import Tensor

__all__ = [
    "ATTENTIONS",
    "SOFTMAX_ON",
    "check_attention",
    "check_dropout",
    "check_last_dim",
    "check_softmax_on",
]

#: Values of ``softmax_on`` (complextorch ``ScaledDotProductAttention``).
SOFTMAX_ON = ("complex", "real")
#: Values of ``attention`` (complextorch ``MultiheadAttention``).
ATTENTIONS = ("scaled_dot_product", "holographic")


def check_softmax_on(softmax_on: str) -> str:
    """Return ``softmax_on`` if it is ``"complex"`` or ``"real"``.

    Raises:
        ValueError: otherwise, with complextorch's message.
    """
    if softmax_on not in SOFTMAX_ON:
        raise ValueError(f"softmax_on must be 'complex' or 'real', got {softmax_on!r}")
    return softmax_on


def check_attention(attention: str) -> str:
    """Return ``attention`` if it is ``"scaled_dot_product"`` or ``"holographic"``.

    Raises:
        ValueError: otherwise, with complextorch's message.
    """
    if attention not in ATTENTIONS:
        raise ValueError(
            f"attention must be 'scaled_dot_product' or 'holographic'; got {attention!r}"
        )
    return attention


def check_dropout(p: float) -> float:
    """Return ``p`` as a float if it lies in [0, 1] (1 drops everything, as in torch).

    Raises:
        ValueError: otherwise, with the message of ``torch.nn.Dropout`` (complextorch's
            dropout layers are built from it).
    """
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return float(p)


def check_last_dim(input: Tensor, dim: int) -> None:
    """Check that a positional encoding's input (..., L, dim) has ``dim`` features.

    Inputs with fewer than two dimensions are left to complexformer.nn's own shape check.

    Raises:
        ValueError: a wrong last dimension, with complextorch's message.
    """
    if input.dim() >= 2 and input.shape[-1] != dim:
        raise ValueError(f"last dim of input ({input.shape[-1]}) must equal dim ({dim})")
