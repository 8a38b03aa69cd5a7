"""torchrun / DDP helpers: detect the process group from the environment, reduce, barrier.

Under ``torchrun --nproc_per_node N`` (or any launcher that sets ``WORLD_SIZE``, ``RANK``,
``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``) :func:`setup_distributed` initialises
``torch.distributed`` with ``gloo`` on CPU and ``nccl`` on CUDA (one GPU per local rank).
Without those variables everything degrades to a single process: the collectives below are
no-ops.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as tdist

__all__ = [
    "DistInfo",
    "all_gather_objects",
    "all_reduce_sum",
    "barrier",
    "cleanup_distributed",
    "env_world",
    "free_local_port",
    "local_reductions",
    "resolve_device",
    "run_on_rank0",
    "setup_distributed",
]


@dataclass
class DistInfo:
    """This process's place in the (possibly trivial) process group.

    Attributes:
        rank: global rank.
        world_size: number of processes.
        local_rank: rank on this machine (selects the GPU).
        device: the torch device this rank trains on.
        initialized_here: True if :func:`setup_distributed` created the process group (and
            :func:`cleanup_distributed` should destroy it).
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    initialized_here: bool = False

    @property
    def is_main(self) -> bool:
        """True on rank 0, which logs and writes files."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """True when there is more than one process."""
        return self.world_size > 1


def env_world() -> tuple[int, int, int]:
    """``(rank, world_size, local_rank)`` from the torchrun environment (``(0, 1, 0)`` if unset)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", str(rank)))
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"bad torchrun environment: RANK={rank}, WORLD_SIZE={world}")
    return rank, world, local


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """The device for ``"auto"`` (CUDA if available, else CPU), ``"cpu"`` or ``"cuda"``.

    Raises:
        RuntimeError: ``"cuda"`` was requested but CUDA is not available.
    """
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("device='cuda' was requested but CUDA is not available")
        return torch.device("cuda", local_rank % max(1, torch.cuda.device_count()))
    if name == "cpu":
        return torch.device("cpu")
    raise ValueError(f"unknown device {name!r}; expected 'auto', 'cpu' or 'cuda'")


def setup_distributed(device: str = "auto", timeout_s: float | None = None) -> DistInfo:
    """Join the torchrun process group if the environment describes one.

    An already initialised default group (created by the caller) is reused as is.

    Args:
        device: ``"auto"``, ``"cpu"`` or ``"cuda"``.
        timeout_s: how long a collective waits for the other ranks before it fails (the
            process group's ``timeout``); None keeps PyTorch's default.

    Returns:
        The :class:`DistInfo`; single-process when ``WORLD_SIZE`` is unset or 1.
    """
    if tdist.is_available() and tdist.is_initialized():
        rank, world = tdist.get_rank(), tdist.get_world_size()
        local = int(os.environ.get("LOCAL_RANK", str(rank)))
        return DistInfo(rank, world, local, resolve_device(device, local), False)
    rank, world, local = env_world()
    dev = resolve_device(device, local)
    if world == 1:
        return DistInfo(0, 1, 0, dev, False)
    if not tdist.is_available():
        raise RuntimeError("WORLD_SIZE > 1 but torch.distributed is not available in this build")
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    backend = "nccl" if dev.type == "cuda" else "gloo"
    kw: dict[str, Any] = {} if timeout_s is None else {"timeout": timedelta(seconds=timeout_s)}
    store = _attempt_store(world, timeout_s)
    if store is not None:
        kw["store"] = store
    tdist.init_process_group(backend, rank=rank, world_size=world, **kw)
    return DistInfo(rank, world, local, dev, True)


def _attempt_store(world: int, timeout_s: float | None) -> Any:
    """Under a torchrun restart, the agent's key-value store with a prefix of this attempt.

    torchrun's agent keeps one store for every attempt of a job, and the process group's
    keys (each rank's gloo address) of an attempt stay in it: a restarted rank could read a
    dead rank's address and fail to connect. The keys of attempt ``n`` go under
    ``complexformer/attempt-n/``. None outside a restart (the usual ``env://`` start).
    """
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if restart == "0" or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    timeout = timedelta(seconds=timeout_s if timeout_s is not None else 1800)
    store = tdist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        world,
        is_master=False,
        timeout=timeout,
    )
    return tdist.PrefixStore(f"complexformer/attempt-{restart}/", store)


def free_local_port(rng: random.Random | None = None) -> int:
    """A free TCP port on the loopback for ``MASTER_PORT``, below the kernel's ephemeral range.

    A port from ``bind(("127.0.0.1", 0))`` lies inside the ephemeral range, and a rank that
    retries ``connect`` to it before rank 0 listens can be given that very port as its own
    source port: the socket connects to itself and the rank waits forever (a TCP self-connect).
    Ports below the range are never handed out as source ports.

    Args:
        rng: the random source (default: a fresh one).

    Returns:
        A port that was free a moment ago (another process may still take it).

    Raises:
        OSError: no port below the ephemeral range could be bound.
    """
    low = 32768
    with contextlib.suppress(OSError, ValueError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    first = max(1024, low - 20000)
    if low <= first:
        raise OSError(f"no ports below the ephemeral range (it starts at {low})")
    rng = rng or random.Random()
    for _ in range(200):
        port = rng.randrange(first, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise OSError(f"no free port found in {first}..{low - 1} after 200 tries")


def cleanup_distributed(info: DistInfo) -> None:
    """Destroy the process group if :func:`setup_distributed` created it."""
    if info.initialized_here and tdist.is_initialized():
        tdist.destroy_process_group()


_LOCAL = [False]


def _active() -> bool:
    if _LOCAL[0]:
        return False
    return tdist.is_available() and tdist.is_initialized() and tdist.get_world_size() > 1


@contextlib.contextmanager
def local_reductions() -> Iterator[None]:
    """Make :func:`all_reduce_sum`, :func:`all_gather_objects` and :func:`barrier` act as in a
    single process inside the block.

    A sharded run evaluates on every rank as if it were the only one (each rank scores every
    validation block, so that all ranks run the same forward passes, whose all-gathers FSDP
    needs); the task's own reductions must then not sum the identical results over ranks.
    """
    previous = _LOCAL[0]
    _LOCAL[0] = True
    try:
        yield
    finally:
        _LOCAL[0] = previous


def barrier() -> None:
    """Wait for every rank (no-op in a single process)."""
    if _active():
        tdist.barrier()


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum ``t`` over ranks in place and return it (unchanged in a single process)."""
    if _active():
        tdist.all_reduce(t, op=tdist.ReduceOp.SUM)
    return t


def all_gather_objects(obj: Any) -> list[Any]:
    """Every rank's ``obj`` as a list indexed by rank (``[obj]`` in a single process)."""
    if not _active():
        return [obj]
    out: list[Any] = [None] * tdist.get_world_size()
    tdist.all_gather_object(out, obj)
    return out


def run_on_rank0(fn: Callable[[], Any], dist: DistInfo) -> Any:
    """Run ``fn`` on rank 0 only and give its result (or its error) to every rank."""
    result: Any = None
    error: BaseException | None = None
    if dist.is_main:
        try:
            result = fn()
        except Exception as e:  # re-raised below on every rank
            error = e
    shared = all_gather_objects((result, None if error is None else repr(error)))[0]
    if error is not None:
        raise error
    if shared[1] is not None:
        raise RuntimeError(f"rank 0 failed: {shared[1]}")
    return shared[0]
