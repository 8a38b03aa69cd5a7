"""Complex dropout with one mask shared by the real and imaginary parts (or two)."""

from __future__ import annotations

from torch import Tensor, nn

from . import functional as CF
from .utils import check_choice, require_complex

__all__ = ["DROPOUT_MASKS", "Dropout"]

DROPOUT_MASKS = ("shared", "independent")


class Dropout(nn.Module):
    """Zero whole complex entries with probability p and scale the rest by 1/(1 - p).

    Re and Im share ONE Bernoulli mask (Trabelsi et al., "Deep Complex Networks", 2018), so a
    kept entry keeps its phase; complextorch's ``Dropout`` draws independent masks instead
    (``masks="independent"``: Re and Im are dropped separately, each with probability p).

    Args:
        p: drop probability in [0, 1].
        masks: ``"shared"`` (default) or ``"independent"``.
    """

    def __init__(self, p: float = 0.5, masks: str = "shared") -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p!r}")
        self.p = float(p)
        self.masks = check_choice(masks, "masks", DROPOUT_MASKS, "Dropout")

    def forward(self, x: Tensor) -> Tensor:
        x = require_complex(x, "input", "Dropout")
        return CF.complex_dropout(x, self.p, self.training, self.masks == "independent")

    def extra_repr(self) -> str:
        return f"p={self.p}" + (", masks='independent'" if self.masks != "shared" else "")
