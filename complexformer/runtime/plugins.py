"""What other packages add through entry points (commands, evaluation suites), each used in
turn, and one that fails left out with a warning instead of breaking the rest."""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points

__all__ = ["use_entry_points"]

_warned: set[tuple[str, str]] = set()


def use_entry_points(group: str, use: Callable[[EntryPoint], object]) -> None:
    """Call ``use(ep)`` on every entry point of ``group``, in the order of their names.

    One for which ``use`` raises (its module does not import, it is not what the group
    holds, ...) is left out with one warning on stderr naming it and the error, once per
    process, and the others go on.

    Args:
        group: the entry-point group, e.g. ``"complexformer.commands"``.
        use: loads the entry point and puts it to work (it raises to refuse one).
    """
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        try:
            use(ep)
        except Exception as e:  # noqa: BLE001 - any failure of a provider leaves it out
            if (group, ep.name) not in _warned:
                _warned.add((group, ep.name))
                print(
                    f"complexformer: warning: entry point {ep.name!r} ({ep.value}) of group "
                    f"{group} is left out: {type(e).__name__}: {e}",
                    file=sys.stderr,
                )
