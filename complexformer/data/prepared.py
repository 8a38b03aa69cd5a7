"""A prepared corpus (``prepared:DIR``): a folder written once by ``complexformer prepare``.

Layout::

    DIR/index.json            format, source spec and fingerprints, split rule, tokenizer
                              fingerprint, dtype, shard size, per-split documents, bytes,
                              tokens and shards
    DIR/tokenizer/            the tokenizer (Tokenizer.save, with its own manifest)
    DIR/train-00000.bin ...   each split's token stream ``doc EOS doc EOS ...`` cut into shards
                              of at most ``shard_tokens`` tokens (uint16 / uint32, little-endian)
    DIR/manifest.json         sha256 and size of index.json and every shard, written last

Opening one reads only ``index.json``, the tokenizer and the manifest; the source corpus is
never read. The shards are checked against the manifest once per machine: a successful check
leaves a stamp in the machine's cache (``<cache root>/verified/``) keyed by the folder's real
path, its manifest and the size and modification time of every shard, and a later opening with
the same stamp skips the hashing. A shard that was changed, truncated or removed is refused
with an error that names it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..storage import MANIFEST, ManifestError, atomic_write_text, refuse_link, verify_manifest
from .cache import cache_root, hash_strings
from .corpus import Corpus, SplitStats
from .shards import open_shards
from .splits import SPLITS, check_split
from .tokenizer import Tokenizer

__all__ = ["INDEX", "PREPARED_FORMAT", "PreparedCorpus", "is_prepared", "verify_prepared"]

PREPARED_FORMAT = "complexformer-prepared-v1"
INDEX = "index.json"
TOKENIZER_DIR = "tokenizer"
#: Tokens :meth:`PreparedCorpus.documents` reads at a time (a document may span two reads).
DECODE_TOKENS = 1 << 20


def is_prepared(directory: str | os.PathLike) -> bool:
    """True when ``directory`` holds a prepared corpus (an ``index.json`` of this format)."""
    path = Path(directory) / INDEX
    if not path.is_file():
        return False
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("format") == PREPARED_FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def _read_index(d: Path) -> dict[str, Any]:
    path = d / INDEX
    if not path.is_file():
        raise FileNotFoundError(
            f"{d} is not a prepared corpus: it has no {INDEX} (write one with "
            f"'complexformer prepare --data SPEC --out {d}')"
        )
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ManifestError(f"{path} is corrupted (not valid JSON: {e})") from None
    if not isinstance(index, dict) or index.get("format") != PREPARED_FORMAT:
        raise ManifestError(f"{path}: unknown format (expected {PREPARED_FORMAT!r})")
    return index


def _shard_files(index: dict[str, Any]) -> list[str]:
    return [s["file"] for split in SPLITS for s in index["splits"][split]["shards"]]


def _stamp_path(d: Path, index: dict[str, Any]) -> Path:
    manifest = d / MANIFEST
    parts = [PREPARED_FORMAT, str(d.resolve())]
    parts.append(manifest.read_bytes().hex() if manifest.is_file() else "")
    for name in [INDEX, *_shard_files(index)]:
        f = d / name
        st = f.stat() if f.is_file() else None
        parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}" if st else f"{name}:missing")
    return cache_root() / "verified" / f"{hash_strings(*parts)[:32]}.json"


def verify_prepared(directory: str | os.PathLike, *, force: bool = False) -> bool:
    """Check a prepared corpus against its manifest, once per machine.

    Args:
        directory: the prepared folder.
        force: hash every file even when this machine's stamp says it was checked.

    Returns:
        True when the files were hashed now, False when a stamp of an earlier check of the
        same files (same sizes and modification times) made it unnecessary.

    Raises:
        ManifestError: a missing manifest, or a shard or the index missing, truncated or
            changed (the file is named).
    """
    d = Path(directory)
    index = _read_index(d)
    stamp = _stamp_path(d, index)
    if stamp.is_file() and not force:
        return False
    verify_manifest(d, covers=[INDEX, *_shard_files(index)])
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(stamp, json.dumps({"directory": str(d.resolve())}) + "\n")
    except OSError:  # a read-only cache: the check is simply done again next time
        pass
    return True


class PreparedCorpus(Corpus):
    """A prepared corpus folder, read without its source.

    Args:
        directory: the folder ``complexformer prepare`` wrote.
        verify: check the shards against the manifest (once per machine, see the module's
            docstring); False reads them unchecked (the other ranks of a run whose first rank
            checked them).

    Attributes:
        directory: the folder.
        index: the parsed ``index.json``.
        prepared_tokenizer: the tokenizer the shards were written with.

    Raises:
        FileNotFoundError: the folder or its index is missing.
        ManifestError: (``verify``) a file does not match the manifest (it is named).
    """

    def __init__(self, directory: str | os.PathLike, *, verify: bool = True) -> None:
        d = Path(directory).expanduser()
        if not d.is_dir():
            raise FileNotFoundError(f"prepared corpus folder {str(d)!r} does not exist")
        refuse_link(d)
        self.directory = d
        self.index = _read_index(d)
        if verify:
            verify_prepared(d)
        self.spec = f"prepared:{d}"
        self.skipped = list(self.index.get("skipped", []))
        self.split_rule = str(self.index["split_rule"])
        splits = self.index["splits"]
        self.stats = {
            s: SplitStats(splits[s]["n_files"], splits[s]["n_docs"], splits[s]["n_bytes"])
            for s in SPLITS
        }
        self.dtype = np.dtype(self.index["dtype"]).newbyteorder("<")
        self.prepared_tokenizer = Tokenizer.load(d / TOKENIZER_DIR, verify=verify)
        if self.prepared_tokenizer.fingerprint != self.index["tokenizer"]["fingerprint"]:
            raise ManifestError(
                f"{d / TOKENIZER_DIR}: the tokenizer is not the one the shards were written with"
            )

    def describe(self) -> str:
        """:meth:`Corpus.describe` with the source spec and the token counts."""
        lines = [super().describe(), f"  prepared from {self.index['spec']}; tokens:"]
        for s in SPLITS:
            info = self.index["splits"][s]
            lines.append(f"  {s:<5} {info['n_tokens']:>14,} tokens in {len(info['shards'])} shards")
        return "\n".join(lines)

    def tokens(self, split: str) -> Any:
        """The split's token stream, memory-mapped (a ``np.memmap`` or :class:`ShardedTokens`).

        Raises:
            ManifestError: a shard's size differs from the index (it is named).
        """
        check_split(split)
        paths = []
        for shard in self.index["splits"][split]["shards"]:
            path = self.directory / shard["file"]
            want = shard["n_tokens"] * self.dtype.itemsize
            size = path.stat().st_size if path.is_file() else None
            if size != want:
                raise ManifestError(
                    f"{path} is missing or truncated: {size} bytes, the index says {want}"
                )
            paths.append(path)
        return open_shards(paths, self.dtype)

    def prepared_tokens(self, split: str, tokenizer: Tokenizer) -> Any | None:
        """:meth:`tokens` when ``tokenizer`` is the prepared one, else None."""
        if tokenizer.fingerprint != self.index["tokenizer"]["fingerprint"]:
            return None
        return self.tokens(split)

    def documents(self, split: str) -> Iterator[str]:
        """The split's documents, decoded from the tokens (the byte-level BPE gives the text
        back exactly), one at a time."""
        tokens = self.tokens(split)
        eos = self.prepared_tokenizer.eos_token_id
        n, step, pending = len(tokens), DECODE_TOKENS, np.zeros(0, dtype=np.int64)
        for start in range(0, n, step):
            piece = np.concatenate([pending, np.asarray(tokens[start : start + step], np.int64)])
            ends = np.flatnonzero(piece == eos)
            begin = 0
            for end in ends:
                text = self.prepared_tokenizer.decode(piece[begin:end])
                if text.strip():
                    yield text
                begin = int(end) + 1
            pending = piece[begin:]

    def fingerprint(self, split: str) -> str:
        """The source's fingerprint of ``split``, recorded when the folder was prepared."""
        check_split(split)
        return str(self.index["splits"][split]["fingerprint"])
