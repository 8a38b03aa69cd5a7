"""The lab's named configurations, as TOML data files.

- ``scales.toml``: the reproduction scales of ``complexformer reproduce --scale NAME``
  (:data:`complexformer_lab.reproduce.variants.SCALES`).
- ``ladders.toml``: the compute ladders of ``reproduce --table ladder --scale NAME``
  (:data:`complexformer_lab.reproduce.ladder.LADDERS`).

Each top-level table is one configuration; ``extends`` starts it from another one of the same
file and ``description`` is its line in ``--help`` (:class:`complexformer.config.NamedConfigs`).
Two more keys may appear in any table of these files:

- ``preset = "NAME"``: the table stands for the GPTConfig fields of the library's model preset
  ``NAME`` (``complexformer/configs/presets.toml``), the table's other keys being differences;
- ``unset = ["KEY", ...]``: keys the table leaves out although its base (``extends``) or its
  preset has them, so that they take their defaults (TOML has no null).

Lists are read as tuples, as the configuration dataclasses hold them.
"""

from __future__ import annotations

import functools
from typing import Any

from complexformer.config import NamedConfigs, named_configs
from complexformer.models.config import preset_fields

__all__ = ["lab_configs", "resolve_table"]


def resolve_table(table: dict[str, Any]) -> dict[str, Any]:
    """A table of these files as the values it stands for.

    Nested tables are resolved first; then ``preset`` is replaced by the preset's fields (the
    table's keys win), ``unset`` keys are removed and lists become tuples.

    Raises:
        ValueError: an unknown preset name (the valid ones are named).
    """
    out = {k: resolve_table(v) if isinstance(v, dict) else _tuples(v) for k, v in table.items()}
    unset = out.pop("unset", ())
    if "preset" in out:
        preset = out.pop("preset")
        out = {k: _tuples(v) for k, v in preset_fields(preset, **out).items()}
    return {k: v for k, v in out.items() if k not in unset}


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


@functools.cache
def lab_configs(filename: str, kind: str) -> NamedConfigs:
    """The named configurations of ``filename`` in this package, each table resolved by
    :func:`resolve_table` (read once).

    Args:
        filename: ``"scales.toml"`` or ``"ladders.toml"``.
        kind: what a name is, for error messages (``"scale"``).
    """
    raw = named_configs(filename, kind, package=__name__)
    entries = {name: resolve_table(raw.entries[name]) for name in raw.names()}
    return NamedConfigs(raw.kind, entries, raw.descriptions)
