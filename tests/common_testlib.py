"""Helpers shared by several test folders (importable thanks to tests/conftest.py)."""

from __future__ import annotations

import json
import random
import shlex
from pathlib import Path

from complexformer.cli import build_parser

WORDS = (
    "the cat dog sat on a mat and ran to its home while birds sang in trees def return "
    "import class self value list dict for if else print range len"
).split()


def write_corpus(root: Path, n_lines: int = 1500) -> str:
    """A JSONL file of short pseudo-sentences; returns its ``text:`` data spec."""
    rng = random.Random(0)
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n_lines):
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 18))]
        rows.append({"text": f"{i}: " + " ".join(words) + "."})
    path = root / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return f"text:{path}"


def recorded_command_lines(path: Path) -> tuple[dict, list[tuple[str, str]]]:
    """A golden file of command lines ``{command: {line: {"args": ..., "configs": ...}}}``
    and its (command, line) cases."""
    golden = json.loads(path.read_text(encoding="utf-8"))
    return golden, [(c, line) for c in sorted(golden) for line in sorted(golden[c])]


def check_recorded_command_line(golden: dict, command: str, line: str, build) -> None:
    """Parse ``command line`` and compare the options named in the record and what
    ``build(args)`` makes of them (None: no config) with the recorded values."""

    def plain(value):
        return json.loads(json.dumps(value, default=list))

    args = build_parser().parse_args([command, *shlex.split(line)])
    want = golden[command][line]
    assert plain({k: getattr(args, k) for k in want["args"]}) == want["args"]
    if build is not None:
        assert plain(build(args)) == want["configs"]
