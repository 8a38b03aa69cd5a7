"""A minimal GPT written for the benchmarks: the yardstick of the language model's speed.

nanoGPT-style (Karpathy): token embedding, pre-LayerNorm blocks with a fused qkv projection,
rotate-half RoPE from precomputed cos/sin tables, ``F.scaled_dot_product_attention``, a GELU
MLP, a final LayerNorm and a (tied or untied) head; the loss is ``F.cross_entropy`` of all
(B*T, V) logits against labels shifted by one position (the last position ignored). It has the
shapes, the parameter names and the parameter count of a
:class:`~complexformer.models.ComplexFormerLM` with ``pos_scheme="rope"`` (pairs
(x[j], x[j + D/2]), the model's layout), so the weights of one load into the other and both
compute the same function; :func:`decode_greedy` is a minimal KV-cache decoding loop
(preallocated (B, H, T_max, D) buffers, one position per step, argmax).

It uses nothing from complexformer; only the benchmarks import it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["MinimalGPT", "decode_greedy"]


class _Attention(nn.Module):
    def __init__(self, d_model: int, n_head: int, bias: bool) -> None:
        super().__init__()
        self.n_head, self.head_dim = n_head, d_model // n_head
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, cache=None) -> Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_head, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = rope(q, cos, sin), rope(k, cos, sin)  # (B, H, T, D)
        if cache is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # one new position per step: it attends to every cached key
            kbuf, vbuf, pos = cache
            kbuf[:, :, pos : pos + t] = k
            vbuf[:, :, pos : pos + t] = v
            k, v = kbuf[:, :, : pos + t], vbuf[:, :, : pos + t]
            y = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class _MLP(nn.Module):
    def __init__(self, d_model: int, d_ff: int, bias: bool) -> None:
        super().__init__()
        self.fc = nn.Linear(d_model, d_ff, bias=bias)
        self.proj = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(F.gelu(self.fc(x)))


class _Block(nn.Module):
    def __init__(self, d_model: int, n_head: int, d_ff: int, bias: bool, eps: float) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model, eps=eps, bias=bias)
        self.attn = _Attention(d_model, n_head, bias)
        self.ln2 = nn.LayerNorm(d_model, eps=eps, bias=bias)
        self.mlp = _MLP(d_model, d_ff, bias)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, cache=None) -> Tensor:
        x = x + self.attn(self.ln1(x), cos, sin, cache)
        return x + self.mlp(self.ln2(x))


def rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate-half RoPE: x cos + rotate_half(x) sin, with (T, D) tables."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class MinimalGPT(nn.Module):
    """The minimal reference model; built from a ``GPTConfig`` (any object with its fields).

    Args:
        cfg: ``vocab_size``, ``n_layer``, ``n_head``, ``d_model``, ``d_ff``, ``max_seq_len``,
            ``rope_base``, ``bias``, ``layer_norm_eps``, ``tie_embeddings`` are read.
    """

    def __init__(self, cfg) -> None:
        super().__init__()
        d, h = cfg.d_model, cfg.n_head
        self.n_head, self.head_dim = h, d // h
        self.wte = nn.Embedding(cfg.vocab_size, d)
        self.blocks = nn.ModuleList(
            _Block(d, h, cfg.d_ff, cfg.bias, cfg.layer_norm_eps) for _ in range(cfg.n_layer)
        )
        self.ln_f = nn.LayerNorm(d, eps=cfg.layer_norm_eps, bias=cfg.bias)
        self.lm_head = nn.Linear(d, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight
        j = torch.arange(self.head_dim // 2, dtype=torch.float64)
        omega = cfg.rope_base ** (-2.0 * j / self.head_dim)  # (J,)
        ang = torch.arange(cfg.max_seq_len, dtype=torch.float64)[:, None] * omega  # (T, J)
        ang = torch.cat((ang, ang), dim=-1)  # (T, D): pair j and j + J share an angle
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)
        for p in self.parameters():  # any init; the benchmarks load or time it
            if p.dim() > 1:
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(1 + (p.shape[0] == d)))

    def forward(self, idx: Tensor, labels: Tensor | None = None, cache=None, pos: int = 0):
        """Logits (B, T, V), or the mean next-token loss when ``labels`` (B, T) are given."""
        t = idx.shape[1]
        cos, sin = self.cos[pos : pos + t], self.sin[pos : pos + t]
        x = self.wte(idx)
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, None if cache is None else (*cache[i], pos))
        logits = self.lm_head(self.ln_f(x))
        if labels is None:
            return logits
        shifted = F.pad(labels[:, 1:], (0, 1), value=-100)  # (B, T): last position ignored
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), shifted.view(-1))


@torch.no_grad()
def decode_greedy(model: MinimalGPT, prompt: Tensor, new_tokens: int) -> Tensor:
    """Greedy decoding with a preallocated KV cache: (B, T0) -> (B, T0 + new_tokens)."""
    b, t0 = prompt.shape
    total = t0 + new_tokens
    shape = (b, model.n_head, total, model.head_dim)
    dtype = model.wte.weight.dtype
    cache = [
        (torch.empty(shape, dtype=dtype), torch.empty(shape, dtype=dtype)) for _ in model.blocks
    ]
    out = torch.empty(b, total, dtype=prompt.dtype)
    out[:, :t0] = prompt
    logits = model(prompt, cache=cache, pos=0)
    for i in range(t0, total):
        nxt = logits[:, -1].argmax(-1)  # (B,)
        out[:, i] = nxt
        if i + 1 < total:
            logits = model(out[:, i : i + 1], cache=cache, pos=i)
    return out
