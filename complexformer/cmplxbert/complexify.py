"""``complexify``: wrap a Hugging Face BERT into a complex-valued :class:`CmplxBert`.

F. Tamburini, "Complexifying BERT using LoRA adapters", CLiC-it 2024, sec. 3: every targeted
frozen real linear and embedding gets a complex LoRA adapter (:mod:`.layers`), every
LayerNorm becomes a complex LayerNorm initialised from γ, β, and the heads follow the
``train_heads`` policy. This module walks the HF module tree, builds the CmplxBERT blocks of
:mod:`.modeling`, checks the target names (a misspelt suffix is an error with a close-match
hint) and sets which parameters train.

transformers is imported inside the functions that need it (extra ``hf``).
"""

from __future__ import annotations

import difflib
import math

import torch
from torch import nn

from complexformer.nn import CGELU, CReLU, LayerNorm
from complexformer.runtime import require

from .config import CmplxBertConfig, ComplexLoRAConfig, split_overrides, target_matches
from .layers import ComplexLoRAEmbedding, ComplexLoRALinear
from .modeling import (
    CmplxAttention,
    CmplxBert,
    CmplxBody,
    CmplxDenseNorm,
    CmplxEmbeddings,
    CmplxEncoder,
    CmplxIntermediate,
    CmplxLayer,
    CmplxMLMHead,
    CmplxPooler,
    CmplxPredictions,
    CmplxSelfAttention,
    CmplxTransform,
    GatedGELU,
)
from .start import (
    calibration_ids,
    head_offset,
    layer_norm_bound,
    offset_directions,
    set_attention_offsets,
)

__all__ = ["complexify"]

_SUPPORTED = (
    "BertModel, BertForMaskedLM, BertForPreTraining, BertForSequenceClassification, "
    "BertForTokenClassification"
)

# One name per kind of targetable layer (layer 0): used to tell a misspelt target suffix
# (an error) from one that a model simply lacks (e.g. "classifier" on a BertModel).
_KNOWN_NAMES = (
    "bert.embeddings.word_embeddings",
    "bert.embeddings.position_embeddings",
    "bert.embeddings.token_type_embeddings",
    "bert.encoder.layer.0.attention.self.query",
    "bert.encoder.layer.0.attention.self.key",
    "bert.encoder.layer.0.attention.self.value",
    "bert.encoder.layer.0.attention.output.dense",
    "bert.encoder.layer.0.intermediate.dense",
    "bert.encoder.layer.0.output.dense",
    "bert.pooler.dense",
    "cls.predictions.transform.dense",
    "cls.predictions.decoder",
    "cls.seq_relationship",
    "classifier",
)


def _activation(name, mode: str = "split") -> nn.Module:
    gelu = GatedGELU if mode == "gated" else CGELU
    if name == "gelu":
        return gelu("none")
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return gelu("tanh")
    if name == "relu":
        return CReLU()
    raise ValueError(
        f"complexify: hidden_act {name!r} is not supported; allowed: 'gelu', "
        "'gelu_new', 'gelu_pytorch_tanh', 'gelu_fast', 'relu'"
    )


class _Builder:
    """Wraps the HF modules one by one, recording names, for :func:`complexify`."""

    def __init__(self, config: ComplexLoRAConfig, model_config: CmplxBertConfig) -> None:
        self.config = config
        self.model_config = model_config
        self.names: list[str] = []  # every targetable (linear / embedding) name
        self.adapted: list[str] = []
        self.head_layers: list[ComplexLoRALinear] = []

    def linear(self, lin: nn.Linear, name: str, head: bool = False) -> ComplexLoRALinear:
        c = self.config
        self.names.append(name)
        if c.is_target(name):
            self.adapted.append(name)
            layer = ComplexLoRALinear(
                lin,
                r=c.r,
                alpha=c.alpha,
                dropout=c.dropout,
                init=c.init,
                complex_bias=c.complex_bias,
            )
        else:  # no adapter: the frozen real map on Re and Im
            layer = ComplexLoRALinear(lin, r=0, complex_bias=False)
        if head:
            self.head_layers.append(layer)
        return layer

    def embedding(self, emb: nn.Embedding, name: str) -> ComplexLoRAEmbedding:
        c = self.config
        self.names.append(name)
        if c.is_target(name):
            self.adapted.append(name)
            return ComplexLoRAEmbedding(emb, r=c.r, alpha=c.alpha, init=c.embedding_init)
        return ComplexLoRAEmbedding(emb, r=0)

    def norm(self, ln: nn.LayerNorm) -> LayerNorm:
        mc = self.model_config
        out = LayerNorm.from_real(ln, whiten=mc.whiten)
        if mc.layer_norm_eps is not None:
            out.eps = float(mc.layer_norm_eps)
        out.requires_grad_(mc.train_norms)
        return out

    def check_targets(self, hf_class: str) -> None:
        tm = self.config.target_modules
        if isinstance(tm, str):
            if not self.adapted:
                raise ValueError(
                    f"complexify: target_modules regex {tm!r} matches no layer of "
                    f"{hf_class}; layer names look like: "
                    f"{', '.join(self.names[:4])}, ..."
                )
            return
        universe = set(self.names) | set(_KNOWN_NAMES)
        for s in tm:
            if not any(target_matches([s], n) for n in universe):
                suffixes = sorted(
                    {n.split(".")[-1] for n in universe}
                    | {".".join(n.split(".")[-2:]) for n in universe}
                )
                close = difflib.get_close_matches(s, suffixes, n=3, cutoff=0.5)
                hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
                raise ValueError(
                    f"complexify: target module {s!r} matches no layer of "
                    f"{hf_class}{hint}; allowed suffixes include: "
                    f"{', '.join(suffixes)}"
                )
        if not self.adapted:
            raise ValueError(f"complexify: target_modules {tm!r} select no layer of {hf_class}")


