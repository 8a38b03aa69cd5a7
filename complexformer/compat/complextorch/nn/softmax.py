"""complextorch 2.1.1's score softmaxes, and which ``score`` of complexformer.nn each one is.

``CVSoftMax`` is the split softmax (``score="split"``), ``PhaseSoftMax`` the phase-preserving
one (``"phase"``) and ``MagSoftMax`` softmax of the modulus (``"modulus"``). They are what
``MultiheadAttention(SoftMaxClass=...)`` accepts; the attention itself runs the fused kernels
of :func:`complexformer.nn.functional.scaled_dot_product_attention`, not these modules.
"""

from __future__ import annotations

from torch import Tensor

from complexformer.nn import ComplexSoftmax

__all__ = ["SOFTMAX_SCORES", "CVSoftMax", "MagSoftMax", "PhaseSoftMax", "known_score", "score_of"]

#: complextorch softmax class name -> complexformer.nn score.
SOFTMAX_SCORES = {"CVSoftMax": "split", "PhaseSoftMax": "phase", "MagSoftMax": "modulus"}


class _ScoreSoftmax(ComplexSoftmax):
    """A :class:`ComplexSoftmax` over ``dim`` (torch.nn.Softmax's rule when ``dim`` is None)."""

    _score = "split"

    def __init__(self, dim: int | None = None) -> None:
        super().__init__(self._score)
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        # torch.nn.Softmax(dim=None) picks dim 0 for 0-, 1- and 3-D inputs, else dim 1
        dim = self.dim if self.dim is not None else (0 if input.dim() in (0, 1, 3) else 1)
        return super().forward(input.movedim(dim, -1)).movedim(-1, dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class CVSoftMax(_ScoreSoftmax):
    """softmax(Re z) + j softmax(Im z) (complextorch's default attention softmax)."""

    _score = "split"


class PhaseSoftMax(_ScoreSoftmax):
    """softmax(|z|) z/|z|: phase-preserving (0 where z = 0)."""

    _score = "phase"


class MagSoftMax(_ScoreSoftmax):
    """softmax(|z|): real weights."""

    _score = "modulus"


def known_score(softmax_class) -> str | None:
    """The complexformer.nn ``score`` of a softmax class of this package or of complextorch.

    Args:
        softmax_class: a class such as ``CVSoftMax`` (complextorch's or this package's).

    Returns:
        ``"split"``, ``"phase"`` or ``"modulus"``; None for any other class (which
        :class:`ScaledDotProductAttention` then applies as it is, without the fused kernels).
    """
    name = getattr(softmax_class, "__name__", None)
    module = getattr(softmax_class, "__module__", "") or ""
    if name in SOFTMAX_SCORES and module.split(".")[0] in ("complextorch", "complexformer"):
        return SOFTMAX_SCORES[name]
    return None


def score_of(softmax_class) -> str:
    """The complexformer.nn ``score`` of a softmax class of this package or of complextorch.

    Raises:
        ValueError: for any other class, naming it and the classes allowed.
    """
    score = known_score(softmax_class)
    if score is not None:
        return score
    raise ValueError(
        f"SoftMaxClass must be one of {', '.join(SOFTMAX_SCORES)} (of complextorch or of "
        f"complexformer.compat.complextorch.nn), got {softmax_class!r}"
    )
