"""Saving / loading complex LoRA adapters and counting trainable parameters.

Only the adapter state is written (Tamburini 2024 trains only the adapters, complex biases,
norms and heads; the real pre-trained weights are the base model's own and are not copied):
``adapter_model.safetensors`` (real tensors; every complex quantity is stored as (..., 2)) and
``adapter_config.json`` (the :class:`ComplexLoRAConfig` under ``"lora"``, the
:class:`CmplxBertConfig` under ``"cmplxbert"`` and a description of the base model; files of
version 1 kept both configs' fields under ``"lora"`` and still load). Both files are
written atomically (temporary file in the same folder, then :func:`os.replace`), so a crash
never leaves a half-written adapter, and then listed (sha256 and size) in the folder's
``manifest.json``, which :func:`load_adapters` checks before it reads anything.

"Adapter state" = every parameter of the model except the frozen real base weights, i.e.
all parameters that are not inside a ``base_layer``, plus those inside one that were made
trainable (a freshly created MLM head, ``train_heads="full"``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from complexformer.storage import atomic_output, atomic_write_text, update_manifest, verify_manifest

from .config import ComplexLoRAConfig, split_config_dict
from .layers import complex_lora_layers

__all__ = [
    "ADAPTER_CONFIG_NAME",
    "ADAPTER_WEIGHTS_NAME",
    "LoadResult",
    "adapter_state_dict",
    "load_adapters",
    "print_trainable_parameters",
    "save_adapters",
    "trainable_parameter_counts",
]

ADAPTER_WEIGHTS_NAME = "adapter_model.safetensors"
ADAPTER_CONFIG_NAME = "adapter_config.json"
_FORMAT = "complexformer-complex-lora"


def _is_base(name: str) -> bool:
    return name.startswith("base_layer.") or ".base_layer." in name


def adapter_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """Name -> parameter for everything but the frozen real base weights (no copies)."""
    return {
        name: p for name, p in model.named_parameters() if p.requires_grad or not _is_base(name)
    }


def _model_config(model: nn.Module, config: ComplexLoRAConfig | None) -> ComplexLoRAConfig:
    if config is not None:
        return config
    cfg = getattr(model, "lora_config", None)
    if isinstance(cfg, ComplexLoRAConfig):
        return cfg
    for _, layer in complex_lora_layers(model):  # a plain module with LoRA layers inside
        if layer.r > 0:
            alpha = None if layer.alpha == layer.r else layer.alpha
            return ComplexLoRAConfig(
                r=layer.r,
                alpha=alpha,
                init=layer.init,
                complex_bias=getattr(layer, "bias_c", None) is not None,
            )
    raise ValueError("save_adapters: the model has no complex LoRA layer and no lora_config")


def save_adapters(
    model: nn.Module, directory: str | os.PathLike, config: ComplexLoRAConfig | None = None
) -> Path:
    """Write the adapter state and config of ``model`` into ``directory``.

    Args:
        model: a complexified model (:func:`complexformer.cmplxbert.complexify`) or any
            module containing :class:`ComplexLoRALinear` / :class:`ComplexLoRAEmbedding`.
        directory: created if missing; existing adapter files are replaced atomically.
        config: the config to record (default: ``model.lora_config``, else inferred).

    Returns:
        the directory as a Path.
    """
    out = Path(directory)
    cfg = _model_config(model, config)
    state = {
        k: v.detach().to("cpu").contiguous().clone() for k, v in adapter_state_dict(model).items()
    }
    meta = {"format": _FORMAT, "version": 2, "lora": cfg.to_dict()}
    model_config = getattr(model, "model_config", None)
    if model_config is not None:
        meta["cmplxbert"] = model_config.to_dict()
    describe = getattr(model, "adapter_metadata", None)
    if callable(describe):
        meta["base_model"] = describe()
    with atomic_output(out / ADAPTER_WEIGHTS_NAME) as tmp:
        save_file(state, tmp, metadata={"format": "pt"})
    atomic_write_text(out / ADAPTER_CONFIG_NAME, json.dumps(meta, indent=2, sort_keys=True) + "\n")
    # a manifest already there (a saved model's folder) keeps its other entries as they are
    update_manifest(out, (ADAPTER_WEIGHTS_NAME, ADAPTER_CONFIG_NAME), kind="adapters")
    return out


@dataclass
class LoadResult:
    """Keys of the model's adapter state absent from the file, and keys of the file unused."""

    missing_keys: list[str] = field(default_factory=list)
    unexpected_keys: list[str] = field(default_factory=list)


