"""A rank that fails makes the others stop with its message.

Without help, the other ranks of a distributed run wait at their next collective until the
process group's timeout (``TrainConfig.dist_timeout``) and then fail with a timeout that does
not say what went wrong. :class:`PeerFailures` shares the first failure through the process
group's key-value store (the ``TCPStore`` of ``torchrun`` or of ``MASTER_ADDR``):

* the rank that raises writes ``"rank R failed: Type: message"`` under one key before it
  tears its connections down, and waits a moment (at most :data:`ACK_WAIT_S`) for the other
  ranks to read it;
* every rank watches that key from a daemon thread. A rank whose own collective fails
  because the failing rank went away raises :class:`PeerFailedError` with the failing rank's
  message. A rank that stays blocked (a collective of a backend that waits out its timeout,
  or a rank busy in a long computation) prints the message and exits with code
  :data:`EXIT_PEER_FAILED` after :data:`GRACE_S` seconds.

The key carries the restart count of ``torchrun`` (``TORCHELASTIC_RESTART_COUNT``), so the
failure of one attempt does not end the next one.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

import torch.distributed as tdist
from torch.distributed.distributed_c10d import _get_default_store

from ..data.barrier import LeaderFailedError
from .dist import DistInfo
from .preempt import RunStopped

__all__ = ["ACK_WAIT_S", "EXIT_PEER_FAILED", "GRACE_S", "PeerFailedError", "PeerFailures"]

#: Exit code of a rank ended by the watcher because another rank failed.
EXIT_PEER_FAILED = 1
#: Seconds the failing rank waits for the other ranks to have read its message.
ACK_WAIT_S = 5.0
#: Seconds a rank that saw another rank's failure leaves its main thread to stop by itself.
GRACE_S = 3.0
#: Seconds between two looks at the store.
POLL_S = 0.2


class PeerFailedError(RuntimeError):
    """Another rank of this run failed; the message is that rank's error."""


def _default_store() -> Any:
    return _get_default_store()


class PeerFailures:
    """Share the first failure of any rank with all ranks, for a ``with`` block.

    On leaving the block with an exception (other than :class:`RunStopped`), the failure is
    published, or, when another rank failed first, :class:`PeerFailedError` is raised with
    that rank's message in its place. An exception that itself reports another rank's failure
    (:class:`PeerFailedError`, or the :class:`~complexformer.data.barrier.LeaderFailedError` of
    a rank that waited for rank 0's data) is never published: were it first in the store, the
    rank that really failed would be told of its own failure as another rank's. A no-op on a
    single process.

    Args:
        dist: this process's place in the process group.
        grace_s: seconds between seeing another rank's failure and ending this process when
            its main thread has not stopped by then.
    """

    def __init__(self, dist: DistInfo, grace_s: float = GRACE_S) -> None:
        self.rank, self.world = dist.rank, dist.world_size
        self.active = dist.distributed and tdist.is_available() and tdist.is_initialized()
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        self.key = f"complexformer/failure/{restart}"
        self.ack_key = f"complexformer/failure-read/{restart}"
        self.grace_s = grace_s
        self.store: Any = _default_store() if self.active else None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------ the store
    def peer_message(self) -> str | None:
        """The published failure, or None (also when the store cannot be reached)."""
        if not self.active:
            return None
        try:
            if self.store.check([self.key]):
                return self.store.get(self.key).decode("utf-8", "replace")
        except Exception:  # the store's host went away: nothing can be read any more
            return None
        return None

    def publish(self, error: BaseException) -> None:
        """Publish this rank's ``error`` (unless another failure came first) and wait up to
        :data:`ACK_WAIT_S` for every other rank to read it."""
        if not self.active:
            return
        text = f"rank {self.rank} failed: {type(error).__name__}: {error}"[:4000]
        try:
            self.store.compare_set(self.key, "", text)
            deadline = time.monotonic() + ACK_WAIT_S
            while time.monotonic() < deadline:
                if self.store.add(self.ack_key, 0) >= self.world - 1:
                    break
                time.sleep(POLL_S / 2)
        except Exception:  # the store is gone: the other ranks fail on their own
            return

    def _acknowledge(self) -> None:
        try:
            self.store.add(self.ack_key, 1)
        except Exception:
            pass

    # ----------------------------------------------------------------------- the watcher
    def _watch(self) -> None:
        while not self._stop.wait(POLL_S):
            message = self.peer_message()
            if message is None or message.startswith(f"rank {self.rank} "):
                continue
            self._acknowledge()
            if self._stop.wait(self.grace_s):
                return  # the main thread is stopping on its own
            print(
                f"complexformer: {message}; rank {self.rank} stops too",
                file=sys.stderr,
                flush=True,
            )
            os._exit(EXIT_PEER_FAILED)

    def __enter__(self) -> PeerFailures:
        if self.active:
            self._thread = threading.Thread(target=self._watch, name="peer-failures", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if exc is None or isinstance(exc, (RunStopped, PeerFailedError)) or not self.active:
            return
        if isinstance(exc, LeaderFailedError):  # rank 0's own error, read from its file
            self._acknowledge()  # rank 0 need not wait for this rank to read it again
            return
        message = self.peer_message()
        if message is not None and not message.startswith(f"rank {self.rank} "):
            self._acknowledge()
            raise PeerFailedError(f"{message}; rank {self.rank} stops too") from exc
        self.publish(exc)
