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
from complexformer.nn.init import complex_normal_

from .config import INITS
from .planar import planar_add_real, planar_dropout

__all__ = [
    "ComplexLoRAEmbedding",
    "ComplexLoRALinear",
    "check_indices",
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
        cacheable = _cacheable(params)
        key = _key(params, rdt, self.scaling)
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
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"{self._adapter_repr()}, complex_bias={self.bias_c is not None}"
        )


def fused_lora_linear(layers, x: Tensor, cache: dict | None = None) -> Tensor | None:
    """The outputs of several unmerged :class:`ComplexLoRALinear` on the SAME input,
    concatenated on the last dim, from ONE big real GEMM (e.g. a query/key/value projection).

    :func:`planar_lora_linear` on the planar rows of x (the base weights stacked on the
    output dim). Returns None (the caller then runs the layers one by one) when a layer is
    merged, the in_features differ, or adapter dropout is active (independent masks).
    ``cache`` (a dict owned by the caller) keeps the stacked weights while no gradient is
    needed, keyed on the storage and in-place version of every tensor they are built from.
    """
    layers = list(layers)
    if not layers or any(not isinstance(m, ComplexLoRALinear) or m.merged for m in layers):
        return None
    n_in = layers[0].in_features
    if any(m.in_features != n_in or _adapter_dropout(m) for m in layers):
        return None
    x = CF.lift_complex(x, "input", "ComplexLoRALinear")
    if x.shape[-1] != n_in:
        raise ValueError(
            f"ComplexLoRALinear: last dimension of the input is {x.shape[-1]}, "
            f"expected in_features={n_in}"
        )
    xp = torch.view_as_real(x).transpose(-1, -2)  # (..., 2, in): Re row, Im row (a view)
    y = planar_lora_linear(layers, xp, cache=cache)  # (..., 2, sum out)
    return torch.complex(y[..., 0, :], y[..., 1, :])


# --------------------------------------------------------------------------- planar forms
# "Planar rows": a complex (..., n) tensor held as a REAL (..., 2, n) one, the Re row then the
# Im row of each token. A real map W acts on both rows alike, so a (complex-input) linear is
# ONE real GEMM on the (2·tokens, n) matrix; CmplxBERT keeps its hidden states in this layout
# through the encoder (no complex <-> real conversions between the layers).


def _adapter_dropout(m) -> bool:
    return m.training and m.dropout > 0.0 and m.r > 0


def _key(params, *extra) -> tuple:
    return (
        tuple(None if p is None else (p.data_ptr(), p._version, p.device) for p in params),
        *extra,
    )


def _cacheable(params) -> bool:
    return not torch.is_grad_enabled() or not any(p is not None and p.requires_grad for p in params)


def _planar_bias(m, w: Tensor) -> Tensor:
    """[b + Re b_c | Im b_c] (out, 2) of the LoRA linear ``m``, in ``w``'s dtype and device
    (zeros where the base bias or the complex bias is absent)."""
    out = w.shape[0]
    b = m.base_layer.bias
    bre = w.new_zeros(out) if b is None else b.to(w.dtype)
    bim = w.new_zeros(out)
    if m.bias_c is not None:
        bc = m.bias_c.to(w.dtype)
        bre, bim = bre + bc[:, 0], bc[:, 1]
    return torch.stack((bre, bim), 1)


