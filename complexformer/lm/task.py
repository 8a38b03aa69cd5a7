"""The language model's training task: :class:`LMTask` for the shared loop and :func:`train`.

The loop (:func:`complexformer.training.train_task`) knows tasks, not models; this task builds
a :class:`~complexformer.models.ComplexFormerLM`, feeds it blocks of its corpus, and writes its
configuration, tokenizer and final model into the run directory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from torch import nn

from ..data import Tokenizer, get_tokenizer, load_corpus, load_token_splits
from ..data.prepared import PreparedCorpus
from ..data.tokenizer import META_FILE as TOKENIZER_META
from ..models.config import GPTConfig
from ..models.lm import ComplexFormerLM
from ..models.report import format_parameter_report, parameter_report
from ..storage import atomic_dir, atomic_write_text
from ..training.config import TrainConfig
from ..training.data_start import data_cache_dir, prepare_on_rank0
from ..training.loop import train_task
from ..training.task import StepLoss, TrainTask
from .final import save_final_model
from .run import load_run

__all__ = ["LMTask", "train"]

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
        "chunked_loss",
    }
)


class LMTask(TrainTask):
    """Train a :class:`~complexformer.models.ComplexFormerLM`: next-token loss on blocks of
    ``max_seq_len`` tokens (``model(block, labels=block)``), plus ``ε·L_con`` with PCL.

    Args:
        model_config: the model configuration (``vocab_size`` becomes the tokenizer's).
        verify_base: check the ``init_from`` run against its manifests (False: read it
            unchecked, ``train --base ... --no-verify``).
    """

    #: CMHA's δ and b and the PCL weights stay in float32 under ``--shard --bf16``.
    shard_fp32_parameters = ("adapt_delta", "adapt_bias", "pcl_weight")

    def __init__(self, model_config: GPTConfig, verify_base: bool = True) -> None:
        self.cfg = model_config
        self.verify_base = verify_base
        self.tokenizer: Tokenizer | None = None
        self.init_from: str | None = None

    @property
    def meta_init(self) -> bool:  # a fresh model, unless it continues another run's weights
        return self.init_from is None

    def prepare(self, tc, out, resume, dist, log) -> None:
        main = dist.is_main
        mlog = log if main else None
        self.init_from = None if resume else tc.init_from
        cache_dir = data_cache_dir(tc.cache_dir, out, dist)

        def load() -> tuple[Tokenizer, dict[str, np.ndarray], PreparedCorpus | None]:
            corpus = load_corpus(
                tc.data, text_field=tc.text_field, hf_streaming=tc.hf_streaming, log=mlog
            )
            run_tok = out / "tokenizer"
            if resume and (run_tok / TOKENIZER_META).is_file():
                tok = Tokenizer.load(run_tok)
                if mlog:
                    mlog(f"tokenizer: {tok!r} from {run_tok}")
            elif tc.init_from is not None and tc.tokenizer is None:
                tok = load_run(tc.init_from, verify=self.verify_base).tokenizer
                if mlog:
                    mlog(f"tokenizer: {tok!r} from {tc.init_from} (init_from)")
            else:
                tok = get_tokenizer(
                    tc.tokenizer,
                    corpus,
                    vocab_size=tc.vocab_size,
                    cache_dir=cache_dir,
                    show_progress=main,
                    log=mlog,
                    sample_bytes=tc.tokenizer_sample_bytes,
                )
            splits = load_token_splits(
                corpus, tok, ("train", "val"), cache_dir=cache_dir, show_progress=main, log=mlog
            )
            prepared = corpus if isinstance(corpus, PreparedCorpus) else None
            return tok, splits, prepared

        # Rank 0 prepares while the others wait on a file in the run folder, not in a
        # collective that could time out (training/data_start.py).
        tok, splits = prepare_on_rank0(load, out, dist, tc.data_timeout)
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
            src = load_run(self.init_from, require_tokenizer=False, verify=self.verify_base)
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
            with atomic_dir(out / "tokenizer") as tmp:
                self.tokenizer.save(tmp)

    def step_loss(self, model, batch, step, micro) -> StepLoss:
        out = model(batch, labels=batch)
        aux = {"pcl_loss": out.pcl_loss} if self.cfg.pcl and out.pcl_loss is not None else {}
        return StepLoss(out.loss, out.lm_loss, aux)

    def save_final(self, model, directory) -> None:
        save_final_model(model, directory)


def train(
    model_config: GPTConfig,
    train_config: TrainConfig,
    *,
    resume: bool = False,
    overwrite: bool = False,
    log: Callable[[str], Any] | None = print,
    callback: Callable[[dict[str, Any]], Any] | None = None,
    verify_base: bool = True,
) -> dict[str, Any]:
    """Train a :class:`~complexformer.models.ComplexFormerLM` from scratch or from a checkpoint
    (``train_task(LMTask(model_config), ...)``).

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
        resume, overwrite, log, callback: as in :func:`~complexformer.training.train_task`
            (resuming, starting afresh, the message sink, the per-update hook).
        verify_base: check the ``init_from`` run against its manifests (see
            :class:`LMTask`).

    Returns:
        The summary of :func:`~complexformer.training.train_task` (``val_loss``, ``val_ppl``,
        ``steps``, ...); the same errors are raised.
    """
    return train_task(
        LMTask(model_config, verify_base=verify_base),
        train_config,
        resume=resume,
        overwrite=overwrite,
        log=log,
        callback=callback,
    )
