"""Fine-tuning for sequence classification: CmplxBERT and the paper's two real baselines.

Tamburini 2024 (sec. 5) compares a complexified, further pre-trained BERT (CmplxBERTLoRA_r)
with the real BERT fine-tuned in full and with a real LoRA of about the same number of
trainable parameters, reporting mean ± std over runs. :func:`finetune` does all three on the
same data, the same seeds and the same schedule (AdamW, linear warm-up then linear decay,
``epochs`` passes over the training split), and reports accuracy and macro-F1 on the test
split. Each finished (model, seed) run is saved as JSON at once with its settings; a rerun
skips it, and a rerun with other settings into the same folder is an error.
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
from complexformer.results import format_p, markdown_table, paired_t_test, write_json, write_report
from complexformer.runtime import cpu_settings, require
from complexformer.storage import atomic_output, read_text, remove_entry
from complexformer.training import METRICS_FILE, TrainConfig, train_task
from complexformer.training.checkpoint import CHECKPOINTS_DIR

from .complexify import complexify
from .config import CmplxBertConfig, ComplexLoRAConfig
from .finetune_task import PROBE_EXAMPLES, FinetuneTask
from .finetuned import MeanPooled, base_of, save_finetuned
from .io import trainable_parameter_counts
from .labelled import BUILTIN_TASKS, TASK_TYPES, ClassificationTask, load_classification_task
from .loading import (
    is_cmplxbert_dir,
    load_cmplxbert,
    load_hf_bert,
    resolve_base,
    verify_cmplxbert,
)
from .metrics import classification_metrics, mean_std, token_metrics
from .real import add_real_lora

__all__ = [
    "DEFAULT_MODELS",
    "MODEL_KINDS",
    "FinetuneConfig",
    "build_classifier",
    "finetune",
    "save_finetuned",
]

#: What ``finetune`` can train: the CmplxBERT, the CmplxBERT complexified with the paper's
#: start (a plain BERT only), the real BERT and the real BERT with real LoRA.
MODEL_KINDS = ("cmplxbert", "cmplxbert-paper", "real", "real-lora")
DEFAULT_MODELS = ("cmplxbert", "real", "real-lora")
#: Updates over which the summary reports the adapter growth (the largest probe value).
GROWTH_WINDOW = 100
#: settings that do not change a single run (left out of its config.json).
_NOT_RUN_SETTINGS = ("models", "seeds", "num_threads", "device", "shard", "save_models")
#: linear layers that get real LoRA adapters (the encoder's, as the complex adapters).
REAL_LORA_TARGETS = (
    r".*(query|key|value|attention\.output\.dense|intermediate\.dense|"
    r"layer\.\d+\.output\.dense)"
)


@dataclass
class FinetuneConfig(ConfigBase):
    """Settings of :func:`finetune` (defaults: 2 epochs as the paper, the head at lr 1e-3 and
    the rest at 0.3 × lr; ``--preset paper``: one rate of 1e-4).

    Attributes:
        task: the data spec (:func:`complexformer.cmplxbert.labelled.load_classification_task`).
        task_type: ``"sequence"`` (a text and a label), ``"pair"`` (two texts and a label;
            the second text gets token type 1) or ``"token"`` (words and one tag per word;
            the first sub-word of each word is scored); see
            :mod:`complexformer.cmplxbert.labelled`. None: the built-in task's own type,
            else ``"sequence"``.
        models: which of ``cmplxbert``, ``real``, ``real-lora`` to fine-tune.
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
        if self.task_type is None:  # the built-in tasks know their type
            self.task_type = BUILTIN_TASKS.get(self.task, "sequence")
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


def _match_real_lora_rank(
    model_path: str, num_labels: int, cfg: FinetuneConfig, target: int
) -> int:
    """The real LoRA rank whose trainable count is closest to ``target`` (counts are affine
    in the rank: measured at r = 1 and r = 2)."""
    c1 = trainable_parameter_counts(build_classifier("real-lora", model_path, num_labels, cfg, 1))[
        0
    ]
    c2 = trainable_parameter_counts(build_classifier("real-lora", model_path, num_labels, cfg, 2))[
        0
    ]
    return max(1, round((target - c1) / max(c2 - c1, 1)) + 1)


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


