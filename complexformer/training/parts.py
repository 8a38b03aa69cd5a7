"""Sharded checkpoints: each rank writes its own part, and any number of ranks reads them.

Under ``--shard`` a checkpoint's model and AdamW state are written by PyTorch distributed
checkpointing (``torch.distributed.checkpoint``, DCP) through its safetensors storage layer
(``HuggingFaceStorageWriter(save_distributed=True)``): rank ``r`` writes
``parts/shard-{r+1:05d}-model-00001-of-00001.safetensors`` holding its own slices of the
tensors, with each slice's offsets in the file's JSON header, and nothing is gathered to one
rank. Tensors that every rank holds whole (AdamW's ``step`` counters) are written once.

Why this storage layer: DCP's default writer (``FileSystemWriter``) stores the checkpoint's
layout in a pickled ``.metadata`` file, and loading it unpickles it. The safetensors reader
(``HuggingFaceStorageReader``) rebuilds the layout from the safetensors headers (names,
shapes, dtypes and the JSON offsets), so reading a checkpoint loads no pickle. The rest of a
checkpoint (step, configs, param groups, RNG, data position) is ``state.json`` and
``rng.safetensors``, as in an unsharded checkpoint, and ``manifest.json`` covers every part
(each rank hashes the part it wrote; rank 0 writes the manifest).

Reading: a sharded run loads a checkpoint collectively (each rank reads the slices that
overlap its own shard, whatever the number of ranks that wrote them); an unsharded run, or a
single process, reads the whole tensors (:func:`read_full`), so a checkpoint saved by 2
sharded ranks resumes on 1, 2 or 4 ranks, sharded or not.

Tensor names in the parts: ``model.<fqn>`` for the model's state dict and
``optim.<fqn>.<key>`` for the AdamW state of parameter ``<fqn>`` (its fully qualified name,
the same sharded or not).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as tdist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed._state_dict_utils import _copy_state_dict, _create_cpu_state_dict
from torch.distributed.checkpoint import HuggingFaceStorageReader, HuggingFaceStorageWriter
from torch.distributed.checkpoint.staging import BlockingAsyncStager
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

__all__ = [
    "PARTS_DIR",
    "load_model_state",
    "load_sharded",
    "optimizer_from_full",
    "part_files",
    "read_full",
    "save_parts",
    "CachedStager",
    "start_async_save",
    "train_state",
]

PARTS_DIR = "parts"
_PART_RE = re.compile(r"^shard-(\d{5})-model-\d{5}-of-\d{5}\.safetensors$")


def train_state(
    model: nn.Module, optimizer: torch.optim.Optimizer
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The model and optimizer state as one flat dict of (sharded) tensors, and the
    optimizer's JSON part (param groups by parameter name, non-tensor state).

    Every rank of a sharded run calls it (an optimizer without state yet gets a zero state
    first, the targets a load fills).
    """
    flat = {f"model.{k}": v for k, v in _without_aliases(get_model_state_dict(model)).items()}
    osd = get_optimizer_state_dict(model, optimizer)
    scalars: dict[str, dict[str, Any]] = {}
    for fqn, st in osd["state"].items():
        for key, value in st.items():
            if isinstance(value, torch.Tensor):
                flat[f"optim.{fqn}.{key}"] = value
            else:
                scalars.setdefault(fqn, {})[key] = value
    groups = [
        {k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()}
        for g in osd["param_groups"]
    ]
    return flat, {"param_groups": groups, "scalars": scalars, "by_name": True}


