"""A CmplxBERT directory as a transformers model directory that loads without complexformer.

``complexformer export --model DIR --out OUT`` on a CmplxBERT directory (``cbert-complexify``'s
``OUT/model`` or a fine-tuned model kept by ``cbert-finetune``) writes:

* ``config.json``: :class:`~.configuration_cmplxbert.CmplxBertConfig` with an ``auto_map`` to
  the two code files, and the labels as ``id2label``;
* ``model.safetensors``: the whole model (frozen real weights included) under the names of
  :mod:`complexformer.hf.cmplxbert`'s classes;
* ``configuration_cmplxbert.py`` and ``modeling_cmplxbert.py``: the self-contained code that
  ``AutoModelFor...from_pretrained(OUT, trust_remote_code=True)`` runs where complexformer is
  not installed;
* the tokenizer, and ``manifest.json`` with the sha256 of every file (kind
  ``cmplxbert-export``).

The directory is written into a temporary sibling and renamed into place; an earlier export
at ``OUT`` is replaced, any other non-empty directory is refused.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from transformers import AutoTokenizer

from ..cmplxbert.loading import read_cmplxbert_meta, verify_cmplxbert
from ..storage import MANIFEST, atomic_dir, write_manifest
from . import configuration_cmplxbert, modeling_cmplxbert
from .cmplxbert import TASK_CLASSES
from .markers import CMPLXBERT_EXPORT_KIND

__all__ = ["EXPORT_KIND", "export_cmplxbert"]

#: The ``kind`` of a CmplxBERT export's manifest.
EXPORT_KIND = CMPLXBERT_EXPORT_KIND
#: The Auto class of each CmplxBERT task.
AUTO = {
    "base": "AutoModel",
    "mlm": "AutoModelForMaskedLM",
    "pretraining": "AutoModelForPreTraining",
    "classification": "AutoModelForSequenceClassification",
    "token_classification": "AutoModelForTokenClassification",
}


def _refuse_other(out: Path) -> None:
    """An existing ``out`` must be empty or an earlier CmplxBERT export."""
    if not out.exists():
        return
    if not out.is_dir():
        raise FileExistsError(f"{out} exists and is not a directory")
    if not any(out.iterdir()):
        return
    manifest = out / MANIFEST
    kind = None
    if manifest.is_file():
        kind = json.loads(manifest.read_text(encoding="utf-8")).get("kind")
    if kind != EXPORT_KIND:
        raise FileExistsError(
            f"{out} is a non-empty directory that is not a CmplxBERT export; choose another --out"
        )


def export_cmplxbert(
    model_dir: str | os.PathLike[str], out: str | os.PathLike[str], *, verify: bool = True
) -> Path:
    """Export the CmplxBERT directory ``model_dir`` to ``out`` (see the module's docstring).

    Args:
        model_dir: a CmplxBERT directory (``cmplxbert.json``).
        out: the export directory.
        verify: check ``model_dir`` against its manifest first (``--no-verify``: unchecked).

    Returns:
        ``out`` as a Path.
    """
    src, final = Path(model_dir), Path(out)
    if verify:
        verify_cmplxbert(src)
    _refuse_other(final)
    task = read_cmplxbert_meta(src)["task"]
    cls = TASK_CLASSES[task]
    model = cls.from_cmplxbert_dir(src, verify=False)  # checked above
    tokenizer = AutoTokenizer.from_pretrained(str(src), local_files_only=True)
    model.config.auto_map = {
        "AutoConfig": "configuration_cmplxbert.CmplxBertConfig",
        AUTO[task]: f"modeling_cmplxbert.{cls.__name__}",
    }
    model.config.architectures = [cls.__name__]
    with atomic_dir(final) as tmp:
        model.save_pretrained(tmp, weights="all")  # it stands alone
        tokenizer.save_pretrained(str(tmp))
        for module in (configuration_cmplxbert, modeling_cmplxbert):
            shutil.copyfile(module.__file__, tmp / Path(module.__file__).name)
        files = [p.name for p in tmp.iterdir() if p.is_file() and p.name != MANIFEST]
        write_manifest(tmp, files, kind=EXPORT_KIND)
    return final
