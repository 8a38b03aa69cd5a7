"""The ``ppl`` suite: loss and perplexity on a corpus split.

The split is cut into consecutive non-overlapping blocks of the model's length, and every token
but the first of the split is predicted once
(:func:`~complexformer.training.evaluate_perplexity`). The suite scores a ComplexFormer run,
checkpoint, final model or transformers export, and any artifact that is a causal language
model through its own ``perplexity`` (an :class:`~complexformer.artifacts.Artifact`: a
retrofit adaptation scores with its base model's tokenizer). The corpus is ``data``, else the
one the model records; a model that records none is refused by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn
from tqdm.auto import tqdm

from ..config import ConfigBase
from ..data import load_corpus, load_token_splits
from ..data.splits import CHUNK_CHARS
from ..results import markdown_table
from ..training import evaluate_perplexity
from .suite import BATCH_SIZE, DATA, SPLIT, Suite, data_spec, option, register_suite

__all__ = ["PplConfig", "PplSuite", "run_ppl_suite"]

_SPLITS = ("train", "val", "test")


@dataclass
class PplConfig(ConfigBase):
    """Settings of the ``ppl`` suite.

    Attributes:
        data: corpus spec (None: the one the model records).
        split: ``train``, ``val`` or ``test``.
        batch_size: blocks per forward pass (None: 8, a retrofit 4).
        max_blocks: score only the first this many blocks (None: all).
        device: where a model loaded from a path goes.
        progress: a tqdm bar over the forward passes.
    """

    data: str | None = None
    split: str = "val"
    batch_size: int | None = None
    max_blocks: int | None = None
    device: str = "cpu"
    progress: bool = True

    def validate(self) -> None:
        if self.split not in _SPLITS:
            raise ValueError(f"split must be one of {', '.join(_SPLITS)}, got {self.split!r}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.max_blocks is not None and self.max_blocks < 1:
            raise ValueError(f"max_blocks must be >= 1, got {self.max_blocks}")


@contextmanager
def _forward_bar(model: nn.Module | None, desc: str, enabled: bool) -> Iterator[None]:
    """A tqdm bar that counts the forward passes of ``model`` (one per batch of blocks)."""
    if model is None or not enabled:
        yield
        return
    bar = tqdm(desc=desc, unit="batch", leave=False)

    def count(*_: Any) -> None:  # returns None: the output stays the model's
        bar.update(1)

    handle = model.register_forward_hook(count)
    try:
        yield
    finally:
        handle.remove()
        bar.close()


def _lm_perplexity(run: Any, config: PplConfig, log: Callable[[str], Any]) -> dict[str, Any]:
    """Perplexity of a ComplexFormer LM (a loaded run)."""
    spec = data_spec(config.data, run, "data")
    model, tokenizer = run.model, run.tokenizer
    split = config.split
    corpus = load_corpus(spec, log=log)
    tokens = load_token_splits(corpus, tokenizer, splits=(split,), log=log)[split]
    if len(tokens) == 0:
        raise ValueError(
            f"the {split} split of {spec!r} holds no text: a corpus of few documents is cut "
            f"into chunks of {CHUNK_CHARS // 1024} KiB and needs at least three of them for "
            "train, validation and test; evaluate another --split or use a larger corpus"
        )
    res = evaluate_perplexity(
        model,
        tokens,
        model.config.max_seq_len - 1,
        config.batch_size or 8,
        max_blocks=config.max_blocks,
        device=next(model.parameters()).device,
    )
    return {"split": split, "data": spec, **res}


def _causal_lm_module(target: Any) -> nn.Module | None:
    """The network whose forward passes the progress bar counts."""
    run = getattr(target, "run", None) or target
    model = getattr(run, "model", None)
    if isinstance(model, nn.Module):
        return model
    retrofit = getattr(target, "retrofit", None)
    return retrofit[0] if retrofit else None


@register_suite
class PplSuite(Suite):
    """Loss and perplexity of a causal language model on a corpus split (see the module)."""

    name = "ppl"
    position = 0
    description = "loss and perplexity of --split of the corpus (any causal language model)"
    config_class = PplConfig
    options = (
        DATA,
        SPLIT,
        BATCH_SIZE,
        option("--max-blocks", metavar="N"),
    )

    def load(self, run: Any) -> Any:
        """An artifact is scored through its own ``perplexity`` (any causal LM); a path is
        loaded as a ComplexFormer run."""
        if hasattr(run, "perplexity"):
            return run
        return super().load(run)

    def compute(self, run: Any, data: Any) -> dict[str, Any]:
        config = self.config
        with _forward_bar(_causal_lm_module(run), "ppl", config.progress):
            if hasattr(run, "perplexity"):
                res = run.perplexity(
                    config.data, config.split, config.batch_size, config.max_blocks, log=self.say
                )
            else:
                res = _lm_perplexity(run, config, self.say)
        path = getattr(run, "path", None) or getattr(run, "source", None)
        model = {"kind": getattr(run, "kind", None), "path": str(path) if path else None}
        return {"model": model, "metrics": res}

    def markdown(self, payload: dict[str, Any]) -> str:
        m = payload["metrics"]
        row = [m["data"], m["split"], f"{m['loss']:.4f}", f"{m['ppl']:.2f}", f"{m['tokens']:,}"]
        table = markdown_table(["data", "split", "loss", "perplexity", "tokens"], [row])
        return f"# Perplexity\n\nModel: {payload['model']['path']}\n\n{table}\n"

    def summary(self, payload: dict[str, Any]) -> str:
        m = payload["metrics"]
        return (
            f"{m['data']} [{m['split']}]: loss {m['loss']:.4f}  perplexity {m['ppl']:.2f}  "
            f"({m['tokens']:,} tokens)"
        )


def run_ppl_suite(
    run: Any,
    config: PplConfig | None = None,
    out_dir: str | Path | None = None,
    log: Callable[[str], Any] | None = print,
) -> dict[str, Any]:
    """Perplexity of ``run`` (a path, a loaded run or an artifact) on a corpus split.

    Args:
        run: a ComplexFormer run directory, a :class:`~complexformer.lm.LoadedRun`, or an
            artifact from :func:`~complexformer.artifacts.load_artifact` (any causal LM).
        config: the settings (defaults when None).
        out_dir: where ``ppl.json`` and ``ppl.md`` go (None: not written).
        log: message sink.

    Returns:
        ``{"suite", "config", "model", "metrics"}``; ``metrics`` holds ``split``, ``data``,
        ``loss``, ``ppl`` and ``tokens``.
    """
    return PplSuite(config, log).run(run, out_dir)
