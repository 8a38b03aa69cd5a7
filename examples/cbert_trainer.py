"""Fine-tune a CmplxBERT with transformers' ``Trainer`` on GLUE or a GLUE-format local file.

The same script serves an online user pointing at the Hub's GLUE and an offline one with local
files in GLUE's format (JSON lines or CSV with ``sentence``, or ``sentence1`` and
``sentence2``, and an integer ``label``)::

    python examples/cbert_trainer.py --base minilm --data glue:sst2 --out runs/sst2      # online
    python examples/cbert_trainer.py --base minilm --data data/mytask --out runs/mine    # local

A local ``--data`` is a folder with ``train`` and ``validation`` (and optionally ``test``)
``.jsonl``/``.json``/``.csv`` files, read with ``datasets.load_dataset``. The model is
:func:`complexformer.cmplxbert.complexify` of the base, as a
``CmplxBertForSequenceClassification``; only its adapters, complex biases, norms and the new
classifier train. The optimizer is the one of ``cbert-finetune`` (AdamW, betas 0.9/0.999,
eps 1e-8, the classifier at ``--lr`` and everything else at ``--lr`` × ``--base-lr-ratio``,
weight decay on the classifier's weight matrix only, linear warm-up then linear decay,
gradients clipped at 1), so the two runs are comparable. ``OUT/model`` is the fine-tuned
model (``save_pretrained``: only what trains, the real weights rebuilt from ``--base`` when it
is loaded), with the tokenizer; ``OUT/result.json`` the test metrics.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from complexformer.cmplxbert import complexify, load_hf_bert
from complexformer.cmplxbert.loading import resolve_base
from complexformer.hf.cmplxbert import to_transformers

SPLITS = ("train", "validation", "test")


def load_glue_like(spec: str):
    """A ``DatasetDict`` of ``glue:NAME`` (the Hub's GLUE task) or of a local folder with
    GLUE-format split files."""
    import datasets

    if spec.startswith("glue:"):
        return datasets.load_dataset("nyu-mll/glue", spec.split(":", 1)[1])
    d = Path(spec)
    files: dict[str, str] = {}
    kind = None
    for split in SPLITS:
        for ext, loader in ((".jsonl", "json"), (".json", "json"), (".csv", "csv")):
            if (d / f"{split}{ext}").is_file():
                files[split], kind = str(d / f"{split}{ext}"), loader
                break
    if "train" not in files or "validation" not in files:
        raise FileNotFoundError(
            f"{d}: needs train and validation files (.jsonl, .json or .csv), found {sorted(files)}"
        )
    return datasets.load_dataset(kind, data_files=files)


def text_columns(columns: list[str], text_field: str | None) -> tuple[str, str | None]:
    """(first text column, second text column or None) in GLUE's naming."""
    if text_field:
        return text_field, None
    if "sentence1" in columns and "sentence2" in columns:
        return "sentence1", "sentence2"
    for name in ("sentence", "text", "question"):
        if name in columns:
            return name, None
    raise ValueError(
        f"no text column: expected sentence, or sentence1 and sentence2; got {columns}"
    )


def build_model(base: str, num_labels: int, rank: int, pooling: str, seed: int):
    """The ``CmplxBertForSequenceClassification`` of ``base`` (new classifier seeded)."""
    torch.manual_seed(seed)
    real, _ = load_hf_bert(base, "classification", num_labels)
    model = complexify(real, r=rank)
    model.pooling = pooling
    model.classifier.base_layer.requires_grad_(True)
    return to_transformers(model)


def optimizer(model, lr: float, base_lr_ratio: float, weight_decay: float):
    """AdamW with ``cbert-finetune``'s groups: the classifier at ``lr``, the rest at
    ``lr * base_lr_ratio``; weight decay only on trained 2-D linear weights."""
    groups: dict[tuple[bool, bool], list] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        head = name.startswith("cmplxbert.classifier.")
        decay = name.endswith("base_layer.weight") and p.dim() == 2
        groups.setdefault((head, decay), []).append(p)
    return torch.optim.AdamW(
        [
            {
                "params": ps,
                "lr": lr if head else lr * base_lr_ratio,
                "weight_decay": weight_decay if decay else 0.0,
            }
            for (head, decay), ps in groups.items()
        ],
        betas=(0.9, 0.999),
        eps=1e-8,
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Tokenize, train with ``Trainer``, evaluate on validation and test; returns metrics."""
    import transformers

    out = Path(args.out)
    data = load_glue_like(args.data)
    first, second = text_columns(data["train"].column_names, args.text_field)
    base = resolve_base(args.base)
    tok = transformers.AutoTokenizer.from_pretrained(base)

    def encode(batch):
        pair = (batch[first], batch[second]) if second else (batch[first],)
        return tok(*pair, truncation=True, max_length=args.max_len)

    data = data.map(encode, batched=True)
    if args.max_train_examples and args.max_train_examples < len(data["train"]):
        # cbert-finetune's fixed subset: the same examples for every model and seed
        rows = random.Random(0).sample(range(len(data["train"])), args.max_train_examples)
        data["train"] = data["train"].select(sorted(rows))
    num_labels = 1 + max(max(data[s]["label"]) for s in ("train", "validation"))
    model = build_model(base, num_labels, args.rank, args.pooling, args.seed)
    steps = -(-len(data["train"]) // args.batch_size) * args.epochs
    opt = optimizer(model, args.lr, args.base_lr_ratio, args.weight_decay)
    sched = transformers.get_linear_schedule_with_warmup(opt, int(args.warmup_frac * steps), steps)
    targs = transformers.TrainingArguments(
        output_dir=str(out / "trainer"),
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=64,
        num_train_epochs=args.epochs,
        max_grad_norm=1.0,
        seed=args.seed,
        data_seed=args.seed,
        save_strategy="no",
        logging_steps=10,
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0,
        disable_tqdm=not args.progress,
    )

    def metrics(pred):
        return {"accuracy": float((np.argmax(pred.predictions, -1) == pred.label_ids).mean())}

    keep = [c for c in data["train"].column_names if c in ("input_ids", "attention_mask",
                                                            "token_type_ids", "label")]  # fmt: skip
    trainer = transformers.Trainer(
        model=model,
        args=targs,
        train_dataset=data["train"].select_columns(keep),
        eval_dataset=data["validation"].select_columns(keep),
        data_collator=transformers.DataCollatorWithPadding(tok),
        compute_metrics=metrics,
        optimizers=(opt, sched),
    )
    trainer.train()
    result = {"validation": trainer.evaluate()}
    if "test" in data and -1 not in set(data["test"]["label"]):  # GLUE hides test labels
        test = data["test"].select_columns(keep)
        result["test"] = trainer.evaluate(test, metric_key_prefix="test")
    model.save_pretrained(out / "model")
    tok.save_pretrained(out / "model")
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", default="minilm", help="real BERT: hub name, directory or minilm")
    p.add_argument("--data", required=True, help="glue:NAME (online) or a local folder")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--text-field", default=None, help="text column (default: GLUE's names)")
    p.add_argument("--rank", type=int, default=8, help="complex LoRA rank (8)")
    p.add_argument("--pooling", default="mean", choices=("cls", "mean"), help="sentence vector")
    p.add_argument("--epochs", type=int, default=2, help="epochs (2)")
    p.add_argument("--lr", type=float, default=1e-3, help="classifier learning rate (1e-3)")
    p.add_argument("--base-lr-ratio", type=float, default=0.3, help="the rest at lr x this")
    p.add_argument("--batch-size", type=int, default=16, help="examples per update (16)")
    p.add_argument("--max-len", type=int, default=128, help="tokens per example (128)")
    p.add_argument("--warmup-frac", type=float, default=0.1, help="warm-up share (0.1)")
    p.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay")
    p.add_argument("--max-train-examples", type=int, default=None, help="train on N examples")
    p.add_argument("--seed", type=int, default=0, help="seed of the head, data order, dropout")
    p.add_argument("--progress", action="store_true", help="show the Trainer's progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    result = run(parser().parse_args(argv))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
