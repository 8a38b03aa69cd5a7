"""``load_artifact``: read any artifact folder the package writes."""

from __future__ import annotations

import os
from pathlib import Path

from ..cmplxbert.loading import is_cmplxbert_dir, load_cmplxbert
from ..hf.cmplxbert_dir import describe_cmplxbert_folder
from ..lm import load_run
from ..retrofit.io import load_adaptation
from .artifact import Artifact
from .kinds import detect_kind

__all__ = ["load_artifact"]


def load_artifact(path: str | os.PathLike, *, device: str = "cpu", verify: bool = True) -> Artifact:
    """Load the artifact at ``path``, whatever its kind (see :data:`~.kinds.KINDS`).

    Args:
        path: a ComplexFormer run, checkpoint or final model, a transformers export, a
            retrofit run or adaptation, a CmplxBERT directory (or the run that holds it), or
            a CmplxBERT in transformers' format (``save_pretrained``, a ``Trainer``
            checkpoint, an export: described from its files, for ``info``).
        device: where to put a ComplexFormer model (a retrofit or CmplxBERT loads on CPU).
        verify: check every file the package wrote and the loader reads against its
            manifest (the weights, adapters and tokenizer); False reads them unchecked
            (``--no-verify``). A base model of another tool (a retrofit's or CmplxBERT's
            Hugging Face base) is read as ``transformers`` reads it.

    Returns:
        An :class:`Artifact` ready for generate, evaluate, info or export (each refuses a kind
        it cannot serve by name).

    Raises:
        FileNotFoundError: no such folder, or no marker of any kind in it.
        ValueError: a damaged artifact, or (``verify``) a missing manifest or a file that
            does not match it (the file is named).
    """
    p = Path(path)
    kind = detect_kind(p)
    if kind == "retrofit":
        return Artifact(kind, p, retrofit=load_adaptation(p, verify=verify))
    if kind == "cmplxbert":
        d = p if is_cmplxbert_dir(p) else p / "model"
        return Artifact(kind, p, cmplxbert=load_cmplxbert(d, verify=verify))
    if kind in ("cmplxbert-hf", "cmplxbert-export"):  # described, not loaded (no base needed)
        return Artifact(kind, p, extra=describe_cmplxbert_folder(p, verify=verify))
    return Artifact(kind, p, run=load_run(p, device=device, verify=verify))