def _check_finished(path: Path, rec: dict[str, Any], want: dict[str, Any]) -> None:
    """A finished run is reused only for the settings ``want`` (its model path included);
    otherwise a ``ValueError`` names what differs (records written before settings were kept
    pass)."""
    have = rec.get("settings")
    if have is None:
        return
    diff = [k for k in sorted(set(want) | set(have)) if want.get(k) != have.get(k)]
    if diff:
        shown = ", ".join(f"{k}={have.get(k)!r} (now {want.get(k)!r})" for k in diff)
        raise ValueError(
            f"{path} is a finished run made with other settings: {shown}; fine-tune into "
            f"another --out, or delete {path} to run it again"
        )


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


def _majority(task: ClassificationTask, data, cfg: FinetuneConfig) -> dict[str, Any]:
    """The majority-class (tag) baseline on the test examples used."""
    majority = task.majority_baseline("test")
    if cfg.max_eval_examples is None:
        return majority
    top = task.labels.index(majority["label"])
    y = data["test"][1]
    if task.task_type == "token":
        words = [[t for t in lab if t != -100] for lab in y]
        metrics = token_metrics(words, [[top] * len(w) for w in words], task.labels)
    else:
        metrics = classification_metrics(y, [top] * len(y))
    return {"label": majority["label"], **metrics}


def finetune(
    model_path: str,
    cfg: FinetuneConfig,
    out_dir: str | Path,
    log: Callable[[str], Any] | None = print,
    *,
    verify: bool = True,
) -> dict[str, Any]:
    """Fine-tune every model kind of ``cfg.models`` once per seed and report mean ± std.

    Args:
        model_path: a CmplxBERT directory (from ``complexformer complexify``), or a real BERT
            (hub name, local directory, or ``minilm``) to complexify without further
            pre-training. The real baselines use the CmplxBERT's base.
        cfg: the settings.
        out_dir: results: ``runs/<kind>-seed<s>.json`` (one per finished run; rerunning the
            same command skips them), ``finetune.json`` and ``finetune.md``.
        log: message sink.
        verify: check a CmplxBERT directory against its manifest before anything is read
            from it (False: read it unchecked, ``--no-verify``).

    Returns:
        The ``finetune.json`` payload: config, task sizes, majority baseline, per-run results
        and per-model mean ± std of test accuracy and macro-F1.
    """
    transformers = require("transformers", "hf", "finetune")
    log = log or (lambda _m: None)
    out = Path(out_dir)
    if verify and is_cmplxbert_dir(model_path):
        verify_cmplxbert(model_path)  # before its tokenizer and meta are read below
    (out / "runs").mkdir(parents=True, exist_ok=True)
    with cpu_settings(cfg.num_threads or None):
        task = load_classification_task(
            cfg.task, cfg.text_field, cfg.label_field, cfg.task_type, cfg.pair_field
        )
        log(f"task {task.name} ({task.task_type}): {task.num_labels} classes, sizes {task.stats()}")
        src = model_path if is_cmplxbert_dir(model_path) else resolve_base(model_path)
        local = {"local_files_only": True} if Path(src).exists() else {}
        tok = transformers.AutoTokenizer.from_pretrained(src, **local)
        data = _tokenize(tok, task, cfg)
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
        pooling = (
            "tokens" if task.task_type == "token" else resolve_pooling(cfg.pooling, model_path)
        )
        log(f"pooling: {pooling}")
        majority = _majority(task, data, cfg)
        log(f"majority class '{majority['label']}': test accuracy {majority['accuracy']:.3f}")
        runs: list[dict[str, Any]] = []
        counts: dict[str, int] = {}
        real_rank = cfg.real_lora_rank
        settings = {"model_path": str(model_path), **_run_settings(cfg)}  # of every run here
        for kind in cfg.models:
            for seed in cfg.seeds:
                path = out / "runs" / f"{kind}-seed{seed}.json"
                if path.is_file():
                    rec = json.loads(path.read_text(encoding="utf-8"))
                    _check_finished(path, rec, settings)
                    log(f"{kind} seed {seed}: done before ({path}), skipped")
                    runs.append(rec)
                    counts[kind] = rec["trainable_params"]
                    continue
                if kind == "real-lora" and real_rank is None:
                    target = counts.get("cmplxbert")
                    if target is None:
                        torch.manual_seed(0)
                        target = trainable_parameter_counts(
                            build_classifier(
                                "cmplxbert", model_path, task.num_labels, cfg, verify=verify
                            )
                        )[0]
                    real_rank = _match_real_lora_rank(model_path, task.num_labels, cfg, target)
                    log(f"real LoRA rank {real_rank} (matched to {target:,} trainable params)")

                def build(kind=kind, rank=real_rank) -> nn.Module:
                    model = build_classifier(
                        kind, model_path, task.num_labels, cfg, rank, verify=verify
                    )
                    return MeanPooled(model) if pooling == "mean" else model

                run_dir = out / "train" / f"{kind}-seed{seed}"
                keep = None
                if cfg.save_models and kind.startswith("cmplxbert"):

                    def keep(model, directory, seed=seed):
                        save_finetuned(model, directory, model_path, tok, task, cfg, seed)

                res, model = _run_one(
                    kind, build, data, cfg, seed, pad_id, run_dir, task.labels, keep
                )
                trainable, total = trainable_parameter_counts(model)
                counts[kind] = trainable
                rec = {
                    "model": kind,
                    "seed": seed,
                    "trainable_params": trainable,
                    "all_params": total,
                    **({"real_lora_rank": real_rank} if kind == "real-lora" else {}),
                    **({"model_dir": str(run_dir / "model")} if keep is not None else {}),
                    **res,
                    "settings": settings,
                }
                write_json(path, rec)
                runs.append(rec)
                log(
                    f"{kind} seed {seed}: test accuracy {res['test']['accuracy']:.4f}, macro-F1 "
                    f"{res['test']['macro_f1']:.4f} ({trainable:,} trainable, "
                    f"{res['train_s']:.0f} s)"
                )
                del model
        summary = _summarise(runs, cfg.models)
        metric = "macro_f1" if task.task_type == "token" else "accuracy"
        paired = _paired(runs, cfg.models, metric)
        payload = {
            "model": model_path,
            "config": asdict(cfg),
            "pooling": pooling,
            "task": task.name,
            "task_type": task.task_type,
            "labels": task.labels,
            "sizes": {s: len(v[0]) for s, v in data.items()},
            "majority": majority,
            "summary": summary,
            "paired": paired,
            "runs": [
                {k: v for k, v in r.items() if k not in ("test_predictions", "settings")}
                for r in runs
            ],
        }
        write_report(out, "finetune", payload, _markdown(payload))
        _plot(payload, metric, out / "finetune.png")
        return payload


