"""Meta-device initialisation for sharded training: each rank materialises only its shard.

Under ``--shard`` a model built on the CPU in every rank costs each rank the whole model in
float32 before FSDP2 splits it. Here the model is built on the ``meta`` device instead (no
memory), while a :class:`~torch.utils._python_dispatch.TorchDispatchMode` records every
operation its constructor runs (``empty``, ``normal_``, ``uniform_``, ``fill_``, ...). The
record is then replayed on the CPU in order, so the random generator is consumed exactly as
an ordinary construction consumes it and every tensor gets the value it would have had: the
same initial weights as a model built on the CPU with the same seed, bit for bit.

The replay keeps memory bounded: a write that a later full overwrite replaces unread (a
``Linear``'s default Kaiming draw, redrawn by the model's own ``normal_``) runs on a scratch
tensor only to advance the generator, and as soon as a parameter's storage has seen its last
operation this rank keeps its dimension-0 chunk (the slice FSDP2's ``fully_shard`` gives it)
and frees the rest. Peak memory is the rank's shard plus the largest single tensor, instead
of the whole model. Buffers are small and kept whole.

Used by :class:`~complexformer.training.Trainer` when ``TrainConfig.shard`` runs on several
ranks and the task builds its model from scratch (``Task.meta_init``); a task that loads
pre-trained weights into its model builds it on the CPU as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._device import _device_constructors
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

__all__ = ["MetaBuild", "build_on_meta", "load_buffers", "local_tensors", "rank_chunk"]

aten = torch.ops.aten
#: Operations that draw from the random generator (by overload packet): replayed even when
#: their result is overwritten unread, to advance the generator as the CPU build does.
_RANDOM = {
    aten.normal_,
    aten.uniform_,
    aten.bernoulli_,
    aten.exponential_,
    aten.random_,
    aten.cauchy_,
    aten.log_normal_,
    aten.geometric_,
    aten.randn,
    aten.rand,
    aten.randint,
    aten.randperm,
    aten.normal,
    aten.bernoulli,
    aten.multinomial,
    aten.randn_like,
    aten.rand_like,
    aten.randint_like,
}
#: In-place operations that overwrite every element of their first argument without reading
#: it when their other arguments are numbers (``fill_`` with a tensor value reads it).
_OVERWRITE = _RANDOM & {
    aten.normal_,
    aten.uniform_,
    aten.bernoulli_,
    aten.exponential_,
    aten.random_,
    aten.cauchy_,
    aten.log_normal_,
    aten.geometric_,
} | {aten.fill_, aten.zero_}


#: Factories that take a ``device`` (as ``torch.device(...)`` as a context manager sees them).
_FACTORIES = _device_constructors()
#: Factories that copy values given as data.
_FROM_DATA = {torch.tensor, torch.as_tensor, torch.asarray}


def _key(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


def _is_meta(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == "meta"


class _OnMeta(TorchFunctionMode):
    """Tensor factories without a device make ``meta`` tensors (as ``torch.device("meta")``
    does); a tensor made from data (``torch.tensor([...])``) is made on the CPU and copied to
    ``meta``, so that the record holds its values (as the input of that copy)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _FROM_DATA and kwargs.get("device") is None:
            return func(*args, **kwargs).to("meta")
        if func in _FACTORIES and kwargs.get("device") is None:
            kwargs["device"] = "meta"
        return func(*args, **kwargs)


