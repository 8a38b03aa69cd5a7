"""The transformers configuration of a CmplxBERT (``model_type="cmplxbert"``).

Self-contained: this file imports only ``transformers``, so that an exported CmplxBERT
directory carries it beside the weights and loads with ``trust_remote_code=True`` where
complexformer is not installed (with ``modeling_cmplxbert.py``). Inside the package it is the
configuration of the classes of :mod:`complexformer.hf.cmplxbert`.
"""

from __future__ import annotations

from typing import Any

from transformers import BertConfig, PretrainedConfig

__all__ = ["POOLINGS", "CmplxBertConfig"]

#: The sentence vectors of sequence classification: the pooled first token, or the masked mean.
POOLINGS = ("cls", "mean")


class CmplxBertConfig(PretrainedConfig):
    """Configuration of the CmplxBERT transformers classes (``model_type="cmplxbert"``).

    Args:
        bert: the real ``BertConfig`` as a dict (``BertConfig.to_dict()``).
        lora: the :class:`~complexformer.cmplxbert.ComplexLoRAConfig` as a dict.
        cmplxbert: the :class:`~complexformer.cmplxbert.CmplxBertConfig` as a dict.
        pooling: sequence classification's sentence vector, ``"cls"`` or ``"mean"``.
        base_model_name_or_path: the real BERT the model was complexified from (peft's
            name; what :meth:`CmplxBertPreTrainedModel.from_adapters` reloads by default).
        base_class: the transformers BERT class that was complexified (``BertModel`` for an
            MLM model whose head was added, ``add_mlm_head``); default the class's own.
        **kwargs: ``PretrainedConfig``'s (``num_labels``, ``id2label``, ``label2id``, ...).
    """

    model_type = "cmplxbert"

    def __init__(
        self,
        bert: dict[str, Any] | None = None,
        lora: dict[str, Any] | None = None,
        cmplxbert: dict[str, Any] | None = None,
        pooling: str = "cls",
        base_model_name_or_path: str | None = None,
        base_class: str | None = None,
        **kwargs: Any,
    ) -> None:

        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        self.bert = dict(bert or {})
        self.lora = dict(lora or {})
        self.cmplxbert = dict(cmplxbert or {})
        self.pooling = pooling
        self.base_model_name_or_path = base_model_name_or_path
        self.base_class = base_class
        for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads"):
            if key in self.bert:
                kwargs.setdefault(key, self.bert[key])
        kwargs.setdefault("tie_word_embeddings", self.bert.get("tie_word_embeddings", True))
        super().__init__(**kwargs)

    def bert_config(self) -> BertConfig:
        """The real ``BertConfig``, with this config's labels and problem type."""
        keep = {k: v for k, v in self.bert.items() if k not in ("architectures", "auto_map")}
        return BertConfig(
            **{**keep, "num_labels": self.num_labels, "problem_type": self.problem_type},
            id2label=self.id2label,
            label2id=self.label2id,
        )
