"""Positional schemes as objects: one class per family, one registered instance per name.

See :class:`PositionalScheme` for what a scheme does, and ``docs/positional_schemes.md`` for
a worked example of adding one.
"""

from .absolute import LearnedPositions, SinusoidalPositions, sinusoidal_embedding
from .alibi import AlibiScheme
from .base import PAIRS, PositionalScheme, modulus_pairs
from .cmha import PolarScheme
from .rope import RotaryScheme

__all__ = [
    "PAIRS",
    "AlibiScheme",
    "LearnedPositions",
    "PolarScheme",
    "PositionalScheme",
    "RotaryScheme",
    "SinusoidalPositions",
    "modulus_pairs",
    "sinusoidal_embedding",
]
