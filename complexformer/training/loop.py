"""The training loop: :func:`train_task` does a whole run of a task, on one process or under
torchrun (DDP, or FSDP2 sharding with ``TrainConfig.shard``).

One call has the task prepare its data (on rank 0 first, then the other ranks load the
caches) and build its model, trains with AdamW, gradient accumulation, gradient clipping and
optional bf16 autocast / ``torch.compile``, evaluates, logs, checkpoints, and has the task save
the final model. See :func:`train_task` for the run-directory layout.

Step numbering: ``step`` counts completed optimizer updates (1 is the first). Update ``s``
trains on the global batch ``BlockSampler.batch(s - 1)`` -- a pure function of the seed and
the step -- so the data position of a checkpoint is just its step.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as tdist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.utils import clip_grad_norm_
from tqdm.auto import tqdm

from ..data import BlockSampler
from ..runtime import cpu_settings
from ..storage import atomic_write_text, is_regular_file, read_text, remove_stale_temporaries
from .activation import checkpoint_blocks
from .checkpoint import (
    CHECKPOINTS_DIR,
    ShardedSave,
    find_latest_checkpoint,
    load_checkpoint,
    restore_rng_state,
)
from .config import TrainConfig
from .dist import (
    all_reduce_sum,
    barrier,
    cleanup_distributed,
    local_reductions,
    run_on_rank0,
    setup_distributed,
)
from .failure import PeerFailures
from .meta_init import build_on_meta
from .metrics import METRICS_FILE, MetricsLogger, check_tensorboard
from .optim import build_optimizer, build_scheduler
from .parts import PARTS_DIR, CachedStager, load_sharded
from .plot import plot_loss_curves
from .preempt import StopSignals
from .rundir import (
    START_EVAL_FILE,
    check_out_dir,
    check_run_folder,
    clear_run,
    mark_run,
    run_lock,
)
from .saving import SavingMixin, whole_model_checkpoints
from .shard import (
    PlainTwin,
    compile_blocks,
    shard_model,
    shard_optimizer_state,
    to_full_tensor,
)
from .task import TrainTask

__all__ = ["DATA_STREAM_FIELDS", "StepStats", "Trainer", "train_task"]

#: TrainConfig fields that define the data stream; a resumed run must not change them.
DATA_STREAM_FIELDS = ("data", "tokenizer", "vocab_size", "text_field", "seed", "batch_size")


def _noop(_: str) -> None:
    return None


def _config_diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def _seed_all(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


def train_task(
    task: TrainTask,
    train_config: TrainConfig,
    *,
    resume: bool = False,
    overwrite: bool = False,
    log: Callable[[str], Any] | None = print,
    callback: Callable[[dict[str, Any]], Any] | None = None,
) -> dict[str, Any]:
    """Train ``task`` from scratch or from a checkpoint, on one process or under torchrun.

    Works unchanged under ``torchrun --nproc_per_node N`` (DDP; ``gloo`` on CPU, ``nccl`` on
    GPU): rank ``r`` trains on its slice of each global batch of ``batch_size`` sequences,
    metric sums are all-reduced, and only rank 0 logs and writes files.

    Run directory (``train_config.out_dir``)::

        .complexformer-run     the run marker (written first)
        train_config.json      training config
        metrics.jsonl          one JSON row per logged step
        checkpoints/step_0000500/   model/optimizer/rng .safetensors, state.json, manifest.json
        model/                 final model (written by the task's ``save_final``)
        summary.json           final metrics
        loss.png               train and validation loss curves (needs matplotlib)
        tensorboard/           with tensorboard=True

    plus what the task writes itself (``write_run_files``: its configuration, tokenizer ...).
    ``out_dir`` must be missing, empty or a run; nothing inside it is read, written or removed
    through a symbolic link (:mod:`~complexformer.training.rundir`).

    Args:
        task: what to train (:class:`~complexformer.training.task.TrainTask`).
        train_config: the training configuration.
        resume: continue from the newest intact checkpoint in ``out_dir`` (damaged ones are
            skipped with a warning); with no checkpoint at all, start fresh. A resumed run
            reproduces the losses of an uninterrupted one exactly.
        overwrite: delete an existing run in ``out_dir`` (its checkpoints, model, metrics,
            tokenizer, ...) and start over. Without it, an ``out_dir`` holding checkpoints or a
            final model raises :class:`~complexformer.training.rundir.RunExistsError`.
        log: message sink (rank 0 only); None for silence.
        callback: called on every rank after each update (after its metrics and checkpoint
            are written) with ``{"step", "train_loss", "lr", "grad_norm", "row"}`` (``row``:
            the metrics row written at this step, or None). Raising from it aborts the run as
            a crash would (used by tests to simulate a kill).

    Side effects: seeds the global torch / numpy / ``random`` generators (from
    ``train_config.seed``); ``num_threads`` is restored on return; on a CPU, denormal floats
    are flushed to zero during the run (``torch.set_flush_denormal``).

    Returns:
        ``{"val_loss", "val_ppl", "steps", "tokens_seen", "run_dir", "elapsed_s",
        "train_loss", "resumed_from"}`` (``val_*`` None when the validation split is too
        small to fill one block).

    Raises:
        RunStopped: a stop signal (``train_config.stop_signals``) reached a rank; the
            checkpoint of the step the ranks agreed on was written. A ``SystemExit`` with
            exit code 75 (:mod:`~complexformer.training.preempt`).
        PeerFailedError: another rank of a distributed run failed (its message).
        RunExistsError: ``out_dir`` holds a run and neither resume nor overwrite was given.
        NotARunFolderError: ``out_dir`` is a non-empty folder that is not a run (also with
            overwrite; nothing in it is changed).
        SymlinkRefusedError: a symbolic link among the run's files (it is named).
        CheckpointError: ``resume=True`` but every checkpoint is damaged.
        ValueError: inconsistent settings (batch size vs world size, a resumed run with a
            different model or data stream, too few training tokens, ...).
    """
    trainer = Trainer(
        task, train_config, resume=resume, overwrite=overwrite, log=log, callback=callback
    )
    return trainer.run()


@dataclass
class StepStats:
    """What one optimizer update measured (all-reduced over ranks)."""

    step: int
    train_loss: float
    aux: dict[str, float]
    lr: float
    grad_norm: float


@dataclass
class _Unread:
    """An update's measurements still on the device: ``values`` holds the rank sums of the
    main loss and of the auxiliary losses ``names``, the count of ranks that received a stop
    signal, and the gradient norm (float64)."""

    step: int
    names: list[str]
    values: torch.Tensor
    lr: float


class Trainer(SavingMixin):
    """One training run of a :class:`TrainTask`, in named steps.

    :meth:`run` is ``setup`` -> for each update: ``train_step``, and where a row, a save or
    the callback is due: ``read_steps`` -> ``log_step`` -> ``maybe_eval`` -> ``maybe_save`` ->
    callback -> ``finish``. The measurements of an update stay on the device until
    ``read_steps`` reads those of all the updates since the last read in one transfer, so
    between log intervals the host does not wait for the device (unless a callback is given:
    it gets every update's numbers). Every rank runs every step;
    files are written by rank 0. The task supplies the data, the model, the losses (the main
    loss and any auxiliary ones, each logged under its own name) and the evaluation; the
    trainer supplies the optimizer, schedule, accumulation, clipping, DDP, autocast,
    checkpoints and exact resume, metrics and progress.

    Args:
        task: what to train.
        train_config: how to train it (``out_dir`` is the run directory).
        resume, overwrite, log, callback: as in :func:`train_task`.
    """

    def __init__(
        self,
        task: TrainTask,
        train_config: TrainConfig,
        *,
        resume: bool = False,
        overwrite: bool = False,
        log: Callable[[str], Any] | None = print,
        callback: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        self.task, self.tc = task, train_config
        self.resume, self.overwrite = resume, overwrite
        self._log_fn, self.callback = log, callback
        self.out = Path(train_config.out_dir)
        self.ckpt_root = self.out / CHECKPOINTS_DIR

    # ------------------------------------------------------------------------------ run
    def run(self) -> dict[str, Any]:
        """Set up, train to ``max_steps``, finish; returns the summary (see :func:`train_task`).

        Raises:
            RunStopped: a stop signal (``TrainConfig.stop_signals``) reached a rank; the
                checkpoint of the step where the ranks agreed on it was written (a
                ``SystemExit`` with code :data:`~complexformer.training.preempt.EXIT_STOPPED`).
            PeerFailedError: another rank failed (its message).
        """
        self.t_start = time.perf_counter()
        self.dist = setup_distributed(self.tc.device, self.tc.dist_timeout)
        self.log: Callable[[str], Any] = (self._log_fn or _noop) if self.dist.is_main else _noop
        # On CPUs, denormal floats (PCL's log-softmax at tau = 0.1 makes many) slow the
        # backward pass ~30x: flush them to zero for this run only.
        flush = self.dist.device.type == "cpu"
        lock = run_lock(self.out, "training run") if self.dist.is_main else contextlib.nullcontext()
        self.signals = StopSignals(self.tc.stop_signals)
        try:
            with PeerFailures(self.dist), self.signals:
                check_run_folder(self.out)  # before the lock touches a folder that is not a run
                with cpu_settings(self.tc.num_threads, flush), lock:
                    return self._train()
        finally:
            # The DDP wrapper's reducer holds the process group. Freed after the group was
            # destroyed, it would destroy the group itself with the GIL held while a gloo
            # worker thread waits for the GIL to free its last work: a hang at exit (seen
            # in the ranks of a finished run). Drop it while the group is still registered.
            if self.dist.distributed:
                self.train_model = None
                gc.collect()
            cleanup_distributed(self.dist)

    def _train(self) -> dict[str, Any]:
        self.setup()
        self.maybe_eval_start()
        try:
            while self.step < self.tc.max_steps:
                self.train_step()
                if not self._read_due():
                    continue
                stats = self.read_steps()
                row = self.log_step(stats)
                self.maybe_eval(row)
                if row is not None:
                    self._write_row(row)
                self.maybe_save()
                if self.callback is not None:
                    self.callback(
                        {
                            "step": stats.step,
                            "train_loss": stats.train_loss,
                            "lr": stats.lr,
                            "grad_norm": stats.grad_norm,
                            "row": row,
                        }
                    )
                if self.stop_votes and self.step < self.tc.max_steps:
                    self.stop_for_signal()
        finally:
            self.bar.close()
            if self.metrics is not None:
                self.metrics.close()
        return self.finish()

    # ---------------------------------------------------------------------------- setup
    def setup(self) -> None:
        """Run directory, checkpoint, data, model, optimizer, run files and wrappers."""
        self._setup_run_dir()
        self._setup_data()
        self._setup_model()
        self._setup_run_files()
        self._setup_wrappers()

    def _setup_run_dir(self) -> None:
        tc, dist, out = self.tc, self.dist, self.out
        world = dist.world_size
        if tc.batch_size % (world * tc.grad_accum):
            raise ValueError(
                f"batch_size ({tc.batch_size}) must be divisible by world_size * grad_accum "
                f"({world} * {tc.grad_accum} = {world * tc.grad_accum})"
            )
        if tc.tensorboard:  # on every rank, so no rank is left waiting at a barrier
            check_tensorboard()
        self.per_rank = tc.batch_size // world
        self.micro = self.per_rank // tc.grad_accum
        check_out_dir(out, self.resume, self.overwrite)
        barrier()
        if dist.is_main:
            out.mkdir(parents=True, exist_ok=True)
            mark_run(out)  # before anything else is written
            if self.overwrite:
                clear_run(out)
            remove_stale_temporaries(self.ckpt_root)
            remove_stale_temporaries(out)
        ckpt_path = None
        if self.resume:
            found = run_on_rank0(lambda: find_latest_checkpoint(self.ckpt_root, log=self.log), dist)
            ckpt_path = None if found is None else Path(found)
            if ckpt_path is None:
                self.log(f"resume: no checkpoint in {self.ckpt_root}, starting a fresh run")
        self.ckpt = load_checkpoint(ckpt_path, verify=False) if ckpt_path is not None else None

    def _setup_data(self) -> None:
        task, tc, dist, ckpt = self.task, self.tc, self.dist, self.ckpt
        task.prepare(tc, self.out, ckpt is not None, dist, self.log)
        self.cfg_dict = task.config_dict()
        self.seq_tokens = task.seq_tokens
        self.sampler = BlockSampler(
            task.train_tokens,
            self.seq_tokens - 1,
            self.per_rank,
            seed=tc.seed,
            rank=dist.rank,
            world_size=dist.world_size,
        )
        if ckpt is None:
            return
        diff = _config_diff(ckpt.state["model_config"], self.cfg_dict)
        if diff:
            raise ValueError(
                f"cannot resume {ckpt.path}: the model config differs from the checkpoint's "
                f"(field: (checkpoint, now)): {diff}"
            )
        tdiff = _config_diff(ckpt.state["train_config"], tc.to_dict())
        bad = {k: v for k, v in tdiff.items() if k in DATA_STREAM_FIELDS}
        if bad:
            raise ValueError(
                f"cannot resume {ckpt.path}: these settings define the data stream and differ "
                f"from the checkpoint's (field: (checkpoint, now)): {bad}"
            )
        if tdiff:
            self.log(f"resume: training settings changed since the checkpoint: {tdiff}")

    def _setup_model(self) -> None:
        task, tc, dist, ckpt = self.task, self.tc, self.dist, self.ckpt
        _seed_all(tc.seed)
        self.sharded = tc.shard and dist.distributed
        # a sharded fresh start (or a resume from parts) builds on meta: no rank holds it whole
        on_meta = (
            self.sharded
            and tc.meta_init
            and task.meta_init
            and (ckpt is None or (ckpt.sharded and whole_model_checkpoints(task)))
        )
        built = build_on_meta(task.build_model) if on_meta else None
        self.model = model = built.model if built is not None else task.build_model()
        if tc.activation_checkpointing:
            n = checkpoint_blocks(task.shard_units(model))
            self.log(f"activation checkpointing: {n} block(s) recompute their activations")
        # a sharded run of a task whose checkpoints hold the whole model writes them in parts
        self.parts = self.sharded and whole_model_checkpoints(task)
        load_parts = ckpt is not None and ckpt.sharded and self.parts
        if ckpt is not None and not load_parts:
            task.load_checkpoint_into(model, ckpt)
        self.twin: PlainTwin | None = None
        if self.sharded:
            self.twin = PlainTwin(model) if dist.is_main else None
            units = task.shard_units(model)
            methods = task.shard_forward_methods
            shard_model(
                model,
                units,
                dist.device,
                dist.world_size,
                tc.bf16,
                methods,
                task.shard_fp32_parameters,
            )
            if built is not None:  # each rank replays the construction into its shard
                twin = self.twin.module if self.twin is not None else None
                n = built.fill_sharded(dist.rank, dist.world_size, dist.device, twin)
                self.log(f"meta init: built on meta; this rank initialised {n:,} values")
        else:
            if tc.shard:
                self.log("shard: a single process has nothing to shard over; training unsharded")
            model.to(dist.device)
        self.optimizer = build_optimizer(model, tc, task.lr_scale)
        self.scheduler = build_scheduler(self.optimizer, tc)
        self.step = 0
        self.accum = _fresh_accum()
        if load_parts:  # each rank reads the slices of its shard
            load_sharded(ckpt.path / PARTS_DIR, model, self.optimizer, ckpt.state["optimizer"])
        elif ckpt is not None:
            optimizer_state = ckpt.optimizer_state_dict()
            if self.sharded:
                optimizer_state = shard_optimizer_state(self.optimizer, optimizer_state)
            self.optimizer.load_state_dict(optimizer_state)
        if ckpt is not None:
            self.scheduler.load_state_dict(ckpt.state["scheduler"])
            self.step = ckpt.step
            self.sampler.load_state_dict(ckpt.state["sampler"])
            self.accum = _load_accum(ckpt.state.get("accum"))
            same_world = ckpt.state.get("world_size") == dist.world_size
            rng = ckpt.rng_state(dist.rank) if same_world else None
            if rng is not None:
                restore_rng_state(*rng)
            else:
                self.log("resume: the world size changed; RNG streams are re-seeded")
                _seed_all(tc.seed + 1_000_003 * self.step + dist.rank)
            self.log(f"resume: continuing from {ckpt.path} (step {self.step})")
        else:
            _seed_all(tc.seed + dist.rank)  # dropout / PCL masks differ across ranks
        self.log(task.describe(model))
        self.log(
            f"train: {tc.max_steps} steps x {tc.batch_size} sequences x {self.seq_tokens} "
            f"tokens ({dist.world_size} rank(s) x {tc.grad_accum} micro-batch(es) of "
            f"{self.micro}{', sharded' if self.sharded else ''}), lr {tc.lr:g}, "
            f"device {dist.device}, "
            f"{len(task.train_tokens):,} train / {len(task.val_tokens):,} val tokens"
        )
        self.n_val_blocks = task.n_val_blocks(tc.eval_blocks)
        if self.n_val_blocks == 0:
            self.log(
                f"warning: the validation split ({len(task.val_tokens)} tokens) does not fill "
                f"one block of {self.seq_tokens} tokens; validation is skipped"
            )

    def _setup_run_files(self) -> None:
        self.metrics = None
        if self.dist.is_main:
            fresh = self.ckpt is None
            self.task.write_run_files(self.out, fresh=fresh)
            atomic_write_text(self.out / "train_config.json", self.tc.to_json() + "\n")
            self.metrics = MetricsLogger(
                self.out,
                resume_step=None if fresh else self.step,
                tensorboard=self.tc.tensorboard,
            )
        barrier()

    def _setup_wrappers(self) -> None:
        tc, dist = self.tc, self.dist
        self.train_model: nn.Module = self.model
        if tc.compile and self.sharded:
            n = compile_blocks(self.task.shard_units(self.model))
            self.log(f"compile: the forward of each of {n} sharded block(s) is compiled")
        elif tc.compile:
            self.train_model = torch.compile(self.model)
        if dist.distributed and not self.sharded:
            ids = [dist.device] if dist.device.type == "cuda" else None
            self.train_model = DDP(self.train_model, device_ids=ids)
        self.tokens_per_step = tc.batch_size * self.seq_tokens
        self._pending_save: ShardedSave | None = None
        self.last_save_blocked_s: float | None = None
        self._async_group = self._async_stager = None
        if tc.async_checkpoint:
            if self.parts:  # a gloo group of its own for the background writes
                self._async_group = tdist.new_group(backend="gloo")
                self._async_stager = CachedStager()
            else:
                self.log(
                    "async_checkpoint: only the parts of a sharded run are written in the "
                    "background; saving synchronously"
                )
        self.clip = tc.grad_clip if tc.grad_clip > 0 else math.inf
        self.last_eval: tuple[int, dict[str, Any] | None] | None = None
        self.last_train_loss: float | None = None
        self._unread: list[_Unread] = []
        self.stop_votes = 0
        self.bar = tqdm(
            total=tc.max_steps,
            initial=self.step,
            desc="train",
            unit="step",
            dynamic_ncols=True,
            disable=not (dist.is_main and sys.stderr.isatty()),
        )
        # throughput of training alone: evaluation and checkpoint time is subtracted
        self._interval_t0, self._interval_tokens, self._overhead = time.perf_counter(), 0, 0.0

    def _autocast(self):
        if self.tc.bf16:
            return torch.autocast(device_type=self.dist.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    # ------------------------------------------------------------------------ the steps
    def train_step(self) -> None:
        """One optimizer update on the global batch ``sampler.batch(step)``; its measurements
        are all-reduced but stay on the device (:meth:`read_steps` reads them)."""
        tc, dist, device = self.tc, self.dist, self.dist.device
        batch = self.sampler.batch(self.step)  # (per_rank, T + 1), T + 1 = seq_tokens
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        main_sum = torch.zeros((), dtype=torch.float64, device=device)
        aux_sums: dict[str, torch.Tensor] = {}
        for i, mb in enumerate(batch.split(self.micro)):
            mb = mb.to(device, non_blocking=True)
            last = i == tc.grad_accum - 1
            no_sync = dist.distributed and not self.sharded and not last
            with self.train_model.no_sync() if no_sync else contextlib.nullcontext():
                with self._autocast():
                    out = self.task.step_loss(self.train_model, mb, self.step + 1, i)
                (out.loss / tc.grad_accum).backward()
            main_sum += out.main.detach().double() / tc.grad_accum
            for name, value in out.aux.items():
                prev = aux_sums.get(name, 0.0)
                aux_sums[name] = prev + value.detach().double() / tc.grad_accum
        # with sharded (DTensor) gradients the norm is a DTensor of the global norm
        grad_norm = to_full_tensor(clip_grad_norm_(self.model.parameters(), self.clip))
        group = self.optimizer.param_groups[0]
        lr = group["lr"] / group.get("lr_scale", 1.0)  # the schedule's lr, not a group's
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        names = sorted(aux_sums)
        # the last entry counts the ranks that received a stop signal: every rank sees the
        # same count after the all-reduce, so all of them stop after the same update
        stop = torch.tensor(self.signals.flag, dtype=torch.float64, device=device)
        sums = torch.stack([main_sum, *(aux_sums[n] for n in names), stop])
        all_reduce_sum(sums)
        norm = grad_norm.detach().reshape(1).to(torch.float64)  # exact: float32 -> float64
        self._unread.append(_Unread(self.step, names, torch.cat([sums, norm]), lr))
        self._interval_tokens += self.tokens_per_step
        self.bar.update(1)

    def _read_due(self) -> bool:
        """Whether this update's numbers are needed on the host now: a metrics row, a
        checkpoint (it keeps the loss accumulators) or the callback is due, or the run ends."""
        return (
            self._row_due()
            or self._save_due()
            or self.callback is not None
            or self.step >= self.tc.max_steps
        )

    def _row_due(self) -> bool:
        step = self.step
        return self._is_eval_step() or step % self.tc.log_every == 0 or step == self.tc.max_steps

    def read_steps(self) -> StepStats:
        """Read the measurements of the updates since the last read to the host (one
        transfer: the only point where the host waits for the device), add them to the
        metric accumulators in update order, check that each loss is finite, and take the
        stop-signal count of the last update (the same on every rank after the all-reduce,
        so all ranks stop after the same update).

        Returns:
            The stats of the last update.

        Raises:
            FloatingPointError: an update's loss was not finite (it names the update).
        """
        unread, self._unread = self._unread, []
        rows = torch.stack([u.values for u in unread]).tolist()
        world = self.dist.world_size
        stats = None
        for u, row in zip(unread, rows, strict=True):
            *sums, stop, grad_norm = row
            values = [v / world for v in sums]
            train_loss, aux = values[0], dict(zip(u.names, values[1:], strict=True))
            if not math.isfinite(train_loss):
                raise FloatingPointError(
                    f"the training loss is {train_loss} at step {u.step}; try a lower lr "
                    f"(now {self.tc.lr:g}), grad_clip, or bf16=False"
                )
            self.last_train_loss = train_loss
            self.accum["loss"] += train_loss
            for name, value in aux.items():
                self.accum["aux"][name] = self.accum["aux"].get(name, 0.0) + value
            self.accum["n"] += 1
            self.stop_votes = int(stop)
            stats = StepStats(u.step, train_loss, aux, u.lr, grad_norm)
        assert stats is not None
        return stats

    def log_step(self, stats: StepStats) -> dict[str, Any] | None:
        """The metrics row of this step (every ``log_every`` steps, eval steps, the last)."""
        tc, step = self.tc, stats.step
        if not self._row_due():
            return None
        acc = self.accum
        elapsed = time.perf_counter() - self._interval_t0 - self._overhead
        row = {
            "step": step,
            "train_loss": acc["loss"] / acc["n"],
            "lr": stats.lr,
            "grad_norm": stats.grad_norm,
            "tokens_per_s": self._interval_tokens / max(elapsed, 1e-9),
            "tokens_seen": step * self.tokens_per_step,
            "elapsed_s": time.perf_counter() - self.t_start,
        }
        for name, total in sorted(acc["aux"].items()):
            row[name] = total / acc["n"]
        self.accum = _fresh_accum()
        self.bar.set_postfix(
            loss=f"{row['train_loss']:.4f}",
            lr=f"{stats.lr:.2e}",
            tok_s=f"{row['tokens_per_s']:,.0f}",
        )
        if self.bar.disable:
            self.log(
                f"step {step}/{tc.max_steps} | loss {row['train_loss']:.4f} | "
                f"lr {stats.lr:.2e} | grad_norm {stats.grad_norm:.3f} | "
                f"{row['tokens_per_s']:,.0f} tok/s"
            )
        return row

    def _is_eval_step(self) -> bool:
        return self.step % self.tc.eval_every == 0 or self.step == self.tc.max_steps

    def evaluate(self) -> dict[str, Any] | None:
        """The task's validation metrics now (None when the split fills no block)."""
        if self.n_val_blocks == 0:
            return None
        if self.sharded:
            # every rank scores every block in batches of the global micro-batch, as one
            # process would: the same forward passes everywhere (FSDP gathers with every rank)
            # and the single process's numbers (a task's masks may depend on the batching)
            with local_reductions():
                return self.task.evaluate(
                    self.model,
                    self.micro * self.dist.world_size,
                    self.dist.device,
                    self.tc.bf16,
                    0,
                    1,
                    self.tc.eval_blocks,
                )
        return self.task.evaluate(
            self.model,
            self.micro,
            self.dist.device,
            self.tc.bf16,
            self.dist.rank,
            self.dist.world_size,
            self.tc.eval_blocks,
        )

    def maybe_eval_start(self) -> None:
        """Validate before the first update of a fresh run when the task asks for it
        (:attr:`TrainTask.evaluate_before_training`); kept in ``start_eval.json``."""
        if not self.task.evaluate_before_training or self.step != 0:
            return
        result = self.evaluate()
        if result is not None and self.dist.is_main:
            atomic_write_text(self.out / START_EVAL_FILE, json.dumps(result, indent=2) + "\n")
            self.log(
                f"eval before training: val_loss {result['loss']:.4f} | "
                f"val_ppl {result['ppl']:.2f} ({result['tokens']:,} tokens)"
            )

    def maybe_eval(self, row: dict[str, Any] | None) -> None:
        """Validate every ``eval_every`` steps and at the end; the result goes into ``row``."""
        if not self._is_eval_step():
            return
        t0 = time.perf_counter()
        result = self.evaluate()
        self._overhead += time.perf_counter() - t0
        self.last_eval = (self.step, result)
        if result is not None and row is not None:
            row["val_loss"], row["val_ppl"] = result["loss"], result["ppl"]
            self.log(
                f"eval step {self.step}: val_loss {result['loss']:.4f} | "
                f"val_ppl {result['ppl']:.2f} ({result['tokens']:,} tokens)"
            )

    def _write_row(self, row: dict[str, Any]) -> None:
        if self.metrics is not None:
            self.metrics.write(row)
        self._interval_t0, self._interval_tokens, self._overhead = time.perf_counter(), 0, 0.0

    def finish(self) -> dict[str, Any]:
        """Final evaluation, final model, ``summary.json`` and the loss plot."""
        self.complete_pending_save()
        out, step, log = self.out, self.step, self.log
        if self.last_eval is not None and self.last_eval[0] == step:
            final = self.last_eval[1]
        else:
            final = self.evaluate()
        summary: dict[str, Any] = {
            "val_loss": None if final is None else final["loss"],
            "val_ppl": None if final is None else final["ppl"],
            "steps": step,
            "tokens_seen": step * self.tokens_per_step,
            "run_dir": str(out),
            "elapsed_s": time.perf_counter() - self.t_start,
            "train_loss": self.last_train_loss,
            "resumed_from": None if self.ckpt is None else self.ckpt.step,
        }
        start = out / START_EVAL_FILE
        if is_regular_file(start):
            first = json.loads(read_text(start))
            summary["start_val_loss"], summary["start_val_ppl"] = first["loss"], first["ppl"]
        model = self._plain_model()
        if self.dist.is_main:
            self.task.save_final(model, out / "model")
            atomic_write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
            plot_loss_curves(out / METRICS_FILE, out / "loss.png", title=str(out.name), log=log)
            if final is not None:
                log(
                    f"done: {step} steps, {summary['tokens_seen']:,} tokens, val_loss "
                    f"{final['loss']:.4f}, val_ppl {final['ppl']:.2f}, "
                    f"{summary['elapsed_s']:.1f} s; model saved to {out / 'model'}"
                )
            else:
                log(f"done: {step} steps; model saved to {out / 'model'}")
        barrier()
        return summary


def _fresh_accum() -> dict[str, Any]:
    return {"loss": 0.0, "aux": {}, "n": 0}


def _load_accum(saved: dict[str, Any] | None) -> dict[str, Any]:
    """The metric accumulators of a checkpoint (older ones kept PCL under ``"pcl"``)."""
    if not saved:
        return _fresh_accum()
    aux = dict(saved.get("aux", {}))
    if saved.get("pcl"):
        aux["pcl_loss"] = saved["pcl"]
    return {"loss": saved["loss"], "aux": aux, "n": saved["n"]}
