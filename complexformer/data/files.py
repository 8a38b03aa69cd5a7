"""Corpora of local files: the Python standard library (``stdlib``) and ``text:GLOB``.

Documents:

* a ``.py`` or ``.txt`` file is one document (its whole text);
* each line of a ``.jsonl`` file is one document: the string field ``text_field`` of the JSON
  object on that line (blank lines are ignored).

Splits are assigned by :func:`~complexformer.data.splits.split_of` of the path relative to the
corpus root (``/``-separated); for JSONL lines the key is ``"<relative path>:<line number>"``
(1-based physical line number), so a JSONL file contributes to every split.

Encoding policy: a ``.py``/``.txt`` file that is not valid UTF-8 is **skipped** (and listed in
``corpus.skipped``); decoding with replacement characters would teach the tokenizer U+FFFD
sequences that never occur in real text (the Python 3.11 standard library has four such files,
all deliberate encoding tests). A JSONL line that is not UTF-8, not JSON, not an object, or has
no string ``text_field`` raises :class:`ValueError` naming the file and line: JSON is UTF-8 by
definition, so such a line means a broken input, not an odd one.

Loading a corpus reads every file once, streaming, to compute the per-split statistics and a
content hash of each file (the corpus fingerprint); nothing but file names, digests and counts
is kept in memory. :meth:`FileCorpus.documents` reads the files again on each call.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import sysconfig
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .cache import hash_strings
from .corpus import Corpus, SplitStats, check_not_empty
from .splits import DEFAULT_FRACTIONS, SPLITS, check_fractions, check_split, split_of

__all__ = [
    "STDLIB_EXCLUDED_DIRS",
    "TEXT_SUFFIXES",
    "FileCorpus",
    "expand_text_glob",
    "list_stdlib_files",
    "stdlib_corpus",
    "stdlib_root",
    "text_corpus",
]

TEXT_SUFFIXES: tuple[str, ...] = (".txt", ".jsonl")
STDLIB_EXCLUDED_DIRS: frozenset[str] = frozenset({"site-packages", "dist-packages", "__pycache__"})
_GLOB_MAGIC = frozenset("*?[")
_FINGERPRINT_VERSION = "files-v1"


@dataclass(frozen=True)
class _SourceFile:
    """One input file: absolute path, key relative to the corpus root, and content digest."""

    path: Path
    relpath: str
    jsonl: bool
    digest: str
    split: str | None  # the split of a whole-file document; None for JSONL files


def _relkey(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` with ``/`` separators (the split and cache key)."""
    return os.path.relpath(path, root).replace(os.sep, "/")


