"""The run directory: what a run writes, refusing to clobber a run, atomic directory saves."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..data import Tokenizer
from ..models.lm import ComplexFormerLM
from .checkpoint import CHECKPOINTS_DIR, list_checkpoints, make_temp_dir
from .metrics import METRICS_FILE

__all__ = [
    "PROMPT_FILE",
    "RUN_ARTIFACTS",
    "RunExistsError",
    "check_out_dir",
    "clear_run",
    "replace_dir",
    "save_final_model",
    "save_tokenizer",
]

#: The run's default sample prompt: the start of a validation document of its corpus.
PROMPT_FILE = "prompt.txt"

#: Files and directories a run writes into its ``out_dir`` (deleted by ``overwrite=True``).
RUN_ARTIFACTS = (
    CHECKPOINTS_DIR,
    "model",
    "tokenizer",
    "tensorboard",
    METRICS_FILE,
    "config.json",
    "train_config.json",
    "summary.json",
    "loss.png",
    PROMPT_FILE,
)


class RunExistsError(FileExistsError):
    """``out_dir`` already holds a run and neither ``resume`` nor ``overwrite`` was given."""


def check_out_dir(out: Path, resume: bool, overwrite: bool) -> None:
    """Refuse to start over an existing run (read-only; runs on every rank)."""
    if resume and overwrite:
        raise ValueError("resume=True and overwrite=True contradict each other; choose one")
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"out_dir {out} exists and is not a directory")
    has_ckpt = bool(list_checkpoints(out / CHECKPOINTS_DIR))
    has_model = (out / "model").exists()
    if overwrite or not (has_ckpt or has_model):
        return
    if not resume:
        what = "checkpoints" if has_ckpt else "a final model"
        raise RunExistsError(
            f"{out} already holds a training run ({what}); pass resume=True (--resume) to "
            f"continue it or overwrite=True (--overwrite) to delete it and start over"
        )
    if not has_ckpt:
        raise RunExistsError(
            f"cannot resume {out}: it holds a final model but no checkpoint; pass "
            f"overwrite=True to start over"
        )


def clear_run(out: Path) -> None:
    """Delete the :data:`RUN_ARTIFACTS` of ``out`` (other files are left alone)."""
    for name in RUN_ARTIFACTS:
        p = out / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


def replace_dir(tmp: Path, final: Path) -> None:
    """Move the complete directory ``tmp`` onto ``final`` (replacing it once ``tmp`` is done)."""
    if final.exists():
        old = make_temp_dir(final.parent, f".old-{final.name}-")
        os.replace(final, old / final.name)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, final)


def save_final_model(model: ComplexFormerLM, directory: str | os.PathLike) -> Path:
    """``model.save_pretrained`` into a temporary sibling, then rename it onto ``directory``."""
    final = Path(directory)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_temp_dir(final.parent, f".tmp-{final.name}-")
    try:
        model.save_pretrained(tmp)
        for f in tmp.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        replace_dir(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def save_tokenizer(tok: Tokenizer, directory: Path) -> None:
    """``tok.save`` into a temporary sibling, then rename it onto ``directory``."""
    tmp = make_temp_dir(directory.parent, ".tmp-tokenizer-")
    try:
        tok.save(tmp)
        replace_dir(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
