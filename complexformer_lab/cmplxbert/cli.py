"""The lab's CmplxBERT commands (Tamburini 2024): ``cbert-finetune`` (the comparison of the
CmplxBERT with the real baselines over seeds), ``cbert-study`` (the convergence study),
``cbert-start`` (the start against the real model) and ``cbert-embeddings`` (Figure 1). They
share the options of the library's CmplxBERT commands (:mod:`complexformer.cmplxbert.cli`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from complexformer.cli.options import (
    add_base,
    add_device,
    add_json,
    add_model,
    add_seeds,
    add_set,
    add_shard,
    add_threads,
    add_verify,
    build_configs,
    config_choice,
)
from complexformer.cmplxbert.cli import (
    LORA_CONFIG,
    MODEL_CONFIG,
    add_lora_options,
    add_model_options,
    add_optim,
    add_recipe_option,
    add_seq_len,
    finetune_config,
    recipe_defaults,
    regex_target_modules,
)
from complexformer.cmplxbert.config import CmplxBertConfig, ComplexLoRAConfig, recipe_configs
from complexformer.cmplxbert.finetune import FinetuneConfig
from complexformer.cmplxbert.labelled import TASK_TYPES

from .study import StudyConfig

__all__ = ["add_lab_cbert_parsers", "study_config"]

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


# ---------------------------------------------------------------------- subcommands
def cmd_finetune(args: argparse.Namespace) -> int:
    from .finetune import finetune

    payload = finetune(args.model or args.base, finetune_config(args), args.out, verify=args.verify)
    print()
    print(Path(args.out, "finetune.md").read_text(encoding="utf-8"))
    if args.json:
        print(json.dumps(payload["summary"], indent=2))
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    from .start_report import start_report

    if args.n < 2:
        raise SystemExit(f"cbert-start: --n must be at least 2, got {args.n}")
    start_report(args.base, args.out, n=args.n, max_len=args.max_len,
                 offset=args.start_offset, threads=args.threads)  # fmt: skip
    print(Path(args.out, "start.md").read_text(encoding="utf-8"))
    return 0


def study_config(args: argparse.Namespace) -> StudyConfig:
    """The :class:`StudyConfig` of ``cbert-study``'s options: the recipe's values (its MLM
    stage, and its fine-tuning rates for the ``ft_`` fields), the options given, ``--set``."""
    recipe = config_choice(args, "recipe", "library")
    r = recipe_configs(recipe)
    defaults = recipe_defaults(recipe, "mlm", "study")
    mlm = defaults["study"]
    defaults["study"] = {
        **{k: mlm[k] for k in ("lr", "warmup_frac", "batch_size")},
        "ft_lr": r["finetune"]["lr"],
        "ft_base_lr_ratio": r["finetune"]["base_lr_ratio"],
        "ft_epochs": r["finetune"]["epochs"],
    }
    kw = build_configs(
        args,
        dict([("study", StudyConfig), LORA_CONFIG, MODEL_CONFIG]),
        defaults=defaults,
        exclude=("out",),
    )
    regex_target_modules(kw["lora"])
    return StudyConfig(
        **{k: v for k, v in kw["study"].items() if k not in ("lora", "model")},
        lora=ComplexLoRAConfig(**kw["lora"]),
        model=CmplxBertConfig(**kw["model"]),
    )


def cmd_study(args: argparse.Namespace) -> int:
    from .study import run_study

    run_study(study_config(args), args.out)
    print()
    print(Path(args.out, "study.md").read_text(encoding="utf-8"))
    print(f"plot: {Path(args.out, 'study.png')}")
    return 0


def cmd_analyze_embeddings(args: argparse.Namespace) -> int:
    from .embeddings import embeddings_report

    p = embeddings_report(args.model, args.out, n=args.n, seed=args.seed, verify=args.verify)
    print(
        f"{p['name']}: imaginary energy share {p['imaginary_energy_share']:.4g} over all "
        f"{p['components']:,} word-embedding components "
        f"({p['imaginary_energy_share_sample']:.4g} in the plotted sample "
        f"of {p['components_plotted']:,})"
    )
    print(f"plot: {p['plot']}")
    return 0


# ---------------------------------------------------------------------- parsers
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
    add_recipe_option(f)
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
    add_seq_len(f, "tokens per example (truncation; default 128)")
    f.add_argument("--warmup-frac", type=float, default=None, help="linear warm-up share (0.1)")
    f.add_argument("--weight-decay", type=float, default=None, help="AdamW weight decay (0.01)")
    f.add_argument(
        "--max-train-examples", type=int, default=None, help="train on N random examples"
    )
    f.add_argument(
        "--max-eval-examples", type=int, default=None, help="validate/test on N random examples"
    )
    add_lora_options(f, " of a --base")
    add_model_options(f, " of a --base")
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
    add_json(f, "also print the summary as JSON")
    add_set(f, (FinetuneConfig, ComplexLoRAConfig, CmplxBertConfig), choices=("recipe",))
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
    add_recipe_option(st)
    add_lora_options(st)
    add_model_options(st)
    add_optim(st, "MLM ")
    st.add_argument("--every", type=int, default=None, help="MLM steps between points (500)")
    add_seq_len(st, "tokens per sequence (default 128)")
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
    add_set(st, (StudyConfig, ComplexLoRAConfig, CmplxBertConfig), choices=("recipe",))
    st.set_defaults(func=cmd_study)


def add_lab_cbert_parsers(sub) -> None:
    """Register ``cbert-finetune``, ``cbert-study``, ``cbert-start`` and ``cbert-embeddings``
    on ``sub``."""
    fmt = argparse.RawDescriptionHelpFormatter
    _add_finetune(sub, fmt)
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
    add_seq_len(s0, "tokens per sentence (default 64)")
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