class FileCorpus(Corpus):
    """A corpus of local ``.py``/``.txt`` (one document per file) and ``.jsonl`` files.

    Args:
        spec: the spec string, for messages and :meth:`describe`.
        root: the directory relative keys are computed from.
        paths: the input files (any order; they are sorted by relative key).
        text_field: the JSONL field holding the document text.
        fractions: (train, val, test) split fractions.

    Raises:
        ValueError: if the corpus or its train split has no non-empty document, or a JSONL
            line is malformed.
    """

    def __init__(
        self,
        spec: str,
        root: str | os.PathLike[str],
        paths: Sequence[str | os.PathLike[str]],
        *,
        text_field: str = "text",
        fractions: Sequence[float] = DEFAULT_FRACTIONS,
    ) -> None:
        self.spec = spec
        self.root = Path(root)
        self.text_field = text_field
        self.fractions = check_fractions(fractions)
        self.skipped: list[str] = []
        keyed = sorted((_relkey(Path(p), self.root), Path(p)) for p in paths)
        files: list[_SourceFile] = []
        n_files = dict.fromkeys(SPLITS, 0)
        n_docs = dict.fromkeys(SPLITS, 0)
        n_bytes = dict.fromkeys(SPLITS, 0)
        for relpath, path in keyed:
            if path.suffix == ".jsonl":
                digest, docs, nbytes = self._scan_jsonl(path, relpath)
                files.append(_SourceFile(path, relpath, True, digest, None))
                for split in SPLITS:
                    n_docs[split] += docs[split]
                    n_bytes[split] += nbytes[split]
                    n_files[split] += docs[split] > 0
                continue
            data = path.read_bytes()
            digest = hashlib.blake2b(data, digest_size=16).hexdigest()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                self.skipped.append(f"{relpath} (not UTF-8)")
                continue
            split = split_of(relpath, self.fractions)
            files.append(_SourceFile(path, relpath, False, digest, split))
            if text.strip():
                n_files[split] += 1
                n_docs[split] += 1
                n_bytes[split] += len(data)
        self._files = files
        self.stats = {s: SplitStats(n_files[s], n_docs[s], n_bytes[s]) for s in SPLITS}
        self._fingerprints: dict[str, str] = {}
        check_not_empty(self)

    # -- loading --------------------------------------------------------------------------

    def _parse_jsonl_line(self, raw: bytes, path: Path, lineno: int) -> str:
        """The text field of one JSONL line; raises ValueError naming ``path:lineno``."""
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ValueError(f"{where}: line is not valid UTF-8 ({e})") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: invalid JSON ({e})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        if self.text_field not in obj:
            keys = ", ".join(map(repr, list(obj)[:10])) or "none"
            raise ValueError(
                f"{where}: no field {self.text_field!r} (keys: {keys}); "
                f"choose the field with text_field=..."
            )
        text = obj[self.text_field]
        if not isinstance(text, str):
            raise ValueError(
                f"{where}: field {self.text_field!r} must be a string, got {type(text).__name__}"
            )
        return text

    def _scan_jsonl(self, path: Path, relpath: str) -> tuple[str, dict[str, int], dict[str, int]]:
        """Digest of the file and per-split document and byte counts of its lines."""
        h = hashlib.blake2b(digest_size=16)
        docs = dict.fromkeys(SPLITS, 0)
        nbytes = dict.fromkeys(SPLITS, 0)
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, start=1):
                h.update(raw)
                if not raw.strip():
                    continue
                text = self._parse_jsonl_line(raw, path, lineno)
                if text.strip():
                    split = split_of(f"{relpath}:{lineno}", self.fractions)
                    docs[split] += 1
                    nbytes[split] += len(text.encode("utf-8"))
        return h.hexdigest(), docs, nbytes

    # -- Corpus API -----------------------------------------------------------------------

    def documents(self, split: str) -> Iterator[str]:
        """Stream the non-empty documents of ``split`` in sorted relative-path order.

        Args:
            split: ``"train"``, ``"val"`` or ``"test"``.

        Yields:
            Document texts, one at a time (files are read lazily).
        """
        check_split(split)
        for f in self._files:
            if f.jsonl:
                with open(f.path, "rb") as fh:
                    for lineno, raw in enumerate(fh, start=1):
                        if not raw.strip():
                            continue
                        if split_of(f"{f.relpath}:{lineno}", self.fractions) != split:
                            continue
                        text = self._parse_jsonl_line(raw, f.path, lineno)
                        if text.strip():
                            yield text
            elif f.split == split:
                try:
                    text = f.path.read_bytes().decode("utf-8")
                except UnicodeDecodeError:
                    continue
                if text.strip():
                    yield text

    def fingerprint(self, split: str) -> str:
        """Hash of the content digests of every file that can contribute to ``split``.

        Whole files count for their own split only, JSONL files for every split; the split
        fractions and (when JSONL files are present) the text field are included.

        Args:
            split: ``"train"``, ``"val"`` or ``"test"``.

        Returns:
            A 32-character hex digest.
        """
        check_split(split)
        if split not in self._fingerprints:
            has_jsonl = any(f.jsonl for f in self._files)
            parts = [_FINGERPRINT_VERSION, split, repr(self.fractions)]
            parts.append(self.text_field if has_jsonl else "")
            for f in self._files:
                if f.jsonl or f.split == split:
                    parts += [f.relpath, f.digest]
            self._fingerprints[split] = hash_strings(*parts)
        return self._fingerprints[split]

    def files(self, split: str | None = None) -> list[str]:
        """Relative keys of the (UTF-8) input files, optionally only those of one split.

        Args:
            split: if given, only whole-file documents of that split plus all JSONL files.

        Returns:
            Sorted relative paths.
        """
        if split is not None:
            check_split(split)
        return [f.relpath for f in self._files if split is None or f.jsonl or f.split == split]


# -- stdlib -------------------------------------------------------------------------------


def stdlib_root() -> Path:
    """The running interpreter's standard library directory (``sysconfig`` ``stdlib`` path)."""
    return Path(sysconfig.get_paths()["stdlib"])


