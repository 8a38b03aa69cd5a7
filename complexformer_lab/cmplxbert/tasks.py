"""The offline labelled tasks built from the standard library, registered by name for
``--task`` (entry-point group ``complexformer.tasks``, declared in pyproject.toml).

Each is built from what every Python installation ships, deterministically for a given Python
version: ``docstrings`` (:mod:`.docstrings`), ``docstring-pairs`` and ``code-tags``
(:mod:`.stdlib_tasks`). The library finds them by name
(:func:`complexformer.cmplxbert.labelled.named_task`) and never imports this module.
"""

from __future__ import annotations

from complexformer.cmplxbert.labelled import ClassificationTask, NamedTask

from .docstrings import DOCSTRING_SPLITS, build_docstring_dataset
from .stdlib_tasks import build_code_tags, build_docstring_pairs

__all__ = ["CODE_TAGS_TASK", "DOCSTRINGS_TASK", "DOCSTRING_PAIRS_TASK"]


def docstring_task() -> ClassificationTask:
    """The docstring task with its labels numbered in the dataset's order."""
    ds = build_docstring_dataset()
    ids = {label: i for i, label in enumerate(ds.labels)}
    splits = {
        s: ([e.text for e in ds.splits[s]], [ids[e.label] for e in ds.splits[s]])
        for s in DOCSTRING_SPLITS
    }
    return ClassificationTask("docstrings", list(ds.labels), splits, "sequence")


def docstring_pairs_task() -> ClassificationTask:
    """Does the second half of a docstring continue the first (``same`` / ``different``)."""
    return ClassificationTask("docstring-pairs", *build_docstring_pairs(), "pair")


def code_tags_task() -> ClassificationTask:
    """The role of each Python token of a line of standard-library code."""
    return ClassificationTask("code-tags", *build_code_tags(), "token")


DOCSTRINGS_TASK = NamedTask(
    "sequence", docstring_task, "which standard-library module a docstring comes from"
)
DOCSTRING_PAIRS_TASK = NamedTask(
    "pair", docstring_pairs_task, "does the second half of a docstring continue the first"
)
CODE_TAGS_TASK = NamedTask(
    "token", code_tags_task, "the role of each token of a line of standard-library code"
)
