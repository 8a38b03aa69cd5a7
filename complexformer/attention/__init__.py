"""Real-valued language-model attention: CMHA (ComplexFormer) and its baselines.

Kernels on (B, H, T, D) tensors (``functional``), the attention module, the KV cache, and
the positional schemes as registered objects (``schemes``, ``registry``).
"""

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
from .registry import (
    SCHEMES,
    describe_schemes,
    get_scheme,
    register_scheme,
    registered_scheme,
    unregister_scheme,
)
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
    "AlibiScheme",
    "CausalSelfAttention",
    "KVCache",
    "LayerKVCache",
    "LearnedPositions",
    "PolarScheme",
    "PositionalScheme",
    "RotaryScheme",
    "SinusoidalPositions",
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "attention",
    "causal_mask",
    "cmha",
    "cmha_reference",
    "describe_schemes",
    "get_scheme",
    "polar_components",
    "polar_from_components",
    "polar_rotate",
    "register_scheme",
    "registered_scheme",
    "rope_frequencies",
    "unregister_scheme",
]
