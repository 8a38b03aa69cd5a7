"""The run directory: what a run writes, refusing to clobber a run, its lock."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from .checkpoint import CHECKPOINTS_DIR, list_checkpoints
from .metrics import METRICS_FILE

__all__ = [
    "LOCK_FILE",
    "PROMPT_FILE",
    "RUN_ARTIFACTS",
    "RunExistsError",
    "RunLockedError",
    "START_EVAL_FILE",
    "check_out_dir",
    "clear_run",
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


@contextlib.contextmanager
def run_lock(out: str | os.PathLike, what: str = "run") -> Iterator[Path]:
    """Hold the exclusive lock of the run directory ``out`` for the block.

    The directory is created if missing. The lock is ``flock`` on ``out/.lock``: it is released
    when the block ends or the process dies, so a crashed run never leaves a stale lock. If the
    block fails and the directory was created here and holds nothing but the lock file, the
    directory is removed again, so a failed start leaves no empty folder behind.

    Args:
        out: the run directory.
        what: the writer's name for the error message (``train``, ``reproduce`` ...).

    Raises:
        RunLockedError: another process holds the lock (its pid and start time are named).
    """
    out = Path(out)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
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
            _remove_if_only_lock(out)
        os.close(fd)  # releases the flock


def _remove_if_only_lock(out: Path) -> None:
    with contextlib.suppress(OSError):
        if {p.name for p in out.iterdir()} <= {LOCK_FILE}:
            (out / LOCK_FILE).unlink(missing_ok=True)
            out.rmdir()


def check_out_dir(out: Path, resume: bool, overwrite: bool) -> None:
    """Refuse to start over an existing run (read-only; runs on every rank)."""
    if resume and overwrite:
        raise ValueError("resume=True and overwrite=True contradict each other; choose one")
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"out_dir {out} exists and is not a directory")
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
    """Delete the :data:`RUN_ARTIFACTS` of ``out`` (other files are left alone)."""
    for name in RUN_ARTIFACTS:
        p = out / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
