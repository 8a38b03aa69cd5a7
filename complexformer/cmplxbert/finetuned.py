"""A fine-tuned CmplxBERT classifier, kept: the mean-pooled classifier and its directory.

``cbert-finetune`` trains sentence-transformers bases (the packaged MiniLM) on the masked
mean of the last hidden states (:class:`MeanPooled`, around a real BERT or a CmplxBERT) and
keeps each fine-tuned CmplxBERT as a CmplxBERT directory (:func:`save_finetuned`) that
``load_cmplxbert``, ``info``, ``cbert-predict`` and the transformers classes read.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from torch import nn

from complexformer.nn import functional as CF

from .config import ComplexLoRAConfig
from .labelled import ClassificationTask
from .loading import is_cmplxbert_dir, read_cmplxbert_meta, save_cmplxbert

__all__ = ["MeanPooled", "base_of", "save_finetuned"]


def base_of(model_path: str) -> str:
    """The real BERT of ``model_path``: a CmplxBERT directory's base, else itself."""
    return read_cmplxbert_meta(model_path)["base"] if is_cmplxbert_dir(model_path) else model_path


class MeanPooled(nn.Module):
    """A BERT classifier (real or CmplxBERT) fed with the masked mean of the last hidden
    states, as sentence-transformers models are used: mean → dropout → classifier (→ modulus
    or real part for CmplxBERT); the pooler is skipped (such models do not train it)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, labels=None, token_type_ids=None):
        m = self.model
        w = attention_mask.unsqueeze(-1)  # (B, T, 1)
        kw = {"attention_mask": attention_mask, "token_type_ids": token_type_ids}
        if hasattr(m, "lora_config"):  # CmplxBert
            h = m(input_ids, **kw).last_hidden_state  # (B, T, E)
            mean = (h * w.to(h.real.dtype)).sum(1) / w.sum(1).clamp(min=1)  # (B, E) complex
            x = CF.complex_dropout(mean, m.classifier_dropout, m.training)
            logits = m._to_real(m.classifier(x))
        else:  # transformers BertForSequenceClassification
            h = m.bert(input_ids=input_ids, **kw).last_hidden_state
            mean = (h * w.to(h.dtype)).sum(1) / w.sum(1).clamp(min=1)
            logits = m.classifier(m.dropout(mean))
        loss = None if labels is None else nn.functional.cross_entropy(logits, labels)
        return SimpleNamespace(loss=loss, logits=logits)


def save_finetuned(
    model: nn.Module,
    directory: str | Path,
    model_path: str,
    tokenizer: Any,
    task: ClassificationTask,
    cfg: Any,
    seed: int | None = None,
) -> Path:
    """Write a fine-tuned CmplxBERT classifier as a CmplxBERT directory
    (:func:`~complexformer.cmplxbert.loading.save_cmplxbert`): its adapters, complex biases,
    norms and head, the tokenizer, and in ``cmplxbert.json`` what prediction needs: the
    labels, the task type, the pooling, the maximum length and the text fields.

    Args:
        model: a :class:`CmplxBert` classifier, or :class:`MeanPooled` around one (saved
            with ``pooling="mean"``).
        directory: the folder to write (replaced atomically).
        model_path: what fine-tuning started from: a CmplxBERT directory (its base is
            recorded) or a real BERT.
        tokenizer: the tokenizer the examples were encoded with.
        task: the labelled task (labels, task type).
        cfg: the fine-tuning settings (``max_len`` and the field names are recorded).
        seed: recorded with the settings.
    """
    pooling = "mean" if isinstance(model, MeanPooled) else "cls"
    inner = model.model if isinstance(model, MeanPooled) else model
    if not isinstance(getattr(inner, "lora_config", None), ComplexLoRAConfig):
        raise ValueError(
            f"save_finetuned: a CmplxBERT is kept, got a {type(inner).__name__} (the real "
            "baselines keep results only)"
        )
    inner.pooling = pooling
    base = base_of(model_path)
    if base != "minilm" and Path(base).exists():
        base = str(Path(base).resolve())
    extra = {
        "num_labels": task.num_labels,
        "labels": list(task.labels),
        "task_type": task.task_type,
        "max_len": cfg.max_len,
        "text_field": cfg.text_field,
        "pair_field": cfg.pair_field,
        "finetuned": {"task": task.name, "from": str(model_path), "seed": seed},
    }
    return save_cmplxbert(inner, directory, base, tokenizer, extra=extra)
