"""``metrics.jsonl`` (one JSON object per logged step) and optional TensorBoard scalars."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..runtime import require
from ..storage import atomic_write_text, is_regular_file, open_file
from .plot import read_metrics

__all__ = ["METRICS_FILE", "MetricsLogger"]

METRICS_FILE = "metrics.jsonl"


class MetricsLogger:
    """Append metric rows to ``<run>/metrics.jsonl`` (flushed per row) and TensorBoard.

    Args:
        run_dir: the run directory.
        resume_step: None for a fresh run (the file is truncated); else the step of the
            checkpoint resumed from: rows of later steps (logged by the interrupted run after
            its last checkpoint) are dropped, so the file reads as one uninterrupted run.
        tensorboard: also write scalars to ``<run>/tensorboard`` (needs ``tensorboard``).

    The file is opened without following a link and only as a regular file with no other
    hard link (:func:`~complexformer.storage.open_file`).

    Raises:
        ImportError: ``tensorboard=True`` without the ``tensorboard`` package.
        SymlinkRefusedError: ``metrics.jsonl`` is a symbolic link (its target is untouched).
    """

    def __init__(
        self, run_dir: str | os.PathLike, resume_step: int | None = None, tensorboard: bool = False
    ) -> None:
        self.path = Path(run_dir) / METRICS_FILE
        if resume_step is None or not is_regular_file(self.path):
            open_file(self.path, "w").close()
        else:
            keep = [r for r in read_metrics(self.path) if r.get("step", 0) <= resume_step]
            atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in keep))
        self._file = open_file(self.path, "a")
        self._tb = None
        if tensorboard:
            self._tb = open_tensorboard(Path(run_dir) / "tensorboard")

    def write(self, row: dict[str, Any]) -> None:
        """Append one row (must contain ``step``)."""
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        if self._tb is not None:
            step = int(row["step"])
            for key, value in row.items():
                if key != "step" and isinstance(value, (int, float)):
                    group = "val" if key.startswith("val_") else "train"
                    self._tb.add_scalar(f"{group}/{key}", value, step)
            self._tb.flush()

    def close(self) -> None:
        """Close the file and the TensorBoard writer."""
        if not self._file.closed:
            self._file.close()
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def open_tensorboard(log_dir: Path) -> Any:
    """A ``torch.utils.tensorboard.SummaryWriter`` on ``log_dir``.

    Raises:
        ImportError: with the install command, if ``tensorboard`` is missing.
    """
    check_tensorboard()
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(log_dir=str(log_dir))


def check_tensorboard() -> None:
    """Raise a clear ImportError if TensorBoard logging is unavailable."""
    require("tensorboard", "tensorboard", "TensorBoard logging (tensorboard=True)")
    require("torch.utils.tensorboard", "tensorboard", "TensorBoard logging (tensorboard=True)")
