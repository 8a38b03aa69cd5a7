"""Predictions of a fine-tuned CmplxBERT on new text (``complexformer cbert-predict``).

A fine-tuned classifier (``cbert-finetune`` keeps each CmplxBERT run as a CmplxBERT
directory, :func:`~complexformer.cmplxbert.finetune.save_finetuned`) records what prediction
needs beside the adapters: the label names, the task type (``sequence``, ``pair`` or
``token``), the pooling, the maximum length and the names of the text fields.
:class:`Predictor` reads such a directory and classifies records:

* ``sequence``: ``{"text": ...}`` (or a bare string) → ``label``, ``label_id``, ``score``
  (the softmax probability of the label) and ``logits``;
* ``pair``: ``{"text": ..., "text_pair": ...}`` → the same;
* ``token``: ``{"tokens": [word, ...]}`` → ``tags`` (a label per word, scored on its first
  sub-word as in training; None for words cut off by ``max_len``), ``tag_ids`` and
  ``logits`` per word.

The logits are those of the model's forward on the padded batch (tested equal to a forward
per example). transformers is imported inside (the ``hf`` extra).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from complexformer.runtime import eval_mode
from complexformer.storage import atomic_write, read_text

from .loading import load_cmplxbert

__all__ = ["PREDICT_TASKS", "Predictor", "predict_file"]

#: The model tasks that predict labels.
PREDICT_TASKS = ("classification", "token_classification")


class Predictor:
    """Classify new text with a fine-tuned CmplxBERT.

    Args:
        model: a :class:`~complexformer.cmplxbert.CmplxBert` classifier.
        tokenizer: its Hugging Face tokenizer.
        meta: the ``cmplxbert.json`` of its directory (labels, task type, ``max_len``,
            field names); missing keys take the defaults of a plain classifier.
        device: where to run the model.

    Raises:
        ValueError: a model without a classification head (the task is named).
    """

    def __init__(self, model: nn.Module, tokenizer: Any, meta: dict[str, Any], device="cpu"):
        if model.task not in PREDICT_TASKS:
            raise ValueError(
                f"predict: the model's task is {model.task!r}; predictions need a fine-tuned "
                f"classifier ({', '.join(PREDICT_TASKS)}), e.g. from `complexformer "
                "cbert-finetune`"
            )
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        n = model.classifier.base_layer.out_features
        self.labels = list(meta.get("labels") or [f"LABEL_{i}" for i in range(n)])
        default = "token" if model.task == "token_classification" else "sequence"
        self.task_type = meta.get("task_type") or default
        self.max_len = int(meta.get("max_len") or 512)
        token = self.task_type == "token"
        self.text_field = meta.get("text_field") or ("tokens" if token else "text")
        self.pair_field = meta.get("pair_field") or "text_pair"

    @classmethod
    def from_dir(
        cls, directory: str | os.PathLike[str], *, verify: bool = True, device: str = "cpu"
    ) -> Predictor:
        """A predictor of the CmplxBERT directory ``directory`` (checked against its
        manifest unless ``verify=False``)."""
        model, tok, meta = load_cmplxbert(directory, verify=verify)
        return cls(model, tok, meta, device)

    # ------------------------------------------------------------------ encoding
    def _field(self, record: Any, name: str, i: int) -> Any:
        if isinstance(record, dict):
            if name not in record:
                raise ValueError(
                    f"predict: record {i} has no field {name!r} (fields: {sorted(record)})"
                )
            return record[name]
        if name == self.text_field and not isinstance(record, (dict, list)):
            return record
        raise ValueError(f"predict: record {i} is a {type(record).__name__}; give an object")

    def encode(self, records: list[Any], first: int = 0):
        """The tokenizer's batch (padded, truncated to ``max_len``) of ``records``."""
        kw = {"truncation": True, "max_length": self.max_len, "padding": True}
        texts = [self._field(r, self.text_field, first + i) for i, r in enumerate(records)]
        if self.task_type == "pair":
            pairs = [self._field(r, self.pair_field, first + i) for i, r in enumerate(records)]
            return self.tokenizer(texts, pairs, return_tensors="pt", **kw)
        if self.task_type == "token":
            for i, words in enumerate(texts):
                if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
                    raise ValueError(
                        f"predict: record {first + i}: {self.text_field!r} must be a list of "
                        "words for a token classifier"
                    )
            return self.tokenizer(texts, is_split_into_words=True, return_tensors="pt", **kw)
        return self.tokenizer([str(t) for t in texts], return_tensors="pt", **kw)

    @torch.no_grad()
    def logits(self, enc) -> Tensor:
        """The model's real logits, (B, labels) or (B, T, labels), of an encoded batch."""
        kw = {
            k: enc[k].to(self.device)
            for k in ("input_ids", "attention_mask", "token_type_ids")
            if k in enc
        }
        with eval_mode(self.model):
            return self.model(**kw).logits.float().cpu()

    # ------------------------------------------------------------------ prediction
    def _rows(self, records: list[Any], enc, logits: Tensor) -> list[dict[str, Any]]:
        out = []
        for i, rec in enumerate(records):
            row = dict(rec) if isinstance(rec, dict) else {self.text_field: rec}
            if self.task_type != "token":
                z = logits[i]
                k = int(z.argmax())
                row.update(
                    label=self.labels[k],
                    label_id=k,
                    score=float(torch.softmax(z, -1)[k]),
                    logits=z.tolist(),
                )
            else:
                words = row[self.text_field]
                first: dict[int, int] = {}
                for t, w in enumerate(enc.word_ids(i)):
                    if w is not None and w not in first:
                        first[w] = t
                ids = [int(logits[i, first[w]].argmax()) if w in first else None
                       for w in range(len(words))]  # fmt: skip
                row.update(
                    tags=[None if k is None else self.labels[k] for k in ids],
                    tag_ids=ids,
                    logits=[
                        logits[i, first[w]].tolist() if w in first else None
                        for w in range(len(words))
                    ],  # fmt: skip
                )
            out.append(row)
        return out

    def predict(
        self, records: Iterable[Any], batch_size: int = 32, progress: bool = False
    ) -> Iterator[dict[str, Any]]:
        """Each record with its prediction added, in order (see the module's docstring).

        Args:
            records: dicts with the text fields (a bare string for a sequence classifier).
            batch_size: records per forward pass.
            progress: a tqdm bar over the records (on stderr).
        """
        if batch_size < 1:
            raise ValueError(f"predict: batch_size must be >= 1, got {batch_size}")
        records = list(records)
        bar = tqdm(total=len(records), unit="rec", desc="predict", disable=not progress)
        try:
            for s in range(0, len(records), batch_size):
                chunk = records[s : s + batch_size]
                enc = self.encode(chunk, s)
                yield from self._rows(chunk, enc, self.logits(enc))
                bar.update(len(chunk))
        finally:
            bar.close()


