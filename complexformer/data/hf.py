"""Corpora from Hugging Face ``datasets`` (``hf:NAME[:CONFIG]``), an optional dependency.

The dataset's own splits are used: ``train``, ``validation`` (or ``valid``/``val``/``dev``) and
``test``. A split the dataset lacks (other than ``train``, which is required) is carved out of
its ``train`` split by :func:`~complexformer.data.splits.split_of` of the row index, with the
usual fractions; those rows are then removed from ``train``.

Two ways of reading, with the same documents in the same order (tested):

* **streamed** (``datasets.load_dataset(..., streaming=True)``), the default for a dataset
  named on the Hugging Face Hub: rows are read from the source files in batches as they are
  iterated, nothing is downloaded or converted up front, and memory does not grow with the
  dataset. Each pass (counting, the tokenizer's sample, tokenizing a split) reads the source
  again, which is why a large corpus is best tokenized once by ``complexformer prepare``.
* **memory-mapped** (``streaming=False``), the default for a local folder or file: the dataset
  is converted once into Arrow files in the ``datasets`` cache and read from them, in batches.

Either way, each row's ``text_field`` is one document and empty rows are skipped. The text
column is read once to count documents and bytes (and, when streamed, to hash the content,
the split's fingerprint): at load for Arrow files, on first use of ``stats`` or a fingerprint
for a stream (so reading the first documents does not read the whole stream). Rows are never
held in memory as Python strings beyond one batch.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..runtime import require
from .cache import hash_strings
from .corpus import Corpus, SplitStats, check_not_empty
from .splits import DEFAULT_FRACTIONS, SPLITS, check_fractions, check_split, split_of

__all__ = ["HF_SPLIT_NAMES", "HF_STREAMING_ENV", "HFCorpus", "hf_streaming", "import_datasets"]

HF_SPLIT_NAMES: dict[str, tuple[str, ...]] = {
    "train": ("train",),
    "val": ("validation", "valid", "val", "dev"),
    "test": ("test",),
}
#: Environment variable that chooses streaming when no argument does (``1``/``0``,
#: ``true``/``false``), for commands whose configuration has no ``hf_streaming`` field.
HF_STREAMING_ENV = "COMPLEXFORMER_HF_STREAMING"
_BATCH = 1000
_FINGERPRINT_VERSION = "hf-v1"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def import_datasets() -> Any:
    """Import the optional ``datasets`` package (ImportError with the install command)."""
    return require("datasets", "hf", "hf: corpora")


def hf_streaming(name: str, streaming: bool | None = None) -> bool:
    """Whether the dataset ``name`` is streamed.

    Args:
        name: the dataset name or local path of an ``hf:`` spec.
        streaming: True or False decides; None defers to ``$COMPLEXFORMER_HF_STREAMING``
            and, when that is unset, streams every name that is not an existing local path
            (a dataset on the Hub).

    Returns:
        True to stream.

    Raises:
        ValueError: the environment variable holds something other than a yes/no value.
    """
    if streaming is not None:
        return bool(streaming)
    env = os.environ.get(HF_STREAMING_ENV, "").strip().lower()
    if env:
        if env not in _TRUE + _FALSE:
            raise ValueError(
                f"${HF_STREAMING_ENV}={env!r}: expected one of {', '.join(_TRUE + _FALSE)}"
            )
        return env in _TRUE
    return not Path(name).expanduser().exists()


class HFCorpus(Corpus):
    """A Hugging Face dataset as a corpus.

    Args:
        name: the dataset name or path, e.g. ``"Salesforce/wikitext"``.
        config: the configuration, e.g. ``"wikitext-103-raw-v1"``, or None.
        text_field: the column with the document text.
        fractions: fractions used to carve missing val/test splits out of train.
        spec: the spec string recorded on the corpus.
        streaming: stream the rows (True), read the converted Arrow files (False), or None
            for :func:`hf_streaming`'s default (stream a Hub dataset, not a local one).
        **load_kwargs: passed to ``datasets.load_dataset`` (e.g. ``cache_dir``).

    Raises:
        ImportError: ``datasets`` is not installed.
        ValueError: no train split, no ``text_field`` column, or no non-empty document.
    """

    def __init__(
        self,
        name: str,
        config: str | None = None,
        *,
        text_field: str = "text",
        fractions: Sequence[float] = DEFAULT_FRACTIONS,
        spec: str | None = None,
        streaming: bool | None = None,
        **load_kwargs: Any,
    ) -> None:
        datasets = import_datasets()
        self.name, self.config, self.text_field = name, config, text_field
        self.fractions = check_fractions(fractions)
        self.spec = spec or (f"hf:{name}:{config}" if config else f"hf:{name}")
        self.streaming = hf_streaming(name, streaming)
        self.skipped: list[str] = []
        dd = datasets.load_dataset(name, config, streaming=self.streaming, **load_kwargs)
        available = list(dd.keys())
        self._native: dict[str, str | None] = {}
        for split, candidates in HF_SPLIT_NAMES.items():
            self._native[split] = next((c for c in candidates if c in dd), None)
        if self._native["train"] is None:
            raise ValueError(
                f"dataset {self.spec!r} has no 'train' split (it has: {', '.join(available)})"
            )
        self._carved = tuple(s for s in ("val", "test") if self._native[s] is None)
        self._data: dict[str, Any] = {}
        for split in SPLITS:
            ds = dd[self._native[split] or self._native["train"]]
            columns = getattr(ds, "column_names", None)
            if columns is None:  # a stream may know its columns only once read: its first row
                columns = list(next(iter(ds), None) or [text_field])
                self._check_column(columns)
            else:
                self._check_column(columns)
                ds = ds.select_columns([text_field])
            self._data[split] = ds
        self._stats: dict[str, SplitStats] | None = None
        if not self.streaming:
            self._scan()  # cheap on Arrow files: fails at load on an empty dataset
        # A stream is counted on first use of ``stats`` or a fingerprint (the tokenizer and
        # the token cache need them; a prompt from the first val document does not).

    @property
    def stats(self) -> dict[str, SplitStats]:  # type: ignore[override]
        """Per-split counts; a streamed dataset is read once to count them, on first use."""
        return self._counted()

    def _counted(self) -> dict[str, SplitStats]:
        if self._stats is None:
            self._scan()
        assert self._stats is not None
        return self._stats

    def _check_column(self, columns: Sequence[str]) -> None:
        if self.text_field not in columns:
            raise ValueError(
                f"dataset {self.spec!r} has no column {self.text_field!r} (columns: "
                f"{', '.join(columns)}); choose one with text_field=..."
            )

    def _scan(self) -> None:
        """One pass over every native split: counts, rows and (when needed) a content hash."""
        counts = {s: [0, 0] for s in SPLITS}
        self._n_rows: dict[str, int] = {}
        self._content: dict[str, str | None] = {}
        for split in SPLITS:
            if self._native[split] is None:
                continue  # carved splits are counted while scanning train
            hashed = getattr(self._data[split], "_fingerprint", None) is None
            h = hashlib.blake2b(digest_size=16)
            n_rows = 0
            for row, text in self._rows(split):
                n_rows = row + 1
                if hashed:
                    h.update(text.encode("utf-8") + b"\0")
                target = self._target(split, row)
                if text.strip():
                    counts[target][0] += 1
                    counts[target][1] += len(text.encode("utf-8"))
            self._n_rows[split] = n_rows
            self._content[split] = h.hexdigest() if hashed else None
        self._stats = {s: SplitStats(0, counts[s][0], counts[s][1]) for s in SPLITS}
        check_not_empty(self)

    def _rows(self, split: str) -> Iterator[tuple[int, str]]:
        """(row index, text) of the native dataset behind ``split``, in batches."""
        row = 0
        for batch in self._data[split].iter(batch_size=_BATCH):
            if self.text_field not in batch:
                self._check_column(list(batch))
            for text in batch[self.text_field]:
                yield row, text if text is not None else ""
                row += 1

    def _target(self, split: str, row: int) -> str:
        """The corpus split of row ``row`` of the native dataset behind ``split``."""
        if split != "train" or not self._carved:
            return split
        s = split_of(str(row), self.fractions)
        return s if s in self._carved else "train"

    def documents(self, split: str) -> Iterator[str]:
        """Stream the non-empty rows of ``split``.

        Args:
            split: ``"train"``, ``"val"`` or ``"test"``.

        Yields:
            Document texts, one at a time.
        """
        check_split(split)
        source = "train" if self._native[split] is None else split
        for row, text in self._rows(source):
            if text.strip() and self._target(source, row) == split:
                yield text

    def fingerprint(self, split: str) -> str:
        """Hash of the dataset name, config, native split and the dataset's content.

        The content is the memory-mapped dataset's own fingerprint, or (streamed) the hash
        of the text column taken while loading.

        Args:
            split: ``"train"``, ``"val"`` or ``"test"``.

        Returns:
            A 32-character hex digest.
        """
        check_split(split)
        self._counted()  # a stream is counted and hashed on first use
        source = "train" if self._native[split] is None else split
        ds_fp = self._content[source] or getattr(self._data[source], "_fingerprint", None)
        return hash_strings(
            _FINGERPRINT_VERSION,
            self.spec,
            split,
            str(self._native[source]),
            str(ds_fp),
            str(self._n_rows[source]),
            self.text_field,
            repr(self.fractions),
            ",".join(self._carved),
        )
