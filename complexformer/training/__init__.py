"""Training: config, AdamW + schedule, checkpoints, DDP helpers, the loop, run loading, plots.

Typical use::

    from complexformer.models import preset_config
    from complexformer.training import TrainConfig, load_run, train

    summary = train(preset_config("tiny"), TrainConfig(out_dir="runs/tiny", max_steps=2000))
    run = load_run("runs/tiny")          # model, tokenizer, metadata

The same script runs data-parallel under ``torchrun --nproc_per_node N`` (see :mod:`.dist`);
``python -m complexformer.training`` is a small torchrun-friendly entry point.

Modules: :mod:`.config` (:class:`TrainConfig`), :mod:`.optim` (parameter groups, schedule),
:mod:`.checkpoint` (atomic safetensors + JSON checkpoints), :mod:`.dist` (torchrun/DDP),
:mod:`.evaluate` (perplexity), :mod:`.metrics` (``metrics.jsonl``, TensorBoard),
:mod:`.loop` (:func:`train`, :func:`train_task`), :mod:`.task` (what is trained:
:class:`LMTask`, the :class:`TrainTask` interface),
:mod:`.rundir` (run-directory safety, atomic saves),
:mod:`.run` (:func:`load_run`), :mod:`.plot` (loss curves).
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
from .loop import StepStats, Trainer, train, train_task
from .metrics import METRICS_FILE, MetricsLogger
from .optim import build_optimizer, build_scheduler, decay_split, lr_at, lr_factor, param_groups
from .plot import plot_loss_curves, read_metrics
from .run import LoadedRun, find_run_dir, load_run
from .rundir import RunExistsError, save_final_model
from .task import LMTask, StepLoss, TrainTask

__all__ = [
    "METRICS_FILE",
    "Checkpoint",
    "CheckpointError",
    "DistInfo",
    "LMTask",
    "LoadedRun",
    "MetricsLogger",
    "RunExistsError",
    "StepLoss",
    "TrainConfig",
    "TrainTask",
    "build_optimizer",
    "build_scheduler",
    "decay_split",
    "evaluate_perplexity",
    "find_latest_checkpoint",
    "find_run_dir",
    "list_checkpoints",
    "load_checkpoint",
    "load_run",
    "lr_at",
    "lr_factor",
    "param_groups",
    "plot_loss_curves",
    "prune_checkpoints",
    "read_metrics",
    "save_checkpoint",
    "save_final_model",
    "setup_distributed",
    "train",
    "StepStats",
    "Trainer",
    "train_task",
    "verify_checkpoint",
]
