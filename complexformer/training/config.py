"""The training configuration: :class:`TrainConfig` (a JSON-serialisable dataclass)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from ..config import ConfigBase
from .preempt import check_signal_names

__all__ = ["DEVICES", "SCHEDULES", "TrainConfig"]

DEVICES = ("auto", "cpu", "cuda")
SCHEDULES = ("cosine", "linear")
FUSED_ADAMW = ("auto", True, False)


@dataclass
class TrainConfig(ConfigBase):
    """Everything about a training run that is not the model's shape.

    The defaults train the ``tiny`` preset on the standard library on a CPU in minutes.

    Attributes:
        out_dir: the run directory (metrics, checkpoints, tokenizer, final model).
        data: corpus spec: ``stdlib`` (this Python's standard library), ``shakespeare``,
            ``text:GLOB`` (local .txt/.jsonl files), ``hf:NAME[:CONFIG]`` (Hugging Face
            datasets, online) or ``prepared:DIR`` (a folder written by ``complexformer
            prepare``); see :func:`complexformer.data.load_corpus`.
        tokenizer: None (or ``"bpe"``) for the cached byte-level BPE trained on the train
            split; otherwise a tokenizer directory or a Hugging Face name.
        vocab_size: vocabulary size of the trained BPE (ignored for other tokenizers). The
            model's ``vocab_size`` is always set to the tokenizer's.
        text_field: the JSONL field / dataset column holding the text.
        tokenizer_sample_bytes: the byte-level BPE trains on at most this many UTF-8 bytes of
            the train split, a deterministic sample spread over it (default 256 MiB; the
            standard library's 29 MiB are used whole).
        cache_dir: the cache root for the BPE and the token arrays (default: the user's cache,
            or ``<out_dir>/cache`` when the ranks span several machines).
        hf_streaming: (``hf:`` corpora) stream the dataset (True) or read it converted to
            Arrow files (False); None: stream a Hub dataset, read a local one (the
            ``COMPLEXFORMER_HF_STREAMING`` environment variable overrides None).
        data_timeout: seconds the other ranks wait for rank 0 to prepare the data (default 6 h).
        max_steps: number of optimizer updates.
        batch_size: the *global* batch, in sequences of ``max_seq_len`` tokens per optimizer
            update (summed over ranks and accumulation micro-steps); it must be divisible by
            ``world_size * grad_accum``.
        grad_accum: micro-steps per update (per-rank micro-batch =
            ``batch_size // (world_size * grad_accum)``); it changes memory, not the maths.
        lr: peak learning rate, reached after the warm-up (the paper pre-trains at 1e-4;
            1e-3 suits the tiny CPU preset).
        warmup_frac: fraction of ``max_steps`` of linear warm-up from ``lr / warmup_steps``
            to ``lr``.
        min_lr_ratio: after warm-up the learning rate decays from ``lr`` down to
            ``lr * min_lr_ratio``, reached at the last step (0 decays to zero).
        schedule: the decay after warm-up: ``"cosine"`` (default) or ``"linear"`` (the
            CmplxBERT-LoRA recipe: linear warm-up and linear decay).
        weight_decay: AdamW decoupled weight decay, applied to Linear weight matrices only
            (see :func:`complexformer.training.optim.param_groups`).
        betas: AdamW betas (paper: 0.9, 0.98).
        eps: AdamW epsilon (paper: 1e-9).
        grad_clip: clip the global gradient L2 norm to this value (0 disables clipping; the
            norm is reported either way).
        eval_every: evaluate on the validation split every this many steps (and at the end).
        eval_blocks: cap on the number of validation blocks (None: the whole split).
        log_every: write a ``metrics.jsonl`` row every this many steps.
        save_every: write a checkpoint every this many steps (and at the end).
        keep_last: number of most recent checkpoints kept.
        seed: seed of model initialisation, data sampling and dropout.
        bf16: run forward passes under ``torch.autocast(dtype=torch.bfloat16)``.
        compile: wrap the model in ``torch.compile``; with ``shard`` each shard unit's
            ``forward`` is compiled on its own after ``fully_shard`` (FSDP2's gathers stay
            outside the compiled code).
        shard: under torchrun, shard the parameters, gradients and optimizer state over the
            ranks with PyTorch's FSDP2 (``fully_shard`` on each transformer block, then the
            root; see :mod:`complexformer.training.shard`) instead of replicating them with
            DDP. The losses are those of DDP; checkpoints are the same files. On a single
            process there is nothing to shard over and the run is unsharded (with a note).
        tensorboard: also log to TensorBoard (``<out_dir>/tensorboard``; needs the
            ``tensorboard`` extra).
        device: ``"auto"`` (CUDA if available, else CPU), ``"cpu"`` or ``"cuda"``.
        num_threads: ``torch.set_num_threads`` for CPU training (None: leave torch's default).
        init_from: continued training: start from the weights of this run, checkpoint or
            saved-model directory (the optimizer and schedule start fresh; ``tokenizer``
            defaults to that run's tokenizer; the model config must match its shapes).
            Ignored when resuming from a checkpoint of this run.
        stop_signals: signals on which the run saves a checkpoint at the next step boundary
            (agreed by all ranks) and exits with code 75 (``EX_TEMPFAIL``), to continue with
            ``--resume`` (see :mod:`complexformer.training.preempt`); an empty list keeps
            Python's default handling (SIGTERM then ends the process at once).
        dist_timeout: seconds a collective operation of a distributed run waits for the other
            ranks before it fails (the process group's timeout; PyTorch's default is 30
            minutes for gloo). A rank that fails makes the others stop with its message at
            once, without waiting out this timeout.
        async_checkpoint: with ``shard``, copy the state at a save and write the parts from a
            background thread while training goes on (PyTorch's
            ``torch.distributed.checkpoint.async_save``); the checkpoint is completed (its
            manifest written, its folder renamed) at the next save, on a stop signal or at
            the end. Without ``shard`` checkpoints are written synchronously (with a note).
        activation_checkpointing: recompute each transformer block's activations in the
            backward pass instead of keeping them (the same gradients, less memory, one more
            forward pass per block; see :mod:`complexformer.training.activation`).
        meta_init: with ``shard`` on several ranks, build a model that starts from random
            weights on the ``meta`` device and let each rank materialise only its shard, so
            that no rank holds the whole model at start (the same initial weights, bit for
            bit; see :mod:`complexformer.training.meta_init`); ``false`` builds the whole
            model on the CPU of every rank first, as before.
        fused_adamw: use PyTorch's fused AdamW kernel (``torch.optim.AdamW(fused=True)``):
            ``"auto"`` (default) on CUDA only, ``true`` wherever the device has the kernel
            (CPU too), ``false`` for the default (multi-tensor) implementation. On a CPU the
            fused kernel rounds differently (losses agree to ~1e-8, not bit for bit), so
            ``"auto"`` keeps the default there and CPU runs stay bit-identical to earlier ones.
    """

    out_dir: str
    data: str = "stdlib"
    tokenizer: str | None = None
    vocab_size: int = 8192
    text_field: str = "text"
    tokenizer_sample_bytes: int = 1 << 28
    cache_dir: str | None = None
    hf_streaming: bool | None = None
    data_timeout: float = 6 * 3600.0
    max_steps: int = 2000
    batch_size: int = 32
    grad_accum: int = 1
    lr: float = 1e-3
    warmup_frac: float = 0.05
    min_lr_ratio: float = 0.1
    schedule: str = "cosine"
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-9
    grad_clip: float = 1.0
    eval_every: int = 200
    eval_blocks: int | None = 100
    log_every: int = 10
    save_every: int = 500
    keep_last: int = 3
    seed: int = 0
    bf16: bool = False
    compile: bool = False
    shard: bool = False
    tensorboard: bool = False
    device: str = "auto"
    num_threads: int | None = None
    init_from: str | None = None
    stop_signals: tuple[str, ...] = ("SIGTERM", "SIGUSR1")
    dist_timeout: float = 1800.0
    async_checkpoint: bool = False
    activation_checkpointing: bool = False
    meta_init: bool = True
    fused_adamw: bool | str = "auto"

    _what = "TrainConfig field"

    def __post_init__(self) -> None:
        self.out_dir = os.fspath(self.out_dir)
        if not self.out_dir:
            raise ValueError("out_dir must be a non-empty path")
        for name in (
            "vocab_size",
            "max_steps",
            "batch_size",
            "grad_accum",
            "eval_every",
            "log_every",
            "save_every",
            "keep_last",
            "tokenizer_sample_bytes",
        ):
            _check_int(name, getattr(self, name), minimum=1)
        _check_int("seed", self.seed, minimum=0)
        if self.eval_blocks is not None:
            _check_int("eval_blocks", self.eval_blocks, minimum=1)
        if self.num_threads is not None:
            _check_int("num_threads", self.num_threads, minimum=1)
        if not self.data_timeout > 0:
            raise ValueError(f"data_timeout must be > 0 seconds, got {self.data_timeout}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0.0 <= self.warmup_frac <= 1.0:
            raise ValueError(f"warmup_frac must be in [0, 1], got {self.warmup_frac}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        betas = tuple(float(b) for b in self.betas)
        if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")
        self.betas = betas  # JSON gives a list
        if not self.eps > 0:
            raise ValueError(f"eps must be > 0, got {self.eps}")
        if self.grad_clip < 0:
            raise ValueError(f"grad_clip must be >= 0 (0 disables clipping), got {self.grad_clip}")
        if isinstance(self.stop_signals, str):
            self.stop_signals = (self.stop_signals,)
        self.stop_signals = check_signal_names(tuple(self.stop_signals))
        if isinstance(self.dist_timeout, bool) or not (
            isinstance(self.dist_timeout, (int, float)) and 0 < self.dist_timeout < math.inf
        ):
            raise ValueError(
                f"dist_timeout must be a number of seconds > 0, got {self.dist_timeout!r}"
            )
        self.dist_timeout = float(self.dist_timeout)
        if self.fused_adamw not in FUSED_ADAMW:
            raise ValueError(
                f"fused_adamw must be one of 'auto', true, false, got {self.fused_adamw!r}"
            )
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {DEVICES}, got {self.device!r}")
        if self.batch_size % self.grad_accum:
            raise ValueError(
                f"batch_size ({self.batch_size}) must be divisible by grad_accum "
                f"({self.grad_accum})"
            )

    def warmup_steps(self) -> int:
        """Number of warm-up steps: ``round(warmup_frac * max_steps)``."""
        return int(round(self.warmup_frac * self.max_steps))


def _check_int(name: str, value: Any, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
