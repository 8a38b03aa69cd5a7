"""On-disk cache location, content hashing and atomic writes.

The cache root is chosen, in order, by:

1. an explicit ``cache_dir`` argument (every caching function takes one);
2. the environment variable ``COMPLEXFORMER_CACHE``;
3. ``$XDG_CACHE_HOME/complexformer`` when ``XDG_CACHE_HOME`` is set;
4. ``~/.cache/complexformer``.

Below the root, trained tokenizers live in ``tokenizers/`` and tokenized splits in ``tokens/``.
Every cache file is written to a temporary file in the same directory first and then moved into
place with :func:`os.replace`, so a crash or a concurrent writer never leaves a half-written file
under the final name.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..storage import atomic_write

__all__ = [
    "CACHE_ENV_VAR",
    "atomic_write",
    "cache_root",
    "cache_subdir",
    "hash_strings",
]

CACHE_ENV_VAR = "COMPLEXFORMER_CACHE"


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The root directory of complexformer's caches (not created).

    Args:
        cache_dir: an explicit root; wins over the environment.

    Returns:
        ``cache_dir`` if given, else ``$COMPLEXFORMER_CACHE``, else
        ``$XDG_CACHE_HOME/complexformer``, else ``~/.cache/complexformer``.
    """
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get(CACHE_ENV_VAR)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "complexformer"


def cache_subdir(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """``cache_root(cache_dir) / name``, created if missing.

    Args:
        name: the sub-directory, e.g. ``"tokenizers"`` or ``"tokens"``.
        cache_dir: an explicit cache root, see :func:`cache_root`.

    Returns:
        The existing directory.
    """
    path = cache_root(cache_dir) / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def hash_strings(*parts: str, digest_size: int = 16) -> str:
    """A stable hex digest (blake2b) of a sequence of strings.

    Parts are length-prefixed, so ``("ab", "c")`` and ``("a", "bc")`` hash differently.

    Args:
        *parts: the strings to hash, in order.
        digest_size: digest length in bytes (the hex string is twice as long).

    Returns:
        The lowercase hex digest.
    """
    h = hashlib.blake2b(digest_size=digest_size)
    for part in parts:
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()
