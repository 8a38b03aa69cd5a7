"""Complex positional encodings (complextorch 2.1.1 API, numerically equal to it).

With omega_k = base^(-k/d) over the d complex channels (k = 0 .. d-1) and position n:

* :class:`RotaryEmbedding` (relative): x_{n,k} e^{j omega_k n}. Under the Hermitian score
  q K^H the phases at query m and key n leave e^{j omega_k (m - n)}: the score depends on
  m - n only (Su et al., "RoFormer", 2021, read as a complex rotation).
* :class:`SinusoidalPositionalEncoding` (absolute): x_{n,k} + e^{j omega_k n}
  (Vaswani et al. 2017's sinusoids as one complex phasor per channel).
* :class:`CoPE` (absolute, learnable): x_{n,k} e^{j (omega_k n + phi_k)} with learnable
  omega (initialised to the schedule above) and phi (initialised to 0): 2 * dim parameters.
* :class:`LearnedPositionalEmbedding` (absolute): x_n + p_n with a learned complex table.

All take (..., T, dim) tensors (last dim = dim, second-to-last = sequence) and an ``offset``
(position of the first token, for KV-cache decoding). A real floating input is lifted to
complex (as complextorch does); a wrong last dimension raises a ValueError naming it.
Fixed frequency schedules are recomputed in float64 at each call (the float32 ``inv_freq``
buffers, as in complextorch, are kept for inspection) and the angles omega_k * n are formed
in float64, so they stay exact at large positions; the phasor is cast to the input's
precision. ``angles="float32"`` instead computes the schedule and the angles in float32, as
complextorch 2.1.1 does (its results to the last bit; off by ~n * 6e-8 rad at position n).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from . import functional as CF
from .init import complex_normal_
from .utils import check_choice, check_positive_int, lift_complex

__all__ = [
    "ANGLE_PRECISIONS",
    "CoPE",
    "LearnedPositionalEmbedding",
    "RotaryEmbedding",
    "SinusoidalPositionalEncoding",
]


ANGLE_PRECISIONS = ("float64", "float32")
_ANGLE_DTYPES = {"float64": torch.float64, "float32": torch.float32}


def _angle_dtype(angles: str, where: str) -> torch.dtype:
    return _ANGLE_DTYPES[check_choice(angles, "angles", ANGLE_PRECISIONS, where)]


def _check(x: Tensor, dim: int, where: str) -> Tensor:
    x = lift_complex(x, "input", where)
    if x.dim() < 2:
        raise ValueError(f"{where}: input must have shape (..., T, dim), got {tuple(x.shape)}")
    if x.shape[-1] != dim:
        raise ValueError(
            f"{where}: last dimension of the input is {x.shape[-1]}, expected dim={dim} "
            f"(input shape {tuple(x.shape)}; layout (..., T, dim))"
        )
    return x


def _check_offset(offset, where: str) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"{where}: offset must be a non-negative int, got {offset!r}")
    return offset


class RotaryEmbedding(nn.Module):
    """Complex rotary position embedding: x_{n,k} -> x_{n,k} e^{j omega_k n}.

    Apply it to per-head queries and keys (``dim = d_k``); pass it to
    :class:`~complexformer.nn.MultiheadAttention` as ``rotary=``.

    Args:
        dim: complex channels (size of the last dim).
        base: frequency base; omega_k = base^(-k/dim).
        learnable: make the frequencies ``inv_freq`` a learnable (real) parameter.
        angles: ``"float64"`` (exact angles) or ``"float32"`` (complextorch's arithmetic).

    Shapes:
        input (..., T, dim) complex; output the same.
    """

    def __init__(
        self, dim: int, base: float = 10000.0, learnable: bool = False, angles: str = "float64"
    ) -> None:
        super().__init__()
        self.dim = check_positive_int(dim, "dim", "RotaryEmbedding")
        if not base > 0:
            raise ValueError(f"RotaryEmbedding: base must be > 0, got {base!r}")
        self.base, self.learnable = float(base), bool(learnable)
        self.angles = angles
        self._angle_dtype = _angle_dtype(angles, "RotaryEmbedding")
        inv_freq = CF.inverse_frequencies(dim, base, compute_dtype=self._angle_dtype)  # (dim,)
        if learnable:
            self.inv_freq = nn.Parameter(inv_freq)
        else:
            self.register_buffer("inv_freq", inv_freq, persistent=False)

    def frequencies(self) -> Tensor:
        """omega: the learnable parameter, or the schedule recomputed in float64.

        Recomputing keeps the angles omega_k * n exact at large n whatever the buffer's
        dtype (a float32 omega is off by ~1e-8 relative: 0.01 rad at n = 1e6).
        """
        if self.learnable or self.angles == "float32":
            return self.inv_freq
        return CF.inverse_frequencies(self.dim, self.base, torch.float64, self.inv_freq.device)

    def phasor(self, length: int, offset: int = 0, dtype=torch.complex64) -> Tensor:
        """e^{j omega_k n} for n = offset .. offset + length - 1: complex (length, dim)."""
        return CF.position_phasor(
            self.frequencies(), length, offset, dtype=dtype, angle_dtype=self._angle_dtype
        )

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        x = _check(x, self.dim, "RotaryEmbedding")
        offset = _check_offset(offset, "RotaryEmbedding")
        return x * self.phasor(x.shape[-2], offset, x.dtype)

    def rotate_q_k(self, q: Tensor, k: Tensor, offset: int = 0) -> tuple[Tensor, Tensor]:
        """Rotate queries and keys, both starting at position ``offset`` (self-attention)."""
        return self.forward(q, offset), self.forward(k, offset)

    def extra_repr(self) -> str:
        s = f"dim={self.dim}, base={self.base}, learnable={self.learnable}"
        return s + (f", angles={self.angles!r}" if self.angles != "float64" else "")


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed absolute encoding: x_{n,k} -> x_{n,k} + e^{j omega_k n}.

    Args:
        dim: complex channels.
        base: frequency base.
        angles: ``"float64"`` (exact angles) or ``"float32"`` (complextorch's arithmetic).
    """

    def __init__(self, dim: int, base: float = 10000.0, angles: str = "float64") -> None:
        super().__init__()
        where = "SinusoidalPositionalEncoding"
        self.dim = check_positive_int(dim, "dim", where)
        if not base > 0:
            raise ValueError(f"{where}: base must be > 0, got {base!r}")
        self.base = float(base)
        self.angles = angles
        self._angle_dtype = _angle_dtype(angles, where)
        inv_freq = CF.inverse_frequencies(dim, base, compute_dtype=self._angle_dtype)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        x = _check(x, self.dim, "SinusoidalPositionalEncoding")
        offset = _check_offset(offset, "SinusoidalPositionalEncoding")
        if self.angles == "float32":
            omega = self.inv_freq
        else:
            omega = CF.inverse_frequencies(self.dim, self.base, torch.float64, x.device)
        phasor = CF.position_phasor(
            omega, x.shape[-2], offset, dtype=x.dtype, angle_dtype=self._angle_dtype
        )
        return x + phasor

    def extra_repr(self) -> str:
        s = f"dim={self.dim}, base={self.base}"
        return s + (f", angles={self.angles!r}" if self.angles != "float64" else "")


class CoPE(nn.Module):
    """Learnable complex positional encoding: x_{n,k} -> x_{n,k} e^{j (omega_k n + phi_k)}.

    ``omega`` (init base^(-k/dim)) and ``phi`` (init 0) are real parameters: 2 * dim in all.
    At init it equals :class:`RotaryEmbedding`; applied to embeddings it is an absolute
    encoding.

    Args:
        dim: complex channels.
        base: base of the initial frequencies.
        angles: ``"float64"`` (exact angles) or ``"float32"`` (complextorch's arithmetic).
    """

    def __init__(self, dim: int, base: float = 10000.0, angles: str = "float64") -> None:
        super().__init__()
        self.dim = check_positive_int(dim, "dim", "CoPE")
        self.base = float(base)
        self.angles = angles
        self._angle_dtype = _angle_dtype(angles, "CoPE")
        omega = CF.inverse_frequencies(dim, base, compute_dtype=self._angle_dtype)
        self.omega = nn.Parameter(omega)
        self.phi = nn.Parameter(torch.zeros(dim))

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        x = _check(x, self.dim, "CoPE")
        offset = _check_offset(offset, "CoPE")
        phasor = CF.position_phasor(
            self.omega, x.shape[-2], offset, self.phi, dtype=x.dtype, angle_dtype=self._angle_dtype
        )
        return x * phasor

    def extra_repr(self) -> str:
        s = f"dim={self.dim}, base={self.base}"
        return s + (f", angles={self.angles!r}" if self.angles != "float64" else "")


class LearnedPositionalEmbedding(nn.Module):
    """Learned absolute table: x_n -> x_n + p_{offset + n}, p real-stored (max_len, dim, 2).

    Init: circular complex normal with standard deviation ``std`` (0.02 as in ViT / BERT).

    Args:
        max_len: number of positions.
        dim: complex channels.
        std: initial standard deviation of |p|.
    """

    def __init__(self, max_len: int, dim: int, std: float = 0.02) -> None:
        super().__init__()
        self.max_len = check_positive_int(max_len, "max_len", "LearnedPositionalEmbedding")
        self.dim = check_positive_int(dim, "dim", "LearnedPositionalEmbedding")
        self.weight = nn.Parameter(torch.empty(max_len, dim, 2))
        complex_normal_(self.weight, std)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        x = _check(x, self.dim, "LearnedPositionalEmbedding")
        offset = _check_offset(offset, "LearnedPositionalEmbedding")
        t = x.shape[-2]
        if offset + t > self.max_len:
            raise ValueError(
                f"LearnedPositionalEmbedding: positions {offset}..{offset + t - 1} "
                f"exceed max_len={self.max_len}"
            )
        p = torch.view_as_complex(self.weight[offset : offset + t])  # (T, dim)
        return x + p.to(x.dtype)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, dim={self.dim}"
