"""ComplexFormer as a transformers causal language model: inference for every positional scheme.

Shao et al. 2025, "ComplexFormer: Disruptively Advancing Transformer Inference Ability via
Head-Specific Complex Vector Attention". This file is self-contained on purpose: it imports
only ``torch`` and ``transformers`` (and its configuration beside it), so that an exported
model directory carries it and loads with ``trust_remote_code=True`` where complexformer is
not installed. It repeats the forward pass of ``complexformer.models.lm`` and
``complexformer.attention`` in the shortest form; the tests pin its logits to the package's
model for every registered scheme.

The parameter names are those of ``ComplexFormerLM`` (``wte``, ``wpe``, ``blocks.{i}.ln1``,
``blocks.{i}.attn.qkv``, ``blocks.{i}.attn.adapt_delta``, ..., ``ln_f``, ``lm_head``), so the
weights map 1:1. Buffers the package keeps (the frequencies ω, ALiBi's slopes, the frozen δ, b
of ``cmha_fixed``) are recomputed here. The phase contrastive loss is training-only and not
ported; ``pcl_weight`` is kept as an unused parameter so that the state dicts still match.

Each head pairs feature j with feature j + D/2 (the library's "halves" layout). CMHA reads a
pair as λ e^(iθ) (eq. 1-2) and writes it back as (λ cos A, λ sin A) with
A = δ ⊙ θ + b + p ω (eq. 7; b on the query side only), so that scaled-dot-product attention
of the rotated queries and keys gives the score of eq. 8.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.cache_utils import DynamicCache
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_complexformer import ComplexFormerConfig

try:  # transformers 5: initialisers that leave loaded weights alone
    from transformers import initialization as init
except ImportError:  # pragma: no cover - transformers 4
    from torch.nn import init

__all__ = ["ComplexFormerForCausalLM", "ComplexFormerPreTrainedModel"]

_ADAPT = {"cmha": "head", "cmha_shared": "shared", "cmha_fixed": "fixed"}
_ABSOLUTE = ("learned", "sinusoidal")
# The output's cache field: ``cache`` in recent transformers, ``past_key_values`` before.
_CACHE_FIELD = (
    "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"
)


def rope_frequencies(head_dim: int, base: float, schedule: str, device=None) -> Tensor:
    """(J,) float32 ω_j = base^(-2j/D) (``"rope"``) or base^(-2j/J) (``"paper"``, eq. 6)."""
    j = torch.arange(head_dim // 2, dtype=torch.float64, device=device)
    denom = head_dim if schedule == "rope" else head_dim // 2
    return (base ** (-2.0 * j / denom)).to(torch.float32)


def _phase_dtype(x: Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _halves(x: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """Pairs (x[j], x[j + D/2]) as contiguous (..., J) tensors (atan2, hypot vectorise so)."""
    both = x.to(dtype).unflatten(-1, (2, x.shape[-1] // 2)).movedim(-2, 0).contiguous()
    return both[0], both[1]


def polar_rotate(x: Tensor, delta, bias, pos: Tensor, omega: Tensor) -> Tensor:
    """(B, H, T, D) -> pairs (λ cos A, λ sin A), A = δ θ + b + p ω (eq. 1-2, 7); δ, b None: 1, 0."""
    pdt = _phase_dtype(x)
    re, im = _halves(x, pdt)  # (B, H, T, J) each
    lam, theta = torch.hypot(re, im), torch.atan2(im, re)
    if delta is not None:
        theta = theta * delta.to(pdt).unsqueeze(-2)  # (H, 1, J) or (1, J)
    if bias is not None:
        theta = theta + bias.to(pdt).unsqueeze(-2)
    phase = theta + pos.to(pdt).unsqueeze(-1) * omega.to(pdt)  # (B, H, T, J)
    return torch.cat((torch.cos(phase) * lam, torch.sin(phase) * lam), dim=-1).to(x.dtype)


def apply_rope(x: Tensor, pos: Tensor, omega: Tensor) -> Tensor:
    """RoPE (Su et al., "RoFormer") on pairs (x[j], x[j + D/2]) at positions ``pos`` (T,)."""
    pdt = _phase_dtype(x)
    re, im = _halves(x, pdt)
    ang = pos.to(pdt).unsqueeze(-1) * omega.to(pdt)  # (T, J)
    cos, sin = torch.cos(ang), torch.sin(ang)
    return torch.cat((re * cos - im * sin, re * sin + im * cos), dim=-1).to(x.dtype)


def alibi_slopes(n_head: int) -> Tensor:
    """ALiBi head slopes (Press et al., "Train Short, Test Long"), geometric in 2^(-8/n)."""

    def pow2(n: int) -> list[float]:
        start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n_head).is_integer():
        return torch.tensor(pow2(n_head), dtype=torch.float32)
    closest = 2 ** math.floor(math.log2(n_head))
    extra = pow2(2 * closest)[0::2][: n_head - closest]
    return torch.tensor(pow2(closest) + extra, dtype=torch.float32)


def sinusoidal_embedding(positions: Tensor, dim: int) -> Tensor:
    """Vaswani et al. encoding: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(...)."""
    i = torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32)
    ang = positions.float().unsqueeze(-1) / (10000.0 ** (i / dim))  # (..., T, ceil(d/2))
    return torch.stack((torch.sin(ang), torch.cos(ang)), dim=-1).flatten(-2)[..., :dim]


def attend(q, k, v, offset: int, bias=None, key_mask=None, dropout_p: float = 0.0) -> Tensor:
    """Causal SDPA; queries at positions offset.., keys at 0..; (B, H, Tq, D) out.

    ``bias``: (H, Tq, Tk) additive scores; ``key_mask``: (B, Tk) True for real tokens. A query
    may always see its own position, so that rows of padding stay finite.
    """
    t_q, t_k = q.shape[-2], k.shape[-2]
    if bias is None and key_mask is None and t_q == t_k and offset == 0:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=t_q > 1)
    qpos = torch.arange(offset, offset + t_q, device=q.device)
    kpos = torch.arange(t_k, device=q.device)
    allowed = kpos.unsqueeze(0) <= qpos.unsqueeze(1)  # (Tq, Tk)
    if key_mask is not None:
        own = kpos.unsqueeze(0) == qpos.unsqueeze(1)
        allowed = allowed & (key_mask[:, None, None, :] | own)  # (B, 1, Tq, Tk)
    mask = allowed if bias is None else bias.to(q.dtype).masked_fill(~allowed, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)


class ComplexFormerAttention(nn.Module):
    """Causal self-attention with the configured positional scheme (CMHA by default)."""

    def __init__(self, config: ComplexFormerConfig, layer_idx: int) -> None:
        super().__init__()
        c, self.scheme, self.layer_idx = config, config.pos_scheme, layer_idx
        self.n_head, self.head_dim = c.n_head, c.d_model // c.n_head
        self.dropout, self.rope_base, self.omega_schedule = c.dropout, c.rope_base, c.omega_schedule
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model, bias=c.bias)
        self.proj = nn.Linear(c.d_model, c.d_model, bias=c.bias)
        self.resid_drop = nn.Dropout(c.dropout)
        adapt, j = _ADAPT.get(self.scheme), self.head_dim // 2
        if adapt in ("head", "shared"):
            shape = (c.n_head, j) if adapt == "head" else (j,)
            self.adapt_delta = nn.Parameter(torch.zeros(shape))
            self.adapt_bias = nn.Parameter(torch.zeros(shape))
        if c.pcl:  # training-only PCL channel weights, kept so the weights map 1:1
            self.pcl_weight = nn.Parameter(torch.ones(2, j))

    def forward(self, x: Tensor, cache=None, offset: int = 0, key_mask=None) -> Tensor:
        b, t, c = x.shape
        qkv = self.qkv(x).view(b, t, 3, self.n_head, self.head_dim)  # (B, T, 3, H, D)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, H, T, D)
        if self.scheme == "rope" or self.scheme in _ADAPT:
            omega = rope_frequencies(self.head_dim, self.rope_base, self.omega_schedule, x.device)
            pos = torch.arange(offset, offset + t, device=x.device, dtype=_phase_dtype(q))
            if self.scheme == "rope":
                q, k = apply_rope(q, pos, omega), apply_rope(k, pos, omega)
            else:
                delta = getattr(self, "adapt_delta", None)  # cmha_fixed: δ = 1, b = 0
                q = polar_rotate(q, delta, getattr(self, "adapt_bias", None), pos, omega)
                k = polar_rotate(k, delta, None, pos, omega)
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx)  # keys are cached after their rotation
        bias = None
        if self.scheme == "alibi":  # -slope_h (m - n), (H, Tq, Tk)
            qpos = torch.arange(offset, offset + t, device=x.device, dtype=torch.float32)
            kpos = torch.arange(k.shape[-2], device=x.device, dtype=torch.float32)
            slopes = alibi_slopes(self.n_head).to(x.device)
            bias = -slopes.view(-1, 1, 1) * (qpos.unsqueeze(1) - kpos.unsqueeze(0))
        drop = self.dropout if self.training else 0.0
        y = attend(q, k, v, offset, bias, key_mask, drop)  # (B, H, T, D)
        return self.resid_drop(self.proj(y.transpose(1, 2).reshape(b, t, c)))


class ComplexFormerMLP(nn.Module):
    def __init__(self, config: ComplexFormerConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(config.d_model, config.d_ff, bias=config.bias)
        self.proj = nn.Linear(config.d_ff, config.d_model, bias=config.bias)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.drop(self.proj(F.gelu(self.fc(x))))


class ComplexFormerBlock(nn.Module):
    """Attention then feed-forward, each with a residual and a LayerNorm (pre or post)."""

    def __init__(self, config: ComplexFormerConfig, layer_idx: int) -> None:
        super().__init__()
        eps, bias = config.layer_norm_eps, config.bias
        self.pre_norm = config.norm == "pre"
        self.ln1 = nn.LayerNorm(config.d_model, eps=eps, bias=bias)
        self.attn = ComplexFormerAttention(config, layer_idx)
        self.ln2 = nn.LayerNorm(config.d_model, eps=eps, bias=bias)
        self.mlp = ComplexFormerMLP(config)

    def forward(self, x: Tensor, cache=None, offset: int = 0, key_mask=None) -> Tensor:
        if self.pre_norm:
            x = x + self.attn(self.ln1(x), cache, offset, key_mask)
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attn(x, cache, offset, key_mask))
        return self.ln2(x + self.mlp(x))


class ComplexFormerPreTrainedModel(PreTrainedModel):
    config_class = ComplexFormerConfig
    base_model_prefix = "complexformer"  # no base-model submodule: names match ComplexFormerLM
    _no_split_modules = ["ComplexFormerBlock"]
    supports_gradient_checkpointing = False

    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)  # normal(0, init_std) linear and embedding, unit norms
        cfg = self.config
        if isinstance(module, (ComplexFormerAttention, ComplexFormerMLP)):  # GPT-2 scaled init
            init.normal_(
                module.proj.weight, mean=0.0, std=cfg.init_std / math.sqrt(2 * cfg.n_layer)
            )
        if isinstance(module, ComplexFormerAttention) and hasattr(module, "adapt_delta"):
            mean = 1.0 if cfg.delta_init == "rope" else 0.0  # paper: δ ~ N(0, σ²), b = 0
            init.normal_(module.adapt_delta, mean=mean, std=cfg.delta_init_std)
            init.zeros_(module.adapt_bias)
        if isinstance(module, ComplexFormerAttention) and hasattr(module, "pcl_weight"):
            init.ones_(module.pcl_weight)


class ComplexFormerForCausalLM(ComplexFormerPreTrainedModel, GenerationMixin):
    """The ComplexFormer decoder with its LM head; ``generate`` comes from transformers.

    Args:
        config: a :class:`ComplexFormerConfig`.
    """

    _auto_class = "AutoModelForCausalLM"
    _tied_weights_keys = {"lm_head.weight": "wte.weight"}

    def __init__(self, config: ComplexFormerConfig) -> None:
        super().__init__(config)
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        if config.pos_scheme == "learned":
            self.wpe = nn.Embedding(config.max_seq_len, config.d_model)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(ComplexFormerBlock(config, i) for i in range(config.n_layer))
        eps, pre = config.layer_norm_eps, config.norm == "pre"
        self.ln_f = (
            nn.LayerNorm(config.d_model, eps=eps, bias=config.bias) if pre else nn.Identity()
        )
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.wte

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.wte = value

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head = value

    def _embed(self, x: Tensor, position_ids, attention_mask, offset: int) -> Tensor:
        """Absolute positions added to the (B, T, C) token embeddings (learned, sinusoidal)."""
        t = x.shape[1]
        if position_ids is None and attention_mask is not None:  # left padding: count tokens
            position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -t:]
        if position_ids is None:
            position_ids = torch.arange(offset, offset + t, device=x.device).unsqueeze(0)
        if self.config.pos_scheme == "learned":
            return x + self.wpe(position_ids).to(x.dtype)
        # Vaswani et al. (sec. 3.4): token embeddings scaled by sqrt(d_model)
        d = x.shape[-1]
        return x * math.sqrt(d) + sinusoidal_embedding(position_ids, d).to(x.dtype)

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        cache=None,
        past_key_values=None,
        inputs_embeds: Tensor | None = None,
        labels: Tensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int = 0,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        """Next-token logits (B, T, V), with a transformers ``Cache`` for incremental decoding.

        Args:
            input_ids: (B, T) token ids (or ``inputs_embeds`` (B, T, C)).
            attention_mask: (B, T_past + T), 0 at padding; padded keys are masked and, for
                absolute positions, positions count real tokens only (left padding).
            position_ids: (B, T) positions of the absolute schemes (default: as above).
            cache: a ``Cache`` (e.g. ``DynamicCache``) of earlier positions, rotated keys.
            past_key_values: the older name of ``cache``.
            labels: (B, T) targets aligned with the inputs (shifted inside), -100 ignored.
            use_cache: return the cache (default ``config.use_cache``).
            logits_to_keep: compute the logits of the last this many positions only (0: all).
        """
        cfg = self.config
        cache = cache if cache is not None else past_key_values
        use_cache = cfg.use_cache if use_cache is None else use_cache
        x = self.wte(input_ids) if inputs_embeds is None else inputs_embeds  # (B, T, C)
        t = x.shape[1]
        if use_cache and cache is None:
            cache = DynamicCache()
        offset = cache.get_seq_length() if cache is not None else 0
        if cfg.pos_scheme == "learned" and offset + t > cfg.max_seq_len:
            raise ValueError(
                f"sequence length {offset + t} exceeds max_seq_len={cfg.max_seq_len}, the "
                "limit of pos_scheme 'learned'"
            )
        key_mask = None
        if attention_mask is not None and attention_mask.dim() == 2:
            if attention_mask.shape[-1] != offset + t:
                raise ValueError(
                    f"attention_mask covers {attention_mask.shape[-1]} positions, expected "
                    f"cached + new = {offset + t}"
                )
            if not bool(attention_mask.bool().all()):
                key_mask = attention_mask.bool()
        if cfg.pos_scheme in _ABSOLUTE:
            x = self._embed(
                x, position_ids, attention_mask if key_mask is not None else None, offset
            )
        x = self.drop(x)
        for block in self.blocks:
            x = block(x, cache, offset, key_mask)
        x = self.ln_f(x)
        if isinstance(logits_to_keep, int) and logits_to_keep > 0:
            x = x[:, -logits_to_keep:]
        logits = self.lm_head(x)  # (B, T, V)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                labels[:, 1:].reshape(-1).to(logits.device),
                ignore_index=-100,
            )
        out = {"loss": loss, "logits": logits, _CACHE_FIELD: cache if use_cache else None}
        return CausalLMOutputWithPast(**out)
