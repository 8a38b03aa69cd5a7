"""Two more offline labelled tasks built from the standard library: a sentence-pair task and
a token-tagging task, next to the docstring task (:mod:`.docstrings`).

Both are built from what every Python installation ships, deterministically for a given
Python version, with nothing synthetic in the text:

- ``docstring-pairs`` (task type ``pair``): does the second text continue the first? Each
  docstring of the docstring task with at least 8 words is cut in two halves at the middle
  word; the pair is (first half, its own second half), label ``same``, for half of them
  (a seeded draw), and (first half, the second half of another docstring of the same split),
  label ``different``, for the others. Pairs stay inside each split of the docstring task
  (which is split by file), so no docstring crosses splits. (A first design asked whether two
  whole docstrings come from the same module: at 64 fine-tuning updates every model, the
  real BERT included, stayed at chance, so it could not tell the models apart.)
- ``code-tags`` (task type ``token``): one logical line of standard-library code as its
  Python tokens (:mod:`tokenize`), each tagged by its role, which the words alone do not
  fix: ``DEF`` (the name a ``def`` defines), ``CLASS`` (the name a ``class`` defines),
  ``CALL`` (a name called: followed by ``(``), ``ATTR`` (a name after ``.``, not called),
  ``KW`` (a keyword), ``NAME`` (any other name), ``NUM``, ``STR`` and ``O`` (operators and
  the rest). Files are split 80/10/10 by a stable hash of their path; lines of 4 to 40
  tokens are kept, at most ``per_file`` per file, and each split is capped.
"""

from __future__ import annotations

import hashlib
import io
import keyword
import random
import tokenize
from pathlib import Path

from complexformer.data.files import list_stdlib_files, stdlib_root

from .docstrings import DOCSTRING_EXCLUDED_DIRS, build_docstring_dataset

__all__ = ["CODE_TAGS", "build_code_tags", "build_docstring_pairs"]

SPLITS = ("train", "validation", "test")
CODE_TAGS = ("ATTR", "CALL", "CLASS", "DEF", "KW", "NAME", "NUM", "O", "STR")
PAIR_LABELS = ("different", "same")
#: Docstrings shorter than this many words are left out of the pair task.
MIN_PAIR_WORDS = 8


def build_docstring_pairs(seed: int = 0) -> tuple[list[str], dict[str, tuple[list, list]]]:
    """(label names, ``{split: ([(text, text_pair), ...], [label id, ...])}``)."""
    ds = build_docstring_dataset()
    rng = random.Random(seed)
    splits = {}
    for s in SPLITS:
        halves = []
        for e in ds.splits[s]:
            words = e.text.split()
            if len(words) >= MIN_PAIR_WORDS:
                cut = len(words) // 2
                halves.append((" ".join(words[:cut]), " ".join(words[cut:])))
        inputs, labels = [], []
        for i, (first, second) in enumerate(halves):
            same = rng.random() < 0.5
            if not same:
                j = rng.randrange(len(halves) - 1)
                second = halves[j + (j >= i)][1]  # another docstring's second half
            inputs.append((first, second))
            labels.append(int(same))
        splits[s] = (inputs, labels)
    return list(PAIR_LABELS), splits


def _split_of(path: str) -> str:
    h = int.from_bytes(hashlib.blake2b(path.encode(), digest_size=8).digest(), "big") % 10
    return "train" if h < 8 else ("validation" if h == 8 else "test")


def _line_tags(toks: list[tokenize.TokenInfo]) -> tuple[list[str], list[str]]:
    """Words and tags of one logical line's significant tokens."""
    words = [t.string for t in toks]
    tags = []
    for i, t in enumerate(toks):
        prev = words[i - 1] if i else ""
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if t.type == tokenize.NAME:
            if keyword.iskeyword(t.string) or keyword.issoftkeyword(t.string):
                tags.append("KW")
            elif prev == "def":
                tags.append("DEF")
            elif prev == "class":
                tags.append("CLASS")
            elif nxt == "(":
                tags.append("CALL")
            elif prev == ".":
                tags.append("ATTR")
            else:
                tags.append("NAME")
        elif t.type == tokenize.NUMBER:
            tags.append("NUM")
        elif t.type == tokenize.STRING:
            tags.append("STR")
        else:
            tags.append("O")
    return words, tags


_SKIP = frozenset(
    {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENCODING,
        tokenize.ENDMARKER,
    }
)


def _file_lines(path: Path, min_tokens: int, max_tokens: int) -> list[tuple[list, list]]:
    """The tagged logical lines of a file with min_tokens..max_tokens significant tokens and
    no token spanning lines (multi-line strings are dropped with their line)."""
    try:
        stream = list(tokenize.generate_tokens(io.StringIO(path.read_text("utf-8")).readline))
    except (UnicodeDecodeError, SyntaxError, tokenize.TokenError):
        return []
    lines, cur, ok = [], [], True
    for t in stream:
        if t.type == tokenize.NEWLINE:
            if ok and min_tokens <= len(cur) <= max_tokens:
                lines.append(_line_tags(cur))
            cur, ok = [], True
        elif t.type not in _SKIP:
            cur.append(t)
            ok = ok and not any(c.isspace() for c in t.string)
    return lines


def build_code_tags(
    per_file: int = 8,
    caps: tuple[int, int, int] = (4000, 500, 500),
    min_tokens: int = 4,
    max_tokens: int = 40,
    seed: int = 0,
) -> tuple[list[str], dict[str, tuple[list, list]]]:
    """(tag names, ``{split: ([words, ...], [tag ids, ...])}``) of the ``code-tags`` task.

    Args:
        per_file: lines kept per file at most (a seeded sample of its eligible lines).
        caps: at most this many lines in train, validation and test (a seeded sample).
        min_tokens, max_tokens: the line lengths kept, in Python tokens.
        seed: the sampling seed.
    """
    rng = random.Random(seed)
    ids = {t: i for i, t in enumerate(CODE_TAGS)}
    found: dict[str, list[tuple[list, list]]] = {s: [] for s in SPLITS}
    root = stdlib_root()
    for path in list_stdlib_files(root, exclude_dirs=DOCSTRING_EXCLUDED_DIRS):
        if path.name.startswith("test_"):
            continue
        lines = _file_lines(path, min_tokens, max_tokens)
        if len(lines) > per_file:
            lines = rng.sample(lines, per_file)
        found[_split_of(path.relative_to(root).as_posix())] += lines
    splits = {}
    for s, cap in zip(SPLITS, caps, strict=True):
        rows = found[s] if len(found[s]) <= cap else rng.sample(found[s], cap)
        splits[s] = ([w for w, _ in rows], [[ids[t] for t in g] for _, g in rows])
    return list(CODE_TAGS), splits
