"""ComplexFormer: a GPT-style decoder whose attention is CMHA or one of its baselines.

Shao et al. 2025, "ComplexFormer: Disruptively Advancing Transformer Inference Ability via
Head-Specific Complex Vector Attention", §3: a decoder-only Transformer whose multi-head
attention is replaced by CMHA; every baseline of the paper is one ``pos_scheme`` away.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_model, save_model
from torch import Tensor, nn

from ..attention.cache import KVCache
from ..attention.module import CausalSelfAttention
from ..attention.registry import get_scheme
from ..attention.schemes import sinusoidal_embedding
from ..losses.chunked_ce import chunked_linear_cross_entropy
from ..losses.pcl import pcl_loss
from ..runtime import eval_mode
from ..storage import atomic_output, atomic_write_text, verify_manifest, write_manifest
from .config import HF_MODEL_TYPE, GPTConfig, gpt_config_from_hf
from .sampling import check_sampling_args, sample_next

__all__ = ["Block", "ComplexFormerLM", "LMOutput", "sinusoidal_embedding"]

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
#: B * T * V from which ``chunked_loss="auto"`` takes the chunked loss (512 MiB of float32).
CHUNKED_LOSS_ELEMENTS = 1 << 27


def use_chunked_loss(mode: str, logit_elements: int) -> bool:
    """Whether the loss is computed chunked (``GPTConfig.chunked_loss``): only while
    gradients are recorded, always for ``"always"``, from :data:`CHUNKED_LOSS_ELEMENTS`
    logits for ``"auto"``."""
    if not torch.is_grad_enabled() or mode == "never":
        return False
    return mode == "always" or logit_elements >= CHUNKED_LOSS_ELEMENTS


@dataclass
class LMOutput:
    """Output of :meth:`ComplexFormerLM.forward`.

    Attributes:
        logits: (B, T, V) next-token logits; None when the loss was computed chunked
            (``GPTConfig.chunked_loss``), which never materialises them.
        loss: ``lm_loss + pcl_epsilon * pcl_loss`` (what to back-propagate), or None
            without labels.
        lm_loss: mean next-token cross-entropy, or None without labels.
        pcl_loss: the phase contrastive loss L_con on the scale that is added: the InfoNCE of
            every layer's queries and keys, averaged (``pcl_reduce="mean"``) or summed
            (``"sum"``) over the 2 L terms (training with ``pcl=True`` only), else None.
        cache: the KV cache, when one was passed or requested.
    """

    logits: Tensor | None
    loss: Tensor | None = None
    lm_loss: Tensor | None = None
    pcl_loss: Tensor | None = None
    cache: KVCache | None = None


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
        self.proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor) -> Tensor:
        y = self.proj(F.gelu(self.fc(x)))
        return self.drop(y) if self.training and self.drop.p > 0 else y


class Block(nn.Module):
    """One decoder block: attention then feed-forward, each with a residual and LayerNorm."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.pre_norm = cfg.norm == "pre"
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps, bias=cfg.bias)
        self.attn = CausalSelfAttention(
            cfg.d_model,
            cfg.n_head,
            cfg.pos_scheme,
            dropout=cfg.dropout,
            omega_schedule=cfg.omega_schedule,
            rope_base=cfg.rope_base,
            bias=cfg.bias,
            delta_init_std=cfg.delta_init_std,
            delta_init=cfg.delta_init,
            pcl=cfg.pcl,
            pcl_target=cfg.pcl_target,
        )
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x: Tensor, cache=None, phase_loss=None):
        """(B, T, C) -> (B, T, C) and the layer's phase loss terms (``phase_loss`` given) or
        None."""
        # positional arguments: a keyword costs the module call ~2 µs, per layer and token
        if self.pre_norm:
            a, term = self.attn(self.ln1(x), cache, False, phase_loss)
            x = x + a
            x = x + self.mlp(self.ln2(x))
        else:
            a, term = self.attn(x, cache, False, phase_loss)
            x = self.ln1(x + a)
            x = self.ln2(x + self.mlp(x))
        return x, term


