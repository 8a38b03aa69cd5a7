"""The data of a training run, prepared by rank 0 while the other ranks wait on a file.

Every task that reads a corpus starts its data here: the language model (``lm.LMTask``), the
CmplxBERT MLM (``cmplxbert.mlm.MLMTask``) and the retrofit (``retrofit.RetrofitTask``).
Rank 0 runs the preparation (load the corpus, train or load the tokenizer, tokenize; or open
and verify a prepared folder) while the other ranks poll a file barrier in the run folder
(:mod:`complexformer.data.barrier`), never a collective with a timeout. Rank 0 then publishes
its tokenizer (saved into the barrier folder) and the paths of the token files; the other
ranks open those without reading or scanning the corpus. A failure on rank 0 is published with
its message, and every other rank raises it at once.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..data import Tokenizer
from ..data.barrier import clear_stale, publish_failure, publish_ready, wait_ready
from ..data.prepared import PreparedCorpus, verify_prepared
from ..data.shards import ShardedTokens, open_shards
from ..storage import atomic_dir, refuse_link
from .dist import DistInfo, all_gather_objects

__all__ = ["BARRIER_DIR", "data_cache_dir", "prepare_on_rank0"]

#: The barrier folder inside the run folder.
BARRIER_DIR = ".data-start"


def data_cache_dir(cache_dir: str | None, out: Path, dist: DistInfo) -> str | None:
    """The cache root of the run's BPE and token arrays.

    An explicit ``cache_dir`` wins; ranks spread over several machines (``LOCAL_WORLD_SIZE``
    below ``WORLD_SIZE``) use ``<out>/cache``, which every machine sees; otherwise None (the
    user's cache, :func:`~complexformer.data.cache.cache_root`).
    """
    if cache_dir is not None:
        return cache_dir
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(dist.world_size)))
    return str(out / "cache") if local_world < dist.world_size else None


def _token_files(tokens: Any) -> list[str]:
    if isinstance(tokens, ShardedTokens):
        return [os.fspath(s.filename) for s in tokens.shards]
    name = getattr(tokens, "filename", None)
    return [] if name is None else [os.fspath(name)]


def _open(files: list[str], dtype: str) -> Any:
    return open_shards(files, dtype) if files else np.zeros(0, dtype=np.dtype(dtype))


def prepare_on_rank0(
    load: Callable[[], tuple[Tokenizer, dict[str, Any], PreparedCorpus | None]],
    out: Path,
    dist: DistInfo,
    timeout: float,
    tokenizer: Tokenizer | None = None,
) -> tuple[Tokenizer, dict[str, Any]]:
    """Run ``load`` on rank 0 only and give the other ranks its tokenizer and token arrays.

    Args:
        load: returns ``(tokenizer, {split: tokens}, prepared corpus or None)``.
        out: the run folder (rank 0 has created it; every rank sees it).
        dist: this process's place in the process group.
        timeout: seconds the other ranks wait for rank 0.
        tokenizer: the tokenizer every rank already holds (a pre-trained model's own, which
            ``load`` then uses): it is not published, and the other ranks return it.

    Returns:
        ``(tokenizer, {split: tokens})`` on every rank.

    Raises:
        LeaderFailedError: (ranks but 0) rank 0 failed; its message is included.
        TimeoutError: (ranks but 0) rank 0 published nothing within ``timeout``.
    """
    if not dist.distributed:
        tok, splits, _ = load()
        return tok, splits
    # A name for this launch, sent before any heavy work (a quick collective).
    launch = all_gather_objects(f"launch-{secrets.token_hex(8)}")[0]
    root = out / BARRIER_DIR
    folder = root / launch
    if dist.is_main:
        refuse_link(root)
        clear_stale(root, keep=launch)
        try:
            tok, splits, prepared = load()
            if tokenizer is None:
                with atomic_dir(folder / "tokenizer") as tmp:
                    tok.save(tmp)
            publish_ready(
                folder,
                {
                    "tokenizer": None if tokenizer is not None else str(folder / "tokenizer"),
                    "prepared": None if prepared is None else str(prepared.directory),
                    "dtype": {s: np.dtype(t.dtype).str for s, t in splits.items()},
                    "splits": {s: _token_files(t) for s, t in splits.items()},
                },
            )
        except BaseException as e:
            publish_failure(folder, f"{type(e).__name__}: {e}")
            raise
        return tok, splits
    ready = wait_ready(folder, timeout)
    if ready["prepared"] is not None and dist.local_rank == 0:
        verify_prepared(ready["prepared"])  # once per machine (a stamp makes it cheap)
    tok = tokenizer if tokenizer is not None else Tokenizer.load(ready["tokenizer"])
    splits = {s: _open(files, ready["dtype"][s]) for s, files in ready["splits"].items()}
    return tok, splits
