"""Labelled text-classification data for fine-tuning: the offline docstring task, a Hugging
Face dataset, or local CSV / JSONL files with a text and a label column.

Task specs:

- ``docstrings``: which standard-library module a docstring comes from
  (:mod:`complexformer.cmplxbert.docstrings`; offline, built from the running interpreter).
- ``hf:NAME[:CONFIG]``: a Hugging Face dataset (``datasets.load_dataset``; needs the ``hf``
  extra and, for hub names, a network). Splits ``train``, ``validation`` and ``test``; a test
  split without labels (label -1, as in GLUE) is replaced by the validation split, and a
  validation split is then carved out of train.
- ``PATH.jsonl`` / ``PATH.csv``: one file, split 80/10/10 by a stable hash of the text.
- ``DIR``: a folder with ``train.{jsonl,csv}``, ``validation.{jsonl,csv}`` (or ``val``) and
  ``test.{jsonl,csv}``.

Labels may be integers or strings; strings are numbered in sorted order.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from complexformer._optional import require

from .docstrings import build_docstring_dataset
from .metrics import classification_metrics

__all__ = ["ClassificationTask", "load_classification_task"]

SPLITS = ("train", "validation", "test")


@dataclass
class ClassificationTask:
    """Texts and integer labels per split.

    Attributes:
        name: the spec it was loaded from.
        labels: class names; label id i is ``labels[i]``.
        splits: ``{"train"|"validation"|"test": (texts, label_ids)}``.
    """

    name: str
    labels: list[str]
    splits: dict[str, tuple[list[str], list[int]]]

    @property
    def num_labels(self) -> int:
        return len(self.labels)

    def majority_baseline(self, split: str = "test") -> dict[str, Any]:
        """Accuracy and macro-F1 of always predicting the most frequent *train* label."""
        train = Counter(self.splits["train"][1])
        top = min(train, key=lambda k: (-train[k], k))
        y = self.splits[split][1]
        return {"label": self.labels[top], **classification_metrics(y, [top] * len(y))}

    def stats(self) -> dict[str, int]:
        return {s: len(v[0]) for s, v in self.splits.items()}


def _hash_split(text: str) -> str:
    h = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")
    r = h % 10
    return "train" if r < 8 else ("validation" if r == 8 else "test")


def _read_rows(path: Path, text_field: str, label_field: str) -> list[tuple[str, Any]]:
    if path.suffix == ".jsonl":
        with open(path, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    elif path.suffix == ".csv":
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    else:
        raise ValueError(f"{path}: unsupported file type {path.suffix!r}; use .jsonl or .csv")
    out = []
    for i, r in enumerate(rows):
        if text_field not in r or label_field not in r:
            raise ValueError(
                f"{path}: row {i + 1} lacks the field {text_field!r} or "
                f"{label_field!r} (has {sorted(r)}); set text_field/label_field"
            )
        out.append((str(r[text_field]), r[label_field]))
    return out


def _number_labels(
    raw: dict[str, list[tuple[str, Any]]], names: list[str] | None
) -> tuple[list[str], dict[str, tuple[list[str], list[int]]]]:
    values = [lab for rows in raw.values() for _, lab in rows]
    as_int = all(
        isinstance(v, int) or (isinstance(v, str) and v.lstrip("-").isdigit()) for v in values
    )
    if as_int:
        ids = sorted({int(v) for v in values})
        if ids and (ids[0] < 0):
            raise ValueError(f"negative label {ids[0]}; labels must be >= 0 (or names)")
        n = (max(ids) + 1) if ids else 0
        labels = names if names and len(names) >= n else [str(i) for i in range(n)]
        conv = {v: int(v) for v in set(values)}
    else:
        labels = sorted({str(v) for v in values})
        conv = {v: labels.index(str(v)) for v in set(values)}
    splits = {s: ([t for t, _ in rows], [conv[v] for _, v in rows]) for s, rows in raw.items()}
    return labels, splits


def load_classification_task(
    spec: str, text_field: str = "text", label_field: str = "label"
) -> ClassificationTask:
    """Load a classification task (see the module docstring for the specs).

    Args:
        spec: ``docstrings``, ``hf:NAME[:CONFIG]``, a ``.jsonl``/``.csv`` file or a folder.
        text_field: the text column.
        label_field: the label column.

    Raises:
        FileNotFoundError: a path that does not exist / a folder without the split files.
        ValueError: an unusable file, missing columns, or fewer than two classes.
    """
    if spec == "docstrings":
        ds = build_docstring_dataset()
        ids = {lab: i for i, lab in enumerate(ds.labels)}
        splits = {
            s: ([e.text for e in ds.splits[s]], [ids[e.label] for e in ds.splits[s]])
            for s in SPLITS
        }
        task = ClassificationTask("docstrings", list(ds.labels), splits)
    elif spec.startswith("hf:"):
        task = _load_hf(spec, text_field, label_field)
    else:
        path = Path(os.path.expanduser(spec))
        if not path.exists():
            raise FileNotFoundError(
                f"task {spec!r}: no such file or folder; expected "
                "'docstrings', 'hf:NAME[:CONFIG]', a .jsonl/.csv file or a "
                "folder with train/validation/test files"
            )
        if path.is_file():
            rows = _read_rows(path, text_field, label_field)
            raw: dict[str, list] = {s: [] for s in SPLITS}
            for t, lab in rows:
                raw[_hash_split(t)].append((t, lab))
        else:
            raw = {}
            for s, alts in (
                ("train", ("train",)),
                ("validation", ("validation", "val")),
                ("test", ("test",)),
            ):
                found = [
                    path / f"{a}{ext}"
                    for a in alts
                    for ext in (".jsonl", ".csv")
                    if (path / f"{a}{ext}").is_file()
                ]
                if not found:
                    raise FileNotFoundError(f"task folder {path} has no {s}.jsonl / {s}.csv")
                raw[s] = _read_rows(found[0], text_field, label_field)
        names = None
        meta = path / "labels.json" if path.is_dir() else None
        if meta is not None and meta.is_file():
            names = json.loads(meta.read_text(encoding="utf-8")).get("labels")
        labels, splits = _number_labels(raw, names)
        task = ClassificationTask(spec, labels, splits)
    present = len(set(task.splits["train"][1]))
    if task.num_labels < 2 or present < 2:
        raise ValueError(
            f"task {spec!r} has {min(present, task.num_labels)} class(es) in its "
            "training data; need at least 2"
        )
    for s in SPLITS:
        if not task.splits[s][0]:
            raise ValueError(f"task {spec!r}: the {s} split is empty")
    return task


def _load_hf(spec: str, text_field: str, label_field: str) -> ClassificationTask:
    datasets = require("datasets", "hf", "Hugging Face datasets")
    name, _, config = spec[3:].partition(":")
    ds = datasets.load_dataset(name, config or None)
    if "train" not in ds:
        raise ValueError(f"{spec}: the dataset has no train split (has {list(ds)})")
    feat = ds["train"].features.get(label_field)
    names = list(getattr(feat, "names", []) or [])

    def rows(split: str) -> list[tuple[str, Any]]:
        d = ds[split]
        for f in (text_field, label_field):
            if f not in d.column_names:
                raise ValueError(
                    f"{spec}: split {split} has no column {f!r} "
                    f"(columns {d.column_names}); set text_field/label_field"
                )
        return [(str(t), lab) for t, lab in zip(d[text_field], d[label_field], strict=True)]

    raw = {"train": rows("train")}
    val = next((s for s in ("validation", "val", "dev") if s in ds), None)
    test_rows = rows("test") if "test" in ds else []
    if not test_rows or all(lab == -1 for _, lab in test_rows):
        if val is None:
            raise ValueError(f"{spec}: no labelled test or validation split")
        test_rows, val = rows(val), None
    raw["test"] = test_rows
    if val is not None:
        raw["validation"] = rows(val)
    else:
        train = raw["train"]
        raw["train"] = [r for r in train if _hash_split(r[0]) != "validation"]
        raw["validation"] = [r for r in train if _hash_split(r[0]) == "validation"]
    labels, splits = _number_labels(raw, names or None)
    return ClassificationTask(spec, labels, splits)
