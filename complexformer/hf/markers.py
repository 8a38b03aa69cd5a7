"""What marks a transformers export on disk, readable without transformers installed.

:func:`is_export_dir` lets the artifact loader recognise an export (and the commands that
cannot serve one refuse it by name) on a machine that has only the runtime dependencies.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .._manifest import MANIFEST
from .._safe_paths import read_text

__all__ = ["EXPORT_KIND", "is_export_dir"]

#: The ``kind`` of an export's manifest.
EXPORT_KIND = "hf-model"


def is_export_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds a manifest of kind :data:`EXPORT_KIND` (a regular file: a
    symbolic link there is not read)."""
    mpath = Path(path) / MANIFEST
    try:
        return json.loads(read_text(mpath)).get("kind") == EXPORT_KIND
    except (OSError, ValueError, AttributeError):
        return False
