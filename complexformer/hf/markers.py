"""What marks a transformers folder of ours on disk, readable without transformers installed.

:func:`is_export_dir` and :func:`manifest_kind` let the artifact loader recognise an export
of a ComplexFormer LM, a CmplxBERT's ``save_pretrained`` folder and a CmplxBERT export (and
the commands that cannot serve one refuse it by name) on a machine that has only the runtime
dependencies.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..storage import MANIFEST, read_text

__all__ = ["CMPLXBERT_EXPORT_KIND", "EXPORT_KIND", "HF_KIND", "is_export_dir", "manifest_kind"]

#: The ``kind`` of an export's manifest.
EXPORT_KIND = "hf-model"


def is_export_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds a manifest of kind :data:`EXPORT_KIND` (a regular file: a
    symbolic link there is not read)."""
    return manifest_kind(path) == EXPORT_KIND


#: The ``kind`` of a CmplxBERT's ``save_pretrained`` folder (transformers' format).
HF_KIND = "cmplxbert-hf"
#: The ``kind`` of a CmplxBERT export (``complexformer export`` of a CmplxBERT directory).
CMPLXBERT_EXPORT_KIND = "cmplxbert-export"


def manifest_kind(path: str | os.PathLike) -> str | None:
    """The ``kind`` recorded in ``path/manifest.json`` (a regular file), or None."""
    try:
        kind = json.loads(read_text(Path(path) / MANIFEST)).get("kind")
    except (OSError, ValueError, AttributeError):
        return None
    return kind if isinstance(kind, str) else None