def _without_aliases(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` with each tensor once: a tied weight (the LM's embedding and head) keeps
    its first name (safetensors stores no two names of one memory)."""
    seen: set[tuple[int, tuple[int, ...], tuple[int, ...]]] = set()
    out = {}
    for name, value in state.items():
        local = value.to_local() if hasattr(value, "to_local") else value
        key = (local.data_ptr(), tuple(local.shape), tuple(local.stride()))
        if local.numel() and key in seen:
            continue
        seen.add(key)
        out[name] = value
    return out


def load_model_state(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Load ``state`` (a model state without the aliases of tied weights) into ``model``:
    strict but for the names of a parameter loaded under another name."""
    missing, unexpected = model.load_state_dict(state, strict=False)
    params = dict(model.named_parameters(remove_duplicate=False))
    loaded = {id(params[n]) for n in state if n in params}
    missing = [n for n in missing if not (n in params and id(params[n]) in loaded)]
    if missing or unexpected:
        raise RuntimeError(f"missing keys {missing}, unexpected keys {list(unexpected)}")


def part_files(directory: Path, rank: int | None = None) -> list[str]:
    """Names of the part files in ``directory`` (``parts/``), of one rank or of all."""
    if not directory.is_dir():
        return []
    out = []
    for p in sorted(directory.iterdir()):
        m = _PART_RE.match(p.name)
        if m and (rank is None or int(m.group(1)) == rank + 1):
            out.append(p.name)
    return out


def save_parts(directory: Path, flat: dict[str, torch.Tensor]) -> list[str]:
    """Write this rank's part of ``flat`` into ``directory`` (every rank calls it).

    Returns:
        The names of the files this rank wrote (none when DCP gave it nothing to write).
    """
    directory.mkdir(parents=True, exist_ok=True)
    writer = HuggingFaceStorageWriter(str(directory), save_distributed=True)
    dcp.save(flat, storage_writer=writer)
    rank = tdist.get_rank() if tdist.is_initialized() else 0
    return part_files(directory, rank)


class CachedStager(BlockingAsyncStager):
    """Stages a state for an asynchronous save into CPU tensors made at the first save and
    reused by the next ones (pinned where CUDA is available).

    DCP's default stager makes a new CPU copy of every tensor at every save (a deep copy per
    ``DTensor``: most of the time a save blocks training, measured in
    benchmarks/checkpoint.py); its own cache pins the memory, which needs an accelerator. A
    cached copy may be reused only after the previous write finished: the trainer completes
    the pending save before it starts the next.
    """

    def __init__(self) -> None:
        super().__init__(cache_staged_state_dict=True)

    def stage(self, state_dict: dict[str, Any]) -> dict[str, Any]:
        if self.state_dict_cache is None:
            pin = torch.cuda.is_available()
            self.state_dict_cache = _create_cpu_state_dict(state_dict, pin_memory=pin)
        return _copy_state_dict(state_dict, self.state_dict_cache)


def start_async_save(
    directory: Path,
    flat: dict[str, torch.Tensor],
    group: Any,
    stager: CachedStager | None = None,
) -> Any:
    """Copy this rank's part of ``flat`` and write it from a background thread over the
    process group ``group`` (every rank calls it).

    Args:
        directory: the ``parts/`` folder.
        flat: the state (:func:`train_state`).
        group: the process group of the background writes.
        stager: where the state is copied (a :class:`CachedStager` kept for the run); None:
            new CPU tensors.

    Returns:
        A future whose ``result()`` waits for the write.
    """
    directory.mkdir(parents=True, exist_ok=True)
    writer = HuggingFaceStorageWriter(str(directory), save_distributed=True)
    return dcp.async_save(flat, storage_writer=writer, process_group=group, async_stager=stager)


def _reader(directory: Path) -> Any:
    return HuggingFaceStorageReader(str(directory))


def load_sharded(
    directory: Path, model: nn.Module, optimizer: torch.optim.Optimizer, meta: dict[str, Any]
) -> None:
    """Fill a sharded model and its optimizer from the parts (every rank calls it; each reads
    the slices its shard needs).

    Args:
        directory: the checkpoint's ``parts/``.
        model, optimizer: the sharded model and its AdamW.
        meta: the checkpoint's ``state["optimizer"]`` (param groups by name).
    """
    flat, _ = train_state(model, optimizer)
    dcp.load(flat, storage_reader=_reader(directory))
    msd = {k[len("model.") :]: v for k, v in flat.items() if k.startswith("model.")}
    set_model_state_dict(model, msd, options=StateDictOptions(strict=False))
    set_optimizer_state_dict(model, optimizer, _optimizer_by_name(flat, meta))


def _optimizer_by_name(flat: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    names = [n for g in meta["param_groups"] for n in g["params"]]
    state: dict[str, dict[str, Any]] = {n: dict(meta.get("scalars", {}).get(n, {})) for n in names}
    for key, value in flat.items():
        if key.startswith("optim."):
            rest = key[len("optim.") :]
            fqn, _, leaf = rest.rpartition(".")
            state.setdefault(fqn, {})[leaf] = value
    groups = []
    for g in meta["param_groups"]:
        g = dict(g)
        if "betas" in g:
            g["betas"] = tuple(g["betas"])
        groups.append(g)
    return {"state": {k: v for k, v in state.items() if v}, "param_groups": groups}


def read_full(directory: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the parts, whole, on the CPU (in this process alone, with or without a
    process group: each process reads all the parts)."""
    reader = _reader(directory)
    metadata = reader.read_metadata()
    flat = {
        name: torch.empty(tuple(md.size), dtype=md.properties.dtype)
        for name, md in metadata.state_dict_metadata.items()
    }
    with warnings.catch_warnings():  # "assuming the intent is to load in a single process"
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        dcp.load(flat, storage_reader=_reader(directory), no_dist=True)
    return flat


def optimizer_from_full(flat: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    """An ``optimizer.state_dict()`` by parameter index (an unsharded optimizer's layout) from
    the whole tensors of :func:`read_full` and the saved param groups (by name)."""
    by_name = _optimizer_by_name(flat, meta)
    index: dict[str, int] = {}
    groups = []
    for g in by_name["param_groups"]:
        ids = []
        for name in g["params"]:
            index.setdefault(name, len(index))
            ids.append(index[name])
        groups.append({**g, "params": ids})
    state = {index[n]: st for n, st in by_name["state"].items() if n in index}
    return {"state": state, "param_groups": groups}
