"""CmplxBERT's inference forward pass for transformers, without complexformer.

Self-contained: this file imports only ``torch`` and ``transformers`` (and its sibling
``configuration_cmplxbert``), so that ``complexformer export`` can copy it beside a CmplxBERT's
weights and ``AutoModelFor...from_pretrained(DIR, trust_remote_code=True)`` runs it where
complexformer is not installed. It repeats, on complex tensors, the forward pass of
``complexformer.cmplxbert`` (Tamburini 2024, sec. 3): complex LoRA linears and embeddings
(W + s·A·Bᴴ, b + b_c), complex LayerNorm (scalar or full whitening, a 2×2 affine map), the
modulus or real attention score, the gated or split GELU, the split-tanh pooler and the heads
with a modulus or real output. The parameter names are those of the package's classes
(``cmplxbert.bert.encoder.layer.0.attention.self.query.lora_A``, ...), so the weights map 1:1;
the tests pin its outputs to the package's (1e-5). Training is the package's.
"""

from __future__ import annotations

import math
import re
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import (
    BaseModelOutputWithPooling,
    MaskedLMOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.models.bert.modeling_bert import BertForPreTrainingOutput

try:  # an exported directory: the sibling file
    from .configuration_cmplxbert import CmplxBertConfig
except ImportError:  # pragma: no cover - loaded as a top-level module
    from configuration_cmplxbert import CmplxBertConfig

__all__ = [
    "CmplxBertForMaskedLM",
    "CmplxBertForPreTraining",
    "CmplxBertForSequenceClassification",
    "CmplxBertForTokenClassification",
    "CmplxBertModel",
]


def _is_target(targets, name: str) -> bool:
    if isinstance(targets, str):
        return re.fullmatch(targets, name) is not None
    return any(name == s or name.endswith("." + s) for s in targets)


class LoRALinear(nn.Module):
    """y = (W + s·A·Bᴴ)·x + (b + b_c) on complex x; W, b real and frozen."""

    def __init__(self, n_in: int, n_out: int, lora: dict, name: str, bias: bool = True):
        super().__init__()
        self.base_layer = nn.Linear(n_in, n_out, bias=bias)
        self.r = int(lora.get("r", 8)) if _is_target(lora.get("target_modules", []), name) else 0
        alpha = lora.get("alpha")
        self.scaling = (float(alpha) if alpha is not None else self.r) / max(self.r, 1)
        if self.r > 0:
            self.lora_A = nn.Parameter(torch.zeros(n_out, self.r, 2))
            self.lora_B = nn.Parameter(torch.zeros(n_in, self.r, 2))
        if self.r > 0 and lora.get("complex_bias", True):
            self.bias_c = nn.Parameter(torch.zeros(n_out, 2))

    def forward(self, x: Tensor) -> Tensor:
        w = self.base_layer.weight.to(x.real.dtype)
        y = torch.complex(x.real @ w.T, x.imag @ w.T)
        if self.base_layer.bias is not None:
            y = y + self.base_layer.bias.to(x.real.dtype)
        if self.r > 0:
            a = torch.view_as_complex(self.lora_A).to(x.dtype)
            b = torch.view_as_complex(self.lora_B).to(x.dtype)
            y = y + self.scaling * ((x @ b.conj()) @ a.T)
        if hasattr(self, "bias_c"):
            y = y + torch.view_as_complex(self.bias_c).to(x.dtype)
        return y


class LoRAEmbedding(nn.Module):
    """Row i: E_i + s·A_i·Bᴴ."""

    def __init__(self, num: int, dim: int, lora: dict, name: str, padding_idx=None):
        super().__init__()
        self.base_layer = nn.Embedding(num, dim, padding_idx=padding_idx)
        self.r = int(lora.get("r", 8)) if _is_target(lora.get("target_modules", []), name) else 0
        alpha = lora.get("alpha")
        self.scaling = (float(alpha) if alpha is not None else self.r) / max(self.r, 1)
        if self.r > 0:
            self.lora_A = nn.Parameter(torch.zeros(num, self.r, 2))
            self.lora_B = nn.Parameter(torch.zeros(dim, self.r, 2))

    def forward(self, idx: Tensor) -> Tensor:
        e = self.base_layer(idx)
        z = torch.complex(e, torch.zeros_like(e))
        if self.r > 0:
            a = torch.view_as_complex(self.lora_A)[idx]
            b = torch.view_as_complex(self.lora_B)
            z = z + self.scaling * (a @ b.conj().T)
        return z


class ComplexLayerNorm(nn.Module):
    """Centre, whiten (scalar: by sqrt(E|z - mean|² + eps); full: by the 2×2 covariance's
    inverse square root), then a per-feature real 2×2 map and a complex bias."""

    def __init__(self, dim: int, eps: float, whiten: str) -> None:
        super().__init__()
        self.eps, self.whiten = eps, whiten
        self.weight = nn.Parameter(torch.eye(2).repeat(dim, 1, 1))
        self.bias = nn.Parameter(torch.zeros(dim, 2))

    def forward(self, z: Tensor) -> Tensor:
        xr, xi = z.real, z.imag
        cr, ci = xr - xr.mean(-1, keepdim=True), xi - xi.mean(-1, keepdim=True)
        if self.whiten == "scalar":
            inv = torch.rsqrt((cr * cr + ci * ci).mean(-1, keepdim=True) + self.eps)
            yr, yi = cr * inv, ci * inv
        else:
            e = self.eps
            vrr = (cr * cr).mean(-1, keepdim=True) + e
            vii = (ci * ci).mean(-1, keepdim=True) + e
            vri = (cr * ci).mean(-1, keepdim=True)
            s = torch.sqrt((vrr * vii - vri * vri).clamp_min(e * e))
            inv = 1.0 / (s * torch.sqrt(vrr + vii + 2.0 * s))
            p, q, r = (vii + s) * inv, -vri * inv, (vrr + s) * inv
            yr, yi = p * cr + q * ci, q * cr + r * ci
        w, b = self.weight.to(yr.dtype), self.bias.to(yr.dtype)
        out_r = yr * w[:, 0, 0] + yi * w[:, 0, 1] + b[:, 0]
        out_i = yr * w[:, 1, 0] + yi * w[:, 1, 1] + b[:, 1]
        return torch.complex(out_r, out_i)


def activation(name: str, mode: str):
    """The complex GELU (gated z·Φ(Re z) or split) or the split ReLU of ``hidden_act``."""
    approximate = "tanh" if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast") else "none"
    if name == "relu":
        return lambda z: torch.complex(F.relu(z.real), F.relu(z.imag))
    if mode == "gated":
        if approximate == "tanh":
            gate = lambda x: 0.5 * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))  # noqa: E731
        else:
            gate = lambda x: 0.5 * (1.0 + torch.erf(x * 0.7071067811865476))  # noqa: E731
        return lambda z: z * gate(z.real)
    return lambda z: torch.complex(
        F.gelu(z.real, approximate=approximate), F.gelu(z.imag, approximate=approximate)
    )


