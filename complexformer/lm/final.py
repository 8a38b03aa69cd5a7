"""The final model of a run: ``model.save_pretrained`` into a directory, atomically."""

from __future__ import annotations

import os
from pathlib import Path

from ..models.lm import ComplexFormerLM
from ..storage import atomic_dir

__all__ = ["save_final_model"]


def save_final_model(model: ComplexFormerLM, directory: str | os.PathLike) -> Path:
    """``model.save_pretrained`` into a temporary sibling that then replaces ``directory``
    (:func:`~complexformer.storage.atomic_dir`); returns the directory."""
    final = Path(directory)
    with atomic_dir(final) as tmp:
        model.save_pretrained(tmp)
    return final
