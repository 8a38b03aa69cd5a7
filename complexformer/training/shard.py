"""Sharded data parallelism with PyTorch's FSDP2 (``torch.distributed.fsdp.fully_shard``).

With ``TrainConfig.shard`` under torchrun, :class:`~complexformer.training.Trainer` shards the
model over a one-dimensional ``DeviceMesh`` of all ranks instead of replicating it with DDP:
:func:`shard_model` wraps each transformer block (:func:`transformer_blocks`) with
``fully_shard`` and then the root, so every parameter, frozen ones included, is a ``DTensor``
split along its first dimension, and each rank holds ``1 / world_size`` of the parameters,
their gradients and the AdamW state. Blocks all-gather their parameters for their forward and
backward passes and reduce-scatter the gradients (averaged over ranks, as DDP does).

Checkpoints stay in the single-file safetensors format of
:mod:`~complexformer.training.checkpoint`: the model and the optimizer state are gathered to
rank 0 as full tensors (``torch.distributed.checkpoint.state_dict.get_model_state_dict`` and
``get_optimizer_state_dict`` with ``full_state_dict=True, cpu_offload=True``) and written as
an unsharded run writes them, so a checkpoint does not depend on the world size nor on
whether the run was sharded; :func:`shard_optimizer_state` splits a full optimizer state over
the ranks again when a sharded run resumes. Rank 0 keeps a :class:`PlainTwin` of the model, a
copy whose parameters live on the ``meta`` device until a save fills them with the gathered
tensors, so that the task's ``checkpoint_tensors`` and ``save_final`` see an ordinary module.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
)
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard, register_fsdp_forward_method
from torch.distributed.tensor import DTensor, distribute_tensor

__all__ = [
    "PlainTwin",
    "compile_blocks",
    "full_model_state",
    "full_optimizer_state",
    "local_tensor_bytes",
    "shard_model",
    "shard_optimizer_state",
    "to_full_tensor",
    "transformer_blocks",
]

#: Gather full tensors, to CPU, on rank 0 only (the other ranks receive empty dicts).
FULL_ON_RANK0 = StateDictOptions(full_state_dict=True, cpu_offload=True)


def transformer_blocks(model: nn.Module) -> list[nn.Module]:
    """The repeated layers of ``model``: the children of its outermost ``nn.ModuleList``\\ s
    whose members hold parameters (``blocks`` of the ComplexFormer LM, ``model.layers`` of a
    Llama, ``encoder.layer`` of a BERT).

    A ``ModuleList`` inside one already found is not searched, so a block's own lists (its
    heads, its experts) stay in the block's shard unit.
    """
    found: list[nn.Module] = []

    def visit(module: nn.Module) -> None:
        for child in module.children():
            if isinstance(child, nn.ModuleList) and any(
                any(True for _ in m.parameters()) for m in child
            ):
                found.extend(m for m in child if any(True for _ in m.parameters()))
            else:
                visit(child)

    visit(model)
    return found


def shard_model(
    model: nn.Module,
    blocks: list[nn.Module],
    device: torch.device,
    world_size: int,
    bf16: bool = False,
    forward_methods: tuple[str, ...] = (),
    fp32_parameters: tuple[str, ...] = (),
) -> DeviceMesh:
    """Shard ``model`` in place: ``fully_shard`` on each of ``blocks``, then on the root.

    Args:
        model: the model, on the CPU (each block moves to ``device`` as it is sharded).
        blocks: the shard units below the root (:func:`transformer_blocks`).
        device: this rank's device (``cpu`` with gloo, ``cuda:i`` with NCCL).
        world_size: the number of ranks (the mesh is all of them).
        bf16: FSDP2's ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``:
            parameters are all-gathered and computed in bfloat16, gradients reduced in
            float32 and the sharded parameters and optimizer state stay in their own dtype.
        forward_methods: names of methods that the model calls on a block instead of its
            ``forward`` (CmplxBERT's ``planar``); FSDP2 gathers the block's parameters for
            them too (``register_fsdp_forward_method``).
        fp32_parameters: with ``bf16``, the modules inside a block that directly own a
            parameter of one of these names (the attention layers holding δ and b) are
            sharded first as units of their own that gather in float32, so that the phases
            are computed in float32 as under plain autocast (the matrix products still run
            in bfloat16 under the trainer's autocast).

    Returns:
        The mesh.
    """
    mesh = init_device_mesh(device.type, (world_size,))
    policy = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if bf16
        else MixedPrecisionPolicy()
    )
    fp32 = MixedPrecisionPolicy(param_dtype=torch.float32, reduce_dtype=torch.float32)
    for block in blocks:
        if bf16 and fp32_parameters:
            for sub in block.modules():
                own = (name for name, _ in sub.named_parameters(recurse=False))
                if sub is not block and any(name in fp32_parameters for name in own):
                    fully_shard(sub, mesh=mesh, mp_policy=fp32)
        fully_shard(block, mesh=mesh, mp_policy=policy)
        for name in forward_methods:
            if callable(getattr(block, name, None)):
                register_fsdp_forward_method(block, name)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return mesh


def compile_blocks(blocks: list[nn.Module]) -> int:
    """Compile each sharded block's ``forward`` with ``torch.compile``, in place.

    Called after :func:`shard_model`: FSDP2 all-gathers a block's parameters in hooks that run
    around ``forward`` (and around the block's backward), so with the method compiled on its
    own those collectives stay eager and the compiled code sees the block's gathered, plain
    parameters. The module is not wrapped, so parameter names (and checkpoints) do not change;
    a forward that activation checkpointing replaced is compiled with the recomputation.

    Args:
        blocks: the shard units (:func:`transformer_blocks`).

    Returns:
        The number of blocks compiled.
    """
    for block in blocks:
        block.forward = torch.compile(block.forward)
    return len(blocks)


def to_full_tensor(t: Any) -> Any:
    """``t.full_tensor()`` for a ``DTensor`` (a collective: every rank calls it), else ``t``."""
    return t.full_tensor() if isinstance(t, DTensor) else t


def local_tensor_bytes(t: torch.Tensor | None) -> int:
    """Bytes this rank stores for ``t``: its local shard for a ``DTensor``, 0 for None."""
    if t is None:
        return 0
    if isinstance(t, DTensor):
        t = t.to_local()
    return t.numel() * t.element_size()


def full_model_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The sharded model's full state dict on rank 0 (CPU); ``{}`` on the other ranks.

    Every rank must call it (it all-gathers each parameter). A tensor that is a view into a
    larger gathered buffer is copied into its own storage (safetensors refuses to save a
    tensor that does not cover its storage).
    """
    state = get_model_state_dict(model, options=FULL_ON_RANK0)
    return {k: _own_storage(v) for k, v in state.items()}


def _own_storage(t: torch.Tensor) -> torch.Tensor:
    if t.untyped_storage().nbytes() != t.numel() * t.element_size():
        return t.clone()
    return t


def full_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer's full state on rank 0, in ``optimizer.state_dict()``'s layout (state
    and param groups by parameter index, as an unsharded run saves it); ``{}`` elsewhere.

    ``get_optimizer_state_dict`` names parameters by their fully qualified names; its
    ``param_groups`` list them in the optimizer's order, which is the index an unsharded
    optimizer gives them. Every rank must call it.
    """
    osd = get_optimizer_state_dict(model, optimizer, options=FULL_ON_RANK0)
    if not osd:
        return {}
    index: dict[str, int] = {}
    groups = []
    for group in osd["param_groups"]:
        ids = []
        for name in group["params"]:
            index.setdefault(name, len(index))
            ids.append(index[name])
        groups.append({**group, "params": ids})
    state = {index[name]: dict(st) for name, st in osd["state"].items()}
    return {"state": state, "param_groups": groups}


def _optimizer_params(optimizer: torch.optim.Optimizer) -> Iterator[torch.Tensor]:
    for group in optimizer.param_groups:
        yield from group["params"]


def shard_optimizer_state(
    optimizer: torch.optim.Optimizer, state_dict: dict[str, Any]
) -> dict[str, Any]:
    """A full ``optimizer.state_dict()`` (every rank holds it, read from a checkpoint) with
    each state tensor shaped like its parameter split as that ``DTensor`` parameter is.

    Every rank must call it (``distribute_tensor`` scatters from rank 0).
    """
    params = list(_optimizer_params(optimizer))
    state: dict[int, dict[str, Any]] = {}
    for idx, st in state_dict["state"].items():
        p = params[int(idx)]
        out = {}
        for key, value in st.items():
            if isinstance(p, DTensor) and isinstance(value, torch.Tensor):
                if tuple(value.shape) == tuple(p.shape):
                    value = distribute_tensor(
                        value.to(p.device_mesh.device_type), p.device_mesh, p.placements
                    )
            out[key] = value
        state[int(idx)] = out
    return {"state": state, "param_groups": state_dict["param_groups"]}


class PlainTwin:
    """An unsharded copy of a model for rank 0's saves, without the memory of one.

    Made before the model is sharded: a deep copy whose parameters are on the ``meta``
    device (buffers are copied as they are; non-persistent ones, such as cached rotary
    tables, are in no state dict). :meth:`fill` assigns gathered tensors to its parameters
    and ties again the parameters that the model shares (a tied embedding and head).

    Args:
        model: the model, not yet sharded.
    """

    def __init__(self, model: nn.Module) -> None:
        memo: dict[int, Any] = {}
        for p in model.parameters():
            memo[id(p)] = nn.Parameter(p.detach().to("meta"), requires_grad=p.requires_grad)
        self.module = copy.deepcopy(model, memo)
        by_id: dict[int, list[str]] = {}
        for name, p in model.named_parameters(remove_duplicate=False):
            by_id.setdefault(id(p), []).append(name)
        self.tied = [names for names in by_id.values() if len(names) > 1]

    def fill(self, state: dict[str, torch.Tensor]) -> nn.Module:
        """The copy with ``state`` (a full state dict) as its parameters and buffers."""
        module = self.module
        module.load_state_dict(state, strict=True, assign=True)
        for names in self.tied:
            shared = module.get_parameter(names[0])
            for name in names[1:]:
                parent, _, leaf = name.rpartition(".")
                setattr(module.get_submodule(parent) if parent else module, leaf, shared)
        return module