class Embeddings(nn.Module):
    def __init__(self, c, lora: dict, norm) -> None:
        super().__init__()
        p = "bert.embeddings."
        self.word_embeddings = LoRAEmbedding(
            c["vocab_size"], c["hidden_size"], lora, p + "word_embeddings", c.get("pad_token_id")
        )
        self.position_embeddings = LoRAEmbedding(
            c["max_position_embeddings"], c["hidden_size"], lora, p + "position_embeddings"
        )
        self.token_type_embeddings = LoRAEmbedding(
            c["type_vocab_size"], c["hidden_size"], lora, p + "token_type_embeddings"
        )
        self.LayerNorm = norm()

    def forward(self, ids: Tensor, token_type_ids, position_ids) -> Tensor:
        t = ids.shape[1]
        if position_ids is None:
            position_ids = torch.arange(t, device=ids.device)[None]
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(ids)
        e = self.word_embeddings(ids) + self.token_type_embeddings(token_type_ids)
        return self.LayerNorm(e + self.position_embeddings(position_ids))


class SelfAttention(nn.Module):
    def __init__(self, c, lora: dict, pre: str, score: str) -> None:
        super().__init__()
        e = c["hidden_size"]
        self.query = LoRALinear(e, e, lora, pre + ".query")
        self.key = LoRALinear(e, e, lora, pre + ".key")
        self.value = LoRALinear(e, e, lora, pre + ".value")
        self.n_heads, self.score = c["num_attention_heads"], score

    def forward(self, x: Tensor, bias: Tensor | None) -> Tensor:
        b, t, e = x.shape
        h = self.n_heads
        d = e // h
        q, k, v = (m(x).view(b, t, h, d).transpose(1, 2) for m in (self.query, self.key,
                                                                    self.value))  # fmt: skip
        s = q @ k.conj().transpose(-2, -1)  # Q·Kᴴ, (B, H, T, T)
        logits = (s.abs() if self.score == "modulus" else s.real) / math.sqrt(d)
        if bias is not None:
            logits = logits + bias
        a = torch.softmax(logits, -1)
        return (a.to(v.dtype) @ v).transpose(1, 2).reshape(b, t, e)


