"""The transformers configuration of a ComplexFormer language model.

Self-contained: this file imports only ``transformers``, so that an exported model directory
can carry it beside the weights and load with ``trust_remote_code=True`` where complexformer
is not installed (see ``docs/huggingface.md``). Inside the package it is the class that
``complexformer.hf.register_auto_classes()`` registers with ``AutoConfig``.

The fields are those of ``complexformer.models.GPTConfig`` under the same names, except
``tie_embeddings``, which is transformers' ``tie_word_embeddings``; the usual transformers
names (``hidden_size``, ``num_hidden_layers``, ...) are aliases of them.
"""

from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig

__all__ = ["POS_SCHEMES", "ROTARY_SCHEMES", "ComplexFormerConfig"]

#: The positional schemes this transformers port implements (Shao et al. 2025, Tables 1, 4).
POS_SCHEMES = (
    "cmha",
    "cmha_shared",
    "cmha_fixed",
    "rope",
    "learned",
    "sinusoidal",
    "alibi",
    "nope",
)
#: The schemes that rotate the complex pairs of queries and keys (head dimension even).
ROTARY_SCHEMES = ("cmha", "cmha_shared", "cmha_fixed", "rope")
_CHOICES = {
    "norm": ("pre", "post"),
    "omega_schedule": ("rope", "paper"),
    "delta_init": ("paper", "rope"),
    "pcl_target": ("theta", "rotated"),
    "pcl_reduce": ("mean", "sum"),
    "chunked_loss": ("auto", "always", "never"),
}


class ComplexFormerConfig(PretrainedConfig):
    """Configuration of :class:`ComplexFormerForCausalLM` (``model_type="complexformer"``).

    Args:
        vocab_size: number of token ids.
        n_layer: decoder blocks.
        n_head: attention heads per block.
        d_model: model width; ``d_model / n_head`` is the head dimension D (even for the
            rotation schemes: J = D/2 complex pairs).
        d_ff: hidden width of the feed-forward network.
        dropout: dropout on embeddings, attention weights and residual branches.
        max_seq_len: training context; the hard limit of ``learned`` positions.
        pos_scheme: one of :data:`POS_SCHEMES`.
        omega_schedule: ``"rope"`` (omega_j = base^(-2j/D)) or ``"paper"`` (base^(-2j/J),
            eq. 6 literally).
        rope_base: frequency base of the rotation schemes.
        norm: ``"pre"`` or ``"post"`` LayerNorm.
        bias: biases in the linear layers and LayerNorms.
        layer_norm_eps: LayerNorm epsilon.
        init_std: std of the normal initialisation of weights.
        delta_init_std, delta_init: initialisation of CMHA's δ (training only).
        pcl, pcl_epsilon, pcl_tau, pcl_dropout, pcl_target, pcl_reduce: the phase contrastive
            loss settings of the training run; kept so the configuration round-trips (the
            loss itself is training-only and not part of this port).
        chunked_loss: how the training run computed its loss (``GPTConfig.chunked_loss``);
            kept so the configuration round-trips.
        tie_word_embeddings: share the token embedding with the output projection.
        **kwargs: passed to ``PretrainedConfig`` (``bos_token_id``, ``eos_token_id``, ...).

    Raises:
        ValueError: an unknown scheme or option, or shapes that do not fit.
    """

    model_type = "complexformer"
    attribute_map = {
        "hidden_size": "d_model",
        "num_hidden_layers": "n_layer",
        "num_attention_heads": "n_head",
        "intermediate_size": "d_ff",
        "max_position_embeddings": "max_seq_len",
    }
    _auto_class = "AutoConfig"

    def __init__(
        self,
        vocab_size: int = 8192,
        n_layer: int = 4,
        n_head: int = 4,
        d_model: int = 128,
        d_ff: int = 512,
        dropout: float = 0.0,
        max_seq_len: int = 256,
        pos_scheme: str = "cmha",
        omega_schedule: str = "rope",
        rope_base: float = 10000.0,
        norm: str = "pre",
        bias: bool = True,
        layer_norm_eps: float = 1e-5,
        init_std: float = 0.02,
        delta_init_std: float = 0.02,
        delta_init: str = "paper",
        pcl: bool = False,
        pcl_epsilon: float = 0.01,
        pcl_tau: float = 0.1,
        pcl_dropout: float = 0.5,
        pcl_target: str = "theta",
        pcl_reduce: str = "mean",
        chunked_loss: str = "auto",
        tie_word_embeddings: bool = True,
        use_cache: bool = True,
        **kwargs: Any,
    ) -> None:
        if pos_scheme not in POS_SCHEMES:
            raise ValueError(
                f"pos_scheme {pos_scheme!r} is not implemented by the transformers port; "
                f"known: {', '.join(POS_SCHEMES)}"
            )
        given = dict(
            norm=norm,
            omega_schedule=omega_schedule,
            delta_init=delta_init,
            pcl_target=pcl_target,
            pcl_reduce=pcl_reduce,
            chunked_loss=chunked_loss,
        )
        for name, value in given.items():
            if value not in _CHOICES[name]:
                raise ValueError(f"{name} must be one of {_CHOICES[name]}, got {value!r}")
        if d_model % n_head or (pos_scheme in ROTARY_SCHEMES and (d_model // n_head) % 2):
            raise ValueError(
                f"d_model ({d_model}) must be divisible by n_head ({n_head}), with an even "
                f"head dimension for pos_scheme {pos_scheme!r}"
            )
        self.vocab_size, self.n_layer, self.n_head = vocab_size, n_layer, n_head
        self.d_model, self.d_ff, self.dropout, self.max_seq_len = (
            d_model,
            d_ff,
            dropout,
            max_seq_len,
        )
        self.pos_scheme, self.omega_schedule, self.rope_base = pos_scheme, omega_schedule, rope_base
        self.norm, self.bias, self.layer_norm_eps = norm, bias, layer_norm_eps
        self.init_std, self.delta_init_std, self.delta_init = init_std, delta_init_std, delta_init
        self.pcl, self.pcl_epsilon, self.pcl_tau = pcl, pcl_epsilon, pcl_tau
        self.pcl_dropout, self.pcl_target, self.pcl_reduce = pcl_dropout, pcl_target, pcl_reduce
        self.chunked_loss = chunked_loss  # training only; the port computes no loss chunked
        self.use_cache = use_cache
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
