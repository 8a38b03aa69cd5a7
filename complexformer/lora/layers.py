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
from complexformer.nn._utils import lift_complex
from complexformer.nn.init import complex_normal_

from .config import INITS

__all__ = [
    "ComplexLoRAEmbedding",
    "ComplexLoRALinear",
    "complex_lora_layers",
    "fused_lora_linear",
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
        raise ValueError(f"{where}: unknown init {init!r}; allowed: "
                         f"{', '.join(map(repr, INITS))}")


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
        return (f"r={self.r}, alpha={self.alpha:g}, init={self.init!r}, "
                f"merged={self.merged}")


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
            raise ValueError(f"{where}: base_layer must be a torch.nn.Linear, got "
                             f"{type(base_layer).__name__}")
        _check_common(r, alpha, dropout, init, where)
        self.base_layer = base_layer
        base_layer.requires_grad_(False)
        self.in_features, self.out_features = base_layer.in_features, base_layer.out_features
        self.dropout = float(dropout)
        ref = base_layer.weight
        self._make_factors(self.out_features, self.in_features, r, alpha, init, ref)
        if complex_bias:
            self.bias_c = nn.Parameter(torch.zeros(self.out_features, 2, device=ref.device,
                                                   dtype=ref.dtype))  # (out, 2)
        else:
            self.register_parameter("bias_c", None)
        self.reset_adapter()

    def forward(self, x: Tensor) -> Tensor:
        x = lift_complex(x, "input", "ComplexLoRALinear")
        if x.shape[-1] != self.in_features:
            raise ValueError(f"ComplexLoRALinear: last dimension of the input is {x.shape[-1]}, "
                             f"expected in_features={self.in_features}")
        b = self.base_layer.bias
        rdt = x.real.dtype
        if self.merged:
            y = CF.complex_linear(x, self.merged_weight.to(rdt))  # one complex GEMM
            if b is not None:
                y = y + b.to(rdt)
            if self.bias_c is not None:
                y = y + torch.view_as_complex(self.bias_c).to(x.dtype)
            return y
        return self._unmerged(x, rdt)

    def _unmerged(self, x: Tensor, rdt: torch.dtype, planar: bool = False) -> Tensor:
        """(W + s·A·Bᴴ)·x + b + b_c as ONE real GEMM on planar (Re rows; Im rows).

        With t = Bᴴ·x (r ≪ in, a small complex GEMM) and the real block weight
        [W | s·Re A | s·Im A | b_re | b_im] (out, in + 2r + 2), the Re rows [Re x, Re t, -Im t,
        1, 0] and the Im rows [Im x, Im t, Re t, 0, 1] give Re y = W·Re x + Re(s·A·t) + b_re
        and Im y = W·Im x + Im(s·A·t) + b_im (b_re = b + Re b_c, b_im = Im b_c).
        """
        xv = torch.view_as_real(x).movedim(-1, 0)  # (2, ..., in): Re rows, Im rows (a view)
        cols = [xv]
        if self.r > 0:
            xd = CF.complex_dropout(x, self.dropout, self.training)
            t = xd @ self.complex_B.conj().to(x.dtype)  # Bᴴ·x: (..., r)
            tr, ti = t.real, t.imag
            cols += [torch.stack((tr, ti)), torch.stack((-ti, tr))]  # (2, ..., r) each
        yy = self._planar_gemm(cols, x.shape[:-1], rdt)  # (2, ..., out): ONE real GEMM
        return yy if planar else torch.complex(yy[0], yy[1])

    def planar_forward(self, xp: Tensor) -> Tensor:
        """The unmerged forward on planar real tensors: (2, ..., in) (Re rows; Im rows) ->
        (2, ..., out). No adapter dropout (the caller checks that it is inactive)."""
        rdt = xp.dtype
        cols = [xp]
        if self.r > 0:
            uv = (xp @ self.lora_B.to(rdt).flatten(1)).unflatten(-1, (self.r, 2))  # ONE GEMM
            u, v = uv[..., 0], uv[..., 1]  # (2, ..., r): [Re x; Im x]·Re B, ·Im B
            tr, ti = u[0] + v[1], u[1] - v[0]  # Bᴴ·x = x·conj(B)
            cols += [torch.stack((tr, ti)), torch.stack((-ti, tr))]
        return self._planar_gemm(cols, xp.shape[1:-1], rdt)

    def _planar_gemm(self, cols: list[Tensor], lead, rdt: torch.dtype) -> Tensor:
        w, b = self.base_layer.weight.to(rdt), self.base_layer.bias
        ww = self._block_weight(w, None if b is None else b.to(rdt), rdt)
        if ww.shape[1] > w.shape[1] + 2 * self.r:  # bias columns: Re rows (1, 0), Im (0, 1)
            e = torch.eye(2, dtype=rdt, device=w.device)
            cols.append(e.view((2,) + (1,) * len(lead) + (2,)).expand((2, *lead, 2)))
        xx = torch.cat(cols, -1) if len(cols) > 1 else cols[0]  # (2, ..., in + 2r + 2)
        return F.linear(xx, ww)  # (2, ..., out): ONE real GEMM

    def _block_weight(self, w: Tensor, b: Tensor | None, rdt: torch.dtype) -> Tensor:
        """[W | s·Re A | s·Im A | b_re | b_im] (out, in + 2r + 2), real (see :meth:`_unmerged`).

        Cached while no gradient is needed (inference), keyed on the storage and in-place
        version of every tensor it is built from, so any update rebuilds it.
        """
        params = (self.base_layer.weight, self.base_layer.bias, self.lora_A, self.bias_c)
        cacheable = not torch.is_grad_enabled() or not any(
            p is not None and p.requires_grad for p in params)
        key = (tuple(None if p is None else (p.data_ptr(), p._version, p.device) for p in params),
               rdt, self.scaling)
        cache = self.__dict__.get("_wcache")
        if cacheable and cache is not None and cache[0] == key:
            return cache[1]
        wcols = [w]
        if self.r > 0:
            a = self.lora_A.to(rdt) * self.scaling  # (out, r, 2)
            wcols += [a[..., 0], a[..., 1]]
        bre, bim = b, None
        if self.bias_c is not None:
            bc = self.bias_c.to(rdt)
            bre = bc[:, 0] if bre is None else bre + bc[:, 0]
            bim = bc[:, 1]
        if bre is not None or bim is not None:
            z = torch.zeros(w.shape[0], dtype=rdt, device=w.device)
            wcols.append(torch.stack((z if bre is None else bre, z if bim is None else bim), -1))
        ww = torch.cat(wcols, -1) if len(wcols) > 1 else w
        self.__dict__["_wcache"] = (key, ww) if cacheable else None
        return ww

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"{self._adapter_repr()}, complex_bias={self.bias_c is not None}")


