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


def batches(docs: Iterable[Any]) -> Iterator[list[Any]]:
    """Group documents (or ``(text, eos)`` units) into lists of at most ``_BATCH_DOCS`` items /
    about ``_BATCH_CHARS`` characters."""
    batch: list[Any] = []
    chars = 0
    for doc in docs:
        batch.append(doc)
        chars += len(doc) if isinstance(doc, str) else len(doc[0])
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
    for batch in batches(documents):
        encoded = tokenizer.encode_batch(batch)
        parts: list[np.ndarray] = []
        for ids in encoded:
            parts += [np.array(ids, dtype=dtype), eos]
        yield np.concatenate(parts), len(encoded)  # (n,)


def _solid(c: str) -> bool:
    """A character no pre-tokenizer treats as whitespace: a letter, digit or printable ASCII."""
    return c.isalnum() or 33 <= ord(c) <= 126


def safe_cut(text: str) -> int:
    """The last position where ``text`` can be cut without changing its byte-level BPE tokens.

    A cut just after a line break that follows a letter, digit or printable ASCII character
    and precedes another: the GPT-2 pre-tokenizer of the byte-level BPE ends a pre-token
    there (the line break is a pre-token of its own) in the whole text and in both parts, and
    the BPE merges only inside pre-tokens, so ``encode(text) == encode(text[:p]) +
    encode(text[p:])``.

    Args:
        text: the text.

    Returns:
        The position, or 0 when there is none.
    """
    i = text.rfind("\n", 1, len(text) - 1)
    while i > 0:
        if _solid(text[i - 1]) and _solid(text[i + 1]):
            return i + 1
        i = text.rfind("\n", 1, i)
    return 0


def next_safe_cut(text: str, pos: int) -> int:
    """The first :func:`safe_cut` position at or after ``pos`` (0 when there is none)."""
    i = text.find("\n", max(1, pos - 1), len(text) - 1)
    while i != -1:
        if _solid(text[i - 1]) and _solid(text[i + 1]):
            return i + 1
        i = text.find("\n", i + 1, len(text) - 1)
    return 0


def cuttable(tokenizer: Tokenizer) -> bool:
    """Whether long documents may be encoded in parts cut by :func:`safe_cut`: a ``tokenizers``
    BPE without normalizer whose pre-tokenizer is the byte-level one with its regex."""
    if getattr(tokenizer, "kind", None) != "bpe" or not hasattr(tokenizer.backend, "to_str"):
        return False
    spec = json.loads(tokenizer.backend.to_str())
    pre = spec.get("pre_tokenizer") or {}
    model = spec.get("model") or {}
    return (
        spec.get("normalizer") is None
        and pre.get("type") == "ByteLevel"
        and pre.get("use_regex", True)
        and model.get("type") == "BPE"
    )


def encoding_units(
    parts: Iterable[tuple[str, bool]], cut: bool, max_chars: int = _BATCH_CHARS
) -> Iterator[tuple[str, bool]]:
    """Turn document parts into the texts encoded one by one, ``(text, eos)``.

    A document of at most ``max_chars`` characters is one unit; a longer one is, with
    ``cut``, a sequence of units of at most ``max_chars`` characters each cut at the last
    :func:`safe_cut` position within them (where a stretch has none, at the next one after
    it; a text without any stays whole), so its tokens are those of the whole document while
    memory stays bounded. ``eos`` marks a document's last unit (the EOS goes after it).

    Args:
        parts: ``(text, last)`` from :meth:`Corpus.document_parts`.
        cut: whether the tokenizer allows cutting (:func:`cuttable`); if not, a document's
            parts are joined.
        max_chars: the length above which a document is cut.

    Yields:
        ``(text, eos)``.
    """
    buf = ""
    for text, last in parts:
        buf += text
        start = 0
        while cut and len(buf) - start > max_chars:
            p = safe_cut(buf[start : start + max_chars + 1])
            end = start + p if p else next_safe_cut(buf, start + max_chars)
            if end == 0:
                break
            yield buf[start:end], False
            start = end
        buf = buf[start:]
        if last:
            yield buf, True
            buf = ""


def pack_units(
    units: Iterable[tuple[str, bool]], tokenizer: Tokenizer, dtype: np.dtype | None = None
) -> Iterator[tuple[np.ndarray, int]]:
    """:func:`pack_documents` of :func:`encoding_units`: ``ids(unit)`` plus EOS where ``eos``.

    Yields:
        ``(chunk, n_docs)`` per batch: the packed tokens (n,) and the documents they end.
    """
    dtype = token_dtype(tokenizer.vocab_size) if dtype is None else np.dtype(dtype)
    eos = np.array([tokenizer.eos_token_id], dtype=dtype)  # (1,)
    for batch in batches(units):
        encoded = tokenizer.encode_batch([t for t, _ in batch])
        parts: list[np.ndarray] = []
        for ids, (_, end) in zip(encoded, batch, strict=True):
            parts.append(np.array(ids, dtype=dtype))
            if end:
                parts.append(eos)
        yield np.concatenate(parts), sum(end for _, end in batch)


def split_units(corpus: Corpus, split: str, tokenizer: Tokenizer) -> Iterator[tuple[str, bool]]:
    """The encoding units of a split (:func:`encoding_units` of its document parts)."""
    return encoding_units(corpus.document_parts(split), cuttable(tokenizer))


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
    if prepared is not None and log is not None:
        log(
            f"tokens: {split}: {corpus.spec} was prepared with another tokenizer: its text "
            "is decoded and tokenized again (prepare it with this tokenizer, 'complexformer "
            "prepare --tokenizer ...', to read its tokens as they are)"
        )
    n_docs = 0
    n_tokens = 0
    bar = tqdm(
        total=corpus.stats[split].n_docs,
        desc=f"tokenize {split}",
        unit="doc",
        disable=not show_progress,
    )
    with bar, atomic_write(path, "wb") as f:
        units = split_units(corpus, split, tokenizer)
        for chunk, docs_in_chunk in pack_units(units, tokenizer, dtype):
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