class DenseNorm(nn.Module):
    def __init__(self, n_in: int, n_out: int, lora: dict, name: str, norm) -> None:
        super().__init__()
        self.dense = LoRALinear(n_in, n_out, lora, name)
        self.LayerNorm = norm()

    def forward(self, x: Tensor, residual: Tensor) -> Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class Attention(nn.Module):
    def __init__(self, c, lora, pre: str, score: str, norm) -> None:
        super().__init__()
        e = c["hidden_size"]
        self.self = SelfAttention(c, lora, pre + ".attention.self", score)
        self.output = DenseNorm(e, e, lora, pre + ".attention.output.dense", norm)


class Intermediate(nn.Module):
    def __init__(self, c, lora, pre: str, act) -> None:
        super().__init__()
        self.dense = LoRALinear(c["hidden_size"], c["intermediate_size"], lora,
                                pre + ".intermediate.dense")  # fmt: skip
        self.act = act

    def forward(self, x: Tensor) -> Tensor:
        return self.act(self.dense(x))


class Layer(nn.Module):
    def __init__(self, c, lora, i: int, cb: dict, norm) -> None:
        super().__init__()
        pre = f"bert.encoder.layer.{i}"
        act = activation(c["hidden_act"], cb.get("activation", "gated"))
        self.attention = Attention(c, lora, pre, cb.get("attention_score", "modulus"), norm)
        self.intermediate = Intermediate(c, lora, pre, act)
        self.output = DenseNorm(c["intermediate_size"], c["hidden_size"], lora,
                                pre + ".output.dense", norm)  # fmt: skip

    def forward(self, x: Tensor, bias) -> Tensor:
        a = self.attention.output(self.attention.self(x, bias), x)
        return self.output(self.intermediate(a), a)


class Encoder(nn.Module):
    def __init__(self, layers: list[Layer]) -> None:
        super().__init__()
        self.layer = nn.ModuleList(layers)


class Pooler(nn.Module):
    def __init__(self, e: int, lora: dict) -> None:
        super().__init__()
        self.dense = LoRALinear(e, e, lora, "bert.pooler.dense")

    def forward(self, h: Tensor) -> Tensor:
        z = self.dense(h[:, 0])
        return torch.complex(torch.tanh(z.real), torch.tanh(z.imag))  # split tanh


class Body(nn.Module):
    def __init__(self, embeddings, encoder, pooler) -> None:
        super().__init__()
        self.embeddings, self.encoder, self.pooler = embeddings, encoder, pooler


class Transform(nn.Module):
    def __init__(self, e: int, lora: dict, act, norm) -> None:
        super().__init__()
        self.dense = LoRALinear(e, e, lora, "cls.predictions.transform.dense")
        self.act, self.LayerNorm = act, norm()

    def forward(self, x: Tensor) -> Tensor:
        return self.LayerNorm(self.act(self.dense(x)))


