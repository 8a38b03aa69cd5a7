"""Helpers shared by several test folders (importable thanks to tests/conftest.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

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
