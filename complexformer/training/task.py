"""What the training loop trains: a :class:`TrainTask` supplies the data, the model, the loss,
the validation metric and the final save; :func:`~complexformer.training.train_task` supplies
everything else (optimizer, schedule, accumulation, clipping, DDP or sharding, checkpoints,
exact resume, metrics, progress).

The tasks live with their models: :class:`complexformer.lm.LMTask` is the ComplexFormer
language model (next-token loss plus PCL), :class:`complexformer.cmplxbert.mlm.MLMTask` is
continued masked-language-model pre-training of a complexified BERT,
:class:`complexformer.retrofit.RetrofitTask` adapts CMHA in a pre-trained model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..data import EvalBlocks
from .config import TrainConfig
from .dist import DistInfo
from .evaluate import evaluate_perplexity
from .shard import transformer_blocks

__all__ = ["StepLoss", "TrainTask"]


@dataclass
class StepLoss:
    """The losses of one micro-batch.

    Attributes:
        loss: the differentiable objective.
        main: the task loss alone (logged as ``train_loss``).
        aux: auxiliary losses included in ``loss``, by name; each is logged in
            ``metrics.jsonl`` under its name, on the scale at which it is added.
    """

    loss: torch.Tensor
    main: torch.Tensor
    aux: dict[str, torch.Tensor] = field(default_factory=dict)


class TrainTask:
    """The parts of a training run that depend on the model.

    Subclasses implement every method except :meth:`evaluate` and :meth:`n_val_blocks` (whose
    defaults score next-token perplexity on ``val_tokens``), :meth:`checkpoint_tensors` and
    :meth:`load_checkpoint_into`. The loop calls, in order: :meth:`prepare` (every rank;
    rank 0 first), :meth:`config_dict`, :meth:`build_model`, :meth:`describe`,
    :meth:`write_run_files` (rank 0), then per update :meth:`step_loss` on each micro-batch of
    ``seq_tokens`` tokens per sequence sampled from ``train_tokens``, :meth:`evaluate` every
    ``eval_every`` steps, and :meth:`save_final` (rank 0) at the end.
    """

    train_tokens: np.ndarray
    val_tokens: np.ndarray
    #: Score the validation split once before the first update of a fresh run; the result is
    #: kept in ``start_eval.json`` and reported in the summary as ``start_val_loss`` and
    #: ``start_val_ppl`` (a conversion that starts exact, such as the retrofit, then shows
    #: what training changed).
    evaluate_before_training: bool = False
    #: Methods the model calls on a block of :meth:`shard_units` in place of ``forward``
    #: (``TrainConfig.shard`` gathers the block's parameters for them as for ``forward``).
    shard_forward_methods: tuple[str, ...] = ()
    #: Names of parameters that stay in float32 when ``TrainConfig.shard`` and ``bf16`` are
    #: both set (the phase adaptation δ, b: phases are computed in float32); the modules that
    #: own them become shard units of their own whose parameters are gathered in float32.
    shard_fp32_parameters: tuple[str, ...] = ()
    #: :meth:`build_model` builds from scratch (random initialisation only, no weights read):
    #: under ``TrainConfig.shard`` on several ranks the model is then built on the ``meta``
    #: device and each rank materialises only its shard (:mod:`~.meta_init`).
    meta_init: bool = False

    def prepare(
        self,
        tc: TrainConfig,
        out: Path,
        resume: bool,
        dist: DistInfo,
        log: Callable[[str], Any] | None,
    ) -> None:
        """Load the data and the tokenizer (sets ``train_tokens`` and ``val_tokens``)."""
        raise NotImplementedError

    @property
    def seq_tokens(self) -> int:
        """Tokens per sampled training sequence (the sampler draws blocks of this length)."""
        raise NotImplementedError

    def config_dict(self) -> dict[str, Any]:
        """The model configuration as JSON; a resumed run must have the same one."""
        raise NotImplementedError

    def build_model(self) -> nn.Module:
        """A new model (the loop loads checkpoint weights into it when resuming)."""
        raise NotImplementedError

    def describe(self, model: nn.Module) -> str:
        """A short description (parameter counts) for the log."""
        raise NotImplementedError

    def write_run_files(self, out: Path, fresh: bool) -> None:
        """Write the configuration and tokenizer into the run directory (rank 0)."""
        raise NotImplementedError

    def lr_scale(self, name: str) -> float:
        """The learning-rate multiplier of the trainable parameter called ``name`` (1 by
        default; a fine-tuning task trains its new head faster than the rest)."""
        return 1.0

    def step_loss(self, model: nn.Module, batch: torch.Tensor, step: int, micro: int) -> StepLoss:
        """Losses of the micro-batch ``batch`` (seqs, seq_tokens) of update ``step`` (1-based)."""
        raise NotImplementedError

    def evaluate(
        self,
        model: nn.Module,
        batch_size: int,
        device: torch.device,
        bf16: bool,
        rank: int,
        world_size: int,
        max_blocks: int | None,
    ) -> dict[str, Any] | None:
        """``{"loss", "ppl", "tokens", ...}`` on the validation split, or None if it is empty.

        The default: next-token perplexity of ``model(ids).logits`` over consecutive blocks of
        ``seq_tokens`` tokens of ``val_tokens`` (language-model tasks).
        """
        if self.n_val_blocks(max_blocks) == 0:
            return None
        return evaluate_perplexity(
            model,
            self.val_tokens,
            self.seq_tokens - 1,
            batch_size,
            max_blocks=max_blocks,
            device=device,
            bf16=bf16,
            rank=rank,
            world_size=world_size,
        )

    def n_val_blocks(self, max_blocks: int | None) -> int:
        """Number of validation blocks (0 skips validation); default: blocks of
        ``seq_tokens`` tokens of ``val_tokens``."""
        return EvalBlocks(self.val_tokens, self.seq_tokens - 1, 1, max_blocks=max_blocks).n_blocks

    def save_final(self, model: nn.Module, directory: Path) -> None:
        """Save the trained model to ``directory`` atomically (rank 0)."""
        raise NotImplementedError

    def checkpoint_tensors(self, model: nn.Module) -> dict[str, torch.Tensor] | None:
        """The model tensors a checkpoint holds; None (the default) saves the whole model.

        A task that trains a few parameters of a large frozen base returns those parameters
        only, and rebuilds the rest in :meth:`build_model`.
        """
        return None

    def shard_units(self, model: nn.Module) -> list[nn.Module]:
        """The modules that ``TrainConfig.shard`` wraps with ``fully_shard`` before the root:
        by default the model's transformer blocks
        (:func:`~complexformer.training.shard.transformer_blocks`)."""
        return transformer_blocks(model)

    def load_checkpoint_into(self, model: nn.Module, ckpt: Any) -> None:
        """Load a checkpoint's model tensors into the model :meth:`build_model` made."""
        ckpt.load_model_into(model)
