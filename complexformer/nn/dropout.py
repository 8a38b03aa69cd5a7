"""Complex dropout with one mask shared by the real and imaginary parts."""

from __future__ import annotations

from torch import Tensor, nn

from . import functional as CF
from ._utils import require_complex

__all__ = ["Dropout"]


class Dropout(nn.Module):
    """Zero whole complex entries with probability p and scale the rest by 1/(1 - p).

    Re and Im share ONE Bernoulli mask (Trabelsi et al., "Deep Complex Networks", 2018), so a
    kept entry keeps its phase; complextorch's ``Dropout`` draws independent masks instead.

    Args:
        p: drop probability in [0, 1].
    """

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p!r}")
        self.p = float(p)

    def forward(self, x: Tensor) -> Tensor:
        return CF.complex_dropout(require_complex(x, "input", "Dropout"), self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
