"""Deterministic train/val/test assignment by a stable hash of a document key.

A document's split depends only on its key (for files: the path relative to the corpus root,
with ``/`` separators; for JSONL lines: ``"<relative path>:<line number>"``) and on the split
fractions, so it is identical across machines, runs, Python versions and file orderings, and
adding or removing other documents never moves a document to another split.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

__all__ = ["DEFAULT_FRACTIONS", "SPLITS", "check_fractions", "check_split", "split_of"]

SPLITS: tuple[str, str, str] = ("train", "val", "test")
DEFAULT_FRACTIONS: tuple[float, float, float] = (0.98, 0.01, 0.01)


def check_split(split: str) -> str:
    """Validate a split name.

    Args:
        split: one of ``"train"``, ``"val"``, ``"test"``.

    Returns:
        ``split`` unchanged.

    Raises:
        ValueError: for any other name.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    return split


def check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    """Validate (train, val, test) fractions: three non-negative numbers summing to 1.

    Args:
        fractions: the three split fractions.

    Returns:
        The fractions as a tuple of floats.

    Raises:
        ValueError: if there are not three, one is negative, or they do not sum to 1.
    """
    fr = tuple(float(f) for f in fractions)
    if len(fr) != 3 or any(f < 0 for f in fr) or not math.isclose(sum(fr), 1.0, abs_tol=1e-9):
        raise ValueError(
            f"split fractions must be three non-negative numbers (train, val, test) summing "
            f"to 1, got {tuple(fractions)!r}"
        )
    return fr  # type: ignore[return-value]


def _unit_hash(key: str) -> float:
    """Map ``key`` to a number in [0, 1) with a stable hash (blake2b, 64 bits)."""
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8, person=b"cf-split").digest()
    return int.from_bytes(digest, "big") / 2.0**64


def split_of(key: str, fractions: Sequence[float] = DEFAULT_FRACTIONS) -> str:
    """The split a document belongs to.

    Args:
        key: the document's stable key, e.g. its path relative to the corpus root.
        fractions: (train, val, test) fractions, default 98/1/1.

    Returns:
        ``"train"``, ``"val"`` or ``"test"``.
    """
    train, val, _ = check_fractions(fractions)
    u = _unit_hash(key)
    if u < train:
        return "train"
    if u < train + val:
        return "val"
    return "test"
