"""Number formatting and marker-delimited sections of a markdown file."""

from __future__ import annotations

import math
import re

__all__ = ["fmt_load", "fmt_num", "fmt_ratio", "replace_section", "section_markers"]


def fmt_num(x: float | None, digits: int = 1, suffix: str = "") -> str:
    """``x`` with thousands separators and ``digits`` decimals; ``-`` for None/NaN/inf."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:,.{digits}f}{suffix}"


def fmt_ratio(x: float | None, digits: int = 2) -> str:
    """A ratio as ``1.23x`` (``-`` when unknown)."""
    return fmt_num(x, digits, "x")


def fmt_load(x: float | None) -> str:
    """A load average with one decimal, ``n/a`` when unknown."""
    return "n/a" if x is None else f"{x:.1f}"


def section_markers(name: str) -> tuple[str, str]:
    """The ``<!-- name:start -->`` / ``<!-- name:end -->`` comments around a section."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"bad section name {name!r}: use letters, digits, '_', '.', '-'")
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def replace_section(text: str, name: str, body: str) -> str:
    """``text`` with the part between the markers of ``name`` replaced by ``body``.

    Everything outside the markers is kept, and so are the markers. A missing section is
    appended at the end; a file with only one of the two markers is an error.
    """
    start, end = section_markers(name)
    block = f"{start}\n{body.strip()}\n{end}"
    i, j = text.find(start), text.find(end)
    if i >= 0 and j > i:
        text = text[:i] + block + text[j + len(end) :]
    elif i >= 0 or j >= 0:
        raise ValueError(f"unbalanced markers for section {name!r}: need {start} before {end}")
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    return text if text.endswith("\n") else text + "\n"
