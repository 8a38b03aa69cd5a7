"""Configuration of CmplxBERT-LoRA (Tamburini 2024): the adapters and the complex model.

F. Tamburini, "Complexifying BERT using LoRA adapters", CLiC-it 2024: every targeted real
weight W of a pre-trained model is frozen and a complex low-rank update A·Bᴴ plus a complex
bias is added, y = (W + A·Bᴴ)·x + (b + b_c) (sec. 3.1, eq. for the LoRA-adapted linear
layer), so that the model maps complex inputs to complex outputs. Two dataclasses hold the
choices: :class:`ComplexLoRAConfig`, the adapters (rank, scale, dropout, init, which layers),
and :class:`CmplxBertConfig`, the complex model around them (attention score, head output,
LayerNorm whitening, which parts train). Both are saved in ``adapter_config.json`` next to the
adapters (:func:`complexformer.cmplxbert.save_adapters`); :func:`split_config_dict` reads the
older files that kept every field in one ``"lora"`` object.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from complexformer.config import ConfigBase, named_configs, unknown_key_error

__all__ = [
    "ACTIVATIONS",
    "ATTENTION_SCORES",
    "DEFAULT_TARGET_MODULES",
    "CmplxBertConfig",
    "HEADS",
    "HEAD_OUTPUTS",
    "INITS",
    "RECIPES",
    "RECIPE_FILE",
    "TRAINING",
    "recipe_configs",
    "STARTS",
    "TRAIN_HEADS",
    "WHITEN_CHOICES",
    "ComplexLoRAConfig",
    "split_config_dict",
    "split_overrides",
    "target_matches",
]

ATTENTION_SCORES = ("modulus", "real")
HEAD_OUTPUTS = ("modulus", "real")
HEADS = ("bert", "linear")
INITS = ("zero_b", "zero_a")
STARTS = ("keep", "paper")
ACTIVATIONS = ("split", "gated")
TRAIN_HEADS = ("adapters", "full", "none")
WHITEN_CHOICES = ("scalar", "full")

#: The named recipes (``complexformer/configs/cmplxbert_recipes.toml``): ``library``, the
#: defaults, or ``paper``, every choice Tamburini 2024 states. Each has the fields of
#: ComplexLoRAConfig (``lora``), CmplxBertConfig (``model``), the MLM pre-training's
#: TrainConfig (``mlm``) and FinetuneConfig (``finetune``).
RECIPE_FILE = named_configs("cmplxbert_recipes.toml", "recipe")
RECIPES = tuple(RECIPE_FILE)

#: Training settings of each recipe and stage (the file's ``mlm`` and ``finetune`` tables).
TRAINING: dict[str, dict[str, dict[str, Any]]] = {
    name: {stage: RECIPE_FILE[name][stage] for stage in ("mlm", "finetune")} for name in RECIPES
}


def recipe_configs(recipe: str = "library") -> dict[str, Any]:
    """The adapter and model configs and the training settings of ``recipe``.

    Returns:
        ``{"lora": ComplexLoRAConfig, "model": CmplxBertConfig, "mlm": {...}, "finetune":
        {...}}`` (the last two: TrainConfig / FinetuneConfig fields).

    Raises:
        ValueError: an unknown recipe (the allowed ones are named).
    """
    entry = RECIPE_FILE[recipe]
    return {
        "lora": ComplexLoRAConfig(**entry["lora"]),
        "model": CmplxBertConfig(**entry["model"]),
        "mlm": entry["mlm"],
        "finetune": entry["finetune"],
    }


#: Name suffixes of the BERT layers that get adapters by default: the three embeddings, the
#: attention projections, the attention output, the two feed-forward linears, the pooler and
#: the heads (MLM transform + decoder, next-sentence head, sequence or token classifier), as
#: in Tamburini 2024, sec. 3.
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
    "seq_relationship",
    "classifier",
)


def _choice(value: Any, name: str, choices: tuple[str, ...], where: str) -> str:
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{where}: unknown {name} {value!r}; allowed: {allowed}")
    return value


@dataclass
class ComplexLoRAConfig(ConfigBase):
    """The complex LoRA adapters of a complexified model (Tamburini 2024).

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
        init: ``"zero_a"`` (default): A = 0 and B ~ CN(0, 1/in), so A·Bᴴ = 0 and the
            wrapped model equals its base at step 0 while A gets a non-zero gradient at once
            (peft's choice: the factor next to the output starts at zero). ``"zero_b"``:
            B = 0 and A ~ CN(0, 1/r), the input-side factor at zero: its first Adam steps
            move every B entry by about lr in the direction of the inputs, so A·Bᴴ·x grows
            with the sum of |x| over the input features; measured on MiniLM it doubled the
            imaginary parts' early growth (docs/cmplxbert.md, "Adapter growth").
        embedding_init: the same choice for the embedding adapters E + s·A·Bᴴ, where A
            (num × r) is indexed by token and B (dim × r) by feature. ``"zero_a"`` (default,
            peft's choice for embeddings): A = 0, B ~ CN(0, 1/dim), so an update changes only
            the rows of the tokens in the batch. With ``"zero_b"`` every update of B moves
            every token's embedding by its random A row, seen or not: measured on the
            docstring task (MiniLM, lr 1e-3, 80 updates) this kept fine-tuning at the
            majority class (test accuracy 0.14) while ``"zero_a"`` reached 0.5.
        complex_bias: add the complex bias b_c (init 0) to every adapted linear.
    """

    r: int = 8
    alpha: float | None = None
    dropout: float = 0.0
    target_modules: list[str] | str = field(default_factory=lambda: list(DEFAULT_TARGET_MODULES))
    init: str = "zero_a"
    embedding_init: str = "zero_a"
    complex_bias: bool = True

    _what = "ComplexLoRAConfig field"

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
        _choice(self.init, "init", INITS, "ComplexLoRAConfig")
        _choice(self.embedding_init, "embedding_init", INITS, "ComplexLoRAConfig")
        if not isinstance(self.complex_bias, bool):
            raise ValueError(
                f"ComplexLoRAConfig: complex_bias must be a bool, got {self.complex_bias!r}"
            )

    @classmethod
    def paper(cls, r: int = 8, **changes: Any) -> ComplexLoRAConfig:
        """The adapters of Tamburini 2024 (sec. 3): rank ``r`` (the paper: 8 to 64), every
        embedding, attention, feed-forward and head layer adapted, a complex bias on each
        adapted linear, scale 1. The paper states no adapter dropout or initialisation: no
        dropout, and the input-side factor at zero (``init="zero_b"``, the library's choice
        when the paper-preset studies of docs/cmplxbert.md were run). The values are the
        ``paper`` recipe's (``complexformer/configs/cmplxbert_recipes.toml``)."""
        return cls(**{**RECIPE_FILE["paper"]["lora"], "r": r}).replace(**changes)

    # ------------------------------------------------------------------ derived

    @property
    def scaling(self) -> float:
        """s = alpha / r (1 when alpha is None)."""
        return 1.0 if self.alpha is None else self.alpha / self.r

    def is_target(self, name: str) -> bool:
        """Whether the module called ``name`` gets an adapter."""
        return target_matches(self.target_modules, name)


@dataclass
class CmplxBertConfig(ConfigBase):
    """The complex model built around the adapters by
    :func:`~complexformer.cmplxbert.complexify` (Tamburini 2024, sec. 3.3-3.6).

    Args:
        attention_score: ``"modulus"``: softmax(|Q·Kᴴ|/√d)·V (the paper, after Eilers &
            Jiang 2023); ``"real"``: softmax(Re(Q·Kᴴ)/√d)·V, which reproduces the real model
            exactly at step 0.
        head_output: how a head's complex output becomes real logits: ``"modulus"`` (the
            paper) or ``"real"`` (Re; exact reproduction of the real model at step 0).
        whiten: complex LayerNorm whitening, ``"scalar"`` (default) or ``"full"`` (Trabelsi's
            2×2 covariance whitening, as the paper). Both equal the original LayerNorm on a
            real input; see docs/cmplxbert.md for why ``"scalar"`` is the default.
            ``"full"`` with modulus scores needs ``start="paper"``: at the keep start's real
            hidden states its gradient in the imaginary part is 1/√eps per LayerNorm, and
            the first step's gradients overflow.
        layer_norm_eps: eps of the complex LayerNorms; ``None`` keeps the model's own
            (``layer_norm_eps``, 1e-12 for BERT).
        train_norms: train the complex LayerNorm affines (2×2 weight and complex bias).
        train_heads: ``"adapters"`` (default): the heads' (pooler, MLM transform/decoder,
            classifier) adapters and complex biases train, their real weights stay frozen;
            ``"full"``: their real weights and biases train too (except the MLM decoder
            weight, which is tied to the frozen word embeddings); ``"none"``: heads frozen.
        heads: ``"bert"`` (default): the heads keep BERT's blocks, the MLM head's dense →
            GELU → LayerNorm transform before the decoder and the pooler (dense, split tanh)
            before the classifier; ``"linear"`` (the paper, sec. 3.6: "all these training
            heads are configured in the same way as a single LoRA-adapted linear layer"):
            the MLM head is the adapted decoder alone on each hidden state and the sequence
            and next-sentence heads the adapted linear alone on the first token's hidden
            state (no pooler).
        add_mlm_head: give a model without an MLM head (e.g. a plain ``BertModel``) a fresh
            one, initialised as transformers' ``BertOnlyMLMHead`` with the decoder tied to
            the word embeddings; its real weights are new, so they train and are saved with
            the adapters.
        start: the initial values of the complex biases. ``"keep"`` (default): with modulus
            scores, imaginary parts a·u on the query and key biases of each head, so that
            |Q·Kᴴ| = q·k + a² + (a small error) keeps the pre-trained attention, and with
            modulus heads a real offset c in the head's bias so that |z + c| = z + c keeps
            the real logits (:mod:`complexformer.cmplxbert.start`; docs/cmplxbert.md
            derives both). ``"paper"``: every complex bias zero (Tamburini 2024), which
            with modulus scores does not reproduce the real model at step 0. Nothing changes
            for real-part scores and heads.
        start_offset: C of the ``"keep"`` start, a² = C·√d: the shift of every attention
            logit (the softmax ignores it; it must exceed most negative scaled scores).
        activation: the feed-forward and MLM-transform GELU: ``"gated"`` (default, z·Φ(Re z):
            the imaginary part goes through the gate the real part opens; measured to keep the
            imaginary parts from growing, docs/cmplxbert.md) or ``"split"`` (the paper's sec.
            3.5: GELU(Re z) + j GELU(Im z)). ReLU models keep the split ReLU.
    """

    attention_score: str = "modulus"
    head_output: str = "modulus"
    whiten: str = "scalar"
    layer_norm_eps: float | None = None
    train_norms: bool = True
    train_heads: str = "adapters"
    add_mlm_head: bool = False
    heads: str = "bert"
    start: str = "keep"
    start_offset: float = 8.0
    activation: str = "gated"

    _what = "CmplxBertConfig field"

    @classmethod
    def paper(cls, **changes: Any) -> CmplxBertConfig:
        """Every choice of the complex model that Tamburini 2024 states: modulus attention
        scores (sec. 3.3), the full C^(-1/2) whitening of the complex LayerNorm (sec. 3.4),
        heads that are one LoRA-adapted linear followed by the modulus (sec. 3.6), the split
        GELU (sec. 3.5), and every complex bias zero at the start (``start="paper"``). The
        library's defaults differ where they measured better (docs/cmplxbert.md). The values
        are the ``paper`` recipe's (``complexformer/configs/cmplxbert_recipes.toml``)."""
        return cls(**RECIPE_FILE["paper"]["model"]).replace(**changes)

    def __post_init__(self) -> None:
        w = "CmplxBertConfig"
        _choice(self.attention_score, "attention_score", ATTENTION_SCORES, w)
        _choice(self.head_output, "head_output", HEAD_OUTPUTS, w)
        _choice(self.whiten, "whiten", WHITEN_CHOICES, w)
        _choice(self.train_heads, "train_heads", TRAIN_HEADS, w)
        _choice(self.heads, "heads", HEADS, w)
        _choice(self.start, "start", STARTS, w)
        _choice(self.activation, "activation", ACTIVATIONS, w)
        if self.whiten == "full" and self.start == "keep" and self.attention_score == "modulus":
            raise ValueError(
                f"{w}: whiten='full' with start='keep' and attention_score='modulus' cannot "
                "train: the keep start's hidden states are real, where the full whitening "
                "multiplies the gradient of the imaginary part by 1/sqrt(eps) per LayerNorm "
                "(1e6 at BERT's eps), so the first step's gradients overflow (docs/cmplxbert.md, "
                "'LayerNorm whitening'); use whiten='scalar' or start='paper'"
            )
        c = self.start_offset
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0:
            raise ValueError(f"{w}: start_offset must be a number > 0, got {c!r}")
        self.start_offset = float(c)
        eps = self.layer_norm_eps
        if eps is not None and (
            isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0
        ):
            raise ValueError(f"{w}: layer_norm_eps must be > 0 or None, got {eps!r}")
        for name in ("train_norms", "add_mlm_head"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{w}: {name} must be a bool, got {getattr(self, name)!r}")


def split_overrides(
    overrides: dict[str, Any], where: str = "complexify"
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Field overrides -> (those of :class:`ComplexLoRAConfig`, those of
    :class:`CmplxBertConfig`).

    Raises:
        ValueError: a key of neither, naming the closest field names.
    """
    lora_names, model_names = ComplexLoRAConfig.field_names(), CmplxBertConfig.field_names()
    unknown = [k for k in overrides if k not in lora_names and k not in model_names]
    if unknown:
        e = unknown_key_error(unknown, lora_names + model_names, "config field")
        raise ValueError(f"{where}: {e}")
    lora = {k: v for k, v in overrides.items() if k in lora_names}
    model = {k: v for k, v in overrides.items() if k in model_names}
    return lora, model


def split_config_dict(meta: dict[str, Any]) -> tuple[ComplexLoRAConfig, CmplxBertConfig]:
    """The two configs recorded in a saved file (``adapter_config.json``, ``cmplxbert.json``).

    Current files hold the adapter fields under ``"lora"`` and the model fields under
    ``"cmplxbert"``; older files kept every field under ``"lora"``, which is split here.
    """
    lora = dict(meta.get("lora", {}))
    model = dict(meta.get("cmplxbert", {}))
    moved = {k: lora.pop(k) for k in list(lora) if k in CmplxBertConfig.field_names()}
    lora_kw, _ = split_overrides(lora, "saved config")
    model_kw = {**moved, **model}
    model_kw.setdefault("start", "paper")  # files from before the choice had zero biases
    CmplxBertConfig.check_keys(model_kw)
    return ComplexLoRAConfig.from_dict(lora_kw), CmplxBertConfig.from_dict(model_kw)


def target_matches(target_modules: list[str] | tuple[str, ...] | str, name: str) -> bool:
    """Suffix list: ``name == s`` or ``name.endswith("." + s)``; string: regex fullmatch."""
    if isinstance(target_modules, str):
        return re.fullmatch(target_modules, name) is not None
    return any(name == s or name.endswith("." + s) for s in target_modules)