def _short(keys: list[str], n: int = 6) -> str:
    more = f" ... (+{len(keys) - n} more)" if len(keys) > n else ""
    return ", ".join(keys[:n]) + more


def load_adapters(
    model: nn.Module, directory: str | os.PathLike, strict: bool = True, verify: bool = True
) -> LoadResult:
    """Load adapters written by :func:`save_adapters` into ``model`` (in place).

    Args:
        model: a model with the same adapter layout (e.g. a fresh ``complexify`` of the same
            base with the same config).
        directory: the folder with ``adapter_model.safetensors`` and ``adapter_config.json``.
        strict: raise if the file and the model's adapter state have different keys; with
            ``strict=False`` the common keys are loaded (e.g. encoder adapters from MLM
            pre-training into a classification model) and the differences returned.
        verify: check both files against the folder's ``manifest.json`` first (sha256 and
            size); False reads them unchecked (adapters saved before manifests existed).

    Raises:
        FileNotFoundError: a file is missing.
        ManifestError: (``verify``) no manifest, or a file changed since the save or not
            listed in it (named).
        ValueError: a different rank, a shape mismatch, or (strict) missing/unexpected keys.
    """
    d = Path(directory)
    wpath, cpath = d / ADAPTER_WEIGHTS_NAME, d / ADAPTER_CONFIG_NAME
    for p in (wpath, cpath):
        if not p.is_file():
            raise FileNotFoundError(f"load_adapters: {p} does not exist")
    if verify:
        verify_manifest(d, covers=(ADAPTER_WEIGHTS_NAME, ADAPTER_CONFIG_NAME))
    meta = json.loads(cpath.read_text(encoding="utf-8"))
    saved_cfg, _ = split_config_dict(meta)
    model_cfg = getattr(model, "lora_config", None)
    if isinstance(model_cfg, ComplexLoRAConfig) and model_cfg.r != saved_cfg.r:
        raise ValueError(
            f"load_adapters: the adapters in {d} have rank r={saved_cfg.r}, the "
            f"model has r={model_cfg.r}"
        )
    state = load_file(str(wpath))
    own = adapter_state_dict(model)
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    if strict and (missing or unexpected):
        raise ValueError(
            f"load_adapters: adapter keys differ from the model's: missing "
            f"[{_short(missing)}], unexpected [{_short(unexpected)}]; "
            "pass strict=False to load the common keys"
        )
    bad = [
        f"{k}: file {tuple(state[k].shape)} vs model {tuple(own[k].shape)}"
        for k in own
        if k in state and state[k].shape != own[k].shape
    ]
    if bad:
        raise ValueError(f"load_adapters: shape mismatch for {_short(bad, 4)}")
    merged = [m for _, m in complex_lora_layers(model) if m.merged]
    with torch.no_grad():
        for k, p in own.items():
            if k in state:
                p.copy_(state[k].to(p.device, p.dtype))
    for m in merged:  # refresh merged weights from the loaded adapters
        m.unmerge()
        m.merge()
    return LoadResult(missing, unexpected)


def trainable_parameter_counts(model: nn.Module) -> tuple[int, int]:
    """(trainable, all) numbers of REAL parameter entries (a complex entry counts 2)."""
    seen, trainable, total = set(), 0, 0
    for p in model.parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        total += p.numel()
        trainable += p.numel() if p.requires_grad else 0
    return trainable, total


def print_trainable_parameters(model: nn.Module) -> str:
    """Print (and return) a peft-like line: trainable params, all params, trainable %."""
    t, a = trainable_parameter_counts(model)
    name = getattr(model, "name", None)
    line = (
        f"trainable params: {t:,} || all params: {a:,} || trainable%: {100.0 * t / max(a, 1):.4f}"
    )
    if isinstance(name, str):
        line = f"{name}: {line}"
    print(line)
    return line
