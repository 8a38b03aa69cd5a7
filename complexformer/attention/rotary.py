"""Rotation basics shared by RoPE and CMHA: frequencies, pair layouts, RoPE itself.

Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding"; the frequency
schedules of Shao et al. 2025 (ComplexFormer), eq. 6.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "LAYOUTS",
    "apply_rope",
    "as_positions",
    "check_layout",
    "join_pairs",
    "phase_dtype",
    "rope_frequencies",
    "rope_tables",
    "rotate_with_tables",
    "split_pairs",
]

_SCHEDULES = ("rope", "paper")


def rope_frequencies(
    head_dim: int, base: float = 10000.0, schedule: str = "rope", device=None
) -> Tensor:
    """Rotation frequencies omega_j, j = 0 .. J-1, J = head_dim // 2 (paper eq. 6).

    Args:
        head_dim: the head dimension D; must be a positive even integer.
        base: the frequency base (10000 in RoPE and the paper).
        schedule: ``"rope"`` for omega_j = base^(-2j/D), the RoPE schedule of Su et al.
            (so that CMHA with delta = 1, b = 0 is RoPE exactly); ``"paper"`` for the literal
            formula of eq. 6, omega_j = base^(-2j/(D/2)).
        device: device of the returned tensor.

    Returns:
        A float32 tensor of shape (J,).
    """
    if not isinstance(head_dim, int) or head_dim <= 0 or head_dim % 2:
        raise ValueError(f"head_dim must be a positive even integer, got {head_dim!r}")
    if schedule not in _SCHEDULES:
        raise ValueError(f"unknown omega schedule {schedule!r}; known: {', '.join(_SCHEDULES)}")
    if not base > 0:
        raise ValueError(f"rope base must be > 0, got {base!r}")
    j = torch.arange(head_dim // 2, dtype=torch.float64, device=device)
    denom = head_dim if schedule == "rope" else head_dim // 2
    return (base ** (-2.0 * j / denom)).to(torch.float32)


def phase_dtype(x: Tensor) -> torch.dtype:
    """The dtype that angles and rotations of ``x`` are computed in.

    float64 for a float64 ``x``, float32 for everything else (half-precision inputs included).
    """
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def as_positions(positions, length: int, device, dtype) -> Tensor:
    """Positions as a float tensor broadcastable to (..., T).

    Args:
        positions: an int offset p (positions p .. p + T - 1) or a (..., T) tensor.
        length: T, the number of positions of the input.
        device: device of the result.
        dtype: dtype of the result (the phase dtype, :func:`phase_dtype`).

    Raises:
        ValueError: ``positions`` is neither an int nor a tensor with T entries in its last
            dimension.
    """
    if isinstance(positions, int):
        return torch.arange(positions, positions + length, device=device, dtype=dtype)
    if not isinstance(positions, Tensor) or positions.dim() == 0:
        raise ValueError(f"positions must be an int offset or a (..., T) tensor, got {positions!r}")
    if positions.shape[-1] != length:
        raise ValueError(
            f"positions has {positions.shape[-1]} entries in its last dimension, but the input "
            f"has T = {length} positions"
        )
    return positions.to(device=device, dtype=dtype)


LAYOUTS = ("interleaved", "halves")


def check_layout(layout: str) -> None:
    """Raise a ValueError naming the known layouts unless ``layout`` is one of :data:`LAYOUTS`."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown pair layout {layout!r}; known: {', '.join(LAYOUTS)}")


def split_pairs(x: Tensor, dtype: torch.dtype, layout: str) -> tuple[Tensor, Tensor]:
    """The two members of each pair as (re, im), each (..., T, J), in ``dtype``.

    ``"interleaved"`` is the paper's pairs (x[2j], x[2j+1]), ``"halves"`` pairs (x[j], x[j+J]).
    Both are returned as contiguous copies: on CPU several elementwise kernels (atan2 and
    hypot in particular) run an order of magnitude slower on strided views.
    """
    j = x.shape[-1] // 2
    if layout == "halves":
        both = x.to(dtype).unflatten(-1, (2, j)).movedim(-2, 0)  # (2, ..., T, J)
    else:
        both = x.to(dtype).unflatten(-1, (j, 2)).movedim(-1, 0)  # (2, ..., T, J)
    both = both.contiguous()  # atan2 / hypot vectorise only on contiguous memory
    return both[0], both[1]


