"""A real labelled text-classification task: which stdlib module does a docstring come from?

The examples are the docstrings of the functions, methods and classes in the running
interpreter's standard library source (``sysconfig.get_paths()["stdlib"]``); the label is the
top-level module or package the definition lives in (``email``, ``asyncio``, ``tkinter``...).
Nothing is downloaded and nothing is synthetic, so the task is available offline wherever Python
is, and it is deterministic for a given Python version.

Construction (see ``docs/docstring_task.md``):

1. Walk the stdlib, pruning ``site-packages``, ``dist-packages``, ``__pycache__`` and test
   directories (``test``, ``tests``, ``idle_test``) and skipping files named ``test_*.py``.
2. Parse every ``.py`` file with :mod:`ast`; files that are not UTF-8 or do not parse are skipped.
3. Take ``ast.get_docstring(node, clean=True)`` of every ``def``, ``async def`` and ``class``
   (nested ones included) with at least ``min_chars`` characters (after stripping).
4. Label = first path component relative to the root without ``.py`` (``email/mime/text.py``
   -> ``email``, ``os.py`` -> ``os``).
5. Optionally (default on) mask label leakage: every whole-word, case-insensitive occurrence of
   the label name in the text becomes ``<mod>`` (``asyncio.Future`` -> ``<mod>.Future``).
6. Deduplicate on the final text: a text seen under two or more labels is ambiguous and dropped
   entirely; a text repeated under one label is kept once (its first occurrence in sorted
   ``(file, qualified name)`` order).
7. Keep the ``n_classes`` labels with the most examples (ties broken by name); optionally cap
   each at ``max_per_class`` examples, chosen by a stable hash of the example's source.
   Only labels whose examples come from at least ``min_files`` (default 5) files are eligible,
   because a single-file module cannot be split by file.
8. Split ~80/10/10 *by file*: every docstring of a file lands in the same split, so
   near-duplicate docstrings of sibling methods (overloads, subclasses re-documenting the same
   method) cannot leak between train and test. Per class, files are assigned greedily (largest
   first, ties by a stable blake2b hash of the path) to the split furthest below its target,
   see :func:`assign_file_splits`.

Typical use::

    from complexformer_lab.cmplxbert.docstrings import build_docstring_dataset

    ds = build_docstring_dataset(n_classes=10)
    print(ds.labels, ds.format_stats())
    ds.write_jsonl("data/docstrings")   # train/validation/test.jsonl + labels.json

or ``python -m complexformer_lab.cmplxbert.docstrings --out data/docstrings``.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import sys
import sysconfig
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from complexformer.cli.options import add_out
from complexformer.data.files import list_stdlib_files
from complexformer.data.splits import check_fractions
from complexformer.storage import atomic_write

__all__ = [
    "DOCSTRING_EXCLUDED_DIRS",
    "DOCSTRING_FRACTIONS",
    "DOCSTRING_SPLITS",
    "MASK_TOKEN",
    "DocstringDataset",
    "Example",
    "assign_file_splits",
    "build_docstring_dataset",
    "collect_docstrings",
    "list_docstring_files",
    "load_jsonl_split",
    "main",
    "mask_label",
]

DOCSTRING_SPLITS: tuple[str, str, str] = ("train", "validation", "test")
DOCSTRING_FRACTIONS: tuple[float, float, float] = (0.8, 0.1, 0.1)
DOCSTRING_EXCLUDED_DIRS: frozenset[str] = frozenset(
    {"site-packages", "dist-packages", "__pycache__", "test", "tests", "idle_test"}
)
MASK_TOKEN = "<mod>"


@dataclass(frozen=True)
class Example:
    """One labelled docstring.

    Attributes:
        text: the (cleaned, optionally masked) docstring.
        label: the label name, i.e. the top-level stdlib module or package.
        source: ``"<relative file path>::<qualified name>"``, e.g.
            ``"json/decoder.py::JSONDecoder.decode"``.
    """

    text: str
    label: str
    source: str


# --------------------------------------------------------------------------------------------
# collection


def _default_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def list_docstring_files(root: str | os.PathLike[str] | None = None) -> list[Path]:
    """The ``.py`` files the task is built from, sorted.

    Prunes the directories in :data:`DOCSTRING_EXCLUDED_DIRS` and skips files named
    ``test_*.py``; symlinked directories are not followed.

    Args:
        root: the directory to walk; default the running interpreter's stdlib.

    Returns:
        Absolute file paths, sorted.
    """
    root = Path(root) if root is not None else _default_root()
    files = list_stdlib_files(root, exclude_dirs=DOCSTRING_EXCLUDED_DIRS)
    out = [p for p in files if not p.name.startswith("test_")]
    return sorted(out, key=lambda p: p.relative_to(root).as_posix())


def _label_of(rel: str) -> str:
    first = rel.split("/", 1)[0]
    return first[:-3] if first.endswith(".py") else first


def _iter_docstrings(tree: ast.AST) -> Iterator[tuple[str, str]]:
    """``(qualified name, docstring)`` for every documented def/class, in source order."""
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, defs):
                qual = f"{prefix}{child.name}"
                doc = ast.get_docstring(child, clean=True)
                if doc:
                    yield qual, doc
                yield from walk(child, qual + ".")
            else:
                # defs nested in if/try/with blocks keep the enclosing prefix
                yield from walk(child, prefix)

    yield from walk(tree, "")


def collect_docstrings(
    root: str | os.PathLike[str] | None = None, *, min_chars: int = 20
) -> list[Example]:
    """All unmasked, undeduplicated docstrings under ``root`` with their labels.

    Args:
        root: the stdlib directory; default ``sysconfig.get_paths()["stdlib"]``.
        min_chars: minimum length of the stripped docstring.

    Returns:
        Examples in sorted ``(file, source order)`` order.
    """
    root = Path(root) if root is not None else _default_root()
    out: list[Example] = []
    for path in list_docstring_files(root):
        rel = path.relative_to(root).as_posix()
        try:
            source = path.read_bytes().decode("utf-8")
            tree = ast.parse(source, filename=rel)
        except (UnicodeDecodeError, SyntaxError, ValueError, OSError):
            continue
        label = _label_of(rel)
        for qual, doc in _iter_docstrings(tree):
            text = doc.strip()
            if len(text) >= min_chars:
                out.append(Example(text, label, f"{rel}::{qual}"))
    return out


def mask_label(text: str, label: str, mask: str = MASK_TOKEN) -> str:
    """Replace whole-word, case-insensitive occurrences of ``label`` in ``text`` by ``mask``.

    "Whole word" uses regex ``\\b`` boundaries, so ``asyncio.Future`` -> ``<mod>.Future`` but
    ``emailmessage`` and ``json_data`` are left alone.
    """
    return re.sub(rf"\b{re.escape(label)}\b", mask, text, flags=re.IGNORECASE)


def _stable_hash(key: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(key.encode("utf-8"), digest_size=8, person=b"cf-docst").digest(), "big"
    )


def _file_of(source: str) -> str:
    return source.split("::", 1)[0]


def assign_file_splits(
    file_counts: dict[str, int], fractions: Sequence[float] = DOCSTRING_FRACTIONS
) -> dict[str, str]:
    """Assign whole files of one class to splits so example counts approach ``fractions``.

    Files are visited by decreasing example count (ties: a stable blake2b hash of the path,
    then the path); each goes to the split whose example count is furthest below its target
    ``fraction * total`` (ties: train, validation, test). Deterministic: it depends only on
    the files and their counts, never on the run or the machine.

    Args:
        file_counts: ``{relative file path: number of examples}`` for one class.
        fractions: (train, validation, test) fractions summing to 1.

    Returns:
        ``{relative file path: split name}``.
    """
    fr = check_fractions(fractions)
    total = sum(file_counts.values())
    target = {s: f * total for s, f in zip(DOCSTRING_SPLITS, fr, strict=True)}
    have = dict.fromkeys(DOCSTRING_SPLITS, 0)
    out: dict[str, str] = {}
    order = sorted(file_counts, key=lambda f: (-file_counts[f], _stable_hash(f), f))
    for f in order:
        s = max(DOCSTRING_SPLITS, key=lambda s: (target[s] - have[s], -DOCSTRING_SPLITS.index(s)))
        out[f] = s
        have[s] += file_counts[f]
    return out


# --------------------------------------------------------------------------------------------
# dataset


@dataclass
class DocstringDataset:
    """The built task.

    Attributes:
        splits: ``{"train": [...], "validation": [...], "test": [...]}`` of :class:`Example`.
        labels: the class names; a label's integer id is its index here (sorted by name).
        config: the build parameters, recorded in ``labels.json``.
    """

    splits: dict[str, list[Example]]
    labels: list[str]
    config: dict = field(default_factory=dict)

    def label_id(self, name: str) -> int:
        """The integer id of label ``name``."""
        return self.labels.index(name)

    def __len__(self) -> int:
        return sum(len(v) for v in self.splits.values())

    def stats(self) -> dict:
        """Counts per split and class, and the majority-class baseline.

        The majority class is the most frequent class of *train* (ties by name); the
        baseline accuracy of a split is the fraction of its examples with that label.

        Returns:
            ``{"labels", "counts": {split: {label: n}}, "sizes": {split: n},
            "majority_class", "majority_accuracy": {split: acc}, "total"}``.
        """
        counts = {s: {lab: 0 for lab in self.labels} for s in DOCSTRING_SPLITS}
        for s in DOCSTRING_SPLITS:
            for ex in self.splits.get(s, []):
                counts[s][ex.label] += 1
        train = counts["train"]
        majority = min(self.labels, key=lambda lab: (-train[lab], lab)) if self.labels else None
        sizes = {s: sum(counts[s].values()) for s in DOCSTRING_SPLITS}
        acc = {
            s: (counts[s][majority] / sizes[s] if sizes[s] and majority else 0.0)
            for s in DOCSTRING_SPLITS
        }
        return {
            "labels": list(self.labels),
            "counts": counts,
            "sizes": sizes,
            "majority_class": majority,
            "majority_accuracy": acc,
            "total": sum(sizes.values()),
        }

    def format_stats(self) -> str:
        """:meth:`stats` as a Markdown table."""
        st = self.stats()
        head = "| class | " + " | ".join(DOCSTRING_SPLITS) + " | total |"
        lines = [head, "|" + "---|" * (len(DOCSTRING_SPLITS) + 2)]
        for lab in st["labels"]:
            row = [st["counts"][s][lab] for s in DOCSTRING_SPLITS]
            lines.append(f"| {lab} | " + " | ".join(map(str, row)) + f" | {sum(row)} |")
        sizes = [st["sizes"][s] for s in DOCSTRING_SPLITS]
        lines.append("| **all** | " + " | ".join(map(str, sizes)) + f" | {sum(sizes)} |")
        accs = " | ".join(f"{st['majority_accuracy'][s]:.3f}" for s in DOCSTRING_SPLITS)
        lines.append(f"| majority ({st['majority_class']}) acc | {accs} | |")
        return "\n".join(lines)

    def write_jsonl(self, directory: str | os.PathLike[str]) -> dict[str, Path]:
        """Write ``train.jsonl``, ``validation.jsonl``, ``test.jsonl`` and ``labels.json``.

        Each line is ``{"text", "label" (int id), "label_name", "source"}``. Every file is
        written atomically (temporary file + :func:`os.replace`).

        Args:
            directory: the output directory (created).

        Returns:
            ``{name: path}`` of the written files.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        ids = {lab: i for i, lab in enumerate(self.labels)}
        written: dict[str, Path] = {}
        for s in DOCSTRING_SPLITS:
            path = directory / f"{s}.jsonl"
            with atomic_write(path, "w") as f:
                for ex in self.splits.get(s, []):
                    rec = {
                        "text": ex.text,
                        "label": ids[ex.label],
                        "label_name": ex.label,
                        "source": ex.source,
                    }
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            written[s] = path
        path = directory / "labels.json"
        meta = {"labels": list(self.labels), "config": self.config, "stats": self.stats()}
        with atomic_write(path, "w") as f:
            json.dump(meta, f, indent=2, ensure_ascii=False)
            f.write("\n")
        written["labels"] = path
        return written


