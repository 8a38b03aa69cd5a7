"""What the code runs with: torch's modes and CPU settings for a block, and the optional
packages.

- :mod:`~complexformer.runtime.settings`: :func:`eval_mode` and :func:`cpu_settings`, context
  managers that restore the previous state;
- :mod:`~complexformer.runtime.optional`: :func:`require` imports an optional package or
  names the extra that installs it; :func:`missing_extra` turns such an import error into the
  command line's message;
- :mod:`~complexformer.runtime.plugins`: :func:`use_entry_points` uses what other packages
  add through an entry-point group, leaving out one that fails with a warning.
"""

from .optional import EXTRAS, missing_extra, require
from .plugins import use_entry_points
from .settings import cpu_settings, eval_mode

__all__ = [
    "EXTRAS",
    "cpu_settings",
    "eval_mode",
    "missing_extra",
    "require",
    "use_entry_points",
]
