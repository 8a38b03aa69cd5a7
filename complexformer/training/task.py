"""What the training loop trains: a :class:`TrainTask` supplies the data, the model, the loss,
the validation metric and the final save; :func:`~complexformer.training.train_task` supplies
everything else (optimizer, schedule, accumulation, clipping, DDP, checkpoints, exact resume,
metrics, progress).

:class:`LMTask` is the ComplexFormer language model (next-token loss plus PCL);
:class:`complexformer.cmplxbert.mlm.MLMTask` is continued masked-language-model pre-training of a
complexified BERT.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..data import EvalBlocks, Tokenizer, get_tokenizer, load_corpus, load_token_splits
from ..data.tokenizer import META_FILE as TOKENIZER_META
from ..models.config import GPTConfig
from ..models.lm import ComplexFormerLM
from ..models.report import format_parameter_report, parameter_report
from .checkpoint import atomic_write_text
from .config import TrainConfig
from .dist import DistInfo, rank0_first
from .evaluate import evaluate_perplexity
from .run import load_run
from .rundir import save_final_model, save_tokenizer

__all__ = ["LMTask", "StepLoss", "TrainTask"]

#: GPTConfig fields that ``init_from`` may change: they do not define the weights' shapes
#: (the initialisation of δ is overwritten by the loaded weights).
_NOT_SHAPE = frozenset(
    {
        "dropout",
        "pcl",
        "pcl_epsilon",
        "pcl_tau",
        "pcl_dropout",
        "pcl_target",
        "pcl_reduce",
        "delta_init",
        "delta_init_std",
    }
)


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

    def load_checkpoint_into(self, model: nn.Module, ckpt: Any) -> None:
        """Load a checkpoint's model tensors into the model :meth:`build_model` made."""
        ckpt.load_model_into(model)


class LMTask(TrainTask):
    """Train a :class:`~complexformer.models.ComplexFormerLM`: next-token loss on blocks of
    ``max_seq_len`` tokens (``model(block, labels=block)``), plus ``ε·L_con`` with PCL."""

    def __init__(self, model_config: GPTConfig) -> None:
        self.cfg = model_config
        self.tokenizer: Tokenizer | None = None
        self.init_from: str | None = None

    def prepare(self, tc, out, resume, dist, log) -> None:
        main = dist.is_main
        mlog = log if main else None
        self.init_from = None if resume else tc.init_from

        def load() -> tuple[Tokenizer, dict[str, np.ndarray]]:
            corpus = load_corpus(tc.data, text_field=tc.text_field, log=mlog)
            run_tok = out / "tokenizer"
            if resume and (run_tok / TOKENIZER_META).is_file():
                tok = Tokenizer.load(run_tok)
                if mlog:
                    mlog(f"tokenizer: {tok!r} from {run_tok}")
            elif tc.init_from is not None and tc.tokenizer is None:
                tok = load_run(tc.init_from).tokenizer
                if mlog:
                    mlog(f"tokenizer: {tok!r} from {tc.init_from} (init_from)")
            else:
                tok = get_tokenizer(
                    tc.tokenizer, corpus, vocab_size=tc.vocab_size, show_progress=main, log=mlog
                )
            splits = load_token_splits(corpus, tok, ("train", "val"), show_progress=main, log=mlog)
            return tok, splits

        tok, splits = rank0_first(load, dist)
        self.tokenizer, self.train_tokens, self.val_tokens = tok, splits["train"], splits["val"]
        if self.cfg.vocab_size != tok.vocab_size:
            if log:
                log(
                    f"model: vocab_size {self.cfg.vocab_size} -> {tok.vocab_size} (the tokenizer's)"
                )
            self.cfg = self.cfg.replace(vocab_size=tok.vocab_size)
        if self.cfg.max_seq_len < 2:
            raise ValueError(f"max_seq_len must be >= 2 to train, got {self.cfg.max_seq_len}")

    @property
    def seq_tokens(self) -> int:
        return self.cfg.max_seq_len

    def config_dict(self) -> dict[str, Any]:
        return self.cfg.to_dict()

    def build_model(self) -> nn.Module:
        model = ComplexFormerLM(self.cfg)
        if self.init_from is not None:
            src = load_run(self.init_from, require_tokenizer=False)
            diff = {
                k: (v, self.cfg.to_dict().get(k))
                for k, v in src.model_config.to_dict().items()
                if k not in _NOT_SHAPE and self.cfg.to_dict().get(k) != v
            }
            if diff:
                raise ValueError(
                    f"init_from {self.init_from}: the model config differs in "
                    f"shape-defining fields (field: (init model, now)): {diff}"
                )
            missing, unexpected = model.load_state_dict(src.model.state_dict(), strict=False)
            if unexpected or [k for k in missing if "pcl" not in k]:
                raise ValueError(
                    f"init_from {self.init_from}: weights do not fit: missing "
                    f"{missing[:5]}, unexpected {unexpected[:5]}"
                )
        return model

    def describe(self, model) -> str:
        cfg = self.cfg
        n_params = parameter_report(model)["total"]
        return (
            f"model: {n_params:,} parameters, pos_scheme={cfg.pos_scheme}, "
            f"n_layer={cfg.n_layer}, d_model={cfg.d_model}, n_head={cfg.n_head}, "
            f"max_seq_len={cfg.max_seq_len}\n"
            + format_parameter_report(model)
            + (
                f"\nPCL: loss = lm_loss + {cfg.pcl_epsilon:g} * pcl_loss; pcl_loss = "
                f"{cfg.pcl_reduce} over {cfg.n_layer} layers x (q, k) of the InfoNCE on the "
                f"{'semantic phases θ' if cfg.pcl_target == 'theta' else 'rotated phases'} "
                f"(tau {cfg.pcl_tau:g}, view dropout {cfg.pcl_dropout:g}); metrics.jsonl "
                "logs pcl_loss on this scale"
                if cfg.pcl
                else ""
            )
        )

    def write_run_files(self, out, fresh) -> None:
        atomic_write_text(out / "config.json", self.cfg.to_json() + "\n")
        if fresh or not (out / "tokenizer" / TOKENIZER_META).is_file():
            save_tokenizer(self.tokenizer, out / "tokenizer")

    def step_loss(self, model, batch, step, micro) -> StepLoss:
        out = model(batch, labels=batch)
        aux = {"pcl_loss": out.pcl_loss} if self.cfg.pcl and out.pcl_loss is not None else {}
        return StepLoss(out.loss, out.lm_loss, aux)

    def save_final(self, model, directory) -> None:
        save_final_model(model, directory)
