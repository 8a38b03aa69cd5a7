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
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PosScheme", "SCHEMES", "get_scheme", "register_scheme"]


@dataclass(frozen=True)
class PosScheme:
    """How a positional scheme acts on attention.

    Attributes:
        name: registered name.
        rotation: ``"polar"`` (CMHA polar rotation), ``"rope"`` or None.
        adapt: for polar rotation, ``"head"`` (H x J), ``"shared"`` (J) or ``"fixed"``.
        absolute: ``"learned"`` or ``"sinusoidal"`` embedding added to the tokens, or None.
        alibi: whether an ALiBi distance bias is added to the scores.
        description: one line for help texts.
    """

    name: str
    rotation: str | None = None
    adapt: str | None = None
    absolute: str | None = None
    alibi: bool = False
    description: str = ""


SCHEMES: dict[str, PosScheme] = {}


def register_scheme(scheme: PosScheme) -> PosScheme:
    """Add a scheme to the registry (names must be unique)."""
    if scheme.name in SCHEMES:
        raise ValueError(f"positional scheme {scheme.name!r} is already registered")
    SCHEMES[scheme.name] = scheme
    return scheme


for _s in (
    PosScheme("cmha", "polar", "head", description="CMHA, per-head delta and b (ComplexFormer)"),
    PosScheme(
        "cmha_shared", "polar", "shared", description="one delta, b per layer (EulerFormer-MHA)"
    ),
    PosScheme("cmha_fixed", "polar", "fixed", description="CMHA with delta=1, b=0 frozen"),
    PosScheme("rope", "rope", description="rotary position embedding"),
    PosScheme("learned", absolute="learned", description="learned absolute positions (GPT-2)"),
    PosScheme("sinusoidal", absolute="sinusoidal", description="sinusoidal absolute positions"),
    PosScheme("alibi", alibi=True, description="ALiBi linear distance bias"),
    PosScheme("nope", description="no positional encoding"),
):
    register_scheme(_s)


def get_scheme(name: str) -> PosScheme:
    """Look a scheme up by name; an unknown name raises ValueError listing the known ones."""
    try:
        return SCHEMES[name]
    except KeyError:
        raise ValueError(
            f"unknown positional scheme {name!r}; known: {', '.join(SCHEMES)}"
        ) from None
