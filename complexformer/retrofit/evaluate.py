"""Perplexity and generation of a saved retrofit (what ``complexformer evaluate`` and
``complexformer generate`` run when ``--ckpt`` is an adaptation directory or a retrofit run)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from ..data import load_corpus, load_token_splits
from ..data.splits import CHUNK_CHARS
from ..runtime import eval_mode
from ..training.evaluate import evaluate_perplexity
from .io import find_adaptation_dir, load_adaptation
from .task import wrap_tokenizer

__all__ = ["is_retrofit", "retrofit_generate", "retrofit_perplexity", "run_data_spec"]


def run_data_spec(path: str | os.PathLike) -> str | None:
    """The corpus a retrofit run trained on (its ``train_config.json``), when known."""
    for d in (Path(path), Path(path).parent):
        f = d / "train_config.json"
        if f.is_file():
            return json.loads(f.read_text(encoding="utf-8")).get("data")
    return None


def retrofit_perplexity(
    path: str | os.PathLike,
    data: str | None = None,
    split: str = "val",
    batch_size: int = 4,
    max_blocks: int | None = None,
    seq_len: int | None = None,
    loaded: tuple[Any, Any, Any] | None = None,
    log=print,
) -> dict[str, Any]:
    """Perplexity of a saved adaptation on a corpus split, with the base model's tokenizer.

    Args:
        path: an adaptation directory or a retrofit run.
        data: corpus spec (default: the run's, else ``stdlib``).
        split: ``train``, ``val`` or ``test``.
        batch_size: blocks per forward pass.
        max_blocks: evaluate only the first this many blocks.
        seq_len: tokens per block (default: the retrofit's training length).
        loaded: ``load_adaptation(path)``'s result, to skip loading again.
        log: message sink.

    Returns:
        ``{"split", "data", "loss", "ppl", "tokens", "blocks"}``.
    """
    model, hf_tok, cfg = loaded if loaded is not None else load_adaptation(path)
    spec = data or run_data_spec(path) or "stdlib"
    tokens = load_token_splits(
        load_corpus(spec, log=log), wrap_tokenizer(hf_tok), (split,), log=log
    )[split]
    block = (seq_len or cfg.seq_len) - 1
    if len(tokens) < block + 1:
        why = (
            f"; a corpus of few documents is cut into chunks of {CHUNK_CHARS // 1024} KiB and "
            "needs at least three of them for train, validation and test"
            if len(tokens) == 0
            else ""
        )
        raise ValueError(
            f"the {split} split of {spec!r} has {len(tokens)} tokens, fewer than one block of "
            f"{block + 1}{why}; use a larger corpus, another --split or a smaller seq_len"
        )
    res = evaluate_perplexity(model, tokens, block, batch_size, max_blocks=max_blocks)
    return {"split": split, "data": spec, **res}


@torch.no_grad()
def retrofit_generate(
    path: str | os.PathLike,
    prompt: str,
    max_new_tokens: int = 200,
    temperature: float = 0.8,
    top_p: float = 0.95,
    top_k: int = 0,
    seed: int | None = None,
    use_cache: bool = True,
    loaded: tuple[Any, Any, Any] | None = None,
) -> str:
    """Continue ``prompt`` with a saved adaptation through the model's own ``generate``.

    Temperature 0 is greedy decoding; the returned text is the prompt plus the continuation.
    """
    model, tok, _ = loaded if loaded is not None else load_adaptation(path)
    ids = tok(prompt, return_tensors="pt")["input_ids"]
    if ids.shape[1] == 0:
        ids = torch.tensor([[tok.bos_token_id or tok.eos_token_id]])
    if seed is not None:
        torch.manual_seed(seed)
    kwargs: dict[str, Any] = {"do_sample": temperature > 0}
    if temperature > 0:
        kwargs.update(temperature=temperature, top_p=top_p, top_k=top_k or None)
    with eval_mode(model):
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=max_new_tokens,
            use_cache=use_cache,
            pad_token_id=tok.eos_token_id,
            **kwargs,
        )
    return tok.decode(out[0], skip_special_tokens=False)


def is_retrofit(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an adaptation directory or a retrofit run."""
    return find_adaptation_dir(path) is not None