class Predictions(nn.Module):
    def __init__(self, transform, decoder) -> None:
        super().__init__()
        self.transform, self.decoder = transform, decoder

    def forward(self, h: Tensor) -> Tensor:
        return self.decoder(self.transform(h) if self.transform is not None else h)


class MLMHead(nn.Module):
    def __init__(self, predictions, seq_relationship) -> None:
        super().__init__()
        self.predictions, self.seq_relationship = predictions, seq_relationship


class CmplxBertCore(nn.Module):
    """The module tree of ``complexformer.cmplxbert.CmplxBert`` (inference only)."""

    def __init__(self, config: CmplxBertConfig, task: str, with_pooler: bool) -> None:
        super().__init__()
        c, lora, cb = config.bert_config().to_dict(), config.lora, config.cmplxbert
        eps = cb.get("layer_norm_eps") or c["layer_norm_eps"]
        whiten = cb.get("whiten", "scalar")
        e = c["hidden_size"]

        def norm():
            return ComplexLayerNorm(e, eps, whiten)

        self.task, self.cb, self.pooling = task, cb, config.pooling
        self.n_heads = c["num_attention_heads"]
        layers = [Layer(c, lora, i, cb, norm) for i in range(c["num_hidden_layers"])]
        heads = cb.get("heads", "bert")
        pooler = Pooler(e, lora) if with_pooler and heads == "bert" else None
        self.bert = Body(Embeddings(c, lora, norm), Encoder(layers), pooler)
        self.cls = self.classifier = None
        if task in ("mlm", "pretraining"):
            act = activation(c["hidden_act"], cb.get("activation", "gated"))
            transform = Transform(e, lora, act, norm) if heads == "bert" else None
            decoder = LoRALinear(e, c["vocab_size"], lora, "cls.predictions.decoder")
            nsp = LoRALinear(e, 2, lora, "cls.seq_relationship") if task == "pretraining" else None
            self.cls = MLMHead(Predictions(transform, decoder), nsp)
            decoder.base_layer.weight = self.bert.embeddings.word_embeddings.base_layer.weight
        if task in ("classification", "token_classification"):
            self.classifier = LoRALinear(e, config.num_labels, lora, "classifier")

    def to_real(self, z: Tensor) -> Tensor:
        return z.abs() if self.cb.get("head_output", "modulus") == "modulus" else z.real

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
                output_hidden_states=False):  # fmt: skip
        x = self.bert.embeddings(input_ids, token_type_ids, position_ids)
        states = [x] if output_hidden_states else None
        bias = None
        if attention_mask is not None and not bool(attention_mask.bool().all()):
            pad = ~attention_mask.bool()
            bias = torch.zeros(pad.shape, dtype=x.real.dtype, device=x.device)
            bias = bias.masked_fill(pad, float("-inf"))[:, None, None, :]
        for layer in self.bert.encoder.layer:
            x = layer(x, bias)
            if states is not None:
                states.append(x)
        pooled = self.bert.pooler(x) if self.bert.pooler is not None else None
        first = pooled if self.cb.get("heads", "bert") == "bert" else x[:, 0]
        out: dict[str, Any] = {"h": x, "pooled": pooled, "states": states, "first": first}
        if self.task in ("mlm", "pretraining"):
            out["logits"] = self.to_real(self.cls.predictions(x))
        if self.task == "pretraining":
            out["nsp"] = self.to_real(self.cls.seq_relationship(first))
        if self.task == "classification":
            if self.pooling == "mean":
                w = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
                w = w.unsqueeze(-1)
                first = (x * w.to(x.real.dtype)).sum(1) / w.sum(1).clamp(min=1)
            out["logits"] = self.to_real(self.classifier(first))
        if self.task == "token_classification":
            out["logits"] = self.to_real(self.classifier(x))
        return out


def _ce(logits: Tensor, labels: Tensor) -> Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=-100)  # fmt: skip


