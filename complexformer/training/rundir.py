"""The run directory: what a run writes, refusing to clobber a run or a folder that is not
one, never following a link inside it, its lock.

A folder is a run when it holds the run marker :data:`RUN_MARKER` (written by every run before
anything else) or a ``train_config.json`` (a run of an earlier version). A run may start in a
missing folder, an empty one, one holding only a ``.lock`` (a start that failed early) or a run;
any other folder is refused before anything in it is touched (:func:`check_run_folder`).
Inside a run folder nothing is read, written or removed through a symbolic link
(:mod:`complexformer.storage.safe_paths`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from ..storage import (
    OLD_PREFIX,
    TMP_PREFIX,
    atomic_write_text,
    check_tree,
    is_regular_file,
    open_fd,
    refuse_link,
    remove_entry,
)
from .checkpoint import CHECKPOINTS_DIR, list_checkpoints
from .metrics import METRICS_FILE

__all__ = [
    "LOCK_FILE",
    "PROMPT_FILE",
    "RUN_ARTIFACTS",
    "RUN_MARKER",
    "NotARunFolderError",
    "RunExistsError",
    "RunLockedError",
    "START_EVAL_FILE",
    "check_out_dir",
    "check_run_folder",
    "check_run_links",
    "clear_run",
    "is_run_folder",
    "mark_run",
    "run_lock",
]

#: The run's default sample prompt: the start of a validation document of its corpus.
PROMPT_FILE = "prompt.txt"

#: The validation result before the first update (``TrainTask.evaluate_before_training``).
START_EVAL_FILE = "start_eval.json"

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
    START_EVAL_FILE,
)


#: The lock file of a run directory (held with ``flock`` by the one process writing it).
LOCK_FILE = ".lock"

#: The file that marks a folder as a run (written when a run starts, before anything else).
RUN_MARKER = ".complexformer-run"

#: What marked a run before :data:`RUN_MARKER` (every earlier run wrote it at its start).
_LEGACY_MARKER = "train_config.json"


class RunExistsError(FileExistsError):
    """``out_dir`` already holds a run and neither ``resume`` nor ``overwrite`` was given.

    The message names the Python arguments; ``cli_message`` says the same with the
    command line's flags (what ``complexformer`` prints).
    """

    def __init__(self, message: str, cli_message: str) -> None:
        super().__init__(message)
        self.cli_message = cli_message


class RunLockedError(BlockingIOError):
    """Another process is writing the run directory (it holds the directory's lock)."""


class NotARunFolderError(FileExistsError):
    """``out_dir`` is a non-empty folder that is not a run (no :data:`RUN_MARKER`).

    The message names the Python argument; ``cli_message`` names ``--out``.
    """

    def __init__(self, message: str, cli_message: str) -> None:
        super().__init__(message)
        self.cli_message = cli_message


def is_run_folder(out: str | os.PathLike) -> bool:
    """Whether ``out`` holds the run marker (or an earlier version's ``train_config.json``)
    as a regular file."""
    out = Path(out)
    return is_regular_file(out / RUN_MARKER) or is_regular_file(out / _LEGACY_MARKER)


def check_run_folder(out: str | os.PathLike) -> None:
    """Refuse an ``out_dir`` that is neither missing, empty, a failed start (only a
    ``.lock``) nor a run; read-only, so a refused folder is left exactly as it was.

    Raises:
        NotADirectoryError: ``out`` is a file.
        NotARunFolderError: ``out`` holds other things and no run marker (both named).
    """
    out = Path(out)
    if not out.exists():
        return
    if not out.is_dir():
        raise NotADirectoryError(f"out_dir {out} exists and is not a directory")
    if is_run_folder(out):
        return
    names = sorted(p.name for p in out.iterdir() if p.name != LOCK_FILE)
    if not names:
        return
    shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
    held = (
        f"{out} is not empty ({shown}) and is not a complexformer run folder (it has no "
        f"{RUN_MARKER} or {_LEGACY_MARKER}); nothing in it was changed."
    )
    raise NotARunFolderError(
        f"{held} Choose another out_dir (a new or empty folder); overwrite=True deletes only runs",
        f"{held} Choose another --out (a new or empty folder); --overwrite deletes only runs",
    )


def mark_run(out: str | os.PathLike) -> None:
    """Write :data:`RUN_MARKER` into ``out`` if it is missing (refusing a link there)."""
    path = Path(out) / RUN_MARKER
    refuse_link(path)
    if not is_regular_file(path):
        atomic_write_text(path, json.dumps({"kind": "complexformer-run", "format": 1}) + "\n")


def check_run_links(out: str | os.PathLike) -> None:
    """Refuse a symbolic link among the run's own files and folders: the marker, the lock,
    :data:`RUN_ARTIFACTS` and everything inside them, and the ``.tmp-*`` / ``.old-*``
    folders of its atomic writes.

    Raises:
        SymlinkRefusedError: the first link found (it is named).
    """
    out = Path(out)
    for name in (RUN_MARKER, LOCK_FILE, *RUN_ARTIFACTS):
        check_tree(out / name)
    if out.is_dir():
        for p in out.iterdir():
            if p.name.startswith((TMP_PREFIX, OLD_PREFIX)):
                refuse_link(p)


@contextlib.contextmanager
def run_lock(out: str | os.PathLike, what: str = "run") -> Iterator[Path]:
    """Hold the exclusive lock of the run directory ``out`` for the block.

    The directory is created if missing. The lock is ``flock`` on ``out/.lock``: it is released
    when the block ends or the process dies, so a crashed run never leaves a stale lock. If the
    block fails and the directory was created here and holds nothing but the lock file (and the
    run marker), the directory is removed again, so a failed start leaves no empty folder behind.

    Args:
        out: the run directory.
        what: the writer's name for the error message (``train``, ``reproduce`` ...).

    Raises:
        RunLockedError: another process holds the lock (its pid and start time are named).
    """
    out = Path(out)
    # the folders this call creates, deepest first (removed again on failure if left empty)
    created: list[Path] = []
    for folder in (out, *out.parents):
        if folder.exists():
            break
        created.append(folder)
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_FILE
    fd = open_fd(path, os.O_RDWR | os.O_CREAT)  # never through a link or a hard-linked file
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 256, 0).decode("utf-8", "replace").strip() or "unknown"
        os.close(fd)
        raise RunLockedError(
            f"{out} is being written by another process ({holder}); wait for it to finish "
            f"or choose another output directory for this {what}"
        ) from None
    failed = False
    try:
        os.ftruncate(fd, 0)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        os.pwrite(
            fd, f"pid {os.getpid()} on {socket.gethostname()}, {what} since {stamp}\n".encode(), 0
        )
        yield out
    except BaseException:
        failed = True
        raise
    finally:
        if failed and created:
            _remove_if_only_lock(out, created[1:])
        os.close(fd)  # releases the flock


