"""Which kind of artifact a folder is, by its marker files."""

from __future__ import annotations

import os
from pathlib import Path

from ..cmplxbert.loading import CMPLXBERT_FILE, is_cmplxbert_dir
from ..hf.markers import CMPLXBERT_EXPORT_KIND, HF_KIND, is_export_dir, manifest_kind
from ..lm.run import is_model_dir
from ..models.lm import CONFIG_NAME
from ..retrofit.io import ADAPTATION_CONFIG, find_adaptation_dir
from ..storage import MANIFEST
from ..training.checkpoint import CHECKPOINTS_DIR, STATE

__all__ = ["KINDS", "detect_kind"]

#: Every kind, with what marks it.
KINDS: dict[str, str] = {
    "lm-run": "a training run: checkpoints/ or model/ with train_config.json",
    "lm-checkpoint": "checkpoints/step_* with manifest.json or state.json",
    "lm-model": "a final model: config.json + model.safetensors",
    "export": "a transformers export: manifest.json of kind hf-model",
    "retrofit": f"a retrofit run or adaptation: {ADAPTATION_CONFIG} (in it or in its model/)",
    "cmplxbert": f"a CmplxBERT directory: {CMPLXBERT_FILE} (in it or in its model/)",
    "cmplxbert-hf": f"a CmplxBERT in transformers' format: manifest.json of kind {HF_KIND}",
    "cmplxbert-export": (
        f"a CmplxBERT export for transformers: manifest.json of kind {CMPLXBERT_EXPORT_KIND}"
    ),
}


def detect_kind(path: str | os.PathLike) -> str:
    """The kind of the artifact at ``path`` (a key of :data:`KINDS`).

    Raises:
        FileNotFoundError: ``path`` does not exist, is not a folder, or carries no marker
            (every kind and its marker are listed).
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p} does not exist: no such file or directory")
    if not p.is_dir():
        raise FileNotFoundError(f"{p} is a file; an artifact is a folder")
    if is_export_dir(p):
        return "export"
    kind = manifest_kind(p)
    if kind in (HF_KIND, CMPLXBERT_EXPORT_KIND):
        return "cmplxbert-hf" if kind == HF_KIND else "cmplxbert-export"
    if find_adaptation_dir(p) is not None:
        return "retrofit"
    if is_cmplxbert_dir(p) or is_cmplxbert_dir(p / "model"):
        return "cmplxbert"
    if is_model_dir(p):
        return "lm-model"
    if p.parent.name == CHECKPOINTS_DIR and any((p / f).is_file() for f in (MANIFEST, STATE)):
        # without its manifest still a checkpoint (by state.json): loading it names the loss
        return "lm-checkpoint"
    if (p / CHECKPOINTS_DIR).is_dir() or (p / "model" / CONFIG_NAME).is_file():
        return "lm-run"
    kinds = "; ".join(f"{k}: {v}" for k, v in KINDS.items())
    raise FileNotFoundError(f"{p} is no artifact this package reads ({kinds})")
