"""The lab's CmplxBERT commands (Tamburini 2024): ``cbert-finetune`` (the comparison of the
CmplxBERT with the real baselines over seeds), ``cbert-study`` (the convergence study),
``cbert-start`` (the start against the real model) and ``cbert-embeddings`` (Figure 1). They
share the options of the library's CmplxBERT commands (:mod:`complexformer.cmplxbert.cli`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from complexformer.cli.options import (
    add_base,
    add_device,
    add_fields,
    add_json,
    add_model,
    add_out,
    add_seeds,
    add_set,
    add_shard,
    add_threads,
    add_verify,
    build_configs,
    config_choice,
)
from complexformer.cmplxbert.cli import (
    CHOICES,
    LORA_CONFIG,
    MODEL_CONFIG,
    add_lora_options,
    add_model_options,
    add_optim,
    add_recipe_option,
    finetune_config,
    recipe_defaults,
    recipe_texts,
    recipe_values,
    regex_target_modules,
)
from complexformer.cmplxbert.config import (
    RECIPES,
    CmplxBertConfig,
    ComplexLoRAConfig,
    recipe_configs,
)
from complexformer.cmplxbert.finetune import FinetuneConfig
from complexformer.cmplxbert.labelled import describe_tasks
from complexformer.config import field_defaults

from .embeddings import embeddings_report
from .start_report import start_report
from .study import StudyConfig

__all__ = ["add_lab_cbert_parsers", "study_config", "study_defaults"]

_EPILOG_FINETUNE = """\
examples:
  complexformer cbert-finetune --model runs/cbert8/model --task docstrings --out runs/ft8
  complexformer cbert-finetune --base minilm --task data/reviews.csv --models cmplxbert real
  complexformer cbert-finetune --model runs/cbert8/model --task hf:stanfordnlp/sst2 \\
      --text-field sentence --seeds 0 1 2 3 4     # online

--task: a task registered by name (entry-point group complexformer.tasks):
{tasks}
or hf:NAME[:CONFIG] (online), a .jsonl/.csv file with text and label columns (split 80/10/10
by a hash of the text), or a folder with train/validation/test .jsonl or .csv files.
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
    if args.n < 2:
        raise SystemExit(f"cbert-start: --n must be at least 2, got {args.n}")
    start_report(args.base, args.out, n=args.n, max_len=args.max_len,
                 start_offset=args.start_offset, threads=args.threads)  # fmt: skip
    print(Path(args.out, "start.md").read_text(encoding="utf-8"))
    return 0


def study_defaults(recipe: str) -> dict[str, Any]:
    """The :class:`StudyConfig` fields ``recipe`` sets: its MLM stage's rate, warm-up and
    batch, and its fine-tuning's rates and epochs for the ``ft_`` fields."""
    r = recipe_configs(recipe)
    return {
        **{k: r["mlm"][k] for k in ("lr", "warmup_frac", "batch_size")},
        "ft_lr": r["finetune"]["lr"],
        "ft_base_lr_ratio": r["finetune"]["base_lr_ratio"],
        "ft_epochs": r["finetune"]["epochs"],
    }


def study_config(args: argparse.Namespace) -> StudyConfig:
    """The :class:`StudyConfig` of ``cbert-study``'s options: the recipe's values
    (:func:`study_defaults`), the options given, ``--set``."""
    recipe = config_choice(args, "recipe", "library")
    defaults = recipe_defaults(recipe, "mlm", "study")
    defaults["study"] = study_defaults(recipe)
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
        epilog=_EPILOG_FINETUNE.format(tasks=describe_tasks()),
        formatter_class=fmt,
    )
    values = recipe_values("finetune", FinetuneConfig)
    which = f.add_mutually_exclusive_group(required=True)
    add_model(which, "a CmplxBERT directory (from cbert-complexify)", required=False)
    add_verify(f)
    add_base(which, "a real BERT (hub name, directory, 'minilm') to complexify here, without "
             "further pre-training")  # fmt: skip
    add_fields(f, FinetuneConfig, "task")
    add_out(f, "results folder", required=False, default="runs/finetune")
    add_fields(f, FinetuneConfig, "models", choices=CHOICES)
    add_seeds(f, (0, 1, 2), "one run per seed and model")
    add_recipe_option(f)
    names = ("epochs", "lr", "base_lr_ratio", "batch_size", "max_len", "warmup_frac",
             "weight_decay", "max_train_examples", "max_eval_examples")  # fmt: skip
    add_fields(f, FinetuneConfig, *names, defaults=recipe_texts(values, *names))
    add_lora_options(f, values, " (with --base)")
    add_model_options(f, values, " (with --base)")
    add_fields(f, FinetuneConfig, "pooling", "real_lora_rank", "task_type", "text_field",
               "pair_field", "label_field", choices=CHOICES)  # fmt: skip
    add_device(f, default=None)
    add_threads(f, dest="num_threads")
    add_shard(f)
    add_fields(f, FinetuneConfig, "save_models", flags={"save_models": "--no-save-models"})
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
    values = {}
    for recipe in RECIPES:
        r = recipe_configs(recipe)
        values[recipe] = {**r["lora"].to_dict(), **r["model"].to_dict(),
                          **field_defaults(StudyConfig), **study_defaults(recipe)}  # fmt: skip
    add_base(st, "Hugging Face BERT: hub name, local directory, or 'minilm'", required=True)
    add_fields(st, StudyConfig, "data", "task")
    add_out(st, "study folder")
    add_recipe_option(st)
    add_lora_options(st, values)
    add_model_options(st, values)
    add_optim(st, StudyConfig, values)
    names = ("every", "max_len", "base_lr_ratio")
    add_fields(st, StudyConfig, *names, defaults=recipe_texts(values, *names))
    add_seeds(st, (0, 1, 2), "fine-tuning seeds")
    names = ("ft_epochs", "ft_lr", "ft_base_lr_ratio", "ft_batch_size", "ft_max_len",
             "max_train_examples", "max_eval_examples", "pooling", "seed", "bf16")  # fmt: skip
    add_fields(st, StudyConfig, *names, defaults=recipe_texts(values, *names), choices=CHOICES)
    add_device(st, default=None)
    add_threads(st, dest="num_threads")
    add_set(st, (StudyConfig, ComplexLoRAConfig, CmplxBertConfig), choices=("recipe",))
    st.set_defaults(func=cmd_study)


def _add_start(sub, fmt) -> None:
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
    add_fields(s0, start_report, "n", "max_len", "start_offset")
    add_out(s0, "output folder")
    add_threads(s0)
    s0.set_defaults(func=cmd_start)


def _add_embeddings(sub, fmt) -> None:
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
    add_fields(a, embeddings_report, "n", "seed")
    add_out(a, "output folder (default: the model directory)", required=False, default=None)
    a.set_defaults(func=cmd_analyze_embeddings)


def add_lab_cbert_parsers(sub) -> None:
    """Register ``cbert-finetune``, ``cbert-study``, ``cbert-start`` and ``cbert-embeddings``
    on ``sub``."""
    fmt = argparse.RawDescriptionHelpFormatter
    _add_finetune(sub, fmt)
    _add_study(sub, fmt)
    _add_start(sub, fmt)
    _add_embeddings(sub, fmt)