def list_stdlib_files(
    root: str | os.PathLike[str] | None = None,
    exclude_dirs: frozenset[str] = STDLIB_EXCLUDED_DIRS,
) -> list[Path]:
    """All ``.py`` files under the standard library, without third-party packages.

    Directories named in ``exclude_dirs`` (default :data:`STDLIB_EXCLUDED_DIRS`:
    ``site-packages``, ``dist-packages``, ``__pycache__``) are pruned; symlinked directories
    are not followed.

    Args:
        root: the directory to walk; default :func:`stdlib_root`.
        exclude_dirs: directory names to prune.

    Returns:
        The file paths, sorted.
    """
    root = Path(root) if root is not None else stdlib_root()
    if not root.is_dir():
        raise FileNotFoundError(f"standard library directory {str(root)!r} does not exist")
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in exclude_dirs)
        out.extend(Path(dirpath) / name for name in filenames if name.endswith(".py"))
    return sorted(out)


def stdlib_corpus(
    *,
    root: str | os.PathLike[str] | None = None,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    spec: str = "stdlib",
) -> FileCorpus:
    """The ``.py`` sources of the running interpreter's standard library as a corpus.

    Args:
        root: override the standard library directory (tests use a small tree).
        fractions: (train, val, test) split fractions.
        spec: the spec string recorded on the corpus.

    Returns:
        The loaded :class:`FileCorpus`.
    """
    root = Path(root) if root is not None else stdlib_root()
    return FileCorpus(spec, root, list_stdlib_files(root), fractions=fractions)


# -- text:GLOB ----------------------------------------------------------------------------


def _has_magic(s: str) -> bool:
    return any(c in _GLOB_MAGIC for c in s)


def expand_text_glob(pattern: str) -> tuple[Path, list[Path]]:
    """Resolve a ``text:`` pattern into a root directory and its ``.txt``/``.jsonl`` files.

    * a glob (``*``, ``?``, ``[...]``; ``**`` recurses): the matching files; the root is the
      longest leading part of the pattern without glob characters;
    * a directory: every ``.txt``/``.jsonl`` file below it, recursively; it is the root;
    * a file: that file; its parent is the root.

    Args:
        pattern: the glob, directory or file (``~`` is expanded).

    Returns:
        ``(root, files)`` with ``files`` sorted.

    Raises:
        FileNotFoundError: a pattern without glob characters names no existing path.
        ValueError: the pattern is empty, matches nothing, or matches no ``.txt``/``.jsonl``
            file.
    """
    allowed = " or ".join(TEXT_SUFFIXES)
    if not pattern:
        raise ValueError(f"empty text: pattern; expected a glob of {allowed} files")
    expanded = os.path.expanduser(pattern)
    if not _has_magic(expanded):
        path = Path(expanded)
        if path.is_dir():
            root = path
            matches = sorted(p for p in path.rglob("*") if p.is_file())
        elif path.is_file():
            root, matches = path.parent, [path]
        else:
            raise FileNotFoundError(f"text corpus path {pattern!r} does not exist")
    else:
        parts = Path(expanded).parts
        prefix = []
        for part in parts:
            if _has_magic(part):
                break
            prefix.append(part)
        root = Path(*prefix) if prefix else Path(".")
        matches = sorted(Path(m) for m in glob.glob(expanded, recursive=True))
        matches = [m for m in matches if m.is_file()]
        if not matches:
            raise ValueError(f"glob {pattern!r} matched no file")
    files = [m for m in matches if m.suffix in TEXT_SUFFIXES]
    if not files:
        examples = ", ".join(str(m) for m in matches[:3])
        raise ValueError(
            f"{pattern!r} matched {len(matches)} file(s) but none ends in {allowed} "
            f"(e.g. {examples})"
        )
    return root, files


def text_corpus(
    pattern: str,
    *,
    text_field: str = "text",
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    spec: str | None = None,
) -> FileCorpus:
    """A corpus of local ``.txt`` and ``.jsonl`` files selected by a glob.

    Args:
        pattern: see :func:`expand_text_glob`.
        text_field: the JSONL field with the document text.
        fractions: (train, val, test) split fractions.
        spec: the spec string recorded on the corpus; default ``"text:" + pattern``.

    Returns:
        The loaded :class:`FileCorpus`.
    """
    root, files = expand_text_glob(pattern)
    return FileCorpus(
        spec if spec is not None else f"text:{pattern}",
        root,
        files,
        text_field=text_field,
        fractions=fractions,
    )
