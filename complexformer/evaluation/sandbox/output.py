"""A sandboxed program's standard output and error: capped pipes read while it runs.

Files on the host would let a program take disk (``fallocate`` with ``FALLOC_FL_KEEP_SIZE``
reserves blocks beyond ``RLIMIT_FSIZE``); a pipe has none to take, and ``fallocate`` on it
fails with ``ESPIPE``. :class:`OutputPipes` drains both pipes in a thread, so a program that
prints a lot never blocks, keeps the last :data:`OUTPUT_KEPT` bytes of each, and closes a
stream once ``cap`` bytes went through it.
"""

from __future__ import annotations

import os
import select
import threading
import time

__all__ = ["OUTPUT_KEPT", "OutputPipes"]

#: bytes of each of stdout and stderr kept while a program runs (the tails reported)
OUTPUT_KEPT = 1 << 18
#: a read shorter than this is followed by a 1 ms pause, so that a program writing a byte at
#: a time costs the evaluator at most ~1,000 reads a second per stream, not one per write
_SMALL = 4096


class OutputPipes(threading.Thread):
    """Reads a program's stdout and stderr pipes while it runs, keeping the last
    :data:`OUTPUT_KEPT` bytes of each; a stream that passed ``cap`` bytes is closed (its
    writer gets ``EPIPE``, as ``RLIMIT_FSIZE`` would give ``EFBIG`` on a file). Nothing of a
    program's output reaches a disk, and ``fallocate`` on a pipe fails."""

    def __init__(self, fds: dict[str, int], cap: int) -> None:
        super().__init__(name="sandbox-output", daemon=True)
        self.fds, self.cap = dict(fds), cap
        self.tails = {name: bytearray() for name in fds}
        self.sizes = dict.fromkeys(fds, 0)
        self.stop = threading.Event()

    def run(self) -> None:
        poll = select.poll()
        names = {fd: name for name, fd in self.fds.items()}
        for fd in names:
            poll.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        try:
            while names and not self.stop.is_set():
                largest = None
                for fd, _ in poll.poll(100):
                    name = names[fd]
                    try:
                        chunk = os.read(fd, 1 << 16)
                    except OSError:
                        chunk = b""
                    self.sizes[name] += len(chunk)
                    largest = max(largest or 0, len(chunk))
                    tail = self.tails[name]
                    tail += chunk
                    if len(tail) > OUTPUT_KEPT:
                        del tail[:-OUTPUT_KEPT]
                    if not chunk or self.sizes[name] >= self.cap:
                        poll.unregister(fd)
                        del names[fd]
                        os.close(fd)
                if largest and largest < _SMALL:  # many tiny writes: read them in batches
                    time.sleep(0.001)
        finally:
            for fd in names:
                os.close(fd)

    def text(self, name: str, limit: int) -> str:
        """The last ``limit`` characters of stream ``name`` (after the thread ended)."""
        data = bytes(self.tails[name][-4 * limit :])
        return data.decode("utf-8", errors="replace")[-limit:]

    def close(self, wait: float = 2.0) -> None:
        """Wait until every writer is gone (at most ``wait`` seconds), then stop."""
        if self.is_alive():
            self.join(wait)
            self.stop.set()
            self.join()
