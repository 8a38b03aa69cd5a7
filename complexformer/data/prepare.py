"""``complexformer prepare``: tokenize a corpus once, with several processes, into a folder
that training reads as ``--data prepared:DIR`` (layout: :mod:`complexformer.data.prepared`).

The tokenizer is resolved exactly as training resolves it (:func:`~.bpe.get_tokenizer`: the
cached byte-level BPE of the corpus, trained on its bounded sample, or a named tokenizer), and
each split's documents are encoded as training encodes them (:func:`~.tokens.pack_units`:
``ids(doc) + [EOS]`` per document, a long document in parts cut where its tokens do not
change), so the prepared token stream is the one training on the
spec directly produces.

Parallelism: the main process streams the documents in batches (at most 512 documents or
about 1 Mi characters) to ``workers`` forked processes, each encoding with one thread, keeps at
most two batches per worker in flight (memory does not grow with the corpus), and writes the
results in submission order. The output therefore does not depend on ``workers``; the shards
cut the stream at every ``shard_tokens`` tokens, so their concatenation does not depend on the
shard size either. ``multiprocessing`` was chosen over ``datasets.map(num_proc=)`` by
measurement (benchmarks/data.py): ``datasets`` first writes the text into Arrow files and
then the mapped tokens into more Arrow files, which costs more than the encoding itself on the
corpora measured here.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..storage import atomic_dir, atomic_write_text, write_manifest
from .bpe import DEFAULT_SAMPLE_BYTES, DEFAULT_VOCAB_SIZE, get_tokenizer
from .corpus import Corpus
from .prepared import INDEX, PREPARED_FORMAT, TOKENIZER_DIR, is_prepared
from .shards import ShardWriter
from .spec import load_corpus, parse_data_spec
from .splits import SPLITS
from .tokenizer import Tokenizer
from .tokens import batches, pack_units, split_units, token_dtype

__all__ = [
    "DEFAULT_SHARD_TOKENS",
    "PrepareConfig",
    "default_workers",
    "encode_stream",
    "prepare_corpus",
]

#: The most tokens in one shard file (256 Mi tokens: 512 MiB of uint16).
DEFAULT_SHARD_TOKENS = 1 << 28

_WORKER: dict[str, Any] = {}


@dataclass
class PrepareConfig:
    """The settings of ``complexformer prepare`` (``--set KEY=VALUE`` reaches every field).

    Attributes:
        data: corpus spec, as ``train --data`` takes it: ``stdlib``, ``shakespeare``,
            ``text:GLOB`` or ``hf:NAME[:CONFIG]``.
        tokenizer: a tokenizer directory or Hugging Face name; None: the byte-level BPE
            trained on the train split, as ``train`` does.
        vocab_size: vocabulary of the trained BPE.
        text_field: the JSONL field / dataset column with the text.
        workers: processes that tokenize in parallel (None: the usable cores); the output is
            the same for any number.
        shard_tokens: the most tokens in one shard file (default 256 Mi).
        tokenizer_sample_bytes: the BPE's training sample budget (default 256 MiB).
        cache_dir: the cache root of the BPE (default: the user's cache).
        hf_streaming: (``hf:``) stream the dataset; None: stream a Hub dataset, read a local
            one converted to Arrow.
    """

    data: str = "stdlib"
    tokenizer: str | None = None
    vocab_size: int = DEFAULT_VOCAB_SIZE
    text_field: str = "text"
    workers: int | None = None
    shard_tokens: int = DEFAULT_SHARD_TOKENS
    tokenizer_sample_bytes: int = DEFAULT_SAMPLE_BYTES
    cache_dir: str | None = None
    hf_streaming: bool | None = None


def default_workers() -> int:
    """The CPU cores this process may use (``os.sched_getaffinity``), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def _one_thread_encoding() -> Iterator[None]:
    """``tokenizers`` encodes on one thread inside the block (TOKENIZERS_PARALLELISM=false)."""
    old = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = old


def _init_worker(tokenizer_dir: str, dtype: str) -> None:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _WORKER["tok"] = Tokenizer.load(tokenizer_dir, verify=False)
    _WORKER["dtype"] = np.dtype(dtype)


def _encode_batch(batch: list[tuple[str, bool]]) -> tuple[np.ndarray, int]:
    chunks = list(pack_units(batch, _WORKER["tok"], _WORKER["dtype"]))
    return np.concatenate([c for c, _ in chunks]), sum(n for _, n in chunks)


def encode_stream(
    units: Iterable[tuple[str, bool]],
    tokenizer: Tokenizer,
    tokenizer_dir: str | os.PathLike,
    dtype: np.dtype,
    workers: int,
) -> Iterator[tuple[np.ndarray, int]]:
    """:func:`~.tokens.pack_units` of ``units`` on ``workers`` processes, results in order.

    Args:
        units: the ``(text, eos)`` units (:func:`~.tokens.split_units`), streamed.
        tokenizer: the tokenizer (used in this process when ``workers == 1``).
        tokenizer_dir: where it is saved (the worker processes load it from there).
        dtype: the token dtype.
        workers: the number of processes (1: encode here, on one thread).

    Yields:
        ``(tokens, n_docs)`` per batch of documents, in document order.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if workers == 1:
        with _one_thread_encoding():
            yield from pack_units(units, tokenizer, dtype)
        return
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    with _one_thread_encoding():
        pool = ctx.Pool(workers, _init_worker, (os.fspath(tokenizer_dir), np.dtype(dtype).str))
    with pool:
        pending: deque[Any] = deque()
        for batch in batches(units):
            pending.append(pool.apply_async(_encode_batch, (batch,)))
            if len(pending) >= 2 * workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


def _check_out(out: Path, overwrite: bool) -> None:
    if out.is_symlink():
        raise ValueError(f"--out {out} is a symbolic link; give the folder itself")
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    if not out.is_dir():
        raise ValueError(f"--out {out} is a file; give a new or empty folder")
    if not is_prepared(out):
        raise ValueError(
            f"--out {out} is a non-empty folder that is not a prepared corpus; give a new or "
            f"empty folder (nothing in it is touched)"
        )
    if not overwrite:
        raise ValueError(
            f"--out {out} already holds a prepared corpus; pass overwrite=True (--overwrite) "
            f"to replace it"
        )


def _write_split(
    corpus: Corpus,
    split: str,
    tok: Tokenizer,
    tmp: Path,
    dtype: np.dtype,
    workers: int,
    shard_tokens: int,
    log: Callable[[str], Any] | None,
    show_progress: bool,
) -> dict[str, Any]:
    writer = ShardWriter(tmp, split, dtype, shard_tokens)
    n_docs = n_tokens = 0
    units = split_units(corpus, split, tok)
    stream = encode_stream(units, tok, tmp / TOKENIZER_DIR, dtype, workers)
    total = corpus.stats[split].n_docs
    bar = tqdm(total=total, desc=f"prepare {split}", unit="doc", disable=not show_progress)
    with bar:
        for chunk, docs in stream:
            writer.write(chunk)
            n_docs += docs
            n_tokens += len(chunk)
            bar.update(docs)
    shards = writer.close()
    stats = corpus.stats[split]
    if log is not None:
        log(f"prepare: {split}: {n_docs:,} docs, {n_tokens:,} tokens, {len(shards)} shard(s)")
    return {
        "n_files": stats.n_files,
        "n_docs": n_docs,
        "n_bytes": stats.n_bytes,
        "n_tokens": n_tokens,
        "fingerprint": corpus.fingerprint(split),
        "shards": [{"file": name, "n_tokens": n} for name, n in shards],
    }


def prepare_corpus(
    spec: str,
    out: str | os.PathLike,
    *,
    tokenizer: str | None = None,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    text_field: str = "text",
    workers: int | None = None,
    shard_tokens: int = DEFAULT_SHARD_TOKENS,
    sample_bytes: int = DEFAULT_SAMPLE_BYTES,
    cache_dir: str | os.PathLike | None = None,
    hf_streaming: bool | None = None,
    overwrite: bool = False,
    show_progress: bool = True,
    log: Callable[[str], Any] | None = None,
) -> Path:
    """Tokenize every split of a corpus into a prepared folder (see the module's docstring).

    Args:
        spec: a data spec as ``train`` takes it (``stdlib``, ``shakespeare``, ``text:GLOB``,
            ``hf:NAME[:CONFIG]``); not ``prepared:``.
        out: the folder to write (new, empty, or a prepared corpus with ``overwrite``); it is
            written beside and moved into place when complete.
        tokenizer: None or ``"bpe"`` for the corpus's byte-level BPE, else a tokenizer
            directory or Hugging Face name (as ``train --tokenizer``).
        vocab_size: the BPE's vocabulary.
        text_field: the JSONL field / dataset column with the text.
        workers: encoding processes; default :func:`default_workers`.
        shard_tokens: the most tokens in one shard file.
        sample_bytes: the BPE's training sample budget (``tokenizer_sample_bytes``).
        cache_dir: the cache root for the BPE (see :func:`~.cache.cache_root`).
        hf_streaming: (``hf:``) stream the dataset (True), read it converted to Arrow
            (False), or None: stream a Hub dataset, not a local folder or file.
        overwrite: replace an existing prepared folder.
        show_progress: progress bars (BPE training, documents encoded per split).
        log: message sink (e.g. ``print``).

    Returns:
        The folder.

    Raises:
        ValueError: a ``prepared:`` spec, bad sizes, or an ``out`` that is not new, empty or
            (with ``overwrite``) a prepared corpus.
    """
    if parse_data_spec(spec).kind == "prepared":
        raise ValueError(f"data spec {spec!r} is already prepared; prepare reads a source corpus")
    workers = default_workers() if workers is None else int(workers)
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    out = Path(out).expanduser()
    _check_out(out, overwrite)
    corpus = load_corpus(spec, text_field=text_field, log=log, hf_streaming=hf_streaming)
    tok = get_tokenizer(
        tokenizer,
        corpus,
        vocab_size=vocab_size,
        cache_dir=cache_dir,
        show_progress=show_progress,
        log=log,
        sample_bytes=sample_bytes,
    )
    dtype = token_dtype(tok.vocab_size)
    with atomic_dir(out) as tmp:
        tok.save(tmp / TOKENIZER_DIR)
        splits = {
            s: _write_split(corpus, s, tok, tmp, dtype, workers, shard_tokens, log, show_progress)
            for s in SPLITS
        }
        sampled = corpus.stats["train"].n_bytes > sample_bytes
        index = {
            "format": PREPARED_FORMAT,
            "spec": corpus.spec,
            "text_field": text_field,
            "split_rule": corpus.split_rule,
            "dtype": dtype.name,
            "shard_tokens": int(shard_tokens),
            "tokenizer": {
                "name": tokenizer or "bpe",
                "kind": tok.kind,
                "vocab_size": tok.vocab_size,
                "eos_token_id": tok.eos_token_id,
                "fingerprint": tok.fingerprint,
                "sample_bytes": int(sample_bytes) if sampled else None,
            },
            "skipped": list(corpus.skipped),
            "splits": splits,
        }
        atomic_write_text(tmp / INDEX, json.dumps(index, indent=2, sort_keys=True) + "\n")
        files = [INDEX] + [sh["file"] for s in SPLITS for sh in splits[s]["shards"]]
        write_manifest(tmp, files, kind="prepared-corpus")
    if log is not None:
        log(f"prepare: wrote {out}")
    return out