def _fresh_mlm_head(bert_model, hf_config):
    """A new ``BertOnlyMLMHead`` initialised like transformers' ``_init_weights``, with the
    decoder weight tied to the word embeddings and the decoder bias tied to
    ``predictions.bias``."""
    from transformers.models.bert.modeling_bert import BertOnlyMLMHead

    head = BertOnlyMLMHead(hf_config).to(bert_model.embeddings.word_embeddings.weight.device)
    std = hf_config.initializer_range
    with torch.no_grad():
        tr = head.predictions.transform
        tr.dense.weight.normal_(0.0, std)
        tr.dense.bias.zero_()
        tr.LayerNorm.weight.fill_(1.0)
        tr.LayerNorm.bias.zero_()
        head.predictions.bias.zero_()
    head.predictions.decoder.weight = bert_model.embeddings.word_embeddings.weight
    head.predictions.decoder.bias = head.predictions.bias
    return head


def _keep_start(bert, model_config: CmplxBertConfig, layers, heads, norms, calibration) -> None:
    """The ``start="keep"`` values of the complex biases (:mod:`.start`): attention offsets
    for modulus scores (directions calibrated on ``calibration`` ids, by default random
    tokens) and real offsets on the modulus heads."""
    if model_config.attention_score == "modulus":
        hc = bert.config
        mask = None
        if calibration is None:
            calibration = calibration_ids(
                hc.vocab_size, hc.max_position_embeddings, exclude=(hc.pad_token_id,)
            )
        elif not isinstance(calibration, torch.Tensor):  # a tokenizer output (a mapping)
            calibration, mask = calibration["input_ids"], calibration.get("attention_mask")
        dev = bert.embeddings.word_embeddings.weight.device
        mask = None if mask is None else mask.to(dev)
        dirs = offset_directions(bert, calibration.to(dev), mask)
        for layer, u in zip(layers, dirs, strict=True):
            set_attention_offsets(layer.attention.self, u, model_config.start_offset)
    if model_config.head_output == "modulus":
        e = bert.config.hidden_size
        bound = max([math.sqrt(e)] + [layer_norm_bound(n) for n in norms])
        with torch.no_grad():
            for layer in heads:
                if layer.bias_c is not None:
                    layer.bias_c[:, 0] = head_offset(layer.base_layer, bound)


def _bert_and_task(model: nn.Module, transformers, model_config: CmplxBertConfig):
    """The encoder inside ``model`` and the task its class names (step 1 of complexify)."""
    hf_class = type(model).__name__
    if isinstance(model, transformers.BertForMaskedLM):
        bert, task = model.bert, "mlm"
    elif isinstance(model, transformers.BertForPreTraining):
        bert, task = model.bert, "pretraining"
    elif isinstance(model, transformers.BertForSequenceClassification):
        bert, task = model.bert, "classification"
    elif isinstance(model, transformers.BertForTokenClassification):
        bert, task = model.bert, "token_classification"
    elif isinstance(model, transformers.BertModel):
        bert, task = model, "base"
    else:
        raise ValueError(f"complexify: unsupported model class {hf_class}; allowed: {_SUPPORTED}")
    hc = bert.config
    if getattr(hc, "is_decoder", False) or getattr(hc, "add_cross_attention", False):
        raise ValueError(
            "complexify: decoder BERTs (is_decoder / add_cross_attention) are not "
            "supported; CmplxBERT is a bidirectional encoder"
        )
    if model_config.add_mlm_head and task != "base":
        raise ValueError(
            f"complexify: add_mlm_head=True needs a plain BertModel, got "
            f"{hf_class} (which {'has' if task in ('mlm', 'pretraining') else 'has another'} head)"
        )
    return bert, task


