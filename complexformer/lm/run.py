"""Load what a training run produced: model, tokenizer and metadata (for generate/evaluate/info).

:func:`load_run` accepts three kinds of directory:

* a **run directory** (``out_dir`` of :func:`~complexformer.lm.train`): the final
  ``model/`` if it is there, else the newest intact checkpoint;
* a **checkpoint directory** (``<run>/checkpoints/step_0000500``), verified against its
  manifest;
* a **model directory** written by :meth:`ComplexFormerLM.save_pretrained` (e.g.
  ``<run>/model``).

The tokenizer comes from ``<run>/tokenizer`` (or a ``tokenizer/`` inside the given directory, or
the directory itself for a transformers export).

Nothing is read unverified: a checkpoint, a final model, an export and the tokenizer are each
checked against their ``manifest.json`` (a missing manifest, a changed file or a file the
manifest does not list is an error that names it), unless ``verify=False``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..data import Tokenizer
from ..data.tokenizer import META_FILE as TOKENIZER_META
from ..models.config import GPTConfig
from ..models.lm import CONFIG_NAME, WEIGHTS_NAME, ComplexFormerLM
from ..storage import NO_VERIFY_HINT
from ..training.checkpoint import (
    CHECKPOINTS_DIR,
    MANIFEST,
    find_latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
)
from ..training.config import TrainConfig
from .checkpoint import checkpoint_config, model_from_checkpoint

__all__ = ["LoadedRun", "find_run_dir", "is_model_dir", "load_run"]


@dataclass
class LoadedRun:
    """What :func:`load_run` returns.

    Attributes:
        model: the model, in eval mode.
        tokenizer: the run's tokenizer (None when not found and not required).
        model_config: the model configuration.
        train_config: the training configuration, when known.
        step: the number of training steps behind these weights, when known.
        source: the directory the weights were read from.
        kind: ``"model"`` (a save_pretrained directory) or ``"checkpoint"``.
        run_dir: the run directory, when the source belongs to one.
        summary: the run's ``summary.json`` (final metrics), when present.
    """

    model: ComplexFormerLM
    tokenizer: Tokenizer | None
    model_config: GPTConfig
    train_config: TrainConfig | None
    step: int | None
    source: Path
    kind: str
    run_dir: Path | None
    summary: dict[str, Any] = field(default_factory=dict)

    def metadata(self) -> dict[str, Any]:
        """JSON-ready metadata: step, kind, paths, configs and summary."""
        return {
            "step": self.step,
            "kind": self.kind,
            "source": str(self.source),
            "run_dir": None if self.run_dir is None else str(self.run_dir),
            "model_config": self.model_config.to_dict(),
            "train_config": None if self.train_config is None else self.train_config.to_dict(),
            "summary": self.summary,
        }


def is_model_dir(p: Path) -> bool:
    """Whether ``p`` holds a saved ComplexFormer model (``config.json`` + ``model.safetensors``)."""
    return (p / CONFIG_NAME).is_file() and (p / WEIGHTS_NAME).is_file()


def _is_checkpoint_dir(p: Path) -> bool:
    return (p / MANIFEST).is_file() or (p.parent.name == CHECKPOINTS_DIR and p.is_dir())


def _is_run_dir(p: Path) -> bool:
    return (p / CHECKPOINTS_DIR).is_dir() or (p / "model").is_dir()


def find_run_dir(path: str | os.PathLike) -> Path | None:
    """The run directory that ``path`` (a run, checkpoint or model directory) belongs to."""
    p = Path(path)
    if p.parent.name == CHECKPOINTS_DIR:
        return p.parent.parent
    if is_model_dir(p):
        return p.parent if (p.parent / "train_config.json").is_file() else None
    if _is_run_dir(p) or (p / "train_config.json").is_file():
        return p
    return None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is corrupted (not valid JSON: {e})") from None


def _load_tokenizer(candidates: list[Path], required: bool, verify: bool) -> Tokenizer | None:
    for d in candidates:
        if (d / TOKENIZER_META).is_file() or (d / "tokenizer.json").is_file():
            if verify and not (d / MANIFEST).is_file():
                # The package wrote this tokenizer with its model: without a manifest (removed,
                # or saved before tokenizers carried one) it cannot be checked.
                raise ValueError(
                    f"{d / MANIFEST} is missing: the tokenizer in {d} cannot be verified "
                    f"(re-save it with Tokenizer.load(dir, verify=False).save(dir) if it is "
                    f"from a run saved before tokenizers carried a manifest); {NO_VERIFY_HINT}"
                )
            try:
                return Tokenizer.load(d, verify=verify)
            except Exception as e:
                raise ValueError(f"cannot load the tokenizer from {d}: {e}") from None
    if required:
        where = " or ".join(str(d) for d in candidates) or "(no run directory)"
        raise FileNotFoundError(f"no tokenizer found at {where}; a run saves it in <run>/tokenizer")
    return None


def load_run(
    path: str | os.PathLike,
    *,
    device: str | torch.device = "cpu",
    require_tokenizer: bool = True,
    verify: bool = True,
) -> LoadedRun:
    """Load a trained model, its tokenizer and metadata from a run, checkpoint or model dir.

    Args:
        path: a run directory, a ``checkpoints/step_*`` directory or a ``save_pretrained``
            directory.
        device: where to put the model.
        require_tokenizer: raise if no tokenizer is found (else ``tokenizer=None``).
        verify: check the weights and the tokenizer against their manifests; False reads
            them unchecked (``--no-verify``; e.g. a run saved before tokenizers carried a
            manifest), and a run directory then loads its newest checkpoint unchecked.

    Returns:
        A :class:`LoadedRun` (model in eval mode).

    Raises:
        FileNotFoundError: ``path`` does not exist, is none of the three kinds, or the
            tokenizer is missing (the expected paths are named).
        CheckpointError: the checkpoint is truncated or corrupted (the file is named).
        ValueError: a damaged model directory, tokenizer or configuration file, or (with
            ``verify``) a missing manifest (the file is named).
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p} does not exist: no such file or directory")
    if not p.is_dir():
        raise FileNotFoundError(f"{p} is not a directory (expected a run, checkpoint or model)")

    run_dir = find_run_dir(p)
    if is_model_dir(p):
        kind, source = "model", p
    elif _is_checkpoint_dir(p):
        kind, source = "checkpoint", p
    elif run_dir == p:
        if is_model_dir(p / "model"):
            kind, source = "model", p / "model"
        else:
            if verify:
                ckpt = find_latest_checkpoint(p / CHECKPOINTS_DIR, log=None)
            else:
                ckpts = list_checkpoints(p / CHECKPOINTS_DIR)
                ckpt = ckpts[-1][1] if ckpts else None
            if ckpt is None:
                raise FileNotFoundError(
                    f"{p} holds no final model ({p / 'model'}) and no checkpoint "
                    f"({p / CHECKPOINTS_DIR}/step_*)"
                )
            kind, source = "checkpoint", ckpt
    else:
        raise FileNotFoundError(
            f"{p} is not a run directory (no {CHECKPOINTS_DIR}/ or model/), a checkpoint "
            f"(no {MANIFEST}) or a saved model (no {CONFIG_NAME} + {WEIGHTS_NAME})"
        )

    summary: dict[str, Any] = {}
    train_config = None
    step = None
    if run_dir is not None:
        if (run_dir / "summary.json").is_file():
            summary = _read_json(run_dir / "summary.json")
        if (run_dir / "train_config.json").is_file():
            train_config = TrainConfig.load(run_dir / "train_config.json")

    if kind == "checkpoint":
        ckpt_obj = load_checkpoint(source, verify=verify)
        model = model_from_checkpoint(ckpt_obj, device)
        model_config = checkpoint_config(ckpt_obj)
        train_config = ckpt_obj.train_config
        step = ckpt_obj.step
    else:
        model = ComplexFormerLM.from_pretrained(source, map_location=str(device), verify=verify).to(
            device
        )
        model_config = model.config
        if summary.get("steps") is not None:
            step = int(summary["steps"])
    model.eval()

    candidates = [source / "tokenizer", source]  # source itself: an exported directory
    if run_dir is not None:
        candidates.append(run_dir / "tokenizer")
    tokenizer = _load_tokenizer(candidates, require_tokenizer, verify)
    if tokenizer is not None and tokenizer.vocab_size > model_config.vocab_size:
        raise ValueError(
            f"tokenizer vocab_size {tokenizer.vocab_size} exceeds the model's "
            f"{model_config.vocab_size}: {source} and its tokenizer do not belong together"
        )
    return LoadedRun(
        model=model,
        tokenizer=tokenizer,
        model_config=model_config,
        train_config=train_config,
        step=step,
        source=source,
        kind=kind,
        run_dir=run_dir,
        summary=summary,
    )