def read_jsonl(path: str | os.PathLike[str]) -> list[Any]:
    """The records of a JSONL file (one JSON value per non-empty line)."""
    out = []
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{n}: not JSON ({e.msg})") from None
    return out


def predict_file(
    model_dir: str | os.PathLike[str],
    input_path: str | os.PathLike[str],
    output_path: str | os.PathLike[str],
    *,
    batch_size: int = 32,
    device: str = "cpu",
    verify: bool = True,
    progress: bool = True,
) -> int:
    """Classify the records of a JSONL file and write them, each with its prediction, as
    JSONL (atomically: the output appears complete or not at all).

    Args:
        model_dir: a fine-tuned CmplxBERT directory (kept by ``cbert-finetune``).
        input_path: the records, one JSON object (or string) per line.
        output_path: where to write the records with their predictions.
        batch_size: records per forward.
        device: ``"cpu"`` or ``"cuda"``.
        verify: check the model directory against its manifest.
        progress: show a progress bar on stderr.

    Returns:
        The number of records written.
    """
    records = read_jsonl(input_path)
    predictor = Predictor.from_dir(model_dir, verify=verify, device=device)
    n = 0
    with atomic_write(Path(output_path), "w") as f:
        for row in predictor.predict(records, batch_size, progress):
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n