class _Recorder(TorchDispatchMode):
    """Records ``(func, args, kwargs, out)`` of every operation run under it."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[Any, tuple, dict, Any]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.log.append((func, args, kwargs, out))
        return out


@dataclass
class MetaBuild:
    """A model built on the ``meta`` device and the record of its construction.

    Attributes:
        model: the model; its parameters and buffers are on ``meta``.
        log: the operations its constructor ran, in order.
    """

    model: nn.Module
    log: list[tuple[Any, tuple, dict, Any]] = field(repr=False)
    #: What the last :meth:`materialize` measured: the most bytes of full tensors alive at
    #: once (``peak_bytes``) and the number of operations replayed (``ops``).
    last_replay: dict[str, int] = field(default_factory=dict, repr=False)
    #: The parameters and buffers as built, by name (the model may be sharded since).
    params: dict[str, torch.Tensor] = field(default_factory=dict, repr=False)
    buffers: dict[str, torch.Tensor] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.params:
            self.params = dict(self.model.named_parameters(remove_duplicate=False))
            self.buffers = {n: b for n, b in self.model.named_buffers() if _is_meta(b)}

    def materialize(
        self, rank: int, world_size: int, into: dict[str, torch.Tensor] | None = None
    ) -> tuple[dict, dict]:
        """Replay the construction on the CPU.

        Args:
            rank: this rank.
            world_size: the number of ranks the parameters are split over.
            into: where each parameter's chunk goes, by name (the local tensors of the
                sharded model, :func:`local_tensors`); None: new CPU tensors.

        Returns:
            ``(shards, buffers)``: each parameter's dimension-0 chunk for ``rank``
            (:func:`rank_chunk`) by name (``into`` when given), and each buffer whole, by
            name.

        Raises:
            ValueError: a parameter or buffer that no operation of the constructor wrote,
                or a destination in ``into`` whose shape is not the chunk's.
        """
        replay = _Replay(self.params, self.buffers, self.log, rank, world_size, into)
        out = replay.run()
        self.last_replay = {"peak_bytes": replay.peak_bytes, "ops": len(self.log)}
        return out

    def fill_sharded(
        self,
        rank: int,
        world_size: int,
        device: torch.device,
        twin: nn.Module | None = None,
    ) -> int:
        """Materialise the model, already sharded on ``meta``, on ``device``
        (``to_empty``) and replay its construction into this rank's local tensors.

        Args:
            rank: this rank.
            world_size: the number of ranks.
            device: this rank's device.
            twin: an unsharded copy of the model whose buffers also get their values (the
                trainer's :class:`~complexformer.training.shard.PlainTwin`).

        Returns:
            The number of parameter values this rank initialised.
        """
        self.model.to_empty(device=device)
        local = local_tensors(self.model)
        _, buffers = self.materialize(rank, world_size, into=local)
        load_buffers(self.model, buffers)
        if twin is not None:
            load_buffers(twin, buffers)
        return sum(t.numel() for t in local.values())


def build_on_meta(build: Callable[[], nn.Module]) -> MetaBuild:
    """Run ``build`` (a model constructor) on the ``meta`` device, recording its operations.

    The random generator is not consumed (meta tensors hold no values):
    :meth:`MetaBuild.materialize` consumes it as ``build()`` on the CPU would, so seed
    before it, as before a CPU build.
    """
    recorder = _Recorder()
    with _OnMeta(), recorder:
        model = build()
    return MetaBuild(model, recorder.log)


def rank_chunk(full: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """The part of ``full`` that FSDP2's ``fully_shard`` gives ``rank``: chunk ``rank`` of
    ``torch.chunk(full, world_size, dim=0)`` (empty past the last chunk), as its own tensor."""
    return _chunk(full, rank, world_size).clone()


def _chunk(full: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    if full.dim() == 0:
        return full
    chunks = torch.chunk(full, world_size, dim=0)
    return chunks[rank] if rank < len(chunks) else full[:0]


def local_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """Each parameter's local tensor by name (``to_local()`` of a ``DTensor``), tied names
    included: the destinations :meth:`MetaBuild.materialize` fills in a sharded model."""
    return {
        name: p.to_local() if hasattr(p, "to_local") else p
        for name, p in model.named_parameters(remove_duplicate=False)
    }


def load_buffers(model: nn.Module, buffers: dict[str, torch.Tensor]) -> None:
    """Give ``model``'s buffers the replayed values (by name): copied into a materialised
    buffer, or in place of one still on ``meta``."""
    with torch.no_grad():
        for name, b in list(model.named_buffers()):
            if name not in buffers:
                continue
            if b.device.type == "meta":
                parent, _, leaf = name.rpartition(".")
                owner = model.get_submodule(parent) if parent else model
                owner._buffers[leaf] = buffers[name].clone()
            else:
                b.copy_(buffers[name])


class _Replay:
    """One replay of a construction record (see :meth:`MetaBuild.materialize`)."""

    def __init__(
        self,
        params: dict[str, torch.Tensor],
        buffers: dict[str, torch.Tensor],
        log: list,
        rank: int,
        world_size: int,
        into: dict[str, torch.Tensor] | None,
    ) -> None:
        self.log = log
        self.rank, self.world_size = rank, world_size
        self.storages: dict[int, torch.UntypedStorage] = {}
        self.wanted: dict[int, list[tuple[str, torch.Tensor, bool]]] = {}
        for name, p in params.items():
            self.wanted.setdefault(_key(p), []).append((name, p, True))
        for name, b in buffers.items():
            self.wanted.setdefault(_key(b), []).append((name, b, False))
        # every shard allocated before the replay: the full tensors then come and go above
        # them in the heap (allocated among them, the holes they leave are not reused)
        self.shards: dict[str, torch.Tensor] = {}
        for name, p in params.items():
            shape = tuple(_chunk(p, rank, world_size).shape)
            dest = into.get(name) if into is not None else None
            if dest is None:
                dest = torch.empty(shape, dtype=p.dtype)
            elif tuple(dest.shape) != shape:
                raise ValueError(
                    f"meta init: {name}'s chunk for rank {rank} of {world_size} is {shape}, "
                    f"its destination {tuple(dest.shape)}"
                )
            self.shards[name] = dest
        self.buffers: dict[str, torch.Tensor] = {}
        self.live_bytes = self.peak_bytes = 0
        self.last_use: dict[int, int] = {}
        self.birth: dict[int, int] = {}
        self._plan()

    # -- planning -------------------------------------------------------------------------
    def _plan(self) -> None:
        """The last operation touching each storage, and the first one whose result counts:
        the last full overwrite, if every operation before it on that storage only wrote it."""
        clean: dict[int, bool] = {}
        for i, (func, args, kwargs, out) in enumerate(self.log):
            ins = [_key(t) for t in tree_flatten((args, kwargs))[0] if _is_meta(t)]
            outs = [_key(t) for t in tree_flatten(out)[0] if _is_meta(t)]
            for k in ins + outs:
                self.last_use[k] = i
            inplace = bool(ins) and bool(outs) and outs[0] == ins[0] and len(outs) == 1
            if inplace and func.overloadpacket in _OVERWRITE and len(ins) == 1 and _covers(args[0]):
                k = ins[0]
                if clean.get(k, True):
                    self.birth[k] = i
                continue
            if inplace and len(ins) == 1:
                continue  # writes its storage from numbers only: an earlier draw still counts
            for k in ins:  # read: nothing before this point may be skipped
                clean[k] = False
                self.birth.pop(k, None)

    # -- replay ---------------------------------------------------------------------------
    def run(self) -> tuple[dict, dict]:
        for i, (func, args, kwargs, out) in enumerate(self.log):
            outs = [_key(t) for t in tree_flatten(out)[0] if _is_meta(t)]
            if outs and all(i < self.birth.get(k, -1) for k in outs):
                # overwritten unread: a draw is run only to advance the generator
                if func.overloadpacket in _RANDOM:
                    func(*tree_map(self._scratch, args), **tree_map(self._scratch, kwargs))
            else:
                result = func(*tree_map(self._real, args), **tree_map(self._real, kwargs))
                for m, r in zip(tree_flatten(out)[0], tree_flatten(result)[0], strict=True):
                    if _is_meta(m) and _key(m) not in self.storages:
                        self._hold(_key(m), r.untyped_storage())
            for k in {_key(t) for t in tree_flatten((args, kwargs, out))[0] if _is_meta(t)}:
                if self.last_use.get(k) == i:
                    self._retire(k)
        missing = [n for k, ws in self.wanted.items() for n, _, _ in ws if k not in self.last_use]
        if missing:
            raise ValueError(f"meta init: no operation of the constructor wrote {missing}")
        return self.shards, self.buffers

    def _real(self, x: Any) -> Any:
        if isinstance(x, torch.device) and x.type == "meta":
            return torch.device("cpu")
        if not _is_meta(x):
            return x
        k = _key(x)
        if k not in self.storages:
            self._hold(k, torch.UntypedStorage(x.untyped_storage().nbytes()))
        return _view(self.storages[k], x)

    def _hold(self, k: int, storage: torch.UntypedStorage) -> None:
        self.storages[k] = storage
        self.live_bytes += storage.nbytes()
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)

    def _scratch(self, x: Any) -> Any:
        if isinstance(x, torch.device) and x.type == "meta":
            return torch.device("cpu")
        if not _is_meta(x):
            return x
        scratch = torch.UntypedStorage(x.untyped_storage().nbytes())
        self.peak_bytes = max(self.peak_bytes, self.live_bytes + scratch.nbytes())
        return _view(scratch, x)

    def _retire(self, k: int) -> None:
        storage = self.storages.pop(k, None)
        if storage is not None:
            self.live_bytes -= storage.nbytes()
        for name, meta, is_param in self.wanted.get(k, []):
            if storage is None:
                continue
            full = _view(storage, meta)
            if is_param:
                with torch.no_grad():
                    self.shards[name].copy_(_chunk(full, self.rank, self.world_size))
            else:
                self.buffers[name] = full.clone()


def _covers(t: torch.Tensor) -> bool:
    """Whether ``t`` is its whole storage, contiguous."""
    n = t.untyped_storage().nbytes()
    return t.storage_offset() == 0 and t.is_contiguous() and t.numel() * t.element_size() == n


def _view(storage: torch.UntypedStorage, like: torch.Tensor) -> torch.Tensor:
    """``like``'s view (dtype, offset, size, stride) of ``storage``."""
    t = torch.empty(0, dtype=like.dtype)
    return t.set_(storage, like.storage_offset(), like.size(), like.stride())
