"""One fine-tuning run (sequence, sentence-pair or token classification) as a
:class:`TrainTask` of the shared loop.

Tamburini 2024 (sec. 5) fine-tunes each model (CmplxBERT and the two real baselines) with
AdamW, a linear warm-up then linear decay, for a few epochs. :class:`FinetuneTask` plugs one
(model, seed) run into :func:`complexformer.training.train_task`, so fine-tuning has the
training loop's optimizer and its one weight-decay rule
(:func:`complexformer.training.optim.decay_split`: only the 2-D weights of ``nn.Linear`` are
decayed, never biases, complex biases, LayerNorm affines, embeddings or LoRA factors), its
clipping, checkpoints and exact resume.

The loop samples token blocks; a classification run instead needs shuffled epochs of
examples. The task therefore ignores the sampled blocks: the examples of update ``step`` are a
pure function of (seed, step) -- epoch ``e`` visits the examples in the ``e``-th shuffle of
``random.Random(seed)`` in batches of ``batch_size`` (the last batch of an epoch may be
smaller) -- so a resumed run sees the same batches.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from complexformer.runtime import eval_mode
from complexformer.storage import atomic_write_text
from complexformer.training.task import StepLoss, TrainTask

from .analysis import imaginary_to_real, sentence_cosine
from .io import trainable_parameter_counts
from .metrics import classification_metrics, token_metrics

__all__ = ["FinetuneTask", "collate", "predict"]

#: the file that :meth:`FinetuneTask.save_final` writes into the run's ``model`` folder.
RESULT_FILE = "result.json"
#: Validation examples of the adapter-growth probe (:meth:`FinetuneTask.probe`).
PROBE_EXAMPLES = 32


def collate(
    ids: list[list[int]],
    labels: list[Any],
    rows: list[int],
    pad_id: int,
    token_types: list[list[int]] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(input_ids (n, T), attention_mask (n, T), labels, token_type_ids (n, T) or None) of
    the examples ``rows``, right-padded with ``pad_id`` to the longest. Labels are (n,) class
    ids, or (n, T) token labels (lists per example) padded with -100."""
    t = max(len(ids[j]) for j in rows)
    x = torch.full((len(rows), t), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), t), dtype=torch.long)
    tt = None if token_types is None else torch.zeros((len(rows), t), dtype=torch.long)
    per_token = isinstance(labels[rows[0]], list)
    y = torch.full((len(rows), t), -100, dtype=torch.long) if per_token else None
    for row, j in enumerate(rows):
        n = len(ids[j])
        x[row, :n] = torch.tensor(ids[j])
        mask[row, :n] = 1
        if tt is not None:
            tt[row, :n] = torch.tensor(token_types[j])
        if y is not None:
            y[row, :n] = torch.tensor(labels[j])
    if y is None:
        y = torch.tensor([labels[j] for j in rows])
    return x, mask, y, tt


def _chunks(n: int, size: int):
    for i in range(0, n, size):
        yield list(range(i, min(i + size, n)))


def _inputs(x, m, tt, device) -> dict[str, torch.Tensor]:
    kw = {"input_ids": x.to(device), "attention_mask": m.to(device)}
    if tt is not None:
        kw["token_type_ids"] = tt.to(device)
    return kw


@torch.no_grad()
def predict(
    model: nn.Module,
    split: tuple,
    pad_id: int,
    device: torch.device,
    batch_size: int = 64,
) -> list[Any]:
    """Argmax class of every example of ``split`` ((ids, labels[, token types])); for token
    labels, the argmax tag of every labelled token (label != -100) of each example."""
    ids, labels = split[0], split[1]
    token_types = split[2] if len(split) > 2 else None
    out: list[Any] = []
    with eval_mode(model):
        for rows in _chunks(len(ids), batch_size):
            x, m, y, tt = collate(ids, labels, rows, pad_id, token_types)
            pred = model(**_inputs(x, m, tt, device)).logits.argmax(-1).cpu()
            if y.dim() == 1:
                out += pred.tolist()
            else:
                out += [p[t != -100].tolist() for p, t in zip(pred, y, strict=True)]
    return out


