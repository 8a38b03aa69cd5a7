"""Turn a pre-trained Hugging Face RoPE language model into a CMHA model, exactly.

CMHA (Shao et al., "ComplexFormer", 2025, eq. 7-8) rotates each complex pair of a query or
key to the phase A = δ ⊙ θ + b + p ω. Because cos and sin of a sum factorise, this is the
composition of two rotations:

    x  ->  adapt(x) = λ (cos(δ ⊙ θ + b), sin(δ ⊙ θ + b))     (position-free, per head)
       ->  RoPE(adapt(x), p)                                  (the model's own rotation)

so a Llama-family model becomes a CMHA model by applying ``adapt`` to the output of its query
and key projections and leaving everything else — the model's rotary embedding with its own
frequencies and scaling, the attention kernel (eager, SDPA, flash), the KV cache and
``generate`` — untouched. With δ = 1 and b = 0, ``adapt`` is the identity (up to float32
rounding of atan2/hypot), so the converted model computes what the original computed.

The hook point is the narrowest one available: a forward hook on the ``q_proj`` and
``k_proj`` linear layers (and ``v_proj`` for ``gqa="query"``), which run right before the
rotary application in the attention classes below. No transformers function is copied or
replaced.

GQA (grouped-query attention, H query heads sharing KV key/value heads):

* ``gqa="group"`` (default): δ has one J-vector per KV head and is shared by the query heads
  of its group; b has one per query head (eq. 7 adds b once to the phase difference, so it
  lives on the query side). This is CMHA exactly, and the KV cache keeps its size.
* ``gqa="query"``: every query head has its own δ; the keys (and values) are expanded to the
  H query heads before the cache, so the cache grows by H / KV (3× for SmolLM2-135M).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ..attention.polar import polar_rotate
from ..config import ConfigBase

__all__ = [
    "GQA_MODES",
    "PHASE_PARAMETERS",
    "RETROFIT_SCHEMES",
    "SUPPORTED_ATTENTION",
    "SUPPORTED_ROPE_TYPES",
    "TRAINABLE",
    "TRANSFORMERS_RANGE",
    "CMHAConversion",
    "cmha_modules",
    "set_trainable",
    "to_cmha",
]

#: Attention classes whose forward is ``q_proj -> view -> rotate-half RoPE``.
SUPPORTED_ATTENTION = ("LlamaAttention", "MistralAttention", "Qwen2Attention")
RETROFIT_SCHEMES = ("cmha", "cmha_shared")
GQA_MODES = ("group", "query")
#: What ``trainable=`` leaves trainable (everything else is frozen).
TRAINABLE = ("adaptation", "adaptation+norms", "norms", "all", "none")
#: RoPE types whose cos/sin the model's rotary embedding computes before the attention: CMHA
#: composes with them exactly, because it only changes q and k before that rotation.
SUPPORTED_ROPE_TYPES = ("default", "linear", "dynamic", "llama3", "yarn", "longrope")
#: The transformers versions whose attention classes were checked for the hook point.
TRANSFORMERS_RANGE = ((5, 0), (6, 0))

_DELTA, _BIAS = "cmha_delta", "cmha_bias"
#: The names of the adaptation's parameters on each converted attention layer.
PHASE_PARAMETERS = (_DELTA, _BIAS)


@dataclass
class CMHAConversion(ConfigBase):
    """The conversion settings, saved with every adaptation.

    Attributes:
        scheme: ``"cmha"`` (δ, b per head) or ``"cmha_shared"`` (one δ, b per layer, shared
            by every head: EulerFormer's variant).
        gqa: ``"group"`` or ``"query"`` (see the module docstring); ignored without GQA.
    """

    scheme: str = "cmha"
    gqa: str = "group"

    def validate(self) -> None:
        """Raise ValueError naming a bad value and the allowed ones."""
        if self.scheme not in RETROFIT_SCHEMES:
            raise ValueError(
                f"unknown retrofit scheme {self.scheme!r}; allowed: {', '.join(RETROFIT_SCHEMES)}"
            )
        if self.gqa not in GQA_MODES:
            raise ValueError(f"unknown gqa mode {self.gqa!r}; allowed: {', '.join(GQA_MODES)}")


def _transformers_version() -> tuple[int, int]:
    import transformers

    major, minor = (
        int(re.match(r"\d+", p).group()) for p in transformers.__version__.split(".")[:2]
    )
    return major, minor


def _check_transformers() -> None:
    lo, hi = TRANSFORMERS_RANGE
    v = _transformers_version()
    if not lo <= v < hi:
        raise ImportError(
            f"complexformer.retrofit supports transformers >={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}; "
            f"found {'.'.join(map(str, v))}: install a version in that range"
        )


def _rope_type(config: Any) -> str:
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None)
    if isinstance(params, dict):
        return str(params.get("rope_type", params.get("type", "default")))
    return "default"


def _check_model(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The attention modules to convert; ValueError for a model this cannot convert."""
    config = getattr(model, "config", None)
    found = [(n, m) for n, m in model.named_modules() if type(m).__name__ in SUPPORTED_ATTENTION]
    if config is None or not found:
        attn = sorted(
            {type(m).__name__ for m in model.modules() if "Attention" in type(m).__name__}
        )
        raise ValueError(
            f"to_cmha cannot convert {type(model).__name__} (attention classes: "
            f"{', '.join(attn) or 'none'}); supported: Hugging Face causal LMs with rotate-half "
            f"RoPE whose attention is one of {', '.join(SUPPORTED_ATTENTION)} (Llama, Mistral, "
            "Qwen2, SmolLM2)"
        )
    other = sorted(
        {
            type(m).__name__
            for m in model.modules()
            if type(m).__name__.endswith("Attention")
            and type(m).__name__ not in SUPPORTED_ATTENTION
        }
    )
    if other:
        raise ValueError(f"to_cmha: {type(model).__name__} mixes unsupported attention {other}")
    rope = _rope_type(config)
    if rope not in SUPPORTED_ROPE_TYPES:
        raise ValueError(
            f"to_cmha: RoPE type {rope!r} of {type(model).__name__} is not handled; handled: "
            f"{', '.join(SUPPORTED_ROPE_TYPES)}"
        )
    partial = getattr(config, "partial_rotary_factor", 1.0)
    if partial not in (None, 1, 1.0):
        raise ValueError(
            f"to_cmha: partial_rotary_factor={partial} (RoPE on part of each head) is not "
            "handled; only full-head rotary models can be converted"
        )
    for name, m in found:
        if hasattr(m, _DELTA):
            raise ValueError(f"to_cmha: {name} is converted already")
    return found


def _heads(attn: nn.Module) -> tuple[int, int, int]:
    """(query heads H, key/value heads KV, head dim D) of an attention module."""
    d = int(attn.head_dim)
    h = attn.q_proj.out_features // d
    kv = attn.k_proj.out_features // d
    return h, kv, d


def _adapt(y: Tensor, heads: int, d: int, delta: Tensor, bias: Tensor | None) -> Tensor:
    """λ (cos(δθ + b), sin(δθ + b)) of each rotate-half pair of the projection output y.

    Args:
        y: (B, T, heads * D) output of a projection.
        delta: (heads, J) or (J,) phase scale; bias: the same shapes, or None.

    Returns:
        (B, T, heads * D) in y's dtype; the phase arithmetic runs in float32.
    """
    b, t, _ = y.shape
    x = y.view(b, t, heads, d).transpose(1, 2)  # (B, heads, T, D)
    zero = torch.zeros(d // 2, device=y.device, dtype=torch.float32)
    out = polar_rotate(x, delta, bias, 0, zero, layout="halves")  # no position term
    return out.transpose(1, 2).reshape(b, t, heads * d)


def _expand_heads(y: Tensor, kv: int, rep: int, d: int) -> Tensor:
    """(B, T, KV * D) -> (B, T, KV * rep * D), each KV head repeated for its query heads."""
    b, t, _ = y.shape
    return y.view(b, t, kv, 1, d).expand(b, t, kv, rep, d).reshape(b, t, kv * rep * d)


def _install(attn: nn.Module, conv: CMHAConversion) -> None:
    h, kv, d = _heads(attn)
    j, rep = d // 2, h // kv
    w = attn.q_proj.weight
    pdt = torch.float64 if w.dtype == torch.float64 else torch.float32  # phases: fp32 at least
    opts = dict(device=w.device, dtype=pdt)
    mode = conv.gqa if rep > 1 else "group"
    if conv.scheme == "cmha_shared":
        delta_shape, bias_shape = (j,), (j,)
    else:
        delta_shape, bias_shape = ((kv if mode == "group" else h), j), (h, j)
    attn.register_parameter(_DELTA, nn.Parameter(torch.ones(delta_shape, **opts)))
    attn.register_parameter(_BIAS, nn.Parameter(torch.zeros(bias_shape, **opts)))

    def q_delta() -> Tensor:
        delta = getattr(attn, _DELTA)
        if conv.scheme == "cmha" and mode == "group" and rep > 1:
            return delta.repeat_interleave(rep, dim=0)  # (H, J): query h uses δ of its group
        return delta

    def q_hook(_mod, _inp, y):
        return _adapt(y, h, d, q_delta(), getattr(attn, _BIAS))

    def k_hook(_mod, _inp, y):
        if mode == "query" and rep > 1:
            return _adapt(_expand_heads(y, kv, rep, d), h, d, getattr(attn, _DELTA), None)
        return _adapt(y, kv, d, getattr(attn, _DELTA), None)

    handles = [attn.q_proj.register_forward_hook(q_hook)]
    handles.append(attn.k_proj.register_forward_hook(k_hook))
    if mode == "query" and rep > 1:
        handles.append(
            attn.v_proj.register_forward_hook(lambda _m, _i, y: _expand_heads(y, kv, rep, d))
        )
        attn.num_key_value_groups = 1  # keys and values now have H heads
    attn._cmha_hooks = handles
    attn._cmha_shape = {"query_heads": h, "kv_heads": kv, "head_dim": d, "gqa": mode}


def cmha_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The converted attention modules of ``model``, with their names."""
    return [(n, m) for n, m in model.named_modules() if hasattr(m, _DELTA)]


def _is_norm(name: str, module: nn.Module) -> bool:
    """The norm before each attention layer (``input_layernorm`` in Llama, Mistral, Qwen2)."""
    return name.endswith("input_layernorm")


def set_trainable(model: nn.Module, trainable: str) -> list[str]:
    """Freeze ``model`` except the parameters that ``trainable`` names.

    Args:
        model: a converted model.
        trainable: ``"adaptation"`` (δ, b), ``"adaptation+norms"`` (δ, b and the gains of
            the RMSNorm before each attention layer, ``input_layernorm``: the norm that feeds
            the projections CMHA adapts, with a similar parameter count), ``"norms"`` (those
            gains alone), ``"all"`` or ``"none"``.

    Returns:
        The names of the trainable parameters.
    """
    if trainable not in TRAINABLE:
        raise ValueError(f"unknown trainable={trainable!r}; allowed: {', '.join(TRAINABLE)}")
    norms = {
        f"{n}.{p}" if n else p
        for n, m in model.named_modules()
        if _is_norm(n, m)
        for p, _ in m.named_parameters(recurse=False)
    }
    names = []
    for name, p in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        adapt = leaf in (_DELTA, _BIAS)
        on = (
            trainable == "all"
            or (adapt and trainable in ("adaptation", "adaptation+norms"))
            or (name in norms and trainable in ("norms", "adaptation+norms"))
        )
        p.requires_grad_(on)
        if on:
            names.append(name)
    return names


def to_cmha(
    model: nn.Module,
    scheme: str = "cmha",
    gqa: str = "group",
    trainable: str | None = "adaptation",
) -> nn.Module:
    """Convert a Hugging Face RoPE causal LM into a CMHA model, in place.

    Every supported attention module gains ``cmha_delta`` (δ, initialised to 1) and
    ``cmha_bias`` (b, initialised to 0) as float32 parameters, and forward hooks on its query
    and key projections that apply the position-free part of CMHA's rotation (eq. 7) before
    the model's own RoPE. At δ = 1, b = 0 the logits equal the original model's.

    Args:
        model: e.g. a ``LlamaForCausalLM``, ``MistralForCausalLM``, ``Qwen2ForCausalLM``.
        scheme: ``"cmha"`` (per head) or ``"cmha_shared"`` (per layer).
        gqa: ``"group"`` (δ per KV head, exact CMHA, same cache) or ``"query"`` (δ per query
            head; keys and values expanded, the cache grows by H / KV).
        trainable: which parameters stay trainable (:func:`set_trainable`); None leaves
            ``requires_grad`` as it is.

    Returns:
        The same model.

    Raises:
        ValueError: an unsupported architecture, RoPE type or option (the message names the
            value and what is allowed), or a model converted already.
        ImportError: a transformers version outside :data:`TRANSFORMERS_RANGE`.
    """
    conv = CMHAConversion(scheme=scheme, gqa=gqa)
    conv.validate()
    _check_transformers()
    for _, attn in _check_model(model):
        _install(attn, conv)
    model._cmha_conversion = conv
    if trainable is not None:
        set_trainable(model, trainable)
    return model
