"""complextorch 2.1.1's positional encodings: complexformer.nn's, with complextorch's float32
angle arithmetic (``angles="float32"``), so that outputs agree to the last bits at any position.

complexformer.nn's defaults form the angles omega_k * n in float64, which is exact but differs
from complextorch by ~n * 6e-8 rad at position n (above 1e-5 from n of a few hundred).

An input whose last dimension is not ``dim`` raises complextorch's ``ValueError`` ("last dim of
input (5) must equal dim (4)"); the other checks are complexformer.nn's.
"""

from __future__ import annotations

from torch import Tensor

from complexformer import nn as cnn

from .validation import check_last_dim

__all__ = ["CoPE", "RotaryEmbedding", "SinusoidalPositionalEncoding"]


class RotaryEmbedding(cnn.RotaryEmbedding):
    """x_{n,k} e^{j omega_k n}, omega_k = base^(-k/dim) (complextorch ``RotaryEmbedding``).

    Args:
        dim: complex channels (the per-head d_k inside attention).
        base: frequency base.
        learnable: make the frequencies ``inv_freq`` learnable.
    """

    def __init__(self, dim: int, base: float = 10000.0, learnable: bool = False) -> None:
        super().__init__(dim, base, learnable, angles="float32")

    def forward(self, input: Tensor, offset: int = 0) -> Tensor:
        """input (..., L, dim) -> rotated, same shape (a real input is lifted to complex)."""
        check_last_dim(input, self.dim)
        return super().forward(input, offset)


class SinusoidalPositionalEncoding(cnn.SinusoidalPositionalEncoding):
    """x_{n,k} + e^{j omega_k n} (complextorch ``SinusoidalPositionalEncoding``).

    Args:
        dim: complex channels.
        base: frequency base.
    """

    def __init__(self, dim: int, base: float = 10000.0) -> None:
        super().__init__(dim, base, angles="float32")

    def forward(self, input: Tensor, offset: int = 0) -> Tensor:
        """input (..., L, dim) -> input plus the phasor bank, same shape."""
        check_last_dim(input, self.dim)
        return super().forward(input, offset)


class CoPE(cnn.CoPE):
    """x_{n,k} e^{j (omega_k n + phi_k)}, learnable omega and phi (complextorch ``CoPE``).

    Args:
        dim: complex channels.
        base: base of the initial frequencies.
    """

    def __init__(self, dim: int, base: float = 10000.0) -> None:
        super().__init__(dim, base, angles="float32")

    def forward(self, input: Tensor, offset: int = 0) -> Tensor:
        """input (..., L, dim) -> rotated, same shape."""
        check_last_dim(input, self.dim)
        return super().forward(input, offset)