class FinetuneTask(TrainTask):
    """Fine-tune one classifier on tokenized splits (one model kind, one seed).

    Args:
        name: the model kind (``cmplxbert``, ``real``, ``real-lora``), for the config.
        build: returns the classifier with its trainable parameters set (the loop seeds
            torch with the run's seed first).
        data: ``{"train"|"validation"|"test": (token id lists, label ids)}``.
        settings: JSON-ready settings recorded in ``config.json`` (a resumed run must have
            the same ones).
        seed: the data-order seed.
        batch_size: examples per update.
        pad_id: the tokenizer's padding id.
        label_names: the class (tag) names; token tasks use them for the entity F1 of BIO
            tags.
        keep: called as ``keep(model, directory)`` by :meth:`save_final` to write the
            fine-tuned model itself into the run's ``model`` folder (None: results only).

    A split may carry token type ids as a third element (sentence pairs), and token tasks
    have a list of labels per example (-100 where a token is not scored).
    """

    aux_name = None
    #: a CmplxBERT encoder calls ``layer.planar`` on its layers, not their ``forward``
    shard_forward_methods = ("planar",)

    def __init__(
        self,
        name: str,
        build: Callable[[], nn.Module],
        data: dict[str, tuple[list[list[int]], list[int]]],
        settings: dict[str, Any],
        seed: int,
        batch_size: int,
        pad_id: int,
        label_names: list[str] | None = None,
        keep: Callable[[nn.Module, Path], Any] | None = None,
    ) -> None:
        if not data["train"][0]:
            raise ValueError("FinetuneTask: the train split is empty")
        self.name, self.build, self.data = name, build, data
        self.settings = json.loads(json.dumps(settings))
        self.seed, self.batch_size, self.pad_id = int(seed), int(batch_size), int(pad_id)
        self.label_names = list(label_names or [])
        self.keep = keep
        self.per_token = bool(data["train"][1]) and isinstance(data["train"][1][0], list)
        self.steps_per_epoch = math.ceil(len(data["train"][0]) / self.batch_size)
        self.model: nn.Module | None = None
        self.result: dict[str, Any] | None = None
        self._orders: dict[int, list[int]] = {}
        self.rank, self.per_rank, self.micro = 0, self.batch_size, self.batch_size
        self.growth: list[dict[str, float]] = []  # probes at 0, 1, 2, 4, ... and every 50
        self.last_step = 0

    # -- data ------------------------------------------------------------------------------
    def prepare(self, tc, out, resume, dist, log) -> None:
        if tc.batch_size != self.batch_size:
            raise ValueError(
                f"FinetuneTask: TrainConfig.batch_size {tc.batch_size} differs from the "
                f"task's {self.batch_size}"
            )
        self.rank = dist.rank
        # a sharded model runs a forward only with every rank: the probe runs everywhere
        self.probe_ranks = dist.world_size if tc.shard else 1
        self.per_rank = tc.batch_size // dist.world_size
        self.micro = self.per_rank // tc.grad_accum
        # the loop's block sampler needs a token array; the examples come from batch_rows
        self.train_tokens = np.zeros(2, dtype=np.int64)
        self.val_tokens = np.zeros(0, dtype=np.int64)

    @property
    def seq_tokens(self) -> int:
        return 2

    def epoch_order(self, epoch: int) -> list[int]:
        """The order of the training examples in ``epoch`` (0-based): the (epoch + 1)-th
        shuffle of ``random.Random(seed)``."""
        order = self._orders.get(epoch)
        if order is None:
            rng = random.Random(self.seed)
            for _ in range(epoch + 1):
                order = list(range(len(self.data["train"][0])))
                rng.shuffle(order)
            self._orders = {epoch: order}
        return order

    def batch_rows(self, step: int, micro: int) -> list[int]:
        """The training examples of micro-batch ``micro`` of update ``step`` (1-based) on
        this rank."""
        epoch, i = divmod(step - 1, self.steps_per_epoch)
        rows = self.epoch_order(epoch)[i * self.batch_size : (i + 1) * self.batch_size]
        rows = rows[self.rank * self.per_rank : (self.rank + 1) * self.per_rank]
        return rows[micro * self.micro : (micro + 1) * self.micro]

    # -- model -----------------------------------------------------------------------------
    def config_dict(self) -> dict[str, Any]:
        return {
            "kind": "cmplxbert-finetune",
            "model": self.name,
            "seed": self.seed,
            **self.settings,
        }

    def build_model(self) -> nn.Module:
        self.model = self.build()
        return self.model

    def describe(self, model) -> str:
        t, a = trainable_parameter_counts(model)
        return f"model: {self.name}, trainable params: {t:,} || all params: {a:,}"

    def write_run_files(self, out: Path, fresh: bool) -> None:
        atomic_write_text(out / "config.json", json.dumps(self.config_dict(), indent=2) + "\n")

    # -- loss and evaluation ---------------------------------------------------------------
    def _collate(self, split: str, rows: list[int]):
        d = self.data[split]
        return collate(d[0], d[1], rows, self.pad_id, d[2] if len(d) > 2 else None)

    def _metrics(self, true: list[Any], pred: list[Any]) -> dict[str, float]:
        if not self.per_token:
            return classification_metrics(true, pred)
        true = [[t for t in y if t != -100] for y in true]
        return token_metrics(true, pred, self.label_names)

    def lr_scale(self, name: str) -> float:
        """1 for the new classification head (``classifier``: its weights, adapter and
        complex bias), ``settings["base_lr_ratio"]`` for every other trainable parameter
        (adapters, complex biases, LayerNorms, or the pre-trained weights themselves)."""
        if name.startswith(("classifier.", "model.classifier.")):
            return 1.0
        return float(self.settings.get("base_lr_ratio", 1.0))

    @torch.no_grad()
    def probe(self, model, updates: int, device) -> dict[str, float]:
        """Adapter growth after ``updates`` updates, on the first :data:`PROBE_EXAMPLES`
        validation examples: the imaginary-to-real energy of the last hidden states and the
        mean pairwise cosine of the sentence vectors (docs/cmplxbert.md)."""
        rows = list(range(min(PROBE_EXAMPLES, len(self.data["validation"][0]))))
        x, m, _, tt = self._collate("validation", rows)
        inner = getattr(model, "module", model)  # DDP
        inner = getattr(inner, "model", inner)  # MeanPooled
        kw = _inputs(x, m, tt, device)
        with eval_mode(model):
            if hasattr(inner, "lora_config"):  # CmplxBert
                h = inner(**kw).last_hidden_state
            else:  # a transformers BertFor... model
                h = inner.bert(**kw).last_hidden_state
        return {
            "updates": updates,
            "imag_to_real": imaginary_to_real(h, m),
            "cosine": sentence_cosine(h, m) if len(rows) > 1 else float("nan"),
        }

    def step_loss(self, model, batch, step, micro) -> StepLoss:
        x, m, y, tt = self._collate("train", self.batch_rows(step, micro))
        device = batch.device
        done, self.last_step = step - 1, step  # updates made before this one
        if (
            micro == 0
            and self.rank < self.probe_ranks
            and ((done & (done - 1)) == 0 or done % 50 == 0)
        ):
            growth = self.probe(model, done, device)
            if self.rank == 0:
                self.growth.append(growth)
        out = model(**_inputs(x, m, tt, device), labels=y.to(device))
        return StepLoss(out.loss, out.loss)

    def n_val_blocks(self, max_blocks) -> int:
        return len(self.data["validation"][0])

    @torch.no_grad()
    def evaluate(self, model, batch_size, device, bf16, rank, world_size, max_blocks):
        """Mean cross-entropy (``loss``, ``ppl`` = exp) and accuracy on the validation split
        (per example, or per labelled token for token tasks)."""
        ids = self.data["validation"][0]
        if not ids:
            return None
        nll, correct, count = 0.0, 0, 0
        with eval_mode(model):
            for rows in _chunks(len(ids), 64):
                x, m, y, tt = self._collate("validation", rows)
                logits = model(**_inputs(x, m, tt, device)).logits
                logits, y = logits.reshape(-1, logits.shape[-1]).float(), y.to(device).reshape(-1)
                keep = y != -100
                logits, y = logits[keep], y[keep]
                nll += float(nn.functional.cross_entropy(logits, y, reduction="sum").double())
                correct += int((logits.argmax(-1) == y).sum())
                count += len(y)
        loss = nll / max(count, 1)
        return {
            "loss": loss,
            "ppl": math.exp(min(loss, 700.0)),
            "tokens": count,
            "accuracy": correct / max(count, 1),
        }

    def save_final(self, model, directory: Path) -> None:
        """Classify the validation and test splits and write their metrics and the test
        predictions to ``directory/result.json``; with ``keep``, the fine-tuned model is
        written into ``directory`` first (a CmplxBERT directory, see
        :func:`complexformer.cmplxbert.finetune.finetune_run`)."""
        device = next(model.parameters()).device
        val_pred = predict(model, self.data["validation"], self.pad_id, device)
        test_pred = predict(model, self.data["test"], self.pad_id, device)
        self.result = {
            "validation": self._metrics(self.data["validation"][1], val_pred),
            "test": self._metrics(self.data["test"][1], test_pred),
            "test_predictions": test_pred,
            "growth": [*self.growth, self.probe(model, self.last_step, device)],
        }
        directory = Path(directory)
        if self.keep is not None:  # replaces the folder: before result.json
            self.keep(model, directory)
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write_text(directory / RESULT_FILE, json.dumps(self.result) + "\n")
