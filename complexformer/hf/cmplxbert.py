"""CmplxBERT (Tamburini 2024) as transformers model classes.

``CmplxBertConfig`` (``model_type="cmplxbert"``) holds the three configurations of a
complexified BERT: the real ``BertConfig`` (``bert``), the complex adapters
(``lora``, :class:`~complexformer.cmplxbert.ComplexLoRAConfig`) and the complex model's
choices (``cmplxbert``, :class:`~complexformer.cmplxbert.CmplxBertConfig`), with the
sentence pooling and transformers' own fields (``num_labels``, ``id2label``, ...).

The ``PreTrainedModel`` classes wrap a :class:`~complexformer.cmplxbert.CmplxBert` (its
planar kernels train and infer) under the attribute ``cmplxbert``, so that every weight is
named ``cmplxbert.<the CmplxBert name>``, and return transformers' ``ModelOutput`` types:

* :class:`CmplxBertModel`: the bare encoder, ``BaseModelOutputWithPooling`` (complex hidden
  states);
* :class:`CmplxBertForMaskedLM`: ``MaskedLMOutput``;
* :class:`CmplxBertForPreTraining`: MLM and next sentence, ``BertForPreTrainingOutput``;
* :class:`CmplxBertForSequenceClassification`: single sentences and pairs,
  ``SequenceClassifierOutput``;
* :class:`CmplxBertForTokenClassification`: ``TokenClassifierOutput``.

The way in from a BERT checkpoint is still :func:`~complexformer.cmplxbert.complexify`;
``from_cmplxbert`` makes the transformers model of a ``CmplxBert`` (the same tensors' values),
and ``save_pretrained`` writes ``config.json`` and ``model.safetensors`` (the full model,
frozen real weights included) and a ``manifest.json``. In peft's conventions:
``print_trainable_parameters``, ``save_adapters`` / ``from_adapters`` (only what trains, on
top of the base model's name or path) and ``merge_and_unload``.

This module imports transformers at its top: it is imported only by
:func:`complexformer.hf.register_auto_classes` and by users.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import load_file
from torch import Tensor, nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import (
    BaseModelOutputWithPooling,
    MaskedLMOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.models.bert.modeling_bert import BertForPreTrainingOutput

from ..cmplxbert.complexify import complexify
from ..cmplxbert.config import CmplxBertConfig as ModelConfig
from ..cmplxbert.config import ComplexLoRAConfig, split_config_dict
from ..cmplxbert.io import (
    load_adapters,
    print_trainable_parameters,
    save_adapters,
    trainable_parameter_counts,
)
from ..cmplxbert.layers import ComplexLoRALinear, merge_adapters
from ..cmplxbert.loading import load_cmplxbert, load_hf_bert
from ..storage import MANIFEST, atomic_write_text, update_manifest, verify_manifest, write_manifest
from .configuration_cmplxbert import CmplxBertConfig
from .markers import HF_KIND

#: What ``save_pretrained`` can write (:meth:`CmplxBertPreTrainedModel.saved_weights`).
SAVED_WEIGHTS = ("trainable", "all")
CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.safetensors"

__all__ = [
    "TASK_CLASSES",
    "CmplxBertConfig",
    "CmplxBertForMaskedLM",
    "CmplxBertForPreTraining",
    "CmplxBertForSequenceClassification",
    "CmplxBertForTokenClassification",
    "CmplxBertModel",
    "CmplxBertPreTrainedModel",
    "to_transformers",
]


def _lora_configs(config: CmplxBertConfig):

    return ComplexLoRAConfig.from_dict(config.lora), ModelConfig.from_dict(config.cmplxbert)


class CmplxBertPreTrainedModel(PreTrainedModel):
    """A :class:`~complexformer.cmplxbert.CmplxBert` of the class's task as a transformers
    model (weights under ``cmplxbert.``)."""

    config_class = CmplxBertConfig
    base_model_prefix = "cmplxbert"
    supports_gradient_checkpointing = False
    #: the HF BERT class that :func:`complexify` wraps, and its CmplxBERT task
    hf_class = "BertModel"
    task = "base"

    def __init__(self, config: CmplxBertConfig, real: nn.Module | None = None) -> None:
        super().__init__(config)

        lora, model_config = _lora_configs(config)
        added_head = model_config.add_mlm_head and self.task == "mlm"
        name = "BertModel" if added_head else self.hf_class
        self._values_given = real is not None  # then post_init initialises nothing
        if real is None:  # the real BERT's values come from the checkpoint
            real = getattr(transformers, name)(config.bert_config())
        if not added_head:
            model_config = model_config.replace(add_mlm_head=False)
        # the start's values are weights: they are loaded, so the calibration is skipped
        self.cmplxbert = complexify(real, lora, model_config.replace(start="paper"))
        self.cmplxbert.model_config = model_config
        self.cmplxbert.pooling = config.pooling
        if self.task in ("classification", "token_classification"):
            self.cmplxbert.classifier.base_layer.requires_grad_(True)  # a new head learns
        self._set_trainable(self._trainable_names())
        self.post_init()

    def _trainable_names(self) -> frozenset[str]:
        return frozenset(n for n, p in self.named_parameters() if p.requires_grad)

    def _set_trainable(self, names: frozenset[str]) -> None:
        """Only ``names`` train (the adapters, complex biases, norms and new heads).

        The other entries of the state dict are ``_keys_to_ignore_on_save`` when only what
        trains is saved (:meth:`saved_weights`), so that transformers' ``Trainer`` resumes
        from such a checkpoint without a missing-keys warning."""
        for n, p in self.named_parameters():
            p.requires_grad_(n in names)
        self._trainable = frozenset(names)
        frozen = [k for k in self.state_dict() if k not in self._trainable]
        self._keys_to_ignore_on_save = frozen if self.saved_weights() == "trainable" else None

    def saved_weights(self) -> str:
        """What :meth:`save_pretrained` writes: ``"trainable"`` (what trains, the real BERT's
        weights coming back from ``base_model_name_or_path``) or ``"all"``.

        ``config.save_weights`` decides; its default (None) is ``"trainable"`` when the model
        records its base model, as peft's adapter-only ``save_pretrained``, else ``"all"``.
        """
        choice = getattr(self.config, "save_weights", None)
        if choice is None:
            choice = "trainable" if self.config.base_model_name_or_path else "all"
        if choice not in SAVED_WEIGHTS:
            raise ValueError(f"save_weights must be one of {SAVED_WEIGHTS}, got {choice!r}")
        return choice

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: Any, *args: Any, **kwargs: Any):
        """transformers' ``from_pretrained``; afterwards only what trained when the model
        was built trains (loading makes every weight trainable).

        A directory saved with only what trains (``saved_weights: "trainable"`` in its
        ``config.json``: a ``Trainer`` checkpoint, say) is rebuilt on its real base model,
        ``base_model_name_or_path=`` (a BERT's hub name or directory) overriding the recorded
        one, and checked against its manifest (``verify=False`` skips the check).

        Raises:
            ValueError: no base model recorded nor given, a base whose frozen weights are not
                the ones the model was trained on, or a file that does not match the
                manifest.
        """
        d = Path(str(pretrained_model_name_or_path))
        base = kwargs.pop("base_model_name_or_path", None)
        verify = kwargs.pop("verify", True)
        if d.is_dir() and _saved_weights_of(d) == "trainable":
            return cls._from_trainable(d, base, verify, kwargs.get("config"))
        out = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        model = out[0] if isinstance(out, tuple) else out
        model._set_trainable(model._trainable)
        return out

    @classmethod
    def _from_trainable(
        cls, d: Path, base: str | None, verify: bool, config: CmplxBertConfig | None
    ) -> CmplxBertPreTrainedModel:
        """Rebuild a model saved with only what trains: the real BERT from its base, then the
        saved tensors on top."""
        if verify:
            verify_manifest(d, covers=(CONFIG_FILE, WEIGHTS_FILE))
        if not isinstance(config, CmplxBertConfig):
            config = CmplxBertConfig.from_pretrained(str(d))
        base = base or config.base_model_name_or_path
        if not base:
            raise ValueError(
                f"{d} holds only the trained tensors of a CmplxBERT and records no base model; "
                "pass base_model_name_or_path= (the real BERT's hub name or directory)"
            )
        labelled = cls.task in ("classification", "token_classification")
        real, _ = load_hf_bert(str(base), cls.task, config.num_labels if labelled else None)
        if config.cmplxbert.get("add_mlm_head") and cls.task == "mlm":
            real = real.bert if hasattr(real, "bert") else real  # the head was added
        model = cls(config, real=real)
        saved = load_file(str(d / WEIGHTS_FILE))
        unknown = sorted(set(saved) - set(model.state_dict()))
        missing = sorted(model._trainable - set(saved))
        if unknown or missing:
            raise ValueError(
                f"{d / WEIGHTS_FILE} does not fit {cls.__name__}: unknown tensors "
                f"{unknown[:4]}, missing trainable tensors {missing[:4]}"
            )
        want = getattr(config, "frozen_sha256", None)
        if want and frozen_fingerprint(model, model._trainable) != want:
            raise ValueError(
                f"the base model {base} is not the one {d} was trained on (its frozen real "
                "weights differ); pass base_model_name_or_path= with the right one"
            )
        model.load_state_dict(saved, strict=False)
        model.config.base_model_name_or_path = str(base)
        model._set_trainable(model._trainable)
        return model.eval()

    def _init_weights(self, module: nn.Module) -> None:
        """New weights (a head the checkpoint lacks) start as complexify starts them; a
        model built on a given real BERT (``real=``) keeps every value."""
        if self._values_given:
            return

        std = self.config.bert.get("initializer_range", 0.02)
        if isinstance(module, ComplexLoRALinear):
            with torch.no_grad():
                module.base_layer.weight.normal_(0.0, std)
                if module.base_layer.bias is not None:
                    module.base_layer.bias.zero_()
                if module.r > 0:
                    module.reset_adapter()
                if getattr(module, "bias_c", None) is not None:
                    module.bias_c.zero_()

    # ------------------------------------------------------------------ conversion
    @classmethod
    def config_of(cls, model: nn.Module) -> CmplxBertConfig:
        """The :class:`CmplxBertConfig` of a :class:`~complexformer.cmplxbert.CmplxBert`."""
        hc = model.hf_config
        bert = {k: v for k, v in hc.to_dict().items() if k not in ("id2label", "label2id")}
        return CmplxBertConfig(
            bert=bert,
            lora=model.lora_config.to_dict(),
            cmplxbert=model.model_config.to_dict(),
            base_class=model.hf_class,
            pooling=getattr(model, "pooling", "cls"),
            base_model_name_or_path=getattr(hc, "_name_or_path", None) or None,
            num_labels=getattr(hc, "num_labels", 2),
            id2label=dict(hc.id2label) if hasattr(hc, "id2label") else None,
            problem_type=getattr(hc, "problem_type", None),
            architectures=[cls.__name__],
        )

    @classmethod
    def from_cmplxbert(cls, model: nn.Module) -> CmplxBertPreTrainedModel:
        """The transformers model of a :class:`~complexformer.cmplxbert.CmplxBert` of this
        class's task: the same values; what trains in ``model`` trains, and so do the
        classifier's real weights of the classification classes (a new head, as in
        ``cbert-finetune``).

        Raises:
            ValueError: the model's task is not this class's (the class to use is named).
        """
        if model.task != cls.task:
            want = TASK_CLASSES.get(model.task)
            raise ValueError(
                f"{cls.__name__} holds a CmplxBERT of task {cls.task!r}; this one is "
                f"{model.task!r}" + (f": use {want.__name__}" if want else "")
            )
        out = cls(cls.config_of(model))
        state = model.state_dict()
        missing, unexpected = out.cmplxbert.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise ValueError(f"from_cmplxbert: missing {missing[:4]}, unexpected {unexpected[:4]}")
        trains = {n for n, p in model.named_parameters() if p.requires_grad}
        out._set_trainable(out._trainable | {f"cmplxbert.{n}" for n in trains})
        return out.to(next(model.parameters()).device).train(model.training)

    @classmethod
    def from_cmplxbert_dir(
        cls, directory: str | os.PathLike[str], *, verify: bool = True
    ) -> CmplxBertPreTrainedModel:
        """The transformers model of a CmplxBERT directory (``save_cmplxbert``, a kept
        fine-tuned model): its labels become ``id2label``."""

        model, _, meta = load_cmplxbert(directory, cls.task, verify=verify)
        out = cls.from_cmplxbert(model)
        labels = meta.get("labels")
        if labels and cls.task in ("classification", "token_classification"):
            out.config.id2label = dict(enumerate(labels))
            out.config.label2id = {name: i for i, name in enumerate(labels)}
        out.config.base_model_name_or_path = meta.get("base")
        return out

    # ------------------------------------------------------------------ saving
    def save_pretrained(
        self,
        save_directory: str | os.PathLike[str],
        *,
        weights: str | None = None,
        **kwargs: Any,
    ) -> None:
        """transformers' ``save_pretrained`` (safetensors), then a ``manifest.json`` with the
        sha256 of every file in the folder (``kind="cmplxbert-hf"``).

        Args:
            save_directory: the folder.
            weights: ``"trainable"`` writes only what trains (adapters, complex biases,
                norms and new heads' weights; the real BERT's weights are rebuilt from
                ``base_model_name_or_path`` on loading, and a sha256 of them is recorded
                so that another base is refused), ``"all"`` every tensor; default
                :meth:`saved_weights` (what transformers' ``Trainer`` checkpoints get).
            **kwargs: transformers' (``state_dict``, ``max_shard_size``, ...).
        """
        weights = weights or self.saved_weights()
        if weights not in SAVED_WEIGHTS:
            raise ValueError(f"weights must be one of {SAVED_WEIGHTS}, got {weights!r}")
        if weights == "trainable" and not self.config.base_model_name_or_path:
            raise ValueError(
                "weights='trainable' needs config.base_model_name_or_path (the real BERT the "
                "frozen weights come back from); set it or save with weights='all'"
            )
        keep = self._keys_to_ignore_on_save
        self._keys_to_ignore_on_save = None
        self.config.saved_weights = weights
        trainable_only = weights == "trainable"
        self.config.frozen_sha256 = (
            frozen_fingerprint(self, self._trainable) if trainable_only else None
        )
        if weights == "trainable":
            state = kwargs.pop("state_dict", None) or self.state_dict()
            kwargs["state_dict"] = {k: v for k, v in state.items() if k in self._trainable}
        try:
            super().save_pretrained(save_directory, **kwargs)
        finally:
            self._keys_to_ignore_on_save = keep
            del self.config.saved_weights, self.config.frozen_sha256
        d = Path(save_directory)
        files = [p.name for p in d.iterdir() if p.is_file() and p.name != MANIFEST]
        write_manifest(d, files, kind=HF_KIND)

    # ------------------------------------------------------------------ peft's conventions
    def print_trainable_parameters(self) -> str:
        """peft's line: ``trainable params: N || all params: M || trainable%: P``."""

        return print_trainable_parameters(self.cmplxbert)

    def get_nb_trainable_parameters(self) -> tuple[int, int]:
        """(trainable, all) real parameter entries, as peft's method of that name."""

        return trainable_parameter_counts(self.cmplxbert)

    def save_adapters(self, directory: str | os.PathLike[str]) -> Path:
        """Write only what trains (adapters, complex biases, norms, new heads' weights) and
        the configs, as peft's adapter-only ``save_pretrained``; the real weights come back
        from ``base_model_name_or_path`` (:meth:`from_adapters`)."""

        out = save_adapters(self.cmplxbert, directory)
        extra = {
            "base_model_name_or_path": self.config.base_model_name_or_path,
            "pooling": self.config.pooling,
            "id2label": {str(k): v for k, v in self.config.id2label.items()},
        }
        path = out / "adapter_config.json"
        meta = json.loads(path.read_text(encoding="utf-8"))

        atomic_write_text(path, json.dumps({**meta, **extra}, indent=2, sort_keys=True) + "\n")
        update_manifest(out, ("adapter_config.json",), kind="adapters")
        return out

    @classmethod
    def from_adapters(
        cls,
        directory: str | os.PathLike[str],
        base: str | None = None,
        *,
        verify: bool = True,
    ) -> CmplxBertPreTrainedModel:
        """peft's ``PeftModel.from_pretrained(base, adapters)``: complexify the real BERT
        ``base`` (default: the one recorded with the adapters) with the saved configs and
        load the adapters.

        Raises:
            ValueError: no base given nor recorded.
        """

        d = Path(directory)
        meta = json.loads((d / "adapter_config.json").read_text(encoding="utf-8"))
        base = base or meta.get("base_model_name_or_path")
        if not base:
            raise ValueError(
                f"from_adapters: {d} records no base model; pass base= (a BERT's hub name "
                "or directory, or 'minilm')"
            )
        id2label = {int(k): v for k, v in (meta.get("id2label") or {}).items()}
        n = len(id2label) if cls.task in ("classification", "token_classification") else None
        real, new_head = load_hf_bert(base, cls.task, n)
        lora, model_config = split_config_dict(meta)
        model_config = model_config.replace(add_mlm_head=new_head)
        model = complexify(real, lora, model_config.replace(start="paper"))
        model.model_config = model_config
        model.pooling = meta.get("pooling", "cls")

        with safe_open(str(d / "adapter_model.safetensors"), "pt") as f:
            saved = set(f.keys())
        for name, p in model.named_parameters():
            if name in saved:
                p.requires_grad_(True)
        load_adapters(model, d, strict=True, verify=verify)
        out = cls.from_cmplxbert(model)
        if id2label:
            out.config.id2label = id2label
            out.config.label2id = {v: k for k, v in id2label.items()}
        out.config.base_model_name_or_path = str(base)
        return out

    def merge_and_unload(self) -> CmplxBertPreTrainedModel:
        """Fold every adapter into its layer, W + s·A·Bᴴ (a complex weight held by the
        layer, :func:`~complexformer.cmplxbert.merge_adapters`), and freeze the model: the
        outputs are the unmerged ones (to float round-off) from one complex GEMM per layer.
        W is real and the update complex, so the folded weight cannot replace W in a real
        ``nn.Linear``; the adapters stay in the state dict. Returns ``self``."""

        merge_adapters(self.cmplxbert)
        self.requires_grad_(False)
        return self

    # ------------------------------------------------------------------ forward
    def _run(self, input_ids, attention_mask, token_type_ids, position_ids, labels,
             output_hidden_states, **kw):  # fmt: skip
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        return self.cmplxbert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            labels=labels,
            position_ids=position_ids,
            output_hidden_states=bool(output_hidden_states),
            **kw,
        )

    def get_input_embeddings(self) -> nn.Module:
        return self.cmplxbert.bert.embeddings.word_embeddings


