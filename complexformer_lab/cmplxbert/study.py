"""Convergence study: does more MLM pre-training close the fine-tuning gap of CmplxBERT?

Tamburini 2024 continues MLM pre-training of the complexified BERT before fine-tuning, and its
claim is that the result is "in line with" the real BERT. :func:`run_study` measures that
curve on one machine, in named steps:

1. ``pretrain``: one MLM run of ``max_steps`` updates (the shared loop, one learning-rate
   schedule), with a checkpoint every ``every`` updates, all kept;
2. ``export``: the adapters at MLM steps 0 (the fresh complexified model), ``every``,
   ``2·every``, ... saved as CmplxBERT directories, with the validation MLM loss of each;
3. ``finetune``: each point fine-tuned on the labelled task, one run per seed;
4. ``references``: the real BERT (full fine-tuning), the real LoRA with as many trainable
   parameters and the complexified model in real mode (real scores and heads, no MLM), fine-tuned
   on the same data and seeds: horizontal lines;
5. ``report``: ``study.json``, ``study.md`` and ``study.png`` (accuracy and MLM loss against
   MLM steps), with each point's accuracy minus each reference's, paired over seeds, and its
   two-sided paired t-test.

Every step keeps what it wrote: a repeated command resumes the MLM run from its newest
checkpoint and skips finished fine-tuning runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from complexformer.cmplxbert.config import CmplxBertConfig, ComplexLoRAConfig
from complexformer.cmplxbert.finetune import FinetuneConfig
from complexformer.cmplxbert.loading import is_cmplxbert_dir
from complexformer.cmplxbert.mlm import MLMTask
from complexformer.config import ConfigBase
from complexformer.results import MIN_PAIRS, format_p, markdown_table, paired_t_test, write_report
from complexformer.runtime import cpu_settings
from complexformer.storage import atomic_output, atomic_write_text
from complexformer.training import TrainConfig, train_task
from complexformer.training.checkpoint import CHECKPOINTS_DIR, list_checkpoints, load_checkpoint

from .docstrings import build_docstring_dataset
from .finetune import finetune

__all__ = ["StudyConfig", "run_study"]


@dataclass
class StudyConfig(ConfigBase):
    """Settings of :func:`run_study`.

    Attributes:
        base: the real BERT (hub name, local directory or ``minilm``).
        data: the MLM corpus: ``docstrings`` (the docstring task's training texts) or a
            corpus spec of ``complexformer train`` (``stdlib``, ``text:GLOB``, ``hf:NAME``).
        task: the fine-tuning task spec (a built-in task, a file, a folder or
            ``hf:NAME[:CONFIG]``).
        lora: the adapters (:class:`ComplexLoRAConfig`).
        model: the complex model (e.g. ``CmplxBertConfig.paper()``).
        max_steps: the MLM run's optimizer updates.
        every: MLM updates between the points (steps 0, every, 2·every, ... and max_steps).
        batch_size: the MLM run's global batch, in sequences.
        grad_accum: the MLM run's micro-batches per update.
        max_len: the MLM run's tokens per sequence, [CLS] and [SEP] included.
        lr: the MLM run's peak learning rate.
        base_lr_ratio: the MLM run's rate of everything but a new head's weights, as a
            fraction of lr (see :class:`~complexformer.cmplxbert.mlm.MLMTask`).
        warmup_frac: the MLM run's share of updates in linear warm-up.
        weight_decay: the MLM run's AdamW weight decay.
        seeds: fine-tuning seeds, one run per seed at every point.
        ft_epochs: fine-tuning epochs at every point.
        ft_lr: fine-tuning peak learning rate of the new head.
        ft_base_lr_ratio: fine-tuning rate of everything but the new head, as a fraction of
            ft_lr (see :class:`FinetuneConfig`).
        ft_batch_size: fine-tuning examples per update.
        ft_max_len: fine-tuning tokens per example (None: max_len).
        max_train_examples: fine-tune on a fixed random subset of N examples (None: all).
        max_eval_examples: validate and test on fixed random subsets of N examples.
        pooling: fine-tuning's sentence vector, cls, mean or auto (see
            :class:`FinetuneConfig`).
        seed: the MLM run's seed.
        bf16: bf16 autocast in the MLM run.
        num_threads: torch CPU threads (None: torch's default).
        device: ``"cpu"``, ``"cuda"`` or ``"auto"``.
    """

    base: str = "minilm"
    data: str = "docstrings"
    task: str = "docstrings"
    lora: ComplexLoRAConfig = field(default_factory=ComplexLoRAConfig)
    model: CmplxBertConfig = field(default_factory=CmplxBertConfig)
    max_steps: int = 2000
    every: int = 500
    batch_size: int = 32
    grad_accum: int = 1
    max_len: int = 128
    lr: float = 1e-4
    base_lr_ratio: float = 1.0
    warmup_frac: float = 0.1
    weight_decay: float = 0.01
    seeds: tuple[int, ...] = (0, 1, 2)
    ft_epochs: int = 2
    ft_lr: float = 1e-3
    ft_base_lr_ratio: float = 0.3
    ft_batch_size: int = 16
    ft_max_len: int | None = None
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    pooling: str = "auto"
    seed: int = 0
    bf16: bool = False
    num_threads: int | None = None
    device: str = "auto"

    def __post_init__(self) -> None:
        self.seeds = tuple(int(s) for s in self.seeds)
        if isinstance(self.lora, dict):
            self.lora = ComplexLoRAConfig.from_dict(self.lora)
        if isinstance(self.model, dict):
            self.model = CmplxBertConfig.from_dict(self.model)
        if not (isinstance(self.every, int) and self.every >= 1):
            raise ValueError(f"StudyConfig: every must be an integer >= 1, got {self.every!r}")
        if not (isinstance(self.max_steps, int) and self.max_steps >= self.every):
            raise ValueError(
                f"StudyConfig: max_steps must be an integer >= every ({self.every}), got "
                f"{self.max_steps!r}"
            )
        if not self.seeds:
            raise ValueError("StudyConfig: seeds must name at least one seed")

    @property
    def steps(self) -> list[int]:
        """The MLM steps of the points: 0, every, 2·every, ... and max_steps."""
        return sorted({0, *range(self.every, self.max_steps + 1, self.every), self.max_steps})

    def finetune_config(self, **changes: Any) -> FinetuneConfig:
        """The fine-tuning settings of every run (the CmplxBERT only, unless ``changes``)."""
        kw = dict(
            task=self.task,
            models=("cmplxbert",),
            seeds=self.seeds,
            epochs=self.ft_epochs,
            lr=self.ft_lr,
            base_lr_ratio=self.ft_base_lr_ratio,
            batch_size=self.ft_batch_size,
            max_len=self.ft_max_len or self.max_len,
            max_train_examples=self.max_train_examples,
            max_eval_examples=self.max_eval_examples,
            pooling=self.pooling,
            num_threads=self.num_threads,
            device=self.device,
        )
        return FinetuneConfig(**{**kw, **changes})


def _corpus(cfg: StudyConfig, out: Path) -> str:
    """The MLM corpus spec; ``docstrings``: the training texts of the docstring task, written
    to ``out/data/train.jsonl`` (so the MLM never sees a validation or test docstring)."""
    if cfg.data != "docstrings":
        return cfg.data
    path = out / "data" / "train.jsonl"
    if not path.is_file():
        build_docstring_dataset().write_jsonl(out / "data")
    return f"text:{path}"


def _pretrain(cfg: StudyConfig, out: Path, log, run: str = "mlm") -> tuple[MLMTask, TrainConfig]:
    """Step 1: the MLM run, a checkpoint every ``every`` updates, all kept."""
    task = MLMTask(
        cfg.base, cfg.lora, cfg.model, max_len=cfg.max_len, base_lr_ratio=cfg.base_lr_ratio
    )
    tc = TrainConfig(
        out_dir=str(out / run),
        data=_corpus(cfg, out),
        max_steps=cfg.max_steps,
        batch_size=cfg.batch_size,
        grad_accum=cfg.grad_accum,
        lr=cfg.lr,
        warmup_frac=cfg.warmup_frac,
        min_lr_ratio=0.0,
        schedule="linear",
        weight_decay=cfg.weight_decay,
        eval_every=cfg.every,
        log_every=max(1, min(10, cfg.every)),
        save_every=cfg.every,
        keep_last=len(cfg.steps) + 1,
        seed=cfg.seed,
        bf16=cfg.bf16,
        device=cfg.device,
        num_threads=cfg.num_threads,
    )
    train_task(task, tc, resume=True, log=log)
    return task, tc


def _validation(task: MLMTask, cfg: StudyConfig, log) -> dict[str, Any]:
    """The study's MLM validation: with ``data="docstrings"`` the docstring task's validation
    texts (unseen by the MLM and by fine-tuning's training), else the corpus's validation
    split; and the unigram (token-prior) baseline on the same masked tokens."""
    if cfg.data == "docstrings":
        texts = [e.text for e in build_docstring_dataset().splits["validation"]]
        task.set_validation_texts(texts)
    uni = task.evaluate_unigram(cfg.batch_size)
    log(f"validation: {uni['tokens']} masked tokens; unigram baseline loss {uni['loss']:.4f}")
    return {"masked_tokens": uni["tokens"], "unigram_loss": uni["loss"]}


def _model_at(task: MLMTask, cfg: StudyConfig, run: Path, step: int):
    """The MLM run's model after ``step`` updates (0: the fresh complexified model)."""
    torch.manual_seed(cfg.seed)  # the run's initial adapters (as the loop seeds them)
    model = task.build_model()
    if step > 0:
        ckpts = dict(list_checkpoints(run / CHECKPOINTS_DIR))
        if step not in ckpts:
            raise FileNotFoundError(f"no checkpoint of MLM step {step} in {run}")
        task.load_checkpoint_into(model, load_checkpoint(ckpts[step]))
    return model


def _val_loss(task: MLMTask, model, cfg: StudyConfig) -> float | None:
    device = next(model.parameters()).device
    m = task.evaluate(model, cfg.batch_size, device, False, 0, 1, None)
    return None if m is None else m["loss"]


def _export(task: MLMTask, cfg: StudyConfig, out: Path, log) -> dict[int, dict[str, Any]]:
    """Step 2: a CmplxBERT directory per point and its validation MLM loss."""
    points = {}
    for step in cfg.steps:
        d = out / "points" / f"step{step}"
        meta_path = d / "study_point.json"
        meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
        saved = is_cmplxbert_dir(d)
        if not saved or "val_tokens" not in meta:  # scored on the study's validation tokens
            model = _model_at(task, cfg, out / "mlm", step)
            if not saved:
                task.save_final(model, d)
            meta = {"step": step, "val_loss": _val_loss(task, model, cfg)}
            meta["val_tokens"] = len(task.val_tokens)
            atomic_write_text(meta_path, json.dumps(meta))
            del model
        points[step] = {"step": step, "val_loss": meta["val_loss"], "dir": str(d)}
        log(f"point {step}: validation MLM loss {meta['val_loss']}")
    return points


def _real_mode_curve(cfg: StudyConfig, out: Path, log) -> dict[str, float | None]:
    """The reference MLM run: the same adapters, data and new MLM head with real-part scores
    and heads (the real model at step 0), scored at the same steps on the same tokens."""
    real = cfg.replace(model=cfg.model.replace(attention_score="real", head_output="real"))
    path = out / "mlm-real-mode.json"
    curve = json.loads(path.read_text()) if path.is_file() else {}
    if len(curve) == len(cfg.steps):
        return curve
    task, _ = _pretrain(real, out, log, run="mlm-real-mode")
    _validation(task, real, log)
    for step in cfg.steps:
        model = _model_at(task, real, out / "mlm-real-mode", step)
        curve[str(step)] = _val_loss(task, model, real)
        log(f"real-mode reference, step {step}: validation MLM loss {curve[str(step)]}")
        del model
    atomic_write_text(path, json.dumps(curve))
    return curve


def _summary(payload: dict[str, Any], kind: str) -> dict[str, Any]:
    s = payload["summary"][kind]
    keys = ("accuracy_mean", "accuracy_std", "macro_f1_mean", "macro_f1_std", "trainable_params")
    runs = sorted((r["seed"], r["test"]["accuracy"]) for r in payload["runs"] if r["model"] == kind)
    return {**{k: s[k] for k in keys}, "accuracy_by_seed": {str(k): v for k, v in runs}}


def _paired(point: dict[str, Any], refs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per reference: the paired t-test of (point − reference) test accuracy over the seeds
    both have (same seed: same data order and initialisation of the new weights)."""
    mine = point["accuracy_by_seed"]
    out = {}
    for name, ref in refs.items():
        seeds = sorted(set(mine) & set(ref["accuracy_by_seed"]), key=int)
        out[name] = paired_t_test([mine[k] - ref["accuracy_by_seed"][k] for k in seeds])
    return out


def run_study(
    cfg: StudyConfig, out_dir: str | Path, log: Callable[[str], Any] | None = print
) -> dict[str, Any]:
    """Run the convergence study (see the module docstring); returns ``study.json``'s payload."""
    log = log or (lambda _m: None)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with cpu_settings(cfg.num_threads or None):
        task, _ = _pretrain(cfg, out, log)
        validation = _validation(task, cfg, log)
        points = _export(task, cfg, out, log)
        for step, p in points.items():  # step 3: fine-tune every point
            res = finetune(p["dir"], cfg.finetune_config(), out / "finetune" / f"step{step}", log)
            p.update(_summary(res, "cmplxbert"))
        validation["real_mode_loss"] = _real_mode_curve(cfg, out, log)
        refs = {}  # step 4: the references
        real = finetune(
            cfg.base,
            cfg.finetune_config(models=("real", "real-lora")),
            out / "finetune" / "real",
            log,
        )
        refs["real BERT"] = _summary(real, "real")
        refs["real LoRA"] = _summary(real, "real-lora")
        real_mode = cfg.finetune_config(
            lora=ComplexLoRAConfig(r=cfg.lora.r),
            model=CmplxBertConfig(attention_score="real", head_output="real", whiten="scalar"),
        )
        res = finetune(cfg.base, real_mode, out / "finetune" / "real-mode", log)
        refs["CmplxBERT, real mode, no MLM"] = _summary(res, "cmplxbert")
        for p in points.values():  # paired over seeds, against every reference
            p["paired"] = _paired(p, refs)
        payload = {
            "config": asdict(cfg),
            "points": [points[s] for s in sorted(points)],
            "references": refs,
            "majority": real["majority"],
            "validation": validation,
        }
        write_report(out, "study", payload, _markdown(payload))
        _plot(payload, out / "study.png")
    return payload


def _markdown(p: dict[str, Any]) -> str:
    c = p["config"]
    rows = [
        [
            str(x["step"]),
            "-" if x["val_loss"] is None else f"{x['val_loss']:.3f}",
            f"{x['accuracy_mean']:.4f} ± {x['accuracy_std']:.4f}",
            f"{x['macro_f1_mean']:.4f} ± {x['macro_f1_std']:.4f}",
        ]
        for x in p["points"]
    ]
    rows += [
        [name, "-", f"{r['accuracy_mean']:.4f} ± {r['accuracy_std']:.4f}",
         f"{r['macro_f1_mean']:.4f} ± {r['macro_f1_std']:.4f}"]
        for name, r in p["references"].items()
    ]  # fmt: skip
    m = p["majority"]
    rows.append([f"majority class ({m['label']})", "-", f"{m['accuracy']:.4f}", "-"])
    head = (
        f"CmplxBERT convergence study: `{c['base']}`, MLM on `{c['data']}` "
        f"({c['max_steps']} updates of {c['batch_size']} × {c['max_len']} tokens, lr "
        f"{c['lr']:g}), fine-tuned on `{c['task']}` at every {c['every']} updates "
        f"({len(c['seeds'])} seeds, {c['ft_epochs']} epochs at {c['ft_lr']:g}). Test accuracy "
        "and macro-F1: mean ± std over seeds.\n\n"
    )
    v = p.get("validation")
    if v:
        real = v.get("real_mode_loss", {})
        for row in rows[: len(p["points"])]:
            loss = real.get(row[0])
            row.insert(2, "-" if loss is None else f"{loss:.3f}")
        for row in rows[len(p["points"]) :]:
            row.insert(2, "-")
        head += (
            f"Validation MLM loss on {v['masked_tokens']} masked tokens; the unigram "
            f"(token-prior) baseline scores {v['unigram_loss']:.3f} on the same tokens. "
            "The real-mode column is the same MLM run with real-part scores and heads "
            "(the real model with the same new MLM head at step 0).\n\n"
        )
    cols = ["MLM step / reference", "val MLM loss"]
    cols += ["real-mode MLM loss"] if v else []
    cols += ["accuracy", "macro-F1"]
    names = list(p["references"])
    paired = [
        [str(x["step"])]
        + [
            "n/a" if (d := x["paired"][n])["mean"] is None
            else f"{d['mean']:+.4f} ({_p_text(d['p'])})"
            for n in names
        ]
        for x in p["points"]
    ]  # fmt: skip
    return (
        head
        + markdown_table(cols, rows, align="l" + "r" * (len(cols) - 1))
        + "\n\nTest accuracy of each point minus each reference, paired over seeds: mean "
        "difference and the two-sided paired t-test (no p-value with fewer than "
        f"{MIN_PAIRS} seeds or equal differences).\n\n"
        + markdown_table(
            ["MLM step", *(f"vs {n}" for n in names)], paired, align="l" + "r" * len(names)
        )
    )


def _p_text(p: float | None) -> str:
    """``p = 0.074``, ``p < 0.001`` or ``no test``."""
    if p is None:
        return "no test"
    s = format_p(p)
    return "p < 0.001" if s.startswith("<") else f"p = {s}"


def _plot(p: dict[str, Any], path: Path) -> None:
    """Accuracy (mean ± std) and validation MLM loss against MLM steps, references as
    horizontal lines; skipped without matplotlib (the ``plot`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    steps = [x["step"] for x in p["points"]]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
    ax.errorbar(
        steps,
        [x["accuracy_mean"] for x in p["points"]],
        yerr=[x["accuracy_std"] for x in p["points"]],
        marker="o",
        capsize=3,
        label="CmplxBERT (this study's settings)",
    )
    styles = iter(["--", "-.", ":", (0, (5, 1))])
    for name, r in p["references"].items():
        ax.axhline(r["accuracy_mean"], linestyle=next(styles), color="grey", label=name)
    ax.axhline(p["majority"]["accuracy"], color="k", linewidth=0.8, label="majority class")
    ax.set_xlabel("MLM updates")
    ax.set_ylabel("test accuracy after fine-tuning")
    ax.legend(fontsize=8)
    losses = [(x["step"], x["val_loss"]) for x in p["points"] if x["val_loss"] is not None]
    bx.plot([s for s, _ in losses], [v for _, v in losses], marker="o", label="CmplxBERT")
    val = p.get("validation")
    if val:
        real = [(int(k), x) for k, x in val.get("real_mode_loss", {}).items() if x is not None]
        real.sort()
        bx.plot([s for s, _ in real], [x for _, x in real], marker="s", label="real mode")
        bx.axhline(val["unigram_loss"], color="k", linestyle=":", label="unigram baseline")
        bx.legend(fontsize=8)
    bx.set_xlabel("MLM updates")
    bx.set_ylabel("validation MLM loss")
    fig.tight_layout()
    with atomic_output(path) as tmp:  # refuses a symbolic link at path
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
