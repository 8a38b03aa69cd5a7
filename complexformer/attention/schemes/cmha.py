"""CMHA's adaptive polar rotation as a positional scheme (Shao et al. 2025, eq. 1-8).

Every pair of a head's query and key is read as λ e^(iθ) and rotated to the phase
δ ⊙ θ + b + p ω (eq. 7, b on the query side only), so that the dot product of the rotated
query and key is the CMHA score of eq. 8; see :mod:`complexformer.attention.functional`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..polar import polar_angles, polar_components, polar_from_components, polar_rotate
from ..rotary import as_positions
from .base import PAIRS
from .rope import RotaryScheme

__all__ = ["PolarScheme"]

_ADAPT = ("head", "shared", "fixed")
_DELTA_INITS = ("paper", "rope")
_TARGETS = ("theta", "rotated")


class PolarScheme(RotaryScheme):
    """CMHA and its variants: adaptation δ, b per head, shared per layer, or frozen.

    Owns ``attn.omega`` (as :class:`RotaryScheme`) and the adaptation ``attn.adapt_delta``,
    ``attn.adapt_bias``: parameters of shape (H, J) for ``adapt="head"`` (CMHA) or (J,) for
    ``"shared"`` (EulerFormer-MHA (Shared), Tian et al. 2024), initialised δ ~ N(0, σ²),
    b = 0 (paper, Appendix A; ``delta_init="paper"``) or δ = 1 + N(0, σ²), b = 0
    (``delta_init="rope"``: RoPE at σ = 0); for ``"fixed"`` frozen (J,) buffers δ = 1, b = 0
    (RoPE's rotation through the CMHA code path). Its phases feed the phase contrastive loss.

    Args:
        name: the registered name.
        adapt: ``"head"``, ``"shared"`` or ``"fixed"``.
        description: one line for help texts.
    """

    has_phases = True

    def __init__(self, name: str, adapt: str, description: str = "") -> None:
        if adapt not in _ADAPT:
            raise ValueError(f"adapt must be one of {', '.join(_ADAPT)}, got {adapt!r}")
        super().__init__(name, description)
        self.adapt = adapt

    def init_attention(
        self,
        attn: nn.Module,
        *,
        n_head: int,
        head_dim: int,
        omega_schedule: str = "rope",
        rope_base: float = 10000.0,
        delta_init_std: float = 0.02,
        delta_init: str = "paper",
    ) -> None:
        super().init_attention(
            attn,
            n_head=n_head,
            head_dim=head_dim,
            omega_schedule=omega_schedule,
            rope_base=rope_base,
        )
        j = head_dim // 2
        shape = (n_head, j) if self.adapt == "head" else (j,)
        if self.adapt == "fixed":
            attn.register_buffer("adapt_delta", torch.ones(shape), persistent=False)
            attn.register_buffer("adapt_bias", torch.zeros(shape), persistent=False)
        else:
            if delta_init not in _DELTA_INITS:
                raise ValueError(
                    f"delta_init must be one of {', '.join(_DELTA_INITS)}, got {delta_init!r}"
                )
            delta = torch.randn(shape) * delta_init_std  # paper: δ ~ N(0, σ²)
            if delta_init == "rope":
                delta = delta + 1.0  # δ = 1 + N(0, σ²): RoPE's rotation at σ = 0
            attn.adapt_delta = nn.Parameter(delta)
            attn.adapt_bias = nn.Parameter(torch.zeros(shape))

    def rotate(self, attn: nn.Module, q: Tensor, k: Tensor, offset: int) -> tuple[Tensor, Tensor]:
        d, w, pos = attn.adapt_delta, attn.omega, self.positions(attn, offset, q.shape[-2])
        q = polar_rotate(q, d, attn.adapt_bias, pos, w, PAIRS)
        return q, polar_rotate(k, d, None, pos, w, PAIRS)

    def rotate_with_phases(
        self, attn: nn.Module, q: Tensor, k: Tensor, offset: int, target: str = "rotated"
    ) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor]]:
        """Rotation through the explicit polar form, so that autograd also runs through the
        (B, H, T, J) phases, which the phase contrastive loss uses.

        ``target="theta"`` returns the semantic phases θ of eq. 2 (atan2 of each pair, before
        δ, b and the position term: the same for a token wherever it stands); ``"rotated"``
        returns δ ⊙ θ + b + p ω (b on the query side only). The rotated q and k are the same
        either way.
        """
        if target not in _TARGETS:
            raise ValueError(f"target must be one of {', '.join(_TARGETS)}, got {target!r}")
        d, w, pos = attn.adapt_delta, attn.omega, self.positions(attn, offset, q.shape[-2])
        if target == "theta":
            lam_q, th_q = polar_angles(q, PAIRS)  # (B, H, T, J) each
            lam_k, th_k = polar_angles(k, PAIRS)
            pos_t = as_positions(pos, q.shape[-2], q.device, th_q.dtype)
            pw = pos_t.unsqueeze(-1) * w.to(th_q)  # (T, J)
            ph_q = th_q * d.to(th_q).unsqueeze(-2) + attn.adapt_bias.to(th_q).unsqueeze(-2) + pw
            ph_k = th_k * d.to(th_k).unsqueeze(-2) + pw  # (B, H, T, J)
            q = polar_from_components(lam_q, ph_q, q.dtype, PAIRS)
            k = polar_from_components(lam_k, ph_k, k.dtype, PAIRS)
            return q, k, (th_q, th_k)
        lam_q, ph_q = polar_components(q, d, attn.adapt_bias, pos, w, PAIRS)
        lam_k, ph_k = polar_components(k, d, None, pos, w, PAIRS)
        q = polar_from_components(lam_q, ph_q, q.dtype, PAIRS)
        k = polar_from_components(lam_k, ph_k, k.dtype, PAIRS)
        return q, k, (ph_q, ph_k)

    def adaptation(self, attn: nn.Module) -> tuple[Tensor, Tensor]:
        return attn.adapt_delta, attn.adapt_bias

    def score_variants(self, attn: nn.Module, q: Tensor, k: Tensor) -> dict[str, Tensor | None]:
        """S uses δ ⊙ AS + b + ΔP (eq. 8); S_pos uses δ = 0 (phase b + ΔP, moduli kept);
        S_sem uses ω = 0 (phase δ ⊙ AS + b)."""
        scale = 1.0 / math.sqrt(q.shape[-1])
        delta, bias, omega = attn.adapt_delta, attn.adapt_bias, attn.omega
        pos = self.positions(attn, 0, q.shape[-2])

        def polar(d: Tensor, w: Tensor) -> Tensor:
            qr = polar_rotate(q, d, bias, pos, w, PAIRS)
            kr = polar_rotate(k, d, None, pos, w, PAIRS)
            return (qr @ kr.transpose(-1, -2)) * scale

        return {
            "full": polar(delta, omega),
            "no_semantic": polar(torch.zeros_like(delta), omega),
            "no_position": polar(delta, torch.zeros_like(omega)),
        }

    def describe_adaptation(self, n_head: int, head_dim: int) -> str | None:
        j = head_dim // 2
        return {"head": f"{n_head} heads x J={j}", "shared": f"J={j} shared"}.get(self.adapt)
