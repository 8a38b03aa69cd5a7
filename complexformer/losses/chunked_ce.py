"""Linear head + cross-entropy over chunks of rows, without the full logits or their gradient.

The language model's loss is ``cross_entropy(h W^T, y)`` over N = B*T rows with a (V, C) head
W. Written plainly, the (N, V) logits, their log-softmax and, in backward, their gradient are
each materialised: 1.6 GB apiece in float32 at N = 8192, V = 50,257. Here the rows are taken
in chunks of ``chunk_rows``; forward keeps only each row's log-sum-exp, and backward recomputes
a chunk's logits to form its gradient

    dL/dz = (softmax(z) - onehot(y)) * valid / n_valid,    z = h W^T,

so dL/dh = (dL/dz) W and dL/dW = (dL/dz)^T h, summed over the chunks. The peak is one chunk of
logits (and its gradient) instead of the full (N, V) tensors, at the price of computing the
logits twice. Rows whose label is ``ignore_index`` add nothing; the loss is the mean over the
other rows (NaN when there are none, as ``F.cross_entropy``).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["CHUNK_ELEMENTS", "chunked_linear_cross_entropy", "default_chunk_rows"]

#: Elements of one chunk of logits (64 MiB in float32): rows per chunk = this // V.
CHUNK_ELEMENTS = 1 << 24


def default_chunk_rows(vocab_size: int) -> int:
    """Rows per chunk so that one chunk of logits has about :data:`CHUNK_ELEMENTS` elements."""
    return max(1, CHUNK_ELEMENTS // max(1, vocab_size))


def _chunk_logits(h: Tensor, weight: Tensor) -> Tensor:
    """(n, C) rows times the (V, C) head -> (n, V) logits in float32 (float64 for float64)."""
    z = h @ weight.t()
    return z if z.dtype == torch.float64 else z.float()


class _ChunkedLinearCE(torch.autograd.Function):
    """Mean cross-entropy of ``hidden @ weight.T`` against ``labels``; see the module."""

    @staticmethod
    def forward(ctx, hidden, weight, labels, ignore_index, chunk_rows):
        n = hidden.shape[0]
        valid = labels != ignore_index  # (N,)
        n_valid = valid.sum()
        safe = torch.where(valid, labels, torch.zeros_like(labels))  # (N,)
        acc = torch.float64 if hidden.dtype == torch.float64 else torch.float32
        lse = torch.empty(n, dtype=acc, device=hidden.device)  # (N,) log-sum-exp per row
        total = torch.zeros((), dtype=acc, device=hidden.device)
        for i in range(0, n, chunk_rows):
            z = _chunk_logits(hidden[i : i + chunk_rows], weight)  # (n, V)
            lse_c = torch.logsumexp(z, dim=-1)  # (n,)
            lse[i : i + chunk_rows] = lse_c
            target = z.gather(1, safe[i : i + chunk_rows, None]).squeeze(1)  # (n,)
            total += ((lse_c - target) * valid[i : i + chunk_rows]).sum()
            del z
        ctx.save_for_backward(hidden, weight, safe, valid, lse, n_valid)
        ctx.chunk_rows = chunk_rows
        return total / n_valid

    @staticmethod
    def backward(ctx, grad):
        hidden, weight, safe, valid, lse, n_valid = ctx.saved_tensors
        want_h, want_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        acc = lse.dtype
        scale = grad.to(acc) / n_valid  # dL/dz = scale * (softmax - onehot) on valid rows
        g_h = torch.empty_like(hidden) if want_h else None
        g_w = torch.zeros(weight.shape, dtype=acc, device=weight.device) if want_w else None
        rows = ctx.chunk_rows
        for i in range(0, hidden.shape[0], rows):
            h = hidden[i : i + rows]  # (n, C)
            z = _chunk_logits(h, weight)  # (n, V), recomputed
            gz = z.sub_(lse[i : i + rows, None]).exp_()  # softmax, in place
            idx = torch.arange(gz.shape[0], device=gz.device)
            gz[idx, safe[i : i + rows]] -= 1.0
            gz.mul_((valid[i : i + rows].to(acc) * scale)[:, None])  # (n, V)
            gz = gz.to(hidden.dtype)
            if want_h:
                g_h[i : i + rows] = gz @ weight.to(gz.dtype)  # (n, C)
            if want_w:
                g_w.addmm_(gz.t().to(acc), h.to(acc))  # (V, C)
            del z, gz
        if want_w:
            g_w = g_w.to(weight.dtype)
        return g_h, g_w, None, None, None


def chunked_linear_cross_entropy(
    hidden: Tensor,
    weight: Tensor,
    labels: Tensor,
    ignore_index: int = -100,
    chunk_rows: int | None = None,
) -> Tensor:
    """Mean ``F.cross_entropy(hidden @ weight.T, labels, ignore_index=...)``, chunked.

    Equal to the plain computation (to float rounding) in value and gradients, for a tied
    or untied head alike (the gradient reaches ``weight`` wherever it is shared), without
    the (N, V) logits or their gradient: see the module docstring.

    Args:
        hidden: (N, C) hidden states (the final LayerNorm's output, rows flattened).
        weight: (V, C) head weight (``lm_head.weight``).
        labels: (N,) target ids, ``ignore_index`` where no loss is taken.
        ignore_index: the label of the rows to skip.
        chunk_rows: rows per chunk (default: :func:`default_chunk_rows` of V).

    Returns:
        A scalar in float32 (float64 for float64 inputs).
    """
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.shape[1] != weight.shape[1]:
        raise ValueError(
            f"hidden must be (N, C) and weight (V, C); got {tuple(hidden.shape)} and "
            f"{tuple(weight.shape)}"
        )
    if labels.shape != hidden.shape[:1]:
        raise ValueError(f"labels must be (N,) = ({hidden.shape[0]},), got {tuple(labels.shape)}")
    rows = default_chunk_rows(weight.shape[0]) if chunk_rows is None else int(chunk_rows)
    if rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows!r}")
    return _ChunkedLinearCE.apply(hidden, weight, labels, ignore_index, rows)
