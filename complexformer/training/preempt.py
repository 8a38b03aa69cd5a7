"""A checkpoint on a signal: a scheduler's SIGTERM or SIGUSR1 stops a run at a step boundary.

A batch scheduler (SLURM, Kubernetes, a spot-instance reclaim) warns a job with a signal some
time before it kills it. :class:`StopSignals` turns the signals named in
``TrainConfig.stop_signals`` into a flag on the rank that received them; the trainer sums the
flags of all ranks in the all-reduce it already makes after each update and reads the sum
with the losses at the next metrics row or checkpoint, so every rank sees the same decision
at the same step. The run then writes a checkpoint of that step, a
``metrics.jsonl`` row ``{"step", "event": "stopped", "signal", "checkpoint", ...}`` and a log
line, and raises :class:`RunStopped`, a ``SystemExit`` whose exit code is :data:`EXIT_STOPPED`
(75, ``EX_TEMPFAIL`` of ``sysexits.h``: a temporary failure, to be retried). Relaunched with
``--resume`` (by the scheduler, or by ``torchrun --max-restarts``), the run continues from that
step and reproduces the losses of an uninterrupted run.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

__all__ = ["EXIT_STOPPED", "RunStopped", "StopSignals", "check_signal_names"]

#: Exit code of a run stopped by a signal after writing its checkpoint (``EX_TEMPFAIL``).
EXIT_STOPPED = 75


def check_signal_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """``names`` as a tuple of signal names known to this platform (``"SIGTERM"`` ...).

    Raises:
        ValueError: a name that is not a catchable signal (the allowed ones are named).
    """
    allowed = ("SIGTERM", "SIGUSR1", "SIGUSR2", "SIGINT", "SIGHUP", "SIGCONT", "SIGQUIT")
    out = []
    for name in names:
        if not isinstance(name, str) or name not in allowed or not hasattr(signal, name):
            raise ValueError(
                f"stop_signals: {name!r} is not a signal a run can stop on; allowed: "
                f"{', '.join(a for a in allowed if hasattr(signal, a))}"
            )
        out.append(name)
    return tuple(out)


class RunStopped(SystemExit):
    """A run stopped by a signal after saving the checkpoint of ``step``.

    A ``SystemExit`` (a program that does not catch it exits with :data:`EXIT_STOPPED`), so
    that ``except Exception`` around a training call does not swallow a preemption.

    Attributes:
        step: the step saved.
        signal: the signal's name.
        checkpoint: the checkpoint directory written (None when nothing was written).
    """

    def __init__(self, step: int, signal_name: str, checkpoint: str | None) -> None:
        super().__init__(EXIT_STOPPED)
        self.step, self.signal, self.checkpoint = step, signal_name, checkpoint

    def __str__(self) -> str:
        return (
            f"stopped by {self.signal} at step {self.step}; checkpoint {self.checkpoint}; "
            f"exit code {EXIT_STOPPED}; continue with --resume"
        )


class StopSignals:
    """Handlers for the stop signals for the duration of a ``with`` block.

    Inside the block, a received signal only records its name (:attr:`received`); the previous
    handlers are restored on exit. Outside the main thread (where Python cannot install
    handlers) nothing is installed.

    Args:
        names: the signal names (:func:`check_signal_names`).
    """

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = check_signal_names(tuple(names))
        self.received: str | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signal.Signals(signum).name

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for name in self.names:
                num = getattr(signal, name)
                self._previous[num] = signal.signal(num, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for num, previous in self._previous.items():
            signal.signal(num, previous)
        self._previous.clear()

    @property
    def flag(self) -> float:
        """1.0 when a stop signal was received on this rank, else 0.0."""
        return 0.0 if self.received is None else 1.0
