"""Tokenized splits as flat on-disk token arrays, read back with ``np.memmap``.

Each split is tokenized once into a flat array ``doc_0 EOS doc_1 EOS ... doc_n EOS`` (an EOS
after every document, including the last) of little-endian ``uint16`` when the vocabulary fits
(``vocab_size <= 65536``) and ``uint32`` otherwise. Documents are streamed from the corpus and
encoded in batches with ``encode_batch``; each batch is appended to a temporary file that is
moved into place with :func:`os.replace` once complete, so neither the corpus nor its tokens
are ever held in memory as Python objects, and an interrupted run leaves no partial cache.

Cache: ``<cache root>/tokens/<split>-<key>.<dtype>.bin`` where ``key`` hashes the corpus split
fingerprint, the corpus's split rule (:attr:`Corpus.split_rule`), the split name and the
tokenizer fingerprint, with a small ``.json`` sidecar (spec, counts) for humans.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from .cache import atomic_write, cache_subdir, hash_strings
from .corpus import Corpus
from .splits import SPLITS, check_split
from .tokenizer import Tokenizer

__all__ = [
    "load_token_splits",
    "open_tokens",
    "pack_documents",
    "token_cache_path",
    "token_dtype",
    "tokenize_split",
]

_FORMAT = "tokens-v1"
_BATCH_DOCS = 512
_BATCH_CHARS = 1 << 20  # flush a batch once it holds this many characters (1 Mi)


def token_dtype(vocab_size: int) -> np.dtype:
    """The storage dtype for token ids below ``vocab_size``: ``<u2`` if they fit, else ``<u4``.

    Args:
        vocab_size: the tokenizer's vocabulary size.
    """
    if vocab_size <= 0 or vocab_size > 2**32:
        raise ValueError(f"vocab_size must be in [1, 2**32], got {vocab_size}")
    return np.dtype("<u2") if vocab_size <= 2**16 else np.dtype("<u4")


def token_cache_path(
    corpus: Corpus,
    split: str,
    tokenizer: Tokenizer,
    cache_dir: str | os.PathLike | None = None,
) -> Path:
    """The cache file of ``split`` of ``corpus`` tokenized by ``tokenizer`` (its parent is created).

    Args:
        corpus: the corpus.
        split: ``"train"``, ``"val"`` or ``"test"``.
        tokenizer: the tokenizer.
        cache_dir: the cache root, see :func:`~complexformer.data.cache.cache_root`.
    """
    check_split(split)
    key = hash_strings(
        _FORMAT, corpus.fingerprint(split), corpus.split_rule, split, tokenizer.fingerprint
    )
    dtype = token_dtype(tokenizer.vocab_size)
    return cache_subdir("tokens", cache_dir) / f"{split}-{key[:24]}.{dtype.name}.bin"


def open_tokens(path: str | os.PathLike, dtype: np.dtype | str) -> np.ndarray:
    """Open a flat token file read-only as a memory map.

    Args:
        path: the ``.bin`` file.
        dtype: its dtype (``uint16`` or ``uint32``, little-endian).

    Returns:
        A 1-D read-only ``np.memmap`` (N,), or an empty array for an empty file (which
        ``np.memmap`` cannot map).
    """
    dtype = np.dtype(dtype).newbyteorder("<")
    if os.path.getsize(path) == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r")


def _batches(docs: Iterable[str]) -> Iterator[list[str]]:
    """Group documents into lists of at most ``_BATCH_DOCS`` docs / about ``_BATCH_CHARS``."""
    batch: list[str] = []
    chars = 0
    for doc in docs:
        batch.append(doc)
        chars += len(doc)
        if len(batch) >= _BATCH_DOCS or chars >= _BATCH_CHARS:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def pack_documents(
    documents: Iterable[str], tokenizer: Tokenizer, dtype: np.dtype | None = None
) -> Iterator[tuple[np.ndarray, int]]:
    """Encode documents in batches; yield their packed tokens ``ids(doc) + [EOS]`` per batch.

    Args:
        documents: the texts (streamed).
        tokenizer: the tokenizer.
        dtype: the output dtype; default :func:`token_dtype` of the vocabulary.

    Yields:
        ``(chunk, n_docs)``: the 1-D array (n,) of the concatenated ``ids(doc) + [EOS]`` of one
        batch of documents, and the number of documents in it.
    """
    dtype = token_dtype(tokenizer.vocab_size) if dtype is None else np.dtype(dtype)
    eos = np.array([tokenizer.eos_token_id], dtype=dtype)  # (1,)
    for batch in _batches(documents):
        encoded = tokenizer.encode_batch(batch)
        parts: list[np.ndarray] = []
        for ids in encoded:
            parts += [np.array(ids, dtype=dtype), eos]
        yield np.concatenate(parts), len(encoded)  # (n,)


def tokenize_split(
    corpus: Corpus,
    split: str,
    tokenizer: Tokenizer,
    *,
    cache_dir: str | os.PathLike | None = None,
    show_progress: bool = True,
    log: Callable[[str], Any] | None = None,
) -> np.ndarray:
    """Tokenize one split into the on-disk cache (once) and memory-map it.

    Args:
        corpus: the corpus.
        split: ``"train"``, ``"val"`` or ``"test"``.
        tokenizer: the tokenizer; its EOS id is appended after every document.
        cache_dir: the cache root, see :func:`~complexformer.data.cache.cache_root`.
        show_progress: show a tqdm bar (documents) while tokenizing.
        log: optional message sink (e.g. ``print``).

    Returns:
        The read-only flat token array (N,) (``np.memmap``; empty array for an empty split).
        A prepared corpus (``prepared:DIR``) gives its own shards when ``tokenizer`` is its
        tokenizer (nothing is tokenized or cached).
    """
    prepared = getattr(corpus, "prepared_tokens", None)
    if prepared is not None:
        tokens = prepared(split, tokenizer)
        if tokens is not None:
            if log is not None:
                log(f"tokens: {split}: {len(tokens):,} tokens (prepared, {corpus.spec})")
            return tokens
    path = token_cache_path(corpus, split, tokenizer, cache_dir)
    dtype = token_dtype(tokenizer.vocab_size)
    if path.is_file():
        tokens = open_tokens(path, dtype)
        if log is not None:
            log(f"tokens: {split}: {len(tokens):,} tokens (cached {path.name})")
        return tokens
    n_docs = 0
    n_tokens = 0
    bar = tqdm(
        total=corpus.stats[split].n_docs,
        desc=f"tokenize {split}",
        unit="doc",
        disable=not show_progress,
    )
    with bar, atomic_write(path, "wb") as f:
        for chunk, docs_in_chunk in pack_documents(corpus.documents(split), tokenizer, dtype):
            f.write(memoryview(chunk))
            n_docs += docs_in_chunk
            n_tokens += len(chunk)
            bar.update(docs_in_chunk)
    meta = {
        "format": _FORMAT,
        "spec": corpus.spec,
        "split": split,
        "split_rule": corpus.split_rule,
        "dtype": dtype.name,
        "n_tokens": n_tokens,
        "n_docs": n_docs,
        "vocab_size": tokenizer.vocab_size,
        "eos_token_id": tokenizer.eos_token_id,
        "corpus_fingerprint": corpus.fingerprint(split),
        "tokenizer_fingerprint": tokenizer.fingerprint,
    }
    with atomic_write(path.with_suffix(".json"), "w") as f:
        json.dump(meta, f, indent=2)
    if log is not None:
        log(f"tokens: {split}: {n_tokens:,} tokens from {n_docs:,} docs -> {path}")
    return open_tokens(path, dtype)


def load_token_splits(
    corpus: Corpus,
    tokenizer: Tokenizer,
    splits: Sequence[str] = SPLITS,
    *,
    cache_dir: str | os.PathLike | None = None,
    show_progress: bool = True,
    log: Callable[[str], Any] | None = None,
) -> dict[str, np.ndarray]:
    """:func:`tokenize_split` for several splits.

    Args:
        corpus: the corpus.
        tokenizer: the tokenizer.
        splits: the splits to load, default all three.
        cache_dir: the cache root.
        show_progress: show tqdm bars.
        log: optional message sink.

    Returns:
        ``{split: flat token array (N_split,)}``.
    """
    return {
        s: tokenize_split(
            corpus, s, tokenizer, cache_dir=cache_dir, show_progress=show_progress, log=log
        )
        for s in splits
    }
