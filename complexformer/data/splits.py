"""Deterministic train/val/test assignment by a stable hash of a document key.

Two rules, chosen per corpus by :func:`use_chunks`:

* **whole documents** (:func:`split_of`), for corpora of many documents (the standard
  library's ~1,760 files): a document's split depends only on its key (for files: the path
  relative to the corpus root, with ``/`` separators; for JSONL lines:
  ``"<relative path>:<line number>"``) and on the fractions, so it is identical across
  machines, runs, Python versions and file orderings, and adding or removing other documents
  never moves a document to another split.
* **contiguous chunks** (:func:`chunk_spans`, :func:`assign_chunks`), for corpora of few
  documents (one book, a handful of files), where whole documents cannot give a validation
  and a test split: every document longer than ``CHUNK_CHARS`` characters is cut into
  contiguous chunks of at most that many characters (ending at a line break where one falls
  in the chunk's second half); the chunks of all such documents are ordered by the stable
  hash of ``"<key>#<chunk index>"``: train takes the lowest hashes, val the next
  ``round(val * n)`` and test the highest ``round(test * n)`` (at least one each for a
  positive fraction, see :func:`allocate`). Shorter documents keep the
  whole-document rule. The assignment is deterministic and has exactly the requested
  proportions of chunks; it depends on the set of chunks, so editing one book may move a few
  chunks of another near the boundaries.

The switch: chunks are used when fewer than ``MIN_HELD_OUT_DOCS`` (10) documents are expected
in the smaller held-out split, ``n_docs * min(val, test) < 10`` (below 1,000 documents at the
default 1 %); with as many documents, per-document hashing already gives every split enough
documents and keeps the stronger stability above.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Iterator, Sequence

__all__ = [
    "CHUNK_CHARS",
    "DEFAULT_FRACTIONS",
    "MIN_HELD_OUT_DOCS",
    "SPLITS",
    "allocate",
    "assign_chunks",
    "check_fractions",
    "check_split",
    "chunk_key",
    "chunk_pieces",
    "chunk_spans",
    "iter_chunks",
    "split_of",
    "use_chunks",
]

SPLITS: tuple[str, str, str] = ("train", "val", "test")
DEFAULT_FRACTIONS: tuple[float, float, float] = (0.98, 0.01, 0.01)
#: Longest chunk, in characters, of a document split by chunks (a few tens of KB of text).
CHUNK_CHARS = 32 * 1024
#: Whole-document splitting needs at least this many documents expected in each held-out split.
MIN_HELD_OUT_DOCS = 10


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


# -- corpora of few documents: contiguous chunks ------------------------------------------


def use_chunks(n_docs: int, fractions: Sequence[float] = DEFAULT_FRACTIONS) -> bool:
    """Whether a corpus of ``n_docs`` documents is split by chunks rather than whole documents.

    Args:
        n_docs: the number of non-empty documents (files and JSONL lines).
        fractions: (train, val, test) fractions.

    Returns:
        True when a positive val or test fraction expects fewer than
        :data:`MIN_HELD_OUT_DOCS` whole documents (``n_docs * fraction < 10``).
    """
    held_out = [f for f in check_fractions(fractions)[1:] if f > 0]
    return bool(held_out) and n_docs * min(held_out) < MIN_HELD_OUT_DOCS


def chunk_spans(text: str, size: int = CHUNK_CHARS) -> list[tuple[int, int]]:
    """Cut ``text`` into contiguous ``(start, end)`` character spans of at most ``size``.

    A span ends just after the last line break of its second half when there is one, so
    chunks of prose and code usually end at a line end; otherwise it is cut at ``size``.

    Args:
        text: the document.
        size: the longest span, in characters (>= 2).

    Returns:
        The spans in order; they cover ``text`` exactly (empty list for an empty text).
    """
    if size < 2:
        raise ValueError(f"chunk size must be >= 2 characters, got {size}")
    spans: list[tuple[int, int]] = []
    start, n = 0, len(text)
    while start < n:
        end = min(start + size, n)
        if end < n:
            newline = text.rfind("\n", start + size // 2, end)
            if newline != -1:
                end = newline + 1
        spans.append((start, end))
        start = end
    return spans


def iter_chunks(pieces: Iterable[str], size: int = CHUNK_CHARS) -> Iterator[str]:
    """The chunks of :func:`chunk_spans` of ``"".join(pieces)``, read piece by piece.

    Holds at most one piece plus one chunk of text, so a text of any length is cut with
    bounded memory; the chunks are exactly ``[text[a:b] for a, b in chunk_spans(text, size)]``.

    Args:
        pieces: the text, in consecutive pieces of any length.
        size: the longest chunk, in characters (>= 2).

    Yields:
        The chunks, in order.
    """
    if size < 2:
        raise ValueError(f"chunk size must be >= 2 characters, got {size}")
    buf, pos = "", 0
    for piece in pieces:
        buf = buf[pos:] + piece
        pos = 0
        while len(buf) - pos > size:  # more text follows the chunk: cut as chunk_spans does
            end = pos + size
            newline = buf.rfind("\n", pos + size // 2, end)
            if newline != -1:
                end = newline + 1
            yield buf[pos:end]
            pos = end
    if len(buf) > pos:
        yield buf[pos:]


def chunk_key(key: str, index: int) -> str:
    """The hash key of chunk ``index`` (0-based) of the document ``key``: ``"key#index"``."""
    return f"{key}#{index}"


def allocate(n: int, fractions: Sequence[float] = DEFAULT_FRACTIONS) -> tuple[int, int, int]:
    """How many of ``n`` chunks go to train, val and test.

    ``round(val * n)`` and ``round(test * n)`` (halves up), raised to 1 when the fraction is
    positive, so a short book still has a validation and a test chunk; when that leaves train
    without a chunk (fewer than three chunks) test, then val, gives its chunk back.

    Args:
        n: the number of chunks (>= 0).
        fractions: (train, val, test) fractions.

    Returns:
        ``(n_train, n_val, n_test)`` summing to ``n``.
    """
    train, val, test = check_fractions(fractions)
    counts = [0, 0]
    for i, f in enumerate((val, test)):
        counts[i] = max(math.floor(f * n + 0.5), 1 if f > 0 else 0)
    min_train = 1 if train > 0 else 0
    while counts[0] + counts[1] > n - min_train and counts[0] + counts[1] > 0:
        counts[1 if counts[1] else 0] -= 1
    return n - counts[0] - counts[1], counts[0], counts[1]


def assign_chunks(keys: Sequence[str], fractions: Sequence[float] = DEFAULT_FRACTIONS) -> list[str]:
    """The split of each chunk: ordered by the stable hash of its key, counts by :func:`allocate`.

    The lowest hashes go to train, the next :func:`allocate` ``n_val`` to val and the highest
    ``n_test`` to test (ties, which need equal 64-bit hashes, are ordered by key).

    Args:
        keys: the chunk keys (:func:`chunk_key`), all distinct.
        fractions: (train, val, test) fractions.

    Returns:
        ``"train"``, ``"val"`` or ``"test"`` for each key, in the order of ``keys``.
    """
    n_train, n_val, _ = allocate(len(keys), fractions)
    order = sorted(range(len(keys)), key=lambda i: (_unit_hash(keys[i]), keys[i]))
    out = ["train"] * len(keys)
    for rank, i in enumerate(order):
        if rank >= n_train:
            out[i] = "val" if rank < n_train + n_val else "test"
    return out


def chunk_pieces(
    text: str, splits: Sequence[str], size: int = CHUNK_CHARS
) -> Iterator[tuple[str, str]]:
    """The pieces of a chunked document: runs of consecutive chunks of the same split.

    Args:
        text: the document.
        splits: the split of each chunk of ``chunk_spans(text, size)``.
        size: the chunk size the splits were assigned with.

    Yields:
        ``(split, piece)`` in document order; adjacent chunks of one split are joined, so a
        book mostly in train yields few, long training pieces.

    Raises:
        ValueError: ``splits`` does not have one entry per chunk (the text changed).
    """
    spans = chunk_spans(text, size)
    if len(spans) != len(splits):
        raise ValueError(
            f"the document has {len(spans)} chunks of {size} characters but {len(splits)} "
            f"were assigned; it changed after the corpus was loaded"
        )
    begin = 0
    for i, (_, end) in enumerate(spans):
        if i + 1 == len(spans) or splits[i + 1] != splits[i]:
            yield splits[i], text[spans[begin][0] : end]
            begin = i + 1