def _complex_body(bld: _Builder, bert: nn.Module, model_config: CmplxBertConfig):
    """The complex embeddings, encoder layers and pooler around ``bert`` (step 2).

    Returns:
        ``(CmplxBody, [CmplxLayer, ...])``.
    """
    hc = bert.config
    p_hidden = hc.hidden_dropout_prob
    emb = bert.embeddings
    embeddings = CmplxEmbeddings(
        bld.embedding(emb.word_embeddings, "bert.embeddings.word_embeddings"),
        bld.embedding(emb.position_embeddings, "bert.embeddings.position_embeddings"),
        bld.embedding(emb.token_type_embeddings, "bert.embeddings.token_type_embeddings"),
        bld.norm(emb.LayerNorm),
        p_hidden,
    )
    layers = []
    for i, hl in enumerate(bert.encoder.layer):
        pre = f"bert.encoder.layer.{i}"
        sa, ao = hl.attention.self, hl.attention.output
        self_attn = CmplxSelfAttention(
            bld.linear(sa.query, f"{pre}.attention.self.query"),
            bld.linear(sa.key, f"{pre}.attention.self.key"),
            bld.linear(sa.value, f"{pre}.attention.self.value"),
            hc.num_attention_heads,
            model_config.attention_score,
            hc.attention_probs_dropout_prob,
        )
        attn_out = CmplxDenseNorm(
            bld.linear(ao.dense, f"{pre}.attention.output.dense"), bld.norm(ao.LayerNorm), p_hidden
        )
        inter = CmplxIntermediate(
            bld.linear(hl.intermediate.dense, f"{pre}.intermediate.dense"),
            _activation(hc.hidden_act, model_config.activation),
        )
        out = CmplxDenseNorm(
            bld.linear(hl.output.dense, f"{pre}.output.dense"),
            bld.norm(hl.output.LayerNorm),
            p_hidden,
        )
        layers.append(CmplxLayer(CmplxAttention(self_attn, attn_out), inter, out))
    pooler = None
    if bert.pooler is not None and model_config.heads == "bert":
        pooler = CmplxPooler(bld.linear(bert.pooler.dense, "bert.pooler.dense", head=True))
    return CmplxBody(embeddings, CmplxEncoder(layers), pooler), layers


def _complex_heads(
    bld: _Builder, model: nn.Module, bert: nn.Module, task: str, model_config: CmplxBertConfig
):
    """The complex MLM (and next-sentence) head or the classifier of ``task`` (step 3).

    Returns:
        ``(mlm head or None, classifier or None, classifier dropout, task, the real MLM head
        or None, the new head's real parameters that train)``; ``task`` becomes ``"mlm"``
        with ``add_mlm_head``.
    """
    hc = bert.config
    cls_head = classifier = hf_head = None
    fresh: list[nn.Parameter] = []
    p_cls = 0.0
    if task in ("mlm", "pretraining") or model_config.add_mlm_head:
        hf_head = model.cls if task != "base" else _fresh_mlm_head(bert, hc)
        if model_config.add_mlm_head:
            tr = hf_head.predictions.transform
            fresh = [hf_head.predictions.bias]
            if model_config.heads == "bert":
                fresh += [tr.dense.weight, tr.dense.bias]
            task = "mlm"
        pr = hf_head.predictions
        transform = None
        if model_config.heads == "bert":
            transform = CmplxTransform(
                bld.linear(pr.transform.dense, "cls.predictions.transform.dense", head=True),
                _activation(hc.hidden_act, model_config.activation),
                bld.norm(pr.transform.LayerNorm),
            )
        decoder = bld.linear(pr.decoder, "cls.predictions.decoder", head=True)
        nsp = None
        if task == "pretraining":  # the next-sentence head reads the pooled first token
            nsp = bld.linear(model.cls.seq_relationship, "cls.seq_relationship", head=True)
        cls_head = CmplxMLMHead(CmplxPredictions(transform, decoder), nsp)
    if task in ("classification", "token_classification"):
        classifier = bld.linear(model.classifier, "classifier", head=True)
        cd = getattr(hc, "classifier_dropout", None)
        p_cls = cd if cd is not None else hc.hidden_dropout_prob
    return cls_head, classifier, p_cls, task, hf_head, fresh


