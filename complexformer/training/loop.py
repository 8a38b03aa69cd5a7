"""The training loop: :func:`train` does a whole run, on one process or under torchrun (DDP).

One call prepares the data (corpus, tokenizer, token caches -- on rank 0 first, then the other
ranks load the caches), builds the model, trains with AdamW, gradient accumulation, gradient
clipping and optional bf16 autocast / ``torch.compile``, evaluates, logs, checkpoints, and
saves the final model. See :func:`train` for the run-directory layout.

Step numbering: ``step`` counts completed optimizer updates (1 is the first). Update ``s``
trains on the global batch ``BlockSampler.batch(s - 1)`` -- a pure function of the seed and
the step -- so the data position of a checkpoint is just its step.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from ..data import BlockSampler
from ..models.config import GPTConfig
from .checkpoint import (
    CHECKPOINTS_DIR,
    atomic_write_text,
    capture_rng_state,
    find_latest_checkpoint,
    load_checkpoint,
    prune_checkpoints,
    remove_stale_temporaries,
    restore_rng_state,
    save_checkpoint,
)
from .config import TrainConfig
from .dist import (
    DistInfo,
    all_gather_objects,
    all_reduce_sum,
    barrier,
    cleanup_distributed,
    run_on_rank0,
    setup_distributed,
)
from .metrics import METRICS_FILE, MetricsLogger, check_tensorboard
from .optim import build_optimizer, build_scheduler
from .plot import plot_loss_curves
from .rundir import check_out_dir, clear_run
from .task import LMTask, TrainTask

__all__ = ["DATA_STREAM_FIELDS", "train", "train_task"]

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


def train(
    model_config: GPTConfig,
    train_config: TrainConfig,
    *,
    resume: bool = False,
    overwrite: bool = False,
    log: Callable[[str], Any] | None = print,
    callback: Callable[[dict[str, Any]], Any] | None = None,
) -> dict[str, Any]:
    """Train a :class:`~complexformer.models.ComplexFormerLM` from scratch or from a checkpoint.

    Works unchanged under ``torchrun --nproc_per_node N`` (DDP; ``gloo`` on CPU, ``nccl`` on
    GPU): rank ``r`` trains on its slice of each global batch of ``batch_size`` sequences,
    metric sums are all-reduced, and only rank 0 logs and writes files.

    The model's ``vocab_size`` is set to the tokenizer's; its ``max_seq_len`` is the training
    context: each sequence is a block of ``max_seq_len`` tokens fed as ``model(block,
    labels=block)`` (``max_seq_len - 1`` next-token predictions).

    Run directory (``train_config.out_dir``)::

        config.json            model config (vocab_size from the tokenizer)
        train_config.json      training config
        tokenizer/             Tokenizer.save
        metrics.jsonl          one JSON row per logged step
        checkpoints/step_0000500/   model/optimizer/rng .safetensors, state.json, manifest.json
        model/                 final model (save_pretrained: config.json, model.safetensors)
        summary.json           final metrics
        loss.png               train and validation loss curves (needs matplotlib)
        tensorboard/           with tensorboard=True

    Args:
        model_config: the model configuration (``vocab_size`` is replaced).
        train_config: the training configuration.
        resume: continue from the newest intact checkpoint in ``out_dir`` (damaged ones are
            skipped with a warning); with no checkpoint at all, start fresh. A resumed run
            reproduces the losses of an uninterrupted one exactly.
        overwrite: delete an existing run in ``out_dir`` (its checkpoints, model, metrics,
            tokenizer, ...) and start over. Without it, an ``out_dir`` holding checkpoints or a
            final model raises :class:`RunExistsError`.
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
        RunExistsError: ``out_dir`` holds a run and neither resume nor overwrite was given.
        CheckpointError: ``resume=True`` but every checkpoint is damaged.
        ValueError: inconsistent settings (batch size vs world size, a resumed run with a
            different model or data stream, too few training tokens, ...).
    """
    return train_task(
        LMTask(model_config),
        train_config,
        resume=resume,
        overwrite=overwrite,
        log=log,
        callback=callback,
    )


def train_task(
    task: TrainTask,
    train_config: TrainConfig,
    *,
    resume: bool = False,
    overwrite: bool = False,
    log: Callable[[str], Any] | None = print,
    callback: Callable[[dict[str, Any]], Any] | None = None,
) -> dict[str, Any]:
    """Run the training loop on any :class:`~complexformer.training.task.TrainTask`.

    :func:`train` is ``train_task(LMTask(model_config), ...)``; the run directory, resume,
    DDP, checkpoint and return-value contract are the same as described there, except that
    the task writes its own configuration, tokenizer and final model.
    """
    t_start = time.perf_counter()
    tc = train_config
    threads = torch.get_num_threads()
    dist = setup_distributed(tc.device)
    log_fn: Callable[[str], Any] = (log or _noop) if dist.is_main else _noop
    # On CPUs, denormal floats (PCL's log-softmax at tau = 0.1 makes many) slow the backward
    # pass ~30x; flush them to zero for this run only.
    flush = dist.device.type == "cpu" and torch.set_flush_denormal(True)
    try:
        return _train(task, tc, dist, resume, overwrite, log_fn, callback, t_start)
    finally:
        if flush:
            torch.set_flush_denormal(False)
        cleanup_distributed(dist)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)  # num_threads applies to this run only


def _train(
    task: TrainTask,
    tc: TrainConfig,
    dist: DistInfo,
    resume: bool,
    overwrite: bool,
    log: Callable[[str], Any],
    callback: Callable[[dict[str, Any]], Any] | None,
    t_start: float,
) -> dict[str, Any]:
    main, world, device = dist.is_main, dist.world_size, dist.device
    if tc.num_threads is not None:
        torch.set_num_threads(tc.num_threads)
    if tc.batch_size % (world * tc.grad_accum):
        raise ValueError(
            f"batch_size ({tc.batch_size}) must be divisible by world_size * grad_accum "
            f"({world} * {tc.grad_accum} = {world * tc.grad_accum})"
        )
    if tc.tensorboard:  # on every rank, so no rank is left waiting at a barrier
        check_tensorboard()
    per_rank = tc.batch_size // world
    micro = per_rank // tc.grad_accum
    out = Path(tc.out_dir)
    ckpt_root = out / CHECKPOINTS_DIR

    # ---- the run directory: refuse to clobber, clean up, find the checkpoint
    check_out_dir(out, resume, overwrite)
    barrier()
    if main:
        out.mkdir(parents=True, exist_ok=True)
        if overwrite:
            clear_run(out)
        remove_stale_temporaries(ckpt_root)
        remove_stale_temporaries(out)
    ckpt_path = None
    if resume:
        found = run_on_rank0(lambda: find_latest_checkpoint(ckpt_root, log=log), dist)
        ckpt_path = None if found is None else Path(found)
        if ckpt_path is None:
            log(f"resume: no checkpoint in {ckpt_root}, starting a fresh run")
    ckpt = load_checkpoint(ckpt_path, verify=False) if ckpt_path is not None else None

    # ---- data
    task.prepare(tc, out, ckpt is not None, dist, log)
    cfg_dict = task.config_dict()
    seq_tokens = task.seq_tokens
    train_tokens, val_tokens = task.train_tokens, task.val_tokens
    sampler = BlockSampler(
        train_tokens, seq_tokens - 1, per_rank, seed=tc.seed, rank=dist.rank, world_size=world
    )

    if ckpt is not None:
        saved_cfg = ckpt.state["model_config"]
        diff = _config_diff(saved_cfg, cfg_dict)
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
            log(f"resume: training settings changed since the checkpoint: {tdiff}")

    # ---- model, optimizer, schedule
    _seed_all(tc.seed)
    model = task.build_model()
    if ckpt is not None:
        ckpt.load_model_into(model)
    model.to(device)
    optimizer = build_optimizer(model, tc)
    scheduler = build_scheduler(optimizer, tc)
    start_step = 0
    accum = {"loss": 0.0, "pcl": 0.0, "n": 0}
    if ckpt is not None:
        optimizer.load_state_dict(ckpt.optimizer_state_dict())
        scheduler.load_state_dict(ckpt.state["scheduler"])
        start_step = ckpt.step
        sampler.load_state_dict(ckpt.state["sampler"])
        accum = dict(ckpt.state.get("accum", accum))
        rng = ckpt.rng_state(dist.rank) if ckpt.state.get("world_size") == world else None
        if rng is not None:
            restore_rng_state(*rng)
        else:
            log("resume: the world size changed; RNG streams are re-seeded from (seed, step)")
            _seed_all(tc.seed + 1_000_003 * start_step + dist.rank)
        log(f"resume: continuing from {ckpt.path} (step {start_step})")
    else:
        _seed_all(tc.seed + dist.rank)  # dropout / PCL masks differ across ranks

    log(task.describe(model))
    log(
        f"train: {tc.max_steps} steps x {tc.batch_size} sequences x {seq_tokens} tokens "
        f"({world} rank(s) x {tc.grad_accum} micro-batch(es) of {micro}), lr {tc.lr:g}, "
        f"device {device}, {len(train_tokens):,} train / {len(val_tokens):,} val tokens"
    )
    n_val_blocks = task.n_val_blocks(tc.eval_blocks)
    if n_val_blocks == 0:
        log(
            f"warning: the validation split ({len(val_tokens)} tokens) does not fill one block "
            f"of {seq_tokens} tokens; validation is skipped"
        )

    # ---- run files (rank 0)
    metrics = None
    if main:
        task.write_run_files(out, fresh=ckpt is None)
        atomic_write_text(out / "train_config.json", tc.to_json() + "\n")
        metrics = MetricsLogger(
            out, resume_step=start_step if ckpt is not None else None, tensorboard=tc.tensorboard
        )
    barrier()

    # ---- wrappers
    train_model: nn.Module = model
    if tc.compile:
        train_model = torch.compile(model)
    if dist.distributed:
        from torch.nn.parallel import DistributedDataParallel as DDP

        train_model = DDP(train_model, device_ids=[device] if device.type == "cuda" else None)

    def autocast():
        if tc.bf16:
            return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def evaluate() -> dict[str, Any] | None:
        if n_val_blocks == 0:
            return None
        return task.evaluate(model, micro, device, tc.bf16, dist.rank, world, tc.eval_blocks)

    tokens_per_step = tc.batch_size * seq_tokens
    clip = tc.grad_clip if tc.grad_clip > 0 else math.inf
    step = start_step
    last_eval: tuple[int, dict[str, Any] | None] | None = None
    last_train_loss = None
    bar = tqdm(
        total=tc.max_steps,
        initial=start_step,
        desc="train",
        unit="step",
        dynamic_ncols=True,
        disable=not (main and sys.stderr.isatty()),
    )
    # throughput of training alone: evaluation and checkpoint time is subtracted
    interval_t0, interval_tokens, overhead = time.perf_counter(), 0, 0.0
    try:
        while step < tc.max_steps:
            batch = sampler.batch(step)  # (per_rank, T + 1), T + 1 = max_seq_len
            model.train()
            optimizer.zero_grad(set_to_none=True)
            sums = torch.zeros(2, dtype=torch.float64, device=device)  # lm loss, pcl loss
            for i, mb in enumerate(batch.split(micro)):
                mb = mb.to(device, non_blocking=True)
                last = i == tc.grad_accum - 1
                sync = (
                    train_model.no_sync()
                    if dist.distributed and not last
                    else contextlib.nullcontext()
                )
                with sync:
                    with autocast():
                        out_ = task.step_loss(train_model, mb, step + 1, i)
                    (out_.loss / tc.grad_accum).backward()
                sums[0] += out_.main.detach().double() / tc.grad_accum
                if out_.aux is not None:
                    sums[1] += out_.aux.detach().double() / tc.grad_accum
            grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip))
            lr = optimizer.param_groups[0]["lr"]
            optimizer.step()
            scheduler.step()
            step += 1
            all_reduce_sum(sums)
            train_loss, pcl_value = (float(v) / world for v in sums)
            if not math.isfinite(train_loss):
                raise FloatingPointError(
                    f"the training loss is {train_loss} at step {step}; try a lower lr "
                    f"(now {tc.lr:g}), grad_clip, or bf16=False"
                )
            last_train_loss = train_loss
            accum["loss"] += train_loss
            accum["pcl"] += pcl_value
            accum["n"] += 1
            interval_tokens += tokens_per_step
            bar.update(1)

            is_eval = step % tc.eval_every == 0 or step == tc.max_steps
            is_log = is_eval or step % tc.log_every == 0 or step == tc.max_steps
            row = None
            if is_log:
                elapsed = time.perf_counter() - interval_t0 - overhead
                row = {
                    "step": step,
                    "train_loss": accum["loss"] / accum["n"],
                    "lr": lr,
                    "grad_norm": grad_norm,
                    "tokens_per_s": interval_tokens / max(elapsed, 1e-9),
                    "tokens_seen": step * tokens_per_step,
                    "elapsed_s": time.perf_counter() - t_start,
                }
                if task.aux_name is not None:
                    row[task.aux_name] = accum["pcl"] / accum["n"]
                accum = {"loss": 0.0, "pcl": 0.0, "n": 0}
                bar.set_postfix(
                    loss=f"{row['train_loss']:.4f}",
                    lr=f"{lr:.2e}",
                    tok_s=f"{row['tokens_per_s']:,.0f}",
                )
                if bar.disable:
                    log(
                        f"step {step}/{tc.max_steps} | loss {row['train_loss']:.4f} | "
                        f"lr {lr:.2e} | grad_norm {grad_norm:.3f} | "
                        f"{row['tokens_per_s']:,.0f} tok/s"
                    )
            if is_eval:
                t_eval = time.perf_counter()
                result = evaluate()
                overhead += time.perf_counter() - t_eval
                last_eval = (step, result)
                if result is not None and row is not None:
                    row["val_loss"], row["val_ppl"] = result["loss"], result["ppl"]
                    log(
                        f"eval step {step}: val_loss {result['loss']:.4f} | "
                        f"val_ppl {result['ppl']:.2f} ({result['tokens']:,} tokens)"
                    )
            if row is not None:
                if metrics is not None:
                    metrics.write(row)
                interval_t0, interval_tokens, overhead = time.perf_counter(), 0, 0.0
            if step % tc.save_every == 0 or step == tc.max_steps:
                t_save = time.perf_counter()
                sampler.step = step  # the data position: the next batch is batch(step)
                rng_states = all_gather_objects(capture_rng_state())
                if main:
                    save_checkpoint(
                        ckpt_root,
                        step,
                        model=model,
                        optimizer=optimizer,
                        scheduler=scheduler,
                        model_config=cfg_dict,
                        train_config=tc,
                        rng=rng_states,
                        extra={
                            "sampler": sampler.state_dict(),
                            "accum": accum,
                            "tokens_seen": step * tokens_per_step,
                        },
                    )
                    prune_checkpoints(ckpt_root, tc.keep_last)
                barrier()
                overhead += time.perf_counter() - t_save
            if callback is not None:
                callback(
                    {
                        "step": step,
                        "train_loss": train_loss,
                        "lr": lr,
                        "grad_norm": grad_norm,
                        "row": row,
                    }
                )
    finally:
        bar.close()
        if metrics is not None:
            metrics.close()

    # ---- the end: final evaluation, model, summary, plot
    if last_eval is not None and last_eval[0] == step:
        final = last_eval[1]
    else:
        final = evaluate()
    summary: dict[str, Any] = {
        "val_loss": None if final is None else final["loss"],
        "val_ppl": None if final is None else final["ppl"],
        "steps": step,
        "tokens_seen": step * tokens_per_step,
        "run_dir": str(out),
        "elapsed_s": time.perf_counter() - t_start,
        "train_loss": last_train_loss,
        "resumed_from": None if ckpt is None else ckpt.step,
    }
    if main:
        task.save_final(model, out / "model")
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
