"""The checkpoints of a training run: periodic saves, sharded and asynchronous saves, and
the stop on a signal (:class:`SavingMixin`, a part of :class:`~complexformer.training.loop.
Trainer`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from torch import nn

from .checkpoint import (
    ShardedSave,
    capture_rng_state,
    prune_checkpoints,
    save_checkpoint,
    step_dir_name,
)
from .dist import all_gather_objects, barrier
from .preempt import EXIT_STOPPED, RunStopped
from .shard import full_model_state, full_optimizer_state
from .task import TrainTask

__all__ = ["SavingMixin", "whole_model_checkpoints"]


class SavingMixin:
    """Checkpoint methods of the trainer (they use its ``tc``, ``dist``, ``model``,
    ``optimizer``, ``scheduler``, ``sampler``, ``step`` ... set up by the trainer)."""

    tc: Any
    dist: Any
    step: int

    def _save_due(self) -> bool:
        return self.step % self.tc.save_every == 0 or self.step == self.tc.max_steps

    def maybe_save(self) -> None:
        """Checkpoint every ``save_every`` steps and at the end (rank 0 writes)."""
        if self._save_due():
            self.save()

    def save(self) -> Path:
        """Write the checkpoint of the current step (every rank calls it; rank 0 writes).

        Returns:
            The checkpoint directory.
        """
        tc, step = self.tc, self.step
        t0 = time.perf_counter()
        self.sampler.step = step  # the data position: the next batch is batch(step)
        rng_states = all_gather_objects(capture_rng_state())
        extra = {
            "sampler": self.sampler.state_dict(),
            "accum": self.accum,
            "tokens_seen": step * self.tokens_per_step,
        }
        if self.parts:
            self.complete_pending_save()
            pending = ShardedSave(
                self.ckpt_root,
                step,
                model=self.model,
                optimizer=self.optimizer,
                scheduler=self.scheduler,
                model_config=self.cfg_dict,
                train_config=tc,
                rng=rng_states,
                extra=extra,
                async_group=self._async_group,
                async_stager=self._async_stager,
            )
            if self._async_group is None:
                self._pending_save = pending
                self.complete_pending_save()
            else:  # written in the background; completed at the next save or at the end
                self._pending_save = pending
            self.last_save_blocked_s = time.perf_counter() - t0
            self._overhead += self.last_save_blocked_s
            return self.ckpt_root / step_dir_name(step)
        model, optimizer = self._plain_model(), self.optimizer
        if self.sharded:  # gathered to rank 0, saved as an unsharded run saves them
            optimizer = _FullOptimizerState(full_optimizer_state(self.model, self.optimizer))
        if self.dist.is_main:
            save_checkpoint(
                self.ckpt_root,
                step,
                model=model,
                optimizer=optimizer,
                scheduler=self.scheduler,
                model_config=self.cfg_dict,
                train_config=tc,
                rng=rng_states,
                model_tensors=self.task.checkpoint_tensors(model),
                extra=extra,
            )
            prune_checkpoints(self.ckpt_root, tc.keep_last)
        barrier()
        self._overhead += time.perf_counter() - t0
        return self.ckpt_root / step_dir_name(step)

    def complete_pending_save(self) -> None:
        """Finish the sharded checkpoint in progress, if any (every rank calls it): wait for
        its parts, write its manifest, rename it, prune old checkpoints."""
        pending, self._pending_save = self._pending_save, None
        if pending is None:
            return
        pending.complete()
        if self.dist.is_main:
            prune_checkpoints(self.ckpt_root, self.tc.keep_last)
        barrier()

    def stop_for_signal(self) -> None:
        """Save the current step (unless this step's checkpoint was just written), record
        why the run stops in ``metrics.jsonl`` and the log, and raise :class:`RunStopped`."""
        received = all_gather_objects(self.signals.received)
        first = next((name for name in received if name), "a stop signal")
        who = ", ".join(f"{name} on rank {r}" for r, name in enumerate(received) if name)
        path = self.ckpt_root / step_dir_name(self.step)
        if not self._save_due():
            path = self.save()
        self.complete_pending_save()
        row = {
            "step": self.step,
            "event": "stopped",
            "signal": first,
            "received": who,
            "checkpoint": str(path.relative_to(self.out)),
            "exit_code": EXIT_STOPPED,
            "elapsed_s": time.perf_counter() - self.t_start,
        }
        if self.metrics is not None:
            self.metrics.write(row)
        self.log(
            f"stopped at step {self.step}/{self.tc.max_steps} by {who}: checkpoint {path} "
            f"written; exit code {EXIT_STOPPED}, continue with --resume"
        )
        raise RunStopped(self.step, first, str(path))

    def _plain_model(self) -> nn.Module:
        """The model as an unsharded module on rank 0 (for saves): the model itself, or for a
        sharded run its twin filled with the gathered parameters (every rank must call it;
        the other ranks get the sharded model back)."""
        if not self.sharded:
            return self.model
        state = full_model_state(self.model)
        return self.twin.fill(state) if self.twin is not None else self.model


class _FullOptimizerState:
    """A gathered optimizer state in the place of the optimizer: what ``save_checkpoint``
    reads of an optimizer is its ``state_dict()``."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def state_dict(self) -> dict[str, Any]:
        return self.state


def whole_model_checkpoints(task: TrainTask) -> bool:
    """True when ``task`` checkpoints the whole model and reads it back with
    :meth:`Checkpoint.load_model_into` (not a part of it, as a retrofit of a frozen base
    does): its sharded runs write their checkpoints in parts."""
    kind = type(task)
    return (
        kind.checkpoint_tensors is TrainTask.checkpoint_tensors
        and kind.load_checkpoint_into is TrainTask.load_checkpoint_into
    )
