"""Manifests of saved directories: the sha256 and size of every file, checked on load.

Checkpoints and final models carry a ``manifest.json``; a file that is missing, truncated or
changed by a single byte is refused with an error that names it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ._atomic import atomic_write_text

__all__ = [
    "FORMAT",
    "MANIFEST",
    "ManifestError",
    "sha256_file",
    "verify_manifest",
    "write_manifest",
]

FORMAT = "complexformer-checkpoint-v1"
MANIFEST = "manifest.json"


class ManifestError(ValueError):
    """A saved directory is missing files, truncated, corrupted or of an unknown format."""


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(directory: str | os.PathLike, files: Iterable[str], **meta: Any) -> Path:
    """Write ``directory/manifest.json`` listing ``files`` (names inside ``directory``).

    Args:
        directory: the saved directory.
        files: the file names to record (sha256 and size in bytes).
        **meta: further JSON fields (``step`` for checkpoints, ``kind`` ...).
    """
    d = Path(directory)
    entries = {
        f: {"sha256": sha256_file(d / f), "bytes": (d / f).stat().st_size} for f in sorted(files)
    }
    return atomic_write_text(
        d / MANIFEST, json.dumps({"format": FORMAT, **meta, "files": entries}, indent=2) + "\n"
    )


def verify_manifest(
    directory: str | os.PathLike, required: bool = True, error: type[ValueError] = ManifestError
) -> dict[str, Any] | None:
    """Check the files of ``directory`` against its manifest.

    Args:
        directory: a directory written with :func:`write_manifest`.
        required: a missing manifest is an error (else None is returned).
        error: the exception type to raise (a ValueError subclass).

    Returns:
        The parsed manifest, or None when it is missing and not required.

    Raises:
        ManifestError (or ``error``): a missing or unreadable manifest, an unknown format, or
            a file missing, of the wrong size or with the wrong sha256 (the path is named).
    """
    path = Path(directory)
    mpath = path / MANIFEST
    if not mpath.is_file():
        if not required:
            return None
        raise error(f"{mpath} is missing: {path} is not a complete saved directory")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(f"{mpath} is corrupted (not valid JSON: {e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise error(f"{mpath}: unknown manifest format (expected {FORMAT!r})")
    for fname, info in manifest.get("files", {}).items():
        f = path / fname
        if not f.is_file():
            raise error(f"{f} is missing from {path}")
        size = f.stat().st_size
        if size != info["bytes"]:
            raise error(
                f"{f} is truncated or corrupted: {size} bytes, manifest says {info['bytes']}"
            )
        if sha256_file(f) != info["sha256"]:
            raise error(f"{f} is corrupted: sha256 does not match the manifest")
    return manifest
