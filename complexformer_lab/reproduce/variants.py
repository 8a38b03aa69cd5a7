"""The paper's tables as lists of variants, the variants as model configs, and the scales.

Shao et al., "ComplexFormer: Disruptively Advancing Transformer Inference Ability via
Head-Specific Complex Vector Attention" (2025):

* **Table 1** compares positional schemes on WikiText-103 language modelling and text
  generation: Vanilla Transformer (learned absolute positions), sinusoidal positions,
  GPT-2 (Base), RoPE, EulerFormer-MHA with shared adaptation, and ComplexFormer (CMHA with
  the phase contrastive loss, PCL).
* **Table 4** is the ablation of ComplexFormer: the full model, shared instead of
  head-specific adaptation, fixed δ = 1, b = 0, no PCL, and RoPE.
* The **extrapolation** table (not a table of the paper; its claim of better long-context
  coherence) scores the Table-1 position variants at 1, 2, 4 and 8 times the training length.

A :class:`Variant` only changes the positional scheme, PCL and (for the GPT-2 row) the
model's shape; everything else -- data, tokenizer, token budget, optimizer, schedule, seeds --
comes from the :class:`Scale` and is the same for every variant. Variants shared by tables
(``cmha``, ``cmha_shared``, ``rope`` in Tables 1 and 4; every Table-1 position variant in the
extrapolation table) are one run each: ``OUT/runs/<variant>/seed<k>``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from complexformer.attention.registry import get_scheme
from complexformer.evaluation.extrapolation import ExtrapolationConfig
from complexformer.evaluation.text import TextSuiteConfig
from complexformer.models.config import GPTConfig, unknown_key_error
from complexformer.training.config import TrainConfig

from ..configs import lab_configs
from .finetune import FineTuneSpec

__all__ = [
    "SCALES",
    "TABLES",
    "TABLE_TITLES",
    "VARIANTS",
    "Scale",
    "Variant",
    "describe_scales",
    "get_scale",
    "run_dir",
    "table_variants",
]


@dataclass(frozen=True)
class Variant:
    """One row of a table: a positional scheme, PCL on or off, and the model shape.

    Attributes:
        name: the variant's key and run-directory name (``OUT/runs/<name>/seed<k>``).
        label: the row name of the paper's table.
        pos_scheme: :attr:`GPTConfig.pos_scheme`.
        pcl: :attr:`GPTConfig.pcl` (the phase contrastive loss, ComplexFormer §3.2).
        delta_init: :attr:`GPTConfig.delta_init` (``"paper"``: δ ~ N(0, σ²); ``"rope"``:
            δ = 1 + N(0, σ²)).
        shape: ``"base"`` (the scale's model) or ``"gpt2"`` (the scale's GPT-2-shaped model,
            :attr:`Scale.gpt2_model`).
        description: what the row is, in words.
    """

    name: str
    label: str
    pos_scheme: str
    pcl: bool = False
    shape: str = "base"
    description: str = ""
    delta_init: str = "paper"
    pcl_target: str = "theta"

    def __post_init__(self) -> None:
        get_scheme(self.pos_scheme)  # an unknown name raises, listing the registered ones

    def overrides(self) -> dict[str, Any]:
        """The :class:`GPTConfig` fields this variant sets on top of the scale's shape."""
        return {
            "pos_scheme": self.pos_scheme,
            "pcl": self.pcl,
            "delta_init": self.delta_init,
            "pcl_target": self.pcl_target,
        }


