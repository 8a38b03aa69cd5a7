"""Corpora of local files: the Python standard library (``stdlib``) and ``text:GLOB``.

Documents:

* a ``.py`` or ``.txt`` file is one document (its whole text);
* each line of a ``.jsonl`` file is one document: the string field ``text_field`` of the JSON
  object on that line (blank lines are ignored).

Splits (see :mod:`complexformer.data.splits`): a corpus of many documents assigns each whole
document by :func:`~complexformer.data.splits.split_of` of its path relative to the corpus
root (``/``-separated); for JSONL lines the key is ``"<relative path>:<line number>"``
(1-based physical line number), so a JSONL file contributes to every split. A corpus of few
documents (:func:`~complexformer.data.splits.use_chunks`: fewer than 10 expected in a
held-out split, e.g. one book or a handful of files) cuts every document longer than
``chunk_chars`` into contiguous chunks assigned by
:func:`~complexformer.data.splits.assign_chunks`; runs of adjacent chunks of one split are
streamed as one document. The standard library (~1,760 files) stays on whole files.

Encoding policy: a ``.py``/``.txt`` file that is not valid UTF-8 is **skipped** (and listed in
``corpus.skipped``); decoding with replacement characters would teach the tokenizer U+FFFD
sequences that never occur in real text (the Python 3.11 standard library has four such files,
all deliberate encoding tests). A JSONL line that is not UTF-8, not JSON, not an object, or has
no string ``text_field`` raises :class:`ValueError` naming the file and line: JSON is UTF-8 by
definition, so such a line means a broken input, not an odd one.

Loading a corpus reads every file once, streaming, to compute the per-split statistics and a
content hash of each file (the corpus fingerprint); nothing but file names, digests, counts
and the split of each chunk is kept in memory. :meth:`FileCorpus.documents` reads the files
again on each call. A ``.py``/``.txt`` file over ``stream_bytes`` (16 MiB) stays one document
but is read in 1 MiB pieces when loading and in :meth:`FileCorpus.document_parts` (which
tokenization uses), so its size does not bound memory; :meth:`FileCorpus.documents` still
returns it whole.
"""

from __future__ import annotations

import codecs
import glob
import hashlib
import json
import os
import sysconfig
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .cache import hash_strings
from .corpus import Corpus, SplitStats, check_not_empty
from .splits import (
    CHUNK_CHARS,
    DEFAULT_FRACTIONS,
    SPLITS,
    assign_chunks,
    check_fractions,
    check_split,
    chunk_key,
    chunk_pieces,
    chunk_spans,
    iter_chunks,
    split_of,
    use_chunks,
)

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
_FINGERPRINT_VERSION = "files-v2"
#: A ``.py``/``.txt`` file larger than this is scanned and tokenized in pieces (16 MiB).
STREAM_BYTES = 16 << 20
_BLOCK = 1 << 20


