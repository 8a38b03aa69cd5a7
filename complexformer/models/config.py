"""Configuration dataclass and presets of the decoder-only language model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..attention.registry import get_scheme
from ..config import ConfigBase, named_configs, unknown_key_error

__all__ = [
    "HF_MODEL_TYPE",
    "HF_NAMES",
    "PRESETS",
    "describe_presets",
    "preset_fields",
    "GPTConfig",
    "gpt_config_from_hf",
    "preset_config",
    "unknown_key_error",
]

#: ``model_type`` of the transformers configuration (``complexformer.hf``).
HF_MODEL_TYPE = "complexformer"
#: GPTConfig fields stored under another name in the transformers configuration; every other
#: field keeps its name (``complexformer/hf/configuration_complexformer.py``).
HF_NAMES = {"tie_embeddings": "tie_word_embeddings"}

_NORMS = ("pre", "post")
_SCHEDULES = ("rope", "paper")
_DELTA_INITS = ("paper", "rope")
_PCL_TARGETS = ("theta", "rotated")
_PCL_REDUCES = ("mean", "sum")
_CHUNKED_LOSS = ("auto", "always", "never")


@dataclass
class GPTConfig(ConfigBase):
    """Shape and options of :class:`~complexformer.models.lm.ComplexFormerLM`.

    Attributes:
        vocab_size: number of token ids.
        n_layer: transformer blocks.
        n_head: attention heads per block.
        d_model: model width; ``d_model / n_head`` is the head dimension D (even for
            rotation schemes; J = D/2 complex pairs).
        d_ff: hidden width of the feed-forward network.
        dropout: dropout on embeddings, attention weights and residual branches.
        max_seq_len: longest sequence; a hard limit for ``learned`` positions, the training
            context for the others.
        pos_scheme: positional scheme name: ``cmha`` (default), ``cmha_shared``,
            ``cmha_fixed``, ``rope``, ``learned``, ``sinusoidal``, ``alibi``, ``nope``, or
            any scheme added with ``complexformer.attention.register_scheme``; the scheme
            validates the head dimension and ``pcl``.
        omega_schedule: ``"rope"`` (omega_j = base^(-2j/D)) or ``"paper"``
            (omega_j = base^(-2j/J), eq. 6 literally).
        rope_base: frequency base.
        norm: ``"pre"`` (LayerNorm before each sub-layer) or ``"post"`` (after the residual
            sum, as in the original Transformer).
        tie_embeddings: share the token embedding with the output projection.
        bias: biases in linear layers.
        layer_norm_eps: LayerNorm epsilon.
        init_std: std of the normal initialisation of weights (GPT-2: 0.02).
        delta_init_std: std σ of the CMHA delta initialisation (paper: 0.02).
        delta_init: ``"paper"`` (δ ~ N(0, σ²), Appendix A: every head starts with the
            semantic phase nearly switched off) or ``"rope"`` (δ = 1 + N(0, σ²): every head
            starts as RoPE).
        pcl: enable the phase contrastive loss (schemes with phases: ``cmha*``).
        pcl_epsilon: weight epsilon of the PCL term (paper: 0.01); the model's loss is
            ``lm_loss + pcl_epsilon * pcl_loss``.
        pcl_tau: PCL temperature tau (paper: 0.1).
        pcl_dropout: dropout making the second view (EulerFormer: 0.5).
        pcl_target: the phases the PCL regularises: ``"theta"`` (the per-head semantic
            phases θ of eq. 2, before δ, b and the position term; §3.2) or ``"rotated"``
            (δ ⊙ θ + b + p ω, the behaviour of earlier versions).
        pcl_reduce: how the per-layer losses of queries and keys are combined into
            ``pcl_loss``: ``"mean"`` (over the 2 L terms) or ``"sum"`` (earlier versions).
        chunked_loss: how the training loss is computed when gradients are recorded:
            ``"always"`` the chunked linear + cross-entropy
            (:func:`~complexformer.losses.chunked_ce.chunked_linear_cross_entropy`: no
            (B, T, V) logits or gradient, the logits computed twice, ``logits`` is None),
            ``"never"`` the plain head and ``F.cross_entropy``, ``"auto"`` (default) the
            chunked one when B * T * V reaches 2^27 (512 MiB of float32 logits; e.g. the
            paper preset's batches). It changes no weight, only memory and time.
    """

    vocab_size: int = 8192
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 128
    d_ff: int = 512
    dropout: float = 0.0
    max_seq_len: int = 256
    pos_scheme: str = "cmha"
    omega_schedule: str = "rope"
    rope_base: float = 10000.0
    norm: str = "pre"
    tie_embeddings: bool = True
    bias: bool = True
    layer_norm_eps: float = 1e-5
    init_std: float = 0.02
    delta_init_std: float = 0.02
    delta_init: str = "paper"
    pcl: bool = False
    pcl_epsilon: float = 0.01
    pcl_tau: float = 0.1
    pcl_dropout: float = 0.5
    pcl_target: str = "theta"
    pcl_reduce: str = "mean"
    chunked_loss: str = "auto"

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_layer", "n_head", "d_model", "d_ff", "max_seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_head:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head})"
            )
        scheme = get_scheme(self.pos_scheme)
        scheme.validate(head_dim=self.head_dim, pcl=self.pcl)
        if self.norm not in _NORMS:
            raise ValueError(f"norm must be one of {_NORMS}, got {self.norm!r}")
        if self.omega_schedule not in _SCHEDULES:
            raise ValueError(
                f"omega_schedule must be one of {_SCHEDULES}, got {self.omega_schedule!r}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.pcl_tau <= 0:
            raise ValueError(f"pcl_tau must be > 0, got {self.pcl_tau}")
        if not 0.0 <= self.pcl_dropout < 1.0:
            raise ValueError(f"pcl_dropout must be in [0, 1), got {self.pcl_dropout}")
        for name, allowed in (
            ("delta_init", _DELTA_INITS),
            ("pcl_target", _PCL_TARGETS),
            ("pcl_reduce", _PCL_REDUCES),
            ("chunked_loss", _CHUNKED_LOSS),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}"
                )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head


#: Named model configurations (``complexformer/configs/presets.toml``), each written as a
#: base plus its differences: ``PRESETS[name]`` is a copy of its GPTConfig fields. ``small``
#: and ``micro`` are the models of ``reproduce``'s ``small`` and ``tiny`` scales, ``paper``
#: the ComplexFormer paper's (Appendix A; the file says which two choices it makes).
PRESETS = named_configs("presets.toml", "preset")


def describe_presets() -> str:
    """The presets and what each is, one per line."""
    return PRESETS.describe()


def preset_fields(name: str, **differences: Any) -> dict[str, Any]:
    """The fields of preset ``name`` with ``differences`` applied (a dict, not a config)."""
    return {**PRESETS[name], **differences}


def preset_config(name: str, **overrides: Any) -> GPTConfig:
    """The preset ``name`` (a key of :data:`PRESETS`) with fields overridden."""
    return GPTConfig.from_dict(preset_fields(name, **overrides))


def gpt_config_from_hf(data: dict[str, Any]) -> GPTConfig:
    """The :class:`GPTConfig` of an exported transformers ``config.json`` (as a dict).

    Keys that are not model fields (``model_type``, ``auto_map``, token ids, ...) are left out;
    a missing field takes its default.
    """
    names = {HF_NAMES.get(f, f): f for f in GPTConfig.field_names()}
    return GPTConfig.from_dict({field: data[key] for key, field in names.items() if key in data})