#: Every variant of every table, in the order the tables list them.
VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant(
            "learned",
            "Vanilla Tr.",
            "learned",
            description="learned absolute position embeddings (Table 1, 'Vanilla Tr.')",
        ),
        Variant(
            "sinusoidal",
            "Sinusoidal",
            "sinusoidal",
            description="fixed sinusoidal absolute positions (Table 1)",
        ),
        Variant(
            "gpt2",
            "GPT-2 (Base)",
            "learned",
            shape="gpt2",
            description="GPT-2-shaped: learned positions, d_ff = 4 d_model, tied "
            "embeddings; at the paper scale GPT-2 small itself (Table 1)",
        ),
        Variant("rope", "RoPE", "rope", description="rotary position embeddings (Tables 1 and 4)"),
        Variant(
            "cmha_shared",
            "EulerFormer-MHA (Shared)",
            "cmha_shared",
            pcl=True,
            description="one delta, b per layer shared by the heads, with PCL "
            "(Table 1 'EulerFormer-MHA (Shared)'; Table 4 'w/o head-specific "
            "adaptation')",
        ),
        Variant(
            "cmha",
            "ComplexFormer",
            "cmha",
            pcl=True,
            description="CMHA with per-head delta, b and PCL (Table 1; Table 4 'full')",
        ),
        Variant(
            "cmha_fixed",
            "w/o adaptation (δ=1, b=0)",
            "cmha_fixed",
            pcl=True,
            description="delta = 1, b = 0 frozen (RoPE's rotation) with PCL "
            "(Table 4 'w/o adaptation')",
        ),
        Variant(
            "cmha_nopcl",
            "w/o PCL",
            "cmha",
            pcl=False,
            description="CMHA with per-head delta, b, without PCL (Table 4 'w/o PCL')",
        ),
        Variant(
            "cmha_pclrot",
            "PCL on the rotated phase",
            "cmha",
            pcl=True,
            pcl_target="rotated",
            description="the full model with PCL on the rotated phases δθ + b + pω instead of "
            "the semantic phases θ (the library's earlier default; Table 4, not a row of the "
            "paper)",
        ),
        Variant(
            "cmha_ropeinit",
            "δ initialised at 1 (RoPE)",
            "cmha",
            pcl=True,
            delta_init="rope",
            description="the full model with delta = 1 + N(0, 0.02^2) instead of N(0, 0.02^2): "
            "every head starts as RoPE (Table 4, not a row of the paper)",
        ),
    )
}

#: The variants of each table (``--table``), in row order.
TABLES: dict[str, tuple[str, ...]] = {
    "1": ("learned", "sinusoidal", "gpt2", "rope", "cmha_shared", "cmha"),
    "2": ("learned", "sinusoidal", "gpt2", "rope", "cmha_shared", "cmha"),
    "3": ("learned", "sinusoidal", "gpt2", "rope", "cmha_shared", "cmha"),
    "4": (
        "cmha",
        "cmha_pclrot",
        "cmha_shared",
        "cmha_fixed",
        "cmha_nopcl",
        "cmha_ropeinit",
        "rope",
    ),
    "extrapolation": ("learned", "sinusoidal", "gpt2", "rope", "cmha_shared", "cmha"),
}

#: The fine-tuning tasks each table needs (``code``: Table 2, ``math``: Table 3; Table 4 has
#: a Pass@1 and an accuracy column).
TABLE_TASKS: dict[str, tuple[str, ...]] = {"2": ("code",), "3": ("math",), "4": ("code", "math")}

TABLE_TITLES: dict[str, str] = {
    "1": "Table 1: positional schemes (language modelling and text generation)",
    "2": "Table 2: code generation after fine-tuning (pass@k)",
    "3": "Table 3: mathematical reasoning after fine-tuning (final-answer accuracy)",
    "4": "Table 4: ablation of ComplexFormer",
    "extrapolation": "Length extrapolation of the Table-1 position variants",
}

#: Table 4's rows as the paper names them (the same runs as the Table-1 rows).
TABLE4_LABELS: dict[str, str] = {
    "cmha": "ComplexFormer (full)",
    "cmha_shared": "w/o head-specific adaptation (shared δ, b)",
    "cmha_fixed": "w/o adaptation (δ=1, b=0 fixed)",
    "cmha_pclrot": "PCL on the rotated phase δθ + b + pω",
    "cmha_nopcl": "w/o PCL",
    "cmha_ropeinit": "δ initialised at 1 (RoPE at step 0)",
    "rope": "RoPE",
}


def table_variants(tables: list[str] | tuple[str, ...]) -> list[str]:
    """The distinct variants of ``tables``, in first-appearance order.

    Raises:
        ValueError: an unknown table id.
    """
    names: list[str] = []
    for t in tables:
        if t not in TABLES:
            raise unknown_key_error(str(t), list(TABLES), "table")
        names += [v for v in TABLES[t] if v not in names]
    return names


def run_dir(out: str | os.PathLike, variant: str, seed: int) -> Path:
    """``OUT/runs/<variant>/seed<seed>``: one directory per (variant, seed), whichever table."""
    return Path(out) / "runs" / variant / f"seed{seed}"


# ---------------------------------------------------------------------- scales
def _shape(fields: dict[str, Any]) -> dict[str, Any]:
    """A scale's model: GPTConfig fields (a preset of models.config.PRESETS with
    differences, as ``scales.toml`` names it) without the vocabulary, which the scale's
    tokenizer sets."""
    return {k: v for k, v in fields.items() if k != "vocab_size"}


