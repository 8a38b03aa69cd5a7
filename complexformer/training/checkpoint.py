"""Atomic, verifiable training checkpoints: safetensors for tensors, JSON for the rest.

A checkpoint is a directory ``<out_dir>/checkpoints/step_{step:07d}/`` holding:

* ``model.safetensors`` -- the model weights (tied weights stored once);
* ``optimizer.safetensors`` -- the optimizer's tensor state (``state.{param}.{key}``);
* ``rng.safetensors`` -- RNG tensors of every rank (torch CPU, CUDA, numpy);
* ``state.json`` -- step, configs, optimizer param groups and scalar state, scheduler
  state, python/numpy RNG scalars, data position, metric accumulators;
* ``manifest.json`` -- written last: format, step and the sha256 and size of every other
  file.

Nothing is pickled. A checkpoint is written with :func:`complexformer.storage.atomic_dir`:
into a temporary sibling directory (``.tmp-step_...``), every file and the directory are
fsynced, and only then is it renamed to its final name; so a crash leaves either the complete
checkpoint or no new ``step_*`` directory at all. :func:`verify_checkpoint` re-hashes the files
against the manifest, so a truncated or corrupted checkpoint (disk full, copy cut short, bit
rot) is detected and :func:`find_latest_checkpoint` falls back to the previous good one.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as tdist
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import nn

from ..config import ConfigBase
from ..storage import (
    FORMAT,
    MANIFEST,
    atomic_dir,
    file_entry,
    refuse_link,
    remove_entry,
    verify_manifest,
    write_manifest,
    write_manifest_entries,
)
from .config import TrainConfig
from .dist import all_gather_objects
from .parts import (
    PARTS_DIR,
    load_model_state,
    optimizer_from_full,
    part_files,
    read_full,
    save_parts,
    start_async_save,
    train_state,
)

__all__ = [
    "CHECKPOINTS_DIR",
    "FORMAT",
    "MANIFEST",
    "Checkpoint",
    "CheckpointError",
    "ShardedSave",
    "capture_rng_state",
    "find_latest_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "prune_checkpoints",
    "restore_rng_state",
    "save_checkpoint",
    "save_sharded_checkpoint",
    "step_dir_name",
    "verify_checkpoint",
]

CHECKPOINTS_DIR = "checkpoints"
STATE = "state.json"
MODEL_FILE = "model.safetensors"
OPTIM_FILE = "optimizer.safetensors"
RNG_FILE = "rng.safetensors"
_STEP_RE = re.compile(r"^step_(\d{7,})$")


class CheckpointError(ValueError):
    """A checkpoint is missing files, truncated, corrupted or of an unknown format."""


def step_dir_name(step: int) -> str:
    """``step_{step:07d}``."""
    return f"step_{step:07d}"


# ----------------------------------------------------------------------------- file helpers
def _write_json(path: Path, obj: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")


def _save_tensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    save_file(
        {k: v.detach().cpu().contiguous() for k, v in tensors.items()},
        str(path),
        metadata={"format": "pt"},
    )


def _save_model(path: Path, model: nn.Module) -> None:
    save_model(model, str(path), metadata={"format": "pt"})


# ------------------------------------------------------------------------------- RNG state
def capture_rng_state() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """This process's RNG states: tensors (torch CPU/CUDA, numpy key) and JSON scalars.

    Returns:
        ``(tensors, meta)`` for :func:`restore_rng_state`.
    """
    tensors: dict[str, torch.Tensor] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"cuda.{i}"] = s
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    tensors["numpy"] = torch.from_numpy(np.asarray(keys, dtype=np.int64))
    py_version, py_state, py_gauss = random.getstate()
    meta = {
        "numpy": [kind, int(pos), int(has_gauss), float(gauss)],
        "python": [py_version, list(py_state), py_gauss],
        "n_cuda": sum(k.startswith("cuda.") for k in tensors),
    }
    return tensors, meta


def restore_rng_state(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    """Restore states captured by :func:`capture_rng_state`."""
    torch.set_rng_state(tensors["torch"].to(torch.uint8))
    n_cuda = int(meta.get("n_cuda", 0))
    if n_cuda and torch.cuda.is_available():
        states = [tensors[f"cuda.{i}"].to(torch.uint8) for i in range(n_cuda)]
        torch.cuda.set_rng_state_all(states[: torch.cuda.device_count()])
    kind, pos, has_gauss, gauss = meta["numpy"]
    keys = tensors["numpy"].numpy().astype(np.uint32)
    np.random.set_state((kind, keys, int(pos), int(has_gauss), float(gauss)))
    py_version, py_state, py_gauss = meta["python"]
    random.setstate((py_version, tuple(py_state), py_gauss))


# ------------------------------------------------------------------------- optimizer state
def _flatten_optimizer(sd: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, st in sd["state"].items():
        for key, value in st.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{idx}.{key}"] = value
            else:
                scalars.setdefault(str(idx), {})[key] = value
    groups = [
        {k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()}
        for g in sd["param_groups"]
    ]
    return tensors, {"param_groups": groups, "scalars": scalars}


def _unflatten_optimizer(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for name, value in tensors.items():
        _, idx, key = name.split(".", 2)
        state.setdefault(int(idx), {})[key] = value
    for idx, extra in meta.get("scalars", {}).items():
        state.setdefault(int(idx), {}).update(extra)
    groups = []
    for g in meta["param_groups"]:
        g = dict(g)
        if "betas" in g:
            g["betas"] = tuple(g["betas"])
        groups.append(g)
    return {"state": state, "param_groups": groups}


# ---------------------------------------------------------------------------------- saving
def save_checkpoint(
    root: str | os.PathLike,
    step: int,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    model_config: ConfigBase | dict[str, Any],
    train_config: TrainConfig,
    rng: list[tuple[dict[str, torch.Tensor], dict[str, Any]]],
    extra: dict[str, Any] | None = None,
    model_tensors: dict[str, torch.Tensor] | None = None,
) -> Path:
    """Write ``root/step_{step:07d}`` atomically (:func:`~complexformer.storage.atomic_dir`).

    An existing checkpoint of the same step is replaced only once the new one is complete.

    Args:
        root: the checkpoints directory (created if missing).
        step: number of completed optimizer updates.
        model: the bare model (not DDP- or compile-wrapped).
        optimizer: its optimizer.
        scheduler: the learning-rate scheduler (``state_dict`` must be JSON-serialisable).
        model_config: the model's configuration (a config object or its JSON dict).
        train_config: the training configuration.
        rng: per-rank :func:`capture_rng_state` results, indexed by rank.
        extra: further JSON-serialisable state (data position, metric accumulators, ...).
        model_tensors: the model tensors to save instead of the whole ``model`` (e.g. only
            the trained parameters of a frozen pre-trained base; see
            :meth:`~complexformer.training.TrainTask.checkpoint_tensors`).

    Returns:
        The final checkpoint directory.
    """
    root = Path(root)
    refuse_link(root)  # a linked checkpoints/ would receive the checkpoint outside the run
    final = root / step_dir_name(step)
    with atomic_dir(final) as tmp:
        if model_tensors is None:
            _save_model(tmp / MODEL_FILE, model)
        else:
            _save_tensors(tmp / MODEL_FILE, model_tensors)
        opt_tensors, opt_meta = _flatten_optimizer(optimizer.state_dict())
        _save_tensors(tmp / OPTIM_FILE, opt_tensors)
        _write_state(
            tmp,
            step,
            model_config=model_config,
            train_config=train_config,
            opt_meta=opt_meta,
            scheduler=scheduler,
            rng=rng,
            extra=extra,
        )
        write_manifest(tmp, (MODEL_FILE, OPTIM_FILE, RNG_FILE, STATE), step=step)
    return final


def _write_state(
    tmp: Path,
    step: int,
    *,
    model_config: ConfigBase | dict[str, Any],
    train_config: TrainConfig,
    opt_meta: dict[str, Any],
    scheduler: Any,
    rng: list[tuple[dict[str, torch.Tensor], dict[str, Any]]],
    extra: dict[str, Any] | None,
) -> None:
    """``rng.safetensors`` and ``state.json`` of a checkpoint."""
    rng_tensors = {f"rank{r}.{k}": v for r, (ts, _) in enumerate(rng) for k, v in ts.items()}
    _save_tensors(tmp / RNG_FILE, rng_tensors)
    state = {
        "format": FORMAT,
        "step": step,
        "model_config": (
            model_config if isinstance(model_config, dict) else model_config.to_dict()
        ),
        "train_config": train_config.to_dict(),
        "optimizer": opt_meta,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "rng": [meta for _, meta in rng],
        "world_size": len(rng),
        **(extra or {}),
    }
    try:
        json.dumps(state)
    except TypeError as e:
        raise TypeError(f"checkpoint state is not JSON-serialisable: {e}") from None
    _write_json(tmp / STATE, state)


class ShardedSave:
    """A checkpoint of a sharded run being written: every rank creates it together and calls
    :meth:`complete` together.

    Every rank writes its own part of the model and optimizer state
    (:mod:`~complexformer.training.parts`); rank 0 writes ``rng.safetensors``, ``state.json``
    and, in :meth:`complete`, the manifest of every file from the hashes each rank computed
    of its own part. The directory is written as :func:`save_checkpoint` writes it, into a
    temporary sibling that rank 0 creates, passes to every rank and renames once complete.

    Args:
        root, step, model, optimizer, scheduler, model_config, train_config, rng, extra: as
            in :func:`save_checkpoint` (``model`` is the sharded model).
        async_group: None writes the parts now; a process group (a gloo group of its own,
            so that the writes do not interleave with training's collectives) makes the
            write asynchronous: the state is copied first (the time training waits), the
            files are written by a background thread, and :meth:`complete` waits for them.
        async_stager: with ``async_group``, the :class:`~.parts.CachedStager` the state is
            copied into (kept for the run, so the CPU copy is made once); None: a new copy.
    """

    def __init__(
        self,
        root: str | os.PathLike,
        step: int,
        *,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: Any,
        model_config: ConfigBase | dict[str, Any],
        train_config: TrainConfig,
        rng: list[tuple[dict[str, torch.Tensor], dict[str, Any]]],
        extra: dict[str, Any] | None = None,
        async_group: Any = None,
        async_stager: Any = None,
    ) -> None:
        self.root, self.step = Path(root), step
        self.rank = tdist.get_rank() if tdist.is_initialized() else 0
        self.final = self.root / step_dir_name(step)
        self.stack = contextlib.ExitStack()
        try:
            tmp_here: Path | None = None
            if self.rank == 0:
                refuse_link(self.root)
                tmp_here = self.stack.enter_context(atomic_dir(self.final))
            self.tmp = Path(all_gather_objects(None if tmp_here is None else str(tmp_here))[0])
            self.parts = self.tmp / PARTS_DIR
            flat, opt_meta = train_state(model, optimizer)
            self.future = None
            if async_group is None:
                save_parts(self.parts, flat)
            else:
                self.future = start_async_save(self.parts, flat, async_group, async_stager)
            if self.rank == 0:
                _write_state(
                    self.tmp,
                    step,
                    model_config=model_config,
                    train_config=train_config,
                    opt_meta=opt_meta,
                    scheduler=scheduler,
                    rng=rng,
                    extra={**(extra or {}), "sharded": True},
                )
        except BaseException:
            self.stack.close()
            raise

    def complete(self) -> Path:
        """Wait for the parts, write the manifest and rename the directory (every rank calls
        it). Returns the final checkpoint directory."""
        try:
            if self.future is not None:
                self.future.result()
            mine = {
                f"{PARTS_DIR}/{n}": file_entry(self.parts / n)
                for n in part_files(self.parts, self.rank)
            }
            entries: dict[str, dict[str, Any]] = {}
            for part in all_gather_objects(mine):
                entries.update(part)
            if self.rank == 0:
                for name in (RNG_FILE, STATE):
                    entries[name] = file_entry(self.tmp / name)
                write_manifest_entries(self.tmp, entries, step=self.step, sharded=True)
        except BaseException:
            self.stack.__exit__(*sys.exc_info())
            raise
        self.stack.close()
        return self.final


def save_sharded_checkpoint(root: str | os.PathLike, step: int, **kw: Any) -> Path:
    """Write ``root/step_{step:07d}`` of a sharded run now (every rank calls it); the
    arguments are those of :class:`ShardedSave`. Returns the final directory."""
    return ShardedSave(root, step, **kw).complete()


def list_checkpoints(root: str | os.PathLike) -> list[tuple[int, Path]]:
    """``(step, path)`` of every ``step_*`` directory under ``root``, oldest first.

    Temporary (``.tmp-*``) and other directories are ignored; contents are not checked.

    Raises:
        SymlinkRefusedError: ``root`` or a ``step_*`` entry is a symbolic link (named).
    """
    root = Path(root)
    refuse_link(root)
    if not root.is_dir():
        return []
    out = []
    for p in root.iterdir():
        m = _STEP_RE.match(p.name)
        if m:
            refuse_link(p)
            if p.is_dir():
                out.append((int(m.group(1)), p))
    return sorted(out)


def prune_checkpoints(root: str | os.PathLike, keep_last: int) -> list[Path]:
    """Delete all but the ``keep_last`` most recent checkpoints; returns the deleted paths.

    Only ``step_*`` folders of ``root`` are removed, never through a symbolic link.

    Raises:
        SymlinkRefusedError: ``root`` or a ``step_*`` entry is a link; nothing is deleted.
    """
    ckpts = list_checkpoints(root)
    doomed = [p for _, p in ckpts[: max(0, len(ckpts) - keep_last)]]
    for p in doomed:
        remove_entry(p, root)
    return doomed


# --------------------------------------------------------------------------------- loading
def verify_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Check a checkpoint's files against its manifest.

    Args:
        path: a ``step_*`` directory.

    Returns:
        The parsed manifest.

    Raises:
        CheckpointError: a missing or unreadable manifest, an unknown format, or a file
            missing, of the wrong size or with the wrong sha256 (the path is named).
    """
    path = Path(path)
    parts = tuple(f"{PARTS_DIR}/{n}" for n in part_files(path / PARTS_DIR))
    return verify_manifest(
        path, error=CheckpointError, covers=(MODEL_FILE, OPTIM_FILE, RNG_FILE, STATE, *parts)
    )


def find_latest_checkpoint(
    root: str | os.PathLike, log: Callable[[str], Any] | None = print
) -> Path | None:
    """The newest checkpoint under ``root`` that passes :func:`verify_checkpoint`.

    Bad checkpoints are skipped with a warning through ``log``.

    Returns:
        Its path, or None when ``root`` holds no checkpoint directory at all.

    Raises:
        CheckpointError: checkpoint directories exist but none is intact.
    """
    ckpts = list_checkpoints(root)
    errors = []
    for _, p in reversed(ckpts):
        try:
            verify_checkpoint(p)
            return p
        except CheckpointError as e:
            errors.append(str(e))
            if log is not None:
                log(f"warning: skipping bad checkpoint {p}: {e}")
    if ckpts:
        raise CheckpointError(
            f"no intact checkpoint under {root}; every one is damaged:\n  " + "\n  ".join(errors)
        )
    return None


@dataclass
class Checkpoint:
    """A verified checkpoint on disk; tensors are read on demand.

    Attributes:
        path: the ``step_*`` directory.
        step: completed optimizer updates.
        state: the parsed ``state.json``; ``state["model_config"]`` is the task's model
            configuration as JSON (the task builds the model and loads the weights into it
            with :meth:`load_model_into`).
    """

    path: Path
    step: int
    state: dict[str, Any]

    @property
    def sharded(self) -> bool:
        """True for a checkpoint written in parts by the ranks of a sharded run."""
        return bool(self.state.get("sharded"))

    def _full_parts(self) -> dict[str, torch.Tensor]:
        cached = self.__dict__.get("_parts")
        if cached is None:
            try:
                cached = read_full(self.path / PARTS_DIR)
            except Exception as e:  # safetensors and DCP raise several types
                raise CheckpointError(
                    f"cannot read the parts of {self.path / PARTS_DIR}: {e}"
                ) from None
            self.__dict__["_parts"] = cached
        return cached

    @property
    def train_config(self) -> TrainConfig:
        """The training configuration."""
        return TrainConfig.from_dict(self.state["train_config"])

    def load_model_into(self, model: nn.Module, device: str | torch.device = "cpu") -> None:
        """Load the weights into ``model`` (strict; tied weights handled)."""
        if self.sharded:
            full = self._full_parts()
            state = {k[len("model.") :]: v for k, v in full.items() if k.startswith("model.")}
            try:
                load_model_state(model, state)
            except RuntimeError as e:
                raise CheckpointError(f"cannot load model weights from {self.path}: {e}") from None
            model.to(device)
            return
        f = self.path / MODEL_FILE
        try:
            load_model(model, str(f), strict=True, device=str(device))
        except Exception as e:  # safetensors raises several types for damaged files
            raise CheckpointError(f"cannot load model weights from {f}: {e}") from None

    def optimizer_state_dict(self) -> dict[str, Any]:
        """The optimizer ``state_dict`` (tensors on CPU)."""
        if self.sharded:
            return optimizer_from_full(self._full_parts(), self.state["optimizer"])
        return _unflatten_optimizer(load_file(str(self.path / OPTIM_FILE)), self.state["optimizer"])

    def rng_state(self, rank: int) -> tuple[dict[str, torch.Tensor], dict[str, Any]] | None:
        """Rank ``rank``'s RNG state, or None if the checkpoint has no such rank."""
        if rank >= len(self.state.get("rng", [])):
            return None
        prefix = f"rank{rank}."
        tensors = {
            k[len(prefix) :]: v
            for k, v in load_file(str(self.path / RNG_FILE)).items()
            if k.startswith(prefix)
        }
        return tensors, self.state["rng"][rank]


def load_checkpoint(path: str | os.PathLike, verify: bool = True) -> Checkpoint:
    """Open a checkpoint directory.

    Args:
        path: a ``step_*`` directory.
        verify: check every file's sha256 first (:func:`verify_checkpoint`); False reads
            the files unchecked (``--no-verify``).

    Raises:
        CheckpointError: the checkpoint is incomplete or damaged (the path is named).
    """
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"checkpoint directory {path} does not exist")
    if verify:
        verify_checkpoint(path)
    spath = path / STATE
    try:
        state = json.loads(spath.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{spath} is missing: {path} is not a complete checkpoint") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{spath} is corrupted (not valid JSON: {e})") from None
    if state.get("format") != FORMAT:
        raise CheckpointError(f"{spath}: unknown checkpoint format (expected {FORMAT!r})")
    return Checkpoint(path, int(state["step"]), state)
