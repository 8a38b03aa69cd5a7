"""Real-valued language-model attention: CMHA (ComplexFormer) and its baselines."""

from .cache import KVCache, LayerKVCache
from .functional import (
    alibi_bias,
    alibi_slopes,
    apply_rope,
    attention,
    causal_mask,
    cmha,
    cmha_reference,
    polar_components,
    polar_from_components,
    polar_rotate,
    rope_frequencies,
)
from .module import CausalSelfAttention
from .registry import SCHEMES, PosScheme, get_scheme, register_scheme

__all__ = [
    "SCHEMES",
    "CausalSelfAttention",
    "KVCache",
    "LayerKVCache",
    "PosScheme",
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "attention",
    "causal_mask",
    "cmha",
    "cmha_reference",
    "get_scheme",
    "polar_components",
    "polar_from_components",
    "polar_rotate",
    "register_scheme",
    "rope_frequencies",
]