class ComplexFormerLM(nn.Module):
    """Decoder-only language model with pluggable positional scheme (CMHA by default).

    Args:
        config: a :class:`GPTConfig`.

    Example:
        >>> from complexformer.models import ComplexFormerLM, preset_config
        >>> model = ComplexFormerLM(preset_config("tiny", vocab_size=100))
        >>> out = model(torch.randint(0, 100, (2, 16)), labels=torch.randint(0, 100, (2, 16)))
        >>> out.logits.shape
        torch.Size([2, 16, 100])
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        cfg = config
        self.scheme = get_scheme(cfg.pos_scheme)
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = None  # a position table, for schemes that own one (``learned``)
        self.scheme.init_model(self, cfg)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = (
            nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps, bias=cfg.bias)
            if cfg.norm == "pre"
            else nn.Identity()
        )
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2: scaled init of residual projections
            if name.endswith("attn.proj.weight") or name.endswith("mlp.proj.weight"):
                nn.init.normal_(p, 0.0, cfg.init_std / math.sqrt(2 * cfg.n_layer))
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, self.config.init_std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, self.config.init_std)

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        input_ids: Tensor,
        labels: Tensor | None = None,
        cache: KVCache | None = None,
        use_cache: bool = False,
    ) -> LMOutput:
        """Next-token logits and losses.

        Args:
            input_ids: (B, T) token ids.
            labels: optional (B, T) targets aligned with ``input_ids`` (shifted inside, as in
                Hugging Face models: the labels move left by one and the last position is
                ignored, the logits are never sliced); positions with -100 are ignored.
                While gradients are recorded, ``config.chunked_loss`` may compute the loss
                chunked without materialising the logits (then ``logits`` is None).
            cache: a :class:`KVCache` holding earlier positions; ``input_ids`` continue it.
            use_cache: create a cache when none is given and return it.

        Returns:
            An :class:`LMOutput`.
        """
        cfg = self.config
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (B, T), got shape {tuple(input_ids.shape)}")
        b, t = input_ids.shape
        if cache is None and use_cache:
            cache = KVCache(cfg.n_layer)
        offset = cache.offset if cache is not None else 0
        limit = self.scheme.max_length(cfg)
        if limit is not None and offset + t > limit:
            raise ValueError(
                f"sequence length {offset + t} exceeds max_seq_len={limit}, the limit of "
                f"pos_scheme {cfg.pos_scheme!r}; use at most {limit} tokens"
            )
        h, pcl_total = self._trunk(input_ids, cache, offset)  # (B, T, C)
        if labels is None:
            return LMOutput(logits=self.lm_head(h), pcl_loss=pcl_total, cache=cache)
        # Next-token targets: the labels shifted left, the last position ignored. Shifting
        # the labels rather than the logits keeps the (B, T, V) logits unsliced (a slice's
        # backward fills a zero tensor of the logits' size and copies into it).
        targets = F.pad(labels[:, 1:], (0, 1), value=-100).reshape(-1)  # (B*T,)
        if use_chunked_loss(cfg.chunked_loss, b * t * cfg.vocab_size):
            logits = None  # never materialised
            lm_loss = chunked_linear_cross_entropy(
                h.reshape(b * t, -1), self.lm_head.weight, targets, ignore_index=-100
            )
        else:
            logits = self.lm_head(h)  # (B, T, V)
            flat = logits.view(b * t, -1)  # (B*T, V), no copy
            if flat.dtype not in (torch.float32, torch.float64):
                flat = flat.float()  # half-precision logits: the loss in float32
            lm_loss = F.cross_entropy(flat, targets, ignore_index=-100)
        loss = lm_loss
        if pcl_total is not None and cfg.pcl_epsilon:
            loss = lm_loss + cfg.pcl_epsilon * pcl_total
        return LMOutput(logits, loss, lm_loss, pcl_total, cache)

    def _trunk(
        self, input_ids: Tensor, cache: KVCache | None, offset: int
    ) -> tuple[Tensor, Tensor | None]:
        """Final hidden states (B, T, C) after ``ln_f`` and the phase loss of every layer (or
        None): everything of :meth:`forward` but the checks and the head, which
        :meth:`generate` makes once per call rather than once per token."""
        cfg = self.config
        x = self.wte(input_ids)  # (B, T, C)
        x = self.scheme.embed(self, x, offset)  # absolute positions, for schemes that add them
        if self.training and self.drop.p > 0:
            x = self.drop(x)
        # L_con of each layer's queries and keys, computed inside the layer (see
        # CausalSelfAttention.forward)
        phase_loss = self.phase_loss if cfg.pcl and self.training else None
        pcl_total = None
        layer_caches = cache.layers if cache is not None else [None] * len(self.blocks)
        if len(layer_caches) != len(self.blocks):
            raise ValueError(
                f"the cache has {len(layer_caches)} layers, the model {len(self.blocks)}"
            )
        for block, layer_cache in zip(self.blocks, layer_caches, strict=True):
            x, terms = block(x, layer_cache, phase_loss)
            if terms is not None:
                lq, lk = terms
                pcl_total = lq + lk if pcl_total is None else pcl_total + lq + lk
        if pcl_total is not None and cfg.pcl_reduce == "mean":
            pcl_total = pcl_total / (2 * len(self.blocks))  # over layers and q/k sides
        return self.ln_f(x), pcl_total

    def phase_loss(self, phases: tuple[Tensor, Tensor], weight: Tensor) -> tuple[Tensor, Tensor]:
        """L_con of one layer: the InfoNCE of its query phases and that of its key phases."""
        cfg = self.config
        lq = pcl_loss(phases[0], weight[0], cfg.pcl_tau, cfg.pcl_dropout, training=True)
        return lq, pcl_loss(phases[1], weight[1], cfg.pcl_tau, cfg.pcl_dropout, training=True)

    # --------------------------------------------------------------- generation
    @torch.no_grad()
    def generate(
        self,
        input_ids: Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        seed: int | None = None,
        eos_token_id: int | None = None,
        use_cache: bool = True,
    ) -> Tensor:
        """Sample a continuation (nucleus / top-k / temperature; greedy at temperature 0).

        Args:
            input_ids: (B, T) prompt ids (T >= 1).
            max_new_tokens: number of tokens to add.
            temperature: softmax temperature, >= 0; 0 picks the argmax.
            top_p: nucleus mass in (0, 1].
            top_k: keep the k most likely tokens (0: all).
            seed: seed of a private generator, for reproducible samples.
            eos_token_id: a row stops at this token; finished rows are padded with it and
                generation ends when every row has finished.
            use_cache: decode incrementally with a KV cache (rotated keys); without it every
                step recomputes the whole sequence (same result).

        Returns:
            (B, T + n) ids, n <= max_new_tokens.

        Each step runs the model's trunk and the head of the last position directly, not
        ``self(...)``: hooks registered on the model itself do not run (those on its blocks
        and layers do).
        """
        check_sampling_args(temperature, top_p, top_k)
        if max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
        if input_ids.dim() != 2 or input_ids.shape[1] == 0:
            raise ValueError(f"input_ids must be (B, T) with T >= 1, got {tuple(input_ids.shape)}")
        cfg = self.config
        total = input_ids.shape[1] + max_new_tokens
        limit = self.scheme.max_length(cfg)
        if limit is not None and total > limit:
            raise ValueError(
                f"prompt + max_new_tokens = {total} exceeds max_seq_len={limit}, the "
                f"limit of pos_scheme {cfg.pos_scheme!r}"
            )
        gen = None
        if seed is not None:
            gen = torch.Generator(device=input_ids.device).manual_seed(seed)
        b, t0 = input_ids.shape
        ids = input_ids.new_empty(b, total)  # (B, T + max_new_tokens), filled as it goes
        ids[:, :t0] = input_ids
        end = t0
        finished = torch.zeros(b, dtype=torch.bool, device=ids.device)
        cache = KVCache(cfg.n_layer, capacity=total) if use_cache else None  # never regrown
        with eval_mode(self):
            for _ in range(max_new_tokens):
                step_input = ids[:, end - 1 : end] if use_cache and end > t0 else ids[:, :end]
                # the trunk without forward's per-call checks (made above), the head on the
                # last position only
                offset = cache.offset if cache is not None else 0
                h, _ = self._trunk(step_input, cache, offset)  # (B, T, C)
                nxt = sample_next(self.lm_head(h[:, -1]), temperature, top_k, top_p, gen)
                if eos_token_id is not None:
                    nxt = torch.where(finished, torch.full_like(nxt, eos_token_id), nxt)
                    finished |= nxt == eos_token_id
                ids[:, end] = nxt
                end += 1
                if eos_token_id is not None and bool(finished.all()):
                    break
        return ids if end == total else ids[:, :end].clone()

    # ------------------------------------------------------------ persistence
    def save_pretrained(self, directory: str | os.PathLike) -> Path:
        """Write ``config.json``, ``model.safetensors`` and ``manifest.json`` (their sha256).

        Each file is written atomically (temporary file, rename); :meth:`from_pretrained`
        refuses a directory whose files do not match the manifest.
        """
        d = Path(directory)
        with atomic_output(d / WEIGHTS_NAME) as tmp:
            save_model(self, tmp, metadata={"format": "pt"})
        atomic_write_text(d / CONFIG_NAME, self.config.to_json() + "\n")
        write_manifest(d, (CONFIG_NAME, WEIGHTS_NAME), kind="model")
        return d

    @classmethod
    def from_pretrained(
        cls, directory: str | os.PathLike, map_location: str = "cpu", *, verify: bool = True
    ) -> ComplexFormerLM:
        """Load a model written by :meth:`save_pretrained` or exported for transformers.

        An exported directory (``complexformer export``, ``model_type="complexformer"`` in its
        ``config.json``) holds the same weights under the same names; its config is read with
        :func:`~complexformer.models.config.gpt_config_from_hf`.

        Every directory this class reads was written by the package (its ``config.json``
        holds a ComplexFormer configuration), so it must carry a ``manifest.json`` that lists
        ``config.json`` and ``model.safetensors`` with their sha256.

        Args:
            directory: the model directory.
            map_location: where to load the weights.
            verify: check the files against the manifest (False: load them unchecked, e.g.
                a directory saved before manifests were written).

        Raises:
            FileNotFoundError: the directory or one of its files is missing.
            ValueError: (``verify``) no ``manifest.json``, or a file that does not match it
                (truncated or changed) or is not listed in it; or the config or weights
                cannot be read. The file is named.
        """
        d = Path(directory)
        for name in (CONFIG_NAME, WEIGHTS_NAME):
            if not (d / name).is_file():
                raise FileNotFoundError(f"{d / name} not found: {d} is not a saved model directory")
        if verify:
            try:
                verify_manifest(d, covers=(CONFIG_NAME, WEIGHTS_NAME))
            except ValueError as e:
                raise ValueError(f"cannot load weights from {d}: {e}") from None
        try:
            data = json.loads((d / CONFIG_NAME).read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{d / CONFIG_NAME} is not valid JSON: {e}") from None
        hf = isinstance(data, dict) and data.get("model_type") == HF_MODEL_TYPE
        config = gpt_config_from_hf(data) if hf else GPTConfig.from_dict(data)
        model = cls(config)
        try:
            load_model(model, str(d / WEIGHTS_NAME), strict=True, device=map_location)
        except Exception as e:  # safetensors raises several types for damaged files
            raise ValueError(f"cannot load weights from {d / WEIGHTS_NAME}: {e}") from None
        return model
