"""What ``complexformer info`` says of a CmplxBERT folder in transformers' format, read
without transformers (or the base model) installed.

Two kinds: a ``save_pretrained`` folder (manifest kind ``cmplxbert-hf``: a ``Trainer``
checkpoint, a model a user saved, with every tensor or only what trains) and a CmplxBERT
export (``cmplxbert-export``). Their ``config.json`` says the task (``architectures``), the
base model and the three configurations; the safetensors header says what was saved.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from safetensors import safe_open

from ..storage import read_text, verify_manifest

__all__ = ["describe_cmplxbert_folder"]

#: The task of each CmplxBERT transformers class.
TASKS = {
    "CmplxBertModel": "base",
    "CmplxBertForMaskedLM": "mlm",
    "CmplxBertForPreTraining": "pretraining",
    "CmplxBertForSequenceClassification": "classification",
    "CmplxBertForTokenClassification": "token_classification",
}


def _numel(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def describe_cmplxbert_folder(path: str | os.PathLike, *, verify: bool = True) -> dict[str, Any]:
    """``{"config", "parameters", "meta"}`` of a CmplxBERT ``save_pretrained`` folder or export.

    Args:
        path: the folder (``config.json``, ``model.safetensors``, ``manifest.json``).
        verify: check both files against the manifest first.

    Returns:
        ``config``: the LoRA and CmplxBERT configurations, pooling and labels; ``parameters``:
        the tensors and real entries saved (``saved_weights`` says whether they are every
        tensor or only what trains); ``meta``: task, base model and what was saved.

    Raises:
        ValueError: a file that does not match the manifest, or no readable ``config.json``.
    """
    d = Path(path)
    if verify:
        verify_manifest(d, covers=("config.json", "model.safetensors"))
    try:
        cfg = json.loads(read_text(d / "config.json"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{d / 'config.json'} is not readable JSON: {e}") from None
    arch = (cfg.get("architectures") or ["?"])[0]
    tensors = entries = 0
    weights = d / "model.safetensors"
    if weights.is_file():
        with safe_open(str(weights), "pt") as f:
            for key in f.keys():
                tensors += 1
                entries += _numel(f.get_slice(key).get_shape())
    saved = cfg.get("saved_weights") or "all"
    labels = cfg.get("id2label") or {}
    return {
        "config": {
            "lora": cfg.get("lora", {}),
            "cmplxbert": cfg.get("cmplxbert", {}),
            "pooling": cfg.get("pooling"),
            "labels": [labels[k] for k in sorted(labels, key=int)] if labels else None,
            "bert": {
                k: cfg.get("bert", {}).get(k)
                for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
            },
        },  # fmt: skip
        "parameters": {"saved_tensors": tensors, "saved_real": entries},
        "meta": {
            "task": TASKS.get(arch, arch),
            "class": arch,
            "base": cfg.get("base_model_name_or_path"),
            "saved_weights": saved,
        },
    }
