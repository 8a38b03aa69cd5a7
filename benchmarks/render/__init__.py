"""Render the benchmarks' JSON records into the tables of ``docs/benchmarks.md``.

The benchmark scripts only measure and write ``benchmarks/results/<name>.json``; this package
reads those records and rewrites, for each one, the section of ``docs/benchmarks.md`` between
``<!-- name:start -->`` and ``<!-- name:end -->`` (the prose outside the markers is kept),
with the PASS/FAIL verdicts of the targets declared in :mod:`benchmarks.render.targets`.

    python -m benchmarks.render             # all records present -> docs/benchmarks.md
    python -m benchmarks.render attention   # one section
    python -m benchmarks.render --check     # exit 1 if the docs differ from the records
    python -m benchmarks.render --stdout    # print the sections, write nothing

One renderer per benchmark (``render(payload, raw) -> markdown``), registered in
:data:`RENDERERS` in the order of the sections in the docs. When every section is rendered
(no NAME given), the README's install-time and "Measured here" tables are rendered too
(:mod:`benchmarks.render.readme`), and ``--check`` covers them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from complexformer.storage import atomic_write_text

from . import (
    attention,
    cbert,
    checkpoint,
    complex_attention,
    data,
    init_memory,
    readme,
    retrofit,
    shard,
    train,
)
from ._format import replace_section
from .targets import target_lines

__all__ = [
    "RENDERERS",
    "load_record",
    "main",
    "render_docs",
    "render_readme",
    "render_section",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
DOCS_MD = REPO_ROOT / "docs" / "benchmarks.md"
README_MD = REPO_ROOT / "README.md"

RENDERERS: dict[str, Callable[[dict[str, Any], str], str]] = {
    "attention": attention.render,
    "complex_attention": complex_attention.render,
    "train": train.render,
    "cbert": cbert.render,
    "retrofit": retrofit.render,
    "shard": shard.render,
    "checkpoint": checkpoint.render,
    "init_memory": init_memory.render,
    "data": data.render,
}


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def load_record(path: str | Path) -> dict[str, Any]:
    """A benchmark's JSON record, checked to name a benchmark that has a renderer."""
    payload = json.loads(Path(path).read_text(encoding="utf-8"))
    name = payload.get("benchmark") if isinstance(payload, dict) else None
    if name not in RENDERERS:
        raise ValueError(
            f"{path}: 'benchmark' is {name!r}; records of {sorted(RENDERERS)} can be rendered"
        )
    return payload


def render_section(payload: dict[str, Any], raw: str) -> str:
    """The markdown body of ``payload``'s section; ``raw`` is the JSON path shown in it."""
    return RENDERERS[payload["benchmark"]](payload, raw)


def render_docs(
    text: str, results_dir: str | Path, names: Sequence[str] | None = None
) -> tuple[str, dict[str, dict[str, Any]]]:
    """``text`` with the sections of ``names`` (default: every record present) re-rendered.

    Returns the new text and the records used, by name. A name given explicitly whose JSON
    file is missing is an error; with the default, missing records leave their section as is.
    """
    results_dir = Path(results_dir)
    wanted = list(RENDERERS) if names is None else list(names)
    used: dict[str, dict[str, Any]] = {}
    for name in wanted:
        if name not in RENDERERS:
            raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(RENDERERS)}")
        path = results_dir / f"{name}.json"
        if not path.exists():
            if names is not None:
                raise FileNotFoundError(f"{path}: no record; run `python -m benchmarks.{name}`")
            continue
        payload = load_record(path)
        if payload["benchmark"] != name:
            raise ValueError(f"{path} holds a record of {payload['benchmark']!r}, not {name!r}")
        text = replace_section(text, name, render_section(payload, _shown(path)))
        used[name] = payload
    return text, used


def render_readme(text: str, results_dir: str | Path) -> str:
    """``text`` (the README) with its tables of :data:`readme.SECTIONS` re-rendered."""
    results = readme.load_results(results_dir)
    for name in readme.SECTIONS:
        text = replace_section(text, name, readme.render(name, results))
    return text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.render",
        description="Render benchmarks/results/<name>.json into the tables of "
        "docs/benchmarks.md (between each section's markers; other text is kept), with the "
        "targets' PASS/FAIL verdicts.",
    )
    p.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"sections to render, of {', '.join(RENDERERS)} (default: every record present).",
    )
    p.add_argument(
        "--results",
        default=str(RESULTS_DIR),
        metavar="DIR",
        help="folder of the JSON records (default: benchmarks/results).",
    )
    p.add_argument(
        "--docs",
        default=str(DOCS_MD),
        metavar="PATH",
        help="markdown file to update; created if missing (default: docs/benchmarks.md).",
    )
    p.add_argument(
        "--readme",
        default=str(README_MD),
        metavar="PATH",
        help="README whose install and measured tables are rendered when no NAME is given "
        "(default: README.md).",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the file differs from what the records render to.",
    )
    mode.add_argument(
        "--stdout", action="store_true", help="print the rendered sections; write nothing."
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    docs = Path(args.docs)
    old = docs.read_text(encoding="utf-8") if docs.exists() else "# Benchmarks\n"
    try:
        new, used = render_docs(old, args.results, args.names or None)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"benchmarks.render: {exc}") from exc
    if args.stdout:
        for name, payload in used.items():
            print(render_section(payload, _shown(Path(args.results) / f"{name}.json")) + "\n")
        return 0
    for payload in used.values():
        for line in target_lines(payload):
            print(f"{payload['benchmark']}: {line.removeprefix('- ').replace('**', '')}")
    pairs = [(docs, old, new)]
    if not args.names:
        path = Path(args.readme)
        text = path.read_text(encoding="utf-8")
        pairs.append((path, text, render_readme(text, args.results)))
    if args.check:
        stale = [str(path) for path, before, after in pairs if before != after]
        if stale:
            print(f"{', '.join(stale)} out of date with {args.results}; run `make bench-docs`")
            return 1
        print(f"{', '.join(str(p) for p, _, _ in pairs)} match {args.results}")
        return 0
    for path, before, after in pairs:
        if before != after:
            atomic_write_text(path, after)
    print(f"rendered {', '.join(used) or 'nothing'} into {', '.join(str(p) for p, _, _ in pairs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
