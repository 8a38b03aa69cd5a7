"""Positional schemes of the language model, chosen by registered name.

Every scheme of the ComplexFormer paper (Shao et al. 2025, Table 1 and Table 4) is one name:

=============  ===========================================================================
``cmha``       CMHA: per-head adaptive polar rotation, delta and b in R^(H x J) per layer
``cmha_shared`` EulerFormer-MHA (Shared): one delta, b in R^J per layer shared by all heads
``cmha_fixed`` CMHA with delta = 1, b = 0 frozen (identical to RoPE up to rounding)
``rope``       rotary position embedding (Su et al., RoFormer)
``learned``    learned absolute position embedding added to the tokens (GPT-2 style)
``sinusoidal`` fixed sinusoidal absolute embedding (Vaswani et al.)
``alibi``      linear distance bias per head (Press et al., ALiBi)
``nope``       no positional information (causal mask only)
=============  ===========================================================================

A name maps to a :class:`~complexformer.attention.schemes.PositionalScheme` instance that
carries the scheme's behaviour. A new scheme is one class plus :func:`register_scheme`
(see ``docs/positional_schemes.md``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .schemes import (
    AlibiScheme,
    LearnedPositions,
    PolarScheme,
    PositionalScheme,
    RotaryScheme,
    SinusoidalPositions,
)

__all__ = [
    "SCHEMES",
    "describe_schemes",
    "get_scheme",
    "register_scheme",
    "registered_scheme",
    "scheme_max_length",
    "unregister_scheme",
]

SCHEMES: dict[str, PositionalScheme] = {}


def register_scheme(scheme):
    """Add a scheme to the registry under its ``name`` (names must be unique).

    Usable as a call, ``register_scheme(MyScheme())``, or as a class decorator,
    ``@register_scheme`` on a subclass whose ``name`` is a class attribute (the class is
    instantiated without arguments).

    Args:
        scheme: a :class:`PositionalScheme` instance, or a subclass.

    Returns:
        What was passed (so that the decorator leaves the class in place).

    Raises:
        TypeError: not a PositionalScheme.
        ValueError: the name is taken.
    """
    obj = scheme() if isinstance(scheme, type) else scheme
    if not isinstance(obj, PositionalScheme):
        raise TypeError(f"register_scheme expects a PositionalScheme, got {scheme!r}")
    if obj.name in SCHEMES:
        raise ValueError(f"positional scheme {obj.name!r} is already registered")
    SCHEMES[obj.name] = obj
    return scheme


def unregister_scheme(name: str) -> PositionalScheme:
    """Remove a registered scheme and return it (for tests and plug-ins)."""
    if name not in SCHEMES:
        raise _unknown(name)
    return SCHEMES.pop(name)


@contextmanager
def registered_scheme(scheme: PositionalScheme) -> Iterator[PositionalScheme]:
    """Register ``scheme`` for the duration of a ``with`` block (tests, experiments)."""
    register_scheme(scheme)
    try:
        yield scheme
    finally:
        SCHEMES.pop(scheme.name, None)


def _unknown(name: str) -> ValueError:
    close = difflib.get_close_matches(str(name), list(SCHEMES), n=3, cutoff=0.5)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return ValueError(f"unknown positional scheme {name!r}; known: {', '.join(SCHEMES)}{hint}")


def get_scheme(name: str) -> PositionalScheme:
    """Look a scheme up by name; an unknown name raises ValueError listing the known ones and
    suggesting the closest."""
    try:
        return SCHEMES[name]
    except (KeyError, TypeError):
        raise _unknown(name) from None


def scheme_max_length(config: Any) -> int | None:
    """The longest sequence the positional scheme of a model config can run.

    Args:
        config: an object with ``pos_scheme`` (``GPTConfig``), or anything else (None).

    Returns:
        The scheme's :meth:`~PositionalScheme.max_length` (``learned``: ``max_seq_len``), or
        None when it has no limit or ``config`` names no scheme.
    """
    name = getattr(config, "pos_scheme", None)
    return None if name is None else get_scheme(name).max_length(config)


def describe_schemes() -> str:
    """``name: description`` of every registered scheme, one per line (for ``--help``)."""
    width = max(map(len, SCHEMES), default=0) + 2
    return "\n".join(f"  {name:<{width}}{s.description}" for name, s in SCHEMES.items())


for _s in (
    PolarScheme("cmha", "head", "CMHA, per-head delta and b (ComplexFormer)"),
    PolarScheme("cmha_shared", "shared", "one delta, b per layer (EulerFormer-MHA)"),
    PolarScheme("cmha_fixed", "fixed", "CMHA with delta=1, b=0 frozen"),
    RotaryScheme(),
    LearnedPositions(),
    SinusoidalPositions(),
    AlibiScheme(),
    PositionalScheme("nope", "no positional encoding"),
):
    register_scheme(_s)
