"""Corpora from Hugging Face ``datasets`` (``hf:NAME[:CONFIG]``), an optional dependency.

The dataset's own splits are used: ``train``, ``validation`` (or ``valid``/``val``/``dev``) and
``test``. A split the dataset lacks (other than ``train``, which is required) is carved out of
its ``train`` split by :func:`~complexformer.data.splits.split_of` of the row index, with the
usual fractions; those rows are then removed from ``train``.

Rows are read in Arrow batches from the memory-mapped dataset, so the corpus is never held in
memory as Python strings. Each row's ``text_field`` is one document; empty rows are skipped.
Loading scans the text column once to count documents and bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

from .._optional import require
from .cache import hash_strings
from .corpus import Corpus, SplitStats, check_not_empty
from .splits import DEFAULT_FRACTIONS, SPLITS, check_fractions, check_split, split_of

__all__ = ["HF_SPLIT_NAMES", "HFCorpus", "import_datasets"]

HF_SPLIT_NAMES: dict[str, tuple[str, ...]] = {
    "train": ("train",),
    "val": ("validation", "valid", "val", "dev"),
    "test": ("test",),
}
_BATCH = 1000
_FINGERPRINT_VERSION = "hf-v1"


def import_datasets() -> Any:
    """Import the optional ``datasets`` package (ImportError with the install command)."""
    return require("datasets", "hf", "hf: corpora")


class HFCorpus(Corpus):
    """A Hugging Face dataset as a corpus.

    Args:
        name: the dataset name or path, e.g. ``"Salesforce/wikitext"``.
        config: the configuration, e.g. ``"wikitext-103-raw-v1"``, or None.
        text_field: the column with the document text.
        fractions: fractions used to carve missing val/test splits out of train.
        spec: the spec string recorded on the corpus.
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
        **load_kwargs: Any,
    ) -> None:
        datasets = import_datasets()
        self.name, self.config, self.text_field = name, config, text_field
        self.fractions = check_fractions(fractions)
        self.spec = spec or (f"hf:{name}:{config}" if config else f"hf:{name}")
        self.skipped: list[str] = []
        dd = datasets.load_dataset(name, config, **load_kwargs)
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
            if text_field not in ds.column_names:
                raise ValueError(
                    f"dataset {self.spec!r} has no column {text_field!r} (columns: "
                    f"{', '.join(ds.column_names)}); choose one with text_field=..."
                )
            self._data[split] = ds.select_columns([text_field])
        counts = {s: [0, 0] for s in SPLITS}
        for split in SPLITS:
            if self._native[split] is None:
                continue  # carved splits are counted while scanning train
            for row, text in self._rows(split):
                target = self._target(split, row)
                if text.strip():
                    counts[target][0] += 1
                    counts[target][1] += len(text.encode("utf-8"))
        self.stats = {s: SplitStats(0, counts[s][0], counts[s][1]) for s in SPLITS}
        check_not_empty(self)

    def _rows(self, split: str) -> Iterator[tuple[int, str]]:
        """(row index, text) of the native dataset behind ``split``, in batches."""
        row = 0
        for batch in self._data[split].iter(batch_size=_BATCH):
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
        """Hash of the dataset name, config, native split and the dataset's own fingerprint.

        Args:
            split: ``"train"``, ``"val"`` or ``"test"``.

        Returns:
            A 32-character hex digest.
        """
        check_split(split)
        source = "train" if self._native[split] is None else split
        ds = self._data[source]
        ds_fp = getattr(ds, "_fingerprint", None)
        if ds_fp is None:  # not a datasets.Dataset: hash the content
            h = hashlib.blake2b(digest_size=16)
            for _, text in self._rows(source):
                h.update(text.encode("utf-8") + b"\0")
            ds_fp = h.hexdigest()
        return hash_strings(
            _FINGERPRINT_VERSION,
            self.spec,
            split,
            str(self._native[source]),
            str(ds_fp),
            str(len(ds)),
            self.text_field,
            repr(self.fractions),
            ",".join(self._carved),
        )