def load_jsonl_split(path: str | os.PathLike[str]) -> list[dict]:
    """Read one split written by :meth:`DocstringDataset.write_jsonl`.

    Args:
        path: e.g. ``out/train.jsonl``.

    Returns:
        The records, each ``{"text": str, "label": int, "label_name": str, "source": str}``.
    """
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def build_docstring_dataset(
    n_classes: int = 10,
    min_chars: int = 20,
    max_per_class: int | None = None,
    mask_labels: bool = True,
    root: str | os.PathLike[str] | None = None,
    min_files: int = 5,
) -> DocstringDataset:
    """Build the "which stdlib module is this docstring from" task.

    Args:
        n_classes: keep the ``n_classes`` modules/packages with the most examples (after
            deduplication; ties broken by name).
        min_chars: minimum docstring length in characters.
        max_per_class: cap per class (over all splits), chosen by a stable hash of each
            example's source; ``None`` for no cap.
        mask_labels: replace whole-word occurrences of the label name by ``<mod>``.
        root: the stdlib directory; default ``sysconfig.get_paths()["stdlib"]``.
        min_files: a label is eligible only if its examples come from at least this many
            files; single-file modules (``_pydecimal``, ``turtle``...) cannot be split by file.

    Returns:
        The :class:`DocstringDataset`, examples of each split in ``source`` order.
    """
    if n_classes < 2:
        raise ValueError(f"n_classes must be >= 2, got {n_classes}")
    if max_per_class is not None and max_per_class < 1:
        raise ValueError(f"max_per_class must be >= 1 or None, got {max_per_class}")
    raw = collect_docstrings(root, min_chars=min_chars)
    if mask_labels:
        raw = [Example(mask_label(e.text, e.label), e.label, e.source) for e in raw]

    # dedup on the final text; drop texts seen under more than one label
    labels_of: dict[str, set[str]] = defaultdict(set)
    for e in raw:
        labels_of[e.text].add(e.label)
    seen: set[str] = set()
    kept: list[Example] = []
    for e in raw:
        if len(labels_of[e.text]) > 1 or e.text in seen:
            continue
        seen.add(e.text)
        kept.append(e)

    per_label = Counter(e.label for e in kept)
    files_of: dict[str, set[str]] = defaultdict(set)
    for e in kept:
        files_of[e.label].add(_file_of(e.source))
    eligible = [lab for lab in per_label if len(files_of[lab]) >= min_files]
    ranked = sorted(eligible, key=lambda lab: (-per_label[lab], lab))
    chosen = sorted(ranked[:n_classes])
    if len(chosen) < 2:
        raise ValueError(
            f"only {len(chosen)} label(s) with docstrings in >= {min_files} files under the root"
        )

    by_label: dict[str, list[Example]] = {lab: [] for lab in chosen}
    for e in kept:
        if e.label in by_label:
            by_label[e.label].append(e)
    if max_per_class is not None:
        for lab, exs in by_label.items():
            if len(exs) > max_per_class:
                exs = sorted(exs, key=lambda e: (_stable_hash(e.source), e.source))
                by_label[lab] = exs[:max_per_class]

    splits: dict[str, list[Example]] = {s: [] for s in DOCSTRING_SPLITS}
    for exs in by_label.values():
        assignment = assign_file_splits(Counter(_file_of(e.source) for e in exs))
        for e in exs:
            splits[assignment[_file_of(e.source)]].append(e)
    for s in DOCSTRING_SPLITS:
        splits[s].sort(key=lambda e: e.source)
    config = {
        "n_classes": n_classes,
        "min_chars": min_chars,
        "max_per_class": max_per_class,
        "mask_labels": mask_labels,
        "min_files": min_files,
        "fractions": list(DOCSTRING_FRACTIONS),
        "split": "per-class greedy by file (size desc, blake2b of path)",
        "python": ".".join(map(str, sys.version_info[:3])),
    }
    return DocstringDataset(splits=splits, labels=chosen, config=config)