def _read_pieces(path: Path, digest: Any = None) -> Iterator[str]:
    """The UTF-8 text of ``path`` in pieces of about 1 MiB (``digest`` is fed the bytes).

    Raises:
        UnicodeDecodeError: the file is not valid UTF-8.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    with open(path, "rb") as f:
        while True:
            block = f.read(_BLOCK)
            if digest is not None:
                digest.update(block)
            piece = decoder.decode(block, final=not block)
            if piece:
                yield piece
            if not block:
                return


def _mark_last(items: Iterable[str]) -> Iterator[tuple[str, bool]]:
    """``(item, is_last)`` for each item."""
    it = iter(items)
    try:
        prev = next(it)
    except StopIteration:
        return
    for item in it:
        yield prev, False
        prev = item
    yield prev, True


def _nonblank(parts: Iterable[tuple[str, bool]]) -> Iterator[tuple[str, bool]]:
    """Drop the documents (parts up to one with ``True``) that are only whitespace."""
    held: list[tuple[str, bool]] = []
    solid = False
    for text, end in parts:
        if solid:
            yield text, end
        else:
            held.append((text, end))
            if text and not text.isspace():
                solid = True
                yield from held
                held = []
        if end:
            held, solid = [], False


@dataclass(frozen=True)
class _SourceFile:
    """One input file: absolute path, key relative to the corpus root, and content digest."""

    path: Path
    relpath: str
    jsonl: bool
    digest: str
    split: str | None  # the split of a whole-file document; None for JSONL and chunked files
    streamed: bool = False  # larger than stream_bytes: scanned and tokenized in pieces


@dataclass
class _Counts:
    """Per-split document and byte counts, and the splits each file contributes to."""

    n_docs: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SPLITS, 0))
    n_bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SPLITS, 0))
    file_splits: dict[int, set[str]] = field(default_factory=dict)

    def add(self, file: int, split: str, nbytes: int) -> None:
        self.n_docs[split] += 1
        self.n_bytes[split] += nbytes
        self.file_splits.setdefault(file, set()).add(split)

    def stats(self) -> dict[str, SplitStats]:
        n_files = {s: sum(s in v for v in self.file_splits.values()) for s in SPLITS}
        return {s: SplitStats(n_files[s], self.n_docs[s], self.n_bytes[s]) for s in SPLITS}


@dataclass(frozen=True)
class _LongDoc:
    """A document longer than the chunk size: its file, key and the UTF-8 bytes of each chunk."""

    file: int
    key: str
    chunk_bytes: tuple[int, ...]


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
        chunk_chars: the chunk size of a corpus of few documents, in characters (see the
            module docstring).
        stream_bytes: a ``.py``/``.txt`` file larger than this is read in pieces of 1 MiB
            when it is scanned and in :meth:`document_parts` (it stays one document).

    Attributes:
        chunked: whether documents longer than ``chunk_chars`` were split by chunks.
        split_rule: ``"documents-v1"`` or ``"chunks-v1:<chunk_chars>"`` (in the fingerprint
            and the token-cache key).

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
        chunk_chars: int = CHUNK_CHARS,
        stream_bytes: int = STREAM_BYTES,
    ) -> None:
        self.spec = spec
        self.root = Path(root)
        self.text_field = text_field
        self.fractions = check_fractions(fractions)
        self.chunk_chars = chunk_chars
        chunk_spans("", chunk_chars)  # validates the size
        self.skipped: list[str] = []
        keyed = sorted((_relkey(Path(p), self.root), Path(p)) for p in paths)
        files: list[_SourceFile] = []
        whole = _Counts()  # every document whole (many documents)
        short = _Counts()  # documents up to chunk_chars only (few documents)
        long_docs: list[_LongDoc] = []  # kept while chunks may still be needed
        self._n_docs = 0

        def add(
            key: str, text: str, nbytes: int, pieces: Callable[[], Iterable[str]] | None = None
        ) -> str:
            split = split_of(key, self.fractions)
            whole.add(len(files), split, nbytes)
            self._n_docs += 1
            if pieces is None and len(text) <= chunk_chars:
                short.add(len(files), split, nbytes)
            elif use_chunks(self._n_docs, self.fractions):
                chunks = iter_chunks(pieces() if pieces is not None else [text], chunk_chars)
                sizes = tuple(len(c.encode("utf-8")) for c in chunks)
                long_docs.append(_LongDoc(len(files), key, sizes))
            if long_docs and not use_chunks(self._n_docs, self.fractions):
                long_docs.clear()
            return split

        for relpath, path in keyed:
            if path.suffix == ".jsonl":
                digest = self._scan_jsonl(path, relpath, add)
                files.append(_SourceFile(path, relpath, True, digest, None))
                continue
            if path.stat().st_size > stream_bytes:
                self._scan_large(path, relpath, add, files)
                continue
            data = path.read_bytes()
            digest = hashlib.blake2b(data, digest_size=16).hexdigest()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                self.skipped.append(f"{relpath} (not UTF-8)")
                continue
            if text.strip():
                split = add(relpath, text, len(data))
            else:
                split = split_of(relpath, self.fractions)
            files.append(_SourceFile(path, relpath, False, digest, split))

        self.chunked = bool(long_docs) and use_chunks(self._n_docs, self.fractions)
        self.split_rule = f"chunks-v1:{chunk_chars}" if self.chunked else "documents-v1"
        self._chunk_splits: dict[str, tuple[str, ...]] = {}
        counts = whole
        if self.chunked:
            counts = short
            keys = [chunk_key(d.key, i) for d in long_docs for i in range(len(d.chunk_bytes))]
            splits = iter(assign_chunks(keys, self.fractions))
            for d in long_docs:
                assigned = tuple(next(splits) for _ in d.chunk_bytes)
                self._chunk_splits[d.key] = assigned
                if not files[d.file].jsonl:
                    files[d.file] = replace(files[d.file], split=None)
                run = 0
                for i, split in enumerate(assigned):
                    run += d.chunk_bytes[i]
                    if i + 1 == len(assigned) or assigned[i + 1] != split:
                        counts.add(d.file, split, run)
                        run = 0
        self._files = files
        self.stats = counts.stats()
        self._fingerprints: dict[str, str] = {}
        check_not_empty(self)

    def describe(self) -> str:
        """:meth:`Corpus.describe`, plus the chunk rule when documents were split by chunks."""
        text = super().describe()
        if self.chunked:
            text += (
                f"\n  split by chunks of {self.chunk_chars:,} characters: "
                f"{self._n_docs} documents are too few to split whole"
            )
        return text

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

    def _scan_large(self, path: Path, relpath: str, add: Callable[..., str], files: list) -> None:
        """Scan a large ``.py``/``.txt`` file in pieces: digest, UTF-8 check, counts."""
        h = hashlib.blake2b(digest_size=16)
        n_bytes, solid = path.stat().st_size, False
        try:
            for piece in _read_pieces(path, h):
                solid = solid or not piece.isspace()
        except UnicodeDecodeError:
            self.skipped.append(f"{relpath} (not UTF-8)")
            return
        if solid:
            split = add(relpath, "", n_bytes, lambda: _read_pieces(path))
        else:
            split = split_of(relpath, self.fractions)
        files.append(_SourceFile(path, relpath, False, h.hexdigest(), split, streamed=True))

    def _scan_jsonl(self, path: Path, relpath: str, add: Callable[[str, str, int], str]) -> str:
        """Digest of the file; ``add(key, text, nbytes)`` for each non-empty document line."""
        h = hashlib.blake2b(digest_size=16)
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, start=1):
                h.update(raw)
                if not raw.strip():
                    continue
                text = self._parse_jsonl_line(raw, path, lineno)
                if text.strip():
                    add(f"{relpath}:{lineno}", text, len(text.encode("utf-8")))
        return h.hexdigest()

    def _pieces(self, key: str, text: str, split: str) -> Iterator[str]:
        """The parts of the document ``key`` that belong to ``split`` (whole or chunk runs)."""
        assigned = self._chunk_splits.get(key)
        if assigned is None:
            if split_of(key, self.fractions) == split:
                yield text
            return
        for piece_split, piece in chunk_pieces(text, assigned, self.chunk_chars):
            if piece_split == split and piece.strip():
                yield piece

    # -- Corpus API -----------------------------------------------------------------------

    def documents(self, split: str) -> Iterator[str]:
        """Stream the non-empty documents of ``split`` in sorted relative-path order.

        Args:
            split: ``"train"``, ``"val"`` or ``"test"``.

        Yields:
            Document texts (or, in a chunked corpus, runs of adjacent chunks of one split),
            one at a time (files are read lazily).
        """
        check_split(split)
        for f in self._files:
            yield from self._file_documents(f, split)

    def _file_documents(self, f: _SourceFile, split: str) -> Iterator[str]:
        """The documents of ``split`` in one file (whole texts, JSONL lines or chunk runs)."""
        if f.jsonl:
            with open(f.path, "rb") as fh:
                for lineno, raw in enumerate(fh, start=1):
                    if not raw.strip():
                        continue
                    key = f"{f.relpath}:{lineno}"
                    if key not in self._chunk_splits and split_of(key, self.fractions) != split:
                        continue
                    text = self._parse_jsonl_line(raw, f.path, lineno)
                    if text.strip():
                        yield from self._pieces(key, text, split)
        elif f.split is None or f.split == split:
            try:
                text = f.path.read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                return
            if text.strip():
                yield from self._pieces(f.relpath, text, split)

    def document_parts(self, split: str) -> Iterator[tuple[str, bool]]:
        """:meth:`documents` as parts, a large file (over ``stream_bytes``) read in pieces.

        Args:
            split: ``"train"``, ``"val"`` or ``"test"``.

        Yields:
            ``(text, last)``: the parts of each document in order, ``last`` on its final
            part; the documents of every other file come whole, as one part each.
        """
        check_split(split)
        for f in self._files:
            if f.streamed:
                yield from _nonblank(self._streamed_parts(f, split))
            else:
                yield from ((doc, True) for doc in self._file_documents(f, split))

    def _streamed_parts(self, f: _SourceFile, split: str) -> Iterator[tuple[str, bool]]:
        """The parts of a large file's document(s) in ``split``: 1 MiB pieces, or chunks."""
        assigned = self._chunk_splits.get(f.relpath)
        if assigned is None:
            if f.split == split:
                yield from _mark_last(_read_pieces(f.path))
            return
        n = 0
        for i, chunk in enumerate(iter_chunks(_read_pieces(f.path), self.chunk_chars)):
            n = i + 1
            if n > len(assigned):
                break
            if assigned[i] == split:
                yield chunk, n == len(assigned) or assigned[n] != split
        if n != len(assigned):
            raise ValueError(
                f"{f.path} has {n} chunks of {self.chunk_chars} characters but "
                f"{len(assigned)} were assigned; it changed after the corpus was loaded"
            )

    def fingerprint(self, split: str) -> str:
        """Hash of the content digests of every file that can contribute to ``split``.

        Whole files count for their own split only; JSONL files and chunked files for every
        split (a chunk's split depends on all chunks). The split fractions, the split rule and
        (when JSONL files are present) the text field are included.

        Args:
            split: ``"train"``, ``"val"`` or ``"test"``.

        Returns:
            A 32-character hex digest.
        """
        check_split(split)
        if split not in self._fingerprints:
            has_jsonl = any(f.jsonl for f in self._files)
            parts = [_FINGERPRINT_VERSION, split, repr(self.fractions), self.split_rule]
            parts.append(self.text_field if has_jsonl else "")
            for f in self._files:
                if f.jsonl or f.split is None or f.split == split:
                    parts += [f.relpath, f.digest]
            self._fingerprints[split] = hash_strings(*parts)
        return self._fingerprints[split]

    def files(self, split: str | None = None) -> list[str]:
        """Relative keys of the (UTF-8) input files, optionally only those of one split.

        Args:
            split: if given, only whole-file documents of that split, chunked files with a
                chunk in it, and all JSONL files.

        Returns:
            Sorted relative paths.
        """
        if split is None:
            return [f.relpath for f in self._files]
        check_split(split)
        return [
            f.relpath
            for f in self._files
            if f.jsonl
            or f.split == split
            or (f.split is None and split in self._chunk_splits.get(f.relpath, ()))
        ]


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
    chunk_chars: int = CHUNK_CHARS,
) -> FileCorpus:
    """A corpus of local ``.txt`` and ``.jsonl`` files selected by a glob.

    Args:
        pattern: see :func:`expand_text_glob`.
        text_field: the JSONL field with the document text.
        fractions: (train, val, test) split fractions.
        spec: the spec string recorded on the corpus; default ``"text:" + pattern``.
        chunk_chars: the chunk size when the corpus has too few documents to split whole.

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
        chunk_chars=chunk_chars,
    )
