"""Input checks and dtype helpers shared by the complex layers (and the complex ViT)."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "as_complex_interleaved",
    "as_real_interleaved",
    "check_choice",
    "check_positive_int",
    "lift_complex",
    "real_dtype",
    "require_complex",
]

_COMPLEX = (torch.complex64, torch.complex128)
_REAL_TO_COMPLEX = {
    torch.float32: torch.complex64,
    torch.float64: torch.complex128,
    torch.float16: torch.complex64,
    torch.bfloat16: torch.complex64,
}


def require_complex(x: Tensor, name: str, where: str) -> Tensor:
    """Return ``x`` if it is complex64/complex128, else raise a ValueError naming the dtype.

    Used where a real input has no natural lifting (attention, activations, dropout): a real
    tensor there usually means that a complex embedding or projection was forgotten.
    """
    if not isinstance(x, Tensor):
        raise ValueError(f"{where}: {name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _COMPLEX:
        raise ValueError(
            f"{where}: {name} must be a complex tensor (torch.complex64 or torch.complex128), "
            f"got dtype {x.dtype}; lift a real tensor explicitly, e.g. x.to(torch.complex64)"
        )
    return x


def lift_complex(x: Tensor, name: str, where: str) -> Tensor:
    """Complex ``x`` unchanged; a real floating ``x`` lifted to complex with Im = 0.

    float64 becomes complex128 and float32/float16/bfloat16 become complex64; integer and
    boolean tensors raise a ValueError (there is no meaningful lifting of token ids).
    """
    if not isinstance(x, Tensor):
        raise ValueError(f"{where}: {name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype in _COMPLEX:
        return x
    if x.dtype in _REAL_TO_COMPLEX:
        return x.to(_REAL_TO_COMPLEX[x.dtype])
    raise ValueError(
        f"{where}: {name} must be a complex (complex64/complex128) or real floating tensor, "
        f"got dtype {x.dtype}"
    )


def real_dtype(x: Tensor) -> torch.dtype:
    """float32 for complex64, float64 for complex128 (the dtype of ``x.real``)."""
    return torch.float64 if x.dtype in (torch.complex128, torch.float64) else torch.float32


def as_complex_interleaved(y: Tensor) -> Tensor:
    """(..., 2n) real with (re, im) interleaved -> (..., n) complex, without a copy.

    Half / bfloat16 results (autocast) are cast to float32 first, since torch has no complex
    bfloat16 and complex32 is barely supported.
    """
    if y.dtype in (torch.float16, torch.bfloat16):
        y = y.float()
    y = y.unflatten(-1, (-1, 2))
    if y.stride(-1) != 1 or any(s % 2 for s in y.stride()[:-1]):
        y = y.contiguous()
    return torch.view_as_complex(y)


def as_real_interleaved(z: Tensor) -> Tensor:
    """(..., n) complex -> (..., 2n) real with (re, im) interleaved (a view when possible)."""
    return torch.view_as_real(z).flatten(-2)


def check_positive_int(value, name: str, where: str) -> int:
    """Return ``value`` if it is an int > 0 (not a bool), else raise a ValueError naming it.

    Args:
        value: the value to check.
        name: the argument's name, for the message.
        where: the layer or function it was given to, for the message.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{where}: {name} must be a positive integer, got {value!r}")
    return value


def check_choice(value, name: str, choices: tuple[str, ...], where: str) -> str:
    """Return ``value`` if it is one of ``choices``, else raise a ValueError naming them.

    Args:
        value: the value to check.
        name: the argument's name, for the message.
        choices: the allowed values.
        where: the layer or function it was given to, for the message.
    """
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{where}: unknown {name} {value!r}; allowed: {allowed}")
    return value