def _planar_weights(layers, rdt: torch.dtype, cache: dict | None) -> tuple[Tensor, Tensor]:
    """(W, Wa) of :func:`planar_lora_linear`: the stacked real base weights (out, in) and the
    adapter + bias block (out, 2R + 2) = [s·Re A | s·Im A | b + Re b_c | Im b_c], each layer's
    A in its own slot of the R = Σ r adapter columns (zeros elsewhere). Cached in ``cache``
    while no gradient is needed, keyed on the storage and in-place version of every tensor
    they are built from."""
    params = [
        p for m in layers for p in (m.base_layer.weight, m.base_layer.bias, m.lora_A, m.bias_c)
    ]
    cacheable = cache is not None and _cacheable(params)
    if cache is not None:
        cache = cache.setdefault("autograd", {})
    key = _key(params, rdt, tuple(m.scaling for m in layers))
    if cacheable and cache.get("key") == key:
        return cache["w"], cache["wa"]
    big_r = sum(m.r for m in layers)
    ws, was, off = [], [], 0
    for m in layers:
        w = m.base_layer.weight.to(rdt)
        out = w.shape[0]
        ws.append(w)
        parts = []
        if big_r > 0:
            if m.r > 0:
                a = m.lora_A.to(rdt) * m.scaling  # (out, r, 2)
                z1, z2 = w.new_zeros(out, off), w.new_zeros(out, big_r - off - m.r)
                parts += [torch.cat((z1, a[..., 0], z2), 1), torch.cat((z1, a[..., 1], z2), 1)]
            else:
                parts += [w.new_zeros(out, 2 * big_r)]
        parts.append(_planar_bias(m, w))
        was.append(torch.cat(parts, 1))
        off += m.r
    w = torch.cat(ws, 0) if len(ws) > 1 else ws[0]
    wa = torch.cat(was, 0) if len(was) > 1 else was[0]
    if cache is not None:
        cache.clear()
        if cacheable:
            cache.update(key=key, w=w, wa=wa)
    return w, wa


def planar_lora_cols(layers, x: Tensor) -> Tensor:
    """The adapter and bias columns of planar rows x (..., 2, in): (..., 2, 2R + 2).

    With t = Bᴴ·x (each layer's r columns, its own adapter-dropout mask), the Re row is
    [Re t | -Im t | 1 | 0] and the Im row [Im t | Re t | 0 | 1], so that against
    [s·Re A | s·Im A | b_re | b_im] they give Re(s·A·t) + b_re and Im(s·A·t) + b_im.
    Bᴴ·x of every layer (without dropout) is ONE small GEMM of the token rows [Re x | Im x]
    with [[Re B, -Im B], [Im B, Re B]].
    """
    lead, rdt = x.shape[:-2], x.dtype
    adapted = [m for m in layers if m.r > 0]
    e = torch.eye(2, dtype=rdt, device=x.device).expand(lead + (2, 2))
    if not adapted:
        return e
    if any(_adapter_dropout(m) for m in adapted):  # independent masks: one GEMM each
        groups = [([m], planar_dropout(x, m.dropout, True)) for m in adapted]
    else:
        groups = [(adapted, x)]
    trs, tis = [], []
    for ms, xx in groups:
        b = torch.cat([m.lora_B for m in ms], 1) if len(ms) > 1 else ms[0].lora_B
        br, bi = b[..., 0].to(rdt), b[..., 1].to(rdt)  # (in, R)
        bmat = torch.cat((torch.cat((br, -bi), 1), torch.cat((bi, br), 1)), 0)  # (2 in, 2R)
        t = xx.flatten(-2) @ bmat  # the tokens' [Re t | Im t] (x·conj B): (..., 2R)
        trs.append(t[..., : br.shape[1]])
        tis.append(t[..., br.shape[1] :])
    tr = torch.cat(trs, -1) if len(trs) > 1 else trs[0]
    ti = torch.cat(tis, -1) if len(tis) > 1 else tis[0]
    re = torch.cat((tr, -ti), -1)
    im = torch.cat((ti, tr), -1)
    return torch.cat((torch.stack((re, im), -2), e), -1)  # (..., 2, 2R + 2)


