"""Manifests of saved directories: the sha256 and size of every file, checked on load.

Every directory the package writes and reads back (checkpoints, final models, tokenizers,
exports, adaptations, CmplxBERT directories) carries a ``manifest.json``, written last; a file
that is missing, truncated or changed by a single byte is refused with an error that names it,
and so is a file the loader reads that the manifest does not list (``covers``). A directory
that says it was written by the package (its own config or marker file) and has no manifest
is refused too; the loaders take ``verify=False`` to read such a directory unchecked.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .atomic import atomic_write_text
from .safe_paths import read_text

__all__ = [
    "FORMAT",
    "MANIFEST",
    "NO_VERIFY_HINT",
    "TOKENIZER_FILES",
    "ManifestError",
    "file_entry",
    "sha256_file",
    "update_manifest",
    "verify_manifest",
    "write_manifest",
    "write_manifest_entries",
]

FORMAT = "complexformer-checkpoint-v1"
MANIFEST = "manifest.json"
#: What an error about a missing or mismatched manifest says about opting out.
NO_VERIFY_HINT = "to load it unchecked, pass verify=False (--no-verify on the command line)"
#: The files a tokenizer loader may read (``tokenizers`` and ``transformers.AutoTokenizer``);
#: those present in a verified directory must be listed in its manifest.
TOKENIZER_FILES = (
    "complexformer_tokenizer.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "tokenizer.model",
    "sentencepiece.bpe.model",
    "chat_template.jinja",
    "chat_template.json",
)


class ManifestError(ValueError):
    """A saved directory is missing files, truncated, corrupted or of an unknown format."""


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _write(d: Path, meta: dict[str, Any], entries: dict[str, Any]) -> Path:
    body = {"format": FORMAT, **meta, "files": dict(sorted(entries.items()))}
    return atomic_write_text(d / MANIFEST, json.dumps(body, indent=2) + "\n")


def _entries(d: Path, files: Iterable[str]) -> dict[str, dict[str, Any]]:
    return {f: {"sha256": sha256_file(d / f), "bytes": (d / f).stat().st_size} for f in files}


def write_manifest(directory: str | os.PathLike, files: Iterable[str], **meta: Any) -> Path:
    """Write ``directory/manifest.json`` listing ``files`` (names inside ``directory``).

    Args:
        directory: the saved directory.
        files: the file names to record (sha256 and size in bytes).
        **meta: further JSON fields (``step`` for checkpoints, ``kind`` ...).
    """
    d = Path(directory)
    return _write(d, meta, _entries(d, files))


def write_manifest_entries(
    directory: str | os.PathLike, entries: dict[str, dict[str, Any]], **meta: Any
) -> Path:
    """Write ``directory/manifest.json`` from entries hashed elsewhere (each writer of a
    sharded checkpoint hashes the part it wrote: ``{name: {"sha256", "bytes"}}``, see
    :func:`file_entry`)."""
    return _write(Path(directory), meta, entries)


def file_entry(path: str | os.PathLike) -> dict[str, Any]:
    """The manifest entry of one file: ``{"sha256", "bytes"}``."""
    return {"sha256": sha256_file(path), "bytes": Path(path).stat().st_size}


def update_manifest(directory: str | os.PathLike, files: Iterable[str], **meta: Any) -> Path:
    """Record ``files`` (re-hashed) in ``directory/manifest.json``, keeping the other entries
    and fields of a manifest already there as they are.

    The kept entries are not re-hashed: a file changed since that manifest was written stays
    refused by :func:`verify_manifest`. Without a readable manifest of this format (a link in
    its place is not read) it is :func:`write_manifest` of ``files`` with ``meta``.
    """
    d = Path(directory)
    files = set(files)
    try:
        old = json.loads(read_text(d / MANIFEST))
    except (OSError, ValueError):  # missing, a link, unreadable or not JSON
        old = None
    if not isinstance(old, dict) or old.get("format") != FORMAT:
        return write_manifest(d, files, **meta)
    kept = old.get("files") if isinstance(old.get("files"), dict) else {}
    entries = {f: info for f, info in kept.items() if f not in files} | _entries(d, files)
    return _write(d, {k: v for k, v in old.items() if k not in ("format", "files")}, entries)


def verify_manifest(
    directory: str | os.PathLike,
    required: bool = True,
    error: type[ValueError] = ManifestError,
    covers: Iterable[str] = (),
) -> dict[str, Any] | None:
    """Check the files of ``directory`` against its manifest.

    Args:
        directory: a directory written with :func:`write_manifest`.
        required: a missing manifest is an error (else None is returned).
        error: the exception type to raise (a ValueError subclass).
        covers: names (inside ``directory``, ``/`` between folders) of the files the caller
            will read; each one that exists must be listed in the manifest, so that a file
            added after the save cannot be read unchecked.

    Returns:
        The parsed manifest, or None when it is missing and not required.

    Raises:
        ManifestError (or ``error``): a missing or unreadable manifest, an unknown format, a
            file missing, of the wrong size or with the wrong sha256, or a file in ``covers``
            that the manifest does not list (the path is named).
    """
    path = Path(directory)
    mpath = path / MANIFEST
    if not mpath.is_file():
        if not required:
            return None
        raise error(
            f"{mpath} is missing: {path} is not a complete saved directory, or its manifest "
            f"was removed; {NO_VERIFY_HINT}"
        )
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(f"{mpath} is corrupted (not valid JSON: {e}); {NO_VERIFY_HINT}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise error(f"{mpath}: unknown manifest format (expected {FORMAT!r})")
    files = manifest.get("files", {})
    if not isinstance(files, dict):
        raise error(f"{mpath}: 'files' is not a mapping of file names")
    for fname, info in files.items():
        f = path / fname
        if not f.is_file():
            raise error(f"{f} is missing from {path}")
        size = f.stat().st_size
        if not isinstance(info, dict) or size != info.get("bytes"):
            want = info.get("bytes") if isinstance(info, dict) else None
            raise error(f"{f} is truncated or corrupted: {size} bytes, manifest says {want}")
        if sha256_file(f) != info.get("sha256"):
            raise error(f"{f} is corrupted: sha256 does not match the manifest")
    for fname in covers:
        if fname not in files and (path / fname).is_file():
            raise error(
                f"{path / fname} is not listed in {mpath}: it was added after the save; "
                f"{NO_VERIFY_HINT}"
            )
    return manifest