def _saved_weights_of(d: Path) -> str | None:
    """The ``saved_weights`` recorded in ``d/config.json`` (None: all, or no such file)."""
    try:
        return json.loads((d / CONFIG_FILE).read_text(encoding="utf-8")).get("saved_weights")
    except (OSError, ValueError, AttributeError):
        return None


def frozen_fingerprint(model: nn.Module, trainable: frozenset[str] | set[str]) -> str:
    """sha256 over the names and bytes of the state-dict entries not in ``trainable`` (the real
    BERT's weights), in name order: what a model saved with only what trains must be rebuilt
    on. ``trainable`` is the model's own record (``_trainable``), not ``requires_grad``, which
    ``merge_and_unload`` clears."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        if name in trainable:
            continue
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _check_kwargs(kwargs: dict[str, Any]) -> None:
    if kwargs.get("output_attentions"):
        raise ValueError(
            "output_attentions: a CmplxBERT's attention weights are recomputed in its fused "
            "attention kernel and not returned"
        )


class CmplxBertModel(CmplxBertPreTrainedModel):
    """The bare complex encoder: complex ``last_hidden_state`` (B, T, E) and
    ``pooler_output`` (B, E)."""

    hf_class, task = "BertModel", "base"

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> BaseModelOutputWithPooling:
        _check_kwargs(kwargs)
        o = self._run(input_ids, attention_mask, token_type_ids, position_ids, None,
                      output_hidden_states)  # fmt: skip
        return BaseModelOutputWithPooling(
            last_hidden_state=o.last_hidden_state,
            pooler_output=o.pooler_output,
            hidden_states=o.hidden_states,
        )


class CmplxBertForMaskedLM(CmplxBertPreTrainedModel):
    """Masked-LM logits (B, T, V), real (modulus or real part of the complex head)."""

    hf_class, task = "BertForMaskedLM", "mlm"
    _tied_weights_keys = {
        "cmplxbert.cls.predictions.decoder.base_layer.weight": (
            "cmplxbert.bert.embeddings.word_embeddings.base_layer.weight"
        ),
    }

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
        labels: Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> MaskedLMOutput:
        _check_kwargs(kwargs)
        o = self._run(input_ids, attention_mask, token_type_ids, position_ids, labels,
                      output_hidden_states)  # fmt: skip
        return MaskedLMOutput(loss=o.loss, logits=o.logits, hidden_states=o.hidden_states)


class CmplxBertForPreTraining(CmplxBertPreTrainedModel):
    """MLM logits and next-sentence logits; the loss is their sum when both labels are
    given."""

    hf_class, task = "BertForPreTraining", "pretraining"
    _tied_weights_keys = CmplxBertForMaskedLM._tied_weights_keys

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
        labels: Tensor | None = None,
        next_sentence_label: Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> BertForPreTrainingOutput:
        _check_kwargs(kwargs)
        o = self._run(input_ids, attention_mask, token_type_ids, position_ids, labels,
                      output_hidden_states, next_sentence_label=next_sentence_label)  # fmt: skip
        return BertForPreTrainingOutput(
            loss=o.loss,
            prediction_logits=o.logits,
            seq_relationship_logits=o.seq_relationship_logits,
            hidden_states=o.hidden_states,
        )


class CmplxBertForSequenceClassification(CmplxBertPreTrainedModel):
    """Class logits (B, num_labels) of a sentence or a pair (``token_type_ids``); the loss
    follows ``problem_type`` as BERT's."""

    hf_class, task = "BertForSequenceClassification", "classification"

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
        labels: Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> SequenceClassifierOutput:
        _check_kwargs(kwargs)
        o = self._run(input_ids, attention_mask, token_type_ids, position_ids, labels,
                      output_hidden_states)  # fmt: skip
        return SequenceClassifierOutput(loss=o.loss, logits=o.logits, hidden_states=o.hidden_states)


class CmplxBertForTokenClassification(CmplxBertPreTrainedModel):
    """Tag logits (B, T, num_labels); labels -100 are ignored."""

    hf_class, task = "BertForTokenClassification", "token_classification"

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
        labels: Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> TokenClassifierOutput:
        _check_kwargs(kwargs)
        o = self._run(input_ids, attention_mask, token_type_ids, position_ids, labels,
                      output_hidden_states)  # fmt: skip
        return TokenClassifierOutput(loss=o.loss, logits=o.logits, hidden_states=o.hidden_states)


#: The transformers class of each CmplxBERT task.
TASK_CLASSES: dict[str, type[CmplxBertPreTrainedModel]] = {
    "base": CmplxBertModel,
    "mlm": CmplxBertForMaskedLM,
    "pretraining": CmplxBertForPreTraining,
    "classification": CmplxBertForSequenceClassification,
    "token_classification": CmplxBertForTokenClassification,
}


def to_transformers(model: nn.Module) -> CmplxBertPreTrainedModel:
    """The transformers model of a :class:`~complexformer.cmplxbert.CmplxBert`, of the class
    of its task (:data:`TASK_CLASSES`)."""
    return TASK_CLASSES[model.task].from_cmplxbert(model)
