"""Complex LoRA layers that wrap a frozen REAL base layer (Tamburini 2024, sec. 3.1-3.2).

F. Tamburini, "Complexifying BERT using LoRA adapters", CLiC-it 2024. A real pre-trained
linear layer y = W·x + b becomes a complex one by a complex low-rank update and a complex
bias (the paper's eq. for the LoRA-adapted linear layer):

    y = (W + s·A·Bᴴ)·x + (b + b_c),    x ∈ Cⁱⁿ,  W ∈ R^{out×in} frozen,

with A ∈ C^{out×r}, B ∈ C^{in×r}, b_c ∈ C^{out}, s = alpha / r, and the real W acting on a
complex x as W·x = W·Re x + j·W·Im x. An embedding table E ∈ R^{num×dim} becomes
E + s·A·Bᴴ (A ∈ C^{num×r}, B ∈ C^{dim×r}): the lookup of row i is E_i + s·A_i·Bᴴ.

"Wrap, don't copy" (peft style): the layer keeps a reference to the base module
(``base_layer``), whose parameters are frozen (``requires_grad=False``) and never written.
Adapters are REAL parameters with a trailing dimension of 2 for (Re, Im) (``lora_A`` (out, r, 2),
``lora_B`` (in, r, 2), ``bias_c`` (out, 2)), like every complex parameter of
``complexformer.nn``: NCCL all-reduce, AMP's GradScaler and safetensors need real tensors.

Forward. Unmerged, the layer computes that formula on the planar rows of x (real (..., 2, in),
the Re row then the Im row) with :func:`complexformer.cmplxbert.planar.planar_lora_linear`,
the same code that CmplxBERT runs on its hidden states for one linear or for Q, K and V
together; the stacked weights it builds are kept by one policy, only while no gradient can
flow into them.

Merging. W is real and the update complex, so W + s·A·Bᴴ cannot be written into the real
base weight. :meth:`merge` instead stores the merged complex weight in a separate
non-persistent REAL buffer ``merged_weight`` (out, in, 2) and the forward then does one
complex GEMM; the base stays bit-identical and :meth:`unmerge` just drops the buffer.
Merging is for inference: while merged the adapters get no gradient (call :meth:`unmerge`
before training again); merging twice is a no-op.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from complexformer.nn import functional as CF
from complexformer.nn.init import complex_normal_

from .config import INITS
from .planar import planar_add_real, planar_lora_linear, to_complex, to_planar

__all__ = [
    "ComplexLoRAEmbedding",
    "ComplexLoRALinear",
    "check_indices",
    "complex_lora_layers",
    "merge_adapters",
    "unmerge_adapters",
]


def _check_common(r, alpha, dropout, init, where: str) -> None:
    if isinstance(r, bool) or not isinstance(r, int) or r < 0:
        raise ValueError(f"{where}: r must be an integer >= 0 (0 = no adapter), got {r!r}")
    if alpha is not None and not alpha > 0:
        raise ValueError(f"{where}: alpha must be > 0 or None, got {alpha!r}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"{where}: dropout must be in [0, 1), got {dropout!r}")
    if init not in INITS:
        raise ValueError(f"{where}: unknown init {init!r}; allowed: {', '.join(map(repr, INITS))}")


class _LoRABase(nn.Module):
    """Shared adapter logic: factors, init, scaling, merge state."""

    lora_A: nn.Parameter | None
    lora_B: nn.Parameter | None

    def _make_factors(self, rows: int, cols: int, r: int, alpha, init, ref: Tensor) -> None:
        self.r = r
        self.alpha = float(alpha) if alpha is not None else float(r)
        self.scaling = self.alpha / r if r > 0 else 0.0
        self.init = init
        kw = {"device": ref.device, "dtype": ref.dtype}
        if r > 0:
            self.lora_A = nn.Parameter(torch.empty(rows, r, 2, **kw))  # (out|num, r, 2)
            self.lora_B = nn.Parameter(torch.empty(cols, r, 2, **kw))  # (in|dim, r, 2)
        else:
            self.register_parameter("lora_A", None)
            self.register_parameter("lora_B", None)
        self.register_buffer("merged_weight", None, persistent=False)
        self.merged = False

    def reset_adapter(self) -> None:
        """``zero_b``: B = 0, A ~ CN(0, 1/r); ``zero_a``: A = 0, B ~ CN(0, 1/B.shape[0])."""
        if self.r > 0:
            with torch.no_grad():
                if self.init == "zero_b":
                    complex_normal_(self.lora_A, std=1.0 / math.sqrt(self.r))
                    self.lora_B.zero_()
                else:
                    self.lora_A.zero_()
                    complex_normal_(self.lora_B, std=1.0 / math.sqrt(self.lora_B.shape[0]))
        if getattr(self, "bias_c", None) is not None:
            with torch.no_grad():
                self.bias_c.zero_()
        self.unmerge()

    @property
    def complex_A(self) -> Tensor | None:
        """A as a complex (rows, r) view of ``lora_A`` (no copy)."""
        return None if self.lora_A is None else torch.view_as_complex(self.lora_A)

    @property
    def complex_B(self) -> Tensor | None:
        """B as a complex (cols, r) view of ``lora_B`` (no copy)."""
        return None if self.lora_B is None else torch.view_as_complex(self.lora_B)

    def delta_weight(self) -> Tensor | None:
        """s·A·Bᴴ, complex (rows, cols); None without an adapter."""
        if self.r == 0:
            return None
        return self.scaling * (self.complex_A @ self.complex_B.conj().transpose(0, 1))

    def _base_weight(self) -> Tensor:
        return self.base_layer.weight

    @torch.no_grad()
    def merge(self) -> None:
        """Store W + s·A·Bᴴ in the real buffer ``merged_weight`` (idempotent; base untouched)."""
        if self.merged:
            return
        w = self._base_weight().detach()
        cw = torch.complex(w, torch.zeros_like(w))
        delta = self.delta_weight()
        if delta is not None:
            cw = cw + delta.to(cw.dtype)
        self.merged_weight = torch.view_as_real(cw).contiguous()  # (rows, cols, 2) real
        self.merged = True

    def unmerge(self) -> None:
        """Drop the merged buffer; the forward goes back to base + adapter (idempotent)."""
        self.merged_weight = None
        self.merged = False

    def _adapter_repr(self) -> str:
        return f"r={self.r}, alpha={self.alpha:g}, init={self.init!r}, merged={self.merged}"


class ComplexLoRALinear(_LoRABase):
    """y = (W + s·A·Bᴴ)·x + (b + b_c) around a frozen real ``nn.Linear`` (Tamburini 2024).

    Args:
        base_layer: the real ``nn.Linear`` to wrap (kept by reference and frozen).
        r: rank (0: no adapter: the frozen real map lifted to complex inputs).
        alpha: scale numerator, s = alpha / r (None: alpha = r, s = 1).
        dropout: dropout on the adapter input only (one mask for Re and Im).
        init: ``"zero_b"`` (B = 0, A ~ CN(0, 1/r)) or ``"zero_a"`` (A = 0,
            B ~ CN(0, 1/in)); either way A·Bᴴ = 0, so the layer equals its base at init.
        complex_bias: add a learnable complex bias b_c (init 0).

    Shapes:
        input (..., in) complex (a real floating input is lifted, Im = 0); output
        (..., out) complex.

    Parameters (real numbers): A and B 2·r·(in + out), b_c 2·out.
    """

    def __init__(
        self,
        base_layer: nn.Linear,
        r: int = 8,
        alpha: float | None = None,
        dropout: float = 0.0,
        init: str = "zero_b",
        complex_bias: bool = True,
    ) -> None:
        super().__init__()
        where = "ComplexLoRALinear"
        if not isinstance(base_layer, nn.Linear):
            raise ValueError(
                f"{where}: base_layer must be a torch.nn.Linear, got {type(base_layer).__name__}"
            )
        _check_common(r, alpha, dropout, init, where)
        self.base_layer = base_layer
        base_layer.requires_grad_(False)
        self.in_features, self.out_features = base_layer.in_features, base_layer.out_features
        self.dropout = float(dropout)
        ref = base_layer.weight
        self._make_factors(self.out_features, self.in_features, r, alpha, init, ref)
        if complex_bias:
            self.bias_c = nn.Parameter(
                torch.zeros(self.out_features, 2, device=ref.device, dtype=ref.dtype)
            )  # (out, 2)
        else:
            self.register_parameter("bias_c", None)
        self.reset_adapter()

    def forward(self, x: Tensor) -> Tensor:
        x = CF.lift_complex(x, "input", "ComplexLoRALinear")
        if x.shape[-1] != self.in_features:
            raise ValueError(
                f"ComplexLoRALinear: last dimension of the input is {x.shape[-1]}, "
                f"expected in_features={self.in_features}"
            )
        b = self.base_layer.bias
        rdt = x.real.dtype
        if self.merged:
            y = CF.complex_linear(x, self.merged_weight.to(rdt))  # one complex GEMM
            if b is not None:
                y = y + b.to(rdt)
            if self.bias_c is not None:
                y = y + torch.view_as_complex(self.bias_c).to(x.dtype)
            return y
        return to_complex(planar_lora_linear((self,), to_planar(x)))  # (..., out)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"{self._adapter_repr()}, complex_bias={self.bias_c is not None}"
        )


def check_indices(idx: Tensor) -> None:
    """Raise a ValueError unless ``idx`` holds int64 or int32 embedding indices."""
    if idx.dtype not in (torch.int64, torch.int32):
        raise ValueError(
            f"ComplexLoRAEmbedding: indices must be int64 or int32, got dtype {idx.dtype}"
        )


class ComplexLoRAEmbedding(_LoRABase):
    """Complex embedding E + s·A·Bᴴ around a frozen real ``nn.Embedding`` (Tamburini 2024).

    Row i of the table is E_i + s·A_i·Bᴴ: the real lookup plus the lookup of the complex
    low-rank part (A_i ∈ Cʳ, then a (r → dim) product with Bᴴ), never the full complex table
    (unless merged).

    Args:
        base_layer: the real ``nn.Embedding`` (kept by reference and frozen); its
            ``padding_idx`` also masks the gradient of A's padding row.
        r, alpha, init: as :class:`ComplexLoRALinear` (``zero_a`` draws B ~ CN(0, 1/dim)).

    Shapes:
        input integer (...); output complex (..., embedding_dim).

    Parameters (real numbers): 2·r·(num_embeddings + embedding_dim).
    """

    def __init__(
        self,
        base_layer: nn.Embedding,
        r: int = 8,
        alpha: float | None = None,
        init: str = "zero_b",
    ) -> None:
        super().__init__()
        where = "ComplexLoRAEmbedding"
        if not isinstance(base_layer, nn.Embedding):
            raise ValueError(
                f"{where}: base_layer must be a torch.nn.Embedding, got {type(base_layer).__name__}"
            )
        _check_common(r, alpha, 0.0, init, where)
        self.base_layer = base_layer
        base_layer.requires_grad_(False)
        self.num_embeddings = base_layer.num_embeddings
        self.embedding_dim = base_layer.embedding_dim
        self.padding_idx = base_layer.padding_idx
        self.register_parameter("bias_c", None)
        self._make_factors(
            self.num_embeddings, self.embedding_dim, r, alpha, init, base_layer.weight
        )
        self.reset_adapter()

    def forward(self, idx: Tensor) -> Tensor:
        if idx.dtype not in (torch.int64, torch.int32):
            raise ValueError(
                f"ComplexLoRAEmbedding: indices must be int64 or int32, got dtype {idx.dtype}"
            )
        if self.merged:
            return CF.complex_embedding(idx, self.merged_weight, self.padding_idx)
        e = self.base_layer(idx)  # (..., dim) real
        if self.r == 0:
            return CF.lift_complex(e, "embedding", "ComplexLoRAEmbedding")
        a = CF.complex_embedding(idx, self.lora_A, self.padding_idx)  # A_i: (..., r)
        delta = a @ self.complex_B.conj().transpose(0, 1)  # A_i·Bᴴ: (..., dim)
        return torch.complex(e, torch.zeros_like(e)) + self.scaling * delta

    def planar_forward(self, idx: Tensor) -> Tensor:
        """The forward as planar rows: real (..., 2, embedding_dim) (Re row, Im row)."""
        check_indices(idx)
        if self.merged:
            w = self.merged_weight
            e = F.embedding(idx, w.reshape(w.shape[0], -1), padding_idx=self.padding_idx)
            return e.unflatten(-1, (-1, 2)).transpose(-1, -2)
        e = self.base_layer(idx)  # (..., dim) real
        delta = None
        if self.r > 0:
            a, wmat = self.planar_lora_factors(idx, e.dtype)
            delta = (a @ wmat).unflatten(-1, (2, -1))
        return planar_add_real(delta, e)

    def planar_lora_factors(self, idx: Tensor, rdt: torch.dtype) -> tuple[Tensor, Tensor]:
        """(a, m) with a @ m the planar rows (..., 2·dim) of s·A_i·Bᴴ: a = A_i's (Re, Im)
        pairs (..., 2r), m (2r, 2·dim) (Re = Σ ar·br + ai·bi, Im = Σ ai·br - ar·bi)."""
        a = F.embedding(idx, self.lora_A.flatten(1), padding_idx=self.padding_idx)  # (..., 2r)
        b = self.lora_B.to(rdt) * self.scaling  # (dim, r, 2)
        br, bi = b[..., 0], b[..., 1]
        wre = torch.stack((br, bi), -1).flatten(1)  # (dim, 2r)
        wim = torch.stack((-bi, br), -1).flatten(1)
        return a.to(rdt), torch.cat((wre, wim), 0).t()

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, {self._adapter_repr()}"


def complex_lora_layers(model: nn.Module):
    """Yield (name, layer) for every complex LoRA layer inside ``model``."""
    for name, m in model.named_modules():
        if isinstance(m, (ComplexLoRALinear, ComplexLoRAEmbedding)):
            yield name, m


def merge_adapters(model: nn.Module) -> nn.Module:
    """:meth:`~ComplexLoRALinear.merge` every complex LoRA layer (idempotent); returns model."""
    for _, m in complex_lora_layers(model):
        m.merge()
    return model


def unmerge_adapters(model: nn.Module) -> nn.Module:
    """:meth:`~ComplexLoRALinear.unmerge` every complex LoRA layer; returns model."""
    for _, m in complex_lora_layers(model):
        m.unmerge()
    return model
