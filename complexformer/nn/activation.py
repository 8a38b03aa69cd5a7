"""Complex activations and the attention score-to-weight (softmax) choices.

Split activations apply a real function to Re and Im separately (Trabelsi et al., "Deep
Complex Networks", 2018: CReLU); phase-aware ones act on the modulus or the phase:
modReLU (Arjovsky, Shah & Bengio, "Unitary Evolution Recurrent Neural Networks", 2016),
zReLU (Guberman, "On Complex Valued Convolutional Neural Networks", 2016) and the cardioid
(Virtue, Yu & Lustig, "Better than Real", 2017). All require complex input: a real tensor
here raises a ValueError (no implicit lifting).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from . import functional as CF
from .utils import check_choice, require_complex

__all__ = ["CGELU", "CReLU", "Cardioid", "ComplexSoftmax", "ModReLU", "ZReLU", "get_activation"]


class CGELU(nn.Module):
    """Split GELU: GELU(Re z) + j GELU(Im z) (the CmplxBERT / complextorch choice)."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = check_choice(approximate, "approximate", ("none", "tanh"), "CGELU")

    def forward(self, x: Tensor) -> Tensor:
        return CF.cgelu(require_complex(x, "input", "CGELU"), self.approximate)


class CReLU(nn.Module):
    """Split ReLU: ReLU(Re z) + j ReLU(Im z)."""

    def forward(self, x: Tensor) -> Tensor:
        return CF.crelu(require_complex(x, "input", "CReLU"))


class ModReLU(nn.Module):
    """modReLU: ReLU(|z| + b) z/|z|, with a learnable real bias b (per feature or scalar).

    The output and gradient at z = 0 are 0 (finite; the phase of 0 is undefined). With b >= 0
    the layer is the identity on |z| > 0, so b starts negative.

    Args:
        num_features: size of the last dim for a per-feature bias; None for one scalar.
        bias: initial value of b.
    """

    def __init__(self, num_features: int | None = None, bias: float = -0.1) -> None:
        super().__init__()
        shape = () if num_features is None else (num_features,)
        self.bias = nn.Parameter(torch.full(shape, float(bias)))

    def forward(self, x: Tensor) -> Tensor:
        x = require_complex(x, "input", "ModReLU")
        if self.bias.dim() and x.shape[-1] != self.bias.shape[0]:
            raise ValueError(
                f"ModReLU: last dimension of the input is {x.shape[-1]}, expected "
                f"num_features={self.bias.shape[0]}"
            )
        return CF.modrelu(x, self.bias.to(x.real.dtype))


class ZReLU(nn.Module):
    """zReLU: z if arg z is in [0, pi/2], else 0."""

    def forward(self, x: Tensor) -> Tensor:
        return CF.zrelu(require_complex(x, "input", "ZReLU"))


class Cardioid(nn.Module):
    """Cardioid: (1 + cos arg z) z / 2 (phase-sensitive, ReLU-like on the real axis)."""

    def forward(self, x: Tensor) -> Tensor:
        return CF.cardioid(require_complex(x, "input", "Cardioid"))


class ComplexSoftmax(nn.Module):
    """Softmax of complex scores over the last dim: ``"real"``, ``"modulus"``, ``"split"``,
    ``"phase"`` (see :func:`complexformer.nn.functional.complex_softmax`)."""

    def __init__(self, score: str = "real") -> None:
        super().__init__()
        self.score = check_choice(score, "score", CF.SCORES, "ComplexSoftmax")

    def forward(self, x: Tensor) -> Tensor:
        return CF.complex_softmax(require_complex(x, "input", "ComplexSoftmax"), self.score)

    def extra_repr(self) -> str:
        return f"score={self.score!r}"


_ACTIVATIONS = {
    "gelu": CGELU,
    "relu": CReLU,
    "modrelu": ModReLU,
    "zrelu": ZReLU,
    "cardioid": Cardioid,
}


def get_activation(activation: str | nn.Module) -> nn.Module:
    """A module from a name (gelu, relu, modrelu, zrelu, cardioid) or the module itself."""
    if isinstance(activation, nn.Module):
        return activation
    check_choice(activation, "activation", tuple(_ACTIVATIONS), "get_activation")
    return _ACTIVATIONS[activation]()