def fused_lora_linear(layers, x: Tensor, cache: dict | None = None) -> Tensor | None:
    """The outputs of several unmerged :class:`ComplexLoRALinear` on the SAME input,
    concatenated on the last dim, from ONE real GEMM (e.g. a query/key/value projection).

    Exactly :meth:`ComplexLoRALinear._unmerged` with the block weights stacked on the output
    dim (each layer's adapter columns placed in its own slot of the shared Bᴴ·x columns, zeros
    elsewhere). Returns None (the caller then runs the layers one by one) when a layer is
    merged, the in_features differ, or adapter dropout is active (independent masks).
    ``cache`` (a dict owned by the caller) keeps the stacked weight while no gradient is
    needed, keyed like :meth:`ComplexLoRALinear._block_weight`.
    """
    layers = list(layers)
    if not layers or any(not isinstance(m, ComplexLoRALinear) or m.merged for m in layers):
        return None
    n_in = layers[0].in_features
    if any(m.in_features != n_in or (m.training and m.dropout > 0.0 and m.r > 0)
           for m in layers):
        return None
    x = lift_complex(x, "input", "ComplexLoRALinear")
    if x.shape[-1] != n_in:
        raise ValueError(f"ComplexLoRALinear: last dimension of the input is {x.shape[-1]}, "
                         f"expected in_features={n_in}")
    rdt = x.real.dtype
    lead = x.shape[:-1]
    ranks = [m.r for m in layers]
    big_r = sum(ranks)
    cols = [torch.view_as_real(x).movedim(-1, 0)]  # (2, ..., in)
    if big_r > 0:
        bh = torch.cat([m.complex_B.conj() for m in layers if m.r > 0], 1)  # (in, R)
        t = x @ bh.to(x.dtype)  # Bᴴ·x for every layer: (..., R)
        tr, ti = t.real, t.imag
        cols += [torch.stack((tr, ti)), torch.stack((-ti, tr))]
    e = torch.eye(2, dtype=rdt, device=x.device)
    cols.append(e.view((2,) + (1,) * len(lead) + (2,)).expand((2, *lead, 2)))
    params = [p for m in layers for p in (m.base_layer.weight, m.base_layer.bias, m.lora_A,
                                          m.bias_c)]
    cacheable = cache is not None and (not torch.is_grad_enabled() or not any(
        p is not None and p.requires_grad for p in params))
    key = (tuple(None if p is None else (p.data_ptr(), p._version, p.device) for p in params),
           rdt, tuple(m.scaling for m in layers))
    if cacheable and cache.get("key") == key:
        ww = cache["weight"]
    else:
        rows, off = [], 0
        for m in layers:
            w = m.base_layer.weight.to(rdt)
            wb = m._block_weight(w, None if m.base_layer.bias is None
                                 else m.base_layer.bias.to(rdt), rdt)
            m.__dict__.pop("_wcache", None)  # the stacked weight is cached instead
            out = w.shape[0]
            parts = [w]
            if big_r > 0:
                z = w.new_zeros(out, big_r)
                if m.r > 0:
                    re = torch.cat([z[:, :off], wb[:, n_in:n_in + m.r],
                                    z[:, off + m.r:]], 1)
                    im = torch.cat([z[:, :off], wb[:, n_in + m.r:n_in + 2 * m.r],
                                    z[:, off + m.r:]], 1)
                    parts += [re, im]
                else:
                    parts += [z, z]
            bias = wb[:, n_in + 2 * m.r:]
            parts.append(bias if bias.shape[1] == 2 else w.new_zeros(out, 2))
            rows.append(torch.cat(parts, 1))
            off += m.r
        ww = torch.cat(rows, 0)
        if cache is not None:
            cache.clear()
            if cacheable:
                cache.update(key=key, weight=ww)
    yy = F.linear(torch.cat(cols, -1), ww)  # (2, ..., sum out): ONE real GEMM
    return torch.complex(yy[0], yy[1])


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
            raise ValueError(f"{where}: base_layer must be a torch.nn.Embedding, got "
                             f"{type(base_layer).__name__}")
        _check_common(r, alpha, 0.0, init, where)
        self.base_layer = base_layer
        base_layer.requires_grad_(False)
        self.num_embeddings = base_layer.num_embeddings
        self.embedding_dim = base_layer.embedding_dim
        self.padding_idx = base_layer.padding_idx
        self.register_parameter("bias_c", None)
        self._make_factors(self.num_embeddings, self.embedding_dim, r, alpha, init,
                           base_layer.weight)
        self.reset_adapter()

    def forward(self, idx: Tensor) -> Tensor:
        if idx.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"ComplexLoRAEmbedding: indices must be int64 or int32, got dtype "
                             f"{idx.dtype}")
        if self.merged:
            return CF.complex_embedding(idx, self.merged_weight, self.padding_idx)
        e = self.base_layer(idx)  # (..., dim) real
        if self.r == 0:
            return lift_complex(e, "embedding", "ComplexLoRAEmbedding")
        a = CF.complex_embedding(idx, self.lora_A, self.padding_idx)  # A_i: (..., r)
        delta = a @ self.complex_B.conj().transpose(0, 1)  # A_i·Bᴴ: (..., dim)
        return torch.complex(e, torch.zeros_like(e)) + self.scaling * delta

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
