"""Atomic file writes: write a temporary sibling, flush it to disk, then ``os.replace`` it.

A crash at any point leaves either the old file or the complete new one, never a partial
file under the final name. Used for checkpoints, caches, configs, adapters and plots.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

__all__ = ["atomic_output", "atomic_write", "atomic_write_text"]


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[str]:
    """Yield a temporary file name next to ``path`` for a writer that takes a file name
    (``safetensors``' ``save_file``, ``savefig``); on success it is synced and moved onto
    ``path``, on an exception it is removed and ``path`` is left untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield tmp
        _fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO]:
    """Open a temporary file next to ``path``; on success move it onto ``path`` atomically.

    Args:
        path: the final file name.
        mode: ``"wb"`` or ``"w"`` (text mode writes UTF-8).

    Yields:
        The open temporary file.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_write mode must be 'wb' or 'w', got {mode!r}")
    with atomic_output(path) as tmp:
        kwargs = {"encoding": "utf-8"} if mode == "w" else {}
        with open(tmp, mode, **kwargs) as f:
            yield f


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns the path."""
    with atomic_write(path, "w") as f:
        f.write(text)
    return Path(path)