def planar_lora_linear(
    layers, x: Tensor, *, cache: dict | None = None, residual: Tensor | None = None, alloc=None
) -> Tensor:
    """Several :class:`ComplexLoRALinear` on the same planar-rows input x (..., 2, in),
    concatenated: (..., 2, Σ out) (+ ``residual`` (..., 2, Σ out)).

    Unmerged layers, (W + s·A·Bᴴ)·x + b + b_c: the real base weight W acts on the Re and Im
    rows alike, so the base part is ONE real GEMM of the (2·tokens, in) rows of x (never
    copied or concatenated), and the adapter and biases add a K = 2r + 2 product.

    * With autograd: the adapter columns (:func:`planar_lora_cols`) times
      [s·Re A | s·Im A | b_re | b_im] (plus the residual), into which the base GEMM
      accumulates (only these small columns are saved for the adapters' gradient).
    * Without (:func:`_planar_inference`): the base GEMM also yields Bᴴ·x in 2R extra
      output columns, then the adapter product accumulates in place.

    Merged layers (complex W) run their complex forward. ``cache``: a dict owned by the
    caller that keeps the stacked weights while no gradient is needed. ``alloc``: without
    autograd, a function (shape -> uninitialised tensor of x's dtype and device) that
    supplies the base GEMM's output buffer (a caller's reusable scratch space).
    """
    layers = list(layers)
    n_in = x.shape[-1]
    if any(m.merged for m in layers):
        z = torch.complex(x[..., 0, :], x[..., 1, :])
        y = torch.cat([torch.view_as_real(m(z)).transpose(-1, -2) for m in layers], -1)
        return y if residual is None else y + residual
    for m in layers:
        if m.in_features != n_in:
            raise ValueError(
                f"ComplexLoRALinear: last dimension of the input is {n_in}, "
                f"expected in_features={m.in_features}"
            )
    if not torch.is_grad_enabled() and not any(_adapter_dropout(m) for m in layers):
        y = _planar_inference(layers, x, cache, alloc)
        return y if residual is None else y.add_(residual)
    rdt = x.dtype
    w, wa = _planar_weights(layers, rdt, cache)
    cols = planar_lora_cols(layers, x)
    lead = x.shape[:-2]
    n_out = w.shape[0]
    x2 = x.reshape(-1, n_in)  # (2·tokens, in): a view of contiguous rows
    c2 = cols.reshape(-1, cols.shape[-1])
    if residual is not None:
        acc = torch.addmm(residual.reshape(-1, n_out), c2, wa.t())
    else:
        acc = c2 @ wa.t()
    if torch.is_grad_enabled():
        y = torch.addmm(acc, x2, w.t())
    else:  # in place: the GEMM accumulates into the small product (beta = 1)
        y = acc.addmm_(x2, w.t())
    return y.view(lead + (2, n_out))


def _ext_weights(layers, rdt: torch.dtype, cache: dict) -> tuple[Tensor, list]:
    """The inference weights of :func:`_planar_inference`: the extended base weight
    [W; (Re B)ᵀ; (Im B)ᵀ] (Σ out + 2R, in) and per layer (first output, last output, first
    adapter column, r, [s·Re A | s·Im A | b_re | b_im] (out, 2r + 2)); cached in ``cache``,
    keyed on the storage and in-place version of every tensor they are built from."""
    key = [rdt]
    for m in layers:  # (the module dicts directly: this runs on every call)
        bp, mp = m._modules["base_layer"]._parameters, m._parameters
        for p in (bp["weight"], bp["bias"], mp["lora_A"], mp["lora_B"], mp["bias_c"]):
            key.append(None if p is None else (p.data_ptr(), p._version, p.device))
        key.append(m.scaling)
    key = tuple(key)
    if cache.get("key") == key:
        return cache["w"], cache["blocks"]
    ws, brs, bis, blocks = [], [], [], []
    o0 = off = 0
    for m in layers:
        w = m.base_layer.weight.to(rdt)
        out = w.shape[0]
        ws.append(w)
        parts = []
        if m.r > 0:
            b = m.lora_B.to(rdt)
            brs.append(b[..., 0].t())
            bis.append(b[..., 1].t())
            a = m.lora_A.to(rdt) * m.scaling  # (out, r, 2)
            parts += [a[..., 0], a[..., 1]]
        parts.append(_planar_bias(m, w))
        blocks.append((o0, o0 + out, off, m.r, torch.cat(parts, 1).t().contiguous()))
        o0 += out
        off += m.r
    w = torch.cat(ws + brs + bis, 0).contiguous() if len(ws) + len(brs) > 1 else ws[0]
    cache.clear()
    cache.update(key=key, w=w, blocks=blocks)
    return w, blocks


