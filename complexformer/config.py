"""One base for every configuration dataclass, and the one ``KEY=VALUE`` parser.

Every config of the package (model, training, adapters, evaluation suites, reproduction) is a
dataclass that derives from :class:`ConfigBase`, so each of them converts to and from JSON
the same way, rejects an unknown key with the closest valid names, and takes command-line
overrides through :func:`parse_overrides`.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from .storage import atomic_write_text

__all__ = ["ConfigBase", "parse_overrides", "parse_value", "unknown_key_error"]

C = TypeVar("C", bound="ConfigBase")


def unknown_key_error(key: str | Iterable[str], valid, what: str = "config field") -> ValueError:
    """A ValueError for unknown names that suggests the closest valid names.

    Args:
        key: the unknown name, or several.
        valid: the allowed names.
        what: what the names are, for the message (``"config field"``, ``"preset"`` ...).

    Returns:
        ``unknown <what> 'x' (did you mean 'y'?); valid: a, b, c``.
    """
    keys = [key] if isinstance(key, str) else list(key)
    valid = [str(v) for v in valid]
    parts = []
    for k in keys:
        close = difflib.get_close_matches(str(k), valid, n=3, cutoff=0.5)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        parts.append(f"{k!r}{hint}")
    return ValueError(f"unknown {what} {', '.join(parts)}; valid: {', '.join(valid)}")


def parse_value(text: str) -> Any:
    """A command-line value: JSON where it parses (numbers, lists, quoted strings), then
    ``true``/``false``/``none``/``null`` in any case, else the text itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        low = text.strip().lower()
        if low in ("true", "false"):
            return low == "true"
        if low in ("none", "null"):
            return None
        return text


def parse_overrides(items: Iterable[str], option: str = "--set") -> dict[str, Any]:
    """``["a=1", "b=x"]`` -> ``{"a": 1, "b": "x"}``.

    Raises:
        ValueError: an item without ``=`` or with an empty key (``option`` is named).
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{option} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = parse_value(value)
    return out


class ConfigBase:
    """Mixin for configuration dataclasses: JSON round trip, unknown-key hints, ``replace``.

    Subclasses are ``@dataclass`` classes; they validate in ``__post_init__``. Tuples are
    written as JSON lists and read back as given (a subclass whose field must be a tuple
    converts it in ``__post_init__``). ``_what`` names the fields in error messages.
    """

    _what = "config field"

    @classmethod
    def field_names(cls) -> list[str]:
        """Names of all fields, in declaration order."""
        return [f.name for f in dataclasses.fields(cls)]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (tuples become lists)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    def to_json(self) -> str:
        """The config as indented, key-sorted JSON."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def check_keys(cls, keys: Iterable[str]) -> None:
        """Raise a ValueError naming the unknown keys and the closest field names."""
        names = cls.field_names()
        unknown = [k for k in keys if k not in names]
        if unknown:
            raise unknown_key_error(unknown, names, cls._what)

    @classmethod
    def from_dict(cls: type[C], data: dict[str, Any]) -> C:
        """Build from a dict; an unknown key raises ValueError suggesting the closest names."""
        if not isinstance(data, dict):
            raise ValueError(f"{cls.__name__}: expected a dict, got {type(data).__name__}")
        cls.check_keys(data)
        return cls(**data)

    @classmethod
    def from_json(cls: type[C], text: str) -> C:
        """Parse :meth:`to_json` output."""
        return cls.from_dict(json.loads(text))

    def replace(self: C, **changes: Any) -> C:
        """A validated copy with some fields changed (unknown names are rejected)."""
        self.check_keys(changes)
        return dataclasses.replace(self, **changes)

    def save(self, path: str | os.PathLike) -> Path:
        """Write :meth:`to_json` atomically (temporary file + rename)."""
        return atomic_write_text(Path(path), self.to_json() + "\n")

    @classmethod
    def load(cls: type[C], path: str | os.PathLike) -> C:
        """Read a file written by :meth:`save`.

        Raises:
            ValueError: the file is not valid JSON (the path is named) or has bad fields.
        """
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{p} is not valid JSON: {e}") from None
        return cls.from_dict(data)