def join_pairs(re: Tensor, im: Tensor, layout: str) -> Tensor:
    """Inverse of :func:`split_pairs`: (..., J) twice -> (..., 2J).

    Interleaving goes through ``torch.complex`` when eager, whose copy is several times faster
    on CPU than ``torch.stack(..., dim=-1)``; under ``torch.compile`` the stack is used, which
    inductor fuses with its producers.
    """
    if layout == "halves":
        return torch.cat((re, im), dim=-1)
    if torch.compiler.is_compiling() or re.dtype not in (torch.float32, torch.float64):
        return torch.stack((re, im), dim=-1).flatten(-2)
    return torch.view_as_real(torch.complex(re, im)).flatten(-2)


def apply_rope(
    x: Tensor, positions: Tensor | int, omega: Tensor, layout: str = "interleaved"
) -> Tensor:
    """Rotary position embedding (Su et al., "RoFormer").

    With interleaved pairs: x'[2j] = x[2j] cos(p w_j) - x[2j+1] sin(p w_j),
    x'[2j+1] = x[2j] sin(p w_j) + x[2j+1] cos(p w_j); ``layout="halves"`` pairs x[j] with
    x[j+J] instead (the "rotate-half" form).

    Args:
        x: real tensor (..., T, D), D even.
        positions: (T,) positions or an int offset.
        omega: (J,) frequencies.
        layout: ``"interleaved"`` or ``"halves"``.

    Returns:
        The rotated tensor, same shape and dtype as ``x``; angles are computed in float32.
    """
    if x.shape[-1] % 2:
        raise ValueError(f"the last dimension of x must be even, got {x.shape[-1]}")
    check_layout(layout)
    cos, sin = rope_tables(positions, x.shape[-2], omega, x.device, phase_dtype(x), layout)
    return rotate_with_tables(x, cos, sin, layout)


def rope_tables(
    positions: Tensor | int, length: int, omega: Tensor, device, dtype, layout: str
) -> tuple[Tensor, Tensor]:
    """cos and sin of the angles p ω_j of :func:`apply_rope`, laid out for ``layout``.

    Args:
        positions: (T,) positions or an int offset.
        length: T.
        omega: (J,) frequencies.
        device: device of the tables.
        dtype: their dtype (the phase dtype, :func:`phase_dtype`).
        layout: ``"halves"``: (..., T, D) tables, each angle twice ([ω_0 .. ω_J-1] repeated,
            for whole rows); ``"interleaved"``: (..., T, J).

    Returns:
        (cos, sin).
    """
    pos = as_positions(positions, length, device, dtype)
    ang = pos.unsqueeze(-1) * omega.to(device=device, dtype=dtype)  # (..., T, J)
    if layout == "halves":
        ang = torch.cat((ang, ang), dim=-1)  # (..., T, D)
    return torch.cos(ang), torch.sin(ang)


def rotate_with_tables(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    """RoPE of ``x`` (..., T, D) with the tables of :func:`rope_tables` (same layout).

    ``"halves"`` is the rotate-half form x cos + (-x[J:], x[:J]) sin on whole rows;
    ``"interleaved"`` works on strided views of the pairs. The halves are taken with
    ``chunk`` and the pairs with ``unbind`` (not slicing), so that the backward joins the two
    gradients instead of filling a zero tensor for each.
    """
    xf = x if x.dtype == cos.dtype else x.to(cos.dtype)
    if layout == "halves":
        re, im = xf.chunk(2, dim=-1)  # (..., T, J) each
        out = xf * cos + torch.cat((-im, re), dim=-1) * sin  # (..., T, D)
    else:
        re, im = xf.unflatten(-1, (x.shape[-1] // 2, 2)).unbind(-1)  # (..., T, J) each
        out = join_pairs(re * cos - im * sin, re * sin + im * cos, layout)
    return out if out.dtype == x.dtype else out.to(x.dtype)
