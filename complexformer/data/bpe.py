"""Byte-level BPE trained on a corpus's train split, cached on disk; tokenizer resolution.

The default tokenizer is a GPT-2 style byte-level BPE (``tokenizers`` ``ByteLevel``
pre-tokenizer without prefix space, ``ByteLevel`` decoder, all 256 byte symbols in the initial
alphabet) with one special token, ``<|endoftext|>`` (id 0), used as EOS. Byte-level means
``decode(encode(s)) == s`` for every string, Python source included.

Cache: ``<cache root>/tokenizers/bpe-<vocab>-<key>/`` (a :meth:`Tokenizer.save` directory),
where ``key`` hashes the corpus's train fingerprint (content digests of the train files, see
:meth:`Corpus.fingerprint`), the vocabulary size and the training recipe version. Changing a
train file's content, the split fractions or the vocabulary size therefore trains a new
tokenizer; a second call with the same corpus loads the cached one. The cache root is chosen
by :func:`~complexformer.data.cache.cache_root` (argument, ``$COMPLEXFORMER_CACHE``,
``$XDG_CACHE_HOME/complexformer``, ``~/.cache/complexformer``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as _TkTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from ..storage import ManifestError, atomic_dir
from .cache import cache_subdir, hash_strings
from .corpus import Corpus
from .tokenizer import EOT_TOKEN, META_FILE, Tokenizer, load_tokenizer

__all__ = [
    "DEFAULT_SAMPLE_BYTES",
    "DEFAULT_VOCAB_SIZE",
    "BPEResult",
    "bpe_cache_dir",
    "get_tokenizer",
    "new_bpe_tokenizer",
    "sample_documents",
    "train_bpe",
    "train_or_load_bpe",
]

DEFAULT_VOCAB_SIZE = 8192
#: UTF-8 bytes of the train split the BPE trains on at most (256 MiB): a larger split is
#: sampled (see :func:`sample_documents`); the standard library's 29 MiB train split is used whole.
DEFAULT_SAMPLE_BYTES = 1 << 28
_MIN_VOCAB = 257  # 256 byte symbols + <|endoftext|>
_RECIPE = "bytelevel-bpe-v1"


def new_bpe_tokenizer() -> Any:
    """An untrained byte-level BPE ``tokenizers.Tokenizer`` (pre-tokenizer and decoder set)."""

    tk = _TkTokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tk.decoder = decoders.ByteLevel()
    return tk


def train_bpe(
    documents: Iterable[str],
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    *,
    length: int | None = None,
    show_progress: bool = False,
) -> Tokenizer:
    """Train a byte-level BPE on a stream of documents.

    Args:
        documents: the training texts (streamed; not kept).
        vocab_size: target vocabulary size including the 256 bytes and ``<|endoftext|>``
            (a small corpus may yield fewer merges, hence a smaller vocabulary).
        length: number of documents, for the progress bar.
        show_progress: show the ``tokenizers`` progress bar.

    Returns:
        The trained tokenizer, EOS ``<|endoftext|>``.

    Raises:
        ValueError: ``vocab_size`` below 257.
    """

    if vocab_size < _MIN_VOCAB:
        raise ValueError(
            f"vocab_size must be at least {_MIN_VOCAB} (256 bytes + {EOT_TOKEN}), got {vocab_size}"
        )
    tk = new_bpe_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=show_progress,
    )
    tk.train_from_iterator(documents, trainer=trainer, length=length)
    return Tokenizer.from_tokenizers(tk, EOT_TOKEN)


def _check_sample_bytes(sample_bytes: int) -> int:
    if int(sample_bytes) != sample_bytes or sample_bytes < 1:
        raise ValueError(f"tokenizer_sample_bytes must be a positive integer, got {sample_bytes!r}")
    return int(sample_bytes)


def sample_documents(corpus: Corpus, sample_bytes: int = DEFAULT_SAMPLE_BYTES) -> Iterator[str]:
    """A bounded, deterministic sample of the train split for training the BPE.

    A train split of at most ``sample_bytes`` UTF-8 bytes is used whole, in order. A larger
    one is sampled by stride over its byte stream: walking the documents in order, a document
    is taken when it reaches past ``taken * (train bytes / sample_bytes)`` (``taken`` = the
    bytes taken so far), so the sample spreads evenly over the split; a taken document is cut
    to the bytes left in the budget (at a character boundary), and the walk stops once the
    budget is spent. The same corpus and budget always give the same sample. Documents come as
    :meth:`Corpus.document_parts` gives them: a file over ``stream_bytes`` in pieces of about
    1 MiB (each one a text of the sample), every other document whole.

    Args:
        corpus: the corpus.
        sample_bytes: the budget in UTF-8 bytes (>= 1).

    Yields:
        Document texts (or their beginnings).
    """
    budget = _check_sample_bytes(sample_bytes)
    total = corpus.stats["train"].n_bytes
    if total <= budget:
        yield from (text for text, _ in corpus.document_parts("train"))
        return
    stride = total / budget
    pos = taken = 0
    for doc, _ in corpus.document_parts("train"):
        data = doc.encode("utf-8")
        end = pos + len(data)
        if end > taken * stride:
            part = data[: budget - taken]
            taken += len(part)
            yield part.decode("utf-8", errors="ignore")
            if taken >= budget:
                return
        pos = end


@dataclass(frozen=True)
class BPEResult:
    """What :func:`train_or_load_bpe` did.

    Attributes:
        tokenizer: the tokenizer.
        path: its cache directory (loadable with :meth:`Tokenizer.load`).
        trained: True if it was trained by this call, False if loaded from the cache.
    """

    tokenizer: Tokenizer
    path: Path
    trained: bool


def bpe_cache_dir(
    corpus: Corpus,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    cache_dir: str | os.PathLike | None = None,
    sample_bytes: int = DEFAULT_SAMPLE_BYTES,
) -> Path:
    """The cache directory of the BPE for ``corpus`` and ``vocab_size`` (its parent is created).

    Args:
        corpus: the corpus; its train fingerprint is part of the key.
        vocab_size: the target vocabulary size.
        cache_dir: the cache root, see :func:`~complexformer.data.cache.cache_root`.
        sample_bytes: the sample budget (part of the key only when it samples the split, so a
            split used whole keeps its key).
    """
    parts = [_RECIPE, corpus.fingerprint("train"), str(vocab_size)]
    if corpus.stats["train"].n_bytes > _check_sample_bytes(sample_bytes):
        parts.append(f"sample:{sample_bytes}")
    key = hash_strings(*parts)
    return cache_subdir("tokenizers", cache_dir) / f"bpe-{vocab_size}-{key[:20]}"


def train_or_load_bpe(
    corpus: Corpus,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    *,
    cache_dir: str | os.PathLike | None = None,
    show_progress: bool = True,
    log: Callable[[str], Any] | None = None,
    sample_bytes: int = DEFAULT_SAMPLE_BYTES,
) -> BPEResult:
    """Load the cached BPE of ``corpus``'s train split, training and caching it if missing.

    Args:
        corpus: the corpus (only its train split is used).
        vocab_size: the target vocabulary size.
        cache_dir: the cache root, see :func:`~complexformer.data.cache.cache_root`.
        show_progress: show the training progress bar.
        log: if given (e.g. ``print``), told whether the tokenizer was trained or loaded.
        sample_bytes: train on at most this many bytes of the train split
            (:func:`sample_documents`).

    Returns:
        A :class:`BPEResult` with the tokenizer, its cache path and whether it was trained.
    """
    path = bpe_cache_dir(corpus, vocab_size, cache_dir, sample_bytes)
    if (path / META_FILE).is_file():
        try:
            tok = Tokenizer.load(path)
        except ManifestError as e:  # damaged, or cached before tokenizers had a manifest
            if log is not None:
                log(f"tokenizer: the cached BPE is not intact ({e}); training it again")
        else:
            if log is not None:
                log(f"tokenizer: loaded cached BPE (vocab {tok.vocab_size}) from {path}")
            return BPEResult(tok, path, trained=False)
    if log is not None:
        log(f"tokenizer: training byte-level BPE (vocab {vocab_size}) on {corpus.spec} train")
    sampled = corpus.stats["train"].n_bytes > sample_bytes
    if sampled and log is not None:
        log(
            f"tokenizer: sampling {sample_bytes:,} of the train split's "
            f"{corpus.stats['train'].n_bytes:,} bytes"
        )
    tok = train_bpe(
        sample_documents(corpus, sample_bytes),
        vocab_size,
        length=None if sampled else corpus.stats["train"].n_docs,
        show_progress=show_progress,
    )
    # Save into a temporary sibling that then replaces the cache directory (atomic_dir).
    try:
        with atomic_dir(path) as tmp:
            tok.save(tmp)
    except OSError:
        if not (path / META_FILE).is_file():  # not a concurrent writer that won
            raise
    if log is not None:
        log(f"tokenizer: vocab {tok.vocab_size}, cached at {path}")
    return BPEResult(tok, path, trained=True)


def get_tokenizer(
    name: str | os.PathLike | None,
    corpus: Corpus | None = None,
    *,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    cache_dir: str | os.PathLike | None = None,
    show_progress: bool = True,
    log: Callable[[str], Any] | None = None,
    sample_bytes: int = DEFAULT_SAMPLE_BYTES,
) -> Tokenizer:
    """Resolve a tokenizer option: the default BPE, a saved directory, or a Hugging Face name.

    Args:
        name: None or ``"bpe"`` for the cached byte-level BPE of ``corpus``; otherwise a
            directory (saved by :meth:`Tokenizer.save` or a Hugging Face tokenizer directory)
            or a Hugging Face hub name (needs ``transformers``).
        corpus: the corpus to train the BPE on (required for the BPE).
        vocab_size: the BPE vocabulary size.
        cache_dir: the cache root, see :func:`~complexformer.data.cache.cache_root`.
        show_progress: show the BPE training progress bar.
        log: optional message sink (e.g. ``print``).
        sample_bytes: the BPE's sample budget (:func:`sample_documents`).

    A prepared corpus (``prepared:DIR``) brings its own tokenizer: None or ``"bpe"`` gives
    that one (``vocab_size`` and ``sample_bytes`` are then not used).

    Returns:
        The tokenizer.

    Raises:
        ValueError: the BPE was requested without a corpus.
    """
    if name is None or str(name) == "bpe":
        if corpus is None:
            raise ValueError("the default BPE tokenizer is trained on a corpus; pass corpus=...")
        prepared = getattr(corpus, "prepared_tokenizer", None)
        if prepared is not None:
            if log is not None:
                log(f"tokenizer: {prepared!r} of the prepared corpus {corpus.spec}")
            return prepared
        return train_or_load_bpe(
            corpus,
            vocab_size,
            cache_dir=cache_dir,
            show_progress=show_progress,
            log=log,
            sample_bytes=sample_bytes,
        ).tokenizer
    tok = load_tokenizer(name)
    if log is not None:
        log(f"tokenizer: {tok!r} from {name}")
    return tok
