"""Save and load a CMHA adaptation: the trained tensors (δ, b, and any trained norms or LoRA
factors) as safetensors, the conversion settings as JSON, beside a reference to the base model.

A directory written by :func:`save_adaptation`::

    adaptation_config.json   {"format", "version", "retrofit": RetrofitConfig, "tensors", ...}
    adaptation.safetensors   the tensors, under the base model's parameter names
    tokenizer/               the base model's tokenizer (save_pretrained)
    manifest.json            sha256 of every file, checked on load

:func:`load_adaptation` refuses a directory without ``manifest.json``, a file that does not
match it and a file it reads that the manifest does not list (the tokenizer's included), each
by name, unless ``verify=False``; the base model it loads is another tool's and is read as
``transformers`` reads it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from ..storage import atomic_dir, atomic_write_text, verify_manifest, write_manifest
from .build import load_base, prepare_model
from .config import RetrofitConfig
from .convert import cmha_modules

__all__ = [
    "ADAPTATION_CONFIG",
    "ADAPTATION_FILE",
    "FORMAT",
    "adaptation_tensors",
    "find_adaptation_dir",
    "load_adaptation",
    "load_adaptation_tensors",
    "save_adaptation",
]

ADAPTATION_FILE = "adaptation.safetensors"
ADAPTATION_CONFIG = "adaptation_config.json"
FORMAT = "complexformer-cmha-adaptation"
VERSION = 1


def adaptation_tensors(model: nn.Module, adaptation: bool = True) -> dict[str, torch.Tensor]:
    """Every trainable parameter, plus δ and b of every converted layer when ``adaptation``
    (also when frozen), by name (CPU copies)."""
    out = {}
    for name, p in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if p.requires_grad or (adaptation and leaf in ("cmha_delta", "cmha_bias")):
            out[name] = p.detach().to("cpu").contiguous().clone()
    return out


def load_adaptation_tensors(
    model: nn.Module, tensors: dict[str, torch.Tensor], source: str
) -> None:
    """Copy ``tensors`` into the parameters of the same names (every name must exist)."""
    params = dict(model.named_parameters())
    unknown = sorted(set(tensors) - set(params))
    if unknown:
        raise ValueError(
            f"{source}: {len(unknown)} tensors have no parameter in the model, e.g. "
            f"{unknown[:3]}; was it saved from another base or train mode?"
        )
    with torch.no_grad():
        for name, value in tensors.items():
            p = params[name]
            if p.shape != value.shape:
                raise ValueError(
                    f"{source}: {name} has shape {tuple(value.shape)}, the model's is "
                    f"{tuple(p.shape)}"
                )
            p.copy_(value.to(p.dtype))


def save_adaptation(
    model: nn.Module,
    directory: str | os.PathLike,
    config: RetrofitConfig,
    tokenizer: Any | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write the adaptation of a converted ``model`` to ``directory`` atomically.

    Args:
        model: a model converted with :func:`~complexformer.retrofit.to_cmha`.
        directory: where to write (replaced once the new one is complete).
        config: the retrofit settings (``base`` is the reference used to load it back).
        tokenizer: the base model's ``transformers`` tokenizer, saved beside the tensors.
        extra: further JSON fields (e.g. training steps).

    Returns:
        The directory.
    """
    if not cmha_modules(model):
        raise ValueError("save_adaptation: the model is not converted (see to_cmha)")
    final = Path(directory)
    with atomic_dir(final) as tmp:
        tensors = adaptation_tensors(model)
        save_file(tensors, str(tmp / ADAPTATION_FILE), metadata={"format": "pt"})
        meta = {
            "format": FORMAT,
            "version": VERSION,
            "retrofit": config.to_dict(),
            "base_class": type(model).__name__,
            "tensors": sorted(tensors),
            "parameters": int(sum(t.numel() for t in tensors.values())),
            **(extra or {}),
        }
        atomic_write_text(tmp / ADAPTATION_CONFIG, json.dumps(meta, indent=2) + "\n")
        files = [ADAPTATION_FILE, ADAPTATION_CONFIG]
        if tokenizer is not None:
            tokenizer.save_pretrained(str(tmp / "tokenizer"))
            files += [f"tokenizer/{f.name}" for f in sorted((tmp / "tokenizer").iterdir())]
        write_manifest(tmp, files, kind="cmha-adaptation")
    return final


def find_adaptation_dir(path: str | os.PathLike) -> Path | None:
    """The adaptation directory of ``path``: itself, or ``<run>/model`` of a retrofit run."""
    p = Path(path)
    for d in (p, p / "model"):
        if (d / ADAPTATION_CONFIG).is_file():
            return d
    return None


def read_adaptation_config(directory: str | os.PathLike) -> dict[str, Any]:
    """The parsed ``adaptation_config.json`` (format and version checked)."""
    f = Path(directory) / ADAPTATION_CONFIG
    try:
        meta = json.loads(f.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{f} is corrupted (not valid JSON: {e})") from None
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise ValueError(
            f"{f}: format {meta.get('format')!r} version {meta.get('version')!r}; expected "
            f"{FORMAT!r} version {VERSION}"
        )
    return meta


def load_adaptation(
    directory: str | os.PathLike,
    base: nn.Module | None = None,
    base_spec: str | None = None,
    *,
    verify: bool = True,
) -> tuple[nn.Module, Any, RetrofitConfig]:
    """Load an adaptation onto its base model in one call.

    Args:
        directory: a directory written by :func:`save_adaptation` (or a retrofit run).
        base: the unconverted base model, already loaded (e.g. a fresh
            ``AutoModelForCausalLM.from_pretrained``); it is converted in place.
        base_spec: load this base instead of the one recorded (e.g. a local copy of a hub
            model); ignored when ``base`` is given.
        verify: check the directory against its manifest (False: read it unchecked,
            ``--no-verify``).

    Returns:
        ``(model, tokenizer, config)``: the converted model in eval mode with the saved
        tensors, the tokenizer saved beside them (else the base's), the settings.

    Raises:
        FileNotFoundError: not an adaptation directory.
        ValueError: a file that does not match the manifest, another format, or tensors that
            do not fit the base.
    """
    d = find_adaptation_dir(directory)
    if d is None:
        raise FileNotFoundError(
            f"{directory} is not a CMHA adaptation (no {ADAPTATION_CONFIG} in it or in its model/)"
        )
    covers = [ADAPTATION_FILE, ADAPTATION_CONFIG]
    if (d / "tokenizer").is_dir():
        covers += [f"tokenizer/{f.name}" for f in (d / "tokenizer").iterdir()]
    try:
        if verify:
            verify_manifest(d, covers=covers)
    except ValueError as e:
        raise ValueError(f"cannot load the adaptation {d}: {e}") from None
    meta = read_adaptation_config(d)
    config = RetrofitConfig.from_dict(meta["retrofit"])
    tokenizer = None
    if base is None:
        spec = config if base_spec is None else config.replace(base=base_spec)
        base, tokenizer = load_base(spec)
    prepare_model(base, config)
    load_adaptation_tensors(base, load_file(str(d / ADAPTATION_FILE)), str(d / ADAPTATION_FILE))
    if (d / "tokenizer").is_dir():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(d / "tokenizer"))
    return base.eval(), tokenizer, config
