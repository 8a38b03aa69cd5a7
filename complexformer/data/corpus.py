"""The corpus interface: streamed documents per split, per-split statistics and fingerprints.

A corpus never holds its documents in memory: :meth:`Corpus.documents` is a generator that
reads them one at a time from disk (or from a memory-mapped Arrow table for Hugging Face
datasets). Empty and whitespace-only documents are never yielded.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass

from .splits import SPLITS

__all__ = ["PROMPT_CHARS", "Corpus", "SplitStats", "check_not_empty", "document_start"]

#: Longest default prompt taken from the start of a document, in characters.
PROMPT_CHARS = 120


@dataclass(frozen=True)
class SplitStats:
    """Counts for one split of a corpus.

    Attributes:
        n_files: source files contributing at least one document (0 for Hugging Face data).
        n_docs: non-empty documents.
        n_bytes: UTF-8 bytes of those documents.
    """

    n_files: int
    n_docs: int
    n_bytes: int


class Corpus(ABC):
    """A text corpus with deterministic ``train``/``val``/``test`` splits.

    Attributes:
        spec: the spec string the corpus was loaded from (e.g. ``"stdlib"``).
        stats: per-split :class:`SplitStats`, computed when the corpus is loaded.
        skipped: human-readable notes about input that was skipped (e.g. non-UTF-8 files).
        split_rule: names the rule that assigned documents to splits (part of the token-cache
            key, so caches are rebuilt when it changes): ``"documents-v1"`` (whole documents
            by :func:`~complexformer.data.splits.split_of`) or ``"chunks-v1:<size>"``.
    """

    spec: str
    stats: dict[str, SplitStats]
    skipped: list[str]
    split_rule: str = "documents-v1"

    @abstractmethod
    def documents(self, split: str) -> Iterator[str]:
        """Stream the non-empty documents of a split, in a deterministic order.

        Args:
            split: ``"train"``, ``"val"`` or ``"test"``.

        Yields:
            One document's text at a time.
        """

    def document_parts(self, split: str) -> Iterator[tuple[str, bool]]:
        """The documents of a split as parts, for encoding with bounded memory.

        A document is one or more consecutive parts whose concatenation is its text; the last
        part carries ``True``. This default gives every document whole, as one part; a corpus
        that can read a long document in pieces overrides it.

        Args:
            split: ``"train"``, ``"val"`` or ``"test"``.

        Yields:
            ``(text, last)``.
        """
        for doc in self.documents(split):
            yield doc, True

    @abstractmethod
    def fingerprint(self, split: str) -> str:
        """A hex digest that changes whenever the content of ``split`` may have changed.

        It covers the content of every source file (or dataset fingerprint), the split
        fractions and the text field, and is used as the cache key of tokenizers and token
        arrays.

        Args:
            split: ``"train"``, ``"val"`` or ``"test"``.
        """

    def describe(self) -> str:
        """A multi-line summary: files, documents and bytes per split."""
        lines = [f"corpus {self.spec}:"]
        for split in SPLITS:
            s = self.stats[split]
            lines.append(
                f"  {split:<5} {s.n_files:>8,} files {s.n_docs:>10,} docs "
                f"{s.n_bytes:>14,} bytes ({s.n_bytes / 2**20:,.1f} MiB)"
            )
        if self.skipped:
            shown = ", ".join(self.skipped[:5])
            more = f" and {len(self.skipped) - 5} more" if len(self.skipped) > 5 else ""
            lines.append(f"  skipped {len(self.skipped)}: {shown}{more}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        counts = ", ".join(f"{s}={self.stats[s].n_docs}" for s in SPLITS)
        return f"{type(self).__name__}({self.spec!r}, docs: {counts})"


def check_not_empty(corpus: Corpus) -> None:
    """Raise if a freshly loaded corpus has no non-empty document in its train split.

    Args:
        corpus: the corpus, with ``stats`` filled in.

    Raises:
        ValueError: naming the spec, when the whole corpus or its train split is empty.
    """
    total = sum(s.n_docs for s in corpus.stats.values())
    skipped = f" ({len(corpus.skipped)} inputs skipped)" if corpus.skipped else ""
    if total == 0:
        raise ValueError(f"corpus {corpus.spec!r} is empty: it has no non-empty documents{skipped}")
    if corpus.stats["train"].n_docs == 0:
        raise ValueError(
            f"corpus {corpus.spec!r} has no document in its train split: all {total} "
            f"non-empty documents hashed into val/test; add more documents"
        )


def document_start(corpus: Corpus, split: str = "val", max_chars: int = PROMPT_CHARS) -> str:
    """The start of the first document of ``split``: a sample prompt that fits the corpus.

    The text from the first non-blank character, at most ``max_chars`` long; a longer
    document is cut after its last line break within that length (code: the first lines),
    else at its last space (prose: whole words). When ``split`` is empty the other splits are
    tried (val, test, train).

    Args:
        corpus: the corpus.
        split: the split to take it from, default ``"val"`` (text the model was not trained
            on).
        max_chars: the longest prompt, in characters (>= 1).

    Returns:
        A non-empty string.

    Raises:
        ValueError: every split is empty (which a loaded corpus never is).
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    for s in (split, *(x for x in ("val", "test", "train") if x != split)):
        for doc in corpus.documents(s):
            text = doc.lstrip()
            if len(text) <= max_chars:
                return text
            head = text[:max_chars]
            newline = head.rfind("\n")
            if newline > 0:
                return head[: newline + 1]
            space = head.rfind(" ")
            return head[:space] if space > 0 else head
    raise ValueError(f"corpus {corpus.spec!r} has no document to take a prompt from")
