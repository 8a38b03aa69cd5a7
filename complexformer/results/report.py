"""Tables and result files shared by the evaluation suites, the benchmarks and ``reproduce``.

Every suite writes its numbers twice: a JSON file (machine-readable, everything) and a markdown
file (the table a person reads). Both are written atomically.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..storage import atomic_write_text

__all__ = ["jsonable", "markdown_table", "text_table", "write_json", "write_report"]


def jsonable(obj: Any) -> Any:
    """``obj`` with tensors, numpy scalars/arrays, paths and non-finite floats made JSON-safe
    (NaN and ±inf become ``None``; anything else unknown becomes its ``str``)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "tolist"):  # torch.Tensor, numpy array or scalar
        return jsonable(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def markdown_table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], align: str | None = None
) -> str:
    """A GitHub markdown table; ``align`` is one of ``l``/``r``/``c`` per column."""
    rows = [["" if c is None else str(c) for c in r] for r in rows]
    align = align or "l" * len(headers)
    if len(align) != len(headers):
        raise ValueError(f"align has {len(align)} letters for {len(headers)} columns")
    sep = {"l": "---", "r": "--:", "c": ":-:"}
    lines = [
        "| " + " | ".join(headers) + " |",
        "| " + " | ".join(sep[a] for a in align) + " |",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def text_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """The same rows as a fixed-width text table, for the terminal."""
    rows = [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def write_json(path: str | os.PathLike[str], payload: Any) -> Path:
    """Write ``payload`` (made JSON-safe) atomically, indented, with a final newline."""
    path = Path(path)
    atomic_write_text(path, json.dumps(jsonable(payload), indent=2, sort_keys=False) + "\n")
    return path


def write_report(
    out_dir: str | os.PathLike[str], name: str, payload: Any, markdown: str
) -> tuple[Path, Path]:
    """Write ``out_dir/name.json`` and ``out_dir/name.md``; returns both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md = out / f"{name}.md"
    atomic_write_text(md, markdown.rstrip() + "\n")
    return write_json(out / f"{name}.json", payload), md