def _heads_policy(bld: _Builder, bert: nn.Module, model_config: CmplxBertConfig) -> None:
    """What trains in the heads (``train_heads``; step 4): the adapters (default), nothing,
    or the whole head (its real weights too, except the tied word embedding)."""
    tied = {id(bert.embeddings.word_embeddings.weight)}
    for layer in bld.head_layers:
        if model_config.train_heads == "none":
            for p in (layer.lora_A, layer.lora_B, layer.bias_c):
                if p is not None:
                    p.requires_grad_(False)
        elif model_config.train_heads == "full":
            for p in layer.base_layer.parameters():
                if id(p) not in tied:
                    p.requires_grad_(True)


def complexify(
    model: nn.Module,
    config: ComplexLoRAConfig | None = None,
    model_config: CmplxBertConfig | None = None,
    calibration=None,
    **overrides,
) -> CmplxBert:
    """Wrap a Hugging Face BERT into a complex-valued :class:`CmplxBert` (Tamburini 2024).

    The HF model's parameters are frozen in place (``requires_grad=False``) and referenced,
    not copied; :class:`CmplxBert` adds complex LoRA adapters, complex biases, complex
    LayerNorms (initialised from γ, β) and complex heads. Trainable by default: every
    adapter (A, B) and complex bias b_c (encoder, embeddings, pooler, heads), every complex
    LayerNorm affine (``train_norms``), and with ``add_mlm_head`` the new head's real
    transform weights and decoder bias. ``train_heads`` changes the heads' policy.

    Args:
        model: ``transformers.BertModel``, ``BertForMaskedLM``, ``BertForPreTraining``
            (MLM and next-sentence heads), ``BertForSequenceClassification`` or
            ``BertForTokenClassification`` (encoder-only; no cross-attention).
        config: the adapters, a :class:`~complexformer.cmplxbert.ComplexLoRAConfig`
            (default: its defaults).
        model_config: the complex model around them, a
            :class:`~complexformer.cmplxbert.CmplxBertConfig` (default: its defaults).
        calibration: for ``start="keep"`` with modulus scores, the (B, T) token ids (or a
            tokenizer output with ``input_ids`` and ``attention_mask``) through the real
            model on which the offset directions are chosen; None (default): 32 random
            sequences of 128 tokens (seeded), which needs no data.
        **overrides: fields of either config to replace, e.g.
            ``complexify(m, r=16, attention_score="real")``.

    Returns:
        the :class:`CmplxBert` (``name == f"CmplxBERTLoRA_{r}"``), in the model's train/eval
        mode.

    Raises:
        ValueError: an unsupported model class or activation, ``add_mlm_head`` on a model
            that is not a plain BertModel, or target modules that match nothing.
    """
    transformers = require("transformers", "hf", "complexify (CmplxBERT-LoRA)")
    config = ComplexLoRAConfig() if config is None else config
    model_config = CmplxBertConfig() if model_config is None else model_config
    for value, kind in ((config, ComplexLoRAConfig), (model_config, CmplxBertConfig)):
        if not isinstance(value, kind):
            raise ValueError(f"complexify: expected a {kind.__name__}, got {type(value).__name__}")
    lora_kw, model_kw = split_overrides(overrides)
    if lora_kw:
        config = config.replace(**lora_kw)
    if model_kw:
        model_config = model_config.replace(**model_kw)
    hf_class = type(model).__name__
    bert, task = _bert_and_task(model, transformers, model_config)
    model.requires_grad_(False)

    bld = _Builder(config, model_config)
    hc = bert.config
    body, layers = _complex_body(bld, bert, model_config)
    heads = _complex_heads(bld, model, bert, task, model_config)
    cls_head, classifier, p_cls, task, hf_head, fresh = heads
    bld.check_targets(hf_class)
    _heads_policy(bld, bert, model_config)
    for p in fresh:  # a new head's real weights are not pre-trained: they train
        p.requires_grad_(True)
    if model_config.start == "keep":
        norms = [bert.encoder.layer[-1].output.LayerNorm]
        if cls_head is not None and model_config.heads == "bert":
            norms.append(hf_head.predictions.transform.LayerNorm)
        logit_heads = [cls_head.predictions.decoder] if cls_head is not None else []
        if cls_head is not None and cls_head.seq_relationship is not None:
            logit_heads.append(cls_head.seq_relationship)
        if classifier is not None:
            logit_heads.append(classifier)
        _keep_start(bert, model_config, layers, logit_heads, norms, calibration)

    out = CmplxBert(
        body,
        config,
        model_config,
        hc,
        task,
        hf_class,
        cls=cls_head,
        classifier=classifier,
        classifier_dropout=p_cls,
    )
    return out.train(model.training)