def _planar_inference(layers, x: Tensor, cache: dict | None, alloc=None) -> Tensor:
    """:func:`planar_lora_linear` without autograd and adapter dropout, on planar rows.

    ONE GEMM of the rows of x with [W; (Re B)ᵀ; (Im B)ᵀ] gives the base outputs and, in 2R
    extra columns, x_c·Re B and x_c·Im B of both rows c, hence t = Bᴴ·x (Re t = Re x·Re B +
    Im x·Im B, Im t = Im x·Re B - Re x·Im B); then per layer a K = 2r + 2 GEMM of the
    adapter columns [Re t | -Im t | 1 | 0] (Re row), [Im t | Re t | 0 | 1] (Im row) with
    [s·Re A | s·Im A | b_re | b_im] accumulates the adapter and the biases in place. The
    result is a view (row stride Σ out + 2R) of that GEMM's output.
    """
    if cache is None:
        cache = layers[0].__dict__.setdefault("_ext_cache", {}) if len(layers) == 1 else {}
    cache = cache.setdefault("inference", {})
    n_in = x.shape[-1]
    w, blocks = _ext_weights(layers, x.dtype, cache)
    x2 = x.reshape(-1, n_in)  # (2·tokens, in)
    n_ext = w.shape[0]
    if alloc is None:
        ye = x2 @ w.t()  # (2·tokens, Σ out + 2R)
    else:
        ye = torch.mm(x2, w.t(), out=alloc((x2.shape[0], n_ext)))
    n_out = blocks[-1][1]
    big_r = (n_ext - n_out) // 2
    y2 = ye.narrow(1, 0, n_out)
    y3 = ye.view(-1, 2, n_ext)  # (tokens, 2, ·)
    n_tok = y3.shape[0]
    eye = cache.get("eye")
    if eye is None:
        eye = cache["eye"] = torch.eye(2, dtype=x.dtype, device=x.device)[:, None]  # (2,1,2)
    groups = [blocks] if len({blk[3] for blk in blocks}) == 1 else [[blk] for blk in blocks]
    for group in groups:  # the adapter columns of layers of equal rank, built together
        r, n = group[0][3], len(group)
        cols = ye.new_empty(n_tok, 2, n, 2 * r + 2)
        if r > 0:
            off = n_out + group[0][2]
            u0, u1 = y3.narrow(2, off, n * r).view(n_tok, 2, n, r).unbind(1)  # x_c·Re B
            v0, v1 = y3.narrow(2, off + big_r, n * r).view(n_tok, 2, n, r).unbind(1)  # ·Im B
            c0, c1 = cols.unbind(1)
            tr, ti = c0.narrow(2, 0, r), c1.narrow(2, 0, r)
            torch.add(u0, v1, out=tr)  # Re t
            torch.sub(u1, v0, out=ti)  # Im t
            torch.neg(ti, out=c0.narrow(2, r, r))
            c1.narrow(2, r, r).copy_(tr)
        cols.narrow(3, 2 * r, 2).copy_(eye)
        for j, (o0, o1, _, _, wa) in enumerate(group):
            y2.narrow(1, o0, o1 - o0).addmm_(cols.select(2, j).reshape(2 * n_tok, -1), wa)
    return y2.view(x.shape[:-1] + (n_out,))


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
