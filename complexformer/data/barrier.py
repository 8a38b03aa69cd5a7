"""A file barrier: one process prepares the data, the others wait on a file, not a collective.

Under ``torchrun`` the first rank loads the corpus, trains or loads the tokenizer and tokenizes
while the other ranks wait. Waiting inside a collective (``all_gather_object``) would run into
the process group's timeout (ten minutes under NCCL) on a large corpus; waiting on a file in
a folder every rank sees (the run folder) has its own deadline and polls.

The leader writes ``ready.json`` (what the others need to open the data: a tokenizer folder
and the token files) or, when preparation fails, ``failed.json`` with its error message; the
others poll for either and raise the leader's message when it failed. Each launch uses its own
sub-folder (a name the leader chose and sent to the others before any heavy work), so a marker
left by an earlier launch is never read.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from ..storage import atomic_write_text

__all__ = [
    "DEFAULT_DATA_TIMEOUT",
    "LeaderFailedError",
    "clear_stale",
    "publish_failure",
    "publish_ready",
    "wait_ready",
]

#: How long a waiting rank waits for the leader's preparation by default, in seconds (6 h).
DEFAULT_DATA_TIMEOUT = 6 * 3600.0
READY, FAILED = "ready.json", "failed.json"
PREFIX = "launch-"


class LeaderFailedError(RuntimeError):
    """The rank that prepared the data failed; the message carries its error."""


def clear_stale(folder: str | os.PathLike, keep: str) -> None:
    """Remove the launch sub-folders of earlier launches (``launch-*`` but ``keep``)."""
    root = Path(folder)
    if not root.is_dir() or root.is_symlink():
        return
    for entry in root.iterdir():
        if entry.name.startswith(PREFIX) and entry.name != keep and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


def publish_ready(folder: str | os.PathLike, payload: dict[str, Any]) -> None:
    """Tell the waiting ranks the data is ready (``payload`` is JSON)."""
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path / READY, json.dumps(payload, indent=2) + "\n")


def publish_failure(folder: str | os.PathLike, message: str) -> None:
    """Tell the waiting ranks the preparation failed, with the leader's error message."""
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path / FAILED, json.dumps({"error": message}) + "\n")


def wait_ready(
    folder: str | os.PathLike, timeout: float = DEFAULT_DATA_TIMEOUT, poll: float = 0.2
) -> dict[str, Any]:
    """Wait until the leader publishes the data or its failure.

    Args:
        folder: the launch's barrier folder.
        timeout: seconds to wait at most.
        poll: seconds between looks.

    Returns:
        The leader's payload.

    Raises:
        LeaderFailedError: the leader failed (its message is included).
        TimeoutError: nothing was published within ``timeout`` seconds.
    """
    path = Path(folder)
    deadline = time.monotonic() + timeout
    while True:
        if (path / FAILED).is_file():
            error = json.loads((path / FAILED).read_text(encoding="utf-8")).get("error", "")
            raise LeaderFailedError(f"rank 0 failed to prepare the data: {error}")
        if (path / READY).is_file():
            return json.loads((path / READY).read_text(encoding="utf-8"))
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"rank 0 did not prepare the data within {timeout:g} s (nothing in {path}); "
                f"raise the wait with --set data_timeout=SECONDS, or prepare the corpus first "
                f"with 'complexformer prepare' and train on prepared:DIR"
            )
        time.sleep(poll)
