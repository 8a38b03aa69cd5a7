"""Three toy positional schemes, registered only where a test asks (:func:`registered_toys`).

One rotates every pair of q and k by the same angle per position, one adds a recency bias to
the scores, one is RoPE at scaled positions (the worked example of
docs/positional_schemes.md); :func:`literal_scores` writes their scores from the formulas.
The library's tests (tests/attention/test_schemes_toy.py) train and decode with them, and the
lab's head analysis is checked on them (tests/lab/evaluation/test_heads.py).
"""

from __future__ import annotations

import contextlib
import math

import torch

from complexformer.attention import (
    PositionalScheme,
    RotaryScheme,
    apply_rope,
    registered_scheme,
    rope_frequencies,
)
from complexformer.attention.schemes import PAIRS
from complexformer.models import ComplexFormerLM, GPTConfig

V = 29
ANGLE = 0.3  # radians per position
SLOPE = 0.25  # bias per position of distance


class SameAngleRotation(PositionalScheme):
    """Toy: pair j of q and k at position p rotated by p * ANGLE, for every j."""

    name = "toy_rotation"
    description = "toy: one rotation angle per position"
    rotates = True

    def rotate(self, attn, q, k, offset):
        omega = torch.full((q.shape[-1] // 2,), ANGLE, dtype=torch.float64)  # (J,)
        return apply_rope(q, offset, omega, PAIRS), apply_rope(k, offset, omega, PAIRS)


class RecencyBias(PositionalScheme):
    """Toy: score bias -SLOPE * (m - n) for query m and key n, the same for every head."""

    name = "toy_recency"
    description = "toy: linear recency bias"
    biases = True

    def score_bias(self, attn, t_q, t_k, offset):
        m = torch.arange(offset, offset + t_q, dtype=torch.float32)[:, None]
        n = torch.arange(t_k, dtype=torch.float32)[None, :]
        return (-SLOPE * (m - n)).expand(attn.n_head, t_q, t_k)  # (H, Tq, Tk)


class HalfSpeedRope(RotaryScheme):
    """Toy from docs/positional_schemes.md: RoPE with positions scaled by 1/2 (position
    interpolation); only the positions change, the cache and the analysis follow."""

    name = "toy_half_rope"
    description = "toy: RoPE at half the position"

    def positions(self, attn, offset, t):
        return torch.arange(offset, offset + t, dtype=torch.float64) * 0.5


TOYS = ("toy_rotation", "toy_recency", "toy_half_rope")


@contextlib.contextmanager
def registered_toys():
    """The three toys registered for the block, unregistered afterwards."""
    with (
        registered_scheme(SameAngleRotation()),
        registered_scheme(RecencyBias()),
        registered_scheme(HalfSpeedRope()),
    ):
        yield


def make(scheme: str, dtype=torch.float64, seed: int = 0) -> ComplexFormerLM:
    torch.manual_seed(seed)
    cfg = GPTConfig(
        vocab_size=V, n_layer=2, n_head=2, d_model=16, d_ff=32, max_seq_len=64, pos_scheme=scheme
    )
    return ComplexFormerLM(cfg).to(dtype).eval()


def literal_scores(scheme: str, q: torch.Tensor, k: torch.Tensor) -> dict[str, torch.Tensor]:
    """S, S_pos (semantic term removed), S_sem (positional term removed) from the formulas."""
    t, d = q.shape[-2], q.shape[-1]
    j = d // 2
    dist = (torch.arange(t)[:, None] - torch.arange(t)[None, :]).to(q.dtype)  # (T, T) m - n
    qk = q @ k.transpose(-1, -2) / math.sqrt(d)
    if scheme == "toy_recency":
        bias = (-SLOPE * dist).expand_as(qk)
        return {"full": qk + bias, "no_semantic": bias, "no_position": qk}
    # rotation by (m - n) * w_j: one angle for every pair, or RoPE's frequencies at p / 2
    w = torch.full((j,), ANGLE, dtype=q.dtype)
    if scheme == "toy_half_rope":
        w = 0.5 * rope_frequencies(d).to(q.dtype)
    lq = torch.hypot(q[..., :j], q[..., j:])  # pairs (x[j], x[j + J])
    lk = torch.hypot(k[..., :j], k[..., j:])
    tq = torch.atan2(q[..., j:], q[..., :j])
    tk = torch.atan2(k[..., j:], k[..., :j])
    mod = lq.unsqueeze(-2) * lk.unsqueeze(-3)  # (B, H, T, T, J)
    rel = dist[..., None] * w  # (T, T, J)
    full = (mod * torch.cos(tq.unsqueeze(-2) - tk.unsqueeze(-3) + rel)).sum(-1) / math.sqrt(d)
    no_sem = (mod * torch.cos(rel)).sum(-1) / math.sqrt(d)
    return {"full": full, "no_semantic": no_sem, "no_position": qk}
