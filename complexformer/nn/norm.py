"""Complex LayerNorm (2x2 covariance whitening) and RMSNorm, with real parameters.

LayerNorm follows Trabelsi et al., "Deep Complex Networks" (ICLR 2018), sec. 3.5 (complex
batch normalisation: centre, whiten (Re, Im) with the inverse square root of their 2x2
covariance, then a 2x2 affine map), applied per token over the features as in complextorch
and in Tamburini, "Complexifying BERT using LoRA adapters" (CLiC-it 2024), eq. for the
complex LayerNorm. See :func:`complexformer.nn.functional.layer_norm` for the two whitening
modes and their behaviour on real inputs.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from . import functional as CF
from .utils import check_choice, lift_complex

__all__ = ["LayerNorm", "RMSNorm"]

_AFFINE_INITS = ("identity", "trabelsi")


def _as_shape(normalized_shape, where: str) -> tuple[int, ...]:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not shape or any(not isinstance(s, int) or s <= 0 for s in shape):
        raise ValueError(
            f"{where}: normalized_shape must be positive ints, got {normalized_shape!r}"
        )
    return shape


def _check_input(x: Tensor, shape: tuple[int, ...], where: str) -> Tensor:
    x = lift_complex(x, "input", where)
    if tuple(x.shape[-len(shape) :]) != shape:
        raise ValueError(
            f"{where}: the trailing dims of the input are {tuple(x.shape[-len(shape) :])}, "
            f"expected normalized_shape={shape}"
        )
    return x


class LayerNorm(nn.Module):
    """Complex layer normalisation: centre, whiten (Re, Im), then a per-feature 2x2 affine map.

    ``whiten="full"`` (default, Trabelsi): identity 2x2 covariance of (Re, Im) per token.
    ``whiten="scalar"``: divide by the total standard deviation (phase-preserving, continuous
    in Im; see the trap below). Both are exactly torch.nn.LayerNorm on a real input (Im = 0):
    with Im = 0 the covariance is diag(var + eps, eps), whose inverse square root scales Re by
    1/sqrt(var + eps) and leaves Im = 0. But full whitening gives the imaginary channel unit
    variance whatever its size, so a tiny Im (as right after the first update of a model
    complexified from a real one) is amplified by up to 1/sqrt(eps); use ``"scalar"`` there.

    The affine weight starts at the identity (``affine_init="identity"``, the default), so that
    the layer equals torch.nn.LayerNorm at init on real input; ``"trabelsi"`` uses
    diag(1/sqrt(2), 1/sqrt(2)) as Trabelsi et al. and complextorch (then E|y|^2 = 1 after full
    whitening). :meth:`from_real` copies a torch.nn.LayerNorm (gamma on both diagonal entries,
    beta on Re).

    Args:
        normalized_shape: trailing dims to normalise over (int or tuple).
        eps: ridge on the covariance diagonal (full) / the total variance (scalar).
        elementwise_affine: learn the 2x2 weight (*F, 2, 2) and complex bias (*F, 2) (real).
        whiten: ``"full"`` or ``"scalar"``.
        affine_init: ``"identity"`` or ``"trabelsi"``.

    Shapes:
        input (..., *normalized_shape) complex or real floating (lifted); output complex.
    """

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        whiten: str = "full",
        affine_init: str = "identity",
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.normalized_shape = _as_shape(normalized_shape, "LayerNorm")
        self.eps = float(eps)
        self.whiten = check_choice(whiten, "whiten", CF.WHITEN_MODES, "LayerNorm")
        self.affine_init = check_choice(affine_init, "affine_init", _AFFINE_INITS, "LayerNorm")
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            kw = {"device": device, "dtype": dtype}
            self.weight = nn.Parameter(torch.empty(*self.normalized_shape, 2, 2, **kw))
            self.bias = nn.Parameter(torch.empty(*self.normalized_shape, 2, **kw))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if not self.elementwise_affine:
            return
        g = 1.0 if self.affine_init == "identity" else 2.0**-0.5
        with torch.no_grad():
            self.weight.copy_(g * torch.eye(2).expand_as(self.weight))
            self.bias.zero_()

    @classmethod
    def from_real(cls, ln: nn.LayerNorm, whiten: str = "scalar") -> LayerNorm:
        """A complex LayerNorm that equals ``ln`` on real inputs (gamma -> diag, beta -> Re)."""
        affine = ln.weight is not None
        out = cls(
            ln.normalized_shape,
            eps=ln.eps,
            elementwise_affine=affine,
            whiten=whiten,
            device=ln.weight.device if affine else None,
            dtype=ln.weight.dtype if affine else None,
        )
        if affine:
            with torch.no_grad():
                out.weight.zero_()
                out.weight[..., 0, 0].copy_(ln.weight)
                out.weight[..., 1, 1].copy_(ln.weight)
                if ln.bias is not None:
                    out.bias[..., 0].copy_(ln.bias)
        return out

    def forward(self, x: Tensor) -> Tensor:
        x = _check_input(x, self.normalized_shape, "LayerNorm")
        return CF.layer_norm(
            x, self.normalized_shape, self.weight, self.bias, self.eps, self.whiten
        )

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, whiten={self.whiten!r}, "
            f"elementwise_affine={self.elementwise_affine}"
        )


class RMSNorm(nn.Module):
    """Complex RMSNorm: z / sqrt(mean |z|^2 + eps), then a per-feature real 2x2 map (no bias).

    Zhang & Sennrich, "Root Mean Square Layer Normalization" (NeurIPS 2019), on complex
    features (as complextorch's RMSNorm). The weight starts at the identity, so on a real input
    it equals torch.nn.RMSNorm at init.

    Args:
        normalized_shape: trailing dims to normalise over.
        eps: added to the mean squared modulus.
        elementwise_affine: learn the (*F, 2, 2) real weight.
    """

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float = 1e-6,
        elementwise_affine: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.normalized_shape = _as_shape(normalized_shape, "RMSNorm")
        self.eps = float(eps)
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(
                torch.empty(*self.normalized_shape, 2, 2, device=device, dtype=dtype)
            )
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            with torch.no_grad():
                self.weight.copy_(torch.eye(2).expand_as(self.weight))

    def forward(self, x: Tensor) -> Tensor:
        x = _check_input(x, self.normalized_shape, "RMSNorm")
        return CF.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"
