"""One base for every configuration dataclass, and the one ``KEY=VALUE`` parser.

Every config of the package (model, training, adapters, evaluation suites, reproduction) is a
dataclass that derives from :class:`ConfigBase`, so each of them converts to and from JSON
the same way, rejects an unknown key with the closest valid names, and takes command-line
overrides through :func:`parse_overrides`.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import inspect
import json
import os
import re
import sys
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from .storage import atomic_write_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "ConfigBase",
    "NamedConfigs",
    "field_defaults",
    "field_docs",
    "named_configs",
    "parse_overrides",
    "parse_value",
    "read_toml",
    "unknown_key_error",
]

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


# ---------------------------------------------------------------------- field documentation
_SECTION = re.compile(r"^(\s*)(Attributes|Args):\s*$")
_ENTRY = re.compile(r"^(\w+)(?:\s*\([^)]*\))?:\s*(.*)$")


def field_defaults(cls: type) -> dict[str, Any]:
    """Each field's default value of a dataclass (``dataclasses.MISSING`` where it has none;
    a ``default_factory`` is called)."""
    return {
        f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        for f in dataclasses.fields(cls)
    }


def field_docs(cls: type) -> dict[str, str]:
    """Each field's text in the ``Attributes:`` (or, for a dataclass whose fields are its
    arguments, ``Args:``) section of a Google-style class docstring; for a function, each
    parameter's text in its ``Args:`` section.

    The classes of the method resolution order are read from the base up, so a subclass's
    entry wins. Inline markup (````x````, ``:class:`x``` and the like) becomes plain text.

    Args:
        cls: a class whose docstring lists its fields under ``Attributes:``, or a function.

    Returns:
        field name -> its text on one line (fields without an entry are absent).
    """
    out: dict[str, str] = {}
    if not isinstance(cls, type):  # a function: its own Args: section
        return _attribute_entries(inspect.cleandoc(cls.__doc__ or "").splitlines())
    for klass in reversed(cls.__mro__):
        doc = inspect.cleandoc(klass.__dict__.get("__doc__") or "")
        out.update(_attribute_entries(doc.splitlines()))
    return out


def _attribute_entries(lines: list[str]) -> dict[str, str]:
    entries: dict[str, list[str]] = {}
    inside, indent, name = False, None, None
    for line in lines:
        if not inside:
            inside = bool(_SECTION.match(line))
            continue
        if line.strip() and not line.startswith(" "):
            break  # the next section
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        indent = depth if indent is None else indent
        match = _ENTRY.match(line.strip()) if depth == indent else None
        if match:
            name = match.group(1)
            entries[name] = [match.group(2)]
        elif name is not None:
            entries[name].append(line.strip())
    return {k: _plain(" ".join(v)) for k, v in entries.items()}


def _plain(text: str) -> str:
    text = re.sub(r":\w+:`~?([^`]+)`", lambda m: m.group(1).rpartition(".")[2], text)
    return re.sub(r"\*(\w[^*]*)\*", r"\1", text.replace("``", ""))


# ---------------------------------------------------------------------- TOML files
def read_toml(path: str | os.PathLike) -> dict[str, Any]:
    """A TOML file as a dict.

    Raises:
        FileNotFoundError: no such file (the path is named).
        ValueError: the file is not valid TOML (the path and the parser's message).
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"config file {p} not found")
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{p} is not valid TOML: {e}") from None


def _merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclasses.dataclass(frozen=True)
class NamedConfigs:
    """Named configurations read from one TOML file of the package's ``configs`` folder.

    Each top-level table is one configuration. ``description`` is its line for ``--help``;
    ``extends = "NAME"`` starts it from another one of the file, whose tables are merged key
    by key, so that a configuration is written as a base plus its differences.

    Attributes:
        kind: what a name is, for error messages (``"preset"``, ``"recipe"``).
        entries: name -> its fields, ``extends`` resolved.
        descriptions: name -> its one-line description.
    """

    kind: str
    entries: dict[str, dict[str, Any]]
    descriptions: dict[str, str]

    def names(self) -> list[str]:
        """The names, in the file's order."""
        return list(self.entries)

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __iter__(self):
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, name: str) -> dict[str, Any]:
        """A copy of the fields of ``name``.

        Raises:
            ValueError: an unknown name (the closest valid names are named).
        """
        if name not in self.entries:
            raise unknown_key_error(name, self.names(), self.kind)
        return copy.deepcopy(self.entries[name])

    def describe(self, width: int = 8) -> str:
        """One ``name  description`` line per configuration, for ``--help``."""
        return "\n".join(f"  {n:<{width}}{self.descriptions.get(n, '')}" for n in self.entries)

    @classmethod
    def from_dict(cls, data: dict[str, Any], kind: str, source: str = "") -> NamedConfigs:
        """Resolve ``extends`` and split off the descriptions.

        Raises:
            ValueError: ``extends`` names an unknown configuration or makes a cycle.
        """
        resolved: dict[str, dict[str, Any]] = {}

        def resolve(name: str, chain: tuple[str, ...]) -> dict[str, Any]:
            if name in chain:
                raise ValueError(f"{source}: {kind} {name!r} extends itself ({' -> '.join(chain)})")
            if name not in data:
                raise unknown_key_error(name, list(data), f"{kind} to extend in {source}")
            if name not in resolved:
                entry = dict(data[name])
                entry.pop("description", None)
                parent = entry.pop("extends", None)
                base = resolve(parent, (*chain, name)) if parent else {}
                resolved[name] = _merged(base, entry)
            return resolved[name]

        for name in data:
            resolve(name, ())
        descriptions = {n: str(v.get("description", "")) for n, v in data.items()}
        return cls(kind, {n: resolved[n] for n in data}, descriptions)


@functools.cache
def named_configs(filename: str, kind: str, package: str = "complexformer.configs") -> NamedConfigs:
    """The named configurations of ``filename`` in ``package``'s data (read once).

    Args:
        filename: a TOML file of the package, such as ``"presets.toml"``.
        kind: what a name is, for error messages.
        package: the package that ships the file.
    """
    text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
    return NamedConfigs.from_dict(tomllib.loads(text), kind, f"{package}/{filename}")
