"""Fine-tuning a CmplxBERT (or one of the paper's two real baselines) for classification.

Tamburini 2024 (sec. 5) compares a complexified, further pre-trained BERT (CmplxBERTLoRA_r)
with the real BERT fine-tuned in full and with a real LoRA of about the same number of
trainable parameters. This module fine-tunes one model of one kind with one seed on the
shared loop (AdamW, linear warm-up then linear decay, ``epochs`` passes over the training
split), scores it on the validation and test splits, and keeps a fine-tuned CmplxBERT as a
CmplxBERT directory: :func:`finetune_one` from a model path and a task, or
:func:`prepare_task` once and :func:`finetune_run` per (kind, seed). The comparison over
model kinds and seeds, with its reports (``cbert-finetune``), is
:func:`complexformer_lab.cmplxbert.finetune.finetune`.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from complexformer.config import ConfigBase
from complexformer.runtime import cpu_settings, require
from complexformer.storage import read_text, remove_entry
from complexformer.training import METRICS_FILE, TrainConfig, train_task
from complexformer.training.checkpoint import CHECKPOINTS_DIR

from .complexify import complexify
from .config import CmplxBertConfig, ComplexLoRAConfig
from .finetune_task import FinetuneTask
from .finetuned import MeanPooled, base_of, save_finetuned
from .io import trainable_parameter_counts
from .labelled import TASK_TYPES, ClassificationTask, load_classification_task, named_task
from .loading import (
    is_cmplxbert_dir,
    load_cmplxbert,
    load_hf_bert,
    resolve_base,
    verify_cmplxbert,
)
from .real import add_real_lora

__all__ = [
    "DEFAULT_MODELS",
    "MODEL_KINDS",
    "FinetuneConfig",
    "PreparedTask",
    "build_classifier",
    "finetune_one",
    "finetune_run",
    "matched_real_lora_rank",
    "prepare_task",
    "run_settings",
    "save_finetuned",
]

#: What ``finetune`` can train: the CmplxBERT, the CmplxBERT complexified with the paper's
#: start (a plain BERT only), the real BERT and the real BERT with real LoRA.
MODEL_KINDS = ("cmplxbert", "cmplxbert-paper", "real", "real-lora")
DEFAULT_MODELS = ("cmplxbert", "real", "real-lora")
#: settings that do not change a single run (left out of its config.json).
_NOT_RUN_SETTINGS = ("models", "seeds", "num_threads", "device", "shard", "save_models")
#: linear layers that get real LoRA adapters (the encoder's, as the complex adapters).
REAL_LORA_TARGETS = (
    r".*(query|key|value|attention\.output\.dense|intermediate\.dense|"
    r"layer\.\d+\.output\.dense)"
)


@dataclass
class FinetuneConfig(ConfigBase):
    """Settings of a fine-tuning run (defaults: 2 epochs as the paper, the head at lr 1e-3 and
    the rest at 0.3 × lr; ``--preset paper``: one rate of 1e-4).

    Attributes:
        task: a task registered by name (``docstrings``, ``docstring-pairs``, ``code-tags``;
            the help lists them), ``hf:NAME[:CONFIG]``, a ``.jsonl``/``.csv`` file or a
            folder (:func:`complexformer.cmplxbert.labelled.load_classification_task`).
        task_type: ``"sequence"`` (a text and a label), ``"pair"`` (two texts and a label;
            the second text gets token type 1) or ``"token"`` (words and one tag per word;
            the first sub-word of each word is scored); see
            :mod:`complexformer.cmplxbert.labelled`. None: a registered task's own type,
            else ``"sequence"``.
        models: which of ``cmplxbert``, ``cmplxbert-paper`` (the CmplxBERT with the paper's
            zero start, for a plain BERT), ``real`` and ``real-lora`` to fine-tune.
        seeds: one run per seed and model (init of new heads, adapters, data order, dropout).
        epochs: passes over the training split.
        lr: peak learning rate (AdamW) of the new classification head, linear warm-up over
            ``warmup_frac`` then linear decay.
        base_lr_ratio: every other trainable parameter (adapters, complex biases,
            LayerNorms; the pre-trained weights of the real BERT) trains at
            ``lr × base_lr_ratio``. 0.3 (default) keeps the adapters' growth bounded
            (docs/cmplxbert.md, "Adapter growth"); 1 is the paper's single rate.
        batch_size: examples per update.
        max_len: tokens per example after truncation ([CLS] and [SEP] included).
        warmup_frac: fraction of the updates spent warming up.
        weight_decay: AdamW weight decay.
        max_train_examples: train on a fixed random subset of N examples (None: all).
        max_eval_examples: validate and test on fixed random subsets of N examples.
        pooling: the sentence vector fed to the (pooler and) classifier: ``"cls"`` (BERT's
            first token, the paper), ``"mean"`` (masked mean of the last hidden states, for
            sentence-embedding bases trained that way), or ``"auto"``: ``"mean"`` when the
            base is a sentence-transformers model whose ``1_Pooling/config.json`` says mean
            pooling (the packaged MiniLM), else ``"cls"``.
        lora: the complex adapters of a plain BERT complexified here (a CmplxBERT directory
            keeps the adapters and choices it was pre-trained with).
        model: the complex model's choices for a plain BERT, likewise
            (:class:`CmplxBertConfig`; ``CmplxBertConfig.paper()`` for the paper's).
        real_lora_rank: rank of the real LoRA baseline; None matches the CmplxBERT's count
            of trainable parameters.
        text_field: text column of CSV/JSONL/HF data (None: ``text``, or ``tokens`` for
            token tasks).
        label_field: label column (None: ``label``, or ``tags`` for token tasks).
        pair_field: the second text's column, for pairs.
        num_threads: torch CPU threads (None: torch's default).
        device: ``"cpu"``, ``"cuda"`` or ``"auto"``.
        shard: under torchrun, shard each run's model over the ranks (FSDP2) instead of DDP
            (``TrainConfig.shard``).
        save_models: keep each fine-tuned CmplxBERT (``cmplxbert`` and ``cmplxbert-paper``
            runs) as a CmplxBERT directory in ``OUT/train/<kind>-seed<s>/model``: adapters,
            complex biases, norms and head, tokenizer, labels and pooling, with a manifest
            (:func:`save_finetuned`). The real baselines keep results only.
    """

    task: str = "docstrings"
    task_type: str | None = None
    models: tuple[str, ...] = DEFAULT_MODELS
    seeds: tuple[int, ...] = (0, 1, 2)
    epochs: int = 2
    lr: float = 1e-3
    base_lr_ratio: float = 0.3
    batch_size: int = 16
    max_len: int = 128
    warmup_frac: float = 0.1
    weight_decay: float = 0.01
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    pooling: str = "auto"
    lora: ComplexLoRAConfig = field(default_factory=ComplexLoRAConfig)
    model: CmplxBertConfig = field(default_factory=CmplxBertConfig)
    real_lora_rank: int | None = None
    text_field: str | None = None
    label_field: str | None = None
    pair_field: str = "text_pair"
    num_threads: int | None = None
    device: str = "auto"
    shard: bool = False
    save_models: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.lora, dict):
            self.lora = ComplexLoRAConfig.from_dict(self.lora)
        if isinstance(self.model, dict):
            self.model = CmplxBertConfig.from_dict(self.model)
        if self.task_type is None:  # a registered task knows its type
            named = named_task(self.task)
            self.task_type = named.task_type if named is not None else "sequence"
        token = self.task_type == "token"
        if self.text_field is None:
            self.text_field = "tokens" if token else "text"
        if self.label_field is None:
            self.label_field = "tags" if token else "label"
        self.models = tuple(self.models)
        self.seeds = tuple(int(s) for s in self.seeds)
        bad = [m for m in self.models if m not in MODEL_KINDS]
        if bad or not self.models:
            raise ValueError(
                f"unknown model kind(s) {bad or self.models}; allowed: {', '.join(MODEL_KINDS)}"
            )
        if not self.seeds:
            raise ValueError("give at least one seed")
        for name in ("epochs", "batch_size"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_len < 4:
            raise ValueError(f"max_len must be >= 4, got {self.max_len}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0 < self.base_lr_ratio <= 1:
            raise ValueError(f"base_lr_ratio must be in (0, 1], got {self.base_lr_ratio}")
        if self.task_type not in TASK_TYPES:
            raise ValueError(
                f"task_type must be one of {', '.join(TASK_TYPES)}, got {self.task_type!r}"
            )
        if self.pooling not in ("auto", "cls", "mean"):
            raise ValueError(f"pooling must be auto, cls or mean, got {self.pooling!r}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be auto, cpu or cuda, got {self.device!r}")


# ------------------------------------------------------------------------------- models
def build_classifier(
    kind: str,
    model_path: str,
    num_labels: int,
    cfg: FinetuneConfig,
    real_lora_rank: int | None = None,
    *,
    verify: bool = True,
) -> nn.Module:
    """A classification model of ``kind`` with its trainable parameters set
    (``BertForTokenClassification`` for ``cfg.task_type == "token"``, else
    ``BertForSequenceClassification``).

    - ``cmplxbert``: ``model_path`` is a CmplxBERT directory (``complexformer
      cbert-complexify``; its adapters and norms are kept, the MLM head dropped) or a plain
      BERT, complexified here with ``cfg.lora`` and ``cfg.model``. The new classifier's real
      weights train with the adapters.
    - ``real``: the real BERT, every parameter trained.
    - ``real-lora``: the real BERT frozen, real LoRA of rank ``real_lora_rank`` on the
      encoder's linears; LayerNorms and the new classifier train (as in the complex model).

    A CmplxBERT directory is checked against its manifest unless ``verify=False``.
    """
    hf_task = "token_classification" if cfg.task_type == "token" else "classification"
    if kind == "cmplxbert-paper":
        if is_cmplxbert_dir(model_path):
            raise ValueError(
                f"model kind 'cmplxbert-paper' complexifies a plain BERT with the paper's "
                f"start; {model_path} is a CmplxBERT directory (its start is already made)"
            )
        paper_start = cfg.replace(model=cfg.model.replace(start="paper"))
        return build_classifier("cmplxbert", model_path, num_labels, paper_start, verify=verify)
    if kind == "cmplxbert":
        if is_cmplxbert_dir(model_path):
            model = load_cmplxbert(model_path, hf_task, num_labels, verify=verify)[0]
        else:
            hf, _ = load_hf_bert(model_path, hf_task, num_labels)
            model = complexify(hf, cfg.lora, cfg.model)
        model.pooling = "cls"  # mean pooling is MeanPooled's, around the model
        model.classifier.base_layer.requires_grad_(True)  # new weights: they must learn
        return model
    hf, _ = load_hf_bert(base_of(model_path), hf_task, num_labels)
    if kind == "real":
        return hf.requires_grad_(True)
    if kind == "real-lora":
        add_real_lora(hf, real_lora_rank or 8, REAL_LORA_TARGETS)
        for name, p in hf.named_parameters():
            if "LayerNorm" in name or name.startswith("classifier."):
                p.requires_grad_(True)
        return hf
    raise ValueError(f"unknown model kind {kind!r}; allowed: {', '.join(MODEL_KINDS)}")


def matched_real_lora_rank(
    model_path: str,
    num_labels: int,
    cfg: FinetuneConfig,
    target: int | None = None,
    *,
    verify: bool = True,
) -> tuple[int, int]:
    """The real LoRA rank whose trainable count is closest to ``target`` (counts are affine
    in the rank: measured at r = 1 and r = 2), and ``target``: by default the trainable count
    of the ``cmplxbert`` classifier of ``model_path`` (built under seed 0)."""
    if target is None:
        torch.manual_seed(0)
        clf = build_classifier("cmplxbert", model_path, num_labels, cfg, verify=verify)
        target = trainable_parameter_counts(clf)[0]
    c1 = trainable_parameter_counts(build_classifier("real-lora", model_path, num_labels, cfg, 1))[
        0
    ]
    c2 = trainable_parameter_counts(build_classifier("real-lora", model_path, num_labels, cfg, 2))[
        0
    ]
    return max(1, round((target - c1) / max(c2 - c1, 1)) + 1), target


def resolve_pooling(pooling: str, model_path: str) -> str:
    """``"cls"`` or ``"mean"`` for ``pooling="auto"`` (see :class:`FinetuneConfig`)."""
    if pooling != "auto":
        return pooling
    base = Path(resolve_base(base_of(model_path)))
    conf = base / "1_Pooling" / "config.json"
    if conf.is_file():
        spec = json.loads(conf.read_text(encoding="utf-8"))
        if spec.get("pooling_mode_mean_tokens") and not spec.get("pooling_mode_cls_token"):
            return "mean"
    return "cls"


# ------------------------------------------------------------------------------- training
def _train_config(cfg: FinetuneConfig, seed: int, steps: int, per_epoch: int, out: Path):
    """The shared loop's settings for one run: AdamW (betas 0.9/0.999, eps 1e-8) with the
    loop's weight-decay rule, linear warm-up over ``warmup_frac`` then linear decay to 0,
    gradient clipping at 1, one validation at the end, a checkpoint per epoch."""
    return TrainConfig(
        out_dir=str(out),
        data=cfg.task,  # recorded only: FinetuneTask supplies the examples
        text_field=cfg.text_field,
        max_steps=steps,
        batch_size=cfg.batch_size,
        lr=cfg.lr,
        warmup_frac=cfg.warmup_frac,
        min_lr_ratio=0.0,
        schedule="linear",
        weight_decay=cfg.weight_decay,
        betas=(0.9, 0.999),
        eps=1e-8,
        grad_clip=1.0,
        eval_every=steps,
        eval_blocks=None,
        log_every=1,
        save_every=per_epoch,
        keep_last=1,
        seed=seed,
        device=cfg.device,
        num_threads=cfg.num_threads,
        shard=cfg.shard,
    )


def _run_settings(cfg: FinetuneConfig) -> dict[str, Any]:
    """The settings that decide a single run (as JSON would give them back)."""
    settings = {k: v for k, v in asdict(cfg).items() if k not in _NOT_RUN_SETTINGS}
    return json.loads(json.dumps(settings))


def run_settings(model_path: str, cfg: FinetuneConfig) -> dict[str, Any]:
    """What decides a run of ``model_path`` under ``cfg``, as its record keeps it
    (``settings``): the model path and every setting but the model kinds, seeds, threads,
    device, sharding and whether models are kept."""
    return {"model_path": str(model_path), **_run_settings(cfg)}


def _run_one(
    kind: str,
    build: Callable[[], nn.Module],
    data: dict[str, tuple[list, list]],
    cfg: FinetuneConfig,
    seed: int,
    pad_id: int,
    run_dir: Path,
    label_names: list[str] | None = None,
    keep: Callable[[nn.Module, Path], Any] | None = None,
) -> tuple[dict[str, Any], nn.Module]:
    """Fine-tune one (model, seed) with :func:`complexformer.training.train_task` in
    ``run_dir`` (an interrupted run resumes from its last checkpoint, which is deleted once
    the run is done); returns the result record and the trained model. ``keep`` writes the
    fine-tuned model into ``run_dir/model`` (:class:`FinetuneTask`)."""
    settings = _run_settings(cfg)
    task = FinetuneTask(
        kind, build, data, settings, seed, cfg.batch_size, pad_id, label_names, keep
    )
    steps = task.steps_per_epoch * cfg.epochs
    tc = _train_config(cfg, seed, steps, task.steps_per_epoch, run_dir)
    t0 = time.perf_counter()
    train_task(task, tc, resume=True, log=None)
    train_s = time.perf_counter() - t0
    rows = [json.loads(line) for line in read_text(run_dir / METRICS_FILE).splitlines()]
    losses = [r["train_loss"] for r in rows if "train_loss" in r]
    remove_entry(run_dir / CHECKPOINTS_DIR, run_dir)  # never through a link
    res = {
        "validation": task.result["validation"],
        "test": task.result["test"],
        "train_loss_first": losses[0],
        "train_loss_last": sum(losses[-10:]) / len(losses[-10:]),
        "steps": steps,
        "train_s": train_s,
        "test_predictions": task.result["test_predictions"],
        "growth": task.result.get("growth"),
    }
    return res, task.model


def _subset(texts: list[str], labels: list[int], n: int | None) -> tuple[list, list]:
    """A fixed random subset of n examples (seed 0, the same for every model and seed)."""
    if n is None or n >= len(texts):
        return list(texts), list(labels)
    keep = sorted(random.Random(0).sample(range(len(texts)), n))
    return [texts[i] for i in keep], [labels[i] for i in keep]


def _word_labels(enc, i: int, tags: list[int]) -> list[int]:
    """The tag of each word on its first sub-word token, -100 on the others and on [CLS],
    [SEP] (``word_ids`` of a fast tokenizer)."""
    out, prev = [], None
    for w in enc.word_ids(i):
        out.append(-100 if w is None or w == prev else tags[w])
        prev = w
    return out


def _tokenize(tokenizer, task: ClassificationTask, cfg: FinetuneConfig):
    """``{split: (ids, labels)}``, with the token type ids as a third element for pairs
    and per-token labels for token tasks."""
    data = {}
    kw = {"truncation": True, "max_length": cfg.max_len}
    for s, (inputs, labels) in task.splits.items():
        cap = cfg.max_train_examples if s == "train" else cfg.max_eval_examples
        inputs, labels = _subset(inputs, labels, cap)
        if task.task_type == "pair":
            enc = tokenizer([a for a, _ in inputs], [b for _, b in inputs], **kw)
            data[s] = (
                [list(e) for e in enc["input_ids"]],
                list(labels),
                [list(e) for e in enc["token_type_ids"]],
            )
        elif task.task_type == "token":
            enc = tokenizer([list(w) for w in inputs], is_split_into_words=True, **kw)
            data[s] = (
                [list(e) for e in enc["input_ids"]],
                [_word_labels(enc, i, y) for i, y in enumerate(labels)],
            )
        else:
            enc = tokenizer(list(inputs), **kw)["input_ids"]
            data[s] = ([list(e) for e in enc], list(labels))
    return data


# ------------------------------------------------------------------------------- one run
@dataclass
class PreparedTask:
    """A labelled task tokenized for one model path, shared by every run on it.

    Attributes:
        task: the labelled task (all its examples).
        tokenizer: the model's tokenizer.
        data: ``{split: (ids, labels[, token type ids])}`` after the example caps.
        pad_id: the tokenizer's padding id (0 if it has none).
        pooling: ``"tokens"`` for token tasks, else the resolved ``"cls"`` or ``"mean"``.
    """

    task: ClassificationTask
    tokenizer: Any
    data: dict[str, tuple]
    pad_id: int
    pooling: str


def prepare_task(
    model_path: str,
    cfg: FinetuneConfig,
    log: Callable[[str], Any] | None = print,
    *,
    verify: bool = True,
) -> PreparedTask:
    """Load ``cfg.task`` and tokenize it with the tokenizer of ``model_path`` (a CmplxBERT
    directory's own, else its base's), capped at ``cfg.max_train_examples`` and
    ``cfg.max_eval_examples`` (fixed random subsets, the same for every run). A CmplxBERT
    directory is checked against its manifest first unless ``verify=False``."""
    transformers = require("transformers", "hf", "finetune")
    log = log or (lambda _m: None)
    if verify and is_cmplxbert_dir(model_path):
        verify_cmplxbert(model_path)  # before its tokenizer and meta are read below
    task = load_classification_task(
        cfg.task, cfg.text_field, cfg.label_field, cfg.task_type, cfg.pair_field
    )
    log(f"task {task.name} ({task.task_type}): {task.num_labels} classes, sizes {task.stats()}")
    src = model_path if is_cmplxbert_dir(model_path) else resolve_base(model_path)
    local = {"local_files_only": True} if Path(src).exists() else {}
    tok = transformers.AutoTokenizer.from_pretrained(src, **local)
    data = _tokenize(tok, task, cfg)
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    pooling = "tokens" if task.task_type == "token" else resolve_pooling(cfg.pooling, model_path)
    log(f"pooling: {pooling}")
    return PreparedTask(task, tok, data, pad_id, pooling)


def finetune_run(
    model_path: str,
    prepared: PreparedTask,
    cfg: FinetuneConfig,
    kind: str,
    seed: int,
    run_dir: str | Path,
    *,
    real_lora_rank: int | None = None,
    verify: bool = True,
) -> dict[str, Any]:
    """Fine-tune one model of ``kind`` with ``seed`` on ``prepared`` in ``run_dir`` (an
    interrupted run resumes from its last checkpoint) and return its record: the model and
    seed, trainable and total parameters, the validation and test metrics, the first and
    last training loss, steps, seconds, the test predictions, the growth probe and
    :func:`run_settings`. With ``cfg.save_models`` a fine-tuned CmplxBERT (``cmplxbert`` and
    ``cmplxbert-paper``) is kept in ``run_dir/model`` (:func:`save_finetuned`), named by the
    record's ``model_dir``."""
    if kind not in MODEL_KINDS:
        raise ValueError(f"unknown model kind {kind!r}; allowed: {', '.join(MODEL_KINDS)}")
    run_dir = Path(run_dir)
    task, tok = prepared.task, prepared.tokenizer

    def build() -> nn.Module:
        model = build_classifier(
            kind, model_path, task.num_labels, cfg, real_lora_rank, verify=verify
        )
        return MeanPooled(model) if prepared.pooling == "mean" else model

    keep = None
    if cfg.save_models and kind.startswith("cmplxbert"):

        def keep(model, directory):
            save_finetuned(model, directory, model_path, tok, task, cfg, seed)

    res, model = _run_one(
        kind, build, prepared.data, cfg, seed, prepared.pad_id, run_dir, task.labels, keep
    )
    trainable, total = trainable_parameter_counts(model)
    del model
    return {
        "model": kind,
        "seed": seed,
        "trainable_params": trainable,
        "all_params": total,
        **({"real_lora_rank": real_lora_rank} if kind == "real-lora" else {}),
        **({"model_dir": str(run_dir / "model")} if keep is not None else {}),
        **res,
        "settings": run_settings(model_path, cfg),
    }


def finetune_one(
    model_path: str,
    cfg: FinetuneConfig,
    out_dir: str | Path,
    *,
    kind: str = "cmplxbert",
    seed: int | None = None,
    log: Callable[[str], Any] | None = print,
    verify: bool = True,
) -> dict[str, Any]:
    """Fine-tune one classifier on ``cfg.task`` and keep it.

    Args:
        model_path: a CmplxBERT directory (``cbert-complexify``'s ``OUT/model``), or a real
            BERT (hub name, local directory, or ``minilm``) complexified here with
            ``cfg.lora`` and ``cfg.model``; the real baselines use its base.
        cfg: the settings (one run: ``cfg.models`` is not read, ``cfg.seeds[0]`` is the
            default seed).
        out_dir: the run folder: ``metrics.jsonl``, ``model/result.json`` and, for a
            CmplxBERT with ``cfg.save_models``, the fine-tuned model in ``OUT/model``, which
            ``load_cmplxbert``, ``Predictor.from_dir`` and ``cbert-predict`` read.
        kind: one of :data:`MODEL_KINDS`.
        seed: the run's seed (None: ``cfg.seeds[0]``).
        log: message sink.
        verify: check a CmplxBERT directory against its manifest before reading it.

    Returns:
        The run's record (:func:`finetune_run`).
    """
    log = log or (lambda _m: None)
    seed = cfg.seeds[0] if seed is None else int(seed)
    with cpu_settings(cfg.num_threads or None):
        prepared = prepare_task(model_path, cfg, log, verify=verify)
        rank = cfg.real_lora_rank
        if kind == "real-lora" and rank is None:
            rank, target = matched_real_lora_rank(
                model_path, prepared.task.num_labels, cfg, verify=verify
            )
            log(f"real LoRA rank {rank} (matched to {target:,} trainable params)")
        rec = finetune_run(
            model_path, prepared, cfg, kind, seed, out_dir, real_lora_rank=rank, verify=verify
        )
    log(
        f"{kind} seed {seed}: test accuracy {rec['test']['accuracy']:.4f}, macro-F1 "
        f"{rec['test']['macro_f1']:.4f} ({rec['trainable_params']:,} trainable, "
        f"{rec['train_s']:.0f} s)"
    )
    return rec
