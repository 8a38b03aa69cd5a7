"""Configuration of complex LoRA adapters (CmplxBERT-LoRA, Tamburini 2024).

F. Tamburini, "Complexifying BERT using LoRA adapters", CLiC-it 2024: every targeted real
weight W of a pre-trained model is frozen and a complex low-rank update A·Bᴴ plus a complex
bias is added, y = (W + A·Bᴴ)·x + (b + b_c) (sec. 3.1, eq. for the LoRA-adapted linear
layer), so that the model maps complex inputs to complex outputs. The dataclass below holds
every choice of that construction; it is saved as ``adapter_config.json`` next to the
adapters (:func:`complexformer.cmplxbert.save_adapters`).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from complexformer._atomic import atomic_write_text

__all__ = [
    "ATTENTION_SCORES",
    "DEFAULT_TARGET_MODULES",
    "HEAD_OUTPUTS",
    "INITS",
    "TRAIN_HEADS",
    "WHITEN_CHOICES",
    "ComplexLoRAConfig",
]

ATTENTION_SCORES = ("modulus", "real")
HEAD_OUTPUTS = ("modulus", "real")
INITS = ("zero_b", "zero_a")
TRAIN_HEADS = ("adapters", "full", "none")
WHITEN_CHOICES = ("scalar", "full")

#: Name suffixes of the BERT layers that get adapters by default: the three embeddings, the
#: attention projections, the attention output, the two feed-forward linears, the pooler and
#: the heads (MLM transform + decoder, sequence classifier), as in Tamburini 2024, sec. 3.
DEFAULT_TARGET_MODULES = (
    "word_embeddings",
    "position_embeddings",
    "token_type_embeddings",
    "query",
    "key",
    "value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
    "pooler.dense",
    "transform.dense",
    "decoder",
    "classifier",
)


def _choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"ComplexLoRAConfig: unknown {name} {value!r}; allowed: {allowed}")
    return value


@dataclass
class ComplexLoRAConfig:
    """How a real model is complexified with complex LoRA adapters (Tamburini 2024).

    Each targeted frozen real layer becomes y = (W + s·A·Bᴴ)·x + (b + b_c) with s = alpha/r,
    A (out × r) and B (in × r) complex, b_c complex (eq. of sec. 3.1); embeddings become
    E + s·A·Bᴴ (sec. 3.2).

    Args:
        r: LoRA rank (> 0). The paper's models are CmplxBERTLoRA_r, r in {8, 16, 32, 64, 128}.
        alpha: scale numerator, s = alpha / r. ``None`` (default) means alpha = r, i.e. s = 1,
            the paper's unscaled update W + A·Bᴴ.
        dropout: dropout on the input of the adapter path only (peft's ``lora_dropout``;
            one mask shared by Re and Im). 0 disables it.
        target_modules: which layers get adapters: a list of module-name suffixes (a name
            matches a suffix s when it equals s or ends with "." + s), or a regular expression
            string that must match the whole name (:func:`re.fullmatch`). Names are those of
            the complexified model (always with the ``bert.`` prefix, e.g.
            ``bert.encoder.layer.0.attention.self.query``, ``cls.predictions.decoder``,
            ``classifier``). Untargeted linears still act on complex inputs (the frozen real
            map applied to Re and Im) but have no adapter and no complex bias.
        init: ``"zero_b"`` (default): B = 0 and A ~ CN(0, 1/r) (E|a|² = 1/r), so A·Bᴴ = 0
            and the wrapped model equals its base at step 0 while B gets a non-zero gradient
            at once (peft's choice of zeroing the factor next to the output, transposed:
            here B sits on the input side). ``"zero_a"``: A = 0 and B ~ CN(0, 1/in).
        embedding_init: the same choice for the embedding adapters E + s·A·Bᴴ, where A
            (num × r) is indexed by token and B (dim × r) by feature. ``"zero_a"`` (default,
            peft's choice for embeddings): A = 0, B ~ CN(0, 1/dim), so an update changes only
            the rows of the tokens in the batch. With ``"zero_b"`` every update of B moves
            every token's embedding by its random A row, seen or not: measured on the
            docstring task (MiniLM, lr 1e-3, 80 updates) this kept fine-tuning at the
            majority class (test accuracy 0.14) while ``"zero_a"`` reached 0.5.
        complex_bias: add the complex bias b_c (init 0) to every adapted linear.
        attention_score: ``"modulus"``: softmax(|Q·Kᴴ|/√d)·V (the paper, after Eilers &
            Jiang 2023); ``"real"``: softmax(Re(Q·Kᴴ)/√d)·V, which reproduces the real model
            exactly at step 0.
        head_output: how a head's complex output becomes real logits: ``"modulus"`` (the
            paper) or ``"real"`` (Re; exact reproduction of the real model at step 0).
        whiten: complex LayerNorm whitening, ``"scalar"`` (default) or ``"full"`` (Trabelsi's
            2×2 covariance whitening, as the paper). Both equal the original LayerNorm on a
            real input; see docs/cmplxbert.md for why ``"scalar"`` is the default.
        layer_norm_eps: eps of the complex LayerNorms; ``None`` keeps the model's own
            (``layer_norm_eps``, 1e-12 for BERT).
        train_norms: train the complex LayerNorm affines (2×2 weight and complex bias).
        train_heads: ``"adapters"`` (default): the heads' (pooler, MLM transform/decoder,
            classifier) adapters and complex biases train, their real weights stay frozen;
            ``"full"``: their real weights and biases train too (except the MLM decoder
            weight, which is tied to the frozen word embeddings); ``"none"``: heads frozen.
        add_mlm_head: give a model without an MLM head (e.g. a plain ``BertModel``) a fresh
            one, initialised as transformers' ``BertOnlyMLMHead`` with the decoder tied to
            the word embeddings; its real weights are new, so they train and are saved with
            the adapters.
    """

    r: int = 8
    alpha: float | None = None
    dropout: float = 0.0
    target_modules: list[str] | str = field(default_factory=lambda: list(DEFAULT_TARGET_MODULES))
    init: str = "zero_b"
    embedding_init: str = "zero_a"
    complex_bias: bool = True
    attention_score: str = "modulus"
    head_output: str = "modulus"
    whiten: str = "scalar"
    layer_norm_eps: float | None = None
    train_norms: bool = True
    train_heads: str = "adapters"
    add_mlm_head: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.r, bool) or not isinstance(self.r, int) or self.r <= 0:
            raise ValueError(f"ComplexLoRAConfig: r must be a positive integer, got {self.r!r}")
        if self.alpha is not None:
            if (
                isinstance(self.alpha, bool)
                or not isinstance(self.alpha, (int, float))
                or not self.alpha > 0
            ):
                raise ValueError(
                    f"ComplexLoRAConfig: alpha must be a positive number or None, got "
                    f"{self.alpha!r}"
                )
            self.alpha = float(self.alpha)
        if (
            isinstance(self.dropout, bool)
            or not isinstance(self.dropout, (int, float))
            or not 0.0 <= self.dropout < 1.0
        ):
            raise ValueError(f"ComplexLoRAConfig: dropout must be in [0, 1), got {self.dropout!r}")
        self.dropout = float(self.dropout)
        tm = self.target_modules
        if isinstance(tm, str):
            try:
                re.compile(tm)
            except re.error as e:
                raise ValueError(
                    f"ComplexLoRAConfig: target_modules {tm!r} is not a valid "
                    f"regular expression: {e}"
                ) from e
        else:
            if isinstance(tm, tuple):
                tm = list(tm)
            if not isinstance(tm, list) or not tm or not all(isinstance(s, str) and s for s in tm):
                raise ValueError(
                    "ComplexLoRAConfig: target_modules must be a non-empty list of name "
                    f"suffixes or a regex string, got {self.target_modules!r}"
                )
            self.target_modules = tm
        _choice(self.init, "init", INITS)
        _choice(self.embedding_init, "embedding_init", INITS)
        _choice(self.attention_score, "attention_score", ATTENTION_SCORES)
        _choice(self.head_output, "head_output", HEAD_OUTPUTS)
        _choice(self.whiten, "whiten", WHITEN_CHOICES)
        _choice(self.train_heads, "train_heads", TRAIN_HEADS)
        if self.layer_norm_eps is not None and not (
            isinstance(self.layer_norm_eps, (int, float)) and self.layer_norm_eps > 0
        ):
            raise ValueError(
                f"ComplexLoRAConfig: layer_norm_eps must be > 0 or None, got "
                f"{self.layer_norm_eps!r}"
            )
        for name in ("complex_bias", "train_norms", "add_mlm_head"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(
                    f"ComplexLoRAConfig: {name} must be a bool, got {getattr(self, name)!r}"
                )

    # ------------------------------------------------------------------ derived

    @property
    def scaling(self) -> float:
        """s = alpha / r (1 when alpha is None)."""
        return 1.0 if self.alpha is None else self.alpha / self.r

    def is_target(self, name: str) -> bool:
        """Whether the module called ``name`` gets an adapter."""
        return target_matches(self.target_modules, name)

    # ------------------------------------------------------------------ (de)serialisation

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ComplexLoRAConfig:
        """Build a config from a dict; unknown keys raise a ValueError naming the closest."""
        if not isinstance(data, dict):
            raise ValueError(f"ComplexLoRAConfig: expected a dict, got {type(data).__name__}")
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = [k for k in data if k not in names]
        if unknown:
            hints = []
            for k in unknown:
                close = difflib.get_close_matches(str(k), names, n=2, cutoff=0.5)
                hints.append(
                    f"{k!r}"
                    + (f" (did you mean {' or '.join(map(repr, close))}?)" if close else "")
                )
            raise ValueError(
                f"ComplexLoRAConfig: unknown key(s) {', '.join(hints)}; allowed: {', '.join(names)}"
            )
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> ComplexLoRAConfig:
        return cls.from_dict(json.loads(text))

    def save(self, path: str | os.PathLike) -> None:
        """Write the JSON atomically (temporary file + rename)."""
        atomic_write_text(path, self.to_json() + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> ComplexLoRAConfig:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return cls.from_dict(data["lora"] if "lora" in data else data)


def target_matches(target_modules: list[str] | tuple[str, ...] | str, name: str) -> bool:
    """Suffix list: ``name == s`` or ``name.endswith("." + s)``; string: regex fullmatch."""
    if isinstance(target_modules, str):
        return re.fullmatch(target_modules, name) is not None
    return any(name == s or name.endswith("." + s) for s in target_modules)
