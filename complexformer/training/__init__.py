"""Training: config, AdamW + schedule, checkpoints, DDP helpers, the loop, plots.

The loop knows tasks, not models: a :class:`TrainTask` supplies the data, the model, the loss
and the final save, and :func:`train_task` runs it::

    from complexformer.training import TrainConfig, train_task

    summary = train_task(task, TrainConfig(out_dir="runs/x", max_steps=2000))

The language model's task and its runs are in :mod:`complexformer.lm` (``lm.train``,
``lm.load_run``). The same script runs data-parallel under ``torchrun --nproc_per_node N``
(see :mod:`.dist`).

Modules: :mod:`.config` (:class:`TrainConfig`), :mod:`.optim` (parameter groups, schedule),
:mod:`.checkpoint` (atomic safetensors + JSON checkpoints), :mod:`.dist` (torchrun/DDP),
:mod:`.evaluate` (perplexity), :mod:`.metrics` (``metrics.jsonl``, TensorBoard),
:mod:`.loop` (:func:`train_task`, :class:`Trainer`), :mod:`.saving` (the trainer's saves and
its stop on a signal), :mod:`.parts` (sharded checkpoints written in parts),
:mod:`.preempt` (stop signals, exit code 75), :mod:`.failure` (a failing rank stops the
others), :mod:`.activation` (activation checkpointing), :mod:`.task` (the :class:`TrainTask`
interface), :mod:`.rundir` (run-directory safety and lock), :mod:`.plot` (loss curves),
:mod:`.data_start` (rank 0 prepares a task's data while the others wait on a file).
"""

from .checkpoint import (
    Checkpoint,
    CheckpointError,
    find_latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
    verify_checkpoint,
)
from .config import TrainConfig
from .dist import DistInfo, setup_distributed
from .evaluate import evaluate_perplexity
from .loop import StepStats, Trainer, train_task
from .metrics import METRICS_FILE, MetricsLogger
from .optim import build_optimizer, build_scheduler, decay_split, lr_at, lr_factor, param_groups
from .plot import plot_loss_curves, read_metrics
from .rundir import NotARunFolderError, RunExistsError
from .task import StepLoss, TrainTask

__all__ = [
    "METRICS_FILE",
    "Checkpoint",
    "CheckpointError",
    "DistInfo",
    "MetricsLogger",
    "NotARunFolderError",
    "RunExistsError",
    "StepLoss",
    "TrainConfig",
    "TrainTask",
    "build_optimizer",
    "build_scheduler",
    "decay_split",
    "evaluate_perplexity",
    "find_latest_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "lr_at",
    "lr_factor",
    "param_groups",
    "plot_loss_curves",
    "prune_checkpoints",
    "read_metrics",
    "save_checkpoint",
    "setup_distributed",
    "StepStats",
    "Trainer",
    "train_task",
    "verify_checkpoint",
]
