"""Labelled data for fine-tuning: a registered task, a Hugging Face dataset, or local
CSV / JSONL files, for three task types (the kinds of the UINAUIL tasks of Tamburini 2024):

- ``sequence``: a text and a label per example (``text_field``, ``label_field``);
- ``pair``: two texts and a label (``text_field``, ``pair_field``, ``label_field``), e.g.
  entailment;
- ``token``: a list of words and one tag per word (``text_field``, ``label_field``; in JSONL
  lists, in CSV space-separated strings), e.g. named entities with BIO tags.

Task specs:

- ``NAME``: a task registered by name in the entry-point group ``complexformer.tasks``
  (:data:`TASKS_GROUP`, a :class:`NamedTask`). The lab registers three offline ones, built
  from the running interpreter's standard library: ``docstrings`` (sequence: which module a
  docstring comes from), ``docstring-pairs`` (pair: does the second half continue the first)
  and ``code-tags`` (token: the role of each token of a line of code); see
  :mod:`complexformer_lab.cmplxbert.tasks`. Another package registers its own the same way.
- ``hf:NAME[:CONFIG]``: a Hugging Face dataset (``datasets.load_dataset``; needs the ``hf``
  extra and, for hub names, a network). Splits ``train``, ``validation`` and ``test``; a test
  split without labels (label -1, as in GLUE) is replaced by the validation split, and a
  validation split is then carved out of train.
- ``PATH.jsonl`` / ``PATH.csv``: one file, split 80/10/10 by a stable hash of the text (of
  both texts for pairs, of the words for tokens).
- ``DIR``: a folder with ``train.{jsonl,csv}``, ``validation.{jsonl,csv}`` (or ``val``) and
  ``test.{jsonl,csv}``.

Labels (and tags) may be integers or strings; strings are numbered in sorted order.
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from complexformer.runtime import require

from .metrics import classification_metrics, token_metrics

__all__ = [
    "TASKS_GROUP",
    "TASK_TYPES",
    "ClassificationTask",
    "NamedTask",
    "describe_tasks",
    "load_classification_task",
    "named_task",
    "task_names",
]

SPLITS = ("train", "validation", "test")
TASK_TYPES = ("sequence", "pair", "token")
#: The entry-point group of named tasks: ``--task NAME`` loads the entry point ``NAME``, a
#: :class:`NamedTask` (the lab's are declared in pyproject.toml).
TASKS_GROUP = "complexformer.tasks"


@dataclass
class ClassificationTask:
    """Inputs and integer labels per split.

    Attributes:
        name: the spec it was loaded from.
        labels: class (or tag) names; label id i is ``labels[i]``.
        splits: ``{"train"|"validation"|"test": (inputs, label_ids)}``: for ``sequence`` a
            text and a label id per example, for ``pair`` a (text, text_pair) tuple and a
            label id, for ``token`` a list of words and a list of tag ids.
        task_type: ``"sequence"``, ``"pair"`` or ``"token"``.
    """

    name: str
    labels: list[str]
    splits: dict[str, tuple[list[Any], list[Any]]]
    task_type: str = "sequence"

    @property
    def num_labels(self) -> int:
        return len(self.labels)

    def majority_baseline(self, split: str = "test") -> dict[str, Any]:
        """The metrics of always predicting the most frequent *train* label (tag)."""
        tokens = self.task_type == "token"
        train = Counter(t for y in self.splits["train"][1] for t in (y if tokens else [y]))
        top = min(train, key=lambda k: (-train[k], k))
        y = self.splits[split][1]
        if tokens:
            return {
                "label": self.labels[top],
                **token_metrics(y, [[top] * len(s) for s in y], self.labels),
            }
        return {"label": self.labels[top], **classification_metrics(y, [top] * len(y))}

    def stats(self) -> dict[str, int]:
        return {s: len(v[0]) for s, v in self.splits.items()}


@dataclass(frozen=True)
class NamedTask:
    """A labelled task registered by name in the entry-point group :data:`TASKS_GROUP`.

    Attributes:
        task_type: ``"sequence"``, ``"pair"`` or ``"token"``; known before the data is built.
        build: makes the task, called with no arguments.
        description: one line saying what the task asks.
    """

    task_type: str
    build: Callable[[], ClassificationTask]
    description: str = ""


def task_names() -> list[str]:
    """The names registered in :data:`TASKS_GROUP`, sorted (read from the installed
    metadata; nothing is imported)."""
    return sorted({ep.name for ep in entry_points(group=TASKS_GROUP)})


def named_task(name: str) -> NamedTask | None:
    """The task registered as ``name`` in :data:`TASKS_GROUP`, or None where no entry point
    has that name.

    Raises:
        TypeError: the entry point holds something other than a :class:`NamedTask`.
    """
    found = [ep for ep in entry_points(group=TASKS_GROUP) if ep.name == name]
    if not found:
        return None
    task = found[0].load()
    if not isinstance(task, NamedTask):
        raise TypeError(
            f"task {name!r}: the entry point {found[0].value} of group {TASKS_GROUP} is a "
            f"{type(task).__name__}, not a NamedTask"
        )
    return task


def describe_tasks() -> str:
    """One line per registered task, its name, task type and description (for ``--help``);
    a task that cannot be loaded says so instead of breaking the help."""
    lines = []
    for name in task_names():
        try:
            task = named_task(name)
        except (ImportError, AttributeError, TypeError) as err:
            lines.append(f"  {name}: cannot be loaded ({err})")
            continue
        lines.append(f"  {name} ({task.task_type}): {task.description}")
    return "\n".join(lines)


def _hash_split(text: Any) -> str:
    if not isinstance(text, str):  # a pair or a list of words
        text = "\t".join(text)
    h = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")
    r = h % 10
    return "train" if r < 8 else ("validation" if r == 8 else "test")


def _words(value: Any) -> list[str]:
    """A list of words from a JSON list or a space-separated string (CSV)."""
    return [str(w) for w in value] if isinstance(value, list) else str(value).split()


def _example(
    r: dict[str, Any], where: str, fields: tuple[str, str, str], task_type: str
) -> tuple[Any, Any]:
    """(input, label) of one row for ``task_type``; ``fields`` = (text, pair, label)."""
    text_field, pair_field, label_field = fields
    need = (
        (text_field, pair_field, label_field) if task_type == "pair" else (text_field, label_field)
    )
    missing = [f for f in need if f not in r]
    if missing:
        names = ", ".join(repr(f) for f in missing)
        raise ValueError(
            f"{where} lacks the field{'s' if len(missing) > 1 else ''} {names} (has "
            f"{sorted(r)}); set text_field/{'pair_field/' if task_type == 'pair' else ''}"
            "label_field"
        )
    if task_type == "pair":
        return (str(r[text_field]), str(r[pair_field])), r[label_field]
    if task_type == "token":
        words, tags = _words(r[text_field]), _words(r[label_field])
        if len(words) != len(tags) or not words:
            raise ValueError(
                f"{where}: {len(words)} words and {len(tags)} tags; need one tag per word"
            )
        return words, tags
    return str(r[text_field]), r[label_field]


def _read_rows(
    path: Path, fields: tuple[str, str, str], task_type: str = "sequence"
) -> list[tuple[Any, Any]]:
    if path.suffix == ".jsonl":
        with open(path, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    elif path.suffix == ".csv":
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    else:
        raise ValueError(f"{path}: unsupported file type {path.suffix!r}; use .jsonl or .csv")
    return [_example(r, f"{path}: row {i + 1}", fields, task_type) for i, r in enumerate(rows)]


def _number_labels(
    raw: dict[str, list[tuple[Any, Any]]], names: list[str] | None, tokens: bool = False
) -> tuple[list[str], dict[str, tuple[list[Any], list[Any]]]]:
    values = [t for rows in raw.values() for _, lab in rows for t in (lab if tokens else [lab])]
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

    def num(lab):
        return [conv[t] for t in lab] if tokens else conv[lab]

    splits = {s: ([t for t, _ in rows], [num(v) for _, v in rows]) for s, rows in raw.items()}
    return labels, splits


def load_classification_task(
    spec: str,
    text_field: str = "text",
    label_field: str = "label",
    task_type: str = "sequence",
    pair_field: str = "text_pair",
) -> ClassificationTask:
    """Load a labelled task (see the module docstring for the specs and task types).

    Args:
        spec: a registered task name (``docstrings``...), ``hf:NAME[:CONFIG]``, a
            ``.jsonl``/``.csv`` file or a folder.
        text_field: the text column (the words, for ``token``).
        label_field: the label column (the tags, for ``token``).
        task_type: ``"sequence"``, ``"pair"`` or ``"token"``.
        pair_field: the second text's column, for ``pair``.

    Raises:
        FileNotFoundError: a path that does not exist / a folder without the split files.
        ValueError: an unusable file, missing columns, or fewer than two classes.
    """
    if task_type not in TASK_TYPES:
        raise ValueError(f"task_type {task_type!r}; allowed: {', '.join(map(repr, TASK_TYPES))}")
    fields = (text_field, pair_field, label_field)
    tokens = task_type == "token"
    named = named_task(spec)
    if named is not None:
        if task_type != named.task_type:
            raise ValueError(f"task {spec!r} is a {named.task_type} task, not {task_type!r}")
        task = named.build()
    elif spec.startswith("hf:"):
        task = _load_hf(spec, fields, task_type)
    else:
        path = Path(os.path.expanduser(spec))
        if not path.exists():
            names = task_names()
            close = difflib.get_close_matches(spec, names, n=1, cutoff=0.75)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise FileNotFoundError(
                f"task {spec!r}: no such file or folder{hint}; expected a registered task "
                f"({', '.join(names) or 'none registered'}), 'hf:NAME[:CONFIG]', a "
                ".jsonl/.csv file or a folder with train/validation/test files"
            )
        if path.is_file():
            rows = _read_rows(path, fields, task_type)
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
                raw[s] = _read_rows(found[0], fields, task_type)
        names = None
        meta = path / "labels.json" if path.is_dir() else None
        if meta is not None and meta.is_file():
            names = json.loads(meta.read_text(encoding="utf-8")).get("labels")
        labels, splits = _number_labels(raw, names, tokens)
        task = ClassificationTask(spec, labels, splits, task_type)
    train_labels = task.splits["train"][1]
    present = len({t for y in train_labels for t in y} if tokens else set(train_labels))
    if task.num_labels < 2 or present < 2:
        raise ValueError(
            f"task {spec!r} has {min(present, task.num_labels)} class(es) in its "
            "training data; need at least 2"
        )
    for s in SPLITS:
        if not task.splits[s][0]:
            raise ValueError(f"task {spec!r}: the {s} split is empty")
    return task


def _load_hf(spec: str, fields: tuple[str, str, str], task_type: str) -> ClassificationTask:
    datasets = require("datasets", "hf", "Hugging Face datasets")
    name, _, config = spec[3:].partition(":")
    ds = datasets.load_dataset(name, config or None)
    if "train" not in ds:
        raise ValueError(f"{spec}: the dataset has no train split (has {list(ds)})")
    feat = ds["train"].features.get(fields[2])
    feat = getattr(feat, "feature", feat)  # a sequence of class labels (token tags)
    names = list(getattr(feat, "names", []) or [])

    def rows(split: str) -> list[tuple[Any, Any]]:
        d = ds[split]
        return [
            _example(r, f"{spec}: split {split}, row {i + 1}", fields, task_type)
            for i, r in enumerate(d)
        ]

    raw = {"train": rows("train")}
    val = next((s for s in ("validation", "val", "dev") if s in ds), None)
    test_rows = rows("test") if "test" in ds else []
    unlabelled = task_type != "token" and all(lab in (-1, "-1") for _, lab in test_rows)
    if not test_rows or unlabelled:
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
    labels, splits = _number_labels(raw, names or None, task_type == "token")
    return ClassificationTask(spec, labels, splits, task_type)