def _remove_if_only_lock(out: Path, parents: list[Path]) -> None:
    """Remove ``out`` if it holds nothing but the lock and the marker, then each of
    ``parents`` (folders the lock created above it, deepest first) while they are empty."""
    with contextlib.suppress(OSError):
        if {p.name for p in out.iterdir()} <= {LOCK_FILE, RUN_MARKER}:
            (out / RUN_MARKER).unlink(missing_ok=True)
            (out / LOCK_FILE).unlink(missing_ok=True)
            out.rmdir()
            for parent in parents:
                parent.rmdir()  # OSError (not empty) ends it


def check_out_dir(out: Path, resume: bool, overwrite: bool) -> None:
    """Refuse to start over an existing run, in a folder that is not a run, or in a run
    with a symbolic link among its files (read-only; runs on every rank).

    Raises:
        RunExistsError: ``out`` holds a run and neither ``resume`` nor ``overwrite`` is set.
        NotARunFolderError: ``out`` is a non-empty folder that is not a run.
        SymlinkRefusedError: a link among the run's files (it is named).
    """
    if resume and overwrite:
        raise ValueError("resume=True and overwrite=True contradict each other; choose one")
    check_run_folder(out)
    check_run_links(out)
    has_ckpt = bool(list_checkpoints(out / CHECKPOINTS_DIR))
    has_model = (out / "model").exists()
    if overwrite or not (has_ckpt or has_model):
        return
    if not resume:
        what = "checkpoints" if has_ckpt else "a final model"
        held = f"{out} already holds a training run ({what});"
        raise RunExistsError(
            f"{held} pass resume=True to continue it or overwrite=True to delete it and start over",
            f"{held} add --resume to continue it or --overwrite to delete it and start over",
        )
    if not has_ckpt:
        held = f"cannot resume {out}: it holds a final model but no checkpoint;"
        raise RunExistsError(
            f"{held} pass overwrite=True to start over", f"{held} use --overwrite to start over"
        )


def clear_run(out: Path) -> None:
    """Delete the :data:`RUN_ARTIFACTS` of the run ``out`` (other files are left alone).

    Everything is checked first: a symbolic link among them or inside them stops the call
    before anything is deleted.

    Raises:
        NotARunFolderError: ``out`` is not a run (see :func:`check_run_folder`).
        SymlinkRefusedError: a link among the artifacts (it is named).
    """
    check_run_folder(out)
    check_run_links(out)
    for name in RUN_ARTIFACTS:
        remove_entry(out / name, out)
