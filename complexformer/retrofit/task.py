"""Training a retrofit on the shared loop: :class:`RetrofitTask` is a
:class:`~complexformer.training.TrainTask`, so a retrofit run has the loop's checkpoints,
exact resume, DDP, metrics and progress like every other run.

Only the trained tensors go into checkpoints (the frozen base is loaded again from
``RetrofitConfig.base`` when a run resumes), so a checkpoint of a 135M-parameter base holds
a few thousand numbers plus their optimizer state.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file
from torch import nn

from ..data import Tokenizer, load_corpus, load_token_splits
from ..data.prepared import PreparedCorpus
from ..storage import atomic_write_text
from ..training.checkpoint import MODEL_FILE
from ..training.data_start import data_cache_dir, prepare_on_rank0
from ..training.task import StepLoss, TrainTask
from .build import load_base, prepare_model
from .config import RetrofitConfig
from .convert import PHASE_PARAMETERS
from .io import adaptation_tensors, load_adaptation_tensors, save_adaptation

__all__ = ["RetrofitTask", "wrap_tokenizer"]


def wrap_tokenizer(hf_tokenizer: Any) -> Tokenizer:
    """The base model's ``transformers`` tokenizer as a :class:`~complexformer.data.Tokenizer`
    (its EOS separates documents in the token stream)."""
    eos = hf_tokenizer.eos_token
    if eos is None:
        raise ValueError("the base model's tokenizer defines no eos_token")
    return Tokenizer(hf_tokenizer, "hf", str(eos))


class RetrofitTask(TrainTask):
    """Train the adaptation (or the control's parameters) of a converted pre-trained model.

    The loss is the base model's own next-token cross-entropy (``model(input_ids,
    labels=input_ids).loss``) on blocks of ``seq_len`` tokens of the corpus, tokenised with
    the base model's tokenizer. The validation split is scored once before training: the
    converted model is still the base model then (δ = 1, b = 0, LoRA at zero), so the summary's
    ``start_val_ppl`` against ``val_ppl`` is what the adaptation changed.
    """

    #: The adaptation δ and b stay in float32 under ``--shard --bf16``.
    shard_fp32_parameters = PHASE_PARAMETERS

    evaluate_before_training = True

    def __init__(self, config: RetrofitConfig) -> None:
        self.cfg = config
        self.hf_tokenizer: Any = None
        self.tokenizer: Tokenizer | None = None
        self._base: nn.Module | None = None

    def prepare(self, tc, out, resume, dist, log) -> None:
        main = dist.is_main
        mlog = log if main else None
        base, hf_tok = load_base(self.cfg)
        self._base, self.hf_tokenizer = base, hf_tok
        self.tokenizer = wrap_tokenizer(hf_tok)
        if mlog:
            mlog(f"base: {self.cfg.base} ({type(base).__name__}), tokenizer {self.tokenizer!r}")

        cache_dir = data_cache_dir(tc.cache_dir, out, dist)
        tok = self.tokenizer

        def load() -> tuple[Tokenizer, dict[str, np.ndarray], PreparedCorpus | None]:
            corpus = load_corpus(
                tc.data, text_field=tc.text_field, hf_streaming=tc.hf_streaming, log=mlog
            )
            splits = load_token_splits(
                corpus, tok, ("train", "val"), cache_dir=cache_dir, show_progress=main, log=mlog
            )
            return tok, splits, corpus if isinstance(corpus, PreparedCorpus) else None

        # Rank 0 tokenizes while the others wait on a file in the run folder, not in a
        # collective that could time out (training/data_start.py); every rank has loaded the
        # base's tokenizer itself, so only the token arrays are taken from rank 0.
        _, splits = prepare_on_rank0(load, out, dist, tc.data_timeout, tokenizer=tok)
        self.train_tokens, self.val_tokens = splits["train"], splits["val"]

    @property
    def seq_tokens(self) -> int:
        return self.cfg.seq_len

    def config_dict(self) -> dict[str, Any]:
        return self.cfg.to_dict()

    def build_model(self) -> nn.Module:
        if self._base is None:
            raise RuntimeError("RetrofitTask.build_model before prepare")
        model, self._base = self._base, None
        return prepare_model(model, self.cfg)

    def describe(self, model) -> str:
        total = sum(p.numel() for p in model.parameters())
        trained = [(n, p.numel()) for n, p in model.named_parameters() if p.requires_grad]
        kinds: dict[str, int] = {}
        for name, n in trained:
            leaf = name.rsplit(".", 1)[-1]
            kinds[leaf] = kinds.get(leaf, 0) + n
        parts = ", ".join(f"{k} {v:,}" for k, v in sorted(kinds.items()))
        return (
            f"retrofit: {self.cfg.scheme} (gqa {self.cfg.gqa}) on {self.cfg.base}; train "
            f"{self.cfg.train}: {sum(n for _, n in trained):,} of {total:,} parameters "
            f"({parts})"
        )

    def write_run_files(self, out: Path, fresh: bool) -> None:
        atomic_write_text(out / "config.json", self.cfg.to_json() + "\n")

    def step_loss(self, model, batch, step, micro) -> StepLoss:
        out = model(input_ids=batch, labels=batch)
        return StepLoss(out.loss, out.loss)

    def save_final(self, model, directory) -> None:
        save_adaptation(model, directory, self.cfg, self.hf_tokenizer)

    def checkpoint_tensors(self, model: nn.Module) -> dict[str, torch.Tensor]:
        return adaptation_tensors(model, adaptation=False)  # the trained tensors only

    def load_checkpoint_into(self, model: nn.Module, ckpt: Any) -> None:
        f = Path(ckpt.path) / MODEL_FILE
        load_adaptation_tensors(model, load_file(str(f)), str(f))
