"""Finding and ending a sandboxed run's processes (used by :mod:`.runner`).

Every process of a run carries the marker variable ``COMPLEXFORMER_SANDBOX=<run id>`` in its
environment, so that the processes of a run without a PID namespace (the fallback without
bubblewrap) can be found and killed even after they left its process group
(:func:`find_sandbox_processes`, :func:`kill_marked`). :func:`wait_exit` waits for a process
without reaping it, so that its process-group id stays valid for :func:`kill_group`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

__all__ = [
    "MARKER_VAR",
    "find_sandbox_processes",
    "kill_group",
    "kill_marked",
    "user_task_count",
    "wait_exit",
]

MARKER_VAR = "COMPLEXFORMER_SANDBOX"


def user_task_count(uid: int) -> int:
    """Tasks (threads included, as RLIMIT_NPROC counts them) of the real user ``uid``."""
    total = 0
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                total += int(fields.get("Threads", "1"))
        except (OSError, KeyError, ValueError):
            continue
    return total


def find_sandbox_processes(sandbox_id: str) -> list[int]:
    """Live (non-zombie) processes that carry the marker of run ``sandbox_id`` in their
    environment (Linux ``/proc``; ``[]`` elsewhere or where it cannot be read)."""
    marker = f"{MARKER_VAR}={sandbox_id}".encode() + b"\0"
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if marker not in f.read() + b"\0":
                    continue
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def kill_group(pgid: int) -> None:
    for _ in range(2):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.002)


def kill_marked(sandbox_id: str, rounds: int = 3) -> None:
    for _ in range(rounds):
        pids = find_sandbox_processes(sandbox_id)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)


def wait_exit(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait until ``proc`` exits *without reaping it* (so its process group id stays
    valid for :func:`kill_group`); False on timeout."""
    if not hasattr(os, "waitid"):
        try:
            proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = time.monotonic() + timeout
    delay = 0.001
    flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
    while True:
        try:
            if os.waitid(os.P_PID, proc.pid, flags) is not None:
                return True
        except ChildProcessError:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.02)