class CmplxBertPreTrainedModel(PreTrainedModel):
    config_class = CmplxBertConfig
    base_model_prefix = "cmplxbert"
    task = "base"
    with_pooler = True

    def __init__(self, config: CmplxBertConfig) -> None:
        super().__init__(config)
        self.cmplxbert = CmplxBertCore(config, self.task, self.pooler_of(config))
        self.post_init()

    def pooler_of(self, config) -> bool:
        added = config.cmplxbert.get("add_mlm_head") and self.task == "mlm"
        return True if added else self.with_pooler

    def _init_weights(self, module: nn.Module) -> None:
        pass  # every weight comes from the checkpoint

    def _run(self, input_ids, attention_mask, token_type_ids, position_ids, hidden):
        if hidden is None:
            hidden = self.config.output_hidden_states
        return self.cmplxbert(input_ids, attention_mask, token_type_ids, position_ids,
                              bool(hidden))  # fmt: skip


def _states(o):
    return None if o["states"] is None else tuple(o["states"])


class CmplxBertModel(CmplxBertPreTrainedModel):
    task = "base"

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                output_hidden_states=None, return_dict=None, **kwargs):  # fmt: skip
        o = self._run(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states)
        return BaseModelOutputWithPooling(last_hidden_state=o["h"], pooler_output=o["pooled"],
                                          hidden_states=_states(o))  # fmt: skip


class CmplxBertForMaskedLM(CmplxBertPreTrainedModel):
    task, with_pooler = "mlm", False
    _tied_weights_keys = {
        "cmplxbert.cls.predictions.decoder.base_layer.weight": (
            "cmplxbert.bert.embeddings.word_embeddings.base_layer.weight"
        ),
    }

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                labels=None, output_hidden_states=None, return_dict=None, **kwargs):  # fmt: skip
        o = self._run(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states)
        loss = None if labels is None else _ce(o["logits"], labels)
        return MaskedLMOutput(loss=loss, logits=o["logits"], hidden_states=_states(o))


class CmplxBertForPreTraining(CmplxBertPreTrainedModel):
    task = "pretraining"
    _tied_weights_keys = CmplxBertForMaskedLM._tied_weights_keys

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                labels=None, next_sentence_label=None, output_hidden_states=None,
                return_dict=None, **kwargs):  # fmt: skip
        o = self._run(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states)
        loss = None
        if labels is not None and next_sentence_label is not None:
            nsp = F.cross_entropy(o["nsp"], next_sentence_label.view(-1))
            loss = _ce(o["logits"], labels) + nsp
        return BertForPreTrainingOutput(loss=loss, prediction_logits=o["logits"],
                                        seq_relationship_logits=o["nsp"],
                                        hidden_states=_states(o))  # fmt: skip


class CmplxBertForSequenceClassification(CmplxBertPreTrainedModel):
    task = "classification"

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                labels=None, output_hidden_states=None, return_dict=None, **kwargs):  # fmt: skip
        o = self._run(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states)
        logits, loss = o["logits"], None
        if labels is not None:
            kind = self.config.problem_type or (
                "regression" if logits.shape[-1] == 1
                else "single_label_classification" if labels.dtype in (torch.long, torch.int)
                else "multi_label_classification"
            )  # fmt: skip
            if kind == "regression":
                y = labels.to(logits.dtype)
                one = logits.shape[-1] == 1
                loss = F.mse_loss(logits.squeeze(-1), y.view(-1)) if one else F.mse_loss(logits, y)
            elif kind == "single_label_classification":
                loss = F.cross_entropy(logits, labels.view(-1))
            else:
                loss = F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=_states(o))


class CmplxBertForTokenClassification(CmplxBertPreTrainedModel):
    task, with_pooler = "token_classification", False

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                labels=None, output_hidden_states=None, return_dict=None, **kwargs):  # fmt: skip
        o = self._run(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states)
        loss = None if labels is None else _ce(o["logits"], labels)
        return TokenClassifierOutput(loss=loss, logits=o["logits"], hidden_states=_states(o))
