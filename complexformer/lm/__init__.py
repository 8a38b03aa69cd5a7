"""The language model on the shared training loop: its task, its runs and its final models.

Typical use::

    from complexformer.lm import load_run, train
    from complexformer.models import preset_config
    from complexformer.training import TrainConfig

    summary = train(preset_config("tiny"), TrainConfig(out_dir="runs/tiny", max_steps=2000))
    run = load_run("runs/tiny")          # model, tokenizer, metadata

The same script runs data-parallel under ``torchrun --nproc_per_node N``; the command line's
``complexformer train`` is the entry point.

Modules: :mod:`.task` (:class:`LMTask`, :func:`train`), :mod:`.checkpoint` (the model of a
training checkpoint), :mod:`.run` (:func:`load_run`, :class:`LoadedRun`), :mod:`.prompt`
(:func:`run_prompt`), :mod:`.final` (:func:`save_final_model`).
"""

from .checkpoint import checkpoint_config, model_from_checkpoint
from .final import save_final_model
from .prompt import run_prompt
from .run import LoadedRun, find_run_dir, load_run
from .task import LMTask, train

__all__ = [
    "LMTask",
    "LoadedRun",
    "checkpoint_config",
    "find_run_dir",
    "load_run",
    "model_from_checkpoint",
    "run_prompt",
    "save_final_model",
    "train",
]