_TRAIN_FIXED_OUT = {"out_dir", "data", "seed", "device", "num_threads"}


@dataclass(frozen=True)
class Scale:
    """Everything that is the same for every variant and seed of a reproduction.

    Attributes:
        name: ``tiny``, ``small``, ``paper`` (or a custom name, e.g. in tests).
        description: one line for the plan and the tables.
        data: the default corpus spec (``--data`` overrides it).
        tokenizer: TrainConfig.tokenizer (None: the cached byte-level BPE of ``vocab_size``).
        vocab_size: TrainConfig.vocab_size (the BPE's; ignored with a named tokenizer).
        model: GPTConfig fields of the base shape (every variant except ``gpt2``).
        gpt2_model: GPTConfig fields of the GPT-2-shaped variant.
        train: TrainConfig fields (steps, batch, optimizer, schedule, eval cadence, ...).
        text: TextSuiteConfig fields (prompts, lengths, nucleus p, batch sizes).
        evaluator: the default gen-PPL evaluator spec (``--evaluator`` overrides it).
        ppl_batch_size: blocks per forward pass of the val/test perplexity.
        ppl_max_blocks: cap on the val/test blocks (None: the whole split).
        extrapolation: ExtrapolationConfig fields (multipliers, max_tokens, split, ...).
        flush_denormal: ``torch.set_flush_denormal(True)`` while reproducing on a CPU. The
            PCL's log-softmax over positions at τ = 0.1 produces denormal gradients that
            make a CPU matmul up to ~30× slower; flushing them to zero changes nothing above
            1e-38 and makes PCL runs about 1.7× faster here.
        epochs: when set, ``train["max_steps"]`` is replaced by the steps of this many epochs
            of the corpus's training tokens (:mod:`.budget`); ``--max-steps`` switches it off.
        train_tokens_estimate: the training tokens of ``data`` under ``tokenizer``, used by
            a dry run until the corpus has been tokenised once.
        finetune: the fine-tuning recipe of Tables 2-4 (None: the scale has none; Table 4
            then has no Pass@1 and Acc. columns and Tables 2 and 3 are refused).
    """

    name: str
    description: str
    data: str
    tokenizer: str | None
    vocab_size: int
    model: dict[str, Any]
    gpt2_model: dict[str, Any]
    train: dict[str, Any]
    text: dict[str, Any]
    evaluator: str = "smollm2"
    ppl_batch_size: int = 8
    ppl_max_blocks: int | None = None
    extrapolation: dict[str, Any] = field(default_factory=dict)
    flush_denormal: bool = False
    epochs: float | None = None
    train_tokens_estimate: int | None = None
    finetune: FineTuneSpec | None = None

    def __post_init__(self) -> None:
        names = set(GPTConfig.field_names())
        for what, d in (("model", self.model), ("gpt2_model", self.gpt2_model)):
            for key in d:
                if key not in names or key in ("pos_scheme", "pcl", "vocab_size", "delta_init"):
                    raise ValueError(
                        f"Scale.{what} cannot set {key!r} (GPTConfig shape fields "
                        "only; pos_scheme, pcl and delta_init come from the variant)"
                    )
        if self.epochs is not None and not self.epochs > 0:
            raise ValueError(f"Scale.epochs must be > 0 or None, got {self.epochs}")
        tnames = set(TrainConfig.field_names())
        for key in self.train:
            if key not in tnames or key in _TRAIN_FIXED_OUT | {"tokenizer", "vocab_size"}:
                raise ValueError(f"Scale.train cannot set {key!r}")
        tx = set(TextSuiteConfig.__dataclass_fields__)
        for key in self.text:
            if key not in tx or key in ("data", "evaluator", "progress"):
                raise ValueError(f"Scale.text cannot set {key!r}")
        ex = set(ExtrapolationConfig.__dataclass_fields__)
        for key in self.extrapolation:
            if key not in ex or key in ("data", "device", "show_progress"):
                raise ValueError(f"Scale.extrapolation cannot set {key!r}")
        # Every variant must be able to generate: a scheme with a length limit (learned
        # positions stop at max_seq_len) needs len([EOS] + prompt) + max_new_tokens <= it.
        text = self.text_config("stdlib", None)
        need = int(text.prepend_eos) + text.prompt_tokens + text.max_new_tokens
        for v in VARIANTS.values():
            cfg = self.model_config(v)
            t = get_scheme(v.pos_scheme).max_length(cfg)
            if t is not None and need > t:
                raise ValueError(
                    f"scale {self.name!r}: [EOS] + prompt_tokens + max_new_tokens = {need} "
                    f"exceeds the {v.shape} model's max_seq_len {t}; variant {v.name!r} "
                    f"(pos_scheme {v.pos_scheme!r}) could not generate"
                )

    # ------------------------------------------------------------------ configs
    def model_config(self, variant: Variant | str) -> GPTConfig:
        """The variant's :class:`GPTConfig` at this scale (``vocab_size`` is set by training
        to the tokenizer's)."""
        v = VARIANTS[variant] if isinstance(variant, str) else variant
        shape = self.gpt2_model if v.shape == "gpt2" else self.model
        return GPTConfig(vocab_size=self.vocab_size, **{**shape, **v.overrides()})

    def train_config(
        self,
        out_dir: str | os.PathLike,
        seed: int,
        *,
        data: str | None = None,
        device: str = "auto",
        num_threads: int | None = None,
    ) -> TrainConfig:
        """The run's :class:`TrainConfig`: identical for every variant except ``out_dir``."""
        return TrainConfig(
            out_dir=os.fspath(out_dir),
            data=data or self.data,
            tokenizer=self.tokenizer,
            vocab_size=self.vocab_size,
            seed=seed,
            device=device,
            num_threads=num_threads,
            **self.train,
        )

    def text_config(self, data: str, evaluator: str | None) -> TextSuiteConfig:
        """The text suite's settings (prompts from the ``test`` split of ``data``)."""
        return TextSuiteConfig(
            **{
                "split": "test",
                **self.text,
                "data": data,
                "evaluator": evaluator,
                "progress": False,
            }
        )

    def extrapolation_config(self, device: str) -> ExtrapolationConfig:
        """The extrapolation suite's settings (each run's own corpus)."""
        return ExtrapolationConfig(
            **{
                "multipliers": (1, 2, 4, 8),
                **self.extrapolation,
                "data": None,
                "device": device,
                "show_progress": False,
            }
        )

    def replace(self, **changes: Any) -> Scale:
        """A copy with fields changed; ``max_steps=N`` (etc.) changes ``train`` entries (and
        an explicit ``max_steps`` switches ``epochs`` off)."""
        top = {k: v for k, v in changes.items() if k in self.__dataclass_fields__}
        rest = {k: v for k, v in changes.items() if k not in top}
        if rest:
            top["train"] = {**self.train, **rest}
            if "max_steps" in rest and "epochs" not in top:
                top["epochs"] = None
        return dataclasses.replace(self, **top)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (for the plan and the tables)."""
        return dataclasses.asdict(self)


def _scale(name: str, entry: dict[str, Any], description: str) -> Scale:
    """The :class:`Scale` of one table of ``scales.toml`` (resolved by
    :func:`~complexformer_lab.configs.resolve_table`)."""
    fields = {"tokenizer": None, **entry}
    finetune = fields.pop("finetune", None)
    return Scale(
        name=name,
        description=description,
        model=_shape(fields.pop("model")),
        gpt2_model=_shape(fields.pop("gpt2_model")),
        finetune=None if finetune is None else FineTuneSpec(**finetune),
        **fields,
    )


def _scales() -> dict[str, Scale]:
    configs = lab_configs("scales.toml", "scale")
    return {n: _scale(n, configs[n], configs.descriptions[n]) for n in configs.names()}


#: The scales of ``reproduce --scale``, read from ``complexformer_lab/configs/scales.toml``
#: (``tiny`` and ``small`` for CPUs, ``paper`` the paper's Appendix A).
SCALES: dict[str, Scale] = _scales()


def describe_scales() -> str:
    """The scales and what each is, one per line (for ``--help``)."""
    return lab_configs("scales.toml", "scale").describe()


def get_scale(name: str, **train_overrides: Any) -> Scale:
    """The scale ``name`` with TrainConfig entries overridden (e.g. ``max_steps=1000``).

    Raises:
        ValueError: an unknown scale or TrainConfig field.
    """
    if name not in SCALES:
        raise unknown_key_error(name, list(SCALES), "scale")
    scale = SCALES[name]
    if not train_overrides:
        return scale
    names = TrainConfig.field_names()  # an explicit max_steps switches the epochs off
    for key in train_overrides:
        if key not in names:
            raise unknown_key_error(key, names, "TrainConfig field")
    return scale.replace(**train_overrides)
