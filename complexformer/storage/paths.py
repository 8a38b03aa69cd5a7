"""Telling a local path from a hub name before anything is downloaded."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["looks_local", "require_local_or_hub"]


def looks_local(name: str | os.PathLike) -> bool:
    """Whether ``name`` is written as a local path rather than a hub name (``org/model``).

    Absolute paths, paths starting with ``.``, ``..`` or ``~``, and anything that exists on
    disk count as local; ``gpt2`` or ``org/model`` do not.
    """
    s = os.fspath(name)
    return (
        s.startswith(("/", "./", "../", "~", ".\\", "..\\"))
        or s in (".", "..")
        or Path(s).expanduser().exists()
    )


def require_local_or_hub(name: str | os.PathLike, what: str) -> None:
    """Raise FileNotFoundError for a local-looking path that does not exist.

    Called before a hub lookup, so a mistyped local path says "no such file or directory"
    instead of a hub error about an invalid repository name.

    Args:
        name: a local path or a hub name.
        what: what it names (``tokenizer``, ``evaluator`` ...), for the message.
    """
    s = os.fspath(name)
    if looks_local(s) and not Path(s).expanduser().exists():
        raise FileNotFoundError(f"{what} {s}: no such file or directory")