def _plot(p: dict[str, Any], metric: str, path: Path) -> None:
    """Each model's test ``metric`` per seed (points) and mean (bar), the majority class as a
    line; skipped without matplotlib (the ``plot`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    kinds = list(p["summary"])
    fig, ax = plt.subplots(figsize=(1.6 + 1.5 * len(kinds), 3.6))
    for i, k in enumerate(kinds):
        ys = [r["test"][metric] for r in p["runs"] if r["model"] == k]
        ax.bar(i, sum(ys) / len(ys), color="#9ecae1", width=0.6)
        ax.plot([i] * len(ys), ys, "o", color="#08519c", markersize=4)
    ax.axhline(p["majority"][metric], color="k", linewidth=0.8, label="majority class")
    ax.set_xticks(range(len(kinds)), kinds, fontsize=8)
    ax.set_ylabel(f"test {metric.replace('_', '-')}")
    ax.set_title(f"{p['task']}: mean (bar) and seeds (points)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_output(path) as tmp:  # refuses a symbolic link at path
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)


def _paired(runs: list[dict[str, Any]], kinds, metric: str) -> dict[str, Any]:
    """The first model kind against each other one on the test ``metric``: the difference
    paired over the seeds both have (same seed: same data order and new-weight init), its
    two-sided t-test, and the ratio of the means."""
    if len(kinds) < 2:
        return {}
    by = {k: {r["seed"]: r["test"][metric] for r in runs if r["model"] == k} for k in kinds}
    first, out = kinds[0], {"metric": metric, "model": kinds[0], "against": {}}
    for other in kinds[1:]:
        seeds = sorted(set(by[first]) & set(by[other]))
        if not seeds:
            continue
        test = paired_t_test([by[first][s] - by[other][s] for s in seeds])
        mine = sum(by[first][s] for s in seeds) / len(seeds)
        theirs = sum(by[other][s] for s in seeds) / len(seeds)
        out["against"][other] = {**test, "ratio": mine / theirs if theirs else None}
    return out


def _summarise(runs: list[dict[str, Any]], kinds) -> dict[str, dict[str, Any]]:
    out = {}
    for kind in kinds:
        rs = [r for r in runs if r["model"] == kind]
        if not rs:
            continue
        acc = mean_std([r["test"]["accuracy"] for r in rs])
        f1 = mean_std([r["test"]["macro_f1"] for r in rs])
        if all("entity_f1" in r["test"] for r in rs):
            ent = mean_std([r["test"]["entity_f1"] for r in rs])
            out.setdefault(kind, {}).update(entity_f1_mean=ent[0], entity_f1_std=ent[1])
        out[kind] = {
            **out.get(kind, {}),
            "n": len(rs),
            "accuracy_mean": acc[0],
            "accuracy_std": acc[1],
            "macro_f1_mean": f1[0],
            "macro_f1_std": f1[1],
            "trainable_params": rs[0]["trainable_params"],
            "train_s_mean": sum(r["train_s"] for r in rs) / len(rs),
        }
        probes = [[g for g in r.get("growth") or [] if g["updates"] <= GROWTH_WINDOW] for r in rs]
        if all(probes):  # adapter growth over the first updates, worst probe of each run
            for key in ("imag_to_real", "cosine"):
                m, sd = mean_std([max(g[key] for g in ps) for ps in probes])
                out[kind].update({f"{key}_max_mean": m, f"{key}_max_std": sd})
    return out


def _markdown(p: dict[str, Any]) -> str:
    names = {
        "cmplxbert": "CmplxBERT-LoRA",
        "cmplxbert-paper": "CmplxBERT-LoRA, paper's start",
        "real": "real BERT (full fine-tuning)",
        "real-lora": "real BERT + real LoRA",
    }
    entity = bool(p["summary"]) and all("entity_f1_mean" in s for s in p["summary"].values())
    rows = [
        [
            names[k],
            s["n"],
            f"{s['trainable_params']:,}",
            f"{s['accuracy_mean']:.4f} ± {s['accuracy_std']:.4f}",
            f"{s['macro_f1_mean']:.4f} ± {s['macro_f1_std']:.4f}",
            *([f"{s['entity_f1_mean']:.4f} ± {s['entity_f1_std']:.4f}"] if entity else []),
            _growth_cell(s, "imag_to_real"),
            _growth_cell(s, "cosine"),
            f"{s['train_s_mean']:.0f}",
        ]
        for k, s in p["summary"].items()
    ]
    m = p["majority"]
    rows.append(
        [
            f"majority class ({m['label']})",
            "-",
            "0",
            f"{m['accuracy']:.4f}",
            f"{m['macro_f1']:.4f}",
            *([f"{m.get('entity_f1', 0.0):.4f}"] if entity else []),
            "-",
            "-",
            "-",
        ]
    )
    c = p["config"]
    head = (
        f"Fine-tuning on `{p['task']}` ({len(p['labels'])} classes; train/validation/test "
        f"{p['sizes']['train']}/{p['sizes']['validation']}/{p['sizes']['test']}), "
        f"{c['epochs']} epochs, lr {c['lr']:g}, batch {c['batch_size']}, max_len "
        f"{c['max_len']}, {p['pooling']} pooling, seeds {list(c['seeds'])}; model "
        f"`{p['model']}`.\n\n"
        + (
            "Test token accuracy (= token-level micro-F1), macro-F1 over tags"
            + (" and entity F1 (BIO chunks, as seqeval)" if entity else "")
            if p.get("task_type") == "token"
            else "Test accuracy and macro-F1"
        )
        + ": mean ± std over seeds. Growth over the first "
        f"{GROWTH_WINDOW} updates, on {PROBE_EXAMPLES} validation examples: the largest "
        "imaginary-to-real energy of the last hidden states and the largest mean pairwise "
        "cosine of the sentence vectors (mean ± std over seeds).\n\n"
    )
    cols = ["model", "seeds", "trainable params", "accuracy", "macro-F1"]
    cols += ["entity F1"] if entity else []
    cols += ["max Im/Re", "max cosine", "train s"]
    table = head + markdown_table(cols, rows, align="lrr" + "r" * (len(cols) - 3))
    pr = p.get("paired") or {}
    if pr.get("against"):
        rows = [
            [names[k], str(t["n"]), f"{t['mean']:+.4f}",
             "no test" if t["p"] is None else format_p(t["p"]),
             "-" if t["ratio"] is None else f"{t['ratio']:.3f}"]
            for k, t in pr["against"].items()
        ]  # fmt: skip
        table += (
            f"\n\n{names[pr['model']]} minus each other model, test {pr['metric']} paired "
            "over seeds (two-sided paired t-test) and the ratio of the means.\n\n"
            + markdown_table(["against", "seeds", "difference", "p", "ratio"], rows, "lrrrr")
        )
    return table


def _growth_cell(s: dict[str, Any], key: str) -> str:
    if f"{key}_max_mean" not in s:
        return "-"
    return f"{s[f'{key}_max_mean']:.3f} ± {s[f'{key}_max_std']:.3f}"