# --------------------------------------------------------------------------------------------
# command line


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m complexformer_lab.cmplxbert.docstrings --out DIR``: build, write, print
    the statistics."""
    p = argparse.ArgumentParser(
        prog="python -m complexformer_lab.cmplxbert.docstrings",
        description="Build the stdlib docstring -> module classification dataset (offline).",
    )
    add_out(
        p,
        "output directory for the jsonl files and labels.json; omit to only print the statistics",
        required=False,
        default=None,
    )
    p.add_argument(
        "--n-classes",
        type=int,
        default=10,
        help="number of classes: the modules with the most docstrings (default 10)",
    )
    p.add_argument(
        "--min-chars",
        type=int,
        default=20,
        help="minimum docstring length in characters (default 20)",
    )
    p.add_argument(
        "--max-per-class",
        type=int,
        default=None,
        help="cap on examples per class over all splits (default: no cap)",
    )
    p.add_argument(
        "--no-mask", action="store_true", help="do not replace the label name in the text by <mod>"
    )
    p.add_argument(
        "--min-files",
        type=int,
        default=5,
        help="a class must have docstrings in at least this many files (default 5)",
    )
    p.add_argument(
        "--root", default=None, help="standard library directory (default: sysconfig stdlib path)"
    )
    args = p.parse_args(argv)
    ds = build_docstring_dataset(
        n_classes=args.n_classes,
        min_chars=args.min_chars,
        max_per_class=args.max_per_class,
        mask_labels=not args.no_mask,
        root=args.root,
        min_files=args.min_files,
    )
    print(ds.format_stats())
    if args.out:
        written = ds.write_jsonl(args.out)
        print("wrote " + ", ".join(str(p) for p in written.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
