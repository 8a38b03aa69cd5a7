"""The training budget of a scale given in epochs: tokens of the corpus, steps, GPU-hours.

Appendix A of Shao et al. (2025, ComplexFormer) trains "WikiText-103: 40-50 epochs" with
batch 8 and sequence 512-1024. A :class:`~.variants.Scale` with ``epochs`` set (the
``paper`` scale: 45, the middle of that range) has its number of steps computed from the
number of training tokens of its corpus under its tokenizer:

    max_steps = ceil(epochs × train_tokens / (batch_size × max_seq_len)).

The token count is read from ``OUT/train_tokens.json``, written the first time the corpus is
tokenised for a reproduction (so the plan and the run directories keep the same step count
afterwards). Until then a dry run uses the scale's documented estimate
(:data:`WIKITEXT103_GPT2_TRAIN_TOKENS`); a real run tokenises the train split first.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from complexformer.data import get_tokenizer, load_corpus, load_token_splits
from complexformer.models.config import GPTConfig
from complexformer.models.lm import ComplexFormerLM
from complexformer.storage import atomic_write_text

__all__ = [
    "A100_EFFECTIVE_FLOPS",
    "WIKITEXT103_GPT2_TRAIN_TOKENS",
    "WIKITEXT103_TRAIN_WORDS",
    "epoch_steps",
    "gpu_hours",
    "resolve_token_budget",
    "train_flops_per_token",
]

#: Word-level tokens of the WikiText-103 training set (Merity et al., "Pointer Sentinel Mixture
#: Models", 2016, Table 1: 103,227,021).
WIKITEXT103_TRAIN_WORDS = 103_227_021
#: Our estimate of its length under the GPT-2 tokenizer: about 1.15 byte-level BPE tokens per
#: word-level token of the raw text (punctuation and rare words split into several pieces).
#: Used only until the corpus has been tokenised once (``OUT/train_tokens.json``).
WIKITEXT103_GPT2_TRAIN_TOKENS = round(WIKITEXT103_TRAIN_WORDS * 1.15)
#: Training throughput assumed for the GPU-hour estimate: an A100 (the paper's GPU) at 312
#: TFLOP/s bf16 peak and 40 % utilisation.
A100_EFFECTIVE_FLOPS = 312e12 * 0.40

_RECORD = "train_tokens.json"


def epoch_steps(epochs: float, tokens: int, batch_size: int, seq_len: int) -> int:
    """ceil(epochs × tokens / (batch_size × seq_len)), at least 1."""
    return max(1, math.ceil(epochs * tokens / (batch_size * seq_len)))


def train_flops_per_token(config: GPTConfig) -> float:
    """Training FLOPs per token: 6 N + 6 L T d (Kaplan et al., "Scaling Laws for Neural
    Language Models", 2020), N the parameters of the blocks plus the output projection (the
    input embedding is a lookup), T the context."""
    with torch.device("meta"):
        model = ComplexFormerLM(config)
    n = sum(p.numel() for p in model.blocks.parameters()) + config.d_model * config.vocab_size
    return 6.0 * n + 6.0 * config.n_layer * config.max_seq_len * config.d_model


def gpu_hours(config: GPTConfig, tokens: int) -> float:
    """Estimated A100-hours to train ``config`` on ``tokens`` tokens."""
    return train_flops_per_token(config) * tokens / A100_EFFECTIVE_FLOPS / 3600.0


def _read_record(out: Path, key: dict[str, Any]) -> int | None:
    path = out / _RECORD
    if not path.is_file():
        return None
    rec = json.loads(path.read_text(encoding="utf-8"))
    return int(rec["tokens"]) if rec.get("key") == key else None


def _count_tokens(key: dict[str, Any], log: Callable[[str], Any] | None) -> int:
    corpus = load_corpus(key["data"], log=log)
    tok = get_tokenizer(key["tokenizer"], corpus, vocab_size=key["vocab_size"], log=log)
    return int(load_token_splits(corpus, tok, ("train",), show_progress=False)["train"].size)


def resolve_token_budget(
    *,
    out: str | Path,
    data: str,
    tokenizer: str | None,
    vocab_size: int,
    epochs: float,
    estimate: int | None,
    estimate_data: str,
    batch_size: int,
    seq_len: int,
    count: bool,
    log: Callable[[str], Any] | None = None,
) -> dict[str, Any]:
    """The number of training tokens and the steps of ``epochs`` epochs.

    Args:
        out: the reproduction's output directory (holds ``train_tokens.json``).
        data, tokenizer, vocab_size: the corpus and tokenizer of the runs.
        epochs: epochs over the training split.
        estimate: the scale's token estimate, valid for ``estimate_data`` only.
        estimate_data: the corpus the estimate is for.
        batch_size, seq_len: sequences per step and tokens per sequence.
        count: tokenise the train split when no record exists (a real run); False (a dry
            run) uses the estimate instead, when it applies.
        log: progress messages.

    Returns:
        ``{"epochs", "train_tokens", "source" ("counted" or "estimate"), "max_steps",
        "tokens_per_step"}``.
    """
    out = Path(out)
    key = {"data": data, "tokenizer": tokenizer, "vocab_size": vocab_size}
    tokens, source = _read_record(out, key), "counted"
    if tokens is None:
        if not count and estimate is not None and data == estimate_data:
            tokens, source = int(estimate), "estimate"
        else:
            if log:
                log(f"reproduce: tokenising the train split of {data} to count its tokens")
            tokens = _count_tokens(key, log)
            out.mkdir(parents=True, exist_ok=True)
            atomic_write_text(out / _RECORD, json.dumps({"key": key, "tokens": tokens}) + "\n")
    return {
        "epochs": epochs,
        "train_tokens": tokens,
        "source": source,
        "max_steps": epoch_steps(epochs, tokens, batch_size, seq_len),
        "tokens_per_step": batch_size * seq_len,
    }
