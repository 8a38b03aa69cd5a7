"""CmplxBERT-LoRA: a pre-trained real BERT made complex-valued by complex LoRA adapters.

F. Tamburini, "Complexifying BERT using LoRA adapters", CLiC-it 2024. :func:`complexify`
turns a Hugging Face ``BertModel`` / ``BertForMaskedLM`` / ``BertForSequenceClassification``
into a :class:`CmplxBert` (named ``CmplxBERTLoRA_r`` for rank r) that WRAPS the model's own
frozen real tensors (no copies) and adds, following the paper's sec. 3:

* embeddings (sec. 3.2): word, position and token-type tables E + A·Bᴴ
  (:class:`~complexformer.cmplxbert.ComplexLoRAEmbedding`), summed, complex LayerNorm;
* every targeted linear (sec. 3.1): y = (W + s·A·Bᴴ)·x + (b + b_c), W·x = W·Re x + j W·Im x
  (:class:`~complexformer.cmplxbert.ComplexLoRALinear`);
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
linear is one real GEMM on 2·B·T rows (:func:`~complexformer.cmplxbert.planar.planar_lora_linear`;
Q, K and V together), the split GELU and the complex LayerNorm work on the rows in place, and
attention reads [Re | Im] head features: the real score is torch's fused SDPA on 2d
features, the modulus score (:func:`complexformer.nn.functional.modulus_attention`, shared
with :class:`complexformer.nn.MultiheadAttention`) one batched GEMM of the stacked queries
[[Qr, Qi], [Qi, -Qr]] with [Kr, Ki] for (Re S; Im S). Without autograd the layers share
the scratch buffers of a per-call workspace (no fresh multi-MB tensors per layer).

transformers is imported inside the functions that need it (extra ``hf``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from complexformer.nn import CGELU, CReLU, LayerNorm
from complexformer.nn import functional as CF

from .config import CmplxBertConfig, ComplexLoRAConfig
from .layers import ComplexLoRALinear, check_indices
from .planar import (
    Workspace,
    modulus_attention,
    planar_add_real,
    planar_dropout,
    planar_lora_linear,
    planar_modulus,
    planar_norm,
    to_complex,
    to_planar,
    workspace_alloc,
)

__all__ = [
    "POOLINGS",
    "CmplxAttention",
    "CmplxBert",
    "CmplxBertOutput",
    "CmplxBody",
    "CmplxDenseNorm",
    "CmplxEmbeddings",
    "CmplxEncoder",
    "CmplxIntermediate",
    "CmplxLayer",
    "CmplxMLMHead",
    "CmplxPooler",
    "CmplxPredictions",
    "CmplxSelfAttention",
    "CmplxTransform",
    "GatedGELU",
    "mean_pool",
    "split_tanh",
]


def split_tanh(z: Tensor) -> Tensor:
    """tanh(Re z) + j tanh(Im z) (bounded; the real tanh on real inputs)."""
    return torch.view_as_complex(torch.tanh(torch.view_as_real(z)))


# --------------------------------------------------------------------------- output


@dataclass
class CmplxBertOutput:
    """What :meth:`CmplxBert.forward` returns (attribute access like HF's ModelOutput).

    Attributes:
        loss: MLM cross-entropy (labels -100 ignored), classification or token
            classification loss, or for pre-training MLM + next-sentence loss (both labels
            given); None without labels.
        logits: real (B, T, V) MLM, (B, num_labels) classification or (B, T, num_labels)
            token classification logits; None for a model without a head.
        seq_relationship_logits: real (B, 2) next-sentence logits (pre-training) or None.
        last_hidden_state: complex (B, T, hidden).
        pooler_output: complex (B, hidden) (split tanh of the pooler) or None.
        hidden_states: with ``output_hidden_states=True``, the complex (B, T, hidden)
            output of the embeddings and of every layer (transformers' convention), else
            None.
    """

    loss: Tensor | None = None
    logits: Tensor | None = None
    last_hidden_state: Tensor | None = None
    pooler_output: Tensor | None = None
    seq_relationship_logits: Tensor | None = None
    hidden_states: tuple[Tensor, ...] | None = None


# --------------------------------------------------------------------------- blocks
# The module tree mirrors transformers' names (always with the "bert." prefix), so that
# target suffixes and adapter keys read like the HF ones and adapters move between the
# MLM and the classification model.


class CmplxEmbeddings(nn.Module):
    """Word + token-type + position embeddings (each E + s·A·Bᴴ), complex LayerNorm,
    dropout (Tamburini 2024, sec. 3.2); HF's ``BertEmbeddings``."""

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
        ws: Workspace | None = None,
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
                check_indices(idx)
            real = tables[0][0].base_layer(input_ids) + tables[1][0].base_layer(token_type_ids)
            real = real + tables[2][0].base_layer(position_ids)  # (B, T, E)
            lead = real.shape[:-1]
            fac = [m.planar_lora_factors(idx, real.dtype) for m, idx in tables if m.r > 0]
            delta = None
            if fac:
                a = torch.cat([f[0].expand(lead + f[0].shape[-1:]) for f in fac], -1)
                delta = (a @ torch.cat([f[1] for f in fac], 0)).unflatten(-1, (2, -1))
            e = planar_add_real(delta, real)  # (B, T, 2, E)
        return planar_dropout(
            planar_norm(self.LayerNorm, e, ws, "hidden"), self.dropout, self.training
        )

    def forward(
        self, input_ids: Tensor, token_type_ids: Tensor | None, position_ids: Tensor | None
    ) -> Tensor:
        return to_complex(self.planar(input_ids, token_type_ids, position_ids))  # (B, T, E)


class CmplxSelfAttention(nn.Module):
    """Q, K, V projections in one GEMM, then softmax(|Q·Kᴴ|/√d)·V or
    softmax(Re(Q·Kᴴ)/√d)·V per head (sec. 3.3); HF's ``BertSelfAttention``."""

    def __init__(self, query, key, value, n_heads: int, score: str, dropout: float) -> None:
        super().__init__()
        self.query, self.key, self.value = query, key, value
        self.n_heads, self.score, self.dropout = n_heads, score, dropout

    def planar(self, x: Tensor, bias: Tensor | None, ws: Workspace | None = None) -> Tensor:
        """planar rows (B, T, 2, E) -> (B, T, 2, E)."""
        b, t, _, e = x.shape
        h = self.n_heads
        d = e // h
        qkv = planar_lora_linear(
            (self.query, self.key, self.value),
            x,
            alloc=workspace_alloc(ws, "big", x),
        )
        qkv = qkv.view(b, t, 2, 3, h, d)
        p = self.dropout if self.training else 0.0
        if self.score == "real":  # softmax(Re(Q·Kᴴ))·V: torch's fused SDPA on [Re | Im]
            heads = qkv.permute(3, 0, 4, 1, 2, 5)  # (3, B, H, T, 2, d)
            if ws is not None:
                a = ws.get("att_qkv", heads.shape, x).copy_(heads).view(3, b, h, t, 2 * d)
            else:
                a = heads.reshape(3, b, h, t, 2 * d)
            o = F.scaled_dot_product_attention(
                a[0],
                a[1],
                a[2],
                attn_mask=None if bias is None else bias.to(a.dtype),
                dropout_p=p,
                scale=1.0 / math.sqrt(d),
            )
        else:
            o = modulus_attention(qkv, bias, 1.0 / math.sqrt(d), p, ws)
        o = o.view(b, h, t, 2, d).permute(0, 2, 3, 1, 4)  # (B, T, 2, H, d)
        if ws is not None:
            return ws.get("big", (b, t, 2, e), x).view(o.shape).copy_(o).view(b, t, 2, e)
        return o.reshape(b, t, 2, e)

    def forward(self, h: Tensor, bias: Tensor | None) -> Tensor:
        return to_complex(self.planar(to_planar(h), bias))


class CmplxDenseNorm(nn.Module):
    """LayerNorm(dropout(dense(x)) + residual): HF's BertSelfOutput / BertOutput."""

    def __init__(self, dense, norm: LayerNorm, dropout: float) -> None:
        super().__init__()
        self.dense, self.LayerNorm, self.dropout = dense, norm, dropout

    def planar(
        self, x: Tensor, residual: Tensor, ws: Workspace | None = None, name: str = ""
    ) -> Tensor:
        """LayerNorm(dropout(dense(x)) + residual) on planar rows; without autograd the
        result lands in the workspace buffer ``name``."""
        if self.training and self.dropout > 0.0:
            y = planar_dropout(planar_lora_linear((self.dense,), x), self.dropout, True)
            y = y + residual
        elif ws is not None:  # the sum lands contiguous in a buffer (for the fused norm)
            y = planar_lora_linear((self.dense,), x, alloc=workspace_alloc(ws, "dense", x))
            y = torch.add(y, residual, out=ws.get("sum", y.shape, x))
        else:
            y = planar_lora_linear((self.dense,), x, residual=residual)
        return planar_norm(self.LayerNorm, y, ws, name)

    def forward(self, x: Tensor, residual: Tensor) -> Tensor:
        return to_complex(self.planar(to_planar(x), to_planar(residual)))


class CmplxAttention(nn.Module):
    """Self-attention then its output block; HF's ``BertAttention``."""

    def __init__(self, self_attn: CmplxSelfAttention, output: CmplxDenseNorm) -> None:
        super().__init__()
        self.self = self_attn
        self.output = output

    def planar(self, x: Tensor, bias: Tensor | None, ws: Workspace | None = None) -> Tensor:
        return self.output.planar(self.self.planar(x, bias, ws), x, ws, "hidden_attn")

    def forward(self, h: Tensor, bias: Tensor | None) -> Tensor:
        return to_complex(self.planar(to_planar(h), bias))


class GatedGELU(nn.Module):
    """GELU's gate of the real part applied to the whole complex number: z·Φ(Re z).

    On a real input it is GELU; the imaginary part goes through the gate that the real part
    opens (Φ, the standard normal CDF, or its tanh approximation), so a unit that the real
    model switches off passes no imaginary part either. The paper's split GELU (sec. 3.5)
    passes the imaginary part through every unit with gain GELU′(0) = 1/2 (docs/cmplxbert.md,
    "Adapter growth").
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def gate(self, x: Tensor) -> Tensor:
        if self.approximate == "tanh":
            return 0.5 * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))
        return 0.5 * (1.0 + torch.erf(x * 0.7071067811865476))

    def forward(self, z: Tensor) -> Tensor:
        return z * self.gate(z.real).to(z.real.dtype)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


def planar_activation(act: nn.Module, y: Tensor) -> Tensor:
    """A split activation (CReLU, CGELU) or the gated GELU on planar rows, in place without
    autograd; any other (complex) activation through complex tensors."""
    if isinstance(act, GatedGELU):
        return y * act.gate(y[..., 0, :]).unsqueeze(-2)
    if isinstance(act, CReLU):
        return torch.relu_(y) if not torch.is_grad_enabled() else F.relu(y)
    if not isinstance(act, CGELU):
        return to_planar(act(to_complex(y)))
    if not torch.is_grad_enabled():
        return torch._C._nn.gelu_(y, approximate=act.approximate)
    return F.gelu(y, approximate=act.approximate)


class CmplxIntermediate(nn.Module):
    """The feed-forward expansion and its split activation (sec. 3.5); HF's
    ``BertIntermediate``."""

    def __init__(self, dense, act: nn.Module) -> None:
        super().__init__()
        self.dense, self.intermediate_act_fn = dense, act

    def planar(self, x: Tensor, ws: Workspace | None = None) -> Tensor:
        """dense, then the split activation on both rows alike (in place without autograd)."""
        y = planar_lora_linear((self.dense,), x, alloc=workspace_alloc(ws, "big", x))
        return planar_activation(self.intermediate_act_fn, y)

    def forward(self, x: Tensor) -> Tensor:
        return to_complex(self.planar(to_planar(x)))


class CmplxLayer(nn.Module):
    """One encoder layer; HF's ``BertLayer``."""

    def __init__(
        self, attention: CmplxAttention, intermediate: CmplxIntermediate, output: CmplxDenseNorm
    ) -> None:
        super().__init__()
        self.attention, self.intermediate, self.output = attention, intermediate, output

    def planar(self, x: Tensor, bias: Tensor | None, ws: Workspace | None = None) -> Tensor:
        """One encoder layer on planar rows (B, T, 2, E): no complex tensor inside. With a
        workspace (no autograd) the result is its buffer "hidden" (x's own buffer, if x came
        from the previous layer: x is dead by then)."""
        a = self.attention.planar(x, bias, ws)
        return self.output.planar(self.intermediate.planar(a, ws), a, ws, "hidden")

    def forward(self, h: Tensor, bias: Tensor | None) -> Tensor:
        return to_complex(self.planar(to_planar(h), bias))


class CmplxEncoder(nn.Module):
    """The encoder layers (``layer``); HF's ``BertEncoder``."""

    def __init__(self, layers: list[CmplxLayer]) -> None:
        super().__init__()
        self.layer = nn.ModuleList(layers)


class CmplxPooler(nn.Module):
    """The first token's hidden state through a LoRA linear and the split tanh; HF's
    ``BertPooler``."""

    def __init__(self, dense) -> None:
        super().__init__()
        self.dense = dense

    def forward(self, h: Tensor) -> Tensor:
        return split_tanh(self.dense(h[:, 0]))  # (B, E) complex


class CmplxBody(nn.Module):
    """Embeddings, encoder and pooler, named like HF's ``BertModel`` (the ``bert.``
    prefix of every target name)."""

    def __init__(
        self, embeddings: CmplxEmbeddings, encoder: CmplxEncoder, pooler: CmplxPooler | None
    ) -> None:
        super().__init__()
        self.embeddings, self.encoder, self.pooler = embeddings, encoder, pooler


class CmplxTransform(nn.Module):
    """The MLM head's dense, activation and complex LayerNorm; HF's
    ``BertPredictionHeadTransform``."""

    def __init__(self, dense, act: nn.Module, norm: LayerNorm) -> None:
        super().__init__()
        self.dense, self.transform_act_fn, self.LayerNorm = dense, act, norm

    def planar(self, x: Tensor) -> Tensor:
        """planar rows (..., 2, E) -> (..., 2, E)."""
        y = planar_activation(self.transform_act_fn, planar_lora_linear((self.dense,), x))
        return planar_norm(self.LayerNorm, y)

    def forward(self, x: Tensor) -> Tensor:
        return to_complex(self.planar(to_planar(x)))


class CmplxPredictions(nn.Module):
    """Transform then the LoRA-adapted decoder (complex vocabulary logits); HF's
    ``BertLMPredictionHead``. Without a transform (``heads="linear"``, the paper's head)
    the decoder reads the hidden states directly."""

    def __init__(self, transform: CmplxTransform | None, decoder: ComplexLoRALinear) -> None:
        super().__init__()
        self.transform, self.decoder = transform, decoder

    def planar(self, x: Tensor) -> Tensor:
        """planar rows (..., 2, E) -> the vocabulary logits' planar rows (..., 2, V)."""
        if self.transform is not None:
            x = self.transform.planar(x)
        return planar_lora_linear((self.decoder,), x)

    def forward(self, h: Tensor) -> Tensor:
        return to_complex(self.planar(to_planar(h)))  # (B, T, V) complex


class CmplxMLMHead(nn.Module):
    """The MLM head (``predictions``), HF's ``BertOnlyMLMHead``; with the next-sentence head
    (``seq_relationship``, a LoRA-adapted linear on the pooled first token) HF's
    ``BertPreTrainingHeads``."""

    def __init__(
        self, predictions: CmplxPredictions, seq_relationship: ComplexLoRALinear | None = None
    ) -> None:
        super().__init__()
        self.predictions = predictions
        self.seq_relationship = seq_relationship

    def planar(self, x: Tensor) -> Tensor:
        return self.predictions.planar(x)

    def forward(self, h: Tensor) -> Tensor:
        return self.predictions(h)


# --------------------------------------------------------------------------- the model

#: The sentence vectors of sequence classification (:attr:`CmplxBert.pooling`).
POOLINGS = ("cls", "mean")


def mean_pool(h: Tensor, attention_mask: Tensor | None) -> Tensor:
    """The masked mean over tokens of (B, T, E) hidden states (real or complex): (B, E)."""
    if attention_mask is None:
        return h.mean(1)
    w = attention_mask.unsqueeze(-1)  # (B, T, 1)
    real = h.real.dtype if h.is_complex() else h.dtype
    return (h * w.to(real)).sum(1) / w.sum(1).clamp(min=1)


class CmplxBert(nn.Module):
    """A complex-valued BERT built by :func:`complexify` (CmplxBERTLoRA_r, Tamburini 2024).

    Attributes:
        name: ``"CmplxBERTLoRA_{r}"``.
        lora_config: the adapters' :class:`~complexformer.cmplxbert.ComplexLoRAConfig`.
        model_config: the :class:`~complexformer.cmplxbert.CmplxBertConfig` (attention score,
            head output, whitening, what trains).
        task: ``"base"`` (no head), ``"mlm"``, ``"pretraining"`` (MLM and next-sentence
            heads), ``"classification"`` or ``"token_classification"``.
        hf_config: the wrapped model's ``BertConfig`` (not copied).
        bert: embeddings, encoder (and pooler), named like transformers' ``BertModel``.
        cls: the MLM head (``cls.predictions.transform`` / ``.decoder``, and for
            pre-training the next-sentence head ``cls.seq_relationship``) or None.
        classifier: the LoRA-adapted classifier (sequence or token classification) or None.
        pooling: the sentence vector of sequence classification: ``"cls"`` (the first
            token through the pooler, BERT's and the paper's) or ``"mean"`` (the masked mean
            of the last hidden states, the pooler skipped: how sentence-transformers bases
            such as MiniLM are used; ``cbert-finetune --pooling``). Saved with the model.
    """

    def __init__(
        self,
        body: CmplxBody,
        lora_config: ComplexLoRAConfig,
        model_config: CmplxBertConfig,
        hf_config,
        task: str,
        hf_class: str,
        cls: CmplxMLMHead | None = None,
        classifier: ComplexLoRALinear | None = None,
        classifier_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.bert = body
        self.cls = cls
        self.classifier = classifier
        self.classifier_dropout = classifier_dropout
        self.lora_config = lora_config
        self.model_config = model_config
        self.hf_config = hf_config
        self.task = task
        self.hf_class = hf_class
        self.name = f"CmplxBERTLoRA_{lora_config.r}"
        self.pooling = "cls"

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
        return z.abs() if self.model_config.head_output == "modulus" else z.real

    def _planar_to_real(self, y: Tensor) -> Tensor:
        """Real logits (..., n) from a head's planar rows (..., 2, n)."""
        return planar_modulus(y) if self.model_config.head_output == "modulus" else y[..., 0, :]

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        position_ids: Tensor | None = None,
        return_logits: bool = True,
        next_sentence_label: Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> CmplxBertOutput:
        """HF-like forward.

        Args:
            input_ids: (B, T) int64.
            attention_mask: (B, T), 1 for tokens and 0 for padding (HF convention), or None.
            token_type_ids: (B, T) segment ids (default 0).
            labels: (B, T) MLM targets (-100 = ignored) or (B,) class ids / (B, num_labels)
                floats (multi-label) / (B,) floats (regression, num_labels = 1).
            position_ids: (B, T) or (1, T) (default 0 .. T-1).
            next_sentence_label: (B,) 0 (B follows A) or 1 (random B), for pre-training.
            return_logits: False (MLM with labels): the head runs only on the labelled
                tokens, which gives the same loss for a fraction of the work, and
                ``logits`` is None.
            output_hidden_states: also return the embeddings' and every layer's output.

        Returns:
            :class:`CmplxBertOutput` (complex hidden states, real logits, loss).
        """
        if input_ids.dim() != 2:
            raise ValueError(
                f"CmplxBert: input_ids must be (batch, length), got shape {tuple(input_ids.shape)}"
            )
        b, t = input_ids.shape
        # the encoder runs on planar rows (B, T, 2, E): real tensors, Re row then Im row
        ws = Workspace() if not torch.is_grad_enabled() else None  # scratch shared by the layers
        if output_hidden_states:
            ws = None  # the layers' outputs are kept, so they get their own tensors
        x = self.bert.embeddings.planar(input_ids, token_type_ids, position_ids, ws)
        states = [to_complex(x)] if output_hidden_states else None
        bias = self._attention_bias(attention_mask, b, t, x.dtype)
        for layer in self.bert.encoder.layer:
            x = layer.planar(x, bias, ws)
            if states is not None:
                states.append(to_complex(x))
        h = to_complex(x)  # (B, T, E) complex
        pooled = self.bert.pooler(h) if self.bert.pooler is not None else None
        loss = logits = nsp = None
        if self.task in ("mlm", "pretraining"):
            if labels is not None and not return_logits:  # only the labelled tokens' rows
                flat = labels.reshape(-1)
                keep = flat != -100
                rows = x.reshape(-1, 2, x.shape[-1])[keep]  # (n, 2, E)
                loss = F.cross_entropy(self._planar_to_real(self.cls.planar(rows)), flat[keep])
            else:
                logits = self._planar_to_real(self.cls.planar(x))  # (B, T, V)
                if labels is not None:
                    loss = F.cross_entropy(
                        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100
                    )
        first = pooled if self.model_config.heads == "bert" else h[:, 0]  # (B, E) complex
        if self.task == "pretraining":  # next-sentence logits (B, 2), HF's seq_relationship
            nsp = self._to_real(self.cls.seq_relationship(first))
            if next_sentence_label is None or labels is None:
                loss = None
            else:
                loss = loss + F.cross_entropy(nsp, next_sentence_label.reshape(-1))
        elif self.task == "classification":
            if self.pooling == "mean":
                first = mean_pool(h, attention_mask)
            x = CF.complex_dropout(first, self.classifier_dropout, self.training)
            logits = self._to_real(self.classifier(x))  # (B, num_labels)
            if labels is not None:
                loss = self._classification_loss(logits, labels)
        elif self.task == "token_classification":
            x = CF.complex_dropout(h, self.classifier_dropout, self.training)
            logits = self._to_real(self.classifier(x))  # (B, T, num_labels)
            if labels is not None:
                loss = F.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100
                )
        return CmplxBertOutput(
            loss=loss,
            logits=logits,
            last_hidden_state=h,
            pooler_output=pooled,
            seq_relationship_logits=nsp,
            hidden_states=None if states is None else tuple(states),
        )

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
        c = self.model_config
        return (
            f"name={self.name!r}, task={self.task!r}, base={self.hf_class}, "
            f"attention_score={c.attention_score!r}, head_output={c.head_output!r}, "
            f"whiten={c.whiten!r}, pooling={self.pooling!r}"
        )
